//! The queue's semantics over Redis, one method per operation on
//! [`Broker`], each one call of a Redis function. No HTTP types in here.
//!
//! - `jobs`: the job operations (enqueue, claim, ack, extend, nack, read,
//!   wait, delete, requeue); `settings`, `stats`, `paging` (the DLQ's and
//!   the groups' pages), `sweep` (one sweep of a queue) and `schedules`
//!   the others, by subject. This module keeps the `Broker` and the
//!   registry of queues.
//! - `shards`: which shards a queue has, routing each operation to its
//!   shards and merging their answers.
//! - `exchange`: the concurrent enqueues, claims and acks of a queue sent
//!   together in one call (`lane`: group commit) and the call's layout
//!   (`wire`).
//! - `store`: the Redis side: connections, the function library, key
//!   names, a job's stored form.
//! - `job`: a job decoded; `error`: what can go wrong; `wake`: wake-ups
//!   between instances; `counters`: this instance's counters per queue.

mod counters;
mod deps;
mod error;
mod exchange;
mod job;
mod jobs;
mod paging;
mod registry;
mod schedules;
mod settings;
mod shards;
mod stats;
pub mod store;
mod sweep;
pub(crate) mod wake;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{self, FromRedisValue};

pub use deps::After;
pub use error::{QueueError, Result};
pub use exchange::{
    Ack, AckOutcome, ClaimEntry, Claimed, Dedup, EnqueueReply, Exchange, Exchanged, Expiry, Held,
    Known, OutgoingJob, Route, exchange_answers, exchange_command,
};
pub use job::{Dependencies, Dependency, Job, JobState, Lease, Outcome, is_job_id};
pub use jobs::{ClaimOptions, Enqueued, MAX_RETAIN_MS, Nack, NewJob};
pub use paging::{DeadPage, GroupPage, GroupStats, PageCursor};
pub use schedules::{Cron, CronError, Debt, DueSchedule, Fired, Schedule, ScheduleSpec, job_id};
pub use settings::{Refusal, Settings, SettingsChange, table as setting_table};
use shards::Shards;
pub use stats::{ClassStats, QueueStats};
use store::library::{Function, LIBRARY};
use store::{Call, Redis, bounded_by};
pub use store::{RedisPool, RedisSettings};
pub use sweep::{SweepCursors, Swept};
use wake::Waiters;

/// Settings of the queue layer.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub key_prefix: String,
    /// Bound on every Redis call.
    pub redis_timeout: Duration,
    /// Share of handed-out jobs that go to the least urgent class.
    pub bulk_floor: f64,
    /// Long polls and waits for a job this instance keeps at once.
    pub max_waiters: u64,
    /// Queues that may exist at once.
    pub max_queues: u64,
    /// Schedules a queue may have.
    pub max_schedules: u64,
}

/// prioq's queues in one Redis.
#[derive(Debug)]
pub struct Broker {
    redis: Arc<Redis>,
    config: BrokerConfig,
    waiters: Arc<Waiters>,
    /// The queues' shards as this instance knows them.
    shards: Shards,
    /// Queues this instance has put in the registry.
    registered: Mutex<HashSet<String>>,
    /// Long polls and waits for a job under way.
    waiting: Arc<std::sync::atomic::AtomicU64>,
    /// The lanes' notices of outboxes to send, until the courier takes
    /// them (see `deliver_outboxes`).
    notices: Mutex<Option<tokio::sync::mpsc::Receiver<deps::Notice>>>,
}

impl Broker {
    pub fn new(pool: RedisPool, config: BrokerConfig) -> Self {
        let redis = Arc::new(Redis::new(pool));
        let floor_ppm = (config.bulk_floor * 1_000_000.0).round() as u64;
        let (courier, notices) = deps::notices();
        Self {
            shards: Shards::new(
                Arc::clone(&redis),
                config.key_prefix.clone(),
                config.redis_timeout,
                floor_ppm,
                courier,
            ),
            redis,
            config,
            waiters: Arc::default(),
            registered: Mutex::default(),
            waiting: Arc::default(),
            notices: Mutex::new(Some(notices)),
        }
    }

    pub(crate) fn waiters(&self) -> Arc<Waiters> {
        Arc::clone(&self.waiters)
    }

    /// The number of shards the queue is split over, as this instance
    /// knows it.
    pub async fn shards(&self, queue: &str) -> Result<u32> {
        Ok(self.shards.of(queue).await?.count())
    }

    /// The number of shards the queue is split over, read again from its
    /// home.
    pub async fn reread_shards(&self, queue: &str) -> Result<u32> {
        Ok(self.shards.reroute(queue).await?.count())
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

    /// What Redis does when its memory is full, when that loses jobs: an
    /// evicting `maxmemory-policy` drops keys, a queue's among them. `None`
    /// for `noeviction`, and where Redis does not tell (a managed Redis
    /// may refuse `CONFIG`).
    pub async fn memory_warning(&self) -> Option<String> {
        let mut cmd = Call::safe(redis::cmd("CONFIG"));
        cmd.arg("GET").arg("maxmemory-policy");
        let reply: Vec<String> = self.call(&cmd).await.ok()?;
        let policy = reply.get(1)?;
        (policy != "noeviction").then(|| {
            format!(
                "Redis evicts keys when its memory is full (maxmemory-policy {policy}): jobs can be lost; set maxmemory-policy noeviction"
            )
        })
    }

    /// One call, bounded by the Redis timeout.
    async fn call<T: FromRedisValue>(&self, cmd: &Call) -> Result<T> {
        bounded_by(self.config.redis_timeout, self.redis.query(cmd)).await
    }
}
