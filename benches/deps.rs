//! What dependencies cost Redis, per edge (one dependant waiting for one
//! dependency): registering it with the enqueue, and releasing it when the
//! dependency completes, next to a plain job's whole life in the same run.
//!
//! ```sh
//! cargo bench --bench deps
//! ```
//!
//! It starts a `redis-server` on a free port (no persistence) and runs
//! prioq in this process against it. Each round measures, by Redis's
//! `used_cpu_sys` + `used_cpu_user`:
//!
//! - plain: 10,000 jobs enqueued in batches of 100, then claimed and acked
//!   (claims of 100 that ack the previous 100): Redis µs per job;
//! - fan-out here: one job with 10,000 dependants in its queue: the
//!   dependants' enqueue, then the release when the one job is acked (one
//!   call releases them all);
//! - fan-out elsewhere: the same with the dependants in another queue:
//!   the enqueue registers each with the dependency in its slot, and the
//!   sweeper tells them from the outbox;
//! - fan-in: 100 jobs that each wait for 100 of 10,000 jobs (at most 100
//!   refs a job): the dependants' enqueue, then the releases as the
//!   10,000 jobs are drained (minus a plain drain of 10,000).
//!
//! Figures are medians over the rounds, per edge, and as a ratio to a
//! plain job's life measured in the same round. It writes
//! `bench-results/deps.md`. Invoked without `--bench` (as `cargo test
//! --all-targets` does), it does nothing.

#[path = "common/app.rs"]
mod app;
#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};

use app::{App, get_json};
use common::results_dir;
use common::table::{Align, Table};

const JOBS: usize = 10_000;
const BATCH: usize = 100;
const FAN_IN: usize = 100;
const ROUNDS: usize = 3;

fn main() -> Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/deps is a benchmark: run it with `cargo bench --bench deps`");
        return Ok(());
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

/// Redis µs per unit of each measured phase, in one round.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    plain: f64,
    out_enqueue: f64,
    out_release: f64,
    away_enqueue: f64,
    away_release: f64,
    in_enqueue: f64,
    in_release: f64,
}

/// A prioq in this process: the calls of this bench.
struct Bench(App);

impl std::ops::Deref for Bench {
    type Target = App;
    fn deref(&self) -> &App {
        &self.0
    }
}

impl Bench {
    async fn cpu(&mut self) -> Result<u64> {
        self.0.cpu().await
    }

    async fn enqueue(&self, queue: &str, jobs: Vec<Value>) -> Result<()> {
        self.0.enqueue(queue, jobs, BATCH).await
    }

    /// Claims and acks every claimable job of `queue`, 100 a claim, the
    /// acks in the next claim; answers how many.
    async fn drain(&self, queue: &str) -> Result<usize> {
        let (mut held, mut done) = (Vec::<Value>::new(), 0);
        loop {
            let acks: Vec<Value> = held
                .iter()
                .map(|job| json!({"id": job["id"], "lease_token": job["lease_token"]}))
                .collect();
            done += acks.len();
            let answer = self
                .post(
                    self.url(queue, "/claim"),
                    json!({"max_jobs": BATCH, "ack": acks}),
                )
                .await?;
            held = answer["jobs"].as_array().cloned().unwrap_or_default();
            if held.is_empty() {
                return Ok(done);
            }
        }
    }

    /// Waits until `queue` has no job waiting for dependencies.
    async fn until_released(&self, queue: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let stats = get_json(&self.http, &self.url(queue, "")).await?;
            if stats["waiting"] == 0 {
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "still waiting: {stats}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn plain_jobs(prefix: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"task": "t", "id": format!("{prefix}-{i}")}))
        .collect()
}

async fn run() -> Result<()> {
    let mut bench = Bench(App::start("deps").await?);
    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        let measured = measure(&mut bench, round).await?;
        eprintln!("round {round}: {measured:?}");
        rounds.push(measured);
    }
    bench.0.stop().await?;
    let report = report(&rounds);
    println!("{report}");
    let dir = results_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("deps.md"), report)?;
    Ok(())
}

async fn measure(bench: &mut Bench, round: usize) -> Result<Round> {
    let q = |name: &str| format!("{name}-{round}");
    let mut out = Round::default();
    let per = |us: u64, n: usize| us as f64 / n as f64;

    // Plain jobs: enqueue, claim, ack.
    let start = bench.cpu().await?;
    bench.enqueue(&q("plain"), plain_jobs("p", JOBS)).await?;
    ensure!(bench.drain(&q("plain")).await? == JOBS, "plain drain");
    out.plain = per(bench.cpu().await? - start, JOBS);

    // Fan-out, in the same queue and in another.
    for here in [true, false] {
        let (source, target) = match here {
            true => (q("out"), q("out")),
            false => (q("src"), q("dst")),
        };
        bench
            .enqueue(&source, vec![json!({"task": "t", "id": "root"})])
            .await?;
        let reference = format!("{source}/root");
        let dependants: Vec<Value> = (0..JOBS)
            .map(|i| json!({"task": "t", "id": format!("d-{i}"), "after": [reference]}))
            .collect();
        let start = bench.cpu().await?;
        bench.enqueue(&target, dependants).await?;
        let enqueued = bench.cpu().await?;
        let root = bench
            .post(bench.url(&source, "/claim"), json!({"max_jobs": 1}))
            .await?;
        let token = &root["jobs"][0]["lease_token"];
        bench
            .post(
                bench.url(&source, "/jobs/root/ack"),
                json!({"lease_token": token}),
            )
            .await?;
        bench.until_released(&target).await?;
        let released = bench.cpu().await?;
        let figures = (per(enqueued - start, JOBS), per(released - enqueued, JOBS));
        match here {
            true => (out.out_enqueue, out.out_release) = figures,
            false => (out.away_enqueue, out.away_release) = figures,
        }
        ensure!(bench.drain(&target).await? == JOBS, "fan-out drain");
    }

    // Fan-in: 100 dependants of 100 jobs each, over 10,000 jobs.
    let queue = q("in");
    bench.enqueue(&queue, plain_jobs("x", JOBS)).await?;
    let dependants: Vec<Value> = (0..JOBS / FAN_IN)
        .map(|d| {
            let after: Vec<String> = (0..FAN_IN)
                .map(|i| format!("x-{}", d * FAN_IN + i))
                .collect();
            json!({"task": "t", "id": format!("y-{d}"), "after": after, "priority": 9})
        })
        .collect();
    let start = bench.cpu().await?;
    bench.enqueue(&queue, dependants).await?;
    let enqueued = bench.cpu().await?;
    // The 10,000 jobs drained, which releases the 100 (drained after).
    let drained = bench.drain(&queue).await?;
    let released = bench.cpu().await?;
    ensure!(drained == JOBS + JOBS / FAN_IN, "fan-in drain: {drained}");
    out.in_enqueue = per(enqueued - start, JOBS);
    // The drain's own cost is a plain drain of as many jobs; the rest is
    // the releases.
    out.in_release = per(released - enqueued, JOBS) - out.plain;
    Ok(out)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A row of the report: its edges, its step, its figure in a round.
type Row = (&'static str, &'static str, fn(&Round) -> f64);

fn report(rounds: &[Round]) -> String {
    let pick = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    let plain = pick(|r| r.plain);
    let mut table = Table::new([
        ("Edges", Align::Left),
        ("Step", Align::Left),
        ("Redis µs per edge", Align::Right),
        ("× a plain job's life", Align::Right),
    ]);
    let rows: [Row; 6] = [
        ("1 → 10,000, same queue", "enqueue (register)", |r| {
            r.out_enqueue
        }),
        ("1 → 10,000, same queue", "release", |r| r.out_release),
        ("1 → 10,000, other queue", "enqueue (register)", |r| {
            r.away_enqueue
        }),
        (
            "1 → 10,000, other queue",
            "release (outbox, sweeper)",
            |r| r.away_release,
        ),
        (
            "100 × (100 → 1), same queue",
            "enqueue (register)",
            |r| r.in_enqueue,
        ),
        ("100 × (100 → 1), same queue", "release", |r| {
            r.in_release
        }),
    ];
    for (edges, step, figure) in rows {
        let us = pick(figure);
        table.row([
            edges.to_owned(),
            step.to_owned(),
            format!("{us:.1}"),
            format!("{:.2}", us / plain),
        ]);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Dependencies: Redis CPU per edge, medians of {ROUNDS} rounds; a plain job's life \
         (enqueued in a batch of {BATCH}, claimed and acked in claims of {BATCH}) took {plain:.1} µs \
         in the same runs.\n"
    );
    out.push_str(table.text());
    out
}
