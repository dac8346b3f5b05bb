//! One sweep of a queue (the `sweep` function): expired leases taken back,
//! waiting jobs whose expiry came ended, due jobs promoted, retention ended, finish tags and groups tidied, and
//! the due schedules and the fires owed listed. The sweeper
//! (`crate::sweeper`) runs it on every shard of every queue, on every
//! instance.

use super::broker::Broker;
use super::error::{QueueError, Result};
use super::schedules::{Debt, DueSchedule};
use super::store::library::{Function, LIBRARY};

/// What one sweep of a queue did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Expired leases taken back.
    pub reclaimed: u64,
    /// Of those, jobs whose attempts were used up: dead-lettered.
    pub dead: u64,
    /// Waiting jobs whose expiry came, dead-lettered or dropped.
    pub expired: u64,
    /// Due scheduled jobs made pending.
    pub promoted: u64,
    /// Completed jobs whose retention ended, deleted.
    pub purged: u64,
    /// Where the next sweep goes on looking at the queue's tags and groups.
    pub cursors: SweepCursors,
    /// Redis's time of the sweep.
    pub now_ms: i64,
    /// The queue's schedules that are due, for [`Broker::fire`].
    pub due: Vec<DueSchedule>,
    /// The number of shards the queue is split over, as the swept shard
    /// records it.
    pub shards: u32,
    /// Fires of a sharded queue owed for a while (their instance stopped
    /// short), for [`Broker::pay`].
    pub owed: Vec<Debt>,
    /// Ended jobs whose dependants elsewhere are still to be told, for
    /// [`Broker::send_outbox`].
    pub outboxed: u64,
}

/// The sweep function's reply.
type RawSwept = (
    u64,
    u64,
    u64,
    String,
    String,
    u64,
    i64,
    Vec<String>,
    u32,
    Vec<String>,
    u64,
    (u64, u64),
);

/// Where a sweep of a queue's finish tags and groups starts: where the
/// last one stopped, or the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepCursors {
    pub tags: String,
    pub groups: String,
}

impl Default for SweepCursors {
    fn default() -> Self {
        Self {
            tags: "0".into(),
            groups: "0".into(),
        }
    }
}

impl Broker {
    /// Takes back up to `batch` expired leases, ends up to `batch` waiting
    /// jobs whose expiry came, promotes up to `batch` due
    /// scheduled jobs, and tidies up to `batch` finish tags and groups
    /// from `cursors` on, in one call on shard `shard` of the queue (a
    /// shard it no longer has is left alone).
    pub async fn sweep(
        &self,
        queue: &str,
        shard: u32,
        batch: u32,
        cursors: &SweepCursors,
    ) -> Result<Swept> {
        let known = self.shards.of(queue).await?;
        let home = shard == 0;
        let Some(shard) = known.shards.get(shard as usize) else {
            return Ok(Swept::default());
        };
        // Longer than a fire's two calls can take: its instance is gone.
        let owed_for = 3 * self.config.redis_timeout.as_millis();
        let mut cmd = LIBRARY.call(Function::Sweep, &shard.keys);
        cmd.arg(batch)
            .arg(&cursors.tags)
            .arg(&cursors.groups)
            .arg(owed_for.to_string());
        let (
            reclaimed,
            dead,
            promoted,
            tags,
            groups,
            purged,
            now_ms,
            due,
            shards,
            owed,
            expired,
            (outboxed, pushes),
        ): RawSwept = self.call(&cmd).await?;
        // The home tells whether the queue has a push target: the pushers
        // learn of targets set through other instances from the sweeps.
        if home {
            self.note_push_target(queue, pushes == 1);
        }
        known.counters.leases_expired.increment(reclaimed);
        known.counters.dead_lettered.increment(dead);
        known.counters.expired.increment(expired);
        let due = due
            .chunks(3)
            .map(|item| match item {
                [name, due_ms, spec] => Ok(DueSchedule {
                    name: name.clone(),
                    due_ms: due_ms
                        .parse::<f64>()
                        .map(|ms| ms as i64)
                        .map_err(|e| QueueError::Unknown(e.into()))?,
                    spec: spec.clone(),
                }),
                _ => Err(QueueError::Unknown(anyhow::anyhow!(
                    "the sweep function listed a schedule short"
                ))),
            })
            .collect::<Result<_>>()?;
        let owed = owed
            .chunks_exact(2)
            .map(|item| Debt {
                job_id: item[0].clone(),
                spec: item[1].clone(),
            })
            .collect();
        Ok(Swept {
            reclaimed,
            dead,
            expired,
            promoted,
            purged,
            cursors: SweepCursors { tags, groups },
            now_ms,
            due,
            shards,
            owed,
            outboxed,
        })
    }
}
