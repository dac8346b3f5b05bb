//! The list of queues: the sweepers sweep the queues listed, and
//! `GET /v1/queues` lists them. A queue is listed before its first job or
//! schedule is written, and each of its shards carries its listing
//! (`registered` in `meta`), so a function writing to a queue that is not
//! listed (new, or deleted meanwhile) refuses before writing and prioq
//! lists it and writes again. Listing is bounded (`max_queues`). Deleting
//! a queue seals its shards, takes it off the list and drops its keys.

use std::collections::HashSet;
use std::sync::{MutexGuard, PoisonError};

use futures_util::future::try_join_all;

use super::broker::Broker;
use super::error::{QueueError, Result};
use super::store::Call;
use super::store::keys::{self, Key};
use super::store::library::{Function, LIBRARY};
use super::store::record::new_token;

/// How often a registration whose listing a deletion took away tries again.
const LISTING_TRIES: usize = 5;

impl Broker {
    /// Puts the queue on the list, once per queue and instance, or again
    /// when `again` (a write found it unlisted). Each shard's listing is a
    /// token of this registration first, the queue listed, then the
    /// listings made good while they still hold the token: a deletion that
    /// ran meanwhile leaves the listings gone, and the next write lists the
    /// queue again. So a queue that takes writes is always on the list.
    pub(super) async fn register(&self, queue: &str, again: bool) -> Result<()> {
        if !again && self.is_registered(queue) {
            return Ok(());
        }
        let shards = self.shards.of(queue).await?;
        // A registration racing this one joins it: both list the queue and
        // confirm the same listing.
        for _ in 0..LISTING_TRIES {
            let token = new_token();
            let begun = try_join_all(shards.shards.iter().map(|shard| {
                let mut cmd = LIBRARY.call(Function::Listing, &shard.keys);
                cmd.arg("begin").arg(&token);
                async move { self.call::<String>(&cmd).await }
            }))
            .await?;
            if begun.iter().all(|listing| listing == "1") {
                self.registered_queues().insert(queue.to_owned());
                return Ok(());
            }
            let listings = |mode: &'static str| {
                try_join_all(shards.shards.iter().zip(&begun).map(move |(shard, token)| {
                    let mut cmd = LIBRARY.call(Function::Listing, &shard.keys);
                    cmd.arg(mode).arg(token);
                    async move { self.call::<i64>(&cmd).await }
                }))
            };
            let mut cmd = LIBRARY.call(Function::Register, &shards.home().keys);
            cmd.arg(queue).arg(self.config.max_queues);
            match self.call::<i64>(&cmd).await {
                Ok(_) => {}
                Err(QueueError::LimitReached(_)) => {
                    listings("abandon").await?;
                    return Err(QueueError::LimitReached("queues (PRIOQ_MAX_QUEUES)"));
                }
                Err(error) => return Err(error),
            }
            let confirmed = listings("confirm").await?;
            if !confirmed.contains(&0) {
                self.registered_queues().insert(queue.to_owned());
                return Ok(());
            }
        }
        Err(QueueError::Unregistered)
    }

    /// Runs `write`, which refuses (`Unregistered`) when the queue is not
    /// listed: then lists it and runs it once more.
    pub(super) async fn listed<T, F, Fut>(&self, queue: &str, write: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.register(queue, false).await?;
        match write().await {
            Err(QueueError::Unregistered) => {
                self.register(queue, true).await?;
                write().await
            }
            other => other,
        }
    }

    /// Whether this instance has listed the queue.
    pub(super) fn is_registered(&self, queue: &str) -> bool {
        self.registered_queues().contains(queue)
    }

    fn registered_queues(&self) -> MutexGuard<'_, HashSet<String>> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The queues on the list, sorted by name.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let mut cmd = Call::safe(redis::cmd("SMEMBERS"));
        cmd.arg(keys::registry(&self.config.key_prefix));
        let mut queues: Vec<String> = self.call(&cmd).await?;
        queues.sort_unstable();
        Ok(queues)
    }

    /// Deletes a queue: its jobs (only with `purge`; else `HoldsJobs` while
    /// it holds any), settings, schedules and every key, and takes it off
    /// the list. Every shard is sealed first, so no job or schedule is
    /// written meanwhile (such writes answer `Deleting`); a deletion cut
    /// short leaves the seals, and the same request finishes it. `NotFound`
    /// for a queue neither listed nor holding anything.
    pub async fn delete_queue(&self, queue: &str, purge: bool) -> Result<()> {
        let shards = self.shards.reroute(queue).await?;
        let step = |mode: &'static str| {
            try_join_all(shards.shards.iter().map(|shard| {
                let mut cmd = LIBRARY.call(Function::Drop, &shard.keys);
                cmd.arg(mode);
                async move { self.call::<redis::Value>(&cmd).await }
            }))
        };
        let sealed: Vec<(u64, u64)> = step("seal")
            .await?
            .into_iter()
            .map(|reply| redis::from_redis_value(reply).map_err(QueueError::from))
            .collect::<Result<_>>()?;
        let mut member = Call::safe(redis::cmd("SISMEMBER"));
        member.arg(shards.home().keys.key(Key::Queues)).arg(queue);
        let listed: bool = self.call(&member).await?;
        if !listed && sealed.iter().all(|(_, exists)| *exists == 0) {
            return Err(QueueError::NotFound);
        }
        if !purge && sealed.iter().any(|(jobs, _)| *jobs > 0) {
            step("unseal").await?;
            return Err(QueueError::HoldsJobs);
        }
        if purge {
            self.tell_purged(queue, &shards).await?;
        }
        let mut unlist = Call::safe(redis::cmd("SREM"));
        unlist.arg(shards.home().keys.key(Key::Queues)).arg(queue);
        self.call::<()>(&unlist).await?;
        step("drop").await?;
        self.registered_queues().remove(queue);
        self.shards.forget(queue);
        Ok(())
    }
}
