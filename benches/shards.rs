//! One hot queue on a local Redis Cluster of three primaries, split over
//! 1 shard and over 3: how its Redis work spreads over the primaries, and
//! what a sharded claim costs.
//!
//! ```sh
//! cargo bench --bench shards
//! ```
//!
//! It starts three cluster-enabled `redis-server`s on free ports (no
//! persistence) and joins them with `redis-cli --cluster create`, then
//! runs prioq in this process against them. Each round, for 1 shard and
//! for 3 (in turn, the order swapped every round), it enqueues 20,000 jobs
//! over HTTP (8 producers, 50 jobs a request) and drains them with 32
//! workers (claim 10, ack them with the next claim). It reads each
//! primary's `used_cpu_sys` + `used_cpu_user` before and after. On a
//! 2-core machine the three primaries, prioq and the load share the cores,
//! so throughput cannot grow with shards; what the figures show is where
//! the Redis work goes: per primary, its CPU per job and its share of the
//! queue's Redis CPU. It writes `bench/shards.md`.
//!
//! Invoked without `--bench` (as `cargo test --all-targets` does), it does
//! nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use prioq::config::Config;
use prioq::startup::Application;
use serde_json::{Value, json};

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
    let cluster = Cluster::start()?;
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
    std::fs::create_dir_all("bench")?;
    std::fs::write("bench/shards.md", report)?;
    Ok(())
}

/// Enqueues and drains `JOBS` jobs on a queue of `shards` shards.
async fn measure(cluster: &Cluster, round: usize, shards: u32) -> Result<Run> {
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

    let before = cluster.cpu_us()?;
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
    let after = cluster.cpu_us()?;
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
    let _ = writeln!(
        out,
        "| Shards | Redis CPU per job, all primaries | per primary (µs/job) | busiest primary's share | jobs/s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (shards, (total, per_primary, share, rate)) in &rows {
        let primaries: Vec<String> = per_primary.iter().map(|us| format!("{us:.1}")).collect();
        let _ = writeln!(
            out,
            "| {shards} | {total:.1} µs | {} | {:.0}% | {rate:.0} |",
            primaries.join(" / "),
            share * 100.0
        );
    }
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

/// Three cluster-enabled redis-servers joined into one cluster; they die
/// with the wrapper shell when this process drops it.
struct Cluster {
    ports: Vec<u16>,
    wrapper: Child,
}

impl Cluster {
    fn start() -> Result<Self> {
        let ports = free_ports(3)?;
        let servers: String = ports
            .iter()
            .map(|port| {
                format!(
                    "redis-server --port {port} --bind 127.0.0.1 --cluster-enabled yes \
                     --cluster-config-file nodes-{port}.conf --dir \"$dir\" --save '' \
                     --appendonly no >/dev/null 2>&1 & pids=\"$pids $!\"; "
                )
            })
            .collect();
        let script = format!("dir=$(mktemp -d); pids=; {servers} read _; kill -9 $pids");
        let wrapper = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .context("redis-server must be installed")?;
        let cluster = Self { ports, wrapper };
        for url in cluster.urls() {
            let client = redis::Client::open(url.as_str())?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while client.get_connection().is_err() {
                ensure!(Instant::now() < deadline, "{url} did not come up");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let nodes: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .status()
            .context("redis-cli must be installed")?;
        ensure!(created.success(), "redis-cli --cluster create failed");
        for url in cluster.urls() {
            let mut conn = redis::Client::open(url.as_str())?.get_connection()?;
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn)?;
                if info.contains("cluster_state:ok") {
                    break;
                }
                ensure!(Instant::now() < deadline, "the cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(cluster)
    }

    fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// Each primary's CPU so far, in µs.
    fn cpu_us(&self) -> Result<Vec<u64>> {
        self.urls()
            .iter()
            .map(|url| {
                let mut conn = redis::Client::open(url.as_str())?.get_connection()?;
                let info: String = redis::cmd("INFO").arg("cpu").query(&mut conn)?;
                let seconds = |field: &str| -> Result<f64> {
                    info.lines()
                        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
                        .context("INFO cpu")?
                        .trim()
                        .parse::<f64>()
                        .context("a number")
                };
                Ok(((seconds("used_cpu_sys")? + seconds("used_cpu_user")?) * 1e6) as u64)
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        drop(self.wrapper.stdin.take());
        let _ = self.wrapper.wait();
    }
}

/// Ports free now, whose cluster-bus ports (+10000) are free too.
fn free_ports(count: usize) -> Result<Vec<u16>> {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let ports: Vec<u16> = (21_000..31_000)
        .step_by(7)
        .filter(|port| free(*port) && free(port + 10_000))
        .take(count)
        .collect();
    if ports.len() < count {
        bail!("no {count} free ports");
    }
    Ok(ports)
}
