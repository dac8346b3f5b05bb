//! A queue's push target: where prioq's instances deliver its jobs by
//! HTTP (the pusher, `crate::pusher`, does the delivering), its health,
//! and the slots deliveries hold so that the target's concurrency holds
//! across every instance. Kept in the queue's home by the `push` function.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use tokio::sync::Notify;

use super::broker::Broker;
use super::error::{QueueError, Result};
use super::store::Call;
use super::store::keys::QueueKeys;
use super::store::library::{Function, LIBRARY};

/// A queue's push target, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushTarget {
    pub url: String,
    /// Deliveries under way at once at most, fleet-wide.
    pub concurrency: u32,
    /// How long a delivery may take before it counts as failed.
    pub timeout_ms: u64,
    /// The lease a delivery holds, extended while the request runs.
    pub lease_ms: u64,
    /// The key of the deliveries' HMAC-SHA256 signatures.
    pub secret: String,
}

/// How a queue's deliveries have gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushHealth {
    /// Deliveries under way now, fleet-wide.
    pub in_flight: u64,
    pub delivered: u64,
    pub failed: u64,
    /// Deliveries whose lease ran out before they ended.
    pub stale: u64,
    pub consecutive_failures: u64,
    /// The HTTP status of the last delivery that ended; `None` before any,
    /// 0 when no answer came (refused, timed out).
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    /// Redis times, ms.
    pub last_success_at: Option<i64>,
    pub last_failure_at: Option<i64>,
}

/// A queue's push target and its health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushState {
    pub target: PushTarget,
    pub health: PushHealth,
}

/// How a delivery ended, for the target's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushEnd {
    /// The endpoint answered 2xx with this status.
    Delivered(u16),
    /// It answered otherwise (the status), or not at all (0), and why.
    Failed(u16, String),
    /// The lease ran out before the delivery ended.
    Stale(u16, String),
    /// No job was claimed for the slot.
    Unused,
}

impl Broker {
    /// The queues with a push target, as this instance knows them.
    pub fn push_queues(&self) -> Vec<String> {
        let pushed = self.pushed.lock().unwrap_or_else(PoisonError::into_inner);
        pushed.iter().cloned().collect()
    }

    /// Told when `push_queues` changes.
    pub fn push_changed(&self) -> Arc<Notify> {
        Arc::clone(&self.push_changed)
    }

    /// Records whether `queue` has a push target (a sweep of its home
    /// read it, or the pusher found it gone); the pusher hears of a
    /// change.
    pub fn note_push_target(&self, queue: &str, has: bool) {
        let mut pushed = self.pushed.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = match has {
            true => pushed.insert(queue.to_owned()),
            false => pushed.remove(queue),
        };
        if changed {
            self.push_changed.notify_one();
        }
    }

    /// A call of `function` on the queue's home.
    fn push_call(&self, function: Function, queue: &str) -> Call {
        LIBRARY.call(function, &QueueKeys::new(&self.config.key_prefix, queue))
    }

    /// Sets the queue's push target (its health kept when it had one);
    /// `true` when it is new. The queue is listed, so the pushers find it.
    pub async fn put_push(&self, queue: &str, target: &PushTarget) -> Result<bool> {
        self.register(queue, false).await?;
        let mut cmd = self.push_call(Function::Push, queue);
        cmd.arg("put")
            .arg(&target.url)
            .arg(target.concurrency)
            .arg(target.timeout_ms)
            .arg(target.lease_ms)
            .arg(&target.secret);
        let created = self.call::<i64>(&cmd).await? == 1;
        self.note_push_target(queue, true);
        Ok(created)
    }

    /// The queue's push target and its health, when it has one.
    pub async fn push(&self, queue: &str) -> Result<Option<PushState>> {
        let cmd = self.push_call(Function::PushView, queue);
        let pairs: Vec<(String, String)> = self.call(&cmd).await?;
        if pairs.is_empty() {
            return Ok(None);
        }
        let fields: HashMap<String, String> = pairs.into_iter().collect();
        let text = |name: &str| fields.get(name).cloned().unwrap_or_default();
        let count = |name: &str| fields.get(name).and_then(|v| v.parse().ok());
        Ok(Some(PushState {
            target: PushTarget {
                url: text("url"),
                concurrency: count("concurrency").unwrap_or(1) as u32,
                timeout_ms: count("timeout_ms").unwrap_or_default(),
                lease_ms: count("lease_ms").unwrap_or_default(),
                secret: text("secret"),
            },
            health: PushHealth {
                in_flight: count("in_flight").unwrap_or_default(),
                delivered: count("delivered").unwrap_or_default(),
                failed: count("failed").unwrap_or_default(),
                stale: count("stale").unwrap_or_default(),
                consecutive_failures: count("consecutive_failures").unwrap_or_default(),
                last_status: count("last_status").map(|s| s as u16),
                last_error: fields.get("last_error").cloned(),
                last_success_at: count("last_success_at").map(|t| t as i64),
                last_failure_at: count("last_failure_at").map(|t| t as i64),
            },
        }))
    }

    /// Deletes the queue's push target; `false` when it had none.
    pub async fn drop_push(&self, queue: &str) -> Result<bool> {
        let mut cmd = self.push_call(Function::Push, queue);
        cmd.arg("drop");
        let dropped = self.call::<i64>(&cmd).await? == 1;
        self.note_push_target(queue, false);
        Ok(dropped)
    }

    /// Takes up to `wanted` of the target's free slots for `hold_ms`,
    /// named after `holder` (unique per take); `None` when the queue has
    /// no target any more.
    pub async fn take_push_slots(
        &self,
        queue: &str,
        wanted: u32,
        holder: &str,
        hold_ms: u64,
    ) -> Result<Option<Vec<String>>> {
        let mut cmd = self.push_call(Function::Push, queue);
        cmd.arg("take").arg(wanted).arg(holder).arg(hold_ms);
        let reply: redis::Value = self.call(&cmd).await?;
        match reply {
            redis::Value::Int(_) => Ok(None),
            reply => Ok(Some(
                redis::from_redis_value(reply).map_err(QueueError::from)?,
            )),
        }
    }

    /// Marks a slot a job was claimed for busy, held `hold_ms` from now;
    /// its new name.
    pub async fn busy_push_slot(&self, queue: &str, slot: &str, hold_ms: u64) -> Result<String> {
        let mut cmd = self.push_call(Function::Push, queue);
        cmd.arg("busy").arg(slot).arg(hold_ms);
        self.call(&cmd).await
    }

    /// Keeps a slot for `hold_ms` more; `false` when it lapsed already.
    pub async fn keep_push_slot(&self, queue: &str, slot: &str, hold_ms: u64) -> Result<bool> {
        let mut cmd = self.push_call(Function::Push, queue);
        cmd.arg("keep").arg(slot).arg(hold_ms);
        Ok(self.call::<i64>(&cmd).await? == 1)
    }

    /// Frees a slot and records how its delivery ended.
    pub async fn free_push_slot(&self, queue: &str, slot: &str, end: &PushEnd) -> Result<()> {
        let (outcome, status, error) = match end {
            PushEnd::Delivered(status) => ("delivered", *status, ""),
            PushEnd::Failed(status, error) => ("failed", *status, error.as_str()),
            PushEnd::Stale(status, error) => ("stale", *status, error.as_str()),
            PushEnd::Unused => ("unused", 0, ""),
        };
        let mut cmd = self.push_call(Function::Push, queue);
        cmd.arg("free")
            .arg(slot)
            .arg(outcome)
            .arg(status)
            .arg(error);
        self.call::<i64>(&cmd).await.map(drop)
    }
}
