//! prioq under load: real HTTP over loopback to a separate `prioq`
//! process, next to the same Lua scripts pipelined straight into Redis, in
//! one run, so every figure is also a ratio of what Redis itself does on
//! this machine.
//!
//! ```sh
//! cargo build --release && cargo bench --bench load             # full run, ~10 min
//! cargo build --release && cargo bench --bench load -- --quick  # smoke run, < 2 min
//! cargo bench --bench load -- --help                            # every flag
//! ```
//!
//! It starts its own `redis-server` on a free port (`--save ''
//! --appendonly no`) unless given `--redis-url`, and runs the `prioq`
//! binary that cargo built next to this bench, with its defaults. It writes
//! `bench/results.json`, `bench/results.md` (the tables of the README's
//! Performance section) and `bench/throughput.svg`; a `--quick` run writes
//! `bench/quick-*` instead.
//!
//! Load generator, prioq and Redis share the machine's cores, so the CPU
//! seconds of each process (from `/proc/<pid>/stat`) are reported next to
//! every figure, and Redis's own cost per job is taken from `INFO
//! commandstats`, which Redis measures itself.
//!
//! Invoked without `--bench` (as `cargo test --all-targets` does), it does
//! nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use deadpool_redis::redis::{self, Value, aio::MultiplexedConnection};
use prioq::queue::keys::{Key, QueueKeys};
use prioq::queue::library::{Function, LIBRARY};
use prioq::queue::record::{self, Record};
use serde::Deserialize;
use serde_json::json;

// ---------------------------------------------------------------------------
// What the jobs look like, and the scripts as prioq loads them.

/// Bytes of `args` in every job: `{"blob":"xxx…"}`.
const PAYLOAD_BYTES: usize = 200;
/// Jobs per batch request (enqueue batch, claim `max_jobs`, ack many).
const BATCH: usize = 100;
const TASK: &str = "bench";
const PRIORITY: u8 = 1;
const LEASE_MS: u64 = 60_000;
const MAX_ATTEMPTS: u32 = 5;
/// prioq's default bulk floor (0.1) in parts per million, as it passes it.
const FLOOR_PPM: u64 = 100_000;
/// Due scheduled jobs a claim promotes first, as prioq passes it.
const CLAIM_PROMOTE_BATCH: u64 = 100;
/// Script calls per pipelined round trip in the raw-Redis runs.
const RAW_PIPELINE_SINGLE: usize = 100;
const RAW_PIPELINE_BATCH: usize = 2;
/// Concurrent pipelines (connections) in the raw-Redis runs.
const RAW_CONNECTIONS: usize = 4;
/// Upper bound on loop iterations of one task in one run.
const MAX_ITERATIONS: u64 = 2_000_000;
/// Upper bound on any single request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Every command the queue functions run (see `lua/`).
const SCRIPT_COMMANDS: [&str; 17] = [
    "time", "get", "set", "incr", "incrby", "hexists", "hset", "hget", "hdel", "zadd", "zrem",
    "zcard", "zcount", "zpopmin", "zrange", "zscore", "publish",
];
/// The bench's own housekeeping: drops the newest pending jobs.
/// KEYS: pending, jobs; ARGV[1]: how many.
const DRAIN_LUA: &str = "local popped = redis.call('ZPOPMAX', KEYS[1], ARGV[1]) \
    for i = 1, #popped, 2 do redis.call('HDEL', KEYS[2], popped[i]) end \
    return #popped / 2";

fn args_json() -> String {
    let blob = "x".repeat(PAYLOAD_BYTES - r#"{"blob":""}"#.len());
    let args = format!(r#"{{"blob":"{blob}"}}"#);
    assert_eq!(args.len(), PAYLOAD_BYTES);
    args
}

/// The body prioq puts after the record's header.
fn stored_body() -> Vec<u8> {
    record::body(TASK, &args_json())
}

/// A server-made id, as prioq makes them.
fn fresh_id() -> String {
    record::new_id()
}

// ---------------------------------------------------------------------------
// Flags.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    EnqueueSingle,
    EnqueueBatch,
    ClaimAckSingle,
    ClaimAckBatch,
    E2eSingle,
    E2eBatch,
}

impl Op {
    const ALL: [Self; 6] = [
        Self::EnqueueSingle,
        Self::EnqueueBatch,
        Self::ClaimAckSingle,
        Self::ClaimAckBatch,
        Self::E2eSingle,
        Self::E2eBatch,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::EnqueueSingle => "enqueue-single",
            Self::EnqueueBatch => "enqueue-batch",
            Self::ClaimAckSingle => "claim-ack-single",
            Self::ClaimAckBatch => "claim-ack-batch",
            Self::E2eSingle => "e2e-single",
            Self::E2eBatch => "e2e-batch",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::EnqueueSingle => "enqueue",
            Self::EnqueueBatch => "enqueue batch (100)",
            Self::ClaimAckSingle => "claim + ack",
            Self::ClaimAckBatch => "claim 100 + ack many",
            Self::E2eSingle => "end to end (enqueue, claim, ack)",
            Self::E2eBatch => "end to end, batches of 100",
        }
    }

    fn batched(self) -> bool {
        matches!(
            self,
            Self::EnqueueBatch | Self::ClaimAckBatch | Self::E2eBatch
        )
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == s)
    }

    /// What the housekeeper does during the run to hold the queue's depth.
    fn keeper(self) -> KeeperMode {
        match self {
            Self::EnqueueSingle | Self::EnqueueBatch => KeeperMode::Drain,
            _ => KeeperMode::Refill,
        }
    }
}

#[derive(Debug, Clone)]
struct Args {
    quick: bool,
    redis_url: Option<String>,
    prioq_bin: PathBuf,
    out_dir: PathBuf,
    tag: String,
    warmup: Duration,
    duration: Duration,
    concurrency: Vec<usize>,
    depths: Vec<u64>,
    ops: Vec<Op>,
    raw: bool,
    wake_rounds: usize,
    idle_polls: usize,
    idle_window: Duration,
    prioq_env: Vec<(String, String)>,
}

const USAGE: &str = "\
cargo bench --bench load -- [flags]

  --quick               short smoke run (< 2 min): c = 1, 64; depths 1k, 100k
  --redis-url URL       use this Redis instead of starting one (keys under prefix prioqbench)
  --prioq-bin PATH      prioq binary (default: the one cargo built for this bench)
  --out DIR             where results go (default: bench/)
  --tag NAME            result file prefix (default: none; quick)
  --duration SECS       measured seconds per run (default 4; quick 1)
  --warmup SECS         unmeasured seconds before each run (default 0.5; quick 0.3)
  --concurrency LIST    e.g. 1,16,64,256
  --depths LIST         pending jobs, e.g. 1k,1M
  --ops LIST            of enqueue-single, enqueue-batch, claim-ack-single,
                        claim-ack-batch, e2e-single, e2e-batch
  --no-raw              skip the raw-Redis baseline
  --wake-rounds N       cross-instance long-poll rounds (default 200; 0 skips)
  --idle-polls N        idle long polls for the idle cost (default 100; 0 skips)
  --idle-window SECS    measuring window of the idle cost (default 10)
  --prioq-env K=V       extra environment for prioq (repeatable), e.g. RUST_LOG=warn";

fn parse_count(s: &str) -> Result<u64> {
    let (digits, unit) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1_000),
        Some('m' | 'M') => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    Ok(digits
        .parse::<u64>()
        .with_context(|| format!("not a count: {s}"))?
        * unit)
}

fn parse_secs(s: &str) -> Result<Duration> {
    let secs: f64 = s.parse().with_context(|| format!("not seconds: {s}"))?;
    if !(0.0..=3600.0).contains(&secs) {
        bail!("seconds out of range: {s}");
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_args(argv: &[String]) -> Result<Args> {
    let quick = argv.iter().any(|a| a == "--quick");
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args = Args {
        quick,
        redis_url: None,
        prioq_bin: PathBuf::from(env!("CARGO_BIN_EXE_prioq")),
        out_dir: manifest.join("bench"),
        tag: if quick { "quick".into() } else { String::new() },
        warmup: Duration::from_millis(if quick { 300 } else { 500 }),
        duration: Duration::from_millis(if quick { 1000 } else { 4000 }),
        concurrency: if quick {
            vec![1, 64]
        } else {
            vec![1, 16, 64, 256]
        },
        depths: if quick {
            vec![1_000, 100_000]
        } else {
            vec![1_000, 1_000_000]
        },
        ops: Op::ALL.to_vec(),
        raw: true,
        wake_rounds: if quick { 50 } else { 200 },
        idle_polls: 100,
        idle_window: Duration::from_secs(if quick { 5 } else { 10 }),
        prioq_env: Vec::new(),
    };
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| anyhow!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--bench" | "--quick" => {}
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--redis-url" => args.redis_url = Some(value()?),
            "--prioq-bin" => args.prioq_bin = PathBuf::from(value()?),
            "--out" => args.out_dir = PathBuf::from(value()?),
            "--tag" => args.tag = value()?,
            "--duration" => args.duration = parse_secs(&value()?)?,
            "--warmup" => args.warmup = parse_secs(&value()?)?,
            "--concurrency" => {
                args.concurrency = value()?
                    .split(',')
                    .map(|c| Ok(usize::try_from(parse_count(c)?)?.clamp(1, 4096)))
                    .collect::<Result<_>>()?;
            }
            "--depths" => {
                args.depths = value()?
                    .split(',')
                    .map(|d| Ok(parse_count(d)?.clamp(1, 20_000_000)))
                    .collect::<Result<_>>()?;
            }
            "--ops" => {
                args.ops = value()?
                    .split(',')
                    .map(|o| Op::parse(o).ok_or_else(|| anyhow!("unknown op {o}")))
                    .collect::<Result<_>>()?;
            }
            "--no-raw" => args.raw = false,
            "--wake-rounds" => args.wake_rounds = usize::try_from(parse_count(&value()?)?)?,
            "--idle-polls" => args.idle_polls = usize::try_from(parse_count(&value()?)?)?,
            "--idle-window" => args.idle_window = parse_secs(&value()?)?,
            "--prioq-env" => {
                let kv = value()?;
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| anyhow!("--prioq-env wants KEY=VALUE"))?;
                args.prioq_env.push((k.to_owned(), v.to_owned()));
            }
            other => bail!("unknown flag {other}\n\n{USAGE}"),
        }
    }
    args.depths.sort_unstable();
    args.depths.dedup();
    args.concurrency.sort_unstable();
    args.concurrency.dedup();
    args.idle_polls = args.idle_polls.min(2000);
    args.wake_rounds = args.wake_rounds.min(5000);
    Ok(args)
}

// ---------------------------------------------------------------------------
// Processes: Redis, prioq, and their CPU time.

/// A child process, killed when dropped.
#[derive(Debug)]
struct Proc {
    child: Child,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start_redis(port: u16) -> Result<Proc> {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--loglevel", "warning"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .context("cannot start redis-server (is it installed?)")?;
    Ok(Proc { child })
}

fn start_prioq(args: &Args, port: u16, redis_url: &str, prefix: &str) -> Result<Proc> {
    let mut command = Command::new(&args.prioq_bin);
    for (key, _) in std::env::vars() {
        if key.starts_with("PRIOQ_") {
            command.env_remove(key);
        }
    }
    let child = command
        .env("PRIOQ_LISTEN", format!("127.0.0.1:{port}"))
        .env("PRIOQ_REDIS_URL", redis_url)
        .env("PRIOQ_KEY_PREFIX", prefix)
        .envs(args.prioq_env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| {
            format!(
                "cannot start {} (run `cargo build --release` first)",
                args.prioq_bin.display()
            )
        })?;
    Ok(Proc { child })
}

async fn wait_ready(client: &reqwest::Client, base: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(response) = client.get(format!("{base}/readyz")).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("prioq at {base} did not become ready");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // After the command name: field 3 (state) is index 0; utime is field 14.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

// ---------------------------------------------------------------------------
// Redis: connections, INFO, scripts.

async fn connect(client: &redis::Client) -> Result<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_secs(60)))
        .set_connection_timeout(Some(Duration::from_secs(2)));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(mut con) => {
                if redis::cmd("PING")
                    .query_async::<String>(&mut con)
                    .await
                    .is_ok()
                {
                    return Ok(con);
                }
            }
            Err(error) if Instant::now() > deadline => {
                return Err(error).context("cannot connect to Redis");
            }
            Err(_) => {}
        }
        if Instant::now() > deadline {
            bail!("Redis does not answer PING");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn info(
    con: &mut MultiplexedConnection,
    sections: &[&str],
) -> Result<BTreeMap<String, String>> {
    let mut cmd = redis::cmd("INFO");
    for section in sections {
        cmd.arg(*section);
    }
    let text: String = cmd.query_async(con).await?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

/// Counters Redis keeps about itself.
#[derive(Debug, Clone, Default)]
struct RedisCounters {
    fcall_calls: u64,
    fcall_usec: u64,
    eval_calls: u64,
    eval_usec: u64,
    total_commands: u64,
    /// `(calls, usec)` of every command, those run inside scripts included.
    commands: BTreeMap<String, (u64, u64)>,
}

fn cmdstat(map: &BTreeMap<String, String>, command: &str) -> (u64, u64) {
    let Some(line) = map.get(&format!("cmdstat_{command}")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

async fn redis_counters(con: &mut MultiplexedConnection) -> Result<RedisCounters> {
    let map = info(con, &["commandstats", "stats"]).await?;
    let (fcall_calls, fcall_usec) = cmdstat(&map, "fcall");
    let (eval_calls, eval_usec) = cmdstat(&map, "eval");
    let commands = map
        .keys()
        .filter_map(|k| k.strip_prefix("cmdstat_"))
        .map(|command| (command.to_owned(), cmdstat(&map, command)))
        .collect();
    Ok(RedisCounters {
        fcall_calls,
        fcall_usec,
        eval_calls,
        eval_usec,
        commands,
        total_commands: map
            .get("total_commands_processed")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

async fn used_memory(con: &mut MultiplexedConnection) -> Result<u64> {
    // Let lazy frees and the allocator's stats settle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    info(con, &["memory"])
        .await?
        .get("used_memory")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no used_memory in INFO"))
}

/// Loads prioq's function library, as prioq does on first use.
async fn load_library(con: &mut MultiplexedConnection) -> Result<()> {
    LIBRARY.load_command().query_async::<()>(con).await?;
    Ok(())
}

fn bulk(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// `(id, lease token)` of each job in a claim function's reply:
/// `{now, {{acks}, {{id, record, token, last error}...}}}`.
fn leases_of(reply: &Value) -> Vec<(String, String)> {
    let Value::Array(reply) = reply else {
        return Vec::new();
    };
    let Some(Value::Array(requests)) = reply.get(1) else {
        return Vec::new();
    };
    requests
        .iter()
        .filter_map(|request| match request {
            Value::Array(parts) => match parts.get(1) {
                Some(Value::Array(jobs)) => Some(jobs),
                _ => None,
            },
            _ => None,
        })
        .flatten()
        .filter_map(|job| {
            let Value::Array(fields) = job else {
                return None;
            };
            Some((bulk(fields.first()?)?, bulk(fields.get(2)?)?))
        })
        .collect()
}

/// Adds one enqueue call of `n` fresh jobs to a pipeline.
fn push_enqueue(pipe: &mut redis::Pipeline, keys: &QueueKeys, n: usize, body: &[u8]) {
    let mut cmd = LIBRARY.call(Function::Enqueue, keys);
    cmd.arg(1).arg(n);
    for _ in 0..n {
        cmd.arg(fresh_id())
            .arg(PRIORITY)
            .arg(0)
            .arg(MAX_ATTEMPTS)
            .arg(body);
    }
    pipe.add_command(cmd);
}

fn push_claim(pipe: &mut redis::Pipeline, keys: &QueueKeys, max_jobs: usize) {
    let mut cmd = LIBRARY.call(Function::Claim, keys);
    cmd.arg(CLAIM_PROMOTE_BATCH)
        .arg(FLOOR_PPM)
        .arg(fresh_id())
        .arg(1)
        .arg(LEASE_MS)
        .arg(max_jobs)
        .arg("")
        .arg(0);
    pipe.add_command(cmd);
}

fn push_ack(pipe: &mut redis::Pipeline, keys: &QueueKeys, leases: &[(String, String)]) {
    let mut cmd = LIBRARY.call(Function::Ack, keys);
    for (id, token) in leases {
        cmd.arg(id).arg(token);
    }
    pipe.add_command(cmd);
}

/// Enqueues `n` jobs with the enqueue script, pipelined over a few
/// connections: the fast prefill.
async fn prefill(cons: &[MultiplexedConnection], keys: &QueueKeys, n: u64) -> Result<()> {
    let per_call = 100u64;
    let calls_per_round = 20u64;
    let per_round = per_call * calls_per_round;
    let rounds = n.div_ceil(per_round);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let body = Arc::new(stored_body());
    let mut tasks = Vec::new();
    for con in cons {
        let (mut con, keys, next, body) = (
            con.clone(),
            keys.clone(),
            Arc::clone(&next),
            Arc::clone(&body),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let round = next.fetch_add(1, Ordering::Relaxed);
                if round >= rounds {
                    return Ok::<_, anyhow::Error>(());
                }
                let mut remaining = (n - round * per_round).min(per_round);
                let mut pipe = redis::pipe();
                while remaining > 0 {
                    let take = remaining.min(per_call);
                    push_enqueue(&mut pipe, &keys, take as usize, &body);
                    remaining -= take;
                }
                pipe.query_async::<Vec<Value>>(&mut con).await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

async fn unlink_queue(con: &mut MultiplexedConnection, keys: &QueueKeys) -> Result<()> {
    let mut cmd = redis::cmd("UNLINK");
    for key in Key::ALL {
        cmd.arg(keys.key(key));
    }
    cmd.query_async::<i64>(con).await?;
    Ok(())
}

// ---------------------------------------------------------------------------
// The housekeeper: holds a queue's pending depth in [depth, depth + 2·slack]
// during a run, without EVALSHA (plain commands to refill, EVAL to drain),
// so `cmdstat_fcall` holds only the measured path.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeeperMode {
    Refill,
    Drain,
}

#[derive(Debug, Clone, Copy, Default)]
struct KeeperStats {
    added: u64,
    removed: u64,
    min_depth: u64,
    max_depth: u64,
}

fn slack(depth: u64) -> u64 {
    (depth / 50).clamp(500, 20_000)
}

async fn zcard(con: &mut MultiplexedConnection, key: &str) -> Result<u64> {
    Ok(redis::cmd("ZCARD").arg(key).query_async(con).await?)
}

/// One housekeeping step; returns whether it did anything.
async fn keep_depth(
    con: &mut MultiplexedConnection,
    keys: &QueueKeys,
    depth: u64,
    mode: Option<KeeperMode>,
    args: &str,
    stats: &mut KeeperStats,
) -> Result<bool> {
    let n = zcard(con, keys.key(Key::Pending)).await?;
    stats.min_depth = stats.min_depth.min(n);
    stats.max_depth = stats.max_depth.max(n);
    let slack = slack(depth);
    let refill = mode != Some(KeeperMode::Drain) && n < depth;
    let drain = mode != Some(KeeperMode::Refill) && n > depth + 2 * slack;
    if refill {
        let missing = depth + slack - n;
        stats.added += missing;
        refill_directly(con, keys, missing, args).await?;
    } else if drain {
        let mut excess = n - depth - slack;
        while excess > 0 {
            let take = excess.min(1000);
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(DRAIN_LUA)
                .arg(2)
                .arg(keys.key(Key::Pending))
                .arg(keys.key(Key::Jobs))
                .arg(take);
            let removed: u64 = cmd.query_async(con).await?;
            stats.removed += removed;
            excess -= take.min(removed.max(1));
        }
    }
    Ok(refill || drain)
}

/// Adds `n` pending jobs the cheap way (INCRBY for their arrival numbers,
/// then one HSET and one ZADD per thousand jobs), writing exactly what the
/// enqueue function writes: about a fifth of its Redis time per job, so
/// holding the depth disturbs the measured path little.
async fn refill_directly(
    con: &mut MultiplexedConnection,
    keys: &QueueKeys,
    n: u64,
    args: &str,
) -> Result<()> {
    const SEQ_SPAN: f64 = 17_592_186_044_416.0; // 2^44, as in lua/library.lua
    let mut remaining = n;
    while remaining > 0 {
        let take = remaining.min(1000);
        let (last, (secs, micros)): (u64, (u64, u64)) = redis::pipe()
            .cmd("INCRBY")
            .arg(keys.key(Key::Seq))
            .arg(take)
            .cmd("TIME")
            .query_async(con)
            .await?;
        let now_ms = (secs * 1000 + micros / 1000) as i64;
        let record = Record {
            priority: PRIORITY,
            attempts: 0,
            max_attempts: MAX_ATTEMPTS,
            enqueued_at_ms: now_ms,
            ready_at_ms: now_ms,
            last_error: None,
            task: TASK,
            args,
        }
        .encode();
        let mut hset = redis::cmd("HSET");
        hset.arg(keys.key(Key::Jobs));
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(keys.key(Key::Pending));
        for seq in last + 1 - take..=last {
            let id = fresh_id();
            hset.arg(&id).arg(&record);
            // Exact in a float64, like the function's arrival_score.
            let score = f64::from(PRIORITY) + seq as f64 / SEQ_SPAN;
            zadd.arg(score.to_string()).arg(id);
        }
        let mut pipe = redis::pipe();
        pipe.add_command(hset).add_command(zadd);
        pipe.query_async::<Vec<Value>>(con).await?;
        remaining -= take;
    }
    Ok(())
}

fn spawn_keeper(
    mut con: MultiplexedConnection,
    keys: QueueKeys,
    depth: u64,
    mode: KeeperMode,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Result<KeeperStats>> {
    tokio::spawn(async move {
        let args = args_json();
        let mut stats = KeeperStats {
            min_depth: u64::MAX,
            ..KeeperStats::default()
        };
        let deadline = Instant::now() + Duration::from_secs(600);
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            if !keep_depth(&mut con, &keys, depth, Some(mode), &args, &mut stats).await? {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        Ok(stats)
    })
}

// ---------------------------------------------------------------------------
// Measuring: a window, per-task stats, snapshots of CPU and Redis counters.

#[derive(Debug, Clone, Copy)]
struct Window {
    warm_end: Instant,
    end: Instant,
}

impl Window {
    fn starting_now(warmup: Duration, duration: Duration) -> Self {
        let warm_end = Instant::now() + warmup;
        Self {
            warm_end,
            end: warm_end + duration,
        }
    }

    fn contains(&self, start: Instant, end: Instant) -> bool {
        start >= self.warm_end && end <= self.end
    }

    fn done(&self, end: Instant) -> bool {
        end >= self.warm_end && end <= self.end
    }
}

/// Latency samples (µs) by call name, and what a task got done.
#[derive(Debug, Default)]
struct TaskStats {
    jobs: u64,
    errors: u64,
    short_claims: u64,
    last_error: Option<String>,
    samples: BTreeMap<&'static str, Vec<u32>>,
}

impl TaskStats {
    fn record(&mut self, window: &Window, call: &'static str, start: Instant, end: Instant) {
        if window.contains(start, end) {
            let us = end
                .duration_since(start)
                .as_micros()
                .min(u128::from(u32::MAX)) as u32;
            self.samples.entry(call).or_default().push(us);
        }
    }

    fn finished(&mut self, window: &Window, end: Instant, jobs: u64) {
        if window.done(end) {
            self.jobs += jobs;
        }
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        self.last_error = Some(what);
    }

    fn merge(&mut self, other: Self) {
        self.jobs += other.jobs;
        self.errors += other.errors;
        self.short_claims += other.short_claims;
        if other.last_error.is_some() {
            self.last_error = other.last_error;
        }
        for (call, samples) in other.samples {
            self.samples.entry(call).or_default().extend(samples);
        }
    }
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct Latency {
    n: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

fn latency(samples: &mut [u32]) -> Latency {
    if samples.is_empty() {
        return Latency::default();
    }
    samples.sort_unstable();
    let rank = |p: f64| {
        let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        f64::from(samples[i]) / 1000.0
    };
    Latency {
        n: samples.len(),
        p50_ms: rank(0.50),
        p99_ms: rank(0.99),
        max_ms: f64::from(samples[samples.len() - 1]) / 1000.0,
    }
}

/// Everything the runs need to see about the processes.
#[derive(Debug)]
struct Monitor {
    con: MultiplexedConnection,
    prioq_pids: Vec<u32>,
    redis_pid: Option<u32>,
}

#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    bench: u64,
    prioq: u64,
    redis: u64,
    counters: RedisCounters,
}

impl Monitor {
    async fn snapshot(&mut self) -> Result<Snapshot> {
        let at = Instant::now();
        let counters = redis_counters(&mut self.con).await?;
        Ok(Snapshot {
            at,
            bench: cpu_ticks(std::process::id()).unwrap_or(0),
            prioq: self.prioq_pids.iter().filter_map(|p| cpu_ticks(*p)).sum(),
            redis: self.redis_pid.and_then(cpu_ticks).unwrap_or(0),
            counters,
        })
    }
}

/// CPU seconds of each process over a run's window.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct CpuSeconds {
    bench: f64,
    prioq: f64,
    redis: f64,
}

/// One measured run.
#[derive(Debug, Clone, serde::Serialize)]
struct RunRecord {
    /// `http` (through prioq) or `raw` (the scripts pipelined into Redis).
    path: &'static str,
    op: &'static str,
    depth: u64,
    /// HTTP: concurrent client loops. Raw: pipelines in flight.
    concurrency: usize,
    jobs: u64,
    seconds: f64,
    jobs_per_s: f64,
    /// This figure over the raw-Redis figure of the same op and depth.
    vs_raw: Option<f64>,
    /// By call: HTTP request latency; raw: one pipelined round trip.
    latency: BTreeMap<&'static str, Latency>,
    errors: u64,
    last_error: Option<String>,
    /// Batch claims that found fewer than 100 jobs.
    short_claims: u64,
    /// EVALSHA time in Redis (`INFO commandstats`) per job: the measured
    /// scripts only.
    redis_script_us_per_job: f64,
    /// EVALSHA calls per job.
    script_calls_per_job: f64,
    /// Every command Redis ran during the run (inside scripts too, so
    /// `evalsha` contains the others), per job: where the script time goes.
    redis_commands: BTreeMap<String, CommandCost>,
    /// CPU of the redis-server process per job (includes networking and the
    /// housekeeper).
    redis_process_us_per_job: f64,
    /// CPU per job of each process: less sensitive than jobs/s to what
    /// else runs on the machine.
    cpu_us_per_job: CpuSeconds,
    cpu_seconds: CpuSeconds,
    /// What the housekeeper did to hold the depth, and its cost in Redis.
    keeper: KeeperJson,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct CommandCost {
    calls_per_job: f64,
    us_per_job: f64,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct KeeperJson {
    added: u64,
    removed: u64,
    min_depth: u64,
    max_depth: u64,
    eval_calls: u64,
    eval_usec: u64,
}

/// What a run's tasks are.
trait Load: Send + Sync + 'static {
    fn task(
        self: Arc<Self>,
        index: usize,
        window: Window,
    ) -> impl Future<Output = TaskStats> + Send;
}

#[allow(clippy::too_many_arguments)]
async fn measure<L: Load>(
    monitor: &mut Monitor,
    keeper_con: &MultiplexedConnection,
    load: Arc<L>,
    tasks: usize,
    warmup: Duration,
    duration: Duration,
    keys: &QueueKeys,
    depth: u64,
    mode: KeeperMode,
) -> Result<(TaskStats, Snapshot, Snapshot, KeeperStats)> {
    // Start from the depth asked for.
    {
        let mut con = keeper_con.clone();
        let args = args_json();
        let mut stats = KeeperStats::default();
        for _ in 0..1000 {
            if !keep_depth(&mut con, keys, depth, None, &args, &mut stats).await? {
                break;
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let keeper = spawn_keeper(
        keeper_con.clone(),
        keys.clone(),
        depth,
        mode,
        Arc::clone(&stop),
    );
    let window = Window::starting_now(warmup, duration);
    let handles: Vec<_> = (0..tasks)
        .map(|i| tokio::spawn(Arc::clone(&load).task(i, window)))
        .collect();
    tokio::time::sleep_until(window.warm_end.into()).await;
    let before = monitor.snapshot().await?;
    tokio::time::sleep_until(window.end.into()).await;
    let after = monitor.snapshot().await?;
    let mut total = TaskStats::default();
    for handle in handles {
        let abort = handle.abort_handle();
        match tokio::time::timeout(REQUEST_TIMEOUT * 2, handle).await {
            Ok(Ok(stats)) => total.merge(stats),
            Ok(Err(error)) => total.error(format!("task failed: {error}")),
            Err(_) => {
                abort.abort();
                total.error("task did not stop in time".into());
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let keeper = keeper.await??;
    Ok((total, before, after, keeper))
}

fn record(
    path: &'static str,
    op: Op,
    depth: u64,
    concurrency: usize,
    (mut stats, before, after, keeper): (TaskStats, Snapshot, Snapshot, KeeperStats),
    clk_tck: f64,
) -> RunRecord {
    let seconds = after.at.duration_since(before.at).as_secs_f64();
    let jobs = stats.jobs.max(1) as f64;
    let ticks = |a: u64, b: u64| b.saturating_sub(a) as f64 / clk_tck;
    let cpu = CpuSeconds {
        bench: ticks(before.bench, after.bench),
        prioq: ticks(before.prioq, after.prioq),
        redis: ticks(before.redis, after.redis),
    };
    let c0 = &before.counters;
    let c1 = &after.counters;
    let commands = c1
        .commands
        .iter()
        .filter_map(|(command, &(calls, usec))| {
            let (calls0, usec0) = c0.commands.get(command).copied().unwrap_or((0, 0));
            let calls = calls.saturating_sub(calls0);
            (calls > 0).then(|| {
                (
                    command.clone(),
                    CommandCost {
                        calls_per_job: calls as f64 / jobs,
                        us_per_job: usec.saturating_sub(usec0) as f64 / jobs,
                    },
                )
            })
        })
        .collect();
    RunRecord {
        path,
        op: op.name(),
        depth,
        concurrency,
        jobs: stats.jobs,
        seconds,
        jobs_per_s: stats.jobs as f64 / seconds,
        vs_raw: None,
        latency: stats
            .samples
            .iter_mut()
            .map(|(call, samples)| (*call, latency(samples)))
            .collect(),
        errors: stats.errors,
        last_error: stats.last_error.take(),
        short_claims: stats.short_claims,
        redis_script_us_per_job: c1.fcall_usec.saturating_sub(c0.fcall_usec) as f64 / jobs,
        script_calls_per_job: c1.fcall_calls.saturating_sub(c0.fcall_calls) as f64 / jobs,
        redis_commands: commands,
        redis_process_us_per_job: cpu.redis * 1e6 / jobs,
        cpu_us_per_job: CpuSeconds {
            bench: cpu.bench * 1e6 / jobs,
            prioq: cpu.prioq * 1e6 / jobs,
            redis: cpu.redis * 1e6 / jobs,
        },
        cpu_seconds: cpu,
        keeper: KeeperJson {
            added: keeper.added,
            removed: keeper.removed,
            min_depth: if keeper.min_depth == u64::MAX {
                0
            } else {
                keeper.min_depth
            },
            max_depth: keeper.max_depth,
            eval_calls: c1.eval_calls.saturating_sub(c0.eval_calls),
            eval_usec: c1.eval_usec.saturating_sub(c0.eval_usec),
        },
    }
}

// ---------------------------------------------------------------------------
// The HTTP load.

#[derive(Debug, Deserialize)]
struct Claimed {
    jobs: Vec<Leased>,
}

#[derive(Debug, Deserialize)]
struct Leased {
    id: String,
    lease_token: String,
}

#[derive(Debug, Deserialize)]
struct AckResults {
    results: Vec<AckResult>,
}

#[derive(Debug, Deserialize)]
struct AckResult {
    status: u16,
}

#[derive(Debug)]
struct Http {
    client: reqwest::Client,
    op: Op,
    queue_url: String,
    enqueue_url: String,
    batch_url: String,
    claim_url: String,
    ack_many_url: String,
    single_body: &'static str,
    batch_body: &'static str,
    claim_body: &'static str,
    claim_batch_body: &'static str,
}

/// One POST with a JSON body: status and body, or what went wrong.
async fn post(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> Result<(u16, Vec<u8>), String> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    Ok((status, bytes.to_vec()))
}

/// A `&'static str` body costs the load generator no copy per request.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Request bodies, built once per process.
#[derive(Debug, Clone, Copy)]
struct Bodies {
    single: &'static str,
    batch: &'static str,
    claim: &'static str,
    claim_batch: &'static str,
}

fn bodies() -> Bodies {
    static BODIES: std::sync::OnceLock<Bodies> = std::sync::OnceLock::new();
    *BODIES.get_or_init(|| {
        let job = format!(
            r#"{{"task":"{TASK}","args":{},"priority":{PRIORITY}}}"#,
            args_json()
        );
        let batch = format!(r#"{{"jobs":[{}]}}"#, vec![job.as_str(); BATCH].join(","));
        Bodies {
            single: leak(job),
            batch: leak(batch),
            claim: leak(format!(r#"{{"max_jobs":1,"lease_ms":{LEASE_MS}}}"#)),
            claim_batch: leak(format!(r#"{{"max_jobs":{BATCH},"lease_ms":{LEASE_MS}}}"#)),
        }
    })
}

impl Http {
    fn new(client: &reqwest::Client, base: &str, queue: &str, op: Op) -> Self {
        let queue_url = format!("{base}/v1/queues/{queue}");
        let b = bodies();
        Self {
            client: client.clone(),
            op,
            enqueue_url: format!("{queue_url}/jobs"),
            batch_url: format!("{queue_url}/jobs/batch"),
            claim_url: format!("{queue_url}/claim"),
            ack_many_url: format!("{queue_url}/ack"),
            queue_url,
            single_body: b.single,
            batch_body: b.batch,
            claim_body: b.claim,
            claim_batch_body: b.claim_batch,
        }
    }

    /// Enqueues one job or a batch; counts them as done when `count`.
    async fn enqueue(&self, batch: bool, count: bool, st: &mut TaskStats, w: &Window) -> bool {
        let (url, body, call, want, n) = if batch {
            (
                &self.batch_url,
                self.batch_body,
                "enqueue_batch",
                200,
                BATCH as u64,
            )
        } else {
            (&self.enqueue_url, self.single_body, "enqueue", 201, 1)
        };
        let start = Instant::now();
        let result = post(&self.client, url, body).await;
        let end = Instant::now();
        match result {
            Ok((status, _)) if status == want => {
                st.record(w, call, start, end);
                if count {
                    st.finished(w, end, n);
                }
                true
            }
            Ok((status, body)) => {
                st.error(format!(
                    "{call}: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
                false
            }
            Err(error) => {
                st.error(error);
                false
            }
        }
    }

    async fn claim(&self, batch: bool, st: &mut TaskStats, w: &Window) -> Vec<Leased> {
        let (body, call) = if batch {
            (self.claim_batch_body, "claim_batch")
        } else {
            (self.claim_body, "claim")
        };
        let start = Instant::now();
        let result = post(&self.client, &self.claim_url, body).await;
        let end = Instant::now();
        let parsed = match result {
            Ok((200, bytes)) => {
                serde_json::from_slice::<Claimed>(&bytes).map_err(|e| e.to_string())
            }
            Ok((status, bytes)) => Err(format!(
                "{call}: {status} {}",
                String::from_utf8_lossy(&bytes)
            )),
            Err(error) => Err(error),
        };
        match parsed {
            Ok(claimed) => {
                st.record(w, call, start, end);
                if claimed.jobs.len() < if batch { BATCH } else { 1 } {
                    st.short_claims += 1;
                }
                claimed.jobs
            }
            Err(error) => {
                st.error(error);
                Vec::new()
            }
        }
    }

    async fn ack(&self, leased: &[Leased], st: &mut TaskStats, w: &Window) {
        if leased.is_empty() {
            return;
        }
        if self.op.batched() {
            let body = json!({
                "jobs": leased
                    .iter()
                    .map(|l| json!({"id": l.id, "lease_token": l.lease_token}))
                    .collect::<Vec<_>>()
            })
            .to_string();
            let start = Instant::now();
            let result = post(&self.client, &self.ack_many_url, body).await;
            let end = Instant::now();
            let acked = match result {
                Ok((200, bytes)) => serde_json::from_slice::<AckResults>(&bytes)
                    .map(|r| r.results.iter().filter(|r| r.status == 204).count() as u64)
                    .map_err(|e| e.to_string()),
                Ok((status, bytes)) => Err(format!(
                    "ack_many: {status} {}",
                    String::from_utf8_lossy(&bytes)
                )),
                Err(error) => Err(error),
            };
            match acked {
                Ok(acked) => {
                    st.record(w, "ack_many", start, end);
                    st.finished(w, end, acked);
                    if acked < leased.len() as u64 {
                        st.error(format!("ack_many: {acked} of {} acked", leased.len()));
                    }
                }
                Err(error) => st.error(error),
            }
        } else {
            for job in leased {
                let url = format!("{}/jobs/{}/ack", self.queue_url, job.id);
                let body = format!(r#"{{"lease_token":"{}"}}"#, job.lease_token);
                let start = Instant::now();
                let result = post(&self.client, &url, body).await;
                let end = Instant::now();
                match result {
                    Ok((204, _)) => {
                        st.record(w, "ack", start, end);
                        st.finished(w, end, 1);
                    }
                    Ok((status, bytes)) => {
                        st.error(format!("ack: {status} {}", String::from_utf8_lossy(&bytes)));
                    }
                    Err(error) => st.error(error),
                }
            }
        }
    }
}

impl Load for Http {
    async fn task(self: Arc<Self>, _index: usize, w: Window) -> TaskStats {
        let mut st = TaskStats::default();
        let batch = self.op.batched();
        for _ in 0..MAX_ITERATIONS {
            if Instant::now() >= w.end {
                break;
            }
            let errors = st.errors;
            match self.op {
                Op::EnqueueSingle | Op::EnqueueBatch => {
                    self.enqueue(batch, true, &mut st, &w).await;
                }
                Op::ClaimAckSingle | Op::ClaimAckBatch => {
                    let leased = self.claim(batch, &mut st, &w).await;
                    self.ack(&leased, &mut st, &w).await;
                }
                Op::E2eSingle | Op::E2eBatch => {
                    if self.enqueue(batch, false, &mut st, &w).await {
                        let leased = self.claim(batch, &mut st, &w).await;
                        self.ack(&leased, &mut st, &w).await;
                    }
                }
            }
            if st.errors > errors {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        st
    }
}

// ---------------------------------------------------------------------------
// The raw-Redis load: the same scripts, pipelined.

#[derive(Debug)]
struct Raw {
    cons: Vec<MultiplexedConnection>,
    keys: QueueKeys,
    op: Op,
    body: Vec<u8>,
}

impl Raw {
    fn per_call(&self) -> usize {
        if self.op.batched() { BATCH } else { 1 }
    }

    fn calls(&self) -> usize {
        if self.op.batched() {
            RAW_PIPELINE_BATCH
        } else {
            RAW_PIPELINE_SINGLE
        }
    }

    async fn enqueue(&self, con: &mut MultiplexedConnection) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        for _ in 0..self.calls() {
            push_enqueue(&mut pipe, &self.keys, self.per_call(), &self.body);
        }
        pipe.query_async::<Vec<Value>>(con).await.map(drop)
    }

    async fn claim(
        &self,
        con: &mut MultiplexedConnection,
    ) -> redis::RedisResult<Vec<Vec<(String, String)>>> {
        let mut pipe = redis::pipe();
        for _ in 0..self.calls() {
            push_claim(&mut pipe, &self.keys, self.per_call());
        }
        let replies: Vec<Value> = pipe.query_async(con).await?;
        Ok(replies.iter().map(leases_of).collect())
    }

    async fn ack(
        &self,
        con: &mut MultiplexedConnection,
        leases: &[Vec<(String, String)>],
    ) -> redis::RedisResult<u64> {
        let mut pipe = redis::pipe();
        let mut n = 0;
        for call in leases.iter().filter(|l| !l.is_empty()) {
            push_ack(&mut pipe, &self.keys, call);
            n += 1;
        }
        if n == 0 {
            return Ok(0);
        }
        let replies: Vec<Value> = pipe.query_async(con).await?;
        Ok(replies
            .iter()
            .map(|reply| match reply {
                Value::Array(statuses) => statuses
                    .iter()
                    .filter(|s| {
                        matches!(s, Value::SimpleString(s) if s == "OK")
                            || bulk(s).as_deref() == Some("OK")
                    })
                    .count() as u64,
                _ => 0,
            })
            .sum())
    }
}

impl Load for Raw {
    async fn task(self: Arc<Self>, index: usize, w: Window) -> TaskStats {
        let mut st = TaskStats::default();
        let mut con = self.cons[index % self.cons.len()].clone();
        let jobs_per_round = (self.calls() * self.per_call()) as u64;
        for _ in 0..MAX_ITERATIONS {
            if Instant::now() >= w.end {
                break;
            }
            let result: redis::RedisResult<()> = async {
                if matches!(
                    self.op,
                    Op::EnqueueSingle | Op::EnqueueBatch | Op::E2eSingle | Op::E2eBatch
                ) {
                    let start = Instant::now();
                    self.enqueue(&mut con).await?;
                    let end = Instant::now();
                    st.record(&w, "enqueue_pipeline", start, end);
                    if matches!(self.op, Op::EnqueueSingle | Op::EnqueueBatch) {
                        st.finished(&w, end, jobs_per_round);
                        return Ok(());
                    }
                }
                let start = Instant::now();
                let leases = self.claim(&mut con).await?;
                let mid = Instant::now();
                st.record(&w, "claim_pipeline", start, mid);
                let claimed: usize = leases.iter().map(Vec::len).sum();
                if claimed < self.calls() * self.per_call() {
                    st.short_claims += 1;
                }
                let acked = self.ack(&mut con, &leases).await?;
                let end = Instant::now();
                st.record(&w, "ack_pipeline", mid, end);
                st.finished(&w, end, acked);
                Ok(())
            }
            .await;
            if let Err(error) = result {
                st.error(error.to_string());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        st
    }
}

// ---------------------------------------------------------------------------
// Long polls: cross-instance wake-up latency and the idle cost.

#[derive(Debug, Clone, Default, serde::Serialize)]
struct WakeResult {
    rounds: usize,
    woken: usize,
    missed: usize,
    /// From sending the enqueue to B until the claim waiting on A answered.
    after_enqueue_sent: Latency,
    /// From B's enqueue answer until A's claim answer (0 when A answered first).
    after_enqueue_answered: Latency,
    /// The enqueue request alone, for reference.
    enqueue: Latency,
}

async fn wake_test(
    client: &reqwest::Client,
    a: &str,
    b: &str,
    rounds: usize,
) -> Result<WakeResult> {
    let queue = "bench-wake";
    let claim_url = format!("{a}/v1/queues/{queue}/claim");
    let enqueue_url = format!("{b}/v1/queues/{queue}/jobs");
    let body = bodies().single;
    // Warm both instances and connections up; leave the queue empty.
    for base in [a, b] {
        let url = format!("{base}/v1/queues/{queue}/claim");
        post(client, &format!("{base}/v1/queues/{queue}/jobs"), body)
            .await
            .map_err(|e| anyhow!(e))?;
        let (_, bytes) = post(client, &url, r#"{"max_jobs":100}"#)
            .await
            .map_err(|e| anyhow!(e))?;
        let claimed: Claimed = serde_json::from_slice(&bytes)?;
        for job in claimed.jobs {
            let url = format!("{base}/v1/queues/{queue}/jobs/{}/ack", job.id);
            post(
                client,
                &url,
                format!(r#"{{"lease_token":"{}"}}"#, job.lease_token),
            )
            .await
            .map_err(|e| anyhow!(e))?;
        }
    }
    let mut sent = Vec::new();
    let mut answered = Vec::new();
    let mut enqueue = Vec::new();
    let mut result = WakeResult {
        rounds,
        ..WakeResult::default()
    };
    for _ in 0..rounds {
        let waiting = {
            let (client, url) = (client.clone(), claim_url.clone());
            tokio::spawn(async move {
                let r = post(&client, &url, r#"{"max_jobs":1,"wait_ms":5000}"#).await;
                (Instant::now(), r)
            })
        };
        // Let the claim reach prioq and park.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let t0 = Instant::now();
        let enq = post(client, &enqueue_url, body).await;
        let t_enq = Instant::now();
        if !matches!(enq, Ok((201, _))) {
            result.missed += 1;
            waiting.abort();
            continue;
        }
        let Ok(Ok((t1, Ok((200, bytes))))) =
            tokio::time::timeout(Duration::from_secs(10), waiting).await
        else {
            result.missed += 1;
            continue;
        };
        let claimed: Claimed = serde_json::from_slice(&bytes)?;
        let Some(job) = claimed.jobs.first() else {
            result.missed += 1;
            continue;
        };
        result.woken += 1;
        let us = |d: Duration| d.as_micros().min(u128::from(u32::MAX)) as u32;
        sent.push(us(t1.duration_since(t0)));
        answered.push(us(t1.saturating_duration_since(t_enq)));
        enqueue.push(us(t_enq.duration_since(t0)));
        let url = format!("{a}/v1/queues/{queue}/jobs/{}/ack", job.id);
        let _ = post(
            client,
            &url,
            format!(r#"{{"lease_token":"{}"}}"#, job.lease_token),
        )
        .await;
    }
    result.after_enqueue_sent = latency(&mut sent);
    result.after_enqueue_answered = latency(&mut answered);
    result.enqueue = latency(&mut enqueue);
    Ok(result)
}

#[derive(Debug, Clone, Default, serde::Serialize)]
struct IdleResult {
    polls: usize,
    window_s: f64,
    /// `total_commands_processed` per second (counts the commands scripts
    /// run, too), with no long poll: the sweepers of the running instances.
    baseline_commands_per_s: f64,
    baseline_script_calls_per_s: f64,
    with_polls_commands_per_s: f64,
    with_polls_script_calls_per_s: f64,
    /// The difference, per idle long poll.
    commands_per_s_per_poll: f64,
    script_calls_per_s_per_poll: f64,
    queues_registered: u64,
}

async fn idle_test(
    monitor: &mut Monitor,
    client: &reqwest::Client,
    a: &str,
    prefix: &str,
    polls: usize,
    window: Duration,
) -> Result<IdleResult> {
    let url = format!("{a}/v1/queues/bench-idle/claim");
    let rate = |s0: &Snapshot, s1: &Snapshot| {
        let secs = s1.at.duration_since(s0.at).as_secs_f64();
        (
            // The INFO of the first snapshot is counted once.
            (s1.counters
                .total_commands
                .saturating_sub(s0.counters.total_commands + 1)) as f64
                / secs,
            s1.counters
                .fcall_calls
                .saturating_sub(s0.counters.fcall_calls) as f64
                / secs,
        )
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s0 = monitor.snapshot().await?;
    tokio::time::sleep(window).await;
    let s1 = monitor.snapshot().await?;
    let (base_cmds, base_calls) = rate(&s0, &s1);

    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..polls)
        .map(|_| {
            let (client, url, stop) = (client.clone(), url.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                for _ in 0..100 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if post(&client, &url, r#"{"max_jobs":1,"wait_ms":20000}"#)
                        .await
                        .is_err()
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s2 = monitor.snapshot().await?;
    tokio::time::sleep(window).await;
    let s3 = monitor.snapshot().await?;
    stop.store(true, Ordering::Relaxed);
    for task in &tasks {
        task.abort();
    }
    let (poll_cmds, poll_calls) = rate(&s2, &s3);
    let queues: u64 = redis::cmd("SCARD")
        .arg(format!("{prefix}:queues"))
        .query_async(&mut monitor.con)
        .await
        .unwrap_or(0);
    let n = polls.max(1) as f64;
    Ok(IdleResult {
        polls,
        window_s: window.as_secs_f64(),
        baseline_commands_per_s: base_cmds,
        baseline_script_calls_per_s: base_calls,
        with_polls_commands_per_s: poll_cmds,
        with_polls_script_calls_per_s: poll_calls,
        commands_per_s_per_poll: (poll_cmds - base_cmds) / n,
        script_calls_per_s_per_poll: (poll_calls - base_calls) / n,
        queues_registered: queues,
    })
}

// ---------------------------------------------------------------------------
// The whole run.

#[derive(Debug, Clone, Default, serde::Serialize)]
struct MemoryResult {
    depth: u64,
    prefill_seconds: f64,
    prefill_jobs_per_s: f64,
    used_memory_before: u64,
    used_memory_after: u64,
    bytes_per_job: f64,
    /// Bytes of `args` per job, subtracted.
    payload_bytes: usize,
    bytes_per_job_beyond_payload: f64,
    /// The stored record (header + task + args JSON), for reference.
    stored_record_bytes: usize,
}

fn machine() -> serde_json::Value {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_default();
    let mem_kb: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    json!({
        "nproc": std::thread::available_parallelism().map_or(0, usize::from),
        "cpu_model": model,
        "memory_gib": (mem_kb as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "loadavg_at_start": read("/proc/loadavg").trim(),
    })
}

fn git_revision() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR")])
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let rev = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--", "src", "lua"]).is_empty();
    if dirty {
        format!("{rev}+uncommitted changes in src/ or lua/")
    } else {
        rev
    }
}

fn human(n: f64) -> String {
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

fn depth_label(d: u64) -> String {
    if d >= 1_000_000 && d.is_multiple_of(1_000_000) {
        format!("{}M", d / 1_000_000)
    } else if d >= 1_000 && d.is_multiple_of(1_000) {
        format!("{}k", d / 1_000)
    } else {
        d.to_string()
    }
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if !argv
        .iter()
        .any(|a| a == "--bench" || a == "--help" || a == "-h")
    {
        println!("benches/load.rs is a load benchmark: run it with `cargo bench --bench load`");
        return Ok(());
    }
    let args = parse_args(&argv)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let started_at = time_now();
    let clk_tck = clock_ticks();
    let own_redis = args.redis_url.is_none();
    let (redis_proc, redis_url) = match &args.redis_url {
        Some(url) => (None, url.clone()),
        None => {
            let port = free_port()?;
            (
                Some(start_redis(port)?),
                format!("redis://127.0.0.1:{port}"),
            )
        }
    };
    let prefix = if own_redis { "prioq" } else { "prioqbench" };
    let redis_client = redis::Client::open(redis_url.as_str())?;
    let mut con = connect(&redis_client).await?;
    let server = info(&mut con, &["server"]).await?;
    let redis_pid: Option<u32> = server
        .get("process_id")
        .and_then(|p| p.parse().ok())
        .or(redis_proc.as_ref().map(Proc::pid));
    let redis_version = server.get("redis_version").cloned().unwrap_or_default();
    if own_redis {
        redis::cmd("FLUSHALL").query_async::<()>(&mut con).await?;
    }
    load_library(&mut con).await?;

    let http_client = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        .tcp_nodelay(true)
        .timeout(REQUEST_TIMEOUT)
        .build()?;
    let port_a = free_port()?;
    let prioq_a = start_prioq(&args, port_a, &redis_url, prefix)?;
    let base_a = format!("http://127.0.0.1:{port_a}");
    wait_ready(&http_client, &base_a).await?;
    println!(
        "# prioq A pid {} at {base_a}; redis-server pid {} at {redis_url} (v{redis_version}); bench pid {}",
        prioq_a.pid(),
        redis_pid.map_or("?".into(), |p| p.to_string()),
        std::process::id()
    );

    let mut monitor = Monitor {
        con: connect(&redis_client).await?,
        prioq_pids: vec![prioq_a.pid()],
        redis_pid,
    };
    let keeper_con = connect(&redis_client).await?;
    let mut raw_cons = Vec::new();
    for _ in 0..RAW_CONNECTIONS {
        raw_cons.push(connect(&redis_client).await?);
    }

    let mut runs: Vec<RunRecord> = Vec::new();
    let mut memory: Vec<MemoryResult> = Vec::new();
    for &depth in &args.depths {
        let queue = format!("bench-d{}", depth_label(depth));
        let keys = QueueKeys::new(prefix, &queue);
        unlink_queue(&mut con, &keys).await?;
        let before = used_memory(&mut con).await?;
        let t = Instant::now();
        prefill(&raw_cons, &keys, depth).await?;
        let prefill_seconds = t.elapsed().as_secs_f64();
        let after = used_memory(&mut con).await?;
        let per_job = after.saturating_sub(before) as f64 / depth as f64;
        let record_len = Record {
            priority: PRIORITY,
            attempts: 0,
            max_attempts: MAX_ATTEMPTS,
            enqueued_at_ms: 1_764_460_000_000,
            ready_at_ms: 1_764_460_000_000,
            last_error: None,
            task: TASK,
            args: &args_json(),
        }
        .encode()
        .len();
        let m = MemoryResult {
            depth,
            prefill_seconds,
            prefill_jobs_per_s: depth as f64 / prefill_seconds,
            used_memory_before: before,
            used_memory_after: after,
            bytes_per_job: per_job,
            payload_bytes: PAYLOAD_BYTES,
            bytes_per_job_beyond_payload: per_job - PAYLOAD_BYTES as f64,
            stored_record_bytes: record_len,
        };
        println!(
            "# depth {}: prefilled in {:.1} s ({} jobs/s); {:.0} B/job, {:.0} B/job beyond the {PAYLOAD_BYTES}-byte payload",
            depth_label(depth),
            prefill_seconds,
            human(m.prefill_jobs_per_s),
            per_job,
            m.bytes_per_job_beyond_payload
        );
        memory.push(m);

        for &op in &args.ops {
            let mut raw_rate = None;
            if args.raw {
                let load = Arc::new(Raw {
                    cons: raw_cons.clone(),
                    keys: keys.clone(),
                    op,
                    body: stored_body(),
                });
                let measured = measure(
                    &mut monitor,
                    &keeper_con,
                    load,
                    RAW_CONNECTIONS,
                    args.warmup,
                    args.duration,
                    &keys,
                    depth,
                    op.keeper(),
                )
                .await?;
                let r = record("raw", op, depth, RAW_CONNECTIONS, measured, clk_tck);
                print_run(&r);
                raw_rate = Some(r.jobs_per_s);
                runs.push(r);
            }
            for &c in &args.concurrency {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let load = Arc::new(Http::new(&http_client, &base_a, &queue, op));
                let measured = measure(
                    &mut monitor,
                    &keeper_con,
                    load,
                    c,
                    args.warmup,
                    args.duration,
                    &keys,
                    depth,
                    op.keeper(),
                )
                .await?;
                let mut r = record("http", op, depth, c, measured, clk_tck);
                r.vs_raw = raw_rate.map(|raw| r.jobs_per_s / raw);
                print_run(&r);
                runs.push(r);
            }
        }
        unlink_queue(&mut con, &keys).await?;
    }

    let mut wake = None;
    let mut idle = None;
    if args.wake_rounds > 0 || args.idle_polls > 0 {
        let port_b = free_port()?;
        let prioq_b = start_prioq(&args, port_b, &redis_url, prefix)?;
        let base_b = format!("http://127.0.0.1:{port_b}");
        wait_ready(&http_client, &base_b).await?;
        if args.wake_rounds > 0 {
            let w = wake_test(&http_client, &base_a, &base_b, args.wake_rounds).await?;
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
            monitor.prioq_pids.push(prioq_b.pid());
            let i = idle_test(
                &mut monitor,
                &http_client,
                &base_a,
                prefix,
                args.idle_polls,
                args.idle_window,
            )
            .await?;
            println!(
                "# idle: {:.2} Redis commands/s per idle long poll ({:.3} script calls/s); sweepers alone {:.1} commands/s",
                i.commands_per_s_per_poll, i.script_calls_per_s_per_poll, i.baseline_commands_per_s
            );
            idle = Some(i);
        }
        drop(prioq_b);
    }
    drop(prioq_a);

    let results = json!({
        "tool": "cargo bench --bench load",
        "mode": if args.quick { "quick" } else { "full" },
        "started_at": started_at,
        "wall_seconds": started.elapsed().as_secs_f64(),
        "prioq_revision": git_revision(),
        "machine": machine(),
        "redis_version": redis_version,
        "setup": {
            "redis": if own_redis { "started by the bench: --save '' --appendonly no" } else { "given with --redis-url" },
            "prioq": "one release prioq process with its defaults (8 pooled Redis connections, bulk floor 0.1, info logs to /dev/null)",
            "prioq_env": args.prioq_env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "payload": format!("args of {PAYLOAD_BYTES} bytes, task \"{TASK}\", priority {PRIORITY}"),
            "batch": BATCH,
            "warmup_s": args.warmup.as_secs_f64(),
            "duration_s": args.duration.as_secs_f64(),
            "raw": format!("{RAW_CONNECTIONS} connections, each pipelining {RAW_PIPELINE_SINGLE} single-job or {RAW_PIPELINE_BATCH} hundred-job script calls per round trip"),
            "depth_keeping": "pending held in [depth, depth + 2 x slack] (slack = depth/50 clamped to 500..20000): refilled with INCRBY + HSET + ZADD writing what the enqueue script writes, drained with an EVAL of ZPOPMAX + HDEL; neither is an EVALSHA, so the per-job script time holds only the measured path",
            "clk_tck": clk_tck,
        },
        "memory": memory,
        "runs": runs,
        "wake": wake,
        "idle": idle,
    });
    let targets = targets(&results);
    let mut results = results;
    results["targets"] = serde_json::to_value(&targets)?;
    let markdown = markdown(&results, &args, &targets);
    let svg = svg(&runs, &args);

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
        &serde_json::to_string_pretty(&results)?,
    )?;
    write(&name("results", "md"), &markdown)?;
    write(&name("throughput", "svg"), &svg)?;
    println!("\n{markdown}");
    println!("# done in {:.0} s", started.elapsed().as_secs_f64());
    drop(redis_proc);
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("# wrote {}", path.display());
    Ok(())
}

fn time_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn print_run(r: &RunRecord) {
    let lat: Vec<String> = r
        .latency
        .iter()
        .map(|(call, l)| format!("{call} {:.2}/{:.2}/{:.1}", l.p50_ms, l.p99_ms, l.max_ms))
        .collect();
    println!(
        "{:4} {:17} d={:<5} c={:<3} {:>9} jobs/s{} | {} | redis {:.1} us/job | cpu us/job b/p/r {:.0}/{:.0}/{:.0} | cpu b/p/r {:.2}/{:.2}/{:.2} s{}",
        r.path,
        r.op,
        depth_label(r.depth),
        r.concurrency,
        human(r.jobs_per_s),
        r.vs_raw
            .map_or(String::new(), |v| format!(" ({:.0}% of raw)", v * 100.0)),
        lat.join(", "),
        r.redis_script_us_per_job,
        r.cpu_us_per_job.bench,
        r.cpu_us_per_job.prioq,
        r.cpu_us_per_job.redis,
        r.cpu_seconds.bench,
        r.cpu_seconds.prioq,
        r.cpu_seconds.redis,
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

// ---------------------------------------------------------------------------
// Targets, tables, plot.

#[derive(Debug, Clone, serde::Serialize)]
struct Target {
    target: String,
    measured: String,
    met: Option<bool>,
}

fn runs_of(results: &serde_json::Value) -> Vec<RunRecordView> {
    results["runs"]
        .as_array()
        .map(|runs| {
            runs.iter()
                .map(|r| RunRecordView {
                    path: r["path"].as_str().unwrap_or("").to_owned(),
                    op: r["op"].as_str().unwrap_or("").to_owned(),
                    depth: r["depth"].as_u64().unwrap_or(0),
                    concurrency: r["concurrency"].as_u64().unwrap_or(0) as usize,
                    rate: r["jobs_per_s"].as_f64().unwrap_or(0.0),
                    redis_us: r["redis_script_us_per_job"].as_f64().unwrap_or(0.0),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Clone)]
struct RunRecordView {
    path: String,
    op: String,
    depth: u64,
    concurrency: usize,
    rate: f64,
    redis_us: f64,
}

fn find<'a>(
    runs: &'a [RunRecordView],
    path: &str,
    op: Op,
    depth: u64,
    c: Option<usize>,
) -> Option<&'a RunRecordView> {
    runs.iter()
        .filter(|r| {
            r.path == path
                && r.op == op.name()
                && r.depth == depth
                && c.is_none_or(|c| r.concurrency == c)
        })
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn targets(results: &serde_json::Value) -> Vec<Target> {
    let runs = runs_of(results);
    let mut depths: Vec<u64> = runs.iter().map(|r| r.depth).collect();
    depths.sort_unstable();
    depths.dedup();
    let shallow = depths.first().copied().unwrap_or(0);
    let deep = depths.last().copied().unwrap_or(0);
    let mut out = Vec::new();

    // Batch path vs raw Redis.
    let mut parts = Vec::new();
    let mut all_met = true;
    let mut any = false;
    for op in [Op::EnqueueBatch, Op::ClaimAckBatch, Op::E2eBatch] {
        if let (Some(h), Some(r)) = (
            find(&runs, "http", op, shallow, None),
            find(&runs, "raw", op, shallow, None),
        ) {
            any = true;
            let ratio = h.rate / r.rate;
            all_met &= ratio >= 0.7;
            parts.push(format!(
                "{}: {} vs {} jobs/s = {} (c={})",
                op.label(),
                human(h.rate),
                human(r.rate),
                pct(ratio),
                h.concurrency
            ));
        }
    }
    out.push(Target {
        target: format!(
            "batch path >= 70% of raw Redis, same scripts (depth {}, best concurrency)",
            depth_label(shallow)
        ),
        measured: parts.join("; "),
        met: any.then_some(all_met),
    });

    // Single-job e2e at c=64.
    let e2e = find(&runs, "http", Op::E2eSingle, shallow, Some(64));
    out.push(Target {
        target: format!(
            "single-job HTTP path end to end at concurrency 64 well above 10k jobs/s (depth {})",
            depth_label(shallow)
        ),
        measured: e2e.map_or("not run".into(), |r| {
            let raw = find(&runs, "raw", Op::E2eSingle, shallow, None);
            format!(
                "{} jobs/s{}",
                human(r.rate),
                raw.map_or(String::new(), |raw| format!(
                    " ({} of raw {})",
                    pct(r.rate / raw.rate),
                    human(raw.rate)
                ))
            )
        }),
        met: e2e.map(|r| r.rate > 10_000.0),
    });

    // Redis CPU per full cycle.
    let cycle = find(&runs, "http", Op::E2eSingle, shallow, Some(64))
        .or_else(|| find(&runs, "http", Op::E2eSingle, shallow, None));
    let raw_cycle = find(&runs, "raw", Op::E2eSingle, shallow, None);
    out.push(Target {
        target: "full cycle (enqueue, claim, ack) costs Redis <= 30 us per job (INFO commandstats)"
            .into(),
        measured: cycle.map_or("not run".into(), |r| {
            format!(
                "{:.1} us/job through prioq (c={}){}",
                r.redis_us,
                r.concurrency,
                raw_cycle.map_or(String::new(), |raw| format!(
                    ", {:.1} us/job pipelined raw",
                    raw.redis_us
                ))
            )
        }),
        met: cycle.map(|r| r.redis_us <= 30.0),
    });

    // Claim at depth.
    if deep > shallow {
        let mut parts = Vec::new();
        let mut met = None;
        for (path, op, c) in [
            ("http", Op::ClaimAckSingle, Some(64)),
            ("http", Op::ClaimAckBatch, None),
            ("raw", Op::ClaimAckSingle, None),
            ("raw", Op::ClaimAckBatch, None),
        ] {
            if let (Some(s), Some(d)) = (
                find(&runs, path, op, shallow, c),
                find(&runs, path, op, deep, c),
            ) {
                let ratio = d.rate / s.rate;
                if path == "http" {
                    met = Some(met.unwrap_or(true) && ratio >= 0.8);
                }
                parts.push(format!(
                    "{path} {}{}: {} vs {} jobs/s = {}",
                    op.label(),
                    c.map_or(String::new(), |c| format!(" c={c}")),
                    human(d.rate),
                    human(s.rate),
                    pct(ratio)
                ));
            }
        }
        out.push(Target {
            target: format!(
                "claim rate at {} pending >= 80% of the rate at {}",
                depth_label(deep),
                depth_label(shallow)
            ),
            measured: parts.join("; "),
            met,
        });
    }

    // Memory.
    if let Some(m) = results["memory"].as_array().and_then(|m| m.last()) {
        let beyond = m["bytes_per_job_beyond_payload"]
            .as_f64()
            .unwrap_or(f64::NAN);
        out.push(Target {
            target: "Redis memory per queued job beyond its payload <= 250 B".into(),
            measured: format!(
                "{:.0} B/job beyond the {PAYLOAD_BYTES}-byte args ({:.0} B/job in all, over {} jobs)",
                beyond,
                m["bytes_per_job"].as_f64().unwrap_or(f64::NAN),
                depth_label(m["depth"].as_u64().unwrap_or(0))
            ),
            met: Some(beyond <= 250.0),
        });
    }

    if let Some(w) = results["wake"].as_object() {
        let p99 = w["after_enqueue_sent"]["p99_ms"]
            .as_f64()
            .unwrap_or(f64::NAN);
        out.push(Target {
            target: "long poll on instance A answered within 10 ms (p99) of an enqueue on B".into(),
            measured: format!(
                "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms after the enqueue was sent; {} of {} rounds woken",
                w["after_enqueue_sent"]["p50_ms"].as_f64().unwrap_or(f64::NAN),
                p99,
                w["after_enqueue_sent"]["max_ms"].as_f64().unwrap_or(f64::NAN),
                w["woken"],
                w["rounds"]
            ),
            met: Some(p99 <= 10.0 && w["missed"].as_u64() == Some(0)),
        });
    }
    if let Some(i) = results["idle"].as_object() {
        let per = i["commands_per_s_per_poll"].as_f64().unwrap_or(f64::NAN);
        out.push(Target {
            target: "an idle long poll costs Redis at most about one command per second".into(),
            measured: format!(
                "{per:.2} commands/s per poll, counting the commands inside scripts ({:.2} script calls/s) over {} polls",
                i["script_calls_per_s_per_poll"].as_f64().unwrap_or(f64::NAN),
                i["polls"]
            ),
            met: Some(per <= 1.05),
        });
    }
    out
}

fn markdown(results: &serde_json::Value, args: &Args, targets: &[Target]) -> String {
    let view = runs_of(results);
    let raw_runs = results["runs"].as_array().cloned().unwrap_or_default();
    let mut md = String::new();
    let m = &results["machine"];
    let _ = writeln!(
        md,
        "Run: `{}`{} on {} ({} cores, {} GiB), Redis {}, prioq {}, {}; {} s measured per run after {} s of warm-up; load average at start {}.\n",
        results["tool"].as_str().unwrap_or(""),
        if args.quick { " -- --quick" } else { "" },
        m["cpu_model"].as_str().unwrap_or("?"),
        m["nproc"],
        m["memory_gib"],
        results["redis_version"].as_str().unwrap_or("?"),
        results["prioq_revision"].as_str().unwrap_or("?"),
        results["started_at"].as_str().unwrap_or(""),
        args.duration.as_secs_f64(),
        args.warmup.as_secs_f64(),
        m["loadavg_at_start"].as_str().unwrap_or("?"),
    );

    // Throughput by concurrency.
    let _ = write!(md, "| jobs/s | depth |");
    for c in &args.concurrency {
        let _ = write!(md, " c={c} |");
    }
    let _ = writeln!(md, " raw Redis | best / raw |");
    let _ = write!(md, "|---|---|");
    for _ in &args.concurrency {
        let _ = write!(md, "---:|");
    }
    let _ = writeln!(md, "---:|---:|");
    for op in &args.ops {
        for &depth in &args.depths {
            let _ = write!(md, "| {} | {} |", op.label(), depth_label(depth));
            for &c in &args.concurrency {
                let cell = find(&view, "http", *op, depth, Some(c))
                    .map_or("–".into(), |r| human(r.rate));
                let _ = write!(md, " {cell} |");
            }
            let raw = find(&view, "raw", *op, depth, None);
            let best = find(&view, "http", *op, depth, None);
            let _ = writeln!(
                md,
                " {} | {} |",
                raw.map_or("–".into(), |r| human(r.rate)),
                match (best, raw) {
                    (Some(b), Some(r)) => pct(b.rate / r.rate),
                    _ => "–".into(),
                }
            );
        }
    }

    // Details.
    let _ = writeln!(
        md,
        "\nPer run: latency per call p50 / p99 / max in ms (raw: one pipelined round trip); Redis µs per job from `INFO commandstats` (EVALSHA time: the scripts only) and from the redis-server process's CPU (all of it: networking, and the housekeeping that holds the depth); CPU seconds used by the load generator (bench), prioq and redis-server during the run.\n"
    );
    let _ = writeln!(
        md,
        "| path | operation | depth | c | jobs/s | latency p50 / p99 / max (ms) | Redis µs/job scripts | Redis µs/job process | CPU s bench / prioq / redis | notes |"
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---|---:|---:|---|---|");
    for r in &raw_runs {
        let lat = r["latency"]
            .as_object()
            .map(|l| {
                l.iter()
                    .map(|(call, v)| {
                        format!(
                            "{call} {:.2} / {:.2} / {:.1}",
                            v["p50_ms"].as_f64().unwrap_or(0.0),
                            v["p99_ms"].as_f64().unwrap_or(0.0),
                            v["max_ms"].as_f64().unwrap_or(0.0)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("<br>")
            })
            .unwrap_or_default();
        let mut notes = Vec::new();
        if r["errors"].as_u64().unwrap_or(0) > 0 {
            notes.push(format!("{} errors", r["errors"]));
        }
        if r["short_claims"].as_u64().unwrap_or(0) > 0 {
            notes.push(format!("{} short claims", r["short_claims"]));
        }
        let op = Op::parse(r["op"].as_str().unwrap_or("")).map_or("?", Op::label);
        let cpu = &r["cpu_seconds"];
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.2} / {:.2} / {:.2} | {} |",
            r["path"].as_str().unwrap_or(""),
            op,
            depth_label(r["depth"].as_u64().unwrap_or(0)),
            if r["path"] == "raw" {
                format!("{}×pipe", r["concurrency"])
            } else {
                r["concurrency"].to_string()
            },
            human(r["jobs_per_s"].as_f64().unwrap_or(0.0)),
            lat,
            r["redis_script_us_per_job"].as_f64().unwrap_or(0.0),
            r["redis_process_us_per_job"].as_f64().unwrap_or(0.0),
            cpu["bench"].as_f64().unwrap_or(0.0),
            cpu["prioq"].as_f64().unwrap_or(0.0),
            cpu["redis"].as_f64().unwrap_or(0.0),
            notes.join(", ")
        );
    }

    // Where the scripts' time goes, from the raw full-cycle runs.
    let cycle_runs: Vec<&serde_json::Value> = raw_runs
        .iter()
        .filter(|r| {
            r["depth"].as_u64() == args.depths.first().copied()
                && (r["op"] == "e2e-single" || r["op"] == "e2e-batch")
                && (r["path"] == "raw" || r["concurrency"] == 64)
        })
        .collect();
    if !cycle_runs.is_empty() {
        let mut commands: Vec<String> = Vec::new();
        for r in &cycle_runs {
            if let Some(map) = r["redis_commands"].as_object() {
                for (command, cost) in map {
                    let relevant = cost["us_per_job"].as_f64().unwrap_or(0.0) >= 0.05;
                    if relevant && !commands.contains(command) {
                        commands.push(command.clone());
                    }
                }
            }
        }
        let us = |r: &serde_json::Value, c: &str| {
            r["redis_commands"][c]["us_per_job"].as_f64().unwrap_or(0.0)
        };
        if let Some(first) = cycle_runs.first() {
            commands.sort_by(|a, b| us(first, b).total_cmp(&us(first, a)));
        }
        let _ = writeln!(
            md,
            "\nWhere Redis spends its time in a full cycle (enqueue, claim, ack), per job, from `INFO commandstats`: calls per job and µs per job. `evalsha` includes the commands the scripts run; what it has beyond them is the scripts' own overhead (Lua, and the cost of each `redis.call`).\n"
        );
        let _ = write!(md, "| command |");
        for r in &cycle_runs {
            let _ = write!(
                md,
                " {} {} (c={}) |",
                r["path"].as_str().unwrap_or(""),
                Op::parse(r["op"].as_str().unwrap_or("")).map_or("?", Op::label),
                r["concurrency"]
            );
        }
        let _ = writeln!(md);
        let _ = writeln!(md, "|---|{}", "---:|".repeat(cycle_runs.len()));
        let mut rows: Vec<(String, Vec<String>)> = commands
            .iter()
            .map(|c| {
                let cells = cycle_runs
                    .iter()
                    .map(|r| {
                        let cost = &r["redis_commands"][c.as_str()];
                        if cost.is_null() {
                            "–".to_owned()
                        } else {
                            format!(
                                "{:.2} × → {:.2} µs",
                                cost["calls_per_job"].as_f64().unwrap_or(0.0),
                                cost["us_per_job"].as_f64().unwrap_or(0.0)
                            )
                        }
                    })
                    .collect();
                (format!("`{c}`"), cells)
            })
            .collect();
        rows.push((
            "scripts' own overhead (evalsha minus the commands inside)".into(),
            cycle_runs
                .iter()
                .map(|r| {
                    let map = r["redis_commands"].as_object();
                    let inner: f64 = map
                        .map(|m| {
                            m.iter()
                                .filter(|(c, _)| SCRIPT_COMMANDS.contains(&c.as_str()))
                                .map(|(_, v)| v["us_per_job"].as_f64().unwrap_or(0.0))
                                .sum()
                        })
                        .unwrap_or(0.0);
                    format!("{:.2} µs", us(r, "fcall") - inner)
                })
                .collect(),
        ));
        for (name, cells) in rows {
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        }
    }

    let _ = writeln!(md, "\n| target | measured | met |\n|---|---|---|");
    for t in targets {
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

fn svg(runs: &[RunRecord], args: &Args) -> String {
    const W: f64 = 980.0;
    const H: f64 = 470.0;
    let colors = [
        ("enqueue", "#1f77b4"),
        ("claim", "#d62728"),
        ("e2e", "#2ca02c"),
    ];
    let color = |op: &str| {
        colors
            .iter()
            .find(|(k, _)| op.contains(k))
            .map_or("#555", |(_, c)| c)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">prioq throughput against HTTP concurrency (jobs/s; dotted: same scripts pipelined straight into Redis)</text>"#,
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
        let in_panel = |r: &&RunRecord| Op::parse(r.op).is_some_and(|o| o.batched() == batched);
        let ymax = runs
            .iter()
            .filter(in_panel)
            .map(|r| r.jobs_per_s)
            .fold(1.0, f64::max);
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
            for (di, &depth) in depths.iter().enumerate() {
                let dash = if di == 0 {
                    ""
                } else {
                    r#" stroke-dasharray="7 4""#
                };
                let points: Vec<String> = conc
                    .iter()
                    .filter_map(|&c| {
                        runs.iter()
                            .find(|r| {
                                r.path == "http"
                                    && r.op == op.name()
                                    && r.depth == depth
                                    && r.concurrency == c
                            })
                            .map(|r| format!("{:.1},{:.1}", px(c), py(r.jobs_per_s)))
                    })
                    .collect();
                let col = color(op.name());
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="2"{dash}/>"#,
                    points.join(" ")
                );
                for p in &points {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{col}"/>"#);
                }
                if di == 0
                    && let Some(raw) = runs
                        .iter()
                        .find(|r| r.path == "raw" && r.op == op.name() && r.depth == depth)
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
    }
    // Legend.
    let mut lx0 = 70.0;
    let ly = H - 50.0;
    for (name, col) in [
        ("enqueue", colors[0].1),
        ("claim + ack", colors[1].1),
        ("end to end", colors[2].1),
    ] {
        let _ = writeln!(
            s,
            r#"<line x1="{lx0}" y1="{ly}" x2="{}" y2="{ly}" stroke="{col}" stroke-width="3"/><text x="{}" y="{}">{name}</text>"#,
            lx0 + 24.0,
            lx0 + 30.0,
            ly + 4.0
        );
        lx0 += 130.0;
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
        r##"<text x="70" y="{}" fill="#555">Load generator, prioq and Redis share the machine's {} cores; see bench/results.md for CPU per process.</text>"##,
        H - 22.0,
        std::thread::available_parallelism().map_or(0, usize::from)
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
