//! The realistic mix (issue 24): ten priorities spread evenly, 32
//! producers posting single jobs, 64 workers long-polling (`wait_ms`
//! 1000) that claim one job and ack it, from an empty queue. Variants: the
//! ack as a request of its own or inside the next claim, the jobs spread
//! over 100 groups, the clients split over two instances. Producers add a
//! job only while fewer than `BACKLOG` are waiting or leased, so the queue
//! stays near empty, as BullMQ's end to end beside it does; two variants
//! leave the producers unthrottled, as an outside load driver does (the
//! queue then grows while producers outpace the workers), and one paces
//! them to `PACED_JOBS_PER_S` in all, a load well under what prioq takes,
//! as a slower driver sharing prioq's core gives it. Per variant:
//! jobs acked per second, jobs enqueued per job acked, Redis CPU and
//! `FCALL` µs per job (the commands inside and Lua's own), and prioq's CPU
//! per request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::http1;
use crate::jobs::{LEASE_MS, TASK, args_json};
use crate::markdown::OUTSIDE_FUNCTIONS;
use crate::procs::cpu_ticks;
use crate::redis_stats::{self, RedisCounters};

pub const PRODUCERS: usize = 32;
pub const WORKERS: usize = 64;
const WAIT_MS: u64 = 1000;
const PRIORITIES: u64 = 10;
const GROUPS: u64 = 100;
/// Jobs added and not yet acked, at most.
const BACKLOG: usize = 256;
/// The paced variant's jobs per second, all producers together.
const PACED_JOBS_PER_S: f64 = 4000.0;
pub const QUEUE: &str = "bench-mix";

/// One shape of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Claim, then ack: three requests a job.
    Single,
    /// The ack rides on the next claim: two requests a job.
    AckInClaim,
    /// As `Single`, each job in one of 100 groups.
    Groups,
    /// As `Single`, the clients split over two instances.
    TwoInstances,
    /// As `Single`, the producers unthrottled.
    Unthrottled,
    /// As `AckInClaim`, the producers unthrottled.
    UnthrottledAckInClaim,
    /// As `Single`, the producers paced to `PACED_JOBS_PER_S`.
    Paced,
}

impl Variant {
    pub const ALL: [Self; 7] = [
        Self::Single,
        Self::AckInClaim,
        Self::Groups,
        Self::TwoInstances,
        Self::Unthrottled,
        Self::UnthrottledAckInClaim,
        Self::Paced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Single => "claim, then ack",
            Self::AckInClaim => "ack in the next claim",
            Self::Groups => "claim, then ack; 100 groups",
            Self::TwoInstances => "claim, then ack; two instances",
            Self::Unthrottled => "claim, then ack; producers unthrottled",
            Self::UnthrottledAckInClaim => "ack in the next claim; producers unthrottled",
            Self::Paced => "claim, then ack; producers paced to 4,000 jobs/s",
        }
    }

    /// Its name on the command line (`--mix-variants`).
    pub fn key(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::AckInClaim => "ack-in-claim",
            Self::Groups => "groups",
            Self::TwoInstances => "two-instances",
            Self::Unthrottled => "unthrottled",
            Self::UnthrottledAckInClaim => "unthrottled-ack-in-claim",
            Self::Paced => "paced",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|variant| variant.key() == s)
    }

    fn acks_in_claim(self) -> bool {
        matches!(self, Self::AckInClaim | Self::UnthrottledAckInClaim)
    }

    fn throttled(self) -> bool {
        !matches!(self, Self::Unthrottled | Self::UnthrottledAckInClaim)
    }
}

/// One variant's run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MixResult {
    pub variant: String,
    pub jobs_per_s: f64,
    pub requests_per_job: f64,
    /// Jobs enqueued per job acked in the window: 1 when the producers
    /// keep pace with the workers, more while the queue grows.
    #[serde(default)]
    pub enqueued_per_job: f64,
    /// Function calls (`FCALL`) per job: how well the group commit gathers.
    #[serde(default)]
    pub fcalls_per_job: f64,
    pub redis_cpu_us_per_job: f64,
    pub fcall_us_per_job: f64,
    pub commands_us_per_job: f64,
    pub lua_us_per_job: f64,
    pub prioq_cpu_us_per_request: f64,
    pub errors: u64,
    pub last_error: Option<String>,
}

/// What every task shares.
#[derive(Debug)]
struct Shared {
    variant: Variant,
    instances: Vec<SocketAddr>,
    credits: Semaphore,
    /// Counted inside the window only.
    acked: AtomicU64,
    enqueued: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
    args: String,
    measuring: std::sync::atomic::AtomicBool,
    stop: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    fn count(&self, requests: u64, enqueued: u64, acked: u64) {
        if self.measuring() {
            self.requests.fetch_add(requests, Ordering::Relaxed);
            self.enqueued.fetch_add(enqueued, Ordering::Relaxed);
            self.acked.fetch_add(acked, Ordering::Relaxed);
        }
    }

    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(what);
    }

    fn addr(&self, index: usize) -> SocketAddr {
        self.instances[index % self.instances.len()]
    }
}

#[derive(Debug, Deserialize)]
struct Claimed {
    jobs: Vec<Leased>,
    #[serde(default)]
    acked: Vec<Status>,
}

#[derive(Debug, Deserialize)]
struct Leased {
    id: String,
    lease_token: String,
}

#[derive(Debug, Deserialize)]
struct Status {
    status: u16,
}

async fn produce(shared: Arc<Shared>, index: usize) {
    let addr = shared.addr(index);
    let mut con = http1::Connection::new(addr);
    let path = format!("/v1/queues/{QUEUE}/jobs");
    let authority = addr.to_string();
    let mut n = index as u64;
    let mut pace = (shared.variant == Variant::Paced).then(|| {
        let mut pace =
            tokio::time::interval(Duration::from_secs_f64(PRODUCERS as f64 / PACED_JOBS_PER_S));
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        pace
    });
    while !shared.stop.load(Ordering::Relaxed) {
        if let Some(pace) = &mut pace {
            pace.tick().await;
        }
        if shared.variant.throttled() {
            let Ok(Ok(permit)) =
                tokio::time::timeout(Duration::from_millis(100), shared.credits.acquire()).await
            else {
                continue;
            };
            permit.forget();
        }
        let group = match shared.variant {
            Variant::Groups => format!(r#","group":"g{}""#, n % GROUPS),
            _ => String::new(),
        };
        let body = format!(
            r#"{{"task":"{TASK}","args":{},"priority":{}{group}}}"#,
            shared.args,
            n % PRIORITIES
        );
        n += PRODUCERS as u64;
        match con.send(&http1::post(&authority, &path, &body)).await {
            Ok((201, _)) => shared.count(1, 1, 0),
            Ok((status, body)) => {
                shared.error(format!(
                    "enqueue: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
            }
            Err(error) => shared.error(format!("enqueue: {error}")),
        }
    }
}

async fn work(shared: Arc<Shared>, index: usize) {
    let addr = shared.addr(index);
    let mut con = http1::Connection::new(addr);
    let authority = addr.to_string();
    let claim_path = format!("/v1/queues/{QUEUE}/claim");
    let mut held: Option<Leased> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let acking = if shared.variant.acks_in_claim() {
            held.take()
        } else {
            None
        };
        let body = match &acking {
            Some(job) => format!(
                r#"{{"max_jobs":1,"lease_ms":{LEASE_MS},"wait_ms":0,"ack":[{{"id":"{}","lease_token":"{}"}}]}}"#,
                job.id, job.lease_token
            ),
            None => format!(r#"{{"max_jobs":1,"lease_ms":{LEASE_MS},"wait_ms":{WAIT_MS}}}"#),
        };
        let claimed = match con.send(&http1::post(&authority, &claim_path, &body)).await {
            Ok((200, body)) => serde_json::from_slice::<Claimed>(&body),
            Ok((status, body)) => {
                shared.error(format!(
                    "claim: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
                continue;
            }
            Err(error) => {
                shared.error(format!("claim: {error}"));
                continue;
            }
        };
        let Ok(claimed) = claimed else {
            shared.error("claim: an answer that is not a claim's".into());
            continue;
        };
        let acked = claimed.acked.iter().filter(|a| a.status == 204).count();
        shared.credits.add_permits(acked);
        shared.count(1, 0, acked as u64);
        let Some(job) = claimed.jobs.into_iter().next() else {
            continue;
        };
        if shared.variant.acks_in_claim() {
            held = Some(job);
            continue;
        }
        let path = format!("/v1/queues/{QUEUE}/jobs/{}/ack", job.id);
        let body = format!(r#"{{"lease_token":"{}"}}"#, job.lease_token);
        match con.send(&http1::post(&authority, &path, &body)).await {
            Ok((204, _)) => {
                shared.credits.add_permits(1);
                shared.count(1, 0, 1);
            }
            Ok((status, _)) => shared.error(format!("ack: {status}")),
            Err(error) => shared.error(format!("ack: {error}")),
        }
    }
}

/// Runs `variant` against the prioq instances at `instances` (whose
/// processes are `pids`) on an empty queue: `warmup`, then `duration`
/// measured.
pub async fn run(
    con: &mut MultiplexedConnection,
    variant: Variant,
    instances: Vec<SocketAddr>,
    pids: &[u32],
    warmup: Duration,
    duration: Duration,
    clk_tck: f64,
) -> Result<MixResult> {
    let shared = Arc::new(Shared {
        variant,
        instances,
        credits: Semaphore::new(BACKLOG),
        acked: AtomicU64::new(0),
        enqueued: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        last_error: std::sync::Mutex::new(None),
        args: args_json(),
        measuring: false.into(),
        stop: false.into(),
    });
    let mut tasks = Vec::new();
    for i in 0..PRODUCERS {
        tasks.push(tokio::spawn(produce(Arc::clone(&shared), i)));
    }
    for i in 0..WORKERS {
        tasks.push(tokio::spawn(work(Arc::clone(&shared), i)));
    }
    tokio::time::sleep(warmup).await;
    let prioq_ticks = |pids: &[u32]| pids.iter().filter_map(|p| cpu_ticks(*p)).sum::<u64>();
    let before = redis_stats::counters(con).await?;
    let (ticks_before, started) = (prioq_ticks(pids), Instant::now());
    shared.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(duration).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let after = redis_stats::counters(con).await?;
    let (ticks_after, seconds) = (prioq_ticks(pids), started.elapsed().as_secs_f64());
    shared.stop.store(true, Ordering::Relaxed);
    for task in tasks {
        // A long poll ends within its wait.
        let _ = tokio::time::timeout(Duration::from_millis(2 * WAIT_MS + 1000), task).await;
    }
    let jobs = shared.acked.load(Ordering::Relaxed).max(1) as f64;
    let requests = shared.requests.load(Ordering::Relaxed).max(1) as f64;
    let (fcall, commands) = function_time(&before, &after);
    let prioq_us = (ticks_after - ticks_before) as f64 / clk_tck * 1e6;
    Ok(MixResult {
        variant: variant.name().to_owned(),
        jobs_per_s: jobs / seconds,
        requests_per_job: requests / jobs,
        enqueued_per_job: shared.enqueued.load(Ordering::Relaxed) as f64 / jobs,
        fcalls_per_job: (after.fcall.0 - before.fcall.0) as f64 / jobs,
        redis_cpu_us_per_job: (after.cpu_us - before.cpu_us) as f64 / jobs,
        fcall_us_per_job: fcall / jobs,
        commands_us_per_job: commands / jobs,
        lua_us_per_job: (fcall - commands) / jobs,
        prioq_cpu_us_per_request: prioq_us / requests,
        errors: shared.errors.load(Ordering::Relaxed),
        last_error: shared
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
    })
}

/// `FCALL` µs between two reads of the counters, and of it the commands the
/// functions ran.
pub fn function_time(before: &RedisCounters, after: &RedisCounters) -> (f64, f64) {
    let fcall = (after.fcall.1 - before.fcall.1) as f64;
    let commands: u64 = after
        .commands
        .iter()
        .filter(|(name, _)| !OUTSIDE_FUNCTIONS.contains(&name.as_str()))
        .map(|(name, (_, usec))| usec - before.commands.get(name).map_or(0, |c| c.1))
        .sum();
    (fcall, commands as f64)
}
