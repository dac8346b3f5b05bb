//! The runner: starts the system, runs the seeded clients and the seeded
//! fault schedule for the duration, heals every fault, lets the workers
//! drain, reads every job back (the final inventory, into the history),
//! runs the checker and reports.
//!
//! - `system`: a Redis primary and its replica (AOF always, roles swapped
//!   by a failover) or a Redis Cluster, prioq instances.
//! - `proxy`: the TCP proxy between each instance and Redis.
//! - `client`: requests, their outcomes, the history being written.
//! - `load`: the seeded producers and workers.
//! - `faults`: the seeded fault schedule, applying and healing faults.

pub mod client;
mod faults;
pub mod load;
mod proxy;
mod system;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tokio::task::JoinSet;

use self::client::{Recorder, now_ms, parse_time, send};
use self::faults::{Fault, Tally};
use self::load::{
    CAPPED, Ctx, GROUP_MAX_IN_FLIGHT, HISTORY_MS, MAIN, MAX_IN_FLIGHT, MAX_PENDING,
    MAX_PENDING_BYTES, RESHARDED, SHARDED, SHARDS,
};
use self::system::System;
use crate::checker::{Facts, Offset, Violation, check};
use crate::history::{self, Call, Event, Op, Outcome};

/// What a run is asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    pub duration: Duration,
    /// The mean gap between faults.
    pub fault_every: Duration,
    pub instances: usize,
    pub producers: u64,
    pub workers: u64,
    /// On a three-primary Redis Cluster with a replica each, instead of
    /// a primary and its replica.
    pub cluster: bool,
    /// The prioq binary.
    pub prioq: PathBuf,
    /// Where the history and the instances' logs go.
    pub dir: PathBuf,
}

/// Schedules that fire every minute on the main queue.
const SCHEDULES: [&str; 3] = ["s0", "s1", "s2"];
/// How long the workers go on after the producers stop and faults heal.
const DRAIN: Duration = Duration::from_secs(3);

/// Runs the whole thing; answers the violations found. The history is
/// at `dir/history.jsonl`.
pub async fn run(options: &Options) -> anyhow::Result<Vec<Violation>> {
    std::fs::create_dir_all(&options.dir)?;
    let history_path = options.dir.join("history.jsonl");
    if !system::faketime_installed() {
        println!(
            "note: {} is missing (Debian's libfaketime): clock_skew faults are skipped",
            system::FAKETIME_LIBRARY
        );
    }
    let mut system = System::start(
        &options.prioq,
        &options.dir,
        options.instances,
        options.cluster,
    )
    .await?;
    let recorder = Arc::new(Recorder::create(&history_path)?);
    let ctx = Arc::new(Ctx {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()?,
        bases: system.base_urls(),
        recorder: recorder.clone(),
        produce: AtomicBool::new(false),
        work: AtomicBool::new(false),
        resharding: AtomicBool::new(false),
    });
    setup(&ctx).await;

    let mut rng = load::rng_for(options.seed, u64::MAX);
    let duration_ms = options.duration.as_millis() as u64;
    let every_ms = options.fault_every.as_millis() as u64;
    let schedule = faults::schedule(
        &mut rng,
        duration_ms,
        every_ms,
        options.instances,
        options.cluster,
    );
    let started = now_ms();
    let mut fault_log = std::fs::File::create(options.dir.join("faults.log"))?;
    let mut clients = JoinSet::new();
    for n in 0..options.producers {
        clients.spawn(load::producer(ctx.clone(), options.seed, n));
    }
    // Numbered after the producers, for a generator of its own.
    clients.spawn(load::bulk_producer(
        ctx.clone(),
        options.seed,
        options.producers,
    ));
    for n in 0..options.workers {
        let queue = [
            MAIN, MAIN, CAPPED, SHARDED, RESHARDED, MAIN, CAPPED, SHARDED, RESHARDED,
        ][n as usize % 9];
        clients.spawn(load::worker(ctx.clone(), options.seed, n, queue));
    }
    let mut tally = Tally::new();
    for (gap, faults) in schedule {
        tokio::time::sleep(Duration::from_millis(gap)).await;
        if now_ms() - started >= duration_ms as i64 {
            break;
        }
        let at = now_ms() - started;
        let applied = faults::apply_all(&mut system, &ctx, &faults).await?;
        writeln!(
            fault_log,
            "{at:>7} ms to {:>7} ms  {faults:?} applied {applied:?}",
            now_ms() - started
        )?;
        if applied.len() == 2 {
            *tally.entry("two_at_once").or_default() += 1;
        }
        for kind in applied {
            *tally.entry(kind).or_default() += 1;
        }
    }
    let left = duration_ms as i64 - (now_ms() - started);
    if left > 0 {
        tokio::time::sleep(Duration::from_millis(left as u64)).await;
    }
    system.heal().await?;
    ctx.produce.store(true, Ordering::Relaxed);
    tokio::time::sleep(DRAIN).await;
    ctx.work.store(true, Ordering::Relaxed);
    while clients.join_next().await.is_some() {}
    let unread = inventory(&ctx, &history_path).await?;
    recorder.flush()?;
    if unread > 0 {
        println!("{unread} jobs could not be read back; the Redis servers at the end:");
        print!("{}", system.describe().await);
    }
    drop(system);

    let ops = history::read(&history_path)?;
    let violations = check(&ops);
    report(&ops, &tally, &violations, &history_path);
    Ok(violations)
}

/// The caps and the bound of the capped queue, the shards of the sharded
/// one and the schedules, recorded.
async fn setup(ctx: &Ctx) {
    let body = json!({
        "max_in_flight": MAX_IN_FLIGHT,
        "group_max_in_flight": GROUP_MAX_IN_FLIGHT,
        "max_pending": MAX_PENDING,
        "max_pending_bytes": MAX_PENDING_BYTES,
    });
    let url = format!("{}/v1/queues/{CAPPED}/settings", ctx.bases[0]);
    let start = now_ms();
    let answer = send(&ctx.http, Method::PATCH, &url, Some(&body)).await;
    let call = Call::Configure {
        max_in_flight: Some(MAX_IN_FLIGHT),
        group_max_in_flight: Some(GROUP_MAX_IN_FLIGHT),
        shards: None,
        max_pending: Some(MAX_PENDING),
        max_pending_bytes: Some(MAX_PENDING_BYTES),
        history_ms: None,
    };
    ctx.recorder.record("setup", CAPPED, start, &answer, call);
    let url = format!("{}/v1/queues/{SHARDED}/settings", ctx.bases[0]);
    let start = now_ms();
    let answer = send(
        &ctx.http,
        Method::PATCH,
        &url,
        Some(&json!({"shards": SHARDS, "history_ms": HISTORY_MS})),
    )
    .await;
    let call = Call::Configure {
        max_in_flight: None,
        group_max_in_flight: None,
        shards: Some(SHARDS),
        max_pending: None,
        max_pending_bytes: None,
        history_ms: Some(HISTORY_MS),
    };
    ctx.recorder.record("setup", SHARDED, start, &answer, call);
    for name in SCHEDULES {
        let cron = "* * * * *";
        // The most urgent priority, in a group of their own: claimed within
        // a round of fair sharing however deep the backlog.
        let body = json!({"cron": cron, "task": "tick", "priority": 0, "group": "sched"});
        let url = format!("{}/v1/queues/{MAIN}/schedules/{name}", ctx.bases[0]);
        let start = now_ms();
        let answer = send(&ctx.http, Method::PUT, &url, Some(&body)).await;
        let call = Call::Schedule {
            name: name.to_owned(),
            cron: cron.to_owned(),
        };
        ctx.recorder.record("setup", MAIN, start, &answer, call);
    }
}

/// Reads back every job the history names (enqueued or leased), each
/// until answered 200 or 404 (ten tries), into the history; answers how
/// many were never answered.
pub async fn inventory(ctx: &Arc<Ctx>, history_path: &Path) -> anyhow::Result<usize> {
    ctx.recorder.flush()?;
    let mut jobs = BTreeSet::new();
    for op in history::read(history_path)? {
        match op.call {
            Call::Enqueue { id, .. } => {
                jobs.insert((op.queue, id));
            }
            Call::Claim { jobs: leases, .. } => {
                jobs.extend(leases.into_iter().map(|l| (op.queue.clone(), l.id)));
            }
            _ => {}
        }
    }
    let jobs: Vec<_> = jobs.into_iter().collect();
    let mut unread = 0;
    for chunk in jobs.chunks(32) {
        let mut reads = JoinSet::new();
        for (queue, id) in chunk {
            let (ctx, queue, id) = (ctx.clone(), queue.clone(), id.clone());
            reads.spawn(async move {
                for _ in 0..10 {
                    let url = format!("{}/v1/queues/{queue}/jobs/{id}", ctx.bases[0]);
                    let start = now_ms();
                    let answer = send(&ctx.http, Method::GET, &url, None).await;
                    let found = answer.status == Some(200);
                    let answered = found || answer.status == Some(404);
                    let outcome = if answered {
                        Outcome::Ok
                    } else {
                        answer.outcome
                    };
                    let events = match answered && queue == SHARDED {
                        true => history_of(&ctx, &queue, &id).await,
                        false => None,
                    };
                    let call = Call::Read {
                        id: id.clone(),
                        state: found
                            .then(|| answer.body["state"].as_str().unwrap_or("").to_owned()),
                        enqueued_at: parse_time(&answer.body["enqueued_at"]),
                        result: found.then(|| answer.body["result"].clone()),
                        events,
                    };
                    let answer = client::Answer { outcome, ..answer };
                    ctx.recorder
                        .record("inventory", &queue, start, &answer, call);
                    if answered {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                false
            });
        }
        while let Some(read) = reads.join_next().await {
            unread += usize::from(!read.unwrap_or(false));
        }
    }
    Ok(unread)
}

/// A job's history's events (the queue keeps them), or `None` when the
/// read failed.
async fn history_of(ctx: &Ctx, queue: &str, id: &str) -> Option<Vec<Event>> {
    let url = format!("{}/v1/queues/{queue}/jobs/{id}/history", ctx.bases[0]);
    let answer = send(&ctx.http, Method::GET, &url, None).await;
    if answer.status != Some(200) {
        return None;
    }
    serde_json::from_value(answer.body["events"].clone()).ok()
}

/// Operations by kind and outcome, faults by kind, and each violation
/// with the history lines of its operations.
fn report(ops: &[Op], tally: &Tally, violations: &[Violation], path: &Path) {
    let mut by_kind: BTreeMap<&str, BTreeMap<Outcome, u64>> = BTreeMap::new();
    for op in ops {
        *by_kind
            .entry(kind(&op.call))
            .or_default()
            .entry(op.outcome)
            .or_default() += 1;
    }
    println!("operations: {}", ops.len());
    for (kind, outcomes) in &by_kind {
        let parts: Vec<String> = outcomes
            .iter()
            .map(|(o, n)| format!("{o:?} {n}").to_lowercase())
            .collect();
        println!("  {kind:<10} {}", parts.join(", "));
    }
    match Facts::new(ops).offset {
        Some(Offset { lo, hi }) => {
            println!("Redis's clock minus the runner's: within [{lo}, {hi}] ms")
        }
        None => println!(
            "Redis's clock minus the runner's: no bound fits (the clock rules said nothing)"
        ),
    }
    println!("faults: {}", tally.values().sum::<u64>());
    for (kind, n) in tally {
        println!("  {kind:<15} {n}");
    }
    let lines: BTreeMap<u64, usize> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| (op.op, i + 1))
        .collect();
    println!("violations: {}", violations.len());
    for violation in violations {
        let at: Vec<String> = violation
            .ops
            .iter()
            .map(|op| format!("op {op} line {}", lines.get(op).copied().unwrap_or(0)))
            .collect();
        println!("  {violation} at {}", at.join(", "));
    }
    println!("history: {}", path.display());
}

fn kind(call: &Call) -> &'static str {
    match call {
        Call::Configure { .. } => "configure",
        Call::Schedule { .. } => "schedule",
        Call::Enqueue { .. } => "enqueue",
        Call::Claim { .. } => "claim",
        Call::Ack(_) => "ack",
        Call::Extend { .. } => "extend",
        Call::Nack { .. } => "nack",
        Call::Cancel { .. } => "cancel",
        Call::Read { .. } => "read",
    }
}

/// Prints the fault schedule a seed makes (to replay or compare runs):
/// each fault after the gap that follows the previous one's healing.
pub fn print_schedule(options: &Options) {
    let mut rng = load::rng_for(options.seed, u64::MAX);
    let schedule: Vec<(u64, Vec<Fault>)> = faults::schedule(
        &mut rng,
        options.duration.as_millis() as u64,
        options.fault_every.as_millis() as u64,
        options.instances,
        options.cluster,
    );
    for (gap, faults) in schedule {
        println!("after {gap:>5} ms  {faults:?}");
    }
}
