//! A queue's counts: by state, per priority class, and its groups, as the
//! `stats` function reads them, summed over a sharded queue's shards.

use std::collections::{BTreeMap, HashSet};

use futures_util::future::try_join_all;

use super::broker::Broker;
use super::error::{QueueError, Result};
use super::shards::QueueShards;
use super::store::Call;
use super::store::keys::{Key, MARK};
use super::store::library::{Function, LIBRARY};

/// A queue's depth by state, and per priority class.
#[derive(Debug, Clone, Default)]
pub struct QueueStats {
    pub pending: u64,
    pub scheduled: u64,
    pub processing: u64,
    pub expired_leases: u64,
    pub dead: u64,
    pub classes: Vec<ClassStats>,
    /// Named groups with jobs waiting or processing.
    pub groups: u64,
    pub paused: bool,
    /// Jobs acked and kept until their retention ends.
    pub completed: u64,
    /// The number of shards the queue is split over.
    pub shards: u32,
    /// Named groups held back by `group_rate_limit` until their next
    /// token (in a sharded queue, once per shard that holds them).
    pub rate_limited_groups: u64,
    /// Jobs waiting for their dependencies.
    pub waiting: u64,
    /// The queue's `max_pending`, fleet-wide, when it has one.
    pub max_pending: Option<u64>,
    /// The bytes of the waiting jobs counted against `max_pending_bytes`.
    pub pending_bytes: u64,
    /// The queue's `max_pending_bytes`, fleet-wide, when it has one.
    pub max_pending_bytes: Option<u64>,
}

/// One priority class of a queue's pending jobs.
#[derive(Debug, Clone, Copy)]
pub struct ClassStats {
    pub priority: u8,
    pub pending: u64,
    pub oldest_age_ms: u64,
}

/// The stats function's reply: counts by state, then
/// `(priority, pending, oldest age ms)` per class, named groups, paused,
/// completed, the shard's `shards` field (-k while a change from k is
/// under way), the groups it holds back by their rate limit, and the jobs
/// waiting for their dependencies.
type RawStats = (
    u64,
    u64,
    u64,
    u64,
    u64,
    Vec<(u8, u64, u64)>,
    u64,
    u8,
    u64,
    i64,
    u64,
    (u64, u64),
);

impl Broker {
    /// A queue's counts, summed over its shards; a queue never used has
    /// zeros. The shards are those the home names when the counts are
    /// read, as the settings show them.
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        self.shards
            .routed(queue, |shards| async move { self.stats_of(&shards).await })
            .await
    }

    async fn stats_of(&self, shards: &QueueShards) -> Result<QueueStats> {
        let parts = try_join_all(shards.shards.iter().map(|shard| async move {
            let cmd = LIBRARY.call(Function::Stats, &shard.keys);
            self.call::<RawStats>(&cmd).await
        }))
        .await?;
        if parts.first().map(|home| home.9) != Some(i64::from(shards.count())) {
            return Err(QueueError::ShardsChanged);
        }
        let mut stats = QueueStats {
            shards: shards.count(),
            ..QueueStats::default()
        };
        let mut classes = BTreeMap::<u8, ClassStats>::new();
        for (
            pending,
            scheduled,
            processing,
            expired,
            dead,
            shard_classes,
            groups,
            paused,
            completed,
            _,
            rate_limited,
            (waiting, bytes),
        ) in parts
        {
            stats.pending += pending;
            stats.scheduled += scheduled;
            stats.processing += processing;
            stats.expired_leases += expired;
            stats.dead += dead;
            stats.groups += groups;
            stats.paused |= paused == 1;
            stats.completed += completed;
            stats.rate_limited_groups += rate_limited;
            stats.waiting += waiting;
            stats.pending_bytes += bytes;
            for (priority, pending, oldest_age_ms) in shard_classes {
                let class = classes.entry(priority).or_insert(ClassStats {
                    priority,
                    pending: 0,
                    oldest_age_ms: 0,
                });
                class.pending += pending;
                class.oldest_age_ms = class.oldest_age_ms.max(oldest_age_ms);
            }
        }
        stats.classes = classes.into_values().collect();
        let mut cmd = Call::safe(redis::cmd("HMGET"));
        cmd.arg(shards.home().keys.key(Key::Meta))
            .arg("max_pending")
            .arg("max_pending_bytes");
        (stats.max_pending, stats.max_pending_bytes) = self.call(&cmd).await?;
        // A group with jobs in several shards counts once.
        if shards.count() > 1 && stats.groups > 0 {
            let names = try_join_all(shards.shards.iter().map(|shard| async move {
                let mut cmd = Call::safe(redis::cmd("ZRANGE"));
                cmd.arg(shard.keys.key(Key::Groups)).arg(0).arg(-1);
                self.call::<Vec<String>>(&cmd).await
            }))
            .await?;
            stats.groups = names
                .into_iter()
                .flatten()
                .filter(|name| name != MARK)
                .collect::<HashSet<_>>()
                .len() as u64;
        }
        Ok(stats)
    }
}
