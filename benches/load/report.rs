//! What a run writes: the targets, `results.json`, `results.md` and
//! `throughput.svg`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use crate::args::{Args, Op};
use crate::bullmq::{self, BullmqResult, BullmqRun};
use crate::http_load::worker_split;
use crate::jobs::{BATCH, PAYLOAD_BYTES, PRIORITY, TASK};
use crate::long_poll::{IdleResult, WakeResult};
use crate::measure::RunRecord;
use crate::neighbour::NeighbourResult;
use crate::procs::Pinning;
use crate::raw;

/// Request latency p99 of single-job end to end at c=64 in the previous
/// release (README, Performance: "each call 3.5 / 7.6").
const PREVIOUS_E2E_P99_MS: f64 = 7.6;
/// Commands in `INFO commandstats` that do not run inside a function.
const OUTSIDE_FUNCTIONS: [&str; 4] = ["fcall", "fcall_ro", "info", "ping"];

#[derive(Debug, Clone, Default, serde::Serialize)]
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
#[derive(Debug, Clone, serde::Serialize)]
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

#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    pub target: String,
    pub measured: String,
    pub met: Option<bool>,
}

#[derive(Debug, serde::Serialize)]
pub struct Results {
    pub tool: &'static str,
    pub mode: &'static str,
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

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn path_label(path: &str) -> &str {
    match path {
        "http1" => "HTTP/1.1",
        "http2" => "HTTP/2",
        other => other,
    }
}

fn op_label(name: &str) -> &'static str {
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
fn find<'a>(
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
fn find_held<'a>(
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
fn depth_pair<'a>(
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

fn bullmq_run<'a>(results: &'a Results, variant: &str) -> Option<&'a BullmqRun> {
    results.bullmq.runs.iter().find(|r| r.variant == variant)
}

fn depths(results: &Results) -> (u64, u64) {
    let mut depths: Vec<u64> = results.runs.iter().map(|r| r.depth).collect();
    depths.sort_unstable();
    (
        depths.first().copied().unwrap_or(0),
        depths.last().copied().unwrap_or(0),
    )
}

pub fn targets(results: &Results) -> Vec<Target> {
    let runs = &results.runs;
    let (shallow, deep) = depths(results);
    let d = depth_label(shallow);
    let mut out = Vec::new();
    let e2e = find(runs, "http1", Op::E2eSingle, shallow, Some(64));
    let e2e_h2 = find(runs, "http2", Op::E2eSingle, shallow, Some(64));
    let raw_e2e = find(runs, "raw", Op::E2eSingle, shallow, None);

    // Redis CPU per job.
    let mut parts = Vec::new();
    if let Some(r) = e2e {
        parts.push(format!(
            "{:.1} µs/job (FCALL {:.1}, outside it {:.1})",
            r.cpu_us_per_job.redis,
            r.redis_fcall_us_per_job,
            r.cpu_us_per_job.redis - r.redis_fcall_us_per_job
        ));
    }
    if let Some(r) = e2e_h2 {
        parts.push(format!("HTTP/2 {:.1} µs/job", r.cpu_us_per_job.redis));
    }
    if let Some(r) = raw_e2e {
        parts.push(format!(
            "raw pipelined {:.1} µs/job (FCALL {:.1})",
            r.cpu_us_per_job.redis, r.redis_fcall_us_per_job
        ));
    }
    for b in &results.bullmq.runs {
        parts.push(format!(
            "BullMQ {} {:.1} µs/job",
            b.variant, b.redis_cpu_us_per_job
        ));
    }
    out.push(Target {
        target: format!(
            "Redis CPU per job (`INFO cpu`), single-job end to end over HTTP/1.1 at c=64 (depth {d}) ≤ 35 µs"
        ),
        measured: if parts.is_empty() {
            "not run".into()
        } else {
            parts.join("; ")
        },
        met: e2e.map(|r| r.cpu_us_per_job.redis <= 35.0),
    });

    // prioq CPU per request.
    let per_request = |r: &RunRecord| r.prioq_cpu_us_per_request.unwrap_or(f64::NAN);
    out.push(Target {
        target: "prioq CPU per HTTP request on that path ≤ 25 µs".into(),
        measured: e2e.map_or("not run".into(), |r| {
            format!(
                "{:.1} µs/request ({:.0} µs/job, {:.2} requests/job){}",
                per_request(r),
                r.cpu_us_per_job.prioq,
                r.requests as f64 / r.jobs.max(1) as f64,
                e2e_h2.map_or(String::new(), |h| format!(
                    "; HTTP/2 {:.1} µs/request",
                    per_request(h)
                ))
            )
        }),
        met: e2e.map(|r| per_request(r) <= 25.0),
    });

    // Against BullMQ.
    for (op, at_least) in [(Op::E2eSingle, 1.0), (Op::WorkerLoop, 1.5)] {
        let h1 = find(runs, "http1", op, shallow, Some(64));
        let h2 = find(runs, "http2", op, shallow, Some(64));
        let prio = bullmq_run(results, "priority");
        let fifo = bullmq_run(results, "fifo");
        let ratios = |r: &RunRecord| {
            let vs = |b: Option<&BullmqRun>, name: &str| {
                b.map_or(String::new(), |b| {
                    format!(", {:.2}× BullMQ {name}", r.jobs_per_s / b.jobs_per_s)
                })
            };
            format!(
                "{} jobs/s{}{}",
                human(r.jobs_per_s),
                vs(prio, "prioritized"),
                vs(fifo, "FIFO")
            )
        };
        let mut parts = Vec::new();
        if let Some(r) = h1 {
            parts.push(format!("HTTP/1.1 {}", ratios(r)));
        }
        if let Some(r) = h2 {
            parts.push(format!("HTTP/2 {}", ratios(r)));
        }
        match (prio, fifo) {
            (Some(p), Some(f)) => parts.push(format!(
                "BullMQ prioritized {}, FIFO {} jobs/s",
                human(p.jobs_per_s),
                human(f.jobs_per_s)
            )),
            _ => parts.push(format!(
                "BullMQ not run: {}",
                results.bullmq.not_run.as_deref().unwrap_or("?")
            )),
        }
        let what = match op {
            Op::WorkerLoop => format!(
                "worker loop with the ack in the claim ({} producers + {} workers)",
                worker_split(64).0,
                worker_split(64).1
            ),
            _ => "single-job end to end (enqueue, claim, ack: three requests a job)".into(),
        };
        out.push(Target {
            target: format!(
                "{what} at c=64 ≥ {at_least:.1}× BullMQ end to end at c=64 (prioritized: priority 1 on every job, as prioq always orders by priority)"
            ),
            measured: parts.join("; "),
            met: h1
                .zip(prio)
                .map(|(r, b)| r.jobs_per_s >= at_least * b.jobs_per_s),
        });
    }

    // Batch paths vs raw Redis.
    let mut parts = Vec::new();
    let mut met = None;
    for op in [Op::EnqueueBatch, Op::ClaimAckBatch, Op::E2eBatch] {
        for depth in [shallow, deep] {
            if let (Some(h), Some(r)) = (
                find_held(runs, "http1", op, depth, None),
                find_held(runs, "raw", op, depth, None),
            ) {
                let ratio = h.jobs_per_s / r.jobs_per_s;
                met = Some(met.unwrap_or(true) && ratio >= 0.85);
                parts.push(format!(
                    "{} at {}: {} vs {} jobs/s = {} (c={})",
                    op.label(),
                    depth_label(depth),
                    human(h.jobs_per_s),
                    human(r.jobs_per_s),
                    pct(ratio),
                    h.concurrency
                ));
            } else if find(runs, "raw", op, depth, None).is_some() {
                parts.push(format!(
                    "{} at {}: not compared, the queue ran short",
                    op.label(),
                    depth_label(depth)
                ));
            }
            if deep == shallow {
                break;
            }
        }
    }
    out.push(Target {
        target: "batch paths over HTTP/1.1 ≥ 85% of raw Redis running the same functions (best concurrency whose claims never came back short)".into(),
        measured: parts.join("; "),
        met,
    });

    // Claims at depth.
    if deep > shallow {
        let mut parts = Vec::new();
        let mut met = None;
        for (path, op) in [
            ("http1", Op::ClaimAckSingle),
            ("http1", Op::ClaimAckBatch),
            ("raw", Op::ClaimAckSingle),
            ("raw", Op::ClaimAckBatch),
        ] {
            match depth_pair(runs, path, op, shallow, deep) {
                Some((s, d)) => {
                    let ratio = d.jobs_per_s / s.jobs_per_s;
                    if path == "http1" {
                        met = Some(met.unwrap_or(true) && ratio >= 0.9);
                    }
                    parts.push(format!(
                        "{} {} c={}: {} vs {} jobs/s = {}",
                        path_label(path),
                        op.label(),
                        s.concurrency,
                        human(d.jobs_per_s),
                        human(s.jobs_per_s),
                        pct(ratio)
                    ));
                }
                None if find(runs, path, op, shallow, None).is_some() => parts.push(format!(
                    "{} {}: not compared, the queue ran short",
                    path_label(path),
                    op.label()
                )),
                None => {}
            }
        }
        out.push(Target {
            target: format!(
                "claim rate at {} pending ≥ 90% of the rate at {} (HTTP/1.1, at the highest concurrency where neither run's claims came back short; raw for reference)",
                depth_label(deep),
                depth_label(shallow)
            ),
            measured: parts.join("; "),
            met,
        });
    }

    // Latency.
    out.push(Target {
        target: format!(
            "request latency p99, single-job end to end over HTTP/1.1 at c=64: no worse than the previous release's {PREVIOUS_E2E_P99_MS} ms (previous release, README)"
        ),
        measured: e2e.map_or("not run".into(), |r| {
            let calls: Vec<String> = r
                .latency
                .iter()
                .map(|(call, l)| format!("{call} {:.2}", l.p99_ms))
                .collect();
            format!(
                "p99 {:.2} ms, p50 {:.2} ms over {} requests (p99 by call: {}){}",
                r.latency_all.p99_ms,
                r.latency_all.p50_ms,
                r.latency_all.n,
                calls.join(", "),
                e2e_h2.map_or(String::new(), |h| format!(
                    "; HTTP/2 p99 {:.2} ms",
                    h.latency_all.p99_ms
                ))
            )
        }),
        met: e2e.map(|r| r.latency_all.p99_ms <= PREVIOUS_E2E_P99_MS),
    });

    // Memory.
    if let Some(m) = results.memory.iter().max_by_key(|m| m.depth) {
        out.push(Target {
            target: "Redis memory per queued job beyond its payload ≤ 250 B".into(),
            measured: format!(
                "{:.0} B/job beyond the {PAYLOAD_BYTES}-byte args ({:.0} B/job in all, over {} jobs; record {} B)",
                m.bytes_per_job_beyond_payload,
                m.bytes_per_job,
                depth_label(m.depth),
                m.stored_record_bytes
            ),
            met: Some(m.bytes_per_job_beyond_payload <= 250.0),
        });
    }

    if let Some(r) = &results.retention {
        out.push(Target {
            target: "Redis memory per job kept completed after its ack, and per byte of its result (stated, no bound)".into(),
            measured: format!(
                "{:.0} B/job with {}-byte args and no result; {:.0} B/job with a {}-byte result: {:.2} B per result byte (over {} jobs)",
                r.bytes_per_job,
                r.payload_bytes,
                r.bytes_per_job_with_result,
                r.result_bytes,
                r.bytes_per_result_byte,
                r.jobs
            ),
            met: None,
        });
    }

    if let Some(w) = &results.wake {
        let s = &w.after_enqueue_sent;
        out.push(Target {
            target: "long poll on instance A answered within 10 ms (p99) of an enqueue on B".into(),
            measured: format!(
                "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms after the enqueue was sent; {} of {} rounds woken",
                s.p50_ms, s.p99_ms, s.max_ms, w.woken, w.rounds
            ),
            met: Some(s.p99_ms <= 10.0 && w.missed == 0),
        });
    }
    if let Some(i) = &results.idle {
        out.push(Target {
            target: "an idle long poll costs Redis at most about one command per second".into(),
            measured: format!(
                "{:.2} commands/s per poll, counting the commands inside functions ({:.2} function calls/s) over {} polls",
                i.commands_per_s_per_poll, i.function_calls_per_s_per_poll, i.polls
            ),
            met: Some(i.commands_per_s_per_poll <= 1.05),
        });
    }
    if let Some(n) = &results.neighbour {
        let (g, p) = (&n.grouped, &n.plain);
        out.push(Target {
            target: format!(
                "noisy neighbour: a group trickling one job per 20 ms next to a group flooding batches ({} s a side): its jobs wait (enqueue to claim, p99) at most a tenth as long with groups as without",
                n.seconds
            ),
            measured: format!(
                "with groups p50 {:.1} ms, p99 {:.1} ms ({} of {} unclaimed); without p50 {:.1} ms, p99 {:.1} ms ({} of {} unclaimed; {} flood jobs enqueued, {} claimed)",
                g.trickle.p50_ms,
                g.trickle.p99_ms,
                g.unclaimed,
                g.trickled,
                p.trickle.p50_ms,
                p.trickle.p99_ms,
                p.unclaimed,
                p.trickled,
                p.flooded,
                p.claimed
            ),
            met: Some(g.trickle.p99_ms * 10.0 <= p.trickle.p99_ms),
        });
    }
    out
}

/// jobs/s, marked when claims came back short.
fn marked(r: &RunRecord) -> String {
    if r.short_claims > 0 {
        format!("{}†", human(r.jobs_per_s))
    } else {
        human(r.jobs_per_s)
    }
}

/// Every op and depth: jobs/s by concurrency, next to raw Redis.
fn throughput_table(md: &mut String, results: &Results, args: &Args) {
    let runs = &results.runs;
    let _ = write!(md, "| jobs/s | protocol | depth |");
    for c in &args.concurrency {
        let _ = write!(md, " c={c} |");
    }
    let _ = writeln!(md, " raw Redis | best / raw |");
    let _ = write!(md, "|---|---|---|");
    for _ in &args.concurrency {
        let _ = write!(md, "---:|");
    }
    let _ = writeln!(md, "---:|---:|");
    for op in &args.ops {
        for path in ["http1", "http2"] {
            for &depth in &args.depths {
                if find(runs, path, *op, depth, None).is_none() {
                    continue;
                }
                let _ = write!(
                    md,
                    "| {} | {} | {} |",
                    op.label(),
                    path_label(path),
                    depth_label(depth)
                );
                for &c in &args.concurrency {
                    let cell = find(runs, path, *op, depth, Some(c)).map_or("–".into(), marked);
                    let _ = write!(md, " {cell} |");
                }
                let raw = find(runs, "raw", *op, depth, None);
                let best = find(runs, path, *op, depth, None);
                let _ = writeln!(
                    md,
                    " {} | {} |",
                    raw.map_or("–".into(), marked),
                    match (best, raw) {
                        (Some(b), Some(r)) => pct(b.jobs_per_s / r.jobs_per_s),
                        _ => "–".into(),
                    }
                );
            }
        }
    }
    if results.runs.iter().any(|r| r.short_claims > 0) {
        let _ = writeln!(
            md,
            "\n† Some claims of the run came back short: its clients claimed faster than the housekeeper could refill the queue, so the figure is partly the housekeeper's; the targets leave such runs out."
        );
    }
}

/// At the shallow depth: raw and HTTP at c=64, what a job costs each process.
fn cost_table(md: &mut String, results: &Results, args: &Args) {
    let (shallow, _) = depths(results);
    let _ = writeln!(
        md,
        "\nCost per job at depth {} (HTTP at c=64): CPU µs per job of each process (bench and prioq from `/proc/<pid>/stat`, redis-server from `INFO cpu`), Redis `FCALL` µs per job from `INFO commandstats`, prioq CPU per HTTP request, and the latency of every request of the run.\n",
        depth_label(shallow)
    );
    let _ = writeln!(
        md,
        "| path | operation | jobs/s | CPU µs/job bench / prioq / redis | Redis FCALL µs/job | prioq µs/request | requests/job | latency p50 / p99 (ms) |"
    );
    let _ = writeln!(md, "|---|---|---:|---|---:|---:|---:|---|");
    for op in &args.ops {
        for (path, c) in [("raw", None), ("http1", Some(64)), ("http2", Some(64))] {
            let Some(r) = find(&results.runs, path, *op, shallow, c) else {
                continue;
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} / {} / {:.1} | {:.1} | {} | {:.2} | {:.2} / {:.2} |",
                path_label(path),
                op.label(),
                human(r.jobs_per_s),
                r.cpu_us_per_job.bench,
                if path == "raw" {
                    "–".into()
                } else {
                    format!("{:.0}", r.cpu_us_per_job.prioq)
                },
                r.cpu_us_per_job.redis,
                r.redis_fcall_us_per_job,
                r.prioq_cpu_us_per_request
                    .map_or("–".into(), |us| format!("{us:.1}")),
                r.requests as f64 / r.jobs.max(1) as f64,
                r.latency_all.p50_ms,
                r.latency_all.p99_ms,
            );
        }
    }
}

fn bullmq_table(md: &mut String, results: &Results) {
    let b = &results.bullmq;
    let _ = writeln!(md, "\n### BullMQ, same machine, same run\n");
    if let Some(reason) = &b.not_run {
        let _ = writeln!(md, "BullMQ not run: {reason}.");
        return;
    }
    let _ = writeln!(
        md,
        "BullMQ {} (ioredis {}) on Node.js {}, against a redis-server {} of its own started like prioq's; `bench/bullmq/e2e.mjs`: {} producers each adding single jobs (`queue.add`, the same 200-byte data, `removeOnComplete`, `removeOnFail`) as the worker completes them (backlog at most {}), one `Worker` with `concurrency: {}` whose processor returns at once; {} s measured after {} s of warm-up. Node CPU from `process.cpuUsage()`, Redis CPU from `INFO cpu`, script time from `INFO commandstats` (`EVALSHA`).\n",
        b.bullmq_version.as_deref().unwrap_or("?"),
        b.ioredis_version.as_deref().unwrap_or("?"),
        b.node_version.as_deref().unwrap_or("?"),
        b.redis_version.as_deref().unwrap_or("?"),
        b.runs.first().map_or(0, |r| r.producers),
        b.runs.first().map_or(0, |r| r.backlog_bound),
        bullmq::CONCURRENCY,
        b.duration_s,
        b.warmup_s,
    );
    let _ = writeln!(
        md,
        "| system | path | jobs/s | client CPU µs/job (bench or Node) | prioq CPU µs/job | Redis CPU µs/job | Redis script µs/job | Redis commands/job | latency p50 / p99 (ms) | cores |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---|---|");
    for r in &b.runs {
        let _ = writeln!(
            md,
            "| BullMQ | {} (c={}) | {} | {:.0} | – | {:.1} | {:.1} ({:.2} calls) | {:.1} | add {:.2} / {:.2}; add → processor {:.0} / {:.0} | Node {}, redis {} |",
            if r.variant == "priority" {
                "prioritized (priority 1)"
            } else {
                "FIFO (no priority)"
            },
            r.concurrency,
            human(r.jobs_per_s),
            r.node_cpu_us_per_job,
            r.redis_cpu_us_per_job,
            r.redis_scripts_us_per_job,
            r.script_calls_per_job,
            r.redis_commands_per_job,
            r.add_latency.p50_ms,
            r.add_latency.p99_ms,
            r.pickup_latency.p50_ms,
            r.pickup_latency.p99_ms,
            r.node_cores,
            r.redis_cores,
        );
    }
    let (shallow, _) = depths(results);
    for op in [Op::E2eSingle, Op::WorkerLoop] {
        for path in ["http1", "http2"] {
            let Some(r) = find(&results.runs, path, op, shallow, Some(64)) else {
                continue;
            };
            let commands: f64 = r.redis_commands.values().map(|c| c.calls_per_job).sum();
            let _ = writeln!(
                md,
                "| prioq | {} {} (c=64, depth {}) | {} | {:.0} | {:.0} | {:.1} | {:.1} ({:.2} calls) | {:.1} | {:.2} / {:.2} | bench {}, prioq {}, redis {} |",
                path_label(path),
                op.label(),
                depth_label(shallow),
                human(r.jobs_per_s),
                r.cpu_us_per_job.bench,
                r.cpu_us_per_job.prioq,
                r.cpu_us_per_job.redis,
                r.redis_fcall_us_per_job,
                r.fcall_calls_per_job,
                commands,
                r.latency_all.p50_ms,
                r.latency_all.p99_ms,
                results.cores.get("bench").map_or("?", String::as_str),
                results.cores.get("prioq").map_or("?", String::as_str),
                results
                    .cores
                    .get("redis-server")
                    .map_or("?", String::as_str),
            );
        }
    }
}

fn details_table(md: &mut String, results: &Results) {
    let _ = writeln!(
        md,
        "\nPer run: latency per call p50 / p99 / max in ms (raw: one pipelined round trip); Redis µs per job from `INFO commandstats` (`FCALL` time: the functions only) and from `INFO cpu` (the whole process: networking, parsing, replies, and the housekeeper's few commands); prioq CPU per HTTP request; CPU seconds of the load generator (bench), prioq and redis-server in the window.\n"
    );
    let _ = writeln!(
        md,
        "| path | operation | depth | c | jobs/s | latency p50 / p99 / max (ms) | Redis FCALL µs/job | Redis CPU µs/job | prioq µs/request | CPU s bench / prioq / redis | notes |"
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---|---:|---:|---:|---|---|");
    for r in &results.runs {
        let lat = r
            .latency
            .iter()
            .map(|(call, l)| format!("{call} {:.2} / {:.2} / {:.1}", l.p50_ms, l.p99_ms, l.max_ms))
            .collect::<Vec<_>>()
            .join("<br>");
        let mut notes = Vec::new();
        if let Some(p) = r.producers {
            notes.push(format!(
                "{p} producers, {} workers",
                worker_split(r.concurrency).1
            ));
        }
        if r.path == "http2" {
            notes.push(format!("{} connections", r.connections));
        }
        notes.push(format!(
            "pending {}–{}",
            human(r.keeper.min_depth as f64),
            human(r.keeper.max_depth as f64)
        ));
        if r.errors > 0 {
            notes.push(format!(
                "{} errors (last: {})",
                r.errors,
                r.last_error.as_deref().unwrap_or("").replace('|', "/")
            ));
        }
        if r.short_claims > 0 {
            notes.push(format!("{} short claims", r.short_claims));
        }
        let cpu = &r.cpu_seconds;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {:.2} / {:.2} / {:.2} | {} |",
            path_label(&r.path),
            op_label(&r.op),
            depth_label(r.depth),
            if r.path == "raw" {
                format!("{}×pipe", r.concurrency)
            } else {
                r.concurrency.to_string()
            },
            human(r.jobs_per_s),
            lat,
            r.redis_fcall_us_per_job,
            r.cpu_us_per_job.redis,
            r.prioq_cpu_us_per_request
                .map_or("–".into(), |us| format!("{us:.1}")),
            cpu.bench,
            cpu.prioq,
            cpu.redis,
            notes.join(", ")
        );
    }
}

/// Where Redis's time goes in the full cycles, per job.
fn redis_time_table(md: &mut String, results: &Results) {
    let (shallow, _) = depths(results);
    let cycles: Vec<&RunRecord> = [Op::E2eSingle, Op::WorkerLoop, Op::E2eBatch]
        .into_iter()
        .flat_map(|op| {
            [
                find(&results.runs, "raw", op, shallow, None),
                find(&results.runs, "http1", op, shallow, Some(64)),
            ]
        })
        .flatten()
        .collect();
    if cycles.is_empty() {
        return;
    }
    let us = |r: &RunRecord, c: &str| r.redis_commands.get(c).map_or(0.0, |c| c.us_per_job);
    let mut commands: Vec<&str> = Vec::new();
    for r in &cycles {
        for (command, cost) in &r.redis_commands {
            if cost.us_per_job >= 0.05 && !commands.contains(&command.as_str()) {
                commands.push(command);
            }
        }
    }
    commands.sort_by(|a, b| us(cycles[0], b).total_cmp(&us(cycles[0], a)));
    let _ = writeln!(
        md,
        "\nWhere Redis spends its time in full cycles at depth {}, per job, from `INFO commandstats` (calls per job → µs per job; the housekeeper's commands taken out) and `INFO cpu`. `fcall` includes the commands the functions run; what it has beyond them is the functions' own overhead (Lua, and each `redis.call`). What the process spends outside `FCALL` is reading, parsing and answering requests. `INFO commandstats` times are wall-clock time inside each command, so when other work takes Redis's core they grow and can exceed the process's CPU (`INFO cpu`); a negative \"outside\" figure means that happened.\n",
        depth_label(shallow)
    );
    let _ = write!(md, "| command |");
    for r in &cycles {
        let _ = write!(
            md,
            " {} {}{} |",
            path_label(&r.path),
            op_label(&r.op),
            if r.path == "raw" {
                String::new()
            } else {
                format!(" (c={})", r.concurrency)
            }
        );
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "|---|{}", "---:|".repeat(cycles.len()));
    let mut row = |name: String, cell: &dyn Fn(&RunRecord) -> String| {
        let cells: Vec<String> = cycles.iter().map(|r| cell(r)).collect();
        let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
    };
    for c in &commands {
        row(format!("`{c}`"), &|r| {
            r.redis_commands.get(*c).map_or("–".into(), |cost| {
                format!("{:.2} × → {:.2} µs", cost.calls_per_job, cost.us_per_job)
            })
        });
    }
    let inside = |r: &RunRecord| -> f64 {
        r.redis_commands
            .iter()
            .filter(|(c, _)| !OUTSIDE_FUNCTIONS.contains(&c.as_str()))
            .map(|(_, v)| v.us_per_job)
            .sum()
    };
    row(
        "functions' own overhead (`fcall` minus the commands inside)".into(),
        &|r| format!("{:.2} µs", r.redis_fcall_us_per_job - inside(r)),
    );
    row("redis-server CPU (`INFO cpu`)".into(), &|r| {
        format!("{:.2} µs", r.cpu_us_per_job.redis)
    });
    row(
        "of which outside `FCALL` (`INFO cpu` minus `fcall`)".into(),
        &|r| {
            format!(
                "{:.2} µs",
                r.cpu_us_per_job.redis - r.redis_fcall_us_per_job
            )
        },
    );
}

pub fn markdown(results: &Results, args: &Args) -> String {
    let mut md = String::new();
    let m = &results.machine;
    let cores: Vec<String> = results
        .cores
        .iter()
        .map(|(p, c)| format!("{p} {c}"))
        .collect();
    let _ = writeln!(
        md,
        "Run: `{}`{} on {} ({} cores, {} GiB), Redis {}, prioq {}, {}; {} s measured per run after {} s of warm-up; load average at start {}. Pinning: {} (cores: {}).\n",
        results.tool,
        if args.quick { " -- --quick" } else { "" },
        m["cpu_model"].as_str().unwrap_or("?"),
        m["nproc"],
        m["memory_gib"],
        results.redis_version,
        results.prioq_revision,
        results.started_at,
        args.duration.as_secs_f64(),
        args.warmup.as_secs_f64(),
        m["loadavg_at_start"].as_str().unwrap_or("?"),
        results.setup["pinning"].as_str().unwrap_or("?"),
        cores.join(", "),
    );
    throughput_table(&mut md, results, args);
    cost_table(&mut md, results, args);
    bullmq_table(&mut md, results);
    details_table(&mut md, results);
    redis_time_table(&mut md, results);
    let _ = writeln!(md, "\n| target | measured | met |\n|---|---|---|");
    for t in &results.targets {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            t.target,
            t.measured,
            match t.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "–",
            }
        );
    }
    md
}

pub fn svg(results: &Results, args: &Args) -> String {
    const W: f64 = 980.0;
    const H: f64 = 490.0;
    let colors = [
        (Op::EnqueueSingle, "#1f77b4"),
        (Op::EnqueueBatch, "#1f77b4"),
        (Op::ClaimAckSingle, "#d62728"),
        (Op::ClaimAckBatch, "#d62728"),
        (Op::E2eSingle, "#2ca02c"),
        (Op::WorkerLoop, "#9467bd"),
        (Op::E2eBatch, "#2ca02c"),
    ];
    let color = |op: Op| {
        colors
            .iter()
            .find(|(o, _)| *o == op)
            .map_or("#555", |(_, c)| c)
    };
    let runs = &results.runs;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">prioq throughput over HTTP/1.1 against concurrency (jobs/s; dotted: same functions pipelined straight into Redis)</text>"#,
        W / 2.0
    );
    let depths = &args.depths;
    let conc = &args.concurrency;
    let lx = |c: usize| (c as f64).log2();
    let (xmin, xmax) = (
        conc.first().map_or(0.0, |c| lx(*c)),
        conc.last().map_or(1.0, |c| lx(*c)),
    );
    for (panel, batched) in [(0, false), (1, true)] {
        let x0 = 70.0 + panel as f64 * (W / 2.0);
        let (pw, ph, y0) = (W / 2.0 - 110.0, 300.0, 50.0);
        let in_panel = |r: &&RunRecord| Op::parse(&r.op).is_some_and(|o| o.batched() == batched);
        let mut ymax = runs
            .iter()
            .filter(in_panel)
            .filter(|r| r.path != "http2")
            .map(|r| r.jobs_per_s)
            .fold(1.0, f64::max);
        if !batched {
            ymax = results
                .bullmq
                .runs
                .iter()
                .map(|b| b.jobs_per_s)
                .fold(ymax, f64::max);
        }
        let step = nice_step(ymax / 5.0);
        let ymax = (ymax / step).ceil() * step;
        let px = |c: usize| {
            if xmax > xmin {
                x0 + (lx(c) - xmin) / (xmax - xmin) * pw
            } else {
                x0 + pw / 2.0
            }
        };
        let py = |v: f64| y0 + ph - v / ymax * ph;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="13">{}</text>"#,
            x0 + pw / 2.0,
            y0 - 8.0,
            if batched {
                "batches of 100 jobs per request"
            } else {
                "one job per request"
            }
        );
        let mut v = 0.0;
        while v <= ymax + step / 2.0 {
            let _ = writeln!(
                s,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{label}</text>"##,
                y = py(v),
                x2 = x0 + pw,
                tx = x0 - 6.0,
                ty = py(v) + 4.0,
                label = human(v)
            );
            v += step;
        }
        for &c in conc {
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{yb}" stroke="#eee"/><text x="{x:.1}" y="{ty}" text-anchor="middle">{c}</text>"##,
                x = px(c),
                yb = y0 + ph,
                ty = y0 + ph + 16.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">concurrent HTTP clients (log scale)</text>"#,
            x0 + pw / 2.0,
            y0 + ph + 34.0
        );
        let _ = writeln!(
            s,
            r##"<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
        );
        for op in Op::ALL.into_iter().filter(|o| o.batched() == batched) {
            let col = color(op);
            for (di, &depth) in depths.iter().enumerate() {
                let dash = if di == 0 {
                    ""
                } else {
                    r#" stroke-dasharray="7 4""#
                };
                let points: Vec<(f64, f64)> = conc
                    .iter()
                    .filter_map(|&c| {
                        find(runs, "http1", op, depth, Some(c)).map(|r| (px(c), py(r.jobs_per_s)))
                    })
                    .collect();
                let line: Vec<String> = points
                    .iter()
                    .map(|(x, y)| format!("{x:.1},{y:.1}"))
                    .collect();
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="2"{dash}/>"#,
                    line.join(" ")
                );
                for (x, y) in &points {
                    let _ = writeln!(s, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{col}"/>"#);
                }
                if di == 0
                    && let Some(raw) = find(runs, "raw", op, depth, None)
                {
                    let y = py(raw.jobs_per_s);
                    let _ = writeln!(
                        s,
                        r#"<line x1="{x0}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="{col}" stroke-width="1.5" stroke-dasharray="2 3"/>"#,
                        x2 = x0 + pw
                    );
                }
            }
        }
        if !batched && conc.contains(&bullmq::CONCURRENCY) {
            for b in &results.bullmq.runs {
                let (x, y) = (px(bullmq::CONCURRENCY), py(b.jobs_per_s));
                let fill = if b.variant == "priority" {
                    "black"
                } else {
                    "white"
                };
                let _ = writeln!(
                    s,
                    r#"<path d="M {x:.1} {:.1} L {:.1} {y:.1} L {x:.1} {:.1} L {:.1} {y:.1} Z" fill="{fill}" stroke="black"/>"#,
                    y - 6.0,
                    x + 6.0,
                    y + 6.0,
                    x - 6.0
                );
            }
        }
    }
    // Legend.
    let mut lx0 = 70.0;
    let ly = H - 62.0;
    for (name, col) in [
        ("enqueue", color(Op::EnqueueSingle)),
        ("claim + ack", color(Op::ClaimAckSingle)),
        ("end to end", color(Op::E2eSingle)),
        ("worker loop", color(Op::WorkerLoop)),
    ] {
        let _ = writeln!(
            s,
            r#"<line x1="{lx0}" y1="{ly}" x2="{}" y2="{ly}" stroke="{col}" stroke-width="3"/><text x="{}" y="{}">{name}</text>"#,
            lx0 + 24.0,
            lx0 + 30.0,
            ly + 4.0
        );
        lx0 += 125.0;
    }
    let _ = writeln!(
        s,
        r##"<text x="{lx0}" y="{}">solid: {} pending; dashed: {} pending; dotted: raw Redis at {}</text>"##,
        ly + 4.0,
        depths.first().map_or(String::new(), |d| depth_label(*d)),
        depths.last().map_or(String::new(), |d| depth_label(*d)),
        depths.first().map_or(String::new(), |d| depth_label(*d)),
    );
    let _ = writeln!(
        s,
        r##"<text x="70" y="{}" fill="#555">Diamonds at c=64: BullMQ end to end (filled: prioritized, hollow: FIFO). Pinning: {}.</text>"##,
        H - 38.0,
        results.setup["pinning"].as_str().unwrap_or("?"),
    );
    let _ = writeln!(
        s,
        r##"<text x="70" y="{}" fill="#555">Load generator, prioq and Redis share the machine's {} cores; see bench/results.md for CPU per process and the HTTP/2 runs.</text>"##,
        H - 18.0,
        results.machine["nproc"],
    );
    s.push_str("</svg>\n");
    s
}

fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.max(1.0).log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if raw <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("# wrote {}", path.display());
    Ok(())
}

/// Writes the JSON, the markdown and the plot, and prints the markdown.
pub fn write_all(results: &Results, args: &Args) -> Result<()> {
    let markdown = markdown(results, args);
    std::fs::create_dir_all(&args.out_dir)?;
    let name = |stem: &str, ext: &str| {
        args.out_dir.join(if args.tag.is_empty() {
            format!("{stem}.{ext}")
        } else {
            format!("{}-{stem}.{ext}", args.tag)
        })
    };
    write(
        &name("results", "json"),
        &serde_json::to_string_pretty(results)?,
    )?;
    write(&name("results", "md"), &markdown)?;
    write(&name("throughput", "svg"), &svg(results, args))?;
    println!("\n{markdown}");
    Ok(())
}
