//! Wake-ups for long polls: one pattern subscription per instance hears
//! every queue's "no longer empty" message, whichever instance caused it,
//! and wakes the claims waiting here on that queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::keys;

/// The claims of this instance that wait for jobs, by queue.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    queues: Mutex<HashMap<String, Weak<Notify>>>,
}

impl Waiters {
    /// The signal for `queue`, shared by everyone waiting on it; kept alive
    /// only as long as someone holds it.
    pub(crate) fn signal(&self, queue: &str) -> Arc<Notify> {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = queues.get(queue).and_then(Weak::upgrade) {
            return notify;
        }
        queues.retain(|_, notify| notify.strong_count() > 0);
        let notify = Arc::new(Notify::new());
        queues.insert(queue.to_owned(), Arc::downgrade(&notify));
        notify
    }

    fn wake(&self, queue: &str) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = queues.get(queue).and_then(Weak::upgrade) {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter, so each checks its queue again: used when the
    /// subscription (re)starts and messages may have been missed.
    fn wake_all(&self) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        for notify in queues.values().filter_map(Weak::upgrade) {
            notify.notify_waiters();
        }
    }
}

/// Listens to every queue's wake-up channel until `shutdown`, reconnecting
/// with a short back-off whenever the subscription drops, to the next seed
/// each time. In a cluster every node hears every node's publications.
pub(crate) async fn listen(
    seeds: Vec<redis::Client>,
    prefix: String,
    waiters: Arc<Waiters>,
    shutdown: CancellationToken,
) {
    let pattern = keys::wake_pattern(&prefix);
    let mut backoff = Duration::from_millis(100);
    for client in seeds.iter().cycle() {
        if shutdown.is_cancelled() {
            return;
        }
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(&pattern).await?;
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
                    if let Some(queue) =
                        keys::queue_of_wake_channel(&prefix, message.get_channel_name())
                    {
                        waiters.wake(queue);
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
