//! Flags, and the operations a run can measure.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::common::results_dir;
use crate::mix;

/// What one client (or one raw pipeline) loops on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    EnqueueSingle,
    EnqueueBatch,
    ClaimAckSingle,
    ClaimAckBatch,
    E2eSingle,
    WorkerLoop,
    E2eBatch,
}

impl Op {
    pub const ALL: [Self; 7] = [
        Self::EnqueueSingle,
        Self::EnqueueBatch,
        Self::ClaimAckSingle,
        Self::ClaimAckBatch,
        Self::E2eSingle,
        Self::WorkerLoop,
        Self::E2eBatch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::EnqueueSingle => "enqueue-single",
            Self::EnqueueBatch => "enqueue-batch",
            Self::ClaimAckSingle => "claim-ack-single",
            Self::ClaimAckBatch => "claim-ack-batch",
            Self::E2eSingle => "e2e-single",
            Self::WorkerLoop => "worker-loop",
            Self::E2eBatch => "e2e-batch",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::EnqueueSingle => "enqueue",
            Self::EnqueueBatch => "enqueue batch (100)",
            Self::ClaimAckSingle => "claim + ack",
            Self::ClaimAckBatch => "claim 100 + ack many",
            Self::E2eSingle => "end to end (enqueue, claim, ack)",
            Self::WorkerLoop => "worker loop (enqueue; claim acking the previous job)",
            Self::E2eBatch => "end to end, batches of 100",
        }
    }

    pub fn batched(self) -> bool {
        matches!(
            self,
            Self::EnqueueBatch | Self::ClaimAckBatch | Self::E2eBatch
        )
    }

    /// Whether a client's loop enqueues.
    pub fn enqueues(self) -> bool {
        !matches!(self, Self::ClaimAckSingle | Self::ClaimAckBatch)
    }

    /// Whether a client's loop claims (and acks).
    pub fn claims(self) -> bool {
        !matches!(self, Self::EnqueueSingle | Self::EnqueueBatch)
    }

    /// Whether the op also runs over HTTP/2.
    pub fn over_http2(self) -> bool {
        matches!(self, Self::E2eSingle | Self::WorkerLoop)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == s)
    }
}

#[derive(Debug, Clone)]
pub struct Args {
    pub quick: bool,
    pub redis_url: Option<String>,
    pub prioq_bin: PathBuf,
    pub out_dir: PathBuf,
    pub tag: String,
    pub warmup: Duration,
    pub duration: Duration,
    pub concurrency: Vec<usize>,
    pub depths: Vec<u64>,
    pub ops: Vec<Op>,
    pub raw: bool,
    /// Measure each part of the `exchange` function on its own.
    pub functions: bool,
    /// Run the realistic mix.
    pub mix: bool,
    /// The mix's variants to run, in their order.
    pub mix_variants: Vec<mix::Variant>,
    /// Count the request path instead of measuring anything else.
    pub request_path: bool,
    pub http2: bool,
    pub h2_connections: usize,
    pub pin: bool,
    pub bullmq: bool,
    pub wake_rounds: usize,
    pub idle_polls: usize,
    pub idle_window: Duration,
    pub neighbour: Duration,
    /// Jobs kept completed for the retention memory measurement.
    pub retained: usize,
    pub prioq_env: Vec<(String, String)>,
    /// A `results.json` to write the markdown and the plot from again,
    /// measuring nothing.
    pub report_from: Option<PathBuf>,
}

pub const USAGE: &str = "\
cargo bench --bench load -- [flags]

  --quick               smoke run (< 3 min): c = 1, 64; depths 1k, 100k
  --redis-url URL       use this Redis instead of starting one (keys under prefix prioqbench)
  --prioq-bin PATH      prioq binary (default: the one cargo built for this bench)
  --out DIR             where results go (default: bench-results/)
  --tag NAME            result file prefix (default: none; quick)
  --duration SECS       measured seconds per run (default 4; quick 1)
  --warmup SECS         unmeasured seconds before each run (default 0.5; quick 0.3)
  --concurrency LIST    e.g. 1,16,64,256
  --depths LIST         pending jobs, e.g. 1k,1M
  --ops LIST            of enqueue-single, enqueue-batch, claim-ack-single,
                        claim-ack-batch, e2e-single, worker-loop, e2e-batch
  --no-raw              skip the raw-Redis baseline
  --no-functions        skip the parts of the exchange function, each on its own
  --no-mix              skip the realistic mix (ten priorities, long-polling workers)
  --mix-variants LIST   of single, ack-in-claim, groups, two-instances, unthrottled,
                        unthrottled-ack-in-claim, paced (default: all)
  --no-http2            skip the HTTP/2 runs
  --h2-connections N    HTTP/2 connections the clients share (default 4)
  --no-pin              leave every process on every core (default with >= 2 cores:
                        redis-servers on core 1; bench, prioq and Node on core 0)
  --no-bullmq           skip BullMQ
  --wake-rounds N       cross-instance long-poll rounds (default 200; 0 skips)
  --idle-polls N        idle long polls for the idle cost (default 100; 0 skips)
  --idle-window SECS    measuring window of the idle cost (default 10)
  --neighbour SECS      noisy-neighbour run per side (default 5; quick 2; 0 skips)
  --retained N          jobs kept completed to measure their memory (default 100k;
                        quick 10k; 0 skips)
  --request-path        count what one request costs prioq (allocations, wake-ups,
                        Redis commands) and nothing else; writes request-path.md
  --prioq-env K=V       extra environment for prioq (repeatable), e.g. RUST_LOG=warn
  --report-from FILE    measure nothing: write results.md and throughput.svg again
                        from FILE (a results.json), into --out with --tag";

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

pub fn parse(argv: &[String]) -> Result<Args> {
    let quick = argv.iter().any(|a| a == "--quick");
    let mut args = Args {
        quick,
        redis_url: None,
        prioq_bin: PathBuf::from(env!("CARGO_BIN_EXE_prioq")),
        out_dir: results_dir(),
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
        functions: true,
        mix: true,
        mix_variants: mix::Variant::ALL.to_vec(),
        request_path: false,
        http2: true,
        h2_connections: 4,
        pin: true,
        bullmq: true,
        wake_rounds: if quick { 50 } else { 200 },
        idle_polls: 100,
        idle_window: Duration::from_secs(if quick { 5 } else { 10 }),
        neighbour: Duration::from_secs(if quick { 2 } else { 5 }),
        retained: if quick { 10_000 } else { 100_000 },
        prioq_env: Vec::new(),
        report_from: None,
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
            "--no-functions" => args.functions = false,
            "--no-mix" => args.mix = false,
            "--mix-variants" => {
                args.mix_variants = value()?
                    .split(',')
                    .map(|key| {
                        mix::Variant::parse(key)
                            .ok_or_else(|| anyhow!("unknown mix variant {key:?}"))
                    })
                    .collect::<Result<_>>()?;
            }
            "--request-path" => args.request_path = true,
            "--no-http2" => args.http2 = false,
            "--h2-connections" => {
                args.h2_connections = usize::try_from(parse_count(&value()?)?)?.clamp(1, 256);
            }
            "--no-pin" => args.pin = false,
            "--no-bullmq" => args.bullmq = false,
            "--wake-rounds" => args.wake_rounds = usize::try_from(parse_count(&value()?)?)?,
            "--idle-polls" => args.idle_polls = usize::try_from(parse_count(&value()?)?)?,
            "--idle-window" => args.idle_window = parse_secs(&value()?)?,
            "--neighbour" => args.neighbour = parse_secs(&value()?)?,
            "--retained" => args.retained = usize::try_from(parse_count(&value()?)?)?,
            "--report-from" => args.report_from = Some(PathBuf::from(value()?)),
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
    args.ops
        .sort_by_key(|op| Op::ALL.iter().position(|o| o == op));
    args.ops.dedup();
    args.idle_polls = args.idle_polls.min(2000);
    args.wake_rounds = args.wake_rounds.min(5000);
    Ok(args)
}
