//! BullMQ end to end in the same run: `benches/bullmq/e2e.mjs` on Node.js,
//! against a redis-server of its own started and pinned like prioq's, its
//! Redis counters read when the script opens and closes its window.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::args::Args;
use crate::measure::Latency;
use crate::procs::{self, Pinning, Role};
use crate::redis_stats::{self, RedisCounters};

/// The Worker's concurrency, and the prioq figures it is compared with.
pub const CONCURRENCY: usize = 64;
/// BullMQ's two paths: priority 1 on every job (prioritized, like prioq,
/// which always orders by priority), and none (the plain FIFO wait list).
pub const VARIANTS: [&str; 3] = ["priority", "fifo", "mix"];

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct BullmqResult {
    /// Why BullMQ was not run, when it was not.
    pub not_run: Option<String>,
    pub bullmq_version: Option<String>,
    pub ioredis_version: Option<String>,
    pub node_version: Option<String>,
    pub redis_version: Option<String>,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub runs: Vec<BullmqRun>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BullmqRun {
    pub variant: String,
    pub concurrency: usize,
    pub producers: usize,
    pub backlog_bound: usize,
    pub jobs: u64,
    pub seconds: f64,
    pub jobs_per_s: f64,
    pub failed: u64,
    pub node_cpu_us_per_job: f64,
    /// The redis-server process's CPU per job (`INFO cpu`).
    pub redis_cpu_us_per_job: f64,
    /// `EVALSHA` + `EVAL` time per job (`INFO commandstats`).
    pub redis_scripts_us_per_job: f64,
    pub script_calls_per_job: f64,
    pub redis_commands_per_job: f64,
    /// `queue.add` awaited, and from the add to the processor (ms resolution).
    pub add_latency: Latency,
    pub pickup_latency: Latency,
    pub node_cores: String,
    pub redis_cores: String,
}

/// The script's last line.
#[derive(Debug, Deserialize)]
struct Report {
    producers: usize,
    backlog_bound: usize,
    seconds: f64,
    completed: u64,
    failed: u64,
    node_cpu_s: f64,
    latency: ReportLatency,
}

#[derive(Debug, Deserialize)]
struct ReportLatency {
    add: Latency,
    pickup: Latency,
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/bullmq")
}

/// Runs every variant; a missing or failing Node.js or npm makes the result
/// "not run" with the reason, never an error of the bench.
pub async fn run(args: &Args, pinning: &Pinning) -> BullmqResult {
    let mut result = BullmqResult {
        // Node's JIT needs longer than prioq to reach its pace.
        warmup_s: args.warmup.max(Duration::from_secs(2)).as_secs_f64(),
        duration_s: args.duration.max(Duration::from_secs(4)).as_secs_f64(),
        ..BullmqResult::default()
    };
    if let Err(error) = run_variants(&mut result, pinning).await {
        result.not_run = Some(format!("{error:#}"));
    }
    result
}

async fn run_variants(result: &mut BullmqResult, pinning: &Pinning) -> Result<()> {
    let node = version_of("node")?;
    let major: u32 = node
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| anyhow!("cannot read the Node.js version {node}"))?;
    if major < 20 {
        bail!("Node.js {node} is older than 20");
    }
    result.node_version = Some(node);
    version_of("npm")?;
    install()?;
    result.bullmq_version = installed_version("bullmq");
    result.ioredis_version = installed_version("ioredis");

    let redis_proc = procs::start_redis(pinning);
    let url = redis_proc.url();
    let mut con = redis_stats::connect(&redis::Client::open(url.as_str())?).await?;
    result.redis_version = redis_stats::info(&mut con, &["server"])
        .await?
        .get("redis_version")
        .cloned();
    for variant in VARIANTS {
        redis::cmd("FLUSHALL").query_async::<()>(&mut con).await?;
        let run = run_one(result, pinning, &url, variant, &mut con, redis_proc.pid())
            .await
            .with_context(|| format!("BullMQ {variant}"))?;
        println!(
            "bullmq {variant:8} c={CONCURRENCY} {:>9.0} jobs/s | node {:.0} us/job | redis cpu {:.1} us/job, scripts {:.1} us/job | add p50/p99 {:.2}/{:.2} ms | cores node {} redis {}",
            run.jobs_per_s,
            run.node_cpu_us_per_job,
            run.redis_cpu_us_per_job,
            run.redis_scripts_us_per_job,
            run.add_latency.p50_ms,
            run.add_latency.p99_ms,
            run.node_cores,
            run.redis_cores,
        );
        result.runs.push(run);
    }
    Ok(())
}

fn version_of(program: &str) -> Result<String> {
    let out = Command::new(program)
        .arg("--version")
        .output()
        .with_context(|| format!("no {program}"))?;
    if !out.status.success() {
        bail!("{program} --version failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The version of a package under benches/bullmq/node_modules.
fn installed_version(package: &str) -> Option<String> {
    let path = dir()
        .join("node_modules")
        .join(package)
        .join("package.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["version"].as_str().map(str::to_owned)
}

/// `npm ci` unless node_modules already holds the pinned versions.
fn install() -> Result<()> {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("package.json"))
            .context("benches/bullmq/package.json")?,
    )?;
    let pinned = manifest["dependencies"]
        .as_object()
        .ok_or_else(|| anyhow!("no dependencies in benches/bullmq/package.json"))?;
    if pinned
        .iter()
        .all(|(name, version)| installed_version(name).as_deref() == version.as_str())
    {
        return Ok(());
    }
    println!("# npm ci in benches/bullmq");
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir())
        .stdin(Stdio::null())
        .output()
        .context("cannot run npm")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        bail!(
            "npm ci failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    Ok(())
}

async fn run_one(
    result: &BullmqResult,
    pinning: &Pinning,
    url: &str,
    variant: &str,
    con: &mut redis::aio::MultiplexedConnection,
    redis_pid: u32,
) -> Result<BullmqRun> {
    // The realistic mix has its own shape: as many producers as prioq's.
    let producers = match variant {
        "mix" => crate::mix::PRODUCERS,
        _ => CONCURRENCY,
    };
    let mut command = tokio::process::Command::from(pinning.command("node", Role::Load));
    command
        .arg(dir().join("e2e.mjs"))
        .arg(url)
        .args(["--variant", variant])
        .args(["--concurrency", &CONCURRENCY.to_string()])
        .args(["--producers", &producers.to_string()])
        .args(["--warmup", &result.warmup_s.to_string()])
        .args(["--duration", &result.duration_s.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().context("cannot start node")?;
    let node_cores = child.id().map_or("?".into(), procs::cores_of);
    let stdout = child.stdout.take().context("no stdout from node")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut before: Option<RedisCounters> = None;
    let mut after: Option<RedisCounters> = None;
    let deadline = Duration::from_secs_f64(result.warmup_s + result.duration_s + 45.0);
    let report = tokio::time::timeout(deadline, async {
        while let Some(line) = lines.next_line().await? {
            let value: serde_json::Value =
                serde_json::from_str(&line).with_context(|| format!("node said: {line}"))?;
            match value["event"].as_str() {
                Some("measuring") => before = Some(redis_stats::counters(con).await?),
                Some("measured") => after = Some(redis_stats::counters(con).await?),
                _ => return Ok(serde_json::from_value::<Report>(value)?),
            }
        }
        bail!("node exited without a report: {}", child.wait().await?)
    })
    .await
    .map_err(|_| anyhow!("no report from node in {deadline:?}"))??;
    // It exits by itself once it has reported.
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let (Some(c0), Some(c1)) = (before, after) else {
        bail!("node did not mark its window");
    };
    let jobs = report.completed.max(1) as f64;
    let per_job = |a: u64, b: u64| b.saturating_sub(a) as f64 / jobs;
    Ok(BullmqRun {
        variant: variant.to_owned(),
        concurrency: CONCURRENCY,
        producers: report.producers,
        backlog_bound: report.backlog_bound,
        jobs: report.completed,
        seconds: report.seconds,
        jobs_per_s: report.completed as f64 / report.seconds,
        failed: report.failed,
        node_cpu_us_per_job: report.node_cpu_s * 1e6 / jobs,
        redis_cpu_us_per_job: per_job(c0.cpu_us, c1.cpu_us),
        redis_scripts_us_per_job: per_job(c0.scripts.1, c1.scripts.1),
        script_calls_per_job: per_job(c0.scripts.0, c1.scripts.0),
        // Less the INFO that opened the window.
        redis_commands_per_job: per_job(c0.total_commands + 1, c1.total_commands),
        add_latency: report.latency.add,
        pickup_latency: report.latency.pickup,
        node_cores,
        redis_cores: procs::cores_of(redis_pid),
    })
}
