//! The counters of this instance per queue, shown on `/metrics`.

use metrics::Counter;

use super::exchange::{AckOutcome, Claimed};
use crate::telemetry;

/// Per-queue counters of this instance.
#[derive(Debug)]
pub(crate) struct QueueCounters {
    pub(crate) enqueued: Counter,
    pub(crate) claimed: Counter,
    pub(crate) acked: Counter,
    pub(crate) nacked: Counter,
    pub(crate) leases_expired: Counter,
    pub(crate) dead_lettered: Counter,
}

impl QueueCounters {
    pub(crate) fn new(queue: &str) -> Self {
        let counter = |name: &'static str| metrics::counter!(name, "queue" => queue.to_owned());
        Self {
            enqueued: counter(telemetry::JOBS_ENQUEUED),
            claimed: counter(telemetry::JOBS_CLAIMED),
            acked: counter(telemetry::JOBS_ACKED),
            nacked: counter(telemetry::JOBS_NACKED),
            leases_expired: counter(telemetry::LEASES_EXPIRED),
            dead_lettered: counter(telemetry::JOBS_DEAD_LETTERED),
        }
    }

    /// Counts what a claim did: the jobs it leased and the acks it applied.
    pub(crate) fn count_claim(&self, claimed: &Claimed) {
        self.claimed.increment(claimed.jobs.len() as u64);
        let acked = claimed.acked.iter().filter(|o| **o == AckOutcome::Acked);
        self.acked.increment(acked.count() as u64);
    }
}
