//! The metrics of this instance per queue, shown on `/metrics`. Each is
//! made the first time it is used, so a queue that is only read (or that
//! does not exist) creates no series.

use std::sync::OnceLock;

use metrics::{Counter, Gauge};

use crate::telemetry;

/// One metric of one queue, made when first used.
#[derive(Debug)]
pub(crate) struct QueueMetric<M> {
    name: &'static str,
    queue: String,
    made: OnceLock<M>,
}

impl<M> QueueMetric<M> {
    pub(crate) fn new(name: &'static str, queue: &str) -> Self {
        Self {
            name,
            queue: queue.to_owned(),
            made: OnceLock::new(),
        }
    }
}

impl QueueMetric<Counter> {
    pub(crate) fn increment(&self, n: u64) {
        self.made
            .get_or_init(|| metrics::counter!(self.name, "queue" => self.queue.clone()))
            .increment(n);
    }
}

impl QueueMetric<Gauge> {
    fn gauge(&self) -> &Gauge {
        self.made
            .get_or_init(|| metrics::gauge!(self.name, "queue" => self.queue.clone()))
    }

    pub(crate) fn increment(&self, n: f64) {
        self.gauge().increment(n);
    }

    pub(crate) fn decrement(&self, n: f64) {
        self.gauge().decrement(n);
    }
}

/// Per-queue counters of this instance.
#[derive(Debug)]
pub(crate) struct QueueCounters {
    pub(crate) enqueued: QueueMetric<Counter>,
    pub(crate) claimed: QueueMetric<Counter>,
    pub(crate) acked: QueueMetric<Counter>,
    pub(crate) nacked: QueueMetric<Counter>,
    pub(crate) leases_expired: QueueMetric<Counter>,
    pub(crate) dead_lettered: QueueMetric<Counter>,
    pub(crate) expired: QueueMetric<Counter>,
    pub(crate) deduplicated: QueueMetric<Counter>,
    pub(crate) replaced: QueueMetric<Counter>,
    pub(crate) cancelled: QueueMetric<Counter>,
    pub(crate) shards_skipped: QueueMetric<Counter>,
}

impl QueueCounters {
    pub(crate) fn new(queue: &str) -> Self {
        Self {
            enqueued: QueueMetric::new(telemetry::JOBS_ENQUEUED, queue),
            claimed: QueueMetric::new(telemetry::JOBS_CLAIMED, queue),
            acked: QueueMetric::new(telemetry::JOBS_ACKED, queue),
            nacked: QueueMetric::new(telemetry::JOBS_NACKED, queue),
            leases_expired: QueueMetric::new(telemetry::LEASES_EXPIRED, queue),
            dead_lettered: QueueMetric::new(telemetry::JOBS_DEAD_LETTERED, queue),
            expired: QueueMetric::new(telemetry::JOBS_EXPIRED, queue),
            deduplicated: QueueMetric::new(telemetry::JOBS_DEDUPLICATED, queue),
            replaced: QueueMetric::new(telemetry::JOBS_REPLACED, queue),
            cancelled: QueueMetric::new(telemetry::JOBS_CANCELLED, queue),
            shards_skipped: QueueMetric::new(telemetry::CLAIM_SHARDS_SKIPPED, queue),
        }
    }
}
