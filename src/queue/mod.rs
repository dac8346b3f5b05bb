//! The queue's semantics over Redis: one function per operation, each one
//! script call (one round trip). No HTTP types in here.

mod backend;
mod job;
pub(crate) mod keys;
mod scripts;
pub(crate) mod wake;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_redis::redis::{self, FromRedisValue, Script, ScriptInvocation};

use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::telemetry;
use backend::RedisConnection;
pub use backend::{RedisPool, RedisSettings};
use job::Body;
pub use job::{Job, JobState, Lease};
use keys::QueueKeys;
use wake::Waiters;

/// How long a waiting claim sleeps at most before it looks again on its
/// own, in case a wake-up was lost with a dropped subscription.
const RECHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Due scheduled jobs a claim promotes before it takes its own.
const CLAIM_PROMOTE_BATCH: u32 = 100;

/// What went wrong with a queue operation.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("no such job")]
    NotFound,
    #[error("the lease token is not the job's current lease")]
    LeaseLost,
    #[error("the job's state does not allow this operation")]
    Conflict,
    /// 2^44 arrivals since the queue was last empty: nothing was written.
    #[error("the queue's arrival counter is used up; it restarts once the queue is drained")]
    SequenceExhausted,
    /// Redis could not be reached: the operation did not run.
    #[error("Redis is unavailable")]
    Unavailable(#[source] anyhow::Error),
    /// Redis failed or did not answer in time after the operation was sent:
    /// it may or may not have taken effect.
    #[error("Redis did not complete the operation")]
    Unknown(#[source] anyhow::Error),
}

impl From<redis::RedisError> for QueueError {
    fn from(error: redis::RedisError) -> Self {
        match error.code() {
            Some("NOT_FOUND") => Self::NotFound,
            Some("LEASE_LOST") => Self::LeaseLost,
            Some("CONFLICT") => Self::Conflict,
            Some("SEQUENCE_EXHAUSTED") => Self::SequenceExhausted,
            // Nothing was sent on a connection that could not be made.
            _ if error.is_connection_refusal() => Self::Unavailable(error.into()),
            _ => Self::Unknown(error.into()),
        }
    }
}

pub type Result<T, E = QueueError> = std::result::Result<T, E>;

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

/// A queue's depth by state, and per priority class.
#[derive(Debug, Clone, Default)]
pub struct QueueStats {
    pub pending: u64,
    pub scheduled: u64,
    pub processing: u64,
    pub expired_leases: u64,
    pub dead: u64,
    pub classes: Vec<ClassStats>,
}

/// One priority class of a queue's pending jobs.
#[derive(Debug, Clone, Copy)]
pub struct ClassStats {
    pub priority: u8,
    pub pending: u64,
    pub oldest_age_ms: u64,
}

/// The stats script's reply: counts by state, then
/// `(priority, pending, oldest age ms)` per class.
type RawStats = (u64, u64, u64, u64, u64, Vec<(u8, u64, u64)>);

/// One page of dead jobs.
#[derive(Debug)]
pub struct DeadPage {
    pub jobs: Vec<Job>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
    pub total: u64,
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

/// prioq's queues in one Redis.
#[derive(Debug)]
pub struct Broker {
    pool: RedisPool,
    config: BrokerConfig,
    waiters: Arc<Waiters>,
    /// Queues this instance has put in the registry.
    registered: Mutex<HashSet<String>>,
}

impl Broker {
    pub fn new(pool: RedisPool, config: BrokerConfig) -> Self {
        Self {
            pool,
            config,
            waiters: Arc::default(),
            registered: Mutex::default(),
        }
    }

    pub(crate) fn waiters(&self) -> Arc<Waiters> {
        Arc::clone(&self.waiters)
    }

    /// Adds jobs in order, each idempotent by its id.
    pub async fn enqueue(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let mut bodies = Vec::with_capacity(jobs.len());
        for job in jobs {
            let body = Body {
                task: job.task.as_str().into(),
                args: &job.args,
            };
            bodies.push(serde_json::to_string(&body).map_err(|e| QueueError::Unknown(e.into()))?);
        }
        self.register(queue).await?;
        let replies: Vec<(i64, Job)> = self
            .call(&scripts::ENQUEUE, queue, |call| {
                call.arg(jobs.len());
                for (job, body) in jobs.iter().zip(&bodies) {
                    let id = job
                        .id
                        .clone()
                        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
                    call.arg(id)
                        .arg(job.priority)
                        .arg(job.delay_ms)
                        .arg(job.max_attempts)
                        .arg(body);
                }
            })
            .await?;
        let created = replies.iter().filter(|(created, _)| *created == 1).count();
        metrics::counter!(telemetry::JOBS_ENQUEUED, "queue" => queue.to_owned())
            .increment(created as u64);
        Ok(replies
            .into_iter()
            .map(|(created, job)| Enqueued {
                job,
                created: created == 1,
            })
            .collect())
    }

    /// Leases up to `max_jobs` jobs; with a wait, answers as soon as one is
    /// claimable, when the wait is over, or at `shutdown` (with what it has).
    pub async fn claim(
        &self,
        queue: &str,
        options: &ClaimOptions,
        shutdown: &CancellationToken,
    ) -> Result<Vec<Job>> {
        if options.wait.is_zero() {
            return self.claim_now(queue, options).await;
        }
        let deadline = Instant::now() + options.wait;
        let signal = self.waiters.signal(queue);
        loop {
            // Listen before looking, so a job arriving in between still wakes us.
            let woken = signal.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let jobs = self.claim_now(queue, options).await?;
            if !jobs.is_empty() || Instant::now() >= deadline || shutdown.is_cancelled() {
                return Ok(jobs);
            }
            let recheck = deadline.min(Instant::now() + RECHECK_INTERVAL);
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep_until(recheck) => {}
                () = shutdown.cancelled() => {}
            }
        }
    }

    async fn claim_now(&self, queue: &str, options: &ClaimOptions) -> Result<Vec<Job>> {
        let token_prefix = uuid::Uuid::new_v4().simple().to_string();
        let floor_ppm = (self.config.bulk_floor * 1_000_000.0).round() as u64;
        let jobs: Vec<Job> = self
            .call(&scripts::CLAIM, queue, |call| {
                call.arg(options.lease_ms)
                    .arg(options.max_jobs)
                    .arg(options.worker.as_deref().unwrap_or(""))
                    .arg(&token_prefix)
                    .arg(floor_ppm)
                    .arg(CLAIM_PROMOTE_BATCH);
            })
            .await?;
        metrics::counter!(telemetry::JOBS_CLAIMED, "queue" => queue.to_owned())
            .increment(jobs.len() as u64);
        Ok(jobs)
    }

    /// Acknowledges finished jobs, each on its own terms.
    pub async fn ack(&self, queue: &str, leases: &[(&str, &str)]) -> Result<Vec<AckOutcome>> {
        let replies: Vec<String> = self
            .call(&scripts::ACK, queue, |call| {
                for (id, token) in leases {
                    call.arg(*id).arg(*token);
                }
            })
            .await?;
        let outcomes: Vec<AckOutcome> = replies
            .iter()
            .map(|reply| match reply.as_str() {
                "OK" => AckOutcome::Acked,
                "LEASE_LOST" => AckOutcome::LeaseLost,
                _ => AckOutcome::NotFound,
            })
            .collect();
        let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count();
        metrics::counter!(telemetry::JOBS_ACKED, "queue" => queue.to_owned())
            .increment(acked as u64);
        Ok(outcomes)
    }

    /// Moves a lease's deadline to `lease_ms` from now.
    pub async fn extend(&self, queue: &str, id: &str, token: &str, lease_ms: u64) -> Result<Job> {
        self.call(&scripts::EXTEND, queue, |call| {
            call.arg(id).arg(token).arg(lease_ms);
        })
        .await
    }

    /// Ends a lease without success.
    pub async fn nack(&self, queue: &str, id: &str, token: &str, nack: &Nack) -> Result<Job> {
        let job: Job = self
            .call(&scripts::NACK, queue, |call| {
                call.arg(id)
                    .arg(token)
                    .arg(nack.delay_ms)
                    .arg(if nack.dead { "1" } else { "0" })
                    .arg(nack.priority.map(|p| p.to_string()).unwrap_or_default())
                    .arg(if nack.error.is_some() { "1" } else { "0" })
                    .arg(nack.error.as_deref().unwrap_or(""));
            })
            .await?;
        metrics::counter!(telemetry::JOBS_NACKED, "queue" => queue.to_owned()).increment(1);
        if job.state == JobState::Dead {
            metrics::counter!(telemetry::JOBS_DEAD_LETTERED, "queue" => queue.to_owned())
                .increment(1);
        }
        Ok(job)
    }

    /// One job in any state.
    pub async fn job(&self, queue: &str, id: &str) -> Result<Job> {
        let job: Option<Job> = self
            .call(&scripts::JOB, queue, |call| {
                call.arg(id);
            })
            .await?;
        job.ok_or(QueueError::NotFound)
    }

    /// Deletes a pending, scheduled or dead job.
    pub async fn delete(&self, queue: &str, id: &str) -> Result<()> {
        self.call(&scripts::DELETE, queue, |call| {
            call.arg(id).arg("any");
        })
        .await
    }

    /// Deletes a dead job.
    pub async fn delete_dead(&self, queue: &str, id: &str) -> Result<()> {
        self.call(&scripts::DELETE, queue, |call| {
            call.arg(id).arg("dead");
        })
        .await
    }

    /// Returns a dead job to pending with its attempts reset.
    pub async fn requeue(&self, queue: &str, id: &str, priority: Option<u8>) -> Result<Job> {
        self.call(&scripts::REQUEUE, queue, |call| {
            call.arg(id)
                .arg(priority.map(|p| p.to_string()).unwrap_or_default());
        })
        .await
    }

    /// One page of the DLQ, most recently dead first. `cursor` is a previous
    /// page's `next_cursor`; `None` when it is not one.
    pub async fn dead_jobs(
        &self,
        queue: &str,
        limit: u32,
        cursor: Option<&DeadCursor>,
    ) -> Result<DeadPage> {
        let (total, mut jobs): (u64, Vec<Job>) = self
            .call(&scripts::DEAD_JOBS, queue, |call| {
                call.arg(limit);
                match cursor {
                    Some(cursor) => call.arg(cursor.dead_at_ms).arg(&cursor.id),
                    None => call.arg("").arg(""),
                };
            })
            .await?;
        let more = jobs.len() > limit as usize;
        jobs.truncate(limit as usize);
        let next_cursor = jobs.last().filter(|_| more).and_then(|job| {
            Some(
                DeadCursor {
                    dead_at_ms: job.dead_at_ms?,
                    id: job.id.clone(),
                }
                .to_string(),
            )
        });
        Ok(DeadPage {
            jobs,
            next_cursor,
            total,
        })
    }

    /// A queue's counts; a queue never used has zeros.
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let (pending, scheduled, processing, expired_leases, dead, classes): RawStats =
            self.call(&scripts::STATS, queue, |_| {}).await?;
        Ok(QueueStats {
            pending,
            scheduled,
            processing,
            expired_leases,
            dead,
            classes: classes
                .into_iter()
                .map(|(priority, pending, oldest_age_ms)| ClassStats {
                    priority,
                    pending,
                    oldest_age_ms,
                })
                .collect(),
        })
    }

    /// Puts the queue in the registry before its first job exists, so the
    /// sweeper always knows it; once per queue and instance.
    async fn register(&self, queue: &str) -> Result<()> {
        if self.registered_queues().contains(queue) {
            return Ok(());
        }
        let registry = keys::registry(&self.config.key_prefix);
        self.bounded(async {
            let mut conn = self.connection().await?;
            Ok(redis::cmd("SADD")
                .arg(&registry)
                .arg(queue)
                .query_async::<()>(&mut conn)
                .await?)
        })
        .await?;
        self.registered_queues().insert(queue.to_owned());
        Ok(())
    }

    fn registered_queues(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Every queue that has ever had a job, sorted by name. Queues this
    /// instance registered but the registry lacks (Redis lost it) are put
    /// back.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let registry = keys::registry(&self.config.key_prefix);
        let mut queues: Vec<String> = self
            .bounded(async {
                let mut conn = self.connection().await?;
                let mut queues: Vec<String> = redis::cmd("SMEMBERS")
                    .arg(&registry)
                    .query_async(&mut conn)
                    .await?;
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
                    redis::cmd("SADD")
                        .arg(&registry)
                        .arg(&missing)
                        .query_async::<()>(&mut conn)
                        .await?;
                    queues.extend(missing);
                }
                Ok(queues)
            })
            .await?;
        queues.sort_unstable();
        Ok(queues)
    }

    /// Takes back up to `batch` expired leases: `(taken back, dead-lettered)`.
    pub async fn reclaim(&self, queue: &str, batch: u32) -> Result<(u64, u64)> {
        let (expired, dead): (u64, u64) = self
            .call(&scripts::RECLAIM, queue, |call| {
                call.arg(batch);
            })
            .await?;
        metrics::counter!(telemetry::LEASES_EXPIRED, "queue" => queue.to_owned())
            .increment(expired);
        metrics::counter!(telemetry::JOBS_DEAD_LETTERED, "queue" => queue.to_owned())
            .increment(dead);
        Ok((expired, dead))
    }

    /// Moves up to `batch` due scheduled jobs to pending.
    pub async fn promote(&self, queue: &str, batch: u32) -> Result<u64> {
        self.call(&scripts::PROMOTE, queue, |call| {
            call.arg(batch);
        })
        .await
    }

    /// Whether Redis runs scripts, within a second at most. A script, not
    /// PING: a Redis that pauses writes (`CLIENT PAUSE WRITE`) answers PING
    /// but holds every queue script back.
    pub async fn ping(&self) -> Result<()> {
        let limit = self.config.redis_timeout.min(Duration::from_secs(1));
        bounded_by(limit, async {
            let mut conn = self.connection().await?;
            Ok(scripts::READY
                .invoke_async::<_, i64>(&mut conn)
                .await
                .map(drop)?)
        })
        .await
    }

    async fn call<T: FromRedisValue>(
        &self,
        script: &Script,
        queue: &str,
        args: impl FnOnce(&mut ScriptInvocation<'_>),
    ) -> Result<T> {
        self.bounded(async {
            let mut conn = self.connection().await?;
            self.invoke(script, queue, &mut conn, args).await
        })
        .await
    }

    async fn invoke<T: FromRedisValue>(
        &self,
        script: &Script,
        queue: &str,
        conn: &mut RedisConnection,
        args: impl FnOnce(&mut ScriptInvocation<'_>),
    ) -> Result<T> {
        let keys = QueueKeys::new(&self.config.key_prefix, queue);
        let mut invocation = script.prepare_invoke();
        for key in keys.all() {
            invocation.key(key);
        }
        invocation.arg(keys.wake_channel());
        args(&mut invocation);
        Ok(invocation.invoke_async(conn).await?)
    }

    async fn connection(&self) -> Result<RedisConnection> {
        self.pool.get().await.map_err(QueueError::Unavailable)
    }

    async fn bounded<T>(&self, operation: impl Future<Output = Result<T>>) -> Result<T> {
        bounded_by(self.config.redis_timeout, operation).await
    }
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

/// Where a DLQ page starts: just after this job, in the DLQ's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadCursor {
    pub dead_at_ms: i64,
    pub id: String,
}

impl std::fmt::Display for DeadCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.dead_at_ms, self.id)
    }
}

impl std::str::FromStr for DeadCursor {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (dead_at_ms, id) = s.split_once('.').ok_or(())?;
        Ok(Self {
            dead_at_ms: dead_at_ms.parse().map_err(|_| ())?,
            id: id.to_owned(),
        })
    }
}
