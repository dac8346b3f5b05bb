//! `results.md`: the run's setup, then its tables and the targets.

use std::fmt::Write as _;

use crate::args::{Args, Op};
use crate::bullmq;
use crate::common::table::{Align, Table};
use crate::http_load::worker_split;
use crate::measure::RunRecord;
use crate::report::{Results, depth_label, depths, find, human, op_label, path_label, pct};

use Align::{Left, Right};

/// Commands in `INFO commandstats` that do not run inside a function.
pub const OUTSIDE_FUNCTIONS: [&str; 4] = ["fcall", "fcall_ro", "info", "ping"];

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
    parts_table(&mut md, results);
    mix_table(&mut md, results);
    let mut targets = Table::new([("target", Left), ("measured", Left), ("met", Left)]);
    for t in &results.targets {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        targets.row([t.target.as_str(), t.measured.as_str(), met]);
    }
    let _ = write!(md, "\n{}", targets.text());
    md
}

/// jobs/s, marked when claims came back short.
fn marked(r: &RunRecord) -> String {
    if r.short_claims > 0 {
        format!("{}†", human(r.jobs_per_s))
    } else {
        human(r.jobs_per_s)
    }
}

/// prioq's CPU per HTTP request, "–" where there is none (raw runs).
fn per_request(r: &RunRecord) -> String {
    r.prioq_cpu_us_per_request
        .map_or("–".into(), |us| format!("{us:.1}"))
}

/// Every op and depth: jobs/s by concurrency, next to raw Redis.
fn throughput_table(md: &mut String, results: &Results, args: &Args) {
    let runs = &results.runs;
    let mut table = Table::new(
        [
            ("jobs/s".to_owned(), Left),
            ("protocol".into(), Left),
            ("depth".into(), Left),
        ]
        .into_iter()
        .chain(args.concurrency.iter().map(|c| (format!("c={c}"), Right)))
        .chain([("raw Redis".into(), Right), ("best / raw".into(), Right)]),
    );
    for op in &args.ops {
        for path in ["http1", "http2"] {
            for &depth in &args.depths {
                if find(runs, path, *op, depth, None).is_none() {
                    continue;
                }
                let raw = find(runs, "raw", *op, depth, None);
                let best = find(runs, path, *op, depth, None);
                let ratio = match (best, raw) {
                    (Some(b), Some(r)) => pct(b.jobs_per_s / r.jobs_per_s),
                    _ => "–".into(),
                };
                table.row(
                    [
                        op.label().to_owned(),
                        path_label(path).into(),
                        depth_label(depth),
                    ]
                    .into_iter()
                    .chain(
                        args.concurrency.iter().map(|&c| {
                            find(runs, path, *op, depth, Some(c)).map_or("–".into(), marked)
                        }),
                    )
                    .chain([raw.map_or("–".into(), marked), ratio]),
                );
            }
        }
    }
    md.push_str(table.text());
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
    let mut table = Table::new([
        ("path", Left),
        ("operation", Left),
        ("jobs/s", Right),
        ("CPU µs/job bench / prioq / redis", Left),
        ("Redis FCALL µs/job", Right),
        ("prioq µs/request", Right),
        ("requests/job", Right),
        ("latency p50 / p99 (ms)", Left),
    ]);
    for op in &args.ops {
        for (path, c) in [("raw", None), ("http1", Some(64)), ("http2", Some(64))] {
            let Some(r) = find(&results.runs, path, *op, shallow, c) else {
                continue;
            };
            let prioq = if path == "raw" {
                "–".into()
            } else {
                format!("{:.0}", r.cpu_us_per_job.prioq)
            };
            table.row([
                path_label(path).to_owned(),
                op.label().into(),
                human(r.jobs_per_s),
                format!(
                    "{:.0} / {prioq} / {:.1}",
                    r.cpu_us_per_job.bench, r.cpu_us_per_job.redis
                ),
                format!("{:.1}", r.redis_fcall_us_per_job),
                per_request(r),
                format!("{:.2}", r.requests as f64 / r.jobs.max(1) as f64),
                format!("{:.2} / {:.2}", r.latency_all.p50_ms, r.latency_all.p99_ms),
            ]);
        }
    }
    md.push_str(table.text());
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
        "BullMQ {} (ioredis {}) on Node.js {}, against a redis-server {} of its own started like prioq's; `benches/bullmq/e2e.mjs`: {} producers each adding single jobs (`queue.add`, the same 200-byte data, `removeOnComplete`, `removeOnFail`) as the worker completes them (backlog at most {}), one `Worker` with `concurrency: {}` whose processor returns at once; {} s measured after {} s of warm-up. Node CPU from `process.cpuUsage()`, Redis CPU from `INFO cpu`, script time from `INFO commandstats` (`EVALSHA`).\n",
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
    let mut table = Table::new([
        ("system", Left),
        ("path", Left),
        ("jobs/s", Right),
        ("client CPU µs/job (bench or Node)", Right),
        ("prioq CPU µs/job", Right),
        ("Redis CPU µs/job", Right),
        ("Redis script µs/job", Right),
        ("Redis commands/job", Right),
        ("latency p50 / p99 (ms)", Left),
        ("cores", Left),
    ]);
    for r in &b.runs {
        let variant = match r.variant.as_str() {
            "priority" => "prioritized (priority 1)",
            "mix" => "ten priorities (the realistic mix)",
            _ => "FIFO (no priority)",
        };
        table.row([
            "BullMQ".to_owned(),
            format!("{variant} (c={})", r.concurrency),
            human(r.jobs_per_s),
            format!("{:.0}", r.node_cpu_us_per_job),
            "–".into(),
            format!("{:.1}", r.redis_cpu_us_per_job),
            format!(
                "{:.1} ({:.2} calls)",
                r.redis_scripts_us_per_job, r.script_calls_per_job
            ),
            format!("{:.1}", r.redis_commands_per_job),
            format!(
                "add {:.2} / {:.2}; add → processor {:.0} / {:.0}",
                r.add_latency.p50_ms,
                r.add_latency.p99_ms,
                r.pickup_latency.p50_ms,
                r.pickup_latency.p99_ms
            ),
            format!("Node {}, redis {}", r.node_cores, r.redis_cores),
        ]);
    }
    let (shallow, _) = depths(results);
    let core = |process: &str| results.cores.get(process).map_or("?", String::as_str);
    for op in [Op::E2eSingle, Op::WorkerLoop] {
        for path in ["http1", "http2"] {
            let Some(r) = find(&results.runs, path, op, shallow, Some(64)) else {
                continue;
            };
            let commands: f64 = r.redis_commands.values().map(|c| c.calls_per_job).sum();
            table.row([
                "prioq".to_owned(),
                format!(
                    "{} {} (c=64, depth {})",
                    path_label(path),
                    op.label(),
                    depth_label(shallow)
                ),
                human(r.jobs_per_s),
                format!("{:.0}", r.cpu_us_per_job.bench),
                format!("{:.0}", r.cpu_us_per_job.prioq),
                format!("{:.1}", r.cpu_us_per_job.redis),
                format!(
                    "{:.1} ({:.2} calls)",
                    r.redis_fcall_us_per_job, r.fcall_calls_per_job
                ),
                format!("{commands:.1}"),
                format!("{:.2} / {:.2}", r.latency_all.p50_ms, r.latency_all.p99_ms),
                format!(
                    "bench {}, prioq {}, redis {}",
                    core("bench"),
                    core("prioq"),
                    core("redis-server")
                ),
            ]);
        }
    }
    md.push_str(table.text());
}

fn details_table(md: &mut String, results: &Results) {
    let _ = writeln!(
        md,
        "\nPer run: latency per call p50 / p99 / max in ms (raw: one pipelined round trip); Redis µs per job from `INFO commandstats` (`FCALL` time: the functions only) and from `INFO cpu` (the whole process: networking, parsing, replies, and the housekeeper's commands: in runs that only claim, the refills that add every job claimed, about as costly to Redis in raw and HTTP runs); prioq CPU per HTTP request; CPU seconds of the load generator (bench), prioq and redis-server in the window.\n"
    );
    let mut table = Table::new([
        ("path", Left),
        ("operation", Left),
        ("depth", Left),
        ("c", Right),
        ("jobs/s", Right),
        ("latency p50 / p99 / max (ms)", Left),
        ("Redis FCALL µs/job", Right),
        ("Redis CPU µs/job", Right),
        ("prioq µs/request", Right),
        ("CPU s bench / prioq / redis", Left),
        ("notes", Left),
    ]);
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
        table.row([
            path_label(&r.path).to_owned(),
            op_label(&r.op).into(),
            depth_label(r.depth),
            if r.path == "raw" {
                format!("{}×pipe", r.concurrency)
            } else {
                r.concurrency.to_string()
            },
            human(r.jobs_per_s),
            lat,
            format!("{:.1}", r.redis_fcall_us_per_job),
            format!("{:.1}", r.cpu_us_per_job.redis),
            per_request(r),
            format!("{:.2} / {:.2} / {:.2}", cpu.bench, cpu.prioq, cpu.redis),
            notes.join(", "),
        ]);
    }
    md.push_str(table.text());
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
    let mut table = Table::new([("command".to_owned(), Left)].into_iter().chain(
        cycles.iter().map(|r| {
            let at = if r.path == "raw" {
                String::new()
            } else {
                format!(" (c={})", r.concurrency)
            };
            (
                format!("{} {}{at}", path_label(&r.path), op_label(&r.op)),
                Right,
            )
        }),
    ));
    let mut row = |name: String, cell: &dyn Fn(&RunRecord) -> String| {
        table.row(std::iter::once(name).chain(cycles.iter().map(|r| cell(r))));
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
    md.push_str(table.text());
}

/// What each part of the `exchange` function costs Redis per job, at 1, 10
/// and 100 jobs per call, and Lua's own share of it.
fn parts_table(md: &mut String, results: &Results) {
    if results.functions.is_empty() {
        return;
    }
    let mut table = Table::new([
        ("part of `exchange`", Left),
        ("jobs per call", Right),
        ("`FCALL` µs/job", Right),
        ("commands inside µs/job", Right),
        ("Lua's own µs/job", Right),
        ("Lua's share", Right),
    ]);
    for p in &results.functions {
        table.row([
            p.part.clone(),
            p.jobs_per_call.to_string(),
            format!("{:.2}", p.fcall_us_per_job),
            format!("{:.2}", p.commands_us_per_job),
            format!("{:.2}", p.lua_us_per_job),
            pct(p.lua_share),
        ]);
    }
    let _ = write!(
        md,
        "\nEach part of the `exchange` function on its own, called straight into Redis (`INFO commandstats`):\n\n{}",
        table.text()
    );
}

/// The realistic mix, by variant.
fn mix_table(md: &mut String, results: &Results) {
    if results.mix.is_empty() {
        return;
    }
    let mut table = Table::new([
        ("variant", Left),
        ("jobs/s", Right),
        ("requests/job", Right),
        ("enqueued/job", Right),
        ("function calls/job", Right),
        ("Redis CPU µs/job", Right),
        ("`FCALL` µs/job", Right),
        ("commands inside", Right),
        ("Lua's own", Right),
        ("prioq CPU µs/request", Right),
        ("errors", Right),
    ]);
    for m in &results.mix {
        table.row([
            m.variant.clone(),
            human(m.jobs_per_s),
            format!("{:.2}", m.requests_per_job),
            format!("{:.2}", m.enqueued_per_job),
            format!("{:.2}", m.fcalls_per_job),
            format!("{:.1}", m.redis_cpu_us_per_job),
            format!("{:.1}", m.fcall_us_per_job),
            format!("{:.1}", m.commands_us_per_job),
            format!("{:.1}", m.lua_us_per_job),
            format!("{:.1}", m.prioq_cpu_us_per_request),
            m.errors.to_string(),
        ]);
    }
    for b in results.bullmq.runs.iter().filter(|b| b.variant == "mix") {
        table.row([
            format!(
                "BullMQ, ten priorities (c={}, {} producers)",
                b.concurrency, b.producers
            ),
            human(b.jobs_per_s),
            "–".to_owned(),
            "–".to_owned(),
            "–".to_owned(),
            format!("{:.1}", b.redis_cpu_us_per_job),
            format!("{:.1} (scripts)", b.redis_scripts_us_per_job),
            "–".to_owned(),
            "–".to_owned(),
            "–".to_owned(),
            b.failed.to_string(),
        ]);
    }
    let _ = write!(
        md,
        "\nThe realistic mix: ten priorities spread evenly, {} producers posting single jobs, {} workers long-polling (`wait_ms` 1000), from an empty queue, producers throttled to 256 jobs waiting or leased unless marked unthrottled:\n\n{}",
        crate::mix::PRODUCERS,
        crate::mix::WORKERS,
        table.text()
    );
}
