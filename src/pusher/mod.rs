//! The pusher every instance runs beside the sweeper: for each queue with
//! a push target, it claims the queue's jobs and POSTs each to the
//! target's URL, under the lease rules of a pulling worker. It takes one
//! of the target's slots (`queue::push`) before it claims a job, so the
//! target's concurrency holds across every instance; extends the lease
//! while the request runs; acks on a 2xx answer (its JSON body the job's
//! result), nacks with the answer's `Retry-After` on 429 and 503 and
//! with the error on any other failure; and records each delivery's end
//! in the target's health. A delivery whose lease ran out first is stale:
//! the job was taken back and is delivered again, with a larger fence.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::queue::{Broker, ClaimOptions, Job, PushEnd, PushTarget};

mod delivery;
mod wire;

/// How often a target's settings are read again (a change made through
/// another instance is picked up then).
const TARGET_REFRESH: Duration = Duration::from_secs(5);
/// How long a claim for a target waits for a job.
const CLAIM_WAIT: Duration = Duration::from_secs(1);
/// How long a slot outlives its delivery's lease: kept with the lease, a
/// slot of an instance that died lapses this long after its lease.
const SLOT_GRACE_MS: u64 = 1_000;
/// How long a target with no free slot waits before it asks again.
const SLOT_RETRY: Duration = Duration::from_millis(200);
/// How long a target whose calls fail waits before it tries again.
const FAILURE_PAUSE: Duration = Duration::from_secs(1);

/// What every delivery of this instance shares.
#[derive(Debug)]
struct Pusher {
    broker: Arc<Broker>,
    http: reqwest::Client,
    /// This instance's name in slots and as the worker of its leases.
    instance: String,
    takes: AtomicU64,
}

/// Delivers the jobs of every queue with a push target until `shutdown`:
/// the queues the broker knows to have one (set or deleted through this
/// instance, or seen by its sweeper in each queue's home; it costs Redis
/// nothing while no queue has one). Deliveries under way at shutdown get
/// `grace` to end; those that do not are dropped, and their leases run
/// out.
pub async fn run(broker: Arc<Broker>, grace: Duration, shutdown: CancellationToken) {
    let http = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(http) => http,
        Err(error) => {
            tracing::error!(%error, "cannot build the push client; push delivery is off");
            return;
        }
    };
    let changed = broker.push_changed();
    let pusher = Arc::new(Pusher {
        broker,
        http,
        instance: format!("push-{}", crate::queue::store::record::new_token()),
        takes: AtomicU64::new(0),
    });
    let mut serving: HashMap<String, CancellationToken> = HashMap::new();
    let mut tasks = JoinSet::new();
    loop {
        let queues = pusher.broker.push_queues();
        serving.retain(|queue, stop| {
            let keep = queues.contains(queue) && !stop.is_cancelled();
            if !keep {
                stop.cancel();
            }
            keep
        });
        for queue in queues {
            if serving.contains_key(&queue) {
                continue;
            }
            let stop = shutdown.child_token();
            serving.insert(queue.clone(), stop.clone());
            let pusher = Arc::clone(&pusher);
            tasks.spawn(async move { pusher.serve(queue, grace, stop).await });
        }
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            () = changed.notified() => {}
            Some(_) = tasks.join_next() => {}
            () = shutdown.cancelled() => break,
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// The outcome of one delivery, before it is recorded.
struct Delivery {
    end: PushEnd,
    /// The outcome label of the deliveries counter.
    label: &'static str,
}

impl Pusher {
    /// Delivers one queue's jobs while it has a target and until `stop`;
    /// reads the target again every `TARGET_REFRESH`. Once the target is
    /// gone, the broker hears of it.
    async fn serve(self: Arc<Self>, queue: String, grace: Duration, stop: CancellationToken) {
        let mut deliveries = JoinSet::new();
        let (mut settings, mut read_at) = (None::<PushTarget>, None::<Instant>);
        let mut failing = false;
        while !stop.is_cancelled() {
            while deliveries.try_join_next().is_some() {}
            if read_at.is_none_or(|at| at.elapsed() >= TARGET_REFRESH) {
                match self.broker.push(&queue).await {
                    Ok(Some(state)) => settings = Some(state.target),
                    Ok(None) => break,
                    // Redis away: the claims below fail too, and wait.
                    Err(_) => {}
                }
                read_at = Some(Instant::now());
            }
            let Some(target) = settings.clone() else {
                tokio::select! {
                    () = tokio::time::sleep(FAILURE_PAUSE) => {}
                    () = stop.cancelled() => {}
                }
                read_at = None;
                continue;
            };
            let running = u32::try_from(deliveries.len()).unwrap_or(u32::MAX);
            let free = target.concurrency.saturating_sub(running);
            let pause = match self.take_and_claim(&queue, &target, free, &stop).await {
                Ok(Some(jobs)) => {
                    failing = false;
                    let pause = jobs.is_empty().then_some(SLOT_RETRY);
                    for (job, slot) in jobs {
                        let pusher = Arc::clone(&self);
                        let (queue, target) = (queue.clone(), target.clone());
                        deliveries.spawn(async move {
                            pusher.deliver(&queue, &target, job, &slot).await;
                        });
                    }
                    pause
                }
                Ok(None) => break,
                Err(error) => {
                    if !failing {
                        failing = true;
                        tracing::warn!(
                            queue,
                            error = format!("{:#}", anyhow::Error::from(error)),
                            "cannot claim jobs to push; retrying"
                        );
                    }
                    Some(FAILURE_PAUSE)
                }
            };
            let Some(pause) = pause else { continue };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                Some(_) = deliveries.join_next() => {}
                () = stop.cancelled() => {}
            }
        }
        if !stop.is_cancelled() {
            // The target is gone.
            self.broker.note_push_target(&queue, false);
        }
        drain(deliveries, grace).await;
    }

    /// Takes up to `free` slots and claims a job for each; frees the slots
    /// no job came for. `None` when the queue has no target any more; an
    /// empty list when no slot was free or no job came.
    async fn take_and_claim(
        &self,
        queue: &str,
        target: &PushTarget,
        free: u32,
        shutdown: &CancellationToken,
    ) -> crate::queue::Result<Option<Vec<(Job, String)>>> {
        if free == 0 {
            return Ok(Some(Vec::new()));
        }
        let holder = format!(
            "{}:{}",
            self.instance,
            self.takes.fetch_add(1, Ordering::Relaxed)
        );
        let hold_ms = CLAIM_WAIT.as_millis() as u64 + target.lease_ms + SLOT_GRACE_MS;
        let Some(mut slots) = (self.broker)
            .take_push_slots(queue, free, &holder, hold_ms)
            .await?
        else {
            return Ok(None);
        };
        if slots.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let options = ClaimOptions {
            worker: Some(self.instance.clone()),
            lease_ms: target.lease_ms,
            max_jobs: u32::try_from(slots.len()).unwrap_or(u32::MAX),
            request_id: None,
            wait: CLAIM_WAIT,
            acks: Vec::new(),
        };
        let jobs = match self.broker.claim(queue, options, shutdown).await {
            Ok(claimed) => claimed.jobs,
            Err(error) => {
                self.free_slots(queue, &slots).await;
                return Err(error);
            }
        };
        let unused = slots.split_off(jobs.len().min(slots.len()));
        self.free_slots(queue, &unused).await;
        Ok(Some(jobs.into_iter().zip(slots).collect()))
    }

    async fn free_slots(&self, queue: &str, slots: &[String]) {
        for slot in slots {
            // A slot not freed lapses by itself.
            let _ = self
                .broker
                .free_push_slot(queue, slot, &PushEnd::Unused)
                .await;
        }
    }
}

/// Lets the deliveries under way end within `grace`; drops the rest.
async fn drain(mut deliveries: JoinSet<()>, grace: Duration) {
    let ended = async { while deliveries.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, ended).await.is_err() {
        deliveries.abort_all();
    }
}
