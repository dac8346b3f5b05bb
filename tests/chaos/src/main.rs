//! `prioq-chaos`: a seeded run of operations and faults against prioq,
//! judged by the history checker; or the checker alone over a recorded
//! history. Exits 1 on any violation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use prioq_chaos::checker::check;
use prioq_chaos::history;
use prioq_chaos::run::{Options, print_schedule, run};

#[derive(Debug, Parser)]
#[command(about = "A seeded fault schedule against prioq, and its history checker")]
struct Args {
    /// The seed of the schedule of operations and faults (random and
    /// printed when not given).
    #[arg(long)]
    seed: Option<u64>,
    /// How long operations and faults run: `90s`, `10m` or seconds.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// The mean gap between two faults.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    fault_every: Duration,
    #[arg(long, default_value_t = 3)]
    instances: usize,
    #[arg(long, default_value_t = 4)]
    producers: u64,
    #[arg(long, default_value_t = 9)]
    workers: u64,
    /// Run on a local three-primary Redis Cluster with a replica each
    /// (no proxies: a primary killed, `CLUSTER FAILOVER`, client kill and
    /// pause, a full Redis, instance faults, a reshard, a slot of the
    /// sharded queue moved between primaries).
    #[arg(long)]
    cluster: bool,
    /// The prioq binary (default: `prioq` next to this one, the same
    /// build profile's).
    #[arg(long)]
    prioq: Option<PathBuf>,
    /// Where the history and the logs go (default: a fresh directory under
    /// the system's temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print the fault schedule of the seed and exit.
    #[arg(long)]
    print_schedule: bool,
    /// Check a recorded history instead of running.
    #[arg(long, value_name = "HISTORY")]
    check: Option<PathBuf>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.strip_suffix('m') {
        Some(minutes) => (minutes, 60),
        None => (text.strip_suffix('s').unwrap_or(text), 1),
    };
    number
        .parse::<u64>()
        .map(|n| Duration::from_secs(n * unit))
        .map_err(|_| format!("{text:?} is not a duration such as 90s or 10m"))
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    if let Some(path) = &args.check {
        let violations = check(&history::read(path)?);
        for violation in &violations {
            println!("{violation}");
        }
        println!("violations: {}", violations.len());
        return Ok(exit(violations.is_empty()));
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let prioq = match args.prioq {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name("prioq"),
    };
    let dir = args.dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("prioq-chaos-{seed}-{}", std::process::id()))
    });
    let options = Options {
        seed,
        duration: args.duration,
        fault_every: args.fault_every,
        instances: args.instances,
        producers: args.producers,
        workers: args.workers,
        cluster: args.cluster,
        prioq,
        dir,
    };
    if args.print_schedule {
        print_schedule(&options);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "seed {seed}, {}s, a fault every {}s on average (replay: --seed {seed})",
        options.duration.as_secs(),
        options.fault_every.as_secs()
    );
    let violations = run(&options).await?;
    if !violations.is_empty() {
        println!(
            "seed {seed} broke {} promises; replay with --seed {seed}",
            violations.len()
        );
    }
    Ok(exit(violations.is_empty()))
}

fn exit(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
