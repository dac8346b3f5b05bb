//! Long polls: how soon a claim waiting on one instance is woken by an
//! enqueue on another, and what idle long polls cost Redis. Latency here
//! is milliseconds, so the convenient client does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use serde::Deserialize;

use crate::jobs::{self, Bodies};
use crate::measure::{Latency, Monitor, Snapshot, latency};

#[derive(Debug, Deserialize)]
struct Claimed {
    jobs: Vec<Leased>,
}

#[derive(Debug, Deserialize)]
struct Leased {
    id: String,
    lease_token: String,
}

/// One POST with a JSON body: status and body, or what went wrong.
async fn post(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> Result<(u16, Vec<u8>), String> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    Ok((status, bytes.to_vec()))
}

async fn ack(client: &reqwest::Client, base: &str, queue: &str, job: &Leased) -> Result<()> {
    let url = format!("{base}/v1/queues/{queue}/jobs/{}/ack", job.id);
    post(client, &url, jobs::ack_single(&job.lease_token))
        .await
        .map_err(|e| anyhow!(e))?;
    Ok(())
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct WakeResult {
    pub rounds: usize,
    pub woken: usize,
    pub missed: usize,
    /// From sending the enqueue to B until the claim waiting on A answered.
    pub after_enqueue_sent: Latency,
    /// From B's enqueue answer until A's claim answer (0 when A answered first).
    pub after_enqueue_answered: Latency,
    /// The enqueue request alone, for reference.
    pub enqueue: Latency,
}

pub async fn wake_test(
    client: &reqwest::Client,
    a: &str,
    b: &str,
    rounds: usize,
) -> Result<WakeResult> {
    let queue = "bench-wake";
    let claim_url = format!("{a}/v1/queues/{queue}/claim");
    let enqueue_url = format!("{b}/v1/queues/{queue}/jobs");
    let body = Bodies::new().single;
    // Warm both instances and connections up; leave the queue empty.
    for base in [a, b] {
        let url = format!("{base}/v1/queues/{queue}/claim");
        post(
            client,
            &format!("{base}/v1/queues/{queue}/jobs"),
            body.clone(),
        )
        .await
        .map_err(|e| anyhow!(e))?;
        let (_, bytes) = post(client, &url, r#"{"max_jobs":100}"#)
            .await
            .map_err(|e| anyhow!(e))?;
        let claimed: Claimed = serde_json::from_slice(&bytes)?;
        for job in &claimed.jobs {
            ack(client, base, queue, job).await?;
        }
    }
    let mut sent = Vec::new();
    let mut answered = Vec::new();
    let mut enqueue = Vec::new();
    let mut result = WakeResult {
        rounds,
        ..WakeResult::default()
    };
    for _ in 0..rounds {
        let waiting = {
            let (client, url) = (client.clone(), claim_url.clone());
            tokio::spawn(async move {
                let r = post(&client, &url, r#"{"max_jobs":1,"wait_ms":5000}"#).await;
                (Instant::now(), r)
            })
        };
        // Let the claim reach prioq and park.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let t0 = Instant::now();
        let enq = post(client, &enqueue_url, body.clone()).await;
        let t_enq = Instant::now();
        if !matches!(enq, Ok((201, _))) {
            result.missed += 1;
            waiting.abort();
            continue;
        }
        let Ok(Ok((t1, Ok((200, bytes))))) =
            tokio::time::timeout(Duration::from_secs(10), waiting).await
        else {
            result.missed += 1;
            continue;
        };
        let claimed: Claimed = serde_json::from_slice(&bytes)?;
        let Some(job) = claimed.jobs.first() else {
            result.missed += 1;
            continue;
        };
        result.woken += 1;
        let us = |d: Duration| d.as_micros().min(u128::from(u32::MAX)) as u32;
        sent.push(us(t1.duration_since(t0)));
        answered.push(us(t1.saturating_duration_since(t_enq)));
        enqueue.push(us(t_enq.duration_since(t0)));
        ack(client, a, queue, job).await?;
    }
    result.after_enqueue_sent = latency(&mut sent);
    result.after_enqueue_answered = latency(&mut answered);
    result.enqueue = latency(&mut enqueue);
    Ok(result)
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct IdleResult {
    pub polls: usize,
    pub window_s: f64,
    /// `total_commands_processed` per second (counts the commands functions
    /// run, too), with no long poll: the sweepers of the running instances.
    pub baseline_commands_per_s: f64,
    pub baseline_function_calls_per_s: f64,
    pub with_polls_commands_per_s: f64,
    pub with_polls_function_calls_per_s: f64,
    /// The difference, per idle long poll.
    pub commands_per_s_per_poll: f64,
    pub function_calls_per_s_per_poll: f64,
    pub queues_registered: u64,
}

/// Commands and function calls per second between two snapshots.
fn rates(s0: &Snapshot, s1: &Snapshot) -> (f64, f64) {
    let secs = s1.at.duration_since(s0.at).as_secs_f64();
    let (c0, c1) = (&s0.counters, &s1.counters);
    (
        // The INFO of the first snapshot is counted once.
        c1.total_commands.saturating_sub(c0.total_commands + 1) as f64 / secs,
        c1.fcall.0.saturating_sub(c0.fcall.0) as f64 / secs,
    )
}

pub async fn idle_test(
    monitor: &mut Monitor,
    client: &reqwest::Client,
    a: &str,
    registry: &str,
    polls: usize,
    window: Duration,
) -> Result<IdleResult> {
    let url = format!("{a}/v1/queues/bench-idle/claim");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s0 = monitor.snapshot().await?;
    tokio::time::sleep(window).await;
    let s1 = monitor.snapshot().await?;
    let (base_cmds, base_calls) = rates(&s0, &s1);

    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..polls)
        .map(|_| {
            let (client, url, stop) = (client.clone(), url.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                for _ in 0..100 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if post(&client, &url, r#"{"max_jobs":1,"wait_ms":20000}"#)
                        .await
                        .is_err()
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s2 = monitor.snapshot().await?;
    tokio::time::sleep(window).await;
    let s3 = monitor.snapshot().await?;
    stop.store(true, Ordering::Relaxed);
    for task in &tasks {
        task.abort();
    }
    let (poll_cmds, poll_calls) = rates(&s2, &s3);
    let queues: u64 = redis::cmd("SCARD")
        .arg(registry)
        .query_async(&mut monitor.con)
        .await
        .unwrap_or(0);
    let n = polls.max(1) as f64;
    Ok(IdleResult {
        polls,
        window_s: window.as_secs_f64(),
        baseline_commands_per_s: base_cmds,
        baseline_function_calls_per_s: base_calls,
        with_polls_commands_per_s: poll_cmds,
        with_polls_function_calls_per_s: poll_calls,
        commands_per_s_per_poll: (poll_cmds - base_cmds) / n,
        function_calls_per_s_per_poll: (poll_calls - base_calls) / n,
        queues_registered: queues,
    })
}
