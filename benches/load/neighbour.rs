//! The noisy neighbour: one group floods a queue with batches while
//! another trickles single jobs into it, and workers claim one job at a
//! time. Measured: how long the trickling group's jobs wait from enqueue
//! to claim, with the two groups named (fair sharing) and with the same
//! jobs sent without groups (one FIFO). Latency here is milliseconds, so
//! the convenient client does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Deserialize;

use crate::jobs::{BATCH, LEASE_MS, PRIORITY, TASK, args_json, claim_acking};
use crate::measure::{Latency, latency};

/// Flood jobs waiting when the trickle starts.
const BACKLOG: usize = 10_000;
/// Tasks sending the flood's batches, as fast as they are answered.
const FLOODERS: usize = 2;
/// Workers, each claiming one job at a time (acking the previous one in
/// the claim).
const WORKERS: usize = 16;
/// One trickling job every this long.
const TRICKLE_EVERY: Duration = Duration::from_millis(20);
/// The queues of the two sides, and the groups of the grouped one.
pub const QUEUES: [&str; 2] = ["bench-neighbour-grouped", "bench-neighbour-plain"];
pub const GROUPS: [&str; 2] = ["flood", "trickle"];

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct NeighbourResult {
    pub seconds: f64,
    /// The trickling group's jobs, enqueue to claim, when both groups are
    /// named.
    pub grouped: Side,
    /// The same jobs sent without groups.
    pub plain: Side,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Side {
    /// Enqueue sent to claim answered; a job still waiting at the end
    /// counts with the time it had waited by then.
    pub trickle: Latency,
    pub trickled: usize,
    /// Trickling jobs still waiting at the end.
    pub unclaimed: usize,
    /// Flood jobs enqueued during the run.
    pub flooded: u64,
    /// Jobs claimed during the run, of both groups.
    pub claimed: u64,
}

#[derive(Debug, Deserialize)]
struct Claimed {
    jobs: Vec<Leased>,
}

#[derive(Debug, Deserialize)]
struct Leased {
    id: String,
    lease_token: String,
}

/// A job's JSON, with its group when the side names groups.
fn job(id: Option<&str>, group: Option<&str>) -> String {
    let id = id.map(|id| format!(r#""id":"{id}","#)).unwrap_or_default();
    let group = group
        .map(|group| format!(r#","group":"{group}""#))
        .unwrap_or_default();
    format!(
        r#"{{{id}"task":"{TASK}","args":{},"priority":{PRIORITY}{group}}}"#,
        args_json()
    )
}

async fn post(client: &reqwest::Client, url: &str, body: String) -> Result<Vec<u8>> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    if !response.status().is_success() {
        bail!("{url}: {}", response.status());
    }
    Ok(response.bytes().await?.to_vec())
}

/// Both sides, one after the other, on instance `base`.
pub async fn run(client: &reqwest::Client, base: &str, seconds: f64) -> Result<NeighbourResult> {
    let window = Duration::from_secs_f64(seconds);
    let grouped = side(client, base, QUEUES[0], true, window).await?;
    let plain = side(client, base, QUEUES[1], false, window).await?;
    Ok(NeighbourResult {
        seconds,
        grouped,
        plain,
    })
}

async fn side(
    client: &reqwest::Client,
    base: &str,
    queue: &str,
    groups: bool,
    window: Duration,
) -> Result<Side> {
    let jobs_url = format!("{base}/v1/queues/{queue}/jobs");
    let batch_url = format!("{jobs_url}/batch");
    let claim_url = format!("{base}/v1/queues/{queue}/claim");
    let flood_group = groups.then_some(GROUPS[0]);
    let trickle_group = groups.then_some(GROUPS[1]);
    let batch = format!(
        r#"{{"jobs":[{}]}}"#,
        vec![job(None, flood_group); BATCH].join(",")
    );
    for _ in 0..BACKLOG / BATCH {
        post(client, &batch_url, batch.clone()).await?;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let flooded = Arc::new(AtomicU64::new(0));
    let claimed = Arc::new(AtomicU64::new(0));
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let waited: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..FLOODERS {
        let (client, url, batch, stop, flooded) = (
            client.clone(),
            batch_url.clone(),
            batch.clone(),
            Arc::clone(&stop),
            Arc::clone(&flooded),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                post(&client, &url, batch.clone()).await?;
                flooded.fetch_add(BATCH as u64, Ordering::Relaxed);
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for _ in 0..WORKERS {
        let (client, url, stop, claimed, sent, waited) = (
            client.clone(),
            claim_url.clone(),
            Arc::clone(&stop),
            Arc::clone(&claimed),
            Arc::clone(&sent),
            Arc::clone(&waited),
        );
        tasks.push(tokio::spawn(async move {
            let mut held: Option<Leased> = None;
            while !stop.load(Ordering::Relaxed) {
                let body = match &held {
                    Some(job) => claim_acking(&job.id, &job.lease_token),
                    None => format!(r#"{{"max_jobs":1,"lease_ms":{LEASE_MS}}}"#),
                };
                let answer: Claimed = serde_json::from_slice(&post(&client, &url, body).await?)?;
                let now = Instant::now();
                held = answer.jobs.into_iter().next();
                if let Some(job) = &held {
                    claimed.fetch_add(1, Ordering::Relaxed);
                    let at = sent
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&job.id);
                    if let Some(at) = at {
                        let micros = now.duration_since(at).as_micros();
                        waited
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(u32::try_from(micros).unwrap_or(u32::MAX));
                    }
                }
            }
            Ok(())
        }));
    }

    // The trickle, paced, in this task.
    let started = Instant::now();
    let mut tick = tokio::time::interval(TRICKLE_EVERY);
    let mut trickled = 0;
    while started.elapsed() < window {
        tick.tick().await;
        let id = format!("trickle-{trickled}");
        sent.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), Instant::now());
        post(client, &jobs_url, job(Some(&id), trickle_group)).await?;
        trickled += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let ended = Instant::now();
    for task in tasks {
        task.await??;
    }

    let still = std::mem::take(&mut *sent.lock().unwrap_or_else(PoisonError::into_inner));
    let mut samples = std::mem::take(&mut *waited.lock().unwrap_or_else(PoisonError::into_inner));
    for at in still.values() {
        let micros = ended.duration_since(*at).as_micros();
        samples.push(u32::try_from(micros).unwrap_or(u32::MAX));
    }
    Ok(Side {
        trickle: latency(&mut samples),
        trickled,
        unclaimed: still.len(),
        flooded: flooded.load(Ordering::Relaxed),
        claimed: claimed.load(Ordering::Relaxed),
    })
}
