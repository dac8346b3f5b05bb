//! The lease sweeper every instance runs: takes back expired leases,
//! promotes due scheduled jobs, deletes completed jobs whose retention
//! ended, fires due schedules, and tells the dependants in other slots of
//! jobs that ended, queue by queue, in bounded batches.
//! Each batch is one function call (and one more per due schedule), so any
//! number of instances may sweep at once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::queue::{Broker, Fired, Result, SweepCursors, Swept};

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
    let mut state = Passes::default();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        match sweep(&broker, &shutdown, &mut state).await {
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

/// What one pass leaves the next: where each shard's look at its tags and
/// groups goes on, and the queues whose sweep failed (said once, and once
/// more when they recover).
#[derive(Debug, Default)]
struct Passes {
    cursors: HashMap<(String, u32), SweepCursors>,
    failing: HashSet<String>,
}

/// One pass over every shard of every known queue: one call per shard,
/// more while a call comes back with a full batch. A queue whose sweep
/// fails (its cluster primary is down, a call timed out) is left for the
/// next pass and the others are swept; the pass fails only when the list
/// of queues cannot be read.
async fn sweep(broker: &Broker, shutdown: &CancellationToken, state: &mut Passes) -> Result<()> {
    let queues = broker.queues().await?;
    state
        .cursors
        .retain(|(queue, _), _| queues.binary_search(queue).is_ok());
    state
        .failing
        .retain(|queue| queues.binary_search(queue).is_ok());
    for queue in queues {
        if shutdown.is_cancelled() {
            return Ok(());
        }
        match sweep_queue(broker, shutdown, &mut state.cursors, &queue).await {
            Ok(()) => {
                if state.failing.remove(&queue) {
                    tracing::info!(queue, "sweeping the queue again");
                }
            }
            Err(error) => {
                if state.failing.insert(queue.clone()) {
                    tracing::warn!(
                        queue,
                        error = format!("{:#}", anyhow::Error::from(error)),
                        "could not sweep the queue; the others go on, it is tried every interval"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Sweeps every shard of `queue`, each from where its last sweep stopped.
async fn sweep_queue(
    broker: &Broker,
    shutdown: &CancellationToken,
    cursors: &mut HashMap<(String, u32), SweepCursors>,
    queue: &str,
) -> Result<()> {
    let mut shards = broker.shards(queue).await?;
    let mut shard = 0;
    while shard < shards {
        for _ in 0..MAX_BATCHES {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let at = (queue.to_owned(), shard);
            let from = cursors.get(&at).cloned().unwrap_or_default();
            let swept = broker.sweep(queue, shard, BATCH, &from).await?;
            cursors.insert(at, swept.cursors.clone());
            // The home says how many shards there are now.
            if shard == 0 && swept.shards != shards {
                shards = broker.reread_shards(queue).await?;
            }
            if swept.reclaimed > 0 {
                tracing::info!(
                    queue,
                    shard,
                    reclaimed = swept.reclaimed,
                    dead = swept.dead,
                    "took back expired leases"
                );
            }
            fire(broker, queue, &swept).await;
            if swept.outboxed > 0 {
                tell(broker, queue, shard).await;
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
        shard += 1;
    }
    Ok(())
}

/// Tells the dependants elsewhere of the jobs of the shard that ended. A
/// failure leaves the outbox as it is: the next sweep tells them (again:
/// each end counts once).
async fn tell(broker: &Broker, queue: &str, shard: u32) {
    if let Err(error) = broker.send_outbox(queue, shard).await {
        tracing::warn!(queue, shard, error = %error, "could not tell dependants of ended jobs");
    }
}

/// Fires the schedules a sweep found due, and pays the fires it found
/// owed. A failure leaves them due or owed: the next sweep tries again.
async fn fire(broker: &Broker, queue: &str, swept: &Swept) {
    for due in &swept.due {
        match broker.fire(queue, due, swept.now_ms).await {
            Ok(Fired::Enqueued { job_id }) => {
                tracing::info!(queue, schedule = due.name, job = job_id, "fired");
            }
            Ok(Fired::Stale) => {}
            Err(error) => tracing::warn!(
                queue,
                schedule = due.name,
                error = %error,
                "could not fire the schedule"
            ),
        }
    }
    for debt in &swept.owed {
        match broker.pay(queue, debt).await {
            Ok(()) => tracing::info!(queue, job = debt.job_id, "paid a fire left owed"),
            Err(error) => tracing::warn!(
                queue,
                job = debt.job_id,
                error = %error,
                "could not pay a fire left owed"
            ),
        }
    }
}
