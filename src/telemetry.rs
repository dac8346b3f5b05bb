//! Logs and metrics.
//!
//! Logs: readable lines by default, JSON with `PRIOQ_LOG_FORMAT=json`,
//! filtered by `RUST_LOG` (default `info`). Metrics: counters and the HTTP
//! histogram go through the `metrics` facade into one Prometheus recorder
//! per process; queue depths are read from Redis at scrape time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use crate::queue::{GroupStats, QueueStats};

pub fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().with_current_span(true).init(),
        LogFormat::Text => builder.with_ansi(std::io::stdout().is_terminal()).init(),
    }
}

pub const JOBS_ENQUEUED: &str = "prioq_jobs_enqueued_total";
pub const JOBS_CLAIMED: &str = "prioq_jobs_claimed_total";
pub const JOBS_ACKED: &str = "prioq_jobs_acked_total";
pub const JOBS_NACKED: &str = "prioq_jobs_nacked_total";
pub const LEASES_EXPIRED: &str = "prioq_leases_expired_total";
pub const JOBS_DEAD_LETTERED: &str = "prioq_jobs_dead_lettered_total";
/// Requests of this instance queued for their queue's next batched call.
pub const REQUESTS_WAITING: &str = "prioq_requests_waiting";
/// Batched calls this instance sent to Redis.
pub const BATCHED_CALLS: &str = "prioq_batched_calls_total";
/// Claims of this instance that found nothing and wait (long polls).
pub const LONG_POLLS_WAITING: &str = "prioq_long_polls_waiting";
/// Reads of this instance waiting for a job to complete or die.
pub const JOB_WAITS: &str = "prioq_job_waits";
/// The per-queue counters, shown from the first scrape that knows the
/// queue, at zero until something happens.
const QUEUE_COUNTERS: [&str; 6] = [
    JOBS_ENQUEUED,
    JOBS_CLAIMED,
    JOBS_ACKED,
    JOBS_NACKED,
    LEASES_EXPIRED,
    JOBS_DEAD_LETTERED,
];

/// Seconds; spans the quick script calls and the 20 s long polls.
const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 20.0,
];

/// The process's Prometheus recorder, installed on first use.
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("prioq_http_request_duration_seconds".into()),
                &DURATION_BUCKETS,
            )
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

/// The request-duration histogram of a route and status, looked up once
/// per thread rather than on every request.
pub fn request_duration(route: &str, status: u16) -> metrics::Histogram {
    thread_local! {
        static HISTOGRAMS: RefCell<HashMap<String, HashMap<u16, metrics::Histogram>>> =
            RefCell::default();
    }
    HISTOGRAMS.with_borrow_mut(|routes| {
        if let Some(histogram) = routes
            .get(route)
            .and_then(|by_status| by_status.get(&status))
        {
            return histogram.clone();
        }
        let histogram = metrics::histogram!(
            "prioq_http_request_duration_seconds",
            "route" => route.to_owned(),
            "status" => status.to_string(),
        );
        routes
            .entry(route.to_owned())
            .or_default()
            .insert(status, histogram.clone());
        histogram
    })
}

/// A per-queue gauge: name, help, and how to read it from the stats.
type QueueGauge = (&'static str, &'static str, fn(&QueueStats) -> u64);

const QUEUE_GAUGES: [QueueGauge; 6] = [
    ("prioq_jobs_processing", "Jobs leased to a worker.", |s| {
        s.processing
    }),
    (
        "prioq_jobs_scheduled",
        "Jobs delayed until their run_at.",
        |s| s.scheduled,
    ),
    (
        "prioq_expired_leases",
        "Leases past their deadline, not yet taken back.",
        |s| s.expired_leases,
    ),
    ("prioq_jobs_dead", "Jobs in the dead-letter queue.", |s| {
        s.dead
    }),
    ("prioq_queue_paused", "1 while the queue is paused.", |s| {
        u64::from(s.paused)
    }),
    (
        "prioq_jobs_completed",
        "Jobs acked and kept until their retention ends.",
        |s| s.completed,
    ),
];

/// Groups of a queue with a gauge of their own; the others are left out,
/// so the labels stay few whatever the number of groups.
pub const GROUPS_SHOWN: u32 = 20;

/// A queue's figures for the exposition: its stats and its deepest groups.
#[derive(Debug)]
pub struct QueueFigures {
    pub queue: String,
    pub stats: QueueStats,
    pub groups: Vec<GroupStats>,
}

/// The exposition text: the recorded metrics, then the queue gauges.
pub fn render_metrics(figures: &[QueueFigures]) -> String {
    let queues: Vec<(&String, &QueueStats)> =
        figures.iter().map(|f| (&f.queue, &f.stats)).collect();
    for (queue, _) in &queues {
        for name in QUEUE_COUNTERS {
            metrics::counter!(name, "queue" => (*queue).clone()).increment(0);
        }
    }
    metrics::gauge!(LONG_POLLS_WAITING).increment(0.0);
    metrics::gauge!(JOB_WAITS).increment(0.0);
    let mut out = metrics_handle().render();
    let classes = || {
        queues
            .iter()
            .flat_map(|(queue, stats)| stats.classes.iter().map(move |class| (queue, class)))
    };
    gauge_family(
        &mut out,
        "prioq_jobs_pending",
        "Claimable jobs, by priority.",
        classes().map(|(queue, class)| {
            (
                format!("queue=\"{queue}\",priority=\"{}\"", class.priority),
                class.pending as f64,
            )
        }),
    );
    gauge_family(
        &mut out,
        "prioq_oldest_job_age_seconds",
        "How long the oldest claimable job of each priority has waited.",
        classes().map(|(queue, class)| {
            (
                format!("queue=\"{queue}\",priority=\"{}\"", class.priority),
                class.oldest_age_ms as f64 / 1000.0,
            )
        }),
    );
    for (name, help, value) in QUEUE_GAUGES {
        gauge_family(
            &mut out,
            name,
            help,
            queues
                .iter()
                .map(|(queue, stats)| (format!("queue=\"{queue}\""), value(stats) as f64)),
        );
    }
    gauge_family(
        &mut out,
        "prioq_jobs_group_pending",
        "Pending jobs of a queue's deepest named groups (at most 20 a queue).",
        figures.iter().flat_map(|f| {
            f.groups.iter().map(move |group| {
                (
                    format!("queue=\"{}\",group=\"{}\"", f.queue, group.group),
                    group.pending as f64,
                )
            })
        }),
    );
    out
}

/// Writes one gauge family in the text format: HELP, TYPE, then a sample
/// per label set.
fn gauge_family(
    out: &mut String,
    name: &str,
    help: &str,
    samples: impl Iterator<Item = (String, f64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}
