//! The lease sweeper every instance runs: takes back expired leases,
//! promotes due scheduled jobs, deletes completed jobs whose retention
//! ended, and fires due schedules, queue by queue, in bounded batches.
//! Each batch is one function call (and one more per due schedule), so any
//! number of instances may sweep at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::queue::{Broker, Fired, Result, SweepCursors};

/// Leases one call takes back, due jobs it promotes, completed jobs it
/// deletes and due schedules it lists, at most.
const BATCH: u32 = 100;
/// Batches per queue and pass, so one busy queue cannot hold up the rest.
const MAX_BATCHES: u32 = 50;

/// Sweeps every `interval` until `shutdown`; a pass in progress stops
/// between two batches.
pub async fn run(broker: Arc<Broker>, interval: Duration, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Said once when sweeping starts failing and once when it recovers, not
    // every interval of an outage.
    let mut failing = false;
    let mut cursors = HashMap::new();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        match sweep(&broker, &shutdown, &mut cursors).await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("sweeping again");
            }
            Ok(()) => {}
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(
                    error = format!("{:#}", anyhow::Error::from(error)),
                    "sweep failed; retrying every interval"
                );
            }
            Err(_) => {}
        }
    }
}

/// One pass over every known queue: one call per queue, more while a call
/// comes back with a full batch. `cursors` holds where each queue's look at
/// its tags and groups goes on.
pub async fn sweep(
    broker: &Broker,
    shutdown: &CancellationToken,
    cursors: &mut HashMap<String, SweepCursors>,
) -> Result<()> {
    let queues = broker.queues().await?;
    cursors.retain(|queue, _| queues.binary_search(queue).is_ok());
    for queue in queues {
        for _ in 0..MAX_BATCHES {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let from = cursors.get(&queue).cloned().unwrap_or_default();
            let swept = broker.sweep(&queue, BATCH, &from).await?;
            cursors.insert(queue.clone(), swept.cursors.clone());
            if swept.reclaimed > 0 {
                tracing::info!(
                    queue,
                    reclaimed = swept.reclaimed,
                    dead = swept.dead,
                    "took back expired leases"
                );
            }
            for due in &swept.due {
                match broker.fire(&queue, due, swept.now_ms).await {
                    Ok(Fired::Enqueued { job_id }) => {
                        tracing::info!(queue, schedule = due.name, job = job_id, "fired");
                    }
                    Ok(Fired::Stale) => {}
                    // The schedule stays due: the next sweep tries again.
                    Err(error) => tracing::warn!(
                        queue,
                        schedule = due.name,
                        error = %error,
                        "could not fire the schedule"
                    ),
                }
            }
            let full = u64::from(BATCH);
            if swept.reclaimed < full
                && swept.promoted < full
                && swept.purged < full
                && swept.due.len() < BATCH as usize
            {
                break;
            }
        }
    }
    Ok(())
}
