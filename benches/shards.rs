//! One hot queue on a local Redis Cluster of three primaries, split over
//! 1 shard and over 3: how its Redis work spreads over the primaries, and
//! what a sharded claim costs.
//!
//! ```sh
//! cargo bench --bench shards
//! ```
//!
//! It starts three cluster-enabled `redis-server`s on free ports (no
//! persistence) and joins them with `redis-cli --cluster create` (the
//! testbed crate's `RedisCluster`, as the cluster tests do), then
//! runs prioq in this process against them. Each round, for 1 shard and
//! for 3 (in turn, the order swapped every round), it enqueues 20,000 jobs
//! over HTTP (8 producers, 50 jobs a request) and drains them with 32
//! workers (claim 10, ack them with the next claim). It reads each
//! primary's `used_cpu_sys` + `used_cpu_user` before and after. On a
//! 2-core machine the three primaries, prioq and the load share the cores,
//! so throughput cannot grow with shards; what the figures show is where
//! the Redis work goes: per primary, its CPU per job and its share of the
//! queue's Redis CPU. It writes `bench-results/shards.md`.
//!
//! Invoked without `--bench` (as `cargo test --all-targets` does), it does
//! nothing.

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use prioq::config::Config;
use prioq::startup::Application;
use prioq_testbed::RedisCluster;
use serde_json::{Value, json};

use common::redis_info::{self, connect, info};
use common::results_dir;
use common::table::{Align, Table};

const JOBS: usize = 20_000;
const BATCH: usize = 50;
const PRODUCERS: usize = 8;
const WORKERS: usize = 32;
const MAX_JOBS: usize = 10;
const ROUNDS: usize = 3;
const SHARDS: [u32; 2] = [1, 3];

fn main() -> Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/shards is a benchmark: run it with `cargo bench --bench shards`");
        return Ok(());
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

/// One measured run: jobs through, seconds, each primary's CPU (µs).
#[derive(Debug, Clone)]
struct Run {
    shards: u32,
    seconds: f64,
    cpu_us: Vec<u64>,
}

impl Run {
    fn total_us(&self) -> u64 {
        self.cpu_us.iter().sum()
    }

    /// µs of Redis CPU per job, on each primary.
    fn per_job(&self) -> Vec<f64> {
        self.cpu_us
            .iter()
            .map(|us| *us as f64 / JOBS as f64)
            .collect()
    }

    /// The busiest primary's share of the queue's Redis CPU.
    fn busiest_share(&self) -> f64 {
        let most = self.cpu_us.iter().max().copied().unwrap_or_default();
        most as f64 / self.total_us().max(1) as f64
    }
}

async fn run() -> Result<()> {
    let cluster = RedisCluster::start();
    let mut runs: Vec<Run> = Vec::new();
    for round in 0..ROUNDS {
        let order: Vec<u32> = if round % 2 == 0 {
            SHARDS.to_vec()
        } else {
            SHARDS.iter().rev().copied().collect()
        };
        for shards in order {
            let run = measure(&cluster, round, shards).await?;
            eprintln!(
                "round {round}, {shards} shard(s): {:.1} s, Redis CPU per job by primary {:?} µs",
                run.seconds,
                run.per_job()
                    .iter()
                    .map(|us| (us * 10.0).round() / 10.0)
                    .collect::<Vec<_>>()
            );
            runs.push(run);
        }
    }
    let report = report(&runs);
    println!("{report}");
    let dir = results_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("shards.md"), report)?;
    Ok(())
}

/// Enqueues and drains `JOBS` jobs on a queue of `shards` shards.
async fn measure(cluster: &RedisCluster, round: usize, shards: u32) -> Result<Run> {
    let mut config = Config::with_defaults();
    config.listen = "127.0.0.1:0".parse()?;
    config.redis_cluster = true;
    config.redis_url = cluster.urls().join(",");
    config.key_prefix = format!("bench-{}-{round}-{shards}", std::process::id());
    config.bulk_floor = 0.0;
    let app = Application::build(config).await?;
    let base = format!("http://{}/v1/queues/hot", app.local_addr());
    let stop = app.shutdown_token();
    let running = tokio::spawn(app.run_until_stopped());
    let http = reqwest::Client::new();
    let settings: Value = http
        .patch(format!("{base}/settings"))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"shards": shards}).to_string())
        .send()
        .await?
        .json()
        .await?;
    ensure!(
        settings["shards"] == json!(shards),
        "not sharded: {settings}"
    );

    let before = cpu_us(cluster).await?;
    let started = Instant::now();
    let batches = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let (http, base, batches) = (http.clone(), base.clone(), Arc::clone(&batches));
            tokio::spawn(async move {
                while batches.fetch_add(1, Ordering::Relaxed) < JOBS / BATCH {
                    let jobs: Vec<Value> = (0..BATCH)
                        .map(|n| json!({"task": "t", "args": {"n": n}}))
                        .collect();
                    let answer = http
                        .post(format!("{base}/jobs/batch"))
                        .json(&json!({"jobs": jobs}))
                        .send()
                        .await?;
                    ensure!(answer.status().is_success(), "enqueue: {}", answer.status());
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for producer in producers {
        producer.await??;
    }
    let drained = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (http, base, drained) = (http.clone(), base.clone(), Arc::clone(&drained));
            tokio::spawn(work(http, base, drained))
        })
        .collect();
    for worker in workers {
        worker.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = cpu_us(cluster).await?;
    ensure!(
        drained.load(Ordering::Relaxed) == JOBS,
        "drained {} of {JOBS}",
        drained.load(Ordering::Relaxed)
    );
    stop.cancel();
    running.await??;
    Ok(Run {
        shards,
        seconds,
        cpu_us: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
    })
}

/// A worker: claims up to `MAX_JOBS`, acks them with its next claim, until
/// every job is done.
async fn work(http: reqwest::Client, base: String, drained: Arc<AtomicUsize>) -> Result<()> {
    let mut held: Vec<Value> = Vec::new();
    loop {
        let acks: Vec<Value> = held
            .iter()
            .map(|job| json!({"id": job["id"], "lease_token": job["lease_token"]}))
            .collect();
        let answer: Value = http
            .post(format!("{base}/claim"))
            .json(&json!({"max_jobs": MAX_JOBS, "ack": acks}))
            .send()
            .await?
            .json()
            .await?;
        let acked = answer["acked"]
            .as_array()
            .map_or(0, |acks| acks.iter().filter(|a| a["status"] == 204).count());
        ensure!(acked == held.len(), "acks refused: {answer}");
        drained.fetch_add(acked, Ordering::Relaxed);
        held = answer["jobs"].as_array().cloned().unwrap_or_default();
        if held.is_empty() && drained.load(Ordering::Relaxed) >= JOBS {
            return Ok(());
        }
        if held.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The median of each figure over the rounds, per number of shards, and
/// the ratios of 3 shards to 1.
fn report(runs: &[Run]) -> String {
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let mut rows: BTreeMap<u32, (f64, Vec<f64>, f64, f64)> = BTreeMap::new();
    for shards in SHARDS {
        let of: Vec<&Run> = runs.iter().filter(|r| r.shards == shards).collect();
        let primaries = of[0].cpu_us.len();
        let per_primary: Vec<f64> = (0..primaries)
            .map(|p| median(of.iter().map(|r| r.per_job()[p]).collect()))
            .collect();
        rows.insert(
            shards,
            (
                median(
                    of.iter()
                        .map(|r| r.total_us() as f64 / JOBS as f64)
                        .collect(),
                ),
                per_primary,
                median(of.iter().map(|r| r.busiest_share()).collect()),
                median(of.iter().map(|r| JOBS as f64 / r.seconds).collect()),
            ),
        );
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# One hot queue over 1 and 3 shards\n\n`cargo bench --bench shards`: a local Redis Cluster \
         of three primaries, {JOBS} jobs enqueued (8 producers, {BATCH} a request) and drained \
         (32 workers, claim {MAX_JOBS} and ack them with the next claim), {ROUNDS} rounds, the \
         order of 1 and 3 shards swapped each round; medians. All processes share this \
         machine's cores.\n"
    );
    let mut table = Table::new(
        [
            "Shards",
            "Redis CPU per job, all primaries",
            "per primary (µs/job)",
            "busiest primary's share",
        ]
        .map(|heading| (heading, Align::Left))
        .into_iter()
        .chain([("jobs/s", Align::Right)]),
    );
    for (shards, (total, per_primary, share, rate)) in &rows {
        let primaries: Vec<String> = per_primary.iter().map(|us| format!("{us:.1}")).collect();
        table.row([
            shards.to_string(),
            format!("{total:.1} µs"),
            primaries.join(" / "),
            format!("{:.0}%", share * 100.0),
            format!("{rate:.0}"),
        ]);
    }
    out.push_str(table.text());
    if let (Some(one), Some(three)) = (rows.get(&1), rows.get(&3)) {
        let busiest = |row: &(f64, Vec<f64>, f64, f64)| row.1.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            out,
            "\n3 shards against 1: busiest primary's CPU per job ×{:.2}, all primaries' ×{:.2} \
             (the cost of sharding), throughput ×{:.2}.",
            busiest(three) / busiest(one),
            three.0 / one.0,
            three.3 / one.3
        );
    }
    out
}

/// Each primary's CPU so far, in µs.
async fn cpu_us(cluster: &RedisCluster) -> Result<Vec<u64>> {
    let mut cpu = Vec::new();
    for url in cluster.urls() {
        let mut con = connect(&redis::Client::open(url.as_str())?).await?;
        cpu.push(redis_info::cpu_us(&info(&mut con, &["cpu"]).await?)?);
    }
    Ok(cpu)
}
