//! A lease's end or extension by the worker that holds it: ack, extend
//! (with progress), nack.

use std::sync::Arc;

use serde_json::value::RawValue;

use super::tell_at_once;
use crate::queue::broker::Broker;
use crate::queue::error::Result;
use crate::queue::exchange::{Ack, AckOutcome};
use crate::queue::job::{Job, JobState};
use crate::queue::store::library::{Function, LIBRARY};

/// How a worker gives a job back.
#[derive(Debug, Clone, Default)]
pub struct Nack {
    /// How long the job stays scheduled; `None` for its backoff (none: 0).
    pub delay_ms: Option<u64>,
    pub error: Option<String>,
    pub dead: bool,
    pub priority: Option<u8>,
}

impl Broker {
    /// Acknowledges finished jobs, each on its own terms.
    pub async fn ack(&self, queue: &str, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        let acks = &Arc::new(acks);
        let (shards, outcomes) = self
            // Acks go in `exchange` calls, which refuse a stale count of
            // shards: a job not found is not in another shard.
            .shards
            .routed(queue, |shards| async move {
                let outcomes = shards.ack(acks).await?;
                Ok((shards, outcomes))
            })
            .await?;
        let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count();
        shards.counters.acked.increment(acked as u64);
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
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Extend, &shards.of(id).keys);
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
        let (shards, job) = self
            .shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Nack, &shards.of(id).keys);
                cmd.arg(id)
                    .arg(token)
                    .arg(nack.delay_ms.map(|ms| ms.to_string()).unwrap_or_default())
                    .arg(if nack.dead { "1" } else { "0" })
                    .arg(nack.priority.map(|p| p.to_string()).unwrap_or_default())
                    .arg(if nack.error.is_some() { "1" } else { "0" })
                    .arg(nack.error.as_deref().unwrap_or(""));
                let job: Job = self.call(&cmd).await?;
                Ok((shards, job))
            })
            .await?;
        shards.counters.nacked.increment(1);
        if job.state == JobState::Dead {
            shards.counters.dead_lettered.increment(1);
        }
        tell_at_once(&shards, &job);
        Ok(job)
    }
}
