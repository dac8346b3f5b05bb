//! Logs, and the metrics every part records.
//!
//! Logs: readable lines by default, JSON with `PRIOQ_LOG_FORMAT=json`,
//! filtered by `RUST_LOG` (default `info`); with an OTLP traces URL, the
//! spans of [`crate::otel`] go to its exporter beside them. Metrics: counters, gauges and
//! the HTTP histogram go through the `metrics` facade into one Prometheus
//! recorder per process, under the names here; `/metrics` renders them
//! with the queue gauges read from Redis at scrape time (`http::exposition`).

use std::io::IsTerminal;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogFormat;
use crate::otel;

/// Installs the logs and, with `traces_url`, the span exporter; on the
/// runtime, which runs the exporter.
pub fn init_logs(format: LogFormat, traces_url: Option<&str>) -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer();
    let logs = match format {
        LogFormat::Json => logs.json().with_current_span(true).boxed(),
        LogFormat::Text => logs.with_ansi(std::io::stdout().is_terminal()).boxed(),
    };
    let spans = traces_url
        .map(otel::layer)
        .transpose()?
        .map(|layer| layer.with_filter(filter_fn(|meta| meta.target() == otel::TARGET)));
    tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(spans)
        .init();
    Ok(())
}

pub const JOBS_ENQUEUED: &str = "prioq_jobs_enqueued_total";
pub const JOBS_CLAIMED: &str = "prioq_jobs_claimed_total";
pub const JOBS_ACKED: &str = "prioq_jobs_acked_total";
pub const JOBS_NACKED: &str = "prioq_jobs_nacked_total";
pub const LEASES_EXPIRED: &str = "prioq_leases_expired_total";
pub const JOBS_DEAD_LETTERED: &str = "prioq_jobs_dead_lettered_total";
/// Jobs whose expiry came before they were claimed (dead-lettered or
/// dropped).
pub const JOBS_EXPIRED: &str = "prioq_jobs_expired_total";
/// Enqueues answered with the job that holds their dedup key, nothing
/// added (mode `drop`).
pub const JOBS_DEDUPLICATED: &str = "prioq_jobs_deduplicated_total";
/// Waiting jobs that took a later enqueue's task, args, priority and
/// delay by their dedup key (mode `replace`).
pub const JOBS_REPLACED: &str = "prioq_jobs_replaced_total";
/// Cancels this instance took (of waiting jobs, ended at once, and of
/// processing jobs, told to stop), repeats included.
pub const JOBS_CANCELLED: &str = "prioq_jobs_cancelled_total";
/// Shards of a sharded queue that this instance's claims could not reach
/// (a read or a part failed) and went on without, each claim counting each
/// shard it skipped: their jobs may have been passed over.
pub const CLAIM_SHARDS_SKIPPED: &str = "prioq_claim_shards_skipped_total";
/// Requests of this instance queued for their queue's next batched call.
pub const REQUESTS_WAITING: &str = "prioq_requests_waiting";
/// Batched calls this instance sent to Redis.
pub const BATCHED_CALLS: &str = "prioq_batched_calls_total";
/// Claims of this instance that found nothing and wait (long polls).
pub const LONG_POLLS_WAITING: &str = "prioq_long_polls_waiting";
/// Reads of this instance waiting for a job to complete or die.
pub const JOB_WAITS: &str = "prioq_job_waits";
/// Push deliveries this instance ended, by queue and outcome
/// (`delivered`, `failed`, `stale`).
pub const PUSH_DELIVERIES: &str = "prioq_push_deliveries_total";
/// Push deliveries of this instance under way, by queue.
pub const PUSH_IN_FLIGHT: &str = "prioq_push_in_flight";
/// The per-queue counters, shown from the first scrape that knows the
/// queue, at zero until something happens.
pub(crate) const QUEUE_COUNTERS: [&str; 11] = [
    JOBS_ENQUEUED,
    JOBS_CLAIMED,
    JOBS_ACKED,
    JOBS_NACKED,
    LEASES_EXPIRED,
    JOBS_DEAD_LETTERED,
    JOBS_EXPIRED,
    JOBS_DEDUPLICATED,
    JOBS_REPLACED,
    JOBS_CANCELLED,
    CLAIM_SHARDS_SKIPPED,
];

/// The HTTP request-duration histogram.
pub const REQUEST_DURATION: &str = "prioq_http_request_duration_seconds";
/// Seconds; spans the quick script calls and the 20 s long polls.
const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 20.0,
];

/// The process's Prometheus recorder, installed on first use.
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), &DURATION_BUCKETS)
            .map(PrometheusBuilder::build_recorder)
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "a metrics recorder was already installed; prioq's metrics are not recorded"
            );
        }
        handle
    })
}
