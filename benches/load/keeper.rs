//! The housekeeper: holds a queue's pending depth in a range above the
//! depth asked for, before and during a run without calling a function, so `cmdstat_fcall` holds only
//! the measured path. It refills with plain commands writing what the
//! `exchange` function writes for an enqueue, and drains the newest jobs with `ZPOPMAX` +
//! `HDEL`; it counts its own commands so the reports can take them out of
//! Redis's per-command figures.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use prioq::queue::store::keys::{self, Key, QueueKeys};
use prioq::queue::store::record;
use redis::{self, aio::MultiplexedConnection};

use crate::jobs::{PRIORITY, args_json, stored_record};
use crate::redis_stats;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeeperMode {
    Refill,
    Drain,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct KeeperStats {
    pub added: u64,
    pub removed: u64,
    pub min_depth: u64,
    pub max_depth: u64,
}

/// The housekeeper's commands so far, by `INFO commandstats` name.
#[derive(Debug, Clone, Default)]
pub struct KeeperCalls(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl KeeperCalls {
    fn add(&self, command: &'static str, n: u64) {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(command).or_default() += n;
    }

    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Where a run holds the pending depth: [low, low + 2·slack].
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub low: u64,
    pub slack: u64,
}

impl Range {
    /// The slack leaves room for twice the jobs the run's clients can hold
    /// claimed at once (prioq coalesces 64 claims of 100 into one call of
    /// 6,400) while the housekeeper's commands wait behind a busy Redis, so
    /// claims seldom find the queue short.
    pub fn new(depth: u64, claims_in_flight: u64) -> Self {
        Self {
            low: depth,
            slack: (depth / 50).clamp(2_000, 20_000).max(2 * claims_in_flight),
        }
    }

    /// The range after the depth fell below it while refilling: claims
    /// took more jobs in one of the housekeeper's turns than the slack
    /// holds (each of its round trips waits a whole turn of a busy Redis's
    /// event loop behind the clients' pipelines), so the slack doubles, up
    /// to `MAX_SLACK`.
    fn widened(self) -> Self {
        Self {
            slack: (self.slack * 2).min(MAX_SLACK).max(self.slack),
            ..self
        }
    }
}

/// The most a refilling housekeeper widens its slack to.
const MAX_SLACK: u64 = 200_000;
/// Depths from which claims may draw a queue down during a run.
const DEEP: u64 = 500_000;

/// Jobs per drain command.
const CHUNK: u64 = 1000;
/// Jobs per refill command, and connections a refill's commands are
/// spread over. Redis reads a client's commands 16 KiB at a time, a turn of
/// its event loop each, and the turns of a Redis busy with pipelined
/// claims are long: on one connection, a thousand jobs' `HSET` (about
/// 250 KB) took some sixteen turns, and raw pipelines at 1k claimed jobs
/// faster (about 85,000 a second) than it added them (about 65,000).
/// Smaller commands over more connections reach Redis in fewer turns and
/// more of them a turn.
const REFILL_CHUNK: u64 = 250;
const REFILL_CONNECTIONS: usize = 16;
/// Jobs one refill adds at most: smaller refills one after the other,
/// each reading the depth, stream the jobs in where a big one would leave
/// the claims taking the few jobs its first commands added.
const REFILL_MOST: u64 = 2 * REFILL_CONNECTIONS as u64 * REFILL_CHUNK;

/// What the housekeeper runs with.
#[derive(Debug)]
struct Keeper {
    con: MultiplexedConnection,
    /// Where a refill's commands go, in turn.
    refill_cons: Vec<MultiplexedConnection>,
    keys: QueueKeys,
    range: Range,
    args: String,
    calls: KeeperCalls,
    stats: KeeperStats,
}

impl Keeper {
    fn new(
        con: MultiplexedConnection,
        refill_cons: Vec<MultiplexedConnection>,
        keys: QueueKeys,
        range: Range,
        calls: KeeperCalls,
    ) -> Self {
        Self {
            refill_cons: if refill_cons.is_empty() {
                vec![con.clone()]
            } else {
                refill_cons
            },
            con,
            keys,
            range,
            args: args_json(),
            calls,
            stats: KeeperStats {
                min_depth: u64::MAX,
                ..KeeperStats::default()
            },
        }
    }

    /// One housekeeping step; whether it did anything. During a run it acts
    /// once the depth has moved half the range, and takes it to the far end,
    /// so the jobs in flight never push it out; to settle before a run
    /// (`None`) it only brings the depth into the range. A deep queue that
    /// claims draw down is left to fall as far as half its depth: holding
    /// it would cost Redis a refill for every job claimed, as much as the
    /// claims measured, and a claim at 500k costs what one at 1M does.
    async fn step(&mut self, mode: Option<KeeperMode>) -> Result<bool> {
        let n: u64 = redis::cmd("ZCARD")
            .arg(self.keys.key(Key::Pending))
            .query_async(&mut self.con)
            .await?;
        self.calls.add("zcard", 1);
        self.stats.min_depth = self.stats.min_depth.min(n);
        self.stats.max_depth = self.stats.max_depth.max(n);
        let deep = self.range.low >= DEEP;
        if mode == Some(KeeperMode::Refill) && !deep && n < self.range.low {
            self.range = self.range.widened();
        }
        let Range { low, slack } = self.range;
        let (middle, high) = (low + slack, low + 2 * slack);
        let (refill_below, refill_to, drain_above, drain_to) = match mode {
            Some(KeeperMode::Refill) if deep => (low / 2, high, u64::MAX, high),
            Some(KeeperMode::Refill) => (middle, high, u64::MAX, high),
            Some(KeeperMode::Drain) => (0, low, middle, low),
            None => (low, middle, high, middle),
        };
        if n < refill_below {
            self.refill((refill_to - n).min(REFILL_MOST)).await?;
            return Ok(true);
        }
        if n > drain_above {
            self.drain(n - drain_to).await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Adds `n` pending jobs the cheap way, in two round trips: HINCRBY of
    /// the finish tag of the class's jobs without a group for their arrival
    /// tags, then one HSET and one ZADD per `REFILL_CHUNK` jobs, spread over the
    /// refill's connections, writing exactly what prioq's enqueues write
    /// (the record and the score by the crate's own; the enqueue time by
    /// this machine's clock, which Redis's shares).
    async fn refill(&mut self, n: u64) -> Result<()> {
        let finish: u64 = redis::cmd("HINCRBY")
            .arg(self.keys.key(Key::Meta))
            .arg(keys::tag_field(PRIORITY, ""))
            .arg(n)
            .query_async(&mut self.con)
            .await?;
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
        let record = stored_record(&self.args, now_ms);
        let mut pipes: Vec<_> = self.refill_cons.iter().map(|_| redis::pipe()).collect();
        // The tags taken are the finish tag's values before the increment.
        let last = finish - 1;
        let mut seq = finish - n;
        let mut chunks = 0;
        while seq <= last {
            let end = (seq + REFILL_CHUNK - 1).min(last);
            let mut hset = redis::cmd("HSET");
            hset.arg(self.keys.key(Key::Jobs));
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(self.keys.key(Key::Pending));
            for arrival in seq..=end {
                let id = record::new_id();
                hset.arg(&id).arg(&record);
                zadd.arg(record::score(PRIORITY, arrival)).arg(id);
            }
            let turn = chunks % pipes.len();
            pipes[turn]
                .add_command(hset)
                .ignore()
                .add_command(zadd)
                .ignore();
            chunks += 1;
            seq = end + 1;
        }
        // (A refill of fewer chunks than connections leaves some idle.)
        let sent = pipes
            .iter()
            .zip(self.refill_cons.iter_mut())
            .take(chunks)
            .map(|(pipe, con)| pipe.query_async::<()>(con));
        futures_util::future::try_join_all(sent).await?;
        self.calls.add("hincrby", 1);
        self.calls.add("hset", chunks as u64);
        self.calls.add("zadd", chunks as u64);
        self.stats.added += n;
        Ok(())
    }

    /// Drops the `n` newest pending jobs; claims take the oldest, so the
    /// two never meet.
    async fn drain(&mut self, n: u64) -> Result<()> {
        let mut remaining = n;
        while remaining > 0 {
            let take = remaining.min(CHUNK);
            let popped: Vec<(String, f64)> = redis::cmd("ZPOPMAX")
                .arg(self.keys.key(Key::Pending))
                .arg(take)
                .query_async(&mut self.con)
                .await?;
            self.calls.add("zpopmax", 1);
            if popped.is_empty() {
                break;
            }
            let mut hdel = redis::cmd("HDEL");
            hdel.arg(self.keys.key(Key::Jobs));
            for (id, _) in &popped {
                hdel.arg(id);
            }
            hdel.query_async::<u64>(&mut self.con).await?;
            self.calls.add("hdel", 1);
            self.stats.removed += popped.len() as u64;
            remaining = remaining.saturating_sub(popped.len() as u64);
        }
        Ok(())
    }
}

/// Brings the queue into its range before a run.
pub async fn settle(
    con: MultiplexedConnection,
    keys: &QueueKeys,
    range: Range,
    calls: &KeeperCalls,
) -> Result<()> {
    let mut keeper = Keeper::new(con, Vec::new(), keys.clone(), range, calls.clone());
    for _ in 0..1000 {
        if !keeper.step(None).await? {
            break;
        }
    }
    Ok(())
}

/// The housekeeper during a run, on a thread and connections of its own:
/// on the load's runtime it would wait behind the clients' tasks while the
/// claims empty the queue.
pub fn spawn(
    client: redis::Client,
    keys: QueueKeys,
    range: Range,
    mode: KeeperMode,
    calls: KeeperCalls,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<KeeperStats>> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let con = redis_stats::connect(&client).await?;
            let mut refill_cons = Vec::new();
            for _ in 0..REFILL_CONNECTIONS {
                refill_cons.push(redis_stats::connect(&client).await?);
            }
            let mut keeper = Keeper::new(con, refill_cons, keys, range, calls);
            let deadline = Instant::now() + Duration::from_secs(600);
            // Polls back off while the depth holds by itself: each poll is
            // a command Redis serves during the measured window.
            let mut idle = Duration::from_millis(1);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                if keeper.step(Some(mode)).await? {
                    idle = Duration::from_millis(1);
                } else {
                    tokio::time::sleep(idle).await;
                    idle = (idle * 2).min(Duration::from_millis(4));
                }
            }
            Ok(keeper.stats)
        })
    })
}
