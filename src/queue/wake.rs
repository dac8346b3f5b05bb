//! Wake-ups for long polls and for waits on a job: one pattern
//! subscription per instance hears every queue's "no longer empty" and
//! "these jobs ended" messages, whichever instance caused them, and wakes
//! the claims waiting here on that queue and the reads waiting here on
//! those jobs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::store::keys::{self, Channel};

/// The claims of this instance that wait for jobs, by queue, and the reads
/// that wait for a job to end, by queue and id.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    queues: Mutex<HashMap<String, Weak<Notify>>>,
    jobs: Mutex<HashMap<(String, String), Weak<Notify>>>,
}

/// The signal under `key`, shared by everyone waiting on it; kept alive only
/// as long as someone holds it.
fn signal<K: Eq + std::hash::Hash>(map: &Mutex<HashMap<K, Weak<Notify>>>, key: K) -> Arc<Notify> {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(notify) = map.get(&key).and_then(Weak::upgrade) {
        return notify;
    }
    // Forgets signals nobody holds any more, now and then: amortized O(1).
    if map.len().is_power_of_two() {
        map.retain(|_, notify| notify.strong_count() > 0);
    }
    let notify = Arc::new(Notify::new());
    map.insert(key, Arc::downgrade(&notify));
    notify
}

impl Waiters {
    /// The signal of the claims waiting on `queue`.
    pub(crate) fn signal(&self, queue: &str) -> Arc<Notify> {
        signal(&self.queues, queue.to_owned())
    }

    /// The signal of the reads waiting for job `id` of `queue` to end.
    pub(crate) fn job_signal(&self, queue: &str, id: &str) -> Arc<Notify> {
        signal(&self.jobs, (queue.to_owned(), id.to_owned()))
    }

    fn wake(&self, queue: &str) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = queues.get(queue).and_then(Weak::upgrade) {
            notify.notify_waiters();
        }
    }

    /// Wakes the reads waiting on the jobs `ids` (space-separated) of
    /// `queue`.
    fn ended(&self, queue: &str, ids: &str) {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids.split(' ') {
            if let Some(notify) = jobs
                .get(&(queue.to_owned(), id.to_owned()))
                .and_then(Weak::upgrade)
            {
                notify.notify_waiters();
            }
        }
    }

    /// Wakes every waiter, so each looks again: used when the subscription
    /// (re)starts and messages may have been missed.
    fn wake_all(&self) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        for notify in queues
            .values()
            .chain(jobs.values())
            .filter_map(Weak::upgrade)
        {
            notify.notify_waiters();
        }
    }
}

/// Listens to every queue's channels until `shutdown`, reconnecting
/// with a short back-off whenever the subscription drops, to the next seed
/// each time. In a cluster every node hears every node's publications.
pub(crate) async fn listen(
    seeds: Vec<redis::Client>,
    prefix: String,
    waiters: Arc<Waiters>,
    shutdown: CancellationToken,
) {
    let patterns = keys::channel_patterns(&prefix);
    let mut backoff = Duration::from_millis(100);
    for client in seeds.iter().cycle() {
        if shutdown.is_cancelled() {
            return;
        }
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(&patterns).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let pubsub = tokio::select! {
            result = subscribed => result,
            () = shutdown.cancelled() => return,
        };
        match pubsub {
            Ok(mut pubsub) => {
                backoff = Duration::from_millis(100);
                waiters.wake_all();
                let mut messages = pubsub.on_message();
                loop {
                    let message = tokio::select! {
                        message = messages.next() => message,
                        () = shutdown.cancelled() => return,
                    };
                    let Some(message) = message else { break };
                    match keys::queue_of_channel(&prefix, message.get_channel_name()) {
                        Some((queue, Channel::Wake)) => waiters.wake(queue),
                        Some((queue, Channel::Done)) => {
                            if let Ok(ids) = message.get_payload::<String>() {
                                waiters.ended(queue, &ids);
                            }
                        }
                        None => {}
                    }
                }
                tracing::warn!("wake-up subscription lost; reconnecting");
            }
            Err(error) => {
                tracing::warn!(%error, "cannot subscribe to wake-ups; retrying");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
