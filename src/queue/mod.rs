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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use metrics::Counter;
use redis::{self, Cmd, FromRedisValue};
use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::telemetry;
pub use backend::{RedisPool, RedisSettings};
use batches::ExchangeBatch;
pub use batches::{
    ClaimEntry, Claimed, EnqueueReply, Exchange, Exchanged, Held, OutgoingJob, exchange_answers,
    exchange_command,
};
pub use error::QueueError;
pub use job::{Job, JobState, Lease};
use keys::QueueKeys;
use lane::{Lane, LaneMetrics};
use library::{Function, LIBRARY};
pub use paging::{DeadPage, GroupPage, GroupStats, PageCursor};
pub use schedules::{Cron, CronError, DueSchedule, Fired, Schedule, ScheduleSpec, job_id};
pub use settings::{RateLimit, Settings, SettingsChange};
pub use stats::{ClassStats, QueueStats};
pub use sweep::{SweepCursors, Swept};
use wake::Waiters;

/// How long a waiting claim sleeps at most before it looks again on its
/// own, in case a wake-up was lost with a dropped subscription.
const RECHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Queues whose lanes this instance keeps before it drops the idle ones.
const KEPT_LANES: usize = 1024;

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

/// What this instance keeps per queue: key names, counters, and the lane
/// of its enqueues, claims and acks.
#[derive(Debug)]
struct QueueLanes {
    keys: Arc<QueueKeys>,
    counters: QueueCounters,
    lane: Arc<Lane<ExchangeBatch>>,
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

    fn lanes(&self, queue: &str) -> Arc<QueueLanes> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lane) = lanes.get(queue) {
            return Arc::clone(lane);
        }
        if lanes.len() >= KEPT_LANES {
            // Held elsewhere only while a request or a call uses it.
            lanes.retain(|_, lane| Arc::strong_count(lane) > 1);
        }
        let keys = Arc::new(QueueKeys::new(&self.config.key_prefix, queue));
        let labels = [("queue", queue.to_owned())];
        let lane = Arc::new(QueueLanes {
            counters: QueueCounters::new(queue),
            lane: Arc::new(Lane::new(
                ExchangeBatch {
                    redis: Arc::clone(&self.redis),
                    keys: Arc::clone(&keys),
                    floor_ppm: (self.config.bulk_floor * 1_000_000.0).round() as u64,
                },
                self.config.redis_timeout,
                LaneMetrics {
                    waiting: metrics::gauge!(telemetry::REQUESTS_WAITING, &labels),
                    calls: metrics::counter!(telemetry::BATCHED_CALLS, &labels),
                },
            )),
            keys,
        });
        lanes.insert(queue.to_owned(), Arc::clone(&lane));
        lane
    }

    /// Adds jobs in order, each idempotent by its id.
    pub async fn enqueue(&self, queue: &str, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let outgoing = jobs
            .iter()
            .map(|job| OutgoingJob {
                id: job.id.clone().unwrap_or_else(record::new_id),
                priority: job.priority,
                delay_ms: job.delay_ms,
                max_attempts: job.max_attempts,
                group: job.group.clone(),
                retain_ms: job.retain_ms,
                body: record::body(&job.task, job.args.get()),
            })
            .collect::<Vec<_>>();
        let ids: Vec<String> = outgoing.iter().map(|job| job.id.clone()).collect();
        self.register(queue).await?;
        let lanes = self.lanes(queue);
        let reply = lanes.lane.enqueue(outgoing).await?;
        let now = reply.now_ms;
        let enqueued: Vec<Enqueued> = jobs
            .into_iter()
            .zip(ids)
            .zip(reply.known)
            .map(|((new, id), known)| match known {
                Some(job) => Enqueued {
                    job,
                    created: false,
                },
                None => {
                    let delay = i64::try_from(new.delay_ms).unwrap_or(i64::MAX);
                    Enqueued {
                        job: Job {
                            id,
                            task: new.task,
                            args: new.args,
                            priority: new.priority,
                            state: if delay > 0 {
                                JobState::Scheduled
                            } else {
                                JobState::Pending
                            },
                            attempts: 0,
                            max_attempts: new.max_attempts,
                            enqueued_at_ms: now,
                            run_at_ms: (delay > 0).then(|| now + delay),
                            lease: None,
                            last_error: None,
                            dead_at_ms: None,
                            completed_at_ms: None,
                            result: None,
                            progress: None,
                            group: new.group,
                            schedule: None,
                        },
                        created: true,
                    }
                }
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
        let lanes = self.lanes(queue);
        let mut acks = std::mem::take(&mut options.acks);
        let entry = |acks| ClaimEntry {
            lease_ms: options.lease_ms,
            max_jobs: options.max_jobs,
            worker: options.worker.clone().unwrap_or_default(),
            acks,
        };
        if options.wait.is_zero() {
            let claimed = lanes.lane.claim(entry(acks)).await?;
            count_claim(&lanes.counters, &claimed);
            return Ok(claimed);
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
            let claimed = match lanes.lane.claim(entry(std::mem::take(&mut acks))).await {
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
            count_claim(&lanes.counters, &claimed);
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

    /// Acknowledges finished jobs, each on its own terms.
    pub async fn ack(&self, queue: &str, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        let lanes = self.lanes(queue);
        let outcomes = lanes.lane.ack(acks).await?;
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
        let mut cmd = LIBRARY.call(Function::Extend, &self.lanes(queue).keys);
        cmd.arg(id)
            .arg(token)
            .arg(lease_ms)
            .arg(progress.map_or("", RawValue::get));
        self.call(&cmd).await
    }

    /// Ends a lease without success.
    pub async fn nack(&self, queue: &str, id: &str, token: &str, nack: &Nack) -> Result<Job> {
        let lanes = self.lanes(queue);
        let mut cmd = LIBRARY.call(Function::Nack, &lanes.keys);
        cmd.arg(id)
            .arg(token)
            .arg(nack.delay_ms)
            .arg(if nack.dead { "1" } else { "0" })
            .arg(nack.priority.map(|p| p.to_string()).unwrap_or_default())
            .arg(if nack.error.is_some() { "1" } else { "0" })
            .arg(nack.error.as_deref().unwrap_or(""));
        let job: Job = self.call(&cmd).await?;
        lanes.counters.nacked.increment(1);
        if job.state == JobState::Dead {
            lanes.counters.dead_lettered.increment(1);
        }
        Ok(job)
    }

    /// One job in any state.
    pub async fn job(&self, queue: &str, id: &str) -> Result<Job> {
        let mut cmd = LIBRARY.call(Function::Job, &self.lanes(queue).keys);
        cmd.arg(id);
        let job: Option<Job> = self.call(&cmd).await?;
        job.ok_or(QueueError::NotFound)
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
        let mut cmd = LIBRARY.call(Function::Watch, &self.lanes(queue).keys);
        cmd.arg(id)
            .arg(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        let mut job: Job = self
            .call::<Option<Job>>(&cmd)
            .await?
            .ok_or(QueueError::NotFound)?;
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
        let mut cmd = LIBRARY.call(Function::Delete, &self.lanes(queue).keys);
        cmd.arg(id).arg(mode);
        self.call::<i64>(&cmd).await.map(drop)
    }

    /// Returns a dead job to pending with its attempts reset.
    pub async fn requeue(&self, queue: &str, id: &str, priority: Option<u8>) -> Result<Job> {
        let mut cmd = LIBRARY.call(Function::Requeue, &self.lanes(queue).keys);
        cmd.arg(id)
            .arg(priority.map(|p| p.to_string()).unwrap_or_default());
        self.call(&cmd).await
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
