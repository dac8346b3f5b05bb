//! The job operations, one module each by what they do to a job: `enqueue`;
//! `claim` (the long poll); `lease` (ack, extend, nack: what the worker
//! holding a lease does); `read` (a job's view, and waiting for its end);
//! `end` (delete, cancel, requeue). Each goes to the shard its job lives
//! in (see `shards`); enqueues, claims and acks go through the shard's
//! lane (see `exchange`).

pub mod claim;
pub mod end;
pub mod enqueue;
pub mod lease;
pub mod read;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::queue::broker::Broker;
use crate::queue::job::{Job, JobState};
use crate::queue::shards::QueueShards;

/// How long a waiting claim or read sleeps at most before it looks again
/// on its own, in case a wake-up was lost with a dropped subscription.
const RECHECK_INTERVAL: Duration = Duration::from_secs(5);

/// After a call that may have ended `job`: when it ended with dependants
/// left to tell (those elsewhere; the call told those in its own slot),
/// its shard's outbox is sent now rather than at the next sweep.
fn tell_at_once(shards: &QueueShards, job: &Job) {
    let ended = matches!(job.state, JobState::Dead | JobState::Cancelled);
    if ended && !job.dependants.is_empty() {
        shards.of(&job.id).courier.deliver();
    }
}

/// A wait (a claim that found nothing, a read waiting for a job to end),
/// counted in its gauge and in the instance's waiters while it lasts.
struct Waiting {
    gauge: &'static str,
    waiters: Arc<AtomicU64>,
}

impl Waiting {
    /// `None` when the instance has as many waiters as it keeps.
    fn start(broker: &Broker, gauge: &'static str) -> Option<Self> {
        let waiters = Arc::clone(&broker.waiting);
        let max = broker.config.max_waiters;
        waiters
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        metrics::gauge!(gauge).increment(1);
        Some(Self { gauge, waiters })
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!(self.gauge).decrement(1);
    }
}
