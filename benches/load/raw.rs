//! The raw-Redis load: prioq's own functions, called as prioq calls them
//! (`LIBRARY.call`), pipelined straight into Redis; also the fast prefill.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use prioq::queue::store::keys::{Key, QueueKeys};
use prioq::queue::store::library::LIBRARY;
use prioq::queue::store::record;
use prioq::queue::{
    Ack, AckOutcome, Admission, ClaimEntry, Exchange, Exchanged, Job, JobOptions, OutgoingJob,
    Route, exchange_answers, exchange_command,
};
use redis::{self, Value, aio::MultiplexedConnection};
use serde_json::value::RawValue;

use crate::args::Op;
use crate::jobs::{BATCH, LEASE_MS, MAX_ATTEMPTS, PRIORITY};
use crate::measure::{Load, TaskStats, Window};
use crate::redis_stats;

/// prioq's default bulk floor (0.1) in parts per million, as it passes it.
const FLOOR_PPM: u64 = 100_000;
/// Function calls per pipelined round trip.
const PIPELINE_SINGLE: usize = 100;
const PIPELINE_BATCH: usize = 2;
/// Concurrent pipelines (connections).
pub const CONNECTIONS: usize = 4;
/// Upper bound on loop iterations of one task in one run.
const MAX_ITERATIONS: u64 = 2_000_000;

/// A job leased by a claim, as its ack names it.
pub type Lease = Ack;

/// Loads prioq's function library, as prioq does on first use.
pub async fn load_library(con: &mut MultiplexedConnection) -> Result<()> {
    LIBRARY.load_command().query_async::<()>(con).await?;
    Ok(())
}

/// Exchange calls in one pipeline, each with the requests it carries, so
/// that the replies can be read as prioq reads them.
#[derive(Default)]
pub struct Calls {
    pipe: redis::Pipeline,
    entries: Vec<Vec<Exchange>>,
}

/// What the calls of a pipeline did: the jobs leased, per call that
/// claimed, and the acks that succeeded.
#[derive(Default)]
pub struct Outcome {
    pub leases: Vec<Vec<Lease>>,
    pub acked: u64,
}

impl Calls {
    /// Adds one exchange call carrying `entries`, as prioq would send them.
    fn push(&mut self, keys: &QueueKeys, entries: Vec<Exchange>) {
        self.pipe
            .add_command(exchange_command(keys, FLOOR_PPM, Route::SINGLE, &entries));
        self.entries.push(entries);
    }

    /// Adds one call of one enqueue of `n` fresh jobs, kept `retain_ms`
    /// once acked (`None`: the queue's default, none here).
    pub fn enqueue(&mut self, keys: &QueueKeys, n: usize, body: &[u8], retain_ms: Option<u64>) {
        let jobs = (0..n)
            .map(|_| OutgoingJob {
                id: record::new_id(),
                body: body.to_vec(),
                options: JobOptions {
                    priority: PRIORITY,
                    max_attempts: MAX_ATTEMPTS,
                    retain_ms,
                    ..JobOptions::default()
                },
                arrival: None,
                after: None,
            })
            .collect();
        self.push(keys, vec![Exchange::Enqueue(jobs, Admission::Bounded)]);
    }

    /// Adds one call of one claim for `max_jobs` that first acks `acks`.
    pub fn claim(&mut self, keys: &QueueKeys, max_jobs: usize, acks: Vec<Ack>) {
        let claim = ClaimEntry {
            picked: Vec::new(),
            lease_ms: LEASE_MS,
            max_jobs: max_jobs as u32,
            worker: String::new(),
            request_id: None,
            acks,
        };
        self.push(keys, vec![Exchange::Claim(Arc::new(claim))]);
    }

    /// Adds one call of one ack request.
    pub fn ack(&mut self, keys: &QueueKeys, acks: Vec<Ack>) {
        self.push(keys, vec![Exchange::Ack(Arc::new(acks))]);
    }

    /// Sends the pipeline and reads every call's answers.
    pub async fn send(self, con: &mut MultiplexedConnection) -> Result<Outcome> {
        let replies: Vec<Value> = self.pipe.query_async(con).await?;
        let mut outcome = Outcome::default();
        for (entries, reply) in self.entries.iter().zip(replies) {
            for answer in exchange_answers(entries, reply)?.0 {
                match answer? {
                    Exchanged::Claimed(claimed) => {
                        outcome.acked += successes(&claimed.acked);
                        outcome
                            .leases
                            .push(claimed.jobs.into_iter().map(lease_of).collect());
                    }
                    Exchanged::Acked(acked) => outcome.acked += successes(&acked),
                    Exchanged::Enqueued(_) => {}
                }
            }
        }
        Ok(outcome)
    }
}

fn successes(outcomes: &[AckOutcome]) -> u64 {
    outcomes.iter().filter(|o| **o == AckOutcome::Acked).count() as u64
}

/// The ack of a claimed job, with no result.
fn lease_of(job: Job) -> Lease {
    Ack {
        lease_token: job.lease.map(|lease| lease.token).unwrap_or_default(),
        id: job.id,
        result: None,
    }
}

/// Enqueues `n` jobs with the exchange function, pipelined over a few
/// connections: the fast prefill.
pub async fn prefill(
    cons: &[MultiplexedConnection],
    keys: &QueueKeys,
    n: u64,
    body: &[u8],
) -> Result<()> {
    let per_call = 100u64;
    let calls_per_round = 20u64;
    let per_round = per_call * calls_per_round;
    let rounds = n.div_ceil(per_round);
    let next = Arc::new(AtomicU64::new(0));
    let body: Arc<[u8]> = body.into();
    let mut tasks = Vec::new();
    for con in cons {
        let (mut con, keys, next, body) = (
            con.clone(),
            keys.clone(),
            Arc::clone(&next),
            Arc::clone(&body),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let round = next.fetch_add(1, Ordering::Relaxed);
                if round >= rounds {
                    return Ok::<_, anyhow::Error>(());
                }
                let mut remaining = (n - round * per_round).min(per_round);
                let mut calls = Calls::default();
                while remaining > 0 {
                    let take = remaining.min(per_call);
                    calls.enqueue(&keys, take as usize, &body, None);
                    remaining -= take;
                }
                calls.send(&mut con).await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Redis memory per job of `n` jobs kept completed an hour, each acked
/// with a result of `result_bytes` bytes (0: none): measured from before
/// their enqueue to after their ack, on an emptied queue (unlinked again
/// afterwards), all through the exchange function, pipelined.
pub async fn retained_bytes_per_job(
    con: &mut MultiplexedConnection,
    keys: &QueueKeys,
    queue: &str,
    n: usize,
    body: &[u8],
    result_bytes: usize,
) -> Result<f64> {
    const PER_CALL: usize = 100;
    const CALLS: usize = 20;
    fresh_queue(con, keys, queue).await?;
    // A JSON string of that many bytes, quotes included.
    let result = (result_bytes > 0)
        .then(|| format!("\"{}\"", "r".repeat(result_bytes.saturating_sub(2))))
        .map(RawValue::from_string)
        .transpose()?;
    let before = redis_stats::used_memory(con).await?;
    for round in 0..n.div_ceil(PER_CALL * CALLS) {
        let mut calls = Calls::default();
        let left = n - round * PER_CALL * CALLS;
        for call in 0..CALLS.min(left.div_ceil(PER_CALL)) {
            let take = (left - call * PER_CALL).min(PER_CALL);
            calls.enqueue(keys, take, body, Some(3_600_000));
        }
        calls.send(con).await?;
    }
    let mut done = 0;
    while done < n {
        let mut calls = Calls::default();
        for _ in 0..CALLS {
            calls.claim(keys, PER_CALL, Vec::new());
        }
        let claimed = calls.send(con).await?;
        let mut calls = Calls::default();
        let mut leased = 0;
        for mut leases in claimed.leases.into_iter().filter(|l| !l.is_empty()) {
            leased += leases.len();
            for lease in &mut leases {
                lease.result.clone_from(&result);
            }
            calls.ack(keys, leases);
        }
        anyhow::ensure!(leased > 0, "only {done} of {n} jobs could be claimed");
        done += calls.send(con).await?.acked as usize;
    }
    let after = redis_stats::used_memory(con).await?;
    unlink_queue(con, keys).await?;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

/// Makes `queue` (its `keys`) a new, empty queue on the list of queues, as
/// prioq lists one before its first write: the functions refuse to write
/// to a queue that is not listed.
pub async fn fresh_queue(
    con: &mut MultiplexedConnection,
    keys: &QueueKeys,
    queue: &str,
) -> Result<()> {
    unlink_queue(con, keys).await?;
    redis::pipe()
        .cmd("SADD")
        .arg(keys.key(Key::Queues))
        .arg(queue)
        .ignore()
        .cmd("HSET")
        .arg(keys.key(Key::Meta))
        .arg("registered")
        .arg("1")
        .ignore()
        .query_async::<()>(con)
        .await?;
    Ok(())
}

pub async fn unlink_queue(con: &mut MultiplexedConnection, keys: &QueueKeys) -> Result<()> {
    let mut cmd = redis::cmd("UNLINK");
    // Not the list of queues, which the other queues are on.
    for key in Key::ALL.into_iter().filter(|key| *key != Key::Queues) {
        cmd.arg(keys.key(key));
    }
    cmd.query_async::<i64>(con).await?;
    Ok(())
}

#[derive(Debug)]
pub struct Raw {
    pub cons: Vec<MultiplexedConnection>,
    pub keys: QueueKeys,
    pub op: Op,
    pub body: Vec<u8>,
}

impl Raw {
    fn per_call(&self) -> usize {
        if self.op.batched() { BATCH } else { 1 }
    }

    fn calls(&self) -> usize {
        if self.op.batched() {
            PIPELINE_BATCH
        } else {
            PIPELINE_SINGLE
        }
    }

    async fn enqueue(&self, con: &mut MultiplexedConnection) -> Result<()> {
        let mut calls = Calls::default();
        for _ in 0..self.calls() {
            calls.enqueue(&self.keys, self.per_call(), &self.body, None);
        }
        calls.send(con).await.map(drop)
    }

    async fn claim(&self, con: &mut MultiplexedConnection) -> Result<Vec<Vec<Lease>>> {
        let mut calls = Calls::default();
        for _ in 0..self.calls() {
            calls.claim(&self.keys, self.per_call(), Vec::new());
        }
        Ok(calls.send(con).await?.leases)
    }

    async fn ack(&self, con: &mut MultiplexedConnection, leases: Vec<Vec<Lease>>) -> Result<u64> {
        let mut calls = Calls::default();
        for call in leases.into_iter().filter(|l| !l.is_empty()) {
            calls.ack(&self.keys, call);
        }
        if calls.entries.is_empty() {
            return Ok(0);
        }
        Ok(calls.send(con).await?.acked)
    }

    /// The worker loop's shape in one round trip: single-job enqueues, then
    /// single-job claims that each ack one job leased by the round before.
    async fn enqueue_and_claim_acking(
        &self,
        con: &mut MultiplexedConnection,
        held: &mut Vec<Lease>,
    ) -> Result<(u64, usize)> {
        let mut calls = Calls::default();
        for _ in 0..self.calls() {
            calls.enqueue(&self.keys, 1, &self.body, None);
        }
        let mut acks = std::mem::take(held).into_iter();
        for _ in 0..self.calls() {
            calls.claim(&self.keys, 1, acks.next().into_iter().collect());
        }
        let outcome = calls.send(con).await?;
        held.extend(outcome.leases.into_iter().flatten());
        Ok((outcome.acked, held.len()))
    }

    async fn round(
        &self,
        con: &mut MultiplexedConnection,
        held: &mut Vec<Lease>,
        st: &mut TaskStats,
        w: &Window,
    ) -> Result<()> {
        let wanted = self.calls() * self.per_call();
        if self.op == Op::WorkerLoop {
            let start = Instant::now();
            let (acked, leased) = self.enqueue_and_claim_acking(con, held).await?;
            let end = Instant::now();
            st.record(w, "enqueue_claim_ack_pipeline", start, end);
            if leased < wanted {
                st.short_claim(w, end);
            }
            st.finished(w, end, acked);
            return Ok(());
        }
        if self.op.enqueues() {
            let start = Instant::now();
            self.enqueue(con).await?;
            let end = Instant::now();
            st.record(w, "enqueue_pipeline", start, end);
            if !self.op.claims() {
                st.finished(w, end, wanted as u64);
                return Ok(());
            }
        }
        let start = Instant::now();
        let leases = self.claim(con).await?;
        let mid = Instant::now();
        st.record(w, "claim_pipeline", start, mid);
        if leases.iter().map(Vec::len).sum::<usize>() < wanted {
            st.short_claim(w, mid);
        }
        let acked = self.ack(con, leases).await?;
        let end = Instant::now();
        st.record(w, "ack_pipeline", mid, end);
        st.finished(w, end, acked);
        Ok(())
    }
}

impl Load for Raw {
    fn claims_in_flight(&self) -> u64 {
        if self.op.claims() {
            (CONNECTIONS * self.calls() * self.per_call()) as u64
        } else {
            0
        }
    }

    async fn task(self: Arc<Self>, index: usize, w: Window) -> TaskStats {
        let mut st = TaskStats::default();
        let mut con = self.cons[index % self.cons.len()].clone();
        let mut held = Vec::new();
        for _ in 0..MAX_ITERATIONS {
            if w.over() {
                break;
            }
            if let Err(error) = self.round(&mut con, &mut held, &mut st, &w).await {
                st.error(error.to_string());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        // Leave nothing leased to the next run on this queue.
        if !held.is_empty()
            && let Err(error) = self.ack(&mut con, vec![held]).await
        {
            st.error(format!("acking the last leases: {error}"));
        }
        st
    }
}
