//! prioq under load: real HTTP over loopback to a separate `prioq`
//! process, next to prioq's own Redis functions pipelined straight into
//! Redis and next to BullMQ, in one run, so every figure is also a ratio
//! of what Redis itself does on this machine.
//!
//! ```sh
//! cargo build --release && cargo bench --bench load             # full run, < 10 min
//! cargo build --release && cargo bench --bench load -- --quick  # smoke run, < 3 min
//! cargo bench --bench load -- --help                            # every flag
//! ```
//!
//! It starts its own `redis-server` on a free port (`--save ''
//! --appendonly no`) unless given `--redis-url`, and runs the `prioq`
//! binary that cargo built next to this bench, with its defaults. With two
//! cores or more, redis-server runs on core 1 and everything that talks to
//! it (this load generator, prioq, BullMQ's Node.js) on core 0. It writes
//! `bench-results/results.json`, `results.md` and `throughput.svg`; a
//! `--quick` run writes `bench-results/quick-*` instead.
//!
//! Invoked without `--bench` (as `cargo test --all-targets` does), it does
//! nothing.
//!
//! - `args`: flags, and the operations a run measures.
//! - `jobs`: what the jobs and request bodies look like.
//! - `common` (shared with the shards bench): `INFO`, Markdown tables, the
//!   results folder; the redis-server itself comes from the testbed crate.
//! - `procs`: the redis-server and prioq processes, pinning, CPU from
//!   `/proc`.
//! - `redis_stats`: `INFO commandstats`, `INFO cpu`, memory.
//! - `keeper`: holds a queue's depth during a run.
//! - `measure`: one run's window, its tasks' stats, its record.
//! - `raw`: prioq's functions pipelined straight into Redis.
//! - `mix`: the realistic mix: ten priorities, 32 producers, 64
//!   long-polling workers from an empty queue, in four variants.
//! - `functions`: each part of the `exchange` function on its own, at 1,
//!   10 and 100 jobs per call: its Redis µs per job and Lua's share.
//! - `http1`, `h2`: the lean HTTP/1.1 client and the HTTP/2 client.
//! - `http_load`: what each HTTP client does per operation.
//! - `long_poll`: wake-up latency across instances, idle long-poll cost.
//! - `neighbour`: a trickling group's wait next to a flooding one.
//! - `path`: the request path counted (`--request-path`): allocations,
//!   wake-ups and Redis commands per request, prioq served in this
//!   process; the allocator below attributes allocations to threads.
//! - `bullmq`: BullMQ end to end (`benches/bullmq/e2e.mjs`).
//! - `report`: the results and what a run writes; `targets`, the targets
//!   and how far each was met; `markdown`, `results.md`; `chart`,
//!   `throughput.svg` (plotters).

#[path = "../common/mod.rs"]
mod common;

mod args;
mod bullmq;
mod chart;
mod functions;
mod h2;
mod http1;
mod http_load;
mod jobs;
mod keeper;
mod long_poll;
mod markdown;
mod measure;
mod mix;
mod neighbour;
mod path;
mod procs;
mod raw;
mod redis_stats;
mod report;
mod targets;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use prioq::queue::store::keys::{QueueKeys, registry};
use prioq_testbed::free_port;
use redis::{self, aio::MultiplexedConnection};

use crate::args::Args;
use crate::bullmq::BullmqResult;
use crate::http_load::{HttpLoad, Protocol, Target};
use crate::jobs::{PAYLOAD_BYTES, args_json, stored_body, stored_record};
use crate::keeper::{KeeperCalls, KeeperMode};
use crate::measure::{Load, Monitor, Plan, RunRecord, Shape, measure, record};
use crate::procs::Pinning;
use crate::report::{MemoryResult, Results, RetentionResult, depth_label, human};

/// The system's allocator, each allocation attributed to the group its
/// thread entered: `path` counts prioq's threads' allocations.
#[global_allocator]
static ALLOCATOR: tracking_allocator::Allocator<std::alloc::System> =
    tracking_allocator::Allocator::system();

/// The result of each acked job in the retention measurement, in bytes.
const RESULT_BYTES: usize = 1024;

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if !argv
        .iter()
        .any(|a| a == "--bench" || a == "--help" || a == "-h")
    {
        println!("benches/load is a load benchmark: run it with `cargo bench --bench load`");
        return Ok(());
    }
    let args = args::parse(&argv)?;
    if let Some(path) = args.report_from.clone() {
        return report::rewrite_from(&path, args);
    }
    if args.request_path {
        return path::count(&args);
    }
    let pinning = Pinning::new(args.pin);
    // Before the runtime starts its threads, so they are all pinned.
    pinning.pin_self()?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if pinning.on() {
        runtime.worker_threads(1);
    }
    runtime.enable_all().build()?.block_on(run(args, pinning))
}

/// What every measured run of the prioq part shares.
#[derive(Debug)]
struct Runner {
    monitor: Monitor,
    redis: redis::Client,
    warmup: Duration,
    duration: Duration,
    clk_tck: f64,
}

impl Runner {
    async fn run<L: Load>(
        &mut self,
        load: Arc<L>,
        shape: Shape,
        tasks: usize,
        keys: &QueueKeys,
    ) -> Result<RunRecord> {
        let plan = Plan {
            tasks,
            warmup: self.warmup,
            duration: self.duration,
            keys,
            depth: shape.depth,
            mode: if shape.op.claims() {
                KeeperMode::Refill
            } else {
                KeeperMode::Drain
            },
        };
        let measured = measure(&mut self.monitor, &self.redis, load, plan).await?;
        Ok(record(shape, measured, self.clk_tck))
    }
}

async fn run(args: Args, pinning: Pinning) -> Result<()> {
    let started = Instant::now();
    let started_at = procs::time_now();
    let own_redis = args.redis_url.is_none();
    let (redis_proc, redis_url) = match &args.redis_url {
        Some(url) => (None, url.clone()),
        None => {
            let server = procs::start_redis(&pinning);
            let url = server.url();
            (Some(server), url)
        }
    };
    let prefix = if own_redis { "prioq" } else { "prioqbench" };
    let redis_client = redis::Client::open(redis_url.as_str())?;
    let mut con = redis_stats::connect(&redis_client).await?;
    let server = redis_stats::info(&mut con, &["server"]).await?;
    let redis_version = server.get("redis_version").cloned().unwrap_or_default();
    if own_redis {
        redis::cmd("FLUSHALL").query_async::<()>(&mut con).await?;
    }
    raw::load_library(&mut con).await?;

    let http_client = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .tcp_nodelay(true)
        .timeout(measure::REQUEST_TIMEOUT)
        .build()?;
    let port_a = free_port();
    let prioq_a = procs::start_prioq(&args, &pinning, port_a, &redis_url, prefix)?;
    let base_a = format!("http://127.0.0.1:{port_a}");
    procs::wait_ready(&http_client, &base_a).await?;

    let mut cores = BTreeMap::new();
    cores.insert("bench".to_owned(), procs::cores_of(std::process::id()));
    cores.insert("prioq".to_owned(), procs::cores_of(prioq_a.pid()));
    cores.insert(
        "redis-server".to_owned(),
        redis_proc.as_ref().map_or_else(
            || "not started by the bench".to_owned(),
            |p| procs::cores_of(p.pid()),
        ),
    );
    println!(
        "# prioq pid {} at {base_a}; redis-server at {redis_url} (v{redis_version}); bench pid {}; pinning {}; cores {cores:?}",
        prioq_a.pid(),
        std::process::id(),
        pinning.note,
    );

    let mut runner = Runner {
        monitor: Monitor {
            con: redis_stats::connect(&redis_client).await?,
            prioq_pids: vec![prioq_a.pid()],
            keeper_calls: KeeperCalls::default(),
        },
        redis: redis_client.clone(),
        warmup: args.warmup,
        duration: args.duration,
        clk_tck: procs::clock_ticks(),
    };
    let mut raw_cons = Vec::new();
    for _ in 0..raw::CONNECTIONS {
        raw_cons.push(redis_stats::connect(&redis_client).await?);
    }

    let retention = if args.retained == 0 {
        None
    } else {
        let queue = "bench-retained";
        let keys = QueueKeys::new(prefix, queue);
        let plain =
            raw::retained_bytes_per_job(&mut con, &keys, queue, args.retained, &stored_body(), 0)
                .await?;
        let with_result = raw::retained_bytes_per_job(
            &mut con,
            &keys,
            queue,
            args.retained,
            &stored_body(),
            RESULT_BYTES,
        )
        .await?;
        let r = RetentionResult {
            jobs: args.retained,
            payload_bytes: PAYLOAD_BYTES,
            bytes_per_job: plain,
            result_bytes: RESULT_BYTES,
            bytes_per_job_with_result: with_result,
            bytes_per_result_byte: (with_result - plain) / RESULT_BYTES as f64,
        };
        println!(
            "# kept completed: {:.0} B/job without a result, {:.0} B/job with {RESULT_BYTES} bytes of result ({:.2} B per result byte)",
            r.bytes_per_job, r.bytes_per_job_with_result, r.bytes_per_result_byte
        );
        Some(r)
    };

    let parts = if args.functions {
        let parts = functions::measure(&mut con, prefix, &stored_body()).await?;
        for p in &parts {
            println!(
                "# {} of {}: FCALL {:.2} µs/job, {:.2} in its commands, {:.2} Lua's own ({:.0}%)",
                p.part,
                p.jobs_per_call,
                p.fcall_us_per_job,
                p.commands_us_per_job,
                p.lua_us_per_job,
                100.0 * p.lua_share
            );
        }
        parts
    } else {
        Vec::new()
    };

    let addr_a = SocketAddr::from(([127, 0, 0, 1], port_a));
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut memory: Vec<MemoryResult> = Vec::new();
    for &depth in &args.depths {
        let queue = format!("bench-d{}", depth_label(depth));
        let keys = QueueKeys::new(prefix, &queue);
        raw::fresh_queue(&mut con, &keys, &queue).await?;
        let m = prefill(&mut con, &raw_cons, &keys, depth).await?;
        println!(
            "# depth {}: prefilled in {:.1} s ({} jobs/s); {:.0} B/job, {:.0} B/job beyond the {PAYLOAD_BYTES}-byte payload",
            depth_label(depth),
            m.prefill_seconds,
            human(m.prefill_jobs_per_s),
            m.bytes_per_job,
            m.bytes_per_job_beyond_payload
        );
        memory.push(m);

        for &op in &args.ops {
            let mut raw_rate = None;
            if args.raw {
                let load = Arc::new(raw::Raw {
                    cons: raw_cons.clone(),
                    keys: keys.clone(),
                    op,
                    body: stored_body(),
                });
                let shape = Shape {
                    path: "raw",
                    op,
                    depth,
                    concurrency: raw::CONNECTIONS,
                    connections: raw::CONNECTIONS,
                    producers: None,
                };
                let r = runner.run(load, shape, raw::CONNECTIONS, &keys).await?;
                report::print_run(&r);
                raw_rate = Some(r.jobs_per_s);
                runs.push(r);
            }
            let mut protocols = vec![Protocol::Http1];
            if args.http2 && op.over_http2() {
                protocols.push(Protocol::Http2);
            }
            for protocol in protocols {
                for &c in &args.concurrency {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let target = Target::new(addr_a, &queue);
                    let load = Arc::new(
                        HttpLoad::new(target, op, protocol, c, args.h2_connections).await?,
                    );
                    let shape = Shape {
                        path: protocol.path(),
                        op,
                        depth,
                        concurrency: c,
                        connections: load.connections(),
                        producers: load.producers(),
                    };
                    let mut r = runner
                        .run(load, shape, HttpLoad::tasks(op, c), &keys)
                        .await?;
                    r.vs_raw = raw_rate.map(|raw| r.jobs_per_s / raw);
                    report::print_run(&r);
                    runs.push(r);
                }
            }
        }
        raw::unlink_queue(&mut con, &keys).await?;
    }

    let mut mixes = Vec::new();
    if args.mix {
        let port_b = free_port();
        let prioq_b = procs::start_prioq(&args, &pinning, port_b, &redis_url, prefix)?;
        procs::wait_ready(&http_client, &format!("http://127.0.0.1:{port_b}")).await?;
        let addr_b = SocketAddr::from(([127, 0, 0, 1], port_b));
        let queue_keys = QueueKeys::new(prefix, mix::QUEUE);
        for &variant in &args.mix_variants {
            raw::fresh_queue(&mut con, &queue_keys, mix::QUEUE).await?;
            let (instances, pids) = match variant {
                mix::Variant::TwoInstances => {
                    (vec![addr_a, addr_b], vec![prioq_a.pid(), prioq_b.pid()])
                }
                _ => (vec![addr_a], vec![prioq_a.pid()]),
            };
            let m = mix::run(
                &mut con,
                variant,
                instances,
                &pids,
                args.warmup,
                args.duration,
                runner.clk_tck,
            )
            .await?;
            println!(
                "# mix, {}: {} jobs/s, Redis CPU {:.1} µs/job, FCALL {:.1} µs/job ({:.1} in its commands, {:.1} Lua's own), prioq {:.1} µs/request, {:.2} requests/job, {:.2} enqueued/job, {:.2} function calls/job, {} errors",
                m.variant,
                human(m.jobs_per_s),
                m.redis_cpu_us_per_job,
                m.fcall_us_per_job,
                m.commands_us_per_job,
                m.lua_us_per_job,
                m.prioq_cpu_us_per_request,
                m.requests_per_job,
                m.enqueued_per_job,
                m.fcalls_per_job,
                m.errors
            );
            mixes.push(m);
        }
        raw::unlink_queue(&mut con, &queue_keys).await?;
        drop(prioq_b);
    }

    let mut wake = None;
    let mut idle = None;
    if args.wake_rounds > 0 || args.idle_polls > 0 {
        let port_b = free_port();
        let prioq_b = procs::start_prioq(&args, &pinning, port_b, &redis_url, prefix)?;
        let base_b = format!("http://127.0.0.1:{port_b}");
        procs::wait_ready(&http_client, &base_b).await?;
        cores.insert("prioq B".to_owned(), procs::cores_of(prioq_b.pid()));
        if args.wake_rounds > 0 {
            let w = long_poll::wake_test(&http_client, &base_a, &base_b, args.wake_rounds).await?;
            println!(
                "# long poll on A woken by an enqueue on B: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms after the enqueue was sent ({} of {} rounds)",
                w.after_enqueue_sent.p50_ms,
                w.after_enqueue_sent.p99_ms,
                w.after_enqueue_sent.max_ms,
                w.woken,
                w.rounds
            );
            wake = Some(w);
        }
        if args.idle_polls > 0 {
            runner.monitor.prioq_pids.push(prioq_b.pid());
            let i = long_poll::idle_test(
                &mut runner.monitor,
                &http_client,
                &base_a,
                &registry(prefix),
                args.idle_polls,
                args.idle_window,
            )
            .await?;
            println!(
                "# idle: {:.2} Redis commands/s per idle long poll ({:.3} function calls/s); sweepers alone {:.1} commands/s",
                i.commands_per_s_per_poll,
                i.function_calls_per_s_per_poll,
                i.baseline_commands_per_s
            );
            idle = Some(i);
        }
        drop(prioq_b);
    }
    let mut neighbour = None;
    if !args.neighbour.is_zero() {
        let n = neighbour::run(&http_client, &base_a, args.neighbour.as_secs_f64()).await?;
        println!(
            "# noisy neighbour: the trickling group's enqueue to claim p50 {:.1} ms, p99 {:.1} ms with groups ({} unclaimed of {}); p50 {:.1} ms, p99 {:.1} ms without ({} unclaimed of {})",
            n.grouped.trickle.p50_ms,
            n.grouped.trickle.p99_ms,
            n.grouped.unclaimed,
            n.grouped.trickled,
            n.plain.trickle.p50_ms,
            n.plain.trickle.p99_ms,
            n.plain.unclaimed,
            n.plain.trickled
        );
        neighbour = Some(n);
        for queue in neighbour::QUEUES {
            let keys = QueueKeys::new(prefix, queue);
            raw::unlink_queue(&mut con, &keys).await?;
            let mut groups = redis::cmd("UNLINK");
            for group in neighbour::GROUPS {
                groups.arg(keys.group(group));
            }
            groups.query_async::<i64>(&mut con).await?;
        }
    }
    drop(prioq_a);

    let bullmq = if args.bullmq {
        bullmq::run(&args, &pinning).await
    } else {
        BullmqResult {
            not_run: Some("--no-bullmq".into()),
            ..BullmqResult::default()
        }
    };
    if let Some(reason) = &bullmq.not_run {
        println!("# BullMQ not run: {reason}");
    }
    drop(redis_proc);

    let mut results = Results {
        tool: "cargo bench --bench load".into(),
        mode: if args.quick { "quick" } else { "full" }.into(),
        started_at,
        wall_seconds: started.elapsed().as_secs_f64(),
        prioq_revision: procs::git_revision(),
        machine: procs::machine(),
        redis_version,
        setup: report::setup(&args, own_redis, &pinning, runner.clk_tck),
        cores,
        memory,
        retention,
        functions: parts,
        mix: mixes,
        runs,
        wake,
        idle,
        neighbour,
        bullmq,
        targets: Vec::new(),
    };
    results.targets = targets::targets(&results);
    report::write_all(&results, &args)?;
    println!("# done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Prefills the queue with the exchange function and measures what the jobs
/// take in Redis.
async fn prefill(
    con: &mut MultiplexedConnection,
    raw_cons: &[MultiplexedConnection],
    keys: &QueueKeys,
    depth: u64,
) -> Result<MemoryResult> {
    let before = redis_stats::used_memory(con).await?;
    let t = Instant::now();
    raw::prefill(raw_cons, keys, depth, &stored_body()).await?;
    let prefill_seconds = t.elapsed().as_secs_f64();
    let after = redis_stats::used_memory(con).await?;
    let per_job = after.saturating_sub(before) as f64 / depth as f64;
    Ok(MemoryResult {
        depth,
        prefill_seconds,
        prefill_jobs_per_s: depth as f64 / prefill_seconds,
        used_memory_before: before,
        used_memory_after: after,
        bytes_per_job: per_job,
        payload_bytes: PAYLOAD_BYTES,
        bytes_per_job_beyond_payload: per_job - PAYLOAD_BYTES as f64,
        stored_record_bytes: stored_record(&args_json(), 1_764_460_000_000).len(),
    })
}
