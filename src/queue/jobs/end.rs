//! Ending a job that no worker holds, or asking one that runs to stop:
//! delete, cancel; and a dead job's way back, requeue.

use super::tell_at_once;
use crate::queue::broker::Broker;
use crate::queue::error::Result;
use crate::queue::job::Job;
use crate::queue::store::library::{Function, LIBRARY};

impl Broker {
    /// Deletes a pending, scheduled or dead job.
    pub async fn delete(&self, queue: &str, id: &str) -> Result<()> {
        self.delete_as(queue, id, "any").await
    }

    /// Deletes a dead job.
    pub async fn delete_dead(&self, queue: &str, id: &str) -> Result<()> {
        self.delete_as(queue, id, "dead").await
    }

    async fn delete_as(&self, queue: &str, id: &str, mode: &str) -> Result<()> {
        self.shards
            .routed(queue, |shards| async move {
                let shard = shards.of(id);
                let mut cmd = LIBRARY.call(Function::Delete, &shard.keys);
                cmd.arg(id).arg(mode);
                if self.call::<i64>(&cmd).await? == OUTBOXED {
                    shard.courier.deliver();
                }
                Ok(())
            })
            .await
    }

    /// Cancels a job: a waiting one ends `cancelled` at once, a processing
    /// one is told to stop (it ends `cancelled` with its lease); answers
    /// the job after.
    pub async fn cancel(&self, queue: &str, id: &str, reason: Option<&str>) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Cancel, &shards.of(id).keys);
                cmd.arg(id).arg(reason.unwrap_or(""));
                let job: Job = self.call(&cmd).await?;
                shards.counters.cancelled.increment(1);
                tell_at_once(&shards, &job);
                Ok(job)
            })
            .await
    }

    /// Returns a dead job to pending with its attempts reset.
    pub async fn requeue(&self, queue: &str, id: &str, priority: Option<u8>) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Requeue, &shards.of(id).keys);
                cmd.arg(id)
                    .arg(priority.map(|p| p.to_string()).unwrap_or_default());
                self.call(&cmd).await
            })
            .await
    }
}

/// What `delete` answers when the job's dependants elsewhere are still to
/// be told (its outbox holds its end).
const OUTBOXED: i64 = 2;
