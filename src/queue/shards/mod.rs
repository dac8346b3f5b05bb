//! Shard routing. An instance keeps, per queue, the shards it knows the
//! queue has (`QueueShards`: the keys and lanes of each, and the queue's
//! counters), read from the queue's home, shard 0, the first time it meets
//! the queue and again whenever a call is refused because the number
//! changed (`Shards::routed`). A job's id picks its shard; a sharded
//! claim reads every shard's line and takes from the shards that claims
//! of one job would (`QueueShards::claim`); acks and enqueues are split by
//! shard, each shard's part in one call (`scatter`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::join_all;
use redis::{self, FromRedisValue};
use tokio::sync::mpsc;
use tokio::time::Instant;

mod claims;
mod plan;

use super::counters::QueueCounters;
use super::courier::{Courier, Notice};
use super::error::{Bound, QueueError, Result};
use super::exchange::lane::{Lane, LaneMetrics};
use super::exchange::{
    Ack, AckOutcome, ClaimEntry, Claimed, ExchangeBatch, LineBatch, OutgoingJob,
};
use super::store::keys::{self, Key, QueueKeys};
use super::store::library::{Function, LIBRARY};
use super::store::record;
use super::store::{Call, Redis, bounded_by};
use crate::queue::settings::table::MAX_SHARDS;

/// Queues whose shards this instance keeps before it drops the idle ones.
const KEPT_QUEUES: usize = 1024;
/// How often an operation routes again when the queue's shards changed
/// under it, before it gives up.
pub(crate) const REROUTES: usize = 3;
/// How soon the number of shards is read again while a change of it is
/// under way.
const RESHARD_RECHECK: Duration = Duration::from_millis(10);

/// One shard of a queue: its key names, the lane of its enqueues, claims
/// and acks, and the lane of the reads of its line (by the claims of a
/// sharded queue).
#[derive(Debug)]
pub(crate) struct Shard {
    pub(crate) keys: Arc<QueueKeys>,
    pub(crate) lane: Arc<Lane<ExchangeBatch>>,
    /// Sends the shard's outbox at once (the lane's acks use its own).
    pub(crate) courier: Courier,
    line: Arc<Lane<LineBatch>>,
}

/// What this instance keeps per queue: its shards, as many as the queue's
/// `shards` setting said when this instance last read it, and counters.
#[derive(Debug)]
pub(crate) struct QueueShards {
    pub(crate) shards: Vec<Shard>,
    pub(crate) counters: Arc<QueueCounters>,
    /// The shard the next enqueue of ids made here goes to, in turn.
    turn: AtomicU32,
    /// Held while a claim picks from the lines it read (`plan::plan`).
    merging: Mutex<()>,
}

impl QueueShards {
    pub(crate) fn count(&self) -> u32 {
        self.shards.len() as u32
    }

    /// Shard 0, the home: schedules and the master copy of the settings.
    pub(crate) fn home(&self) -> &Shard {
        &self.shards[0]
    }

    /// The shard job `id` lives in.
    pub(crate) fn of(&self, id: &str) -> &Shard {
        &self.shards[keys::shard_of(id, self.count()) as usize]
    }

    /// The shard whose turn it is to take the jobs of an enqueue request
    /// whose ids prioq makes: all of them, so the request is one call.
    pub(crate) fn next_turn(&self) -> u32 {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.count()
    }

    /// A fresh id for a job made here, in shard `shard`.
    pub(crate) fn new_id(&self, shard: u32) -> String {
        let shards = self.count();
        loop {
            let id = record::new_id();
            if shards == 1 || keys::shard_of(&id, shards) == shard {
                return id;
            }
        }
    }

    /// One look for jobs: the acks, then up to `max_jobs` jobs, from the
    /// queue's one shard in one call, or from a sharded queue's shards
    /// that claims of one job would take from (see `claim_shards`).
    pub(crate) async fn claim(&self, entry: &Arc<ClaimEntry>) -> Result<Claimed> {
        if self.count() == 1 {
            return self.home().lane.claim(Arc::clone(entry)).await;
        }
        self.claim_shards(entry).await
    }

    /// Whether the jobs of an enqueue split over shards fit under each
    /// shard's share of the queue's `max_pending` and `max_pending_bytes`,
    /// asked of every shard they go to at once (the `fill` function)
    /// before any part is written; an error naming the first shard they
    /// would overfill. The parts then go admitted whatever the bounds, so
    /// the request is taken whole or not at all: enqueues racing it can
    /// take a shard past its share by their own jobs.
    pub(crate) async fn check_room(&self, redis: &Redis, jobs: &[OutgoingJob]) -> Result<()> {
        let mut parts: Vec<Vec<&OutgoingJob>> = vec![Vec::new(); self.shards.len()];
        for job in jobs {
            parts[keys::shard_of(&job.id, self.count()) as usize].push(job);
        }
        let asks = parts
            .iter()
            .zip(&self.shards)
            .filter(|(part, _)| !part.is_empty())
            .map(|(part, shard)| {
                let mut cmd = LIBRARY.call(Function::Fill, &shard.keys);
                for job in part {
                    cmd.arg(&job.id).arg(job.body.len());
                }
                async move {
                    redis
                        .query::<(u64, String, u64, u64, String, u64)>(&cmd)
                        .await
                }
            });
        for fill in join_all(asks).await {
            let (waiting, limit, fresh, bytes, bytes_limit, fresh_bytes) = fill?;
            let over = |waiting: u64, limit: &str, fresh: u64, bound: Bound| {
                let limit = limit.parse::<u64>().ok()?;
                (waiting + fresh > limit).then_some(QueueError::QueueFull {
                    waiting,
                    limit,
                    bound,
                })
            };
            if let Some(full) = over(waiting, &limit, fresh, Bound::Jobs)
                .or_else(|| over(bytes, &bytes_limit, fresh_bytes, Bound::Bytes))
            {
                return Err(full);
            }
        }
        Ok(())
    }

    /// Acknowledges jobs in their shards, each shard's at once.
    pub(crate) async fn ack(&self, acks: &Arc<Vec<Ack>>) -> Result<Vec<AckOutcome>> {
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        if self.count() == 1 {
            return self.home().lane.ack(Arc::clone(acks)).await;
        }
        let outcomes = scatter(
            self,
            acks.to_vec(),
            |ack| &ack.id,
            |lane, part| async move { lane.ack(Arc::new(part)).await },
        )
        .await;
        let failed = outcomes.iter().any(Result::is_err);
        let applied = outcomes.iter().any(Result::is_ok);
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Err(error) if failed && applied => Err(QueueError::Unknown(
                    anyhow::Error::new(error)
                        .context("the acks of some shards were applied, the others' failed"),
                )),
                other => other,
            })
            .collect()
    }
}

/// The queues' shards as this instance knows them.
#[derive(Debug)]
pub(crate) struct Shards {
    redis: Arc<Redis>,
    key_prefix: String,
    /// Bound on every Redis call.
    timeout: Duration,
    /// The bulk floor's share, in parts per million of jobs handed out.
    floor_ppm: u64,
    /// Where the lanes send their notices of outboxes to send.
    courier: mpsc::Sender<Notice>,
    known: Mutex<HashMap<String, Arc<QueueShards>>>,
}

impl Shards {
    pub(crate) fn new(
        redis: Arc<Redis>,
        key_prefix: String,
        timeout: Duration,
        floor_ppm: u64,
        courier: mpsc::Sender<Notice>,
    ) -> Self {
        Self {
            redis,
            key_prefix,
            timeout,
            floor_ppm,
            courier,
            known: Mutex::default(),
        }
    }

    /// The queue's shards as this instance knows them; read from the
    /// queue's home the first time.
    pub(crate) async fn of(&self, queue: &str) -> Result<Arc<QueueShards>> {
        let known = self.known().get(queue).cloned();
        match known {
            Some(shards) => Ok(shards),
            None => self.reroute(queue).await,
        }
    }

    /// Forgets what this instance knows of the queue's shards (it was
    /// deleted): the next call reads them again.
    pub(crate) fn forget(&self, queue: &str) {
        self.known().remove(queue);
    }

    fn known(&self) -> MutexGuard<'_, HashMap<String, Arc<QueueShards>>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the queue's number of shards from its home again, and keeps
    /// lanes for that many.
    pub(crate) async fn reroute(&self, queue: &str) -> Result<Arc<QueueShards>> {
        let count = self.read_count(queue).await?;
        let mut known = self.known();
        if let Some(shards) = known.get(queue).filter(|shards| shards.count() == count) {
            return Ok(Arc::clone(shards));
        }
        if known.len() >= KEPT_QUEUES {
            // Held elsewhere only while a request or a call uses it.
            known.retain(|_, shards| Arc::strong_count(shards) > 1);
        }
        let counters = known.get(queue).map_or_else(
            || Arc::new(QueueCounters::new(queue)),
            |shards| Arc::clone(&shards.counters),
        );
        let made = Arc::new(self.make(queue, count, counters));
        known.insert(queue.to_owned(), Arc::clone(&made));
        Ok(made)
    }

    fn make(&self, queue: &str, count: u32, counters: Arc<QueueCounters>) -> QueueShards {
        let prefix = &self.key_prefix;
        let arrivals = (count > 1).then(|| QueueKeys::new(prefix, queue).key(Key::Meta).to_owned());
        let metrics = || LaneMetrics::new(queue);
        let shard = |shard: u32| {
            let keys = Arc::new(QueueKeys::shard(prefix, queue, shard, count));
            Shard {
                line: Arc::new(Lane::new(
                    LineBatch {
                        redis: Arc::clone(&self.redis),
                        keys: Arc::clone(&keys),
                        floor_ppm: self.floor_ppm,
                        shards: count,
                    },
                    self.timeout,
                    metrics(),
                )),
                lane: Arc::new(Lane::new(
                    ExchangeBatch {
                        redis: Arc::clone(&self.redis),
                        keys: Arc::clone(&keys),
                        floor_ppm: self.floor_ppm,
                        shards: count,
                        arrivals: arrivals.clone(),
                        courier: Courier::new(queue, shard, self.courier.clone()),
                    },
                    self.timeout,
                    metrics(),
                )),
                courier: Courier::new(queue, shard, self.courier.clone()),
                keys,
            }
        };
        QueueShards {
            shards: (0..count).map(shard).collect(),
            counters,
            turn: AtomicU32::new(0),
            merging: Mutex::default(),
        }
    }

    /// The queue's `shards` setting as its home has it; while a change is
    /// under way (the home holds -k), waits for it to end, up to the Redis
    /// timeout.
    async fn read_count(&self, queue: &str) -> Result<u32> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.home_count(queue).await? {
                count if count >= 1 => {
                    return Ok(u32::try_from(count).unwrap_or(1).min(MAX_SHARDS));
                }
                _ if Instant::now() < deadline => tokio::time::sleep(RESHARD_RECHECK).await,
                _ => return Err(QueueError::ShardsChanged),
            }
        }
    }

    /// The `shards` field of the queue's home: 1 when absent, -k while a
    /// change from k is under way.
    pub(crate) async fn home_count(&self, queue: &str) -> Result<i64> {
        let keys = QueueKeys::new(&self.key_prefix, queue);
        let mut cmd = Call::safe(redis::cmd("HGET"));
        cmd.arg(keys.key(Key::Meta)).arg("shards");
        Ok(self.call::<Option<i64>>(&cmd).await?.unwrap_or(1))
    }

    /// Runs `operation` on the queue's shards as this instance knows them.
    /// When they changed under it, or a job was not found where it was
    /// looked for and the shards changed since, reads them again and runs
    /// it anew (a refused call wrote nothing).
    pub(crate) async fn routed<T, F, Fut>(&self, queue: &str, operation: F) -> Result<T>
    where
        F: Fn(Arc<QueueShards>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut shards = self.of(queue).await?;
        for _ in 0..REROUTES {
            match operation(Arc::clone(&shards)).await {
                Err(QueueError::ShardsChanged) => shards = self.reroute(queue).await?,
                Err(QueueError::NotFound) => {
                    let fresh = self.reroute(queue).await?;
                    if fresh.count() == shards.count() {
                        return Err(QueueError::NotFound);
                    }
                    shards = fresh;
                }
                other => return other,
            }
        }
        operation(shards).await
    }

    async fn call<T: FromRedisValue>(&self, cmd: &Call) -> Result<T> {
        bounded_by(self.timeout, self.redis.query(cmd)).await
    }
}

/// Runs `items` in the shards their ids map to: each shard's part in one
/// call, all parts at once. Answers each item's outcome, in order; an item
/// whose shard's call failed has that call's error.
pub(crate) async fn scatter<T, R, F, Fut>(
    queue: &QueueShards,
    items: Vec<T>,
    id_of: impl Fn(&T) -> &str,
    run: F,
) -> Vec<Result<R>>
where
    F: Fn(Arc<Lane<ExchangeBatch>>, Vec<T>) -> Fut,
    Fut: Future<Output = Result<Vec<R>>>,
{
    let count = items.len();
    let mut parts: Vec<(Vec<usize>, Vec<T>)> =
        queue.shards.iter().map(|_| Default::default()).collect();
    for (i, item) in items.into_iter().enumerate() {
        let part = &mut parts[keys::shard_of(id_of(&item), queue.count()) as usize];
        part.0.push(i);
        part.1.push(item);
    }
    let calls = parts
        .into_iter()
        .zip(&queue.shards)
        .filter(|((indexes, _), _)| !indexes.is_empty())
        .map(|((indexes, part), shard)| {
            let call = run(Arc::clone(&shard.lane), part);
            async move { (indexes, call.await) }
        });
    let mut outcomes: Vec<Option<Result<R>>> = (0..count).map(|_| None).collect();
    for (indexes, result) in join_all(calls).await {
        match result {
            Ok(answers) if answers.len() == indexes.len() => {
                for (i, answer) in indexes.into_iter().zip(answers) {
                    outcomes[i] = Some(Ok(answer));
                }
            }
            Ok(_) => {
                for i in indexes {
                    outcomes[i] = Some(Err(QueueError::Unknown(anyhow::anyhow!(
                        "a shard answered for another number of items"
                    ))));
                }
            }
            Err(error) => {
                for i in indexes {
                    outcomes[i] = Some(Err(error.duplicate()));
                }
            }
        }
    }
    outcomes
        .into_iter()
        .map(|outcome| outcome.unwrap_or(Err(QueueError::NotFound)))
        .collect()
}
