//! The queue's semantics over Redis: one function per operation, each one
//! call of a Redis function (`library`). Enqueues, claims and acks of one
//! queue are sent together, in one call, when they arrive together
//! (`lane`, `batches`). No HTTP types in here.

mod backend;
mod batches;
mod error;
mod job;
pub mod keys;
mod lane;
pub mod library;
mod paging;
pub mod record;
mod schedules;
mod settings;
mod stats;
mod sweep;
pub(crate) mod wake;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::{join_all, try_join_all};
use metrics::Counter;
use redis::{self, Cmd, FromRedisValue};
use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::telemetry;
pub use backend::{RedisPool, RedisSettings};
pub use batches::{
    ClaimEntry, Claimed, EnqueueReply, Exchange, Exchanged, Held, OutgoingJob, Route,
    exchange_answers, exchange_command,
};
use batches::{ExchangeBatch, HeadsBatch, Line};
pub use error::QueueError;
pub use job::{Job, JobState, Lease};
use keys::{Key, QueueKeys};
use lane::{Lane, LaneMetrics};
use library::{Function, LIBRARY};
pub use paging::{DeadPage, GroupPage, GroupStats, PageCursor};
pub use schedules::{Cron, CronError, Debt, DueSchedule, Fired, Schedule, ScheduleSpec, job_id};
pub use settings::{RateLimit, Settings, SettingsChange};
pub use stats::{ClassStats, QueueStats};
pub use sweep::{SweepCursors, Swept};
use wake::Waiters;

/// How long a waiting claim sleeps at most before it looks again on its
/// own, in case a wake-up was lost with a dropped subscription.
const RECHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Queues whose lanes this instance keeps before it drops the idle ones.
const KEPT_LANES: usize = 1024;
/// How often an operation routes again when the queue's shards changed
/// under it, before it gives up.
const REROUTES: usize = 3;
/// How soon the number of shards is read again while a change of it is
/// under way.
const RESHARD_RECHECK: Duration = Duration::from_millis(10);

pub type Result<T, E = QueueError> = std::result::Result<T, E>;

/// The longest a job is kept once acked: 30 days, in ms.
pub const MAX_RETAIN_MS: u64 = 2_592_000_000;

/// A job to add.
#[derive(Debug)]
pub struct NewJob {
    /// The client's id, for an idempotent enqueue; a fresh one when `None`.
    pub id: Option<String>,
    pub task: String,
    pub args: Box<RawValue>,
    pub priority: u8,
    pub delay_ms: u64,
    pub max_attempts: u32,
    /// The group it shares its priority class with fairly; `None` joins
    /// the group of jobs without one.
    pub group: Option<String>,
    /// How long it is kept once acked, in ms; `None` for the queue's
    /// `retain_ms`.
    pub retain_ms: Option<u64>,
}

impl NewJob {
    /// The job on its way to Redis under `id`, with its arrival number in
    /// a sharded queue when its request took one per job.
    fn outgoing(&self, id: &str, arrival: Option<u64>) -> OutgoingJob {
        OutgoingJob {
            id: id.to_owned(),
            priority: self.priority,
            delay_ms: self.delay_ms,
            max_attempts: self.max_attempts,
            group: self.group.clone(),
            retain_ms: self.retain_ms,
            body: record::body(&self.task, self.args.get()),
            arrival,
        }
    }

    /// The job as it was created under `id` at `now` (ms).
    fn into_job(self, id: String, now: i64) -> Job {
        let delay = i64::try_from(self.delay_ms).unwrap_or(i64::MAX);
        Job {
            id,
            task: self.task,
            args: self.args,
            priority: self.priority,
            state: if delay > 0 {
                JobState::Scheduled
            } else {
                JobState::Pending
            },
            attempts: 0,
            max_attempts: self.max_attempts,
            enqueued_at_ms: now,
            run_at_ms: (delay > 0).then(|| now + delay),
            lease: None,
            last_error: None,
            dead_at_ms: None,
            completed_at_ms: None,
            result: None,
            progress: None,
            group: self.group,
            schedule: None,
        }
    }
}

/// The answer to one enqueued job.
#[derive(Debug)]
pub struct Enqueued {
    pub job: Job,
    /// False when a job with the same id was already known.
    pub created: bool,
}

/// How to claim.
#[derive(Debug, Clone)]
pub struct ClaimOptions {
    pub worker: Option<String>,
    pub lease_ms: u64,
    pub max_jobs: u32,
    /// How long to wait for a job when none is claimable.
    pub wait: Duration,
    /// Jobs to acknowledge before claiming.
    pub acks: Vec<Ack>,
}

/// One acknowledgement.
#[derive(Debug, Clone)]
pub struct Ack {
    pub id: String,
    pub lease_token: String,
    /// Kept with the job when it is retained once acked; dropped otherwise.
    pub result: Option<Box<RawValue>>,
}

/// How a worker gives a job back.
#[derive(Debug, Clone, Default)]
pub struct Nack {
    pub delay_ms: u64,
    pub error: Option<String>,
    pub dead: bool,
    pub priority: Option<u8>,
}

/// The result of one acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    Acked,
    LeaseLost,
    NotFound,
}

impl AckOutcome {
    fn parse(status: &str) -> Result<Self> {
        match status {
            "OK" => Ok(Self::Acked),
            "LEASE_LOST" => Ok(Self::LeaseLost),
            "NOT_FOUND" => Ok(Self::NotFound),
            other => Err(QueueError::Unknown(anyhow::anyhow!(
                "unexpected ack status {other:?}"
            ))),
        }
    }
}

/// Settings of the queue layer.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub key_prefix: String,
    /// Bound on every Redis call.
    pub redis_timeout: Duration,
    /// Share of handed-out jobs that go to the least urgent class.
    pub bulk_floor: f64,
}

/// The Redis connections, calling the library's functions.
#[derive(Debug)]
pub(crate) struct Redis {
    pool: RedisPool,
}

impl Redis {
    /// Sends `cmd` (an `FCALL`); when the function is missing there (a
    /// fresh Redis, a failover), loads the library and sends it once more.
    async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let mut conn = self.pool.get().await.map_err(QueueError::Unavailable)?;
        let value = match cmd.query_async(&mut conn).await {
            Err(error) if library::is_function_missing(&error) => {
                LIBRARY
                    .load_command()
                    .query_async::<()>(&mut conn)
                    .await
                    .map_err(|error| {
                        QueueError::Unknown(
                            anyhow::Error::new(error)
                                .context("cannot load prioq's Redis functions"),
                        )
                    })?;
                tracing::info!(library = LIBRARY.name(), "loaded the Redis functions");
                cmd.query_async(&mut conn).await?
            }
            other => other?,
        };
        Ok(T::from_redis_value(value)?)
    }
}

/// Per-queue counters of this instance.
#[derive(Debug)]
struct QueueCounters {
    enqueued: Counter,
    claimed: Counter,
    acked: Counter,
    nacked: Counter,
    leases_expired: Counter,
    dead_lettered: Counter,
}

impl QueueCounters {
    fn new(queue: &str) -> Self {
        let counter = |name: &'static str| metrics::counter!(name, "queue" => queue.to_owned());
        Self {
            enqueued: counter(telemetry::JOBS_ENQUEUED),
            claimed: counter(telemetry::JOBS_CLAIMED),
            acked: counter(telemetry::JOBS_ACKED),
            nacked: counter(telemetry::JOBS_NACKED),
            leases_expired: counter(telemetry::LEASES_EXPIRED),
            dead_lettered: counter(telemetry::JOBS_DEAD_LETTERED),
        }
    }
}

/// One shard of a queue: its key names, the lane of its enqueues, claims
/// and acks, and the lane of the reads of its heads (by the claims of a
/// sharded queue).
#[derive(Debug)]
struct ShardLane {
    keys: Arc<QueueKeys>,
    lane: Arc<Lane<ExchangeBatch>>,
    heads: Arc<Lane<HeadsBatch>>,
}

/// What this instance keeps per queue: its shards, as many as the queue's
/// `shards` setting said when this instance last read it, and counters.
#[derive(Debug)]
struct QueueLanes {
    shards: Vec<ShardLane>,
    counters: Arc<QueueCounters>,
    /// The shard the next enqueue of ids made here goes to, in turn.
    turn: AtomicU32,
}

impl QueueLanes {
    fn count(&self) -> u32 {
        self.shards.len() as u32
    }

    /// Shard 0, the home: schedules and the master copy of the settings.
    fn home(&self) -> &ShardLane {
        &self.shards[0]
    }

    /// The shard job `id` lives in.
    fn of(&self, id: &str) -> &ShardLane {
        &self.shards[keys::shard_of(id, self.count()) as usize]
    }

    /// The shard whose turn it is to take the jobs of an enqueue request
    /// whose ids prioq makes: all of them, so the request is one call.
    fn next_turn(&self) -> u32 {
        self.turn.fetch_add(1, Ordering::Relaxed) % self.count()
    }

    /// A fresh id for a job made here, in shard `shard`.
    fn new_id(&self, shard: u32) -> String {
        let shards = self.count();
        loop {
            let id = record::new_id();
            if shards == 1 || keys::shard_of(&id, shards) == shard {
                return id;
            }
        }
    }
}

/// prioq's queues in one Redis.
#[derive(Debug)]
pub struct Broker {
    redis: Arc<Redis>,
    config: BrokerConfig,
    waiters: Arc<Waiters>,
    lanes: Mutex<HashMap<String, Arc<QueueLanes>>>,
    /// Queues this instance has put in the registry.
    registered: Mutex<HashSet<String>>,
}

impl Broker {
    pub fn new(pool: RedisPool, config: BrokerConfig) -> Self {
        Self {
            redis: Arc::new(Redis { pool }),
            config,
            waiters: Arc::default(),
            lanes: Mutex::default(),
            registered: Mutex::default(),
        }
    }

    pub(crate) fn waiters(&self) -> Arc<Waiters> {
        Arc::clone(&self.waiters)
    }

    /// The queue's shards as this instance knows them; read from the
    /// queue's home the first time.
    async fn lanes(&self, queue: &str) -> Result<Arc<QueueLanes>> {
        let known = self.known_lanes().get(queue).cloned();
        match known {
            Some(lanes) => Ok(lanes),
            None => self.reroute(queue).await,
        }
    }

    fn known_lanes(&self) -> MutexGuard<'_, HashMap<String, Arc<QueueLanes>>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the queue's number of shards from its home again, and keeps
    /// lanes for that many.
    async fn reroute(&self, queue: &str) -> Result<Arc<QueueLanes>> {
        let shards = self.read_shards(queue).await?;
        let mut lanes = self.known_lanes();
        if let Some(known) = lanes.get(queue).filter(|known| known.count() == shards) {
            return Ok(Arc::clone(known));
        }
        if lanes.len() >= KEPT_LANES {
            // Held elsewhere only while a request or a call uses it.
            lanes.retain(|_, lane| Arc::strong_count(lane) > 1);
        }
        let counters = lanes.get(queue).map_or_else(
            || Arc::new(QueueCounters::new(queue)),
            |known| Arc::clone(&known.counters),
        );
        let made = Arc::new(self.make_lanes(queue, shards, counters));
        lanes.insert(queue.to_owned(), Arc::clone(&made));
        Ok(made)
    }

    fn make_lanes(&self, queue: &str, shards: u32, counters: Arc<QueueCounters>) -> QueueLanes {
        let prefix = &self.config.key_prefix;
        let arrivals =
            (shards > 1).then(|| QueueKeys::new(prefix, queue).key(Key::Meta).to_owned());
        let labels = [("queue", queue.to_owned())];
        let metrics = || LaneMetrics {
            waiting: metrics::gauge!(telemetry::REQUESTS_WAITING, &labels),
            calls: metrics::counter!(telemetry::BATCHED_CALLS, &labels),
        };
        let shard = |shard: u32| {
            let keys = Arc::new(QueueKeys::shard(prefix, queue, shard, shards));
            ShardLane {
                heads: Arc::new(Lane::new(
                    HeadsBatch {
                        redis: Arc::clone(&self.redis),
                        keys: Arc::clone(&keys),
                        floor_ppm: self.floor_ppm(),
                        shards,
                    },
                    self.config.redis_timeout,
                    metrics(),
                )),
                lane: Arc::new(Lane::new(
                    ExchangeBatch {
                        redis: Arc::clone(&self.redis),
                        keys: Arc::clone(&keys),
                        floor_ppm: self.floor_ppm(),
                        shards,
                        arrivals: arrivals.clone(),
                    },
                    self.config.redis_timeout,
                    metrics(),
                )),
                keys,
            }
        };
        QueueLanes {
            shards: (0..shards).map(shard).collect(),
            counters,
            turn: AtomicU32::new(0),
        }
    }

    /// The bulk floor's share in parts per million of jobs handed out.
    fn floor_ppm(&self) -> u64 {
        (self.config.bulk_floor * 1_000_000.0).round() as u64
    }

    /// The queue's `shards` setting as its home has it; while a change is
    /// under way (the home holds -k), waits for it to end, up to the Redis
    /// timeout.
    async fn read_shards(&self, queue: &str) -> Result<u32> {
        let deadline = Instant::now() + self.config.redis_timeout;
        loop {
            match self.home_shards(queue).await? {
                shards if shards >= 1 => {
                    return Ok(u32::try_from(shards).unwrap_or(1).min(keys::MAX_SHARDS));
                }
                _ if Instant::now() < deadline => tokio::time::sleep(RESHARD_RECHECK).await,
                _ => return Err(QueueError::ShardsChanged),
            }
        }
    }

    /// The `shards` field of the queue's home: 1 when absent, -k while a
    /// change from k is under way.
    async fn home_shards(&self, queue: &str) -> Result<i64> {
        let keys = QueueKeys::new(&self.config.key_prefix, queue);
        let mut cmd = redis::cmd("HGET");
        cmd.arg(keys.key(Key::Meta)).arg("shards");
        Ok(self.call::<Option<i64>>(&cmd).await?.unwrap_or(1))
    }

    /// Runs `operation` on the queue's shards as this instance knows them.
    /// When they changed under it, or a job was not found where it was
    /// looked for and the shards changed since, reads them again and runs
    /// it anew (a refused call wrote nothing).
    async fn routed<T, F, Fut>(&self, queue: &str, operation: F) -> Result<T>
    where
        F: Fn(Arc<QueueLanes>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut lanes = self.lanes(queue).await?;
        for _ in 0..REROUTES {
            match operation(Arc::clone(&lanes)).await {
                Err(QueueError::ShardsChanged) => lanes = self.reroute(queue).await?,
                Err(QueueError::NotFound) => {
                    let fresh = self.reroute(queue).await?;
                    if fresh.count() == lanes.count() {
                        return Err(QueueError::NotFound);
                    }
                    lanes = fresh;
                }
                other => return other,
            }
        }
        operation(lanes).await
    }

    /// The number of shards the queue is split over, as this instance
    /// knows it.
    pub async fn shards(&self, queue: &str) -> Result<u32> {
        Ok(self.lanes(queue).await?.count())
    }

    /// The number of shards the queue is split over, read again from its
    /// home.
    pub async fn reread_shards(&self, queue: &str) -> Result<u32> {
        Ok(self.reroute(queue).await?.count())
    }

    /// Adds jobs in order, each idempotent by its id.
    pub async fn enqueue(&self, queue: &str, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        self.register(queue).await?;
        let mut lanes = self.lanes(queue).await?;
        let turn = lanes.next_turn();
        let ids: Vec<String> = jobs
            .iter()
            .map(|job| job.id.clone().unwrap_or_else(|| lanes.new_id(turn)))
            .collect();
        let mut answers: Vec<Option<(i64, Option<Job>)>> = (0..jobs.len()).map(|_| None).collect();
        let mut tries = 0;
        loop {
            let todo: Vec<usize> = (0..jobs.len()).filter(|i| answers[*i].is_none()).collect();
            // A request split over shards numbers its jobs' arrivals in
            // its own order, before the parts go their ways.
            let shards: HashSet<u32> = todo
                .iter()
                .map(|i| keys::shard_of(&ids[*i], lanes.count()))
                .collect();
            let first_arrival = match shards.len() > 1 {
                true => {
                    let meta = lanes.home().keys.key(Key::Meta);
                    let reserve = batches::reserve_arrivals(&self.redis, meta, todo.len());
                    Some(bounded_by(self.config.redis_timeout, reserve).await?)
                }
                false => None,
            };
            let outgoing = todo
                .iter()
                .enumerate()
                .map(|(n, i)| {
                    jobs[*i].outgoing(&ids[*i], first_arrival.map(|first| first + n as u64))
                })
                .collect();
            let outcomes = scatter(
                &lanes,
                outgoing,
                |job| &job.id,
                |lane, part| async move {
                    let reply = lane.enqueue(part).await?;
                    Ok(reply
                        .known
                        .into_iter()
                        .map(|known| (reply.now_ms, known))
                        .collect())
                },
            )
            .await;
            let mut failure = None;
            for (i, outcome) in todo.into_iter().zip(outcomes) {
                match outcome {
                    Ok(answer) => answers[i] = Some(answer),
                    Err(error) => failure = Some(error),
                }
            }
            match failure {
                None => break,
                Some(QueueError::ShardsChanged) if tries < REROUTES => {
                    tries += 1;
                    lanes = self.reroute(queue).await?;
                }
                // Some jobs went in: the request's effect is partial.
                Some(error) if answers.iter().any(Option::is_some) => {
                    return Err(QueueError::Unknown(anyhow::Error::new(error).context(
                        "the jobs of some shards were enqueued, the others' failed",
                    )));
                }
                Some(error) => return Err(error),
            }
        }
        let enqueued: Vec<Enqueued> = jobs
            .into_iter()
            .zip(ids)
            .zip(answers.into_iter().flatten())
            .map(|((new, id), (now, known))| match known {
                Some(job) => Enqueued {
                    job,
                    created: false,
                },
                None => Enqueued {
                    job: new.into_job(id, now),
                    created: true,
                },
            })
            .collect();
        let created = enqueued.iter().filter(|e| e.created).count();
        lanes.counters.enqueued.increment(created as u64);
        Ok(enqueued)
    }

    /// Acknowledges the jobs `options.acks` names, then leases up to
    /// `max_jobs` jobs; with a wait, answers as soon as one is claimable,
    /// when the wait is over, or at `shutdown` (with what it has). The acks
    /// are applied before any wait begins.
    pub async fn claim(
        &self,
        queue: &str,
        mut options: ClaimOptions,
        shutdown: &CancellationToken,
    ) -> Result<Claimed> {
        let mut acks = std::mem::take(&mut options.acks);
        let entry = |acks| ClaimEntry {
            lease_ms: options.lease_ms,
            max_jobs: options.max_jobs,
            worker: options.worker.clone().unwrap_or_default(),
            acks,
        };
        if options.wait.is_zero() {
            return self.claim_once(queue, entry(acks)).await;
        }
        let deadline = Instant::now() + options.wait;
        let signal = self.waiters.signal(queue);
        let mut acked = None;
        let mut waiting = None;
        loop {
            // Listen before looking, so a job arriving in between still wakes us.
            let woken = signal.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let claimed = match self
                .claim_once(queue, entry(std::mem::take(&mut acks)))
                .await
            {
                Ok(claimed) => claimed,
                // The acks went through on an earlier look: say so, with
                // no jobs, rather than hide them behind the error.
                Err(error) => match acked.take() {
                    Some(acked) => {
                        tracing::warn!(error = %anyhow::Error::from(error), "a waiting claim could not look again");
                        return Ok(Claimed {
                            acked,
                            ..Claimed::default()
                        });
                    }
                    None => return Err(error),
                },
            };
            let acked_now = acked.get_or_insert(claimed.acked);
            if !claimed.jobs.is_empty() || Instant::now() >= deadline || shutdown.is_cancelled() {
                return Ok(Claimed {
                    acked: std::mem::take(acked_now),
                    ..claimed
                });
            }
            waiting.get_or_insert_with(|| Waiting::start(telemetry::LONG_POLLS_WAITING));
            // A rate limit says when the next token comes: look again then.
            // Otherwise wait to be told (a job, a resume, a freed slot).
            let next_look = match claimed.held {
                Some(Held::RateLimit(wait)) => wait.max(Duration::from_millis(1)),
                _ => RECHECK_INTERVAL,
            };
            let recheck = deadline.min(Instant::now() + next_look);
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep_until(recheck) => {}
                () = shutdown.cancelled() => {}
            }
        }
    }

    /// One look for jobs: the acks, then up to `max_jobs` jobs, from the
    /// queue's one shard in one call, or from a sharded queue's shards
    /// that hold the most urgent ones (see `claim_shards`).
    async fn claim_once(&self, queue: &str, entry: ClaimEntry) -> Result<Claimed> {
        let entry = &Arc::new(entry);
        let (lanes, claimed) = self
            .routed(queue, |lanes| async move {
                let claimed = if lanes.count() == 1 {
                    lanes.home().lane.claim(Arc::clone(entry)).await?
                } else {
                    self.claim_shards(&lanes, entry).await?
                };
                Ok((lanes, claimed))
            })
            .await?;
        count_claim(&lanes.counters, &claimed);
        Ok(claimed)
    }

    /// A claim on a sharded queue. Every shard says, at once, the score
    /// first in line for each of `max_jobs` claims of one job there (see
    /// the `heads` function); claim after claim, the shard whose next
    /// score is the lowest is picked, so the claim takes what as many
    /// claims of one job would. The shards picked are then asked for
    /// their share, at once, each with the acks of its jobs (the other
    /// shards' acks go alone, at the same time); when they give fewer (a
    /// race with another claim), the other shards are asked in turn for
    /// the rest.
    async fn claim_shards(&self, lanes: &QueueLanes, entry: &ClaimEntry) -> Result<Claimed> {
        let heads = try_join_all(
            lanes
                .shards
                .iter()
                .map(|shard| shard.heads.submit(entry.max_jobs)),
        )
        .await?;
        // Where an ack can change what a shard offers (a cap), the acks
        // go first and the shards are read again, as a claim of one
        // shard would see them.
        if !entry.acks.is_empty() && heads.iter().any(|line| line.capped) {
            let acked = self
                .ack_shards(lanes, &Arc::new(entry.acks.clone()))
                .await?;
            let mut claimed = Box::pin(self.claim_shards(
                lanes,
                &ClaimEntry {
                    lease_ms: entry.lease_ms,
                    max_jobs: entry.max_jobs,
                    worker: entry.worker.clone(),
                    acks: Vec::new(),
                },
            ))
            .await
            .map_err(|error| match error {
                // The acks went through: a claim routed anew would apply
                // them twice.
                QueueError::ShardsChanged => QueueError::Unknown(anyhow::anyhow!(
                    "the shards changed under a claim after its acks were applied"
                )),
                error => error,
            })?;
            claimed.acked = acked;
            return Ok(claimed);
        }
        let want = entry.max_jobs as usize;
        let picks = merge_lines(&heads, want);
        let mut asks = vec![0u32; lanes.shards.len()];
        for shard in &picks {
            asks[*shard] += 1;
        }
        let ask = |max_jobs, acks| {
            Arc::new(ClaimEntry {
                lease_ms: entry.lease_ms,
                max_jobs,
                worker: entry.worker.clone(),
                acks,
            })
        };
        // The acks by shard: where each stood in the request, and the ack.
        let mut acks: Vec<(Vec<usize>, Vec<Ack>)> = vec![Default::default(); lanes.shards.len()];
        for (i, ack) in entry.acks.iter().enumerate() {
            let part = &mut acks[keys::shard_of(&ack.id, lanes.count()) as usize];
            part.0.push(i);
            part.1.push(ack.clone());
        }
        let first: Vec<usize> = (0..asks.len()).filter(|s| asks[*s] > 0).collect();
        let alone: Vec<usize> = (0..asks.len())
            .filter(|s| asks[*s] == 0 && !acks[*s].1.is_empty())
            .collect();
        let claims = first.iter().map(|shard| {
            let entry = ask(asks[*shard], std::mem::take(&mut acks[*shard].1));
            lanes.shards[*shard].lane.claim(entry)
        });
        let (claims, acked_alone) = tokio::join!(
            join_all(claims.collect::<Vec<_>>()),
            join_all(alone.iter().map(|shard| {
                let part = std::mem::take(&mut acks[*shard].1);
                lanes.shards[*shard].lane.ack(Arc::new(part))
            }))
        );
        let mut claimed = Claimed {
            acked: vec![AckOutcome::NotFound; entry.acks.len()],
            ..Claimed::default()
        };
        // An ack whose call failed may or may not have been applied: the
        // claim fails (the jobs it took go back when their leases end).
        let mut ack_failure = None;
        let file_acks = |shard: usize, outcomes: &[AckOutcome], acked: &mut Vec<AckOutcome>| {
            for (i, outcome) in acks[shard].0.iter().zip(outcomes) {
                acked[*i] = *outcome;
            }
        };
        // Whether some shard's part went through: then the claim must not
        // be routed anew, which would apply that part twice.
        let mut applied = false;
        for (shard, outcome) in alone.iter().zip(acked_alone) {
            match outcome {
                Ok(outcomes) => {
                    applied = true;
                    file_acks(*shard, &outcomes, &mut claimed.acked);
                }
                Err(error) => {
                    ack_failure.get_or_insert(error);
                }
            }
        }
        // What each shard handed out, in its order.
        let mut parts: Vec<VecDeque<Job>> = vec![VecDeque::new(); lanes.shards.len()];
        let mut failure = None;
        // Files a shard's answer; answers how many jobs it gave.
        let mut take =
            |shard: usize, outcome: Result<Claimed>, held: &mut Option<Held>| match outcome {
                Ok(part) => {
                    let given = part.jobs.len();
                    parts[shard].extend(part.jobs);
                    *held = held.or(part.held);
                    given
                }
                Err(error) => {
                    tracing::debug!(shard, error = %error, "a shard's claim failed");
                    failure.get_or_insert(error);
                    0
                }
            };
        let mut more: Vec<usize> = Vec::new();
        let mut got = 0;
        for (shard, outcome) in first.iter().zip(claims) {
            let outcome = match outcome {
                Ok(part) => {
                    applied = true;
                    file_acks(*shard, &part.acked, &mut claimed.acked);
                    Ok(part)
                }
                Err(error) if !acks[*shard].0.is_empty() => {
                    ack_failure.get_or_insert(error.duplicate());
                    Err(error)
                }
                Err(error) => Err(error),
            };
            let given = take(*shard, outcome, &mut claimed.held);
            got += given;
            if given == asks[*shard] as usize {
                more.push(*shard);
            }
        }
        // The rest, when a race left the claim short: the shards with
        // jobs in line that were not picked, then those that gave all
        // they were asked.
        if got < want {
            let mut rest: Vec<usize> = (0..heads.len())
                .filter(|shard| heads[*shard].scores.len() > asks[*shard] as usize)
                .collect();
            for shard in more {
                if !rest.contains(&shard) {
                    rest.push(shard);
                }
            }
            for shard in rest {
                let missing = want - got.min(want);
                if missing == 0 {
                    break;
                }
                let outcome = lanes.shards[shard]
                    .lane
                    .claim(ask(missing as u32, Vec::new()))
                    .await;
                got += take(shard, outcome, &mut claimed.held);
            }
        }
        // In the order the claims of one job would have taken them.
        for shard in &picks {
            if let Some(job) = parts[*shard].pop_front() {
                claimed.jobs.push(job);
            }
        }
        claimed.jobs.extend(parts.into_iter().flatten());
        let error = match (ack_failure, failure) {
            (Some(error), _) => error,
            (None, Some(error)) if claimed.jobs.is_empty() => error,
            _ => return Ok(claimed),
        };
        match error {
            QueueError::ShardsChanged if applied => Err(QueueError::Unknown(anyhow::anyhow!(
                "the shards changed under a claim after some of its parts were applied"
            ))),
            error => Err(error),
        }
    }

    /// Acknowledges jobs in their shards, each shard's at once.
    async fn ack_shards(
        &self,
        lanes: &QueueLanes,
        acks: &Arc<Vec<Ack>>,
    ) -> Result<Vec<AckOutcome>> {
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        if lanes.count() == 1 {
            return lanes.home().lane.ack(Arc::clone(acks)).await;
        }
        let outcomes = scatter(
            lanes,
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

    /// Acknowledges finished jobs, each on its own terms.
    pub async fn ack(&self, queue: &str, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        let acks = &Arc::new(acks);
        let (lanes, outcomes) = self
            // Acks go in `exchange` calls, which refuse a stale count of
            // shards: a job not found is not in another shard.
            .routed(queue, |lanes| async move {
                let outcomes = self.ack_shards(&lanes, acks).await?;
                Ok((lanes, outcomes))
            })
            .await?;
        let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count();
        lanes.counters.acked.increment(acked as u64);
        Ok(outcomes)
    }

    /// Moves a lease's deadline to `lease_ms` from now, and records the
    /// worker's progress when it reports some.
    pub async fn extend(
        &self,
        queue: &str,
        id: &str,
        token: &str,
        lease_ms: u64,
        progress: Option<&RawValue>,
    ) -> Result<Job> {
        self.routed(queue, |lanes| async move {
            let mut cmd = LIBRARY.call(Function::Extend, &lanes.of(id).keys);
            cmd.arg(id)
                .arg(token)
                .arg(lease_ms)
                .arg(progress.map_or("", RawValue::get));
            self.call(&cmd).await
        })
        .await
    }

    /// Ends a lease without success.
    pub async fn nack(&self, queue: &str, id: &str, token: &str, nack: &Nack) -> Result<Job> {
        let (lanes, job) = self
            .routed(queue, |lanes| async move {
                let mut cmd = LIBRARY.call(Function::Nack, &lanes.of(id).keys);
                cmd.arg(id)
                    .arg(token)
                    .arg(nack.delay_ms)
                    .arg(if nack.dead { "1" } else { "0" })
                    .arg(nack.priority.map(|p| p.to_string()).unwrap_or_default())
                    .arg(if nack.error.is_some() { "1" } else { "0" })
                    .arg(nack.error.as_deref().unwrap_or(""));
                let job: Job = self.call(&cmd).await?;
                Ok((lanes, job))
            })
            .await?;
        lanes.counters.nacked.increment(1);
        if job.state == JobState::Dead {
            lanes.counters.dead_lettered.increment(1);
        }
        Ok(job)
    }

    /// One job in any state.
    pub async fn job(&self, queue: &str, id: &str) -> Result<Job> {
        self.routed(queue, |lanes| async move {
            let mut cmd = LIBRARY.call(Function::Job, &lanes.of(id).keys);
            cmd.arg(id);
            let job: Option<Job> = self.call(&cmd).await?;
            job.ok_or(QueueError::NotFound)
        })
        .await
    }

    /// One job, once it has ended (completed or dead), or as it is when
    /// `wait` is over or at `shutdown`. The job's end is heard from whichever
    /// instance ended it (see `wake`), with a recheck now and then.
    pub async fn wait_for_job(
        &self,
        queue: &str,
        id: &str,
        wait: Duration,
        shutdown: &CancellationToken,
    ) -> Result<Job> {
        let deadline = Instant::now() + wait;
        let signal = self.waiters.job_signal(queue, id);
        // Listen before looking, so an end in between still wakes us.
        let mut woken = Box::pin(signal.notified());
        woken.as_mut().enable();
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let mut job: Job = self
            .routed(queue, |lanes| async move {
                let mut cmd = LIBRARY.call(Function::Watch, &lanes.of(id).keys);
                cmd.arg(id).arg(wait_ms);
                self.call::<Option<Job>>(&cmd)
                    .await?
                    .ok_or(QueueError::NotFound)
            })
            .await?;
        let _waiting = Waiting::start(telemetry::JOB_WAITS);
        loop {
            let ended = matches!(job.state, JobState::Completed | JobState::Dead);
            if ended || Instant::now() >= deadline || shutdown.is_cancelled() {
                return Ok(job);
            }
            let recheck = deadline.min(Instant::now() + RECHECK_INTERVAL);
            tokio::select! {
                () = woken.as_mut() => {}
                () = tokio::time::sleep_until(recheck) => {}
                () = shutdown.cancelled() => {}
            }
            woken = Box::pin(signal.notified());
            woken.as_mut().enable();
            job = self.job(queue, id).await?;
        }
    }

    /// Deletes a pending, scheduled or dead job.
    pub async fn delete(&self, queue: &str, id: &str) -> Result<()> {
        self.delete_as(queue, id, "any").await
    }

    /// Deletes a dead job.
    pub async fn delete_dead(&self, queue: &str, id: &str) -> Result<()> {
        self.delete_as(queue, id, "dead").await
    }

    async fn delete_as(&self, queue: &str, id: &str, mode: &str) -> Result<()> {
        self.routed(queue, |lanes| async move {
            let mut cmd = LIBRARY.call(Function::Delete, &lanes.of(id).keys);
            cmd.arg(id).arg(mode);
            self.call::<i64>(&cmd).await.map(drop)
        })
        .await
    }

    /// Returns a dead job to pending with its attempts reset.
    pub async fn requeue(&self, queue: &str, id: &str, priority: Option<u8>) -> Result<Job> {
        self.routed(queue, |lanes| async move {
            let mut cmd = LIBRARY.call(Function::Requeue, &lanes.of(id).keys);
            cmd.arg(id)
                .arg(priority.map(|p| p.to_string()).unwrap_or_default());
            self.call(&cmd).await
        })
        .await
    }

    /// Puts the queue in the registry before its first job exists, so the
    /// sweeper always knows it; once per queue and instance.
    async fn register(&self, queue: &str) -> Result<()> {
        if self.registered_queues().contains(queue) {
            return Ok(());
        }
        let mut cmd = redis::cmd("SADD");
        cmd.arg(keys::registry(&self.config.key_prefix)).arg(queue);
        self.call::<()>(&cmd).await?;
        self.registered_queues().insert(queue.to_owned());
        Ok(())
    }

    fn registered_queues(&self) -> MutexGuard<'_, HashSet<String>> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Every queue that has ever had a job, sorted by name. Queues this
    /// instance registered but the registry lacks (Redis lost it) are put
    /// back.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let registry = keys::registry(&self.config.key_prefix);
        let mut queues: Vec<String> = self.call(redis::cmd("SMEMBERS").arg(&registry)).await?;
        let missing: Vec<String> = {
            let known: HashSet<&String> = queues.iter().collect();
            let registered = self.registered_queues();
            registered
                .iter()
                .filter(|q| !known.contains(q))
                .cloned()
                .collect()
        };
        if !missing.is_empty() {
            tracing::warn!(
                ?missing,
                "queues were missing from the registry; adding them back"
            );
            self.call::<()>(redis::cmd("SADD").arg(&registry).arg(&missing))
                .await?;
            queues.extend(missing);
        }
        queues.sort_unstable();
        Ok(queues)
    }

    /// Whether Redis runs functions that may write, within a second at
    /// most. A function, not PING: a Redis that pauses writes (`CLIENT
    /// PAUSE WRITE`) answers PING but holds every queue function back.
    pub async fn ping(&self) -> Result<()> {
        let limit = self.config.redis_timeout.min(Duration::from_secs(1));
        let cmd = LIBRARY.call_keyless(Function::Ready);
        bounded_by(limit, self.redis.query::<i64>(&cmd))
            .await
            .map(drop)
    }

    /// One call, bounded by the Redis timeout.
    async fn call<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        bounded_by(self.config.redis_timeout, self.redis.query(cmd)).await
    }
}

/// A wait (a claim that found nothing, a read waiting for a job to end),
/// counted in its gauge while it lasts.
struct Waiting(&'static str);

impl Waiting {
    fn start(gauge: &'static str) -> Self {
        metrics::gauge!(gauge).increment(1);
        Self(gauge)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1);
    }
}

fn count_claim(counters: &QueueCounters, claimed: &Claimed) {
    counters.claimed.increment(claimed.jobs.len() as u64);
    let acked = claimed.acked.iter().filter(|o| **o == AckOutcome::Acked);
    counters.acked.increment(acked.count() as u64);
}

/// The shard each of up to `want` claims of one job would take from, in
/// turn: the one whose next score in line (`lines[shard]`) is the lowest,
/// the lower shard on a tie.
fn merge_lines(lines: &[Arc<Line>], want: usize) -> Vec<usize> {
    let mut next = vec![0; lines.len()];
    let mut picks = Vec::with_capacity(want);
    while picks.len() < want {
        let best = (0..lines.len())
            .filter_map(|shard| Some((*lines[shard].scores.get(next[shard])?, shard)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, shard)) = best else { break };
        next[shard] += 1;
        picks.push(shard);
    }
    picks
}

/// Runs `items` in the shards their ids map to: each shard's part in one
/// call, all parts at once. Answers each item's outcome, in order; an item
/// whose shard's call failed has that call's error.
async fn scatter<T, R, F, Fut>(
    lanes: &QueueLanes,
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
        lanes.shards.iter().map(|_| Default::default()).collect();
    for (i, item) in items.into_iter().enumerate() {
        let part = &mut parts[keys::shard_of(id_of(&item), lanes.count()) as usize];
        part.0.push(i);
        part.1.push(item);
    }
    let calls = parts
        .into_iter()
        .zip(&lanes.shards)
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

/// Runs a Redis operation, giving up after `limit`: then its effect is
/// unknown.
async fn bounded_by<T>(limit: Duration, operation: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(limit, operation)
        .await
        .unwrap_or_else(|_| {
            Err(QueueError::Unknown(anyhow::anyhow!(
                "Redis did not answer within {limit:?}"
            )))
        })
}
