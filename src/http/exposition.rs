//! `/metrics`: what the instance recorded, then the queue gauges read
//! from Redis at scrape time; and the request-duration histogram the
//! request middleware records into.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::queue::{GroupStats, QueueStats};
use crate::telemetry::{
    JOB_WAITS, LONG_POLLS_WAITING, QUEUE_COUNTERS, REQUEST_DURATION, metrics_handle,
};

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
            REQUEST_DURATION,
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

const QUEUE_GAUGES: [QueueGauge; 8] = [
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
    (
        "prioq_groups_rate_limited",
        "Named groups held back by group_rate_limit until their next token.",
        |s| s.rate_limited_groups,
    ),
    (
        "prioq_jobs_waiting",
        "Jobs waiting for their dependencies.",
        |s| s.waiting,
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

/// The exposition text: the recorded metrics of the queues in `figures`
/// (those that exist) and of the instance, then the queue gauges. The
/// series of a queue that does not exist (deleted, or only ever asked
/// for) are left out, so their number is bounded by the queues that exist.
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
    let existing: HashSet<&str> = figures.iter().map(|f| f.queue.as_str()).collect();
    let mut out = String::new();
    for line in metrics_handle().render().lines() {
        let queue = line
            .split_once("queue=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(queue, _)| queue);
        if queue.is_none_or(|queue| existing.contains(queue)) {
            out.push_str(line);
            out.push('\n');
        }
    }
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
        "prioq_queue_fill_ratio",
        "Jobs waiting to be handed out (pending, scheduled, waiting for dependencies) over max_pending, for the queues that have one: at 1 enqueues answer 429 queue_full.",
        queues.iter().filter_map(|(queue, stats)| {
            let limit = stats.max_pending?;
            let waiting = stats.pending + stats.scheduled + stats.waiting;
            Some((format!("queue=\"{queue}\""), waiting as f64 / limit as f64))
        }),
    );
    gauge_family(
        &mut out,
        "prioq_queue_bytes_fill_ratio",
        "Bytes of the jobs waiting to be handed out over max_pending_bytes, for the queues that have one: at 1 enqueues answer 429 queue_full.",
        queues.iter().filter_map(|(queue, stats)| {
            let limit = stats.max_pending_bytes?;
            Some((
                format!("queue=\"{queue}\""),
                stats.pending_bytes as f64 / limit as f64,
            ))
        }),
    );
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
