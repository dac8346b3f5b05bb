//! The targets a run is held to, and how far each was met.

use crate::args::Op;
use crate::bullmq::BullmqRun;
use crate::http_load::worker_split;
use crate::jobs::PAYLOAD_BYTES;
use crate::measure::RunRecord;
use crate::report::{
    Results, Target, depth_label, depth_pair, depths, find, find_held, human, path_label, pct,
};

/// Request latency p99 of single-job end to end at c=64 in the previous
/// release (README, Performance: "each call 3.5 / 7.6").
const PREVIOUS_E2E_P99_MS: f64 = 7.6;

/// The fewest queued jobs whose memory the bench states per job.
const MEMORY_MIN_JOBS: u64 = 100_000;

fn bullmq_run<'a>(results: &'a Results, variant: &str) -> Option<&'a BullmqRun> {
    results.bullmq.runs.iter().find(|r| r.variant == variant)
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

    // End to end in batches of 100 against raw, at every depth.
    let mut parts = Vec::new();
    let mut met = None;
    for depth in [shallow, deep] {
        if let (Some(h), Some(r)) = (
            find_held(runs, "http1", Op::E2eBatch, depth, None),
            find_held(runs, "raw", Op::E2eBatch, depth, None),
        ) {
            let ratio = h.jobs_per_s / r.jobs_per_s;
            met = Some(met.unwrap_or(true) && ratio >= 0.9);
            parts.push(format!(
                "at {}: {} (c={})",
                depth_label(depth),
                pct(ratio),
                h.concurrency
            ));
        }
        if deep == shallow {
            break;
        }
    }
    out.push(Target {
        target: "end to end in batches of 100 over HTTP/1.1 ≥ 90% of raw Redis running the same functions, at every depth".into(),
        measured: if parts.is_empty() {
            "not run".into()
        } else {
            parts.join("; ")
        },
        met,
    });

    mix_targets(results, &mut out);

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

    // Memory: over fewer jobs than MEMORY_MIN_JOBS, Redis's own
    // allocations between the two readings outweigh the jobs' (a run
    // with --depths 1k alone read -132 B/job).
    if let Some(m) = results.memory.iter().max_by_key(|m| m.depth) {
        let enough = m.depth >= MEMORY_MIN_JOBS;
        out.push(Target {
            target: "Redis memory per queued job beyond its payload ≤ 250 B".into(),
            measured: if enough {
                format!(
                    "{:.0} B/job beyond the {PAYLOAD_BYTES}-byte args ({:.0} B/job in all, over {} jobs; record {} B)",
                    m.bytes_per_job_beyond_payload,
                    m.bytes_per_job,
                    depth_label(m.depth),
                    m.stored_record_bytes
                )
            } else {
                format!(
                    "not measured: {} jobs are too few (a depth of {} or more is)",
                    depth_label(m.depth),
                    depth_label(MEMORY_MIN_JOBS)
                )
            },
            met: enough.then_some(m.bytes_per_job_beyond_payload <= 250.0),
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

/// The targets on the realistic mix (ten priorities, long-polling
/// workers from an empty queue), with BullMQ's same shape in the run.
fn mix_targets(results: &Results, out: &mut Vec<Target>) {
    let variant = |name: &str| results.mix.iter().find(|m| m.variant == name);
    let bullmq = bullmq_run(results, "mix");
    for (name, redis_at_most, bullmq_times) in [
        ("claim, then ack", 35.0, 1.3),
        ("ack in the next claim", 30.0, 2.0),
    ] {
        let Some(m) = variant(name) else { continue };
        out.push(Target {
            target: format!("realistic mix, {name}: Redis CPU per job ≤ {redis_at_most} µs"),
            measured: format!(
                "{:.1} µs/job (FCALL {:.1}: {:.1} in its commands, {:.1} Lua's own){}",
                m.redis_cpu_us_per_job,
                m.fcall_us_per_job,
                m.commands_us_per_job,
                m.lua_us_per_job,
                bullmq.map_or(String::new(), |b| format!(
                    "; BullMQ {:.1} µs/job",
                    b.redis_cpu_us_per_job
                ))
            ),
            met: Some(m.redis_cpu_us_per_job <= redis_at_most),
        });
        out.push(Target {
            target: format!("realistic mix, {name}: prioq CPU per request ≤ 25 µs"),
            measured: format!("{:.1} µs/request", m.prioq_cpu_us_per_request),
            met: Some(m.prioq_cpu_us_per_request <= 25.0),
        });
        out.push(Target {
            target: format!(
                "realistic mix, {name}: jobs/s ≥ {bullmq_times:.1}× BullMQ's on the same shape"
            ),
            measured: bullmq.map_or_else(
                || {
                    format!(
                        "BullMQ not run: {}",
                        results.bullmq.not_run.as_deref().unwrap_or("?")
                    )
                },
                |b| {
                    format!(
                        "{} vs {} jobs/s = {:.2}×",
                        human(m.jobs_per_s),
                        human(b.jobs_per_s),
                        m.jobs_per_s / b.jobs_per_s
                    )
                },
            ),
            met: bullmq.map(|b| m.jobs_per_s >= bullmq_times * b.jobs_per_s),
        });
    }
}
