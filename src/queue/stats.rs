//! A queue's counts: by state, per priority class, and its groups, as the
//! `stats` function reads them.

use super::library::{Function, LIBRARY};
use super::{Broker, Result};

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
/// completed.
type RawStats = (u64, u64, u64, u64, u64, Vec<(u8, u64, u64)>, u64, u8, u64);

impl Broker {
    /// A queue's counts; a queue never used has zeros.
    pub async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let cmd = LIBRARY.call(Function::Stats, &self.lanes(queue).keys);
        let (
            pending,
            scheduled,
            processing,
            expired_leases,
            dead,
            classes,
            groups,
            paused,
            completed,
        ): RawStats = self.call(&cmd).await?;
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
            groups,
            paused: paused == 1,
            completed,
        })
    }
}
