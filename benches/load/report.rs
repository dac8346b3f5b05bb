//! What a run is and writes: the results, `results.json`, and the
//! Markdown (`markdown`) and the chart (`chart`) made from them; the lookups
//! and labels those share.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::args::{Args, Op};
use crate::bullmq::BullmqResult;
use crate::functions::PartCost;
use crate::jobs::{BATCH, PAYLOAD_BYTES, PRIORITY, TASK};
use crate::long_poll::{IdleResult, WakeResult};
use crate::measure::RunRecord;
use crate::mix::MixResult;
use crate::neighbour::NeighbourResult;
use crate::procs::Pinning;
use crate::{chart, markdown, raw};

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MemoryResult {
    pub depth: u64,
    pub prefill_seconds: f64,
    pub prefill_jobs_per_s: f64,
    pub used_memory_before: u64,
    pub used_memory_after: u64,
    pub bytes_per_job: f64,
    /// Bytes of `args` per job, subtracted.
    pub payload_bytes: usize,
    pub bytes_per_job_beyond_payload: f64,
    /// The stored record (header, task, args), for reference.
    pub stored_record_bytes: usize,
}

/// What a job kept `completed` after its ack costs in Redis.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RetentionResult {
    pub jobs: usize,
    /// Bytes of `args` per job.
    pub payload_bytes: usize,
    /// Per job acked without a result.
    pub bytes_per_job: f64,
    /// The result's size in the second measurement, JSON as sent.
    pub result_bytes: usize,
    pub bytes_per_job_with_result: f64,
    /// What each byte of result adds.
    pub bytes_per_result_byte: f64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Results {
    pub tool: String,
    pub mode: String,
    pub started_at: String,
    pub wall_seconds: f64,
    pub prioq_revision: String,
    pub machine: serde_json::Value,
    pub redis_version: String,
    pub setup: serde_json::Value,
    /// The cores each process was allowed on (`Cpus_allowed_list`).
    pub cores: BTreeMap<String, String>,
    pub memory: Vec<MemoryResult>,
    pub retention: Option<RetentionResult>,
    /// The parts of the `exchange` function, each on its own.
    #[serde(default)]
    pub functions: Vec<PartCost>,
    /// The realistic mix, by variant.
    #[serde(default)]
    pub mix: Vec<MixResult>,
    pub runs: Vec<RunRecord>,
    pub wake: Option<WakeResult>,
    pub idle: Option<IdleResult>,
    pub neighbour: Option<NeighbourResult>,
    pub bullmq: BullmqResult,
    pub targets: Vec<Target>,
}

pub fn setup(args: &Args, own_redis: bool, pinning: &Pinning, clk_tck: f64) -> serde_json::Value {
    json!({
        "redis": if own_redis { "started by the bench: --save '' --appendonly no" } else { "given with --redis-url" },
        "prioq": "one release prioq process with its defaults (info logs to /dev/null)",
        "prioq_env": args.prioq_env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "pinning": pinning.note,
        "payload": format!("args of {PAYLOAD_BYTES} bytes, task \"{TASK}\", priority {PRIORITY}"),
        "batch": BATCH,
        "warmup_s": args.warmup.as_secs_f64(),
        "duration_s": args.duration.as_secs_f64(),
        "http1": "the bench's own HTTP/1.1 client: one keep-alive connection per client, TCP_NODELAY",
        "http2": format!("h2c with prior knowledge (h2 crate): the clients share {} connections", args.h2_connections),
        "worker_loop": "half the clients enqueue single jobs, half loop on claim {max_jobs: 1} carrying the ack of the job the claim before leased; a producer enqueues only as workers claim, so the depth holds; jobs/s counts acked jobs",
        "raw": format!("{} connections, each pipelining 100 single-job or 2 hundred-job function calls per round trip", raw::CONNECTIONS),
        "depth_keeping": "pending held in [depth, depth + 2 x slack] (slack = depth/50 clamped to 2000..20000, at least twice the jobs the clients can hold claimed at once): once it has moved by a slack, refilled to the top with INCRBY + HSET + ZADD writing what prioq's enqueues write, or drained to the bottom with ZPOPMAX + HDEL; never an FCALL, and its commands are taken out of the per-command figures; leases a run leaves are acked after its window",
        "cpu": "bench and prioq: utime + stime from /proc/<pid>/stat; redis-server: used_cpu_sys + used_cpu_user from INFO cpu",
        "clk_tck": clk_tck,
    })
}

pub fn human(n: f64) -> String {
    if !n.is_finite() {
        return "–".into();
    }
    let n = n.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn depth_label(d: u64) -> String {
    if d >= 1_000_000 && d.is_multiple_of(1_000_000) {
        format!("{}M", d / 1_000_000)
    } else if d >= 1_000 && d.is_multiple_of(1_000) {
        format!("{}k", d / 1_000)
    } else {
        d.to_string()
    }
}

pub fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

pub fn path_label(path: &str) -> &str {
    match path {
        "http1" => "HTTP/1.1",
        "http2" => "HTTP/2",
        other => other,
    }
}

pub fn op_label(name: &str) -> &'static str {
    Op::parse(name).map_or("?", Op::label)
}

pub fn print_run(r: &RunRecord) {
    let lat: Vec<String> = r
        .latency
        .iter()
        .map(|(call, l)| format!("{call} {:.2}/{:.2}/{:.1}", l.p50_ms, l.p99_ms, l.max_ms))
        .collect();
    println!(
        "{:5} {:16} d={:<5} c={:<3} {:>9} jobs/s{} | {} | redis fcall {:.1} cpu {:.1} us/job | prioq {} us/req | cpu us/job b/p/r {:.0}/{:.0}/{:.0}{}",
        r.path,
        r.op,
        depth_label(r.depth),
        r.concurrency,
        human(r.jobs_per_s),
        r.vs_raw
            .map_or(String::new(), |v| format!(" ({:.0}% of raw)", v * 100.0)),
        lat.join(", "),
        r.redis_fcall_us_per_job,
        r.cpu_us_per_job.redis,
        r.prioq_cpu_us_per_request
            .map_or("–".into(), |us| format!("{us:.1}")),
        r.cpu_us_per_job.bench,
        r.cpu_us_per_job.prioq,
        r.cpu_us_per_job.redis,
        if r.errors > 0 {
            format!(
                " | {} errors, last: {}",
                r.errors,
                r.last_error.as_deref().unwrap_or("")
            )
        } else {
            String::new()
        }
    );
}

/// The run of `path`, `op` and `depth` at concurrency `c`, or the fastest
/// at any concurrency.
pub fn find<'a>(
    runs: &'a [RunRecord],
    path: &str,
    op: Op,
    depth: u64,
    c: Option<usize>,
) -> Option<&'a RunRecord> {
    fastest(runs, path, op, depth, c, |_| true)
}

/// Like `find`, among the runs whose claims never came back short: a run
/// that emptied its queue measured the housekeeper's refills, not the path.
pub fn find_held<'a>(
    runs: &'a [RunRecord],
    path: &str,
    op: Op,
    depth: u64,
    c: Option<usize>,
) -> Option<&'a RunRecord> {
    fastest(runs, path, op, depth, c, |r| r.short_claims == 0)
}

fn fastest<'a>(
    runs: &'a [RunRecord],
    path: &str,
    op: Op,
    depth: u64,
    c: Option<usize>,
    keep: impl Fn(&RunRecord) -> bool,
) -> Option<&'a RunRecord> {
    runs.iter()
        .filter(|r| {
            r.path == path
                && r.op == op.name()
                && r.depth == depth
                && c.is_none_or(|c| r.concurrency == c)
                && keep(r)
        })
        .max_by(|a, b| a.jobs_per_s.total_cmp(&b.jobs_per_s))
}

/// The runs of `path` and `op` at the shallow and the deep depth, at the
/// same concurrency: the highest at which both held their depth.
pub fn depth_pair<'a>(
    runs: &'a [RunRecord],
    path: &str,
    op: Op,
    shallow: u64,
    deep: u64,
) -> Option<(&'a RunRecord, &'a RunRecord)> {
    let mut concurrency: Vec<usize> = runs
        .iter()
        .filter(|r| r.path == path && r.op == op.name())
        .map(|r| r.concurrency)
        .collect();
    concurrency.sort_unstable();
    concurrency.dedup();
    concurrency.into_iter().rev().find_map(|c| {
        Some((
            find_held(runs, path, op, shallow, Some(c))?,
            find_held(runs, path, op, deep, Some(c))?,
        ))
    })
}

pub fn depths(results: &Results) -> (u64, u64) {
    let mut depths: Vec<u64> = results.runs.iter().map(|r| r.depth).collect();
    depths.sort_unstable();
    (
        depths.first().copied().unwrap_or(0),
        depths.last().copied().unwrap_or(0),
    )
}

pub fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("# wrote {}", path.display());
    Ok(())
}

/// The file `stem.ext` of this run in `--out`, with the `--tag` prefix.
pub fn out_file(args: &Args, stem: &str, ext: &str) -> PathBuf {
    args.out_dir.join(if args.tag.is_empty() {
        format!("{stem}.{ext}")
    } else {
        format!("{}-{stem}.{ext}", args.tag)
    })
}

/// Writes the JSON, the markdown and the plot, and prints the markdown.
pub fn write_all(results: &Results, args: &Args) -> Result<()> {
    std::fs::create_dir_all(&args.out_dir)?;
    write(
        &out_file(args, "results", "json"),
        &serde_json::to_string_pretty(results)?,
    )?;
    write_reports(results, args)
}

/// Writes the markdown and the plot of `results`, and prints the markdown.
fn write_reports(results: &Results, args: &Args) -> Result<()> {
    let markdown = markdown::markdown(results, args);
    write(&out_file(args, "results", "md"), &markdown)?;
    write(
        &out_file(args, "throughput", "svg"),
        &chart::svg(results, args)?,
    )?;
    println!("\n{markdown}");
    Ok(())
}

/// Writes the markdown and the plot again from the `results.json` at
/// `path`, measuring nothing: what a change to the report makes of a run
/// already made. The run's shape (durations, concurrencies, depths, ops)
/// comes from the file, not from `args`.
pub fn rewrite_from(path: &Path, mut args: Args) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut results: Results = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a results.json", path.display()))?;
    // The targets are part of the report: held to as the code states them.
    results.targets = crate::targets::targets(&results);
    let seconds = |key: &str| Duration::from_secs_f64(results.setup[key].as_f64().unwrap_or(0.0));
    args.quick = results.mode == "quick";
    args.warmup = seconds("warmup_s");
    args.duration = seconds("duration_s");
    args.concurrency = results
        .runs
        .iter()
        .filter(|r| r.path != "raw")
        .map(|r| r.concurrency)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    args.depths = results
        .runs
        .iter()
        .map(|r| r.depth)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    args.ops = Op::ALL
        .into_iter()
        .filter(|op| results.runs.iter().any(|r| r.op == op.name()))
        .collect();
    std::fs::create_dir_all(&args.out_dir)?;
    write_reports(&results, &args)
}
