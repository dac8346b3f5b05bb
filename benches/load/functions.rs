//! What each part of the `exchange` function costs Redis (issue 24): one
//! call carrying one part (an enqueue of N jobs, a claim of N, an ack of
//! N, a claim of N that acks the N before), for N = 1, 10 and 100, called
//! straight into Redis as prioq calls it. Per part and N: Redis µs per job
//! inside `FCALL` (`INFO commandstats`), of which the commands the function
//! ran, and the rest, Lua's own share (tables, strings, records, replies):
//! the work prioq could do instead.

use anyhow::{Result, ensure};
use prioq::queue::store::keys::QueueKeys;
use redis::aio::MultiplexedConnection;

use crate::mix::function_time;
use crate::raw::{self, Calls, Lease};
use crate::redis_stats::{self, RedisCounters};

/// Jobs per measured part and size, in calls of N.
const JOBS: usize = 6000;
/// Calls per pipelined round trip.
const PIPELINE: usize = 50;
/// The sizes each part is measured at.
pub const SIZES: [usize; 3] = [1, 10, 100];

/// The parts of the function measured on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Enqueue,
    Claim,
    Ack,
    ClaimAcking,
}

impl Part {
    const ALL: [Self; 4] = [Self::Enqueue, Self::Claim, Self::Ack, Self::ClaimAcking];

    fn name(self) -> &'static str {
        match self {
            Self::Enqueue => "enqueue",
            Self::Claim => "claim",
            Self::Ack => "ack",
            Self::ClaimAcking => "claim acking the jobs before",
        }
    }
}

/// One part at one size.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PartCost {
    pub part: String,
    pub jobs_per_call: usize,
    /// `FCALL` µs per job.
    pub fcall_us_per_job: f64,
    /// Of it, the commands the function ran.
    pub commands_us_per_job: f64,
    /// Of it, the rest: Lua's own work.
    pub lua_us_per_job: f64,
    /// `lua_us_per_job` / `fcall_us_per_job`.
    pub lua_share: f64,
}

/// Measures every part at every size on the queue `queue`, emptied first
/// and after each measure.
pub async fn measure(
    con: &mut MultiplexedConnection,
    prefix: &str,
    body: &[u8],
) -> Result<Vec<PartCost>> {
    let queue = "bench-parts";
    let keys = QueueKeys::new(prefix, queue);
    let mut costs = Vec::new();
    for part in Part::ALL {
        for n in SIZES {
            raw::fresh_queue(con, &keys, queue).await?;
            costs.push(measure_part(con, &keys, part, n, body).await?);
        }
    }
    raw::unlink_queue(con, &keys).await?;
    Ok(costs)
}

async fn measure_part(
    con: &mut MultiplexedConnection,
    keys: &QueueKeys,
    part: Part,
    n: usize,
    body: &[u8],
) -> Result<PartCost> {
    let calls = JOBS / n;
    // What the measured calls need: jobs to claim, or leases to ack.
    let needed = match part {
        Part::Enqueue => 0,
        Part::Claim | Part::Ack => calls * n,
        Part::ClaimAcking => (calls + 1) * n,
    };
    raw::prefill(std::slice::from_ref(con), keys, needed as u64, body).await?;
    let mut leases: Vec<Vec<Lease>> = Vec::new();
    match part {
        Part::Ack => leases = claim_calls(con, keys, calls, n, Vec::new()).await?,
        Part::ClaimAcking => leases = claim_calls(con, keys, 1, n, Vec::new()).await?,
        Part::Enqueue | Part::Claim => {}
    }

    let before = redis_stats::counters(con).await?;
    match part {
        Part::Enqueue => {
            for start in (0..calls).step_by(PIPELINE) {
                let mut batch = Calls::default();
                for _ in start..(start + PIPELINE).min(calls) {
                    batch.enqueue(keys, n, body, None);
                }
                batch.send(con).await?;
            }
        }
        Part::Claim => {
            claim_calls(con, keys, calls, n, Vec::new()).await?;
        }
        Part::Ack => {
            let mut acked = 0;
            for chunk in leases.chunks(PIPELINE) {
                let mut batch = Calls::default();
                for lease in chunk {
                    batch.ack(keys, lease.clone());
                }
                acked += batch.send(con).await?.acked;
            }
            ensure!(
                acked == (calls * n) as u64,
                "acked {acked} of {} jobs",
                calls * n
            );
        }
        Part::ClaimAcking => {
            // One after the other: each claim acks what the one before leased.
            let mut held = leases.pop().unwrap_or_default();
            for _ in 0..calls {
                let mut batch = Calls::default();
                batch.claim(keys, n, held);
                let outcome = batch.send(con).await?;
                ensure!(
                    outcome.acked == n as u64,
                    "a claim acked {} of {n}",
                    outcome.acked
                );
                held = outcome.leases.into_iter().flatten().collect();
            }
        }
    }
    let after = redis_stats::counters(con).await?;
    Ok(cost(part, n, (calls * n) as f64, &before, &after))
}

/// `calls` claims of `n` jobs each, the first carrying `acks`, pipelined:
/// the leases of each.
async fn claim_calls(
    con: &mut MultiplexedConnection,
    keys: &QueueKeys,
    calls: usize,
    n: usize,
    acks: Vec<Lease>,
) -> Result<Vec<Vec<Lease>>> {
    let mut leases = Vec::new();
    let mut acks = Some(acks);
    for start in (0..calls).step_by(PIPELINE) {
        let mut batch = Calls::default();
        for _ in start..(start + PIPELINE).min(calls) {
            batch.claim(keys, n, acks.take().unwrap_or_default());
        }
        leases.extend(batch.send(con).await?.leases);
    }
    let leased: usize = leases.iter().map(Vec::len).sum();
    ensure!(
        leased == calls * n,
        "claimed {leased} of {} jobs",
        calls * n
    );
    Ok(leases)
}

fn cost(
    part: Part,
    n: usize,
    jobs: f64,
    before: &RedisCounters,
    after: &RedisCounters,
) -> PartCost {
    let (fcall, commands) = function_time(before, after);
    PartCost {
        part: part.name().to_owned(),
        jobs_per_call: n,
        fcall_us_per_job: fcall / jobs,
        commands_us_per_job: commands / jobs,
        lua_us_per_job: (fcall - commands) / jobs,
        lua_share: if fcall > 0.0 {
            (fcall - commands) / fcall
        } else {
            0.0
        },
    }
}
