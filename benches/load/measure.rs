//! One measured run: a window after a warm-up, what the tasks got done in
//! it, and the CPU and Redis counters read at both ends of it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use prioq::queue::store::keys::QueueKeys;
use redis::{self, aio::MultiplexedConnection};

use crate::args::Op;
use crate::keeper::{self, KeeperCalls, KeeperMode, KeeperStats, Range};
use crate::procs::cpu_ticks;
use crate::redis_stats::{self, RedisCounters};

/// Upper bound on any single request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub warm_end: Instant,
    pub end: Instant,
}

impl Window {
    fn starting_now(warmup: Duration, duration: Duration) -> Self {
        let warm_end = Instant::now() + warmup;
        Self {
            warm_end,
            end: warm_end + duration,
        }
    }

    fn contains(&self, start: Instant, end: Instant) -> bool {
        start >= self.warm_end && end <= self.end
    }

    fn done(&self, end: Instant) -> bool {
        end >= self.warm_end && end <= self.end
    }

    pub fn over(&self) -> bool {
        Instant::now() >= self.end
    }
}

/// Latency samples (µs) by call name, and what a task got done.
#[derive(Debug, Default)]
pub struct TaskStats {
    pub jobs: u64,
    /// Requests (raw: pipelined round trips) answered inside the window.
    pub requests: u64,
    pub errors: u64,
    /// Claims answered inside the window that found fewer jobs than asked.
    pub short_claims: u64,
    pub last_error: Option<String>,
    pub samples: BTreeMap<&'static str, Vec<u32>>,
}

impl TaskStats {
    /// One answered call.
    pub fn record(&mut self, window: &Window, call: &'static str, start: Instant, end: Instant) {
        if window.done(end) {
            self.requests += 1;
        }
        if window.contains(start, end) {
            let us = end
                .duration_since(start)
                .as_micros()
                .min(u128::from(u32::MAX)) as u32;
            self.samples.entry(call).or_default().push(us);
        }
    }

    pub fn finished(&mut self, window: &Window, end: Instant, jobs: u64) {
        if window.done(end) {
            self.jobs += jobs;
        }
    }

    /// A claim answered at `end` that found fewer jobs than it asked for.
    pub fn short_claim(&mut self, window: &Window, end: Instant) {
        if window.done(end) {
            self.short_claims += 1;
        }
    }

    pub fn error(&mut self, what: String) {
        self.errors += 1;
        self.last_error = Some(what);
    }

    fn merge(&mut self, other: Self) {
        self.jobs += other.jobs;
        self.requests += other.requests;
        self.errors += other.errors;
        self.short_claims += other.short_claims;
        if other.last_error.is_some() {
            self.last_error = other.last_error;
        }
        for (call, samples) in other.samples {
            self.samples.entry(call).or_default().extend(samples);
        }
    }
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct Latency {
    pub n: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

pub fn latency(samples: &mut [u32]) -> Latency {
    if samples.is_empty() {
        return Latency::default();
    }
    samples.sort_unstable();
    let rank = |p: f64| {
        let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        f64::from(samples[i]) / 1000.0
    };
    Latency {
        n: samples.len(),
        p50_ms: rank(0.50),
        p99_ms: rank(0.99),
        max_ms: f64::from(samples[samples.len() - 1]) / 1000.0,
    }
}

/// Where the runs read the processes' counters.
#[derive(Debug)]
pub struct Monitor {
    pub con: MultiplexedConnection,
    pub prioq_pids: Vec<u32>,
    pub keeper_calls: KeeperCalls,
}

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    bench: u64,
    prioq: u64,
    pub counters: RedisCounters,
    keeper: BTreeMap<&'static str, u64>,
}

impl Monitor {
    pub async fn snapshot(&mut self) -> Result<Snapshot> {
        let at = Instant::now();
        let counters = redis_stats::counters(&mut self.con).await?;
        Ok(Snapshot {
            at,
            bench: cpu_ticks(std::process::id()).unwrap_or(0),
            prioq: self.prioq_pids.iter().filter_map(|p| cpu_ticks(*p)).sum(),
            counters,
            keeper: self.keeper_calls.counts(),
        })
    }
}

/// What a run's tasks do.
pub trait Load: Send + Sync + 'static {
    /// Jobs the tasks can hold claimed at once, waiting for their ack.
    fn claims_in_flight(&self) -> u64;

    fn task(
        self: Arc<Self>,
        index: usize,
        window: Window,
    ) -> impl Future<Output = TaskStats> + Send;
}

/// How a run is set up.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    pub tasks: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub keys: &'a QueueKeys,
    pub depth: u64,
    pub mode: KeeperMode,
}

#[derive(Debug)]
pub struct Measured {
    stats: TaskStats,
    before: Snapshot,
    after: Snapshot,
    keeper: KeeperStats,
}

pub async fn measure<L: Load>(
    monitor: &mut Monitor,
    redis: &redis::Client,
    load: Arc<L>,
    plan: Plan<'_>,
) -> Result<Measured> {
    let range = Range::new(plan.depth, load.claims_in_flight());
    keeper::settle(monitor.con.clone(), plan.keys, range, &monitor.keeper_calls).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let keeper = keeper::spawn(
        redis.clone(),
        plan.keys.clone(),
        range,
        plan.mode,
        monitor.keeper_calls.clone(),
        Arc::clone(&stop),
    );
    let window = Window::starting_now(plan.warmup, plan.duration);
    let handles: Vec<_> = (0..plan.tasks)
        .map(|i| tokio::spawn(Arc::clone(&load).task(i, window)))
        .collect();
    tokio::time::sleep_until(window.warm_end.into()).await;
    let before = monitor.snapshot().await?;
    tokio::time::sleep_until(window.end.into()).await;
    let after = monitor.snapshot().await?;
    let mut stats = TaskStats::default();
    for handle in handles {
        let abort = handle.abort_handle();
        match tokio::time::timeout(REQUEST_TIMEOUT * 2, handle).await {
            Ok(Ok(task)) => stats.merge(task),
            Ok(Err(error)) => stats.error(format!("task failed: {error}")),
            Err(_) => {
                abort.abort();
                stats.error("task did not stop in time".into());
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let keeper = tokio::task::spawn_blocking(move || keeper.join())
        .await?
        .map_err(|_| anyhow!("the housekeeper panicked"))??;
    Ok(Measured {
        stats,
        before,
        after,
        keeper,
    })
}

/// CPU of each process over a run's window: bench and prioq from
/// `/proc/<pid>/stat`, redis-server from `INFO cpu`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct Cpu {
    pub bench: f64,
    pub prioq: f64,
    pub redis: f64,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct CommandCost {
    pub calls_per_job: f64,
    pub us_per_job: f64,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct KeeperJson {
    pub added: u64,
    pub removed: u64,
    pub min_depth: u64,
    pub max_depth: u64,
    /// The housekeeper's own commands in the window, taken out of
    /// `redis_commands`.
    pub calls: BTreeMap<String, u64>,
}

/// One measured run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunRecord {
    /// `raw` (the functions pipelined into Redis), `http1` or `http2`.
    pub path: String,
    pub op: String,
    pub depth: u64,
    /// HTTP: concurrent clients. Raw: pipelines in flight.
    pub concurrency: usize,
    /// TCP connections the clients used.
    pub connections: usize,
    /// Worker loop: how many of the clients enqueue (the others claim).
    pub producers: Option<usize>,
    pub jobs: u64,
    /// HTTP requests (raw: pipelined round trips) answered in the window.
    pub requests: u64,
    pub seconds: f64,
    pub jobs_per_s: f64,
    /// This figure over the raw-Redis figure of the same op and depth.
    pub vs_raw: Option<f64>,
    /// By call: HTTP request latency; raw: one pipelined round trip.
    pub latency: BTreeMap<String, Latency>,
    /// Every call of the run together.
    pub latency_all: Latency,
    pub errors: u64,
    pub last_error: Option<String>,
    /// Claims that found fewer jobs than they asked for.
    pub short_claims: u64,
    /// `FCALL` time in Redis (`INFO commandstats`) per job: the measured
    /// functions only.
    pub redis_fcall_us_per_job: f64,
    pub fcall_calls_per_job: f64,
    /// prioq's CPU per HTTP request (HTTP runs only).
    pub prioq_cpu_us_per_request: Option<f64>,
    /// Every command Redis ran in the window (inside functions too, so
    /// `fcall` contains the others) per job, without the housekeeper's.
    pub redis_commands: BTreeMap<String, CommandCost>,
    /// CPU per job of each process; Redis's is the whole process:
    /// functions, networking, parsing, replies, and the housekeeper's
    /// commands (in runs that only claim, the refills of every job).
    pub cpu_us_per_job: Cpu,
    pub cpu_seconds: Cpu,
    pub keeper: KeeperJson,
}

/// Who ran a run, and how.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub path: &'static str,
    pub op: Op,
    pub depth: u64,
    pub concurrency: usize,
    pub connections: usize,
    pub producers: Option<usize>,
}

pub fn record(shape: Shape, measured: Measured, clk_tck: f64) -> RunRecord {
    let Measured {
        mut stats,
        before,
        after,
        keeper,
    } = measured;
    let seconds = after.at.duration_since(before.at).as_secs_f64();
    let jobs = stats.jobs.max(1) as f64;
    let ticks = |a: u64, b: u64| b.saturating_sub(a) as f64 / clk_tck;
    let (c0, c1) = (&before.counters, &after.counters);
    let cpu = Cpu {
        bench: ticks(before.bench, after.bench),
        prioq: ticks(before.prioq, after.prioq),
        redis: c1.cpu_us.saturating_sub(c0.cpu_us) as f64 / 1e6,
    };
    let keeper_calls: BTreeMap<String, u64> = after
        .keeper
        .iter()
        .map(|(command, &n)| {
            let n0 = before.keeper.get(command).copied().unwrap_or(0);
            ((*command).to_owned(), n.saturating_sub(n0))
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    let redis_commands = c1
        .commands
        .iter()
        .filter_map(|(command, &(calls, usec))| {
            let (calls0, usec0) = c0.commands.get(command).copied().unwrap_or((0, 0));
            let (calls, usec) = (calls.saturating_sub(calls0), usec.saturating_sub(usec0));
            // The housekeeper's calls come out with their share of the time.
            let theirs = keeper_calls.get(command).copied().unwrap_or(0).min(calls);
            let ours = calls - theirs;
            (ours > 0).then(|| {
                let usec = usec as f64 * ours as f64 / calls as f64;
                (
                    command.clone(),
                    CommandCost {
                        calls_per_job: ours as f64 / jobs,
                        us_per_job: usec / jobs,
                    },
                )
            })
        })
        .collect();
    let delta = |a: (u64, u64), b: (u64, u64)| (b.0.saturating_sub(a.0), b.1.saturating_sub(a.1));
    let (fcalls, fusec) = delta(c0.fcall, c1.fcall);
    let mut all = Vec::new();
    let latency_by_call = stats
        .samples
        .iter_mut()
        .map(|(call, samples)| {
            all.extend_from_slice(samples);
            ((*call).to_owned(), latency(samples))
        })
        .collect();
    let http = shape.path != "raw";
    RunRecord {
        path: shape.path.to_owned(),
        op: shape.op.name().to_owned(),
        depth: shape.depth,
        concurrency: shape.concurrency,
        connections: shape.connections,
        producers: shape.producers,
        jobs: stats.jobs,
        requests: stats.requests,
        seconds,
        jobs_per_s: stats.jobs as f64 / seconds,
        vs_raw: None,
        latency: latency_by_call,
        latency_all: latency(&mut all),
        errors: stats.errors,
        last_error: stats.last_error.take(),
        short_claims: stats.short_claims,
        redis_fcall_us_per_job: fusec as f64 / jobs,
        fcall_calls_per_job: fcalls as f64 / jobs,
        prioq_cpu_us_per_request: http.then(|| cpu.prioq * 1e6 / stats.requests.max(1) as f64),
        redis_commands,
        cpu_us_per_job: Cpu {
            bench: cpu.bench * 1e6 / jobs,
            prioq: cpu.prioq * 1e6 / jobs,
            redis: cpu.redis * 1e6 / jobs,
        },
        cpu_seconds: cpu,
        keeper: KeeperJson {
            added: keeper.added,
            removed: keeper.removed,
            min_depth: if keeper.min_depth == u64::MAX {
                0
            } else {
                keeper.min_depth
            },
            max_depth: keeper.max_depth,
            calls: keeper_calls,
        },
    }
}
