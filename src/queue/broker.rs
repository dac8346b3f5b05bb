//! The `Broker`: prioq's queues in one Redis, as one instance reaches
//! them. The operations are its methods, by subject, in the modules beside
//! this one.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{self, FromRedisValue};

use super::courier::{self, Notice};
use super::error::Result;
use super::shards::Shards;
use super::store::library::{Function, LIBRARY};
use super::store::{Call, Redis, RedisPool, bounded_by};
use super::wake::Waiters;

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
    pub(super) redis: Arc<Redis>,
    pub(super) config: BrokerConfig,
    pub(super) waiters: Arc<Waiters>,
    /// The queues' shards as this instance knows them.
    pub(super) shards: Shards,
    /// Queues this instance has put in the registry.
    pub(super) registered: Mutex<HashSet<String>>,
    /// Long polls and waits for a job under way.
    pub(super) waiting: Arc<std::sync::atomic::AtomicU64>,
    /// The lanes' notices of outboxes to send, until the courier takes
    /// them (see `deliver_outboxes`).
    pub(super) notices: Mutex<Option<tokio::sync::mpsc::Receiver<Notice>>>,
    /// The queues with a push target, as this instance last learned
    /// (setting or deleting one here, or a sweep of the queue's home), and
    /// the pusher's wake-up when they change.
    pub(super) pushed: Mutex<BTreeSet<String>>,
    pub(super) push_changed: Arc<tokio::sync::Notify>,
}

impl Broker {
    pub fn new(pool: RedisPool, config: BrokerConfig) -> Self {
        let redis = Arc::new(Redis::new(pool));
        let floor_ppm = (config.bulk_floor * 1_000_000.0).round() as u64;
        let (courier, notices) = courier::notices();
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
            pushed: Mutex::default(),
            push_changed: Arc::default(),
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
    pub(super) async fn call<T: FromRedisValue>(&self, cmd: &Call) -> Result<T> {
        bounded_by(self.config.redis_timeout, self.redis.query(cmd)).await
    }
}
