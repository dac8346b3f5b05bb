//! The raw-Redis load: prioq's own functions, called as prioq calls them
//! (`LIBRARY.call`), pipelined straight into Redis; also the fast prefill.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use deadpool_redis::redis::{self, Value, aio::MultiplexedConnection};
use prioq::queue::keys::{Key, QueueKeys};
use prioq::queue::library::{Function, LIBRARY};
use prioq::queue::record;

use crate::args::Op;
use crate::jobs::{BATCH, LEASE_MS, MAX_ATTEMPTS, PRIORITY};
use crate::measure::{Load, TaskStats, Window};
use crate::redis_stats;

/// prioq's default bulk floor (0.1) in parts per million, as it passes it.
const FLOOR_PPM: u64 = 100_000;
/// Due scheduled jobs a claim promotes first, as prioq passes it.
const CLAIM_PROMOTE_BATCH: u64 = 100;
/// Function calls per pipelined round trip.
const PIPELINE_SINGLE: usize = 100;
const PIPELINE_BATCH: usize = 2;
/// Concurrent pipelines (connections).
pub const CONNECTIONS: usize = 4;
/// Upper bound on loop iterations of one task in one run.
const MAX_ITERATIONS: u64 = 2_000_000;

/// A job leased by a claim: id and lease token.
pub type Lease = (String, String);

/// Loads prioq's function library, as prioq does on first use.
pub async fn load_library(con: &mut MultiplexedConnection) -> Result<()> {
    LIBRARY.load_command().query_async::<()>(con).await?;
    Ok(())
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn is_ok(value: &Value) -> bool {
    text(value).as_deref() == Some("OK")
}

/// Where the exchange function's reply holds every ack's status, and the
/// claims' answers (per request the number of jobs leased, then id, record
/// and token per job), each a flat list.
const STATUSES: usize = 1;
const CLAIMS: usize = 3;

/// Section `section` of an exchange reply.
fn section(reply: &Value, section: usize) -> &[Value] {
    match reply {
        Value::Array(reply) => match reply.get(section) {
            Some(Value::Array(items)) => items,
            _ => &[],
        },
        _ => &[],
    }
}

/// Acks that succeeded in an exchange.
fn acked(reply: &Value) -> u64 {
    section(reply, STATUSES)
        .iter()
        .filter(|status| is_ok(status))
        .count() as u64
}

/// `(leases, acks that succeeded)` of an exchange's claims.
fn claimed(reply: &Value) -> (Vec<Lease>, u64) {
    let mut leases = Vec::new();
    let mut items = section(reply, CLAIMS).iter();
    while let Some(Value::Int(count)) = items.next() {
        for _ in 0..*count {
            let job: Vec<&Value> = items.by_ref().take(3).collect();
            if let (Some(id), Some(token)) = (
                job.first().and_then(|v| text(v)),
                job.get(2).and_then(|v| text(v)),
            ) {
                leases.push((id, token));
            }
        }
    }
    (leases, acked(reply))
}

/// An exchange call with the leading arguments prioq passes.
fn exchange(keys: &QueueKeys) -> redis::Cmd {
    let mut cmd = LIBRARY.call(Function::Exchange, keys);
    cmd.arg(CLAIM_PROMOTE_BATCH)
        .arg(FLOOR_PPM)
        .arg(record::new_id());
    cmd
}

/// Adds one exchange of one enqueue of `n` fresh jobs to a pipeline, kept
/// `retain_ms` once acked (`""`: the queue's default, none here).
fn push_enqueue(
    pipe: &mut redis::Pipeline,
    keys: &QueueKeys,
    n: usize,
    body: &[u8],
    retain_ms: &str,
) {
    let mut cmd = exchange(keys);
    // No acks; one enqueue request.
    cmd.arg(0).arg(1).arg(n);
    for _ in 0..n {
        cmd.arg(record::new_id())
            .arg(PRIORITY)
            .arg(0)
            .arg(MAX_ATTEMPTS)
            .arg("")
            .arg(retain_ms)
            .arg(body);
    }
    // No claims.
    cmd.arg(0);
    pipe.add_command(cmd);
}

/// Adds one exchange of one claim for `max_jobs` that first acks `acks`.
fn push_claim(pipe: &mut redis::Pipeline, keys: &QueueKeys, max_jobs: usize, acks: &[Lease]) {
    let mut cmd = exchange(keys);
    // No acks or enqueues of their own; one claim request.
    cmd.arg(0)
        .arg(0)
        .arg(1)
        .arg(LEASE_MS)
        .arg(max_jobs)
        .arg("")
        .arg(acks.len());
    push_acks(&mut cmd, acks, "");
    pipe.add_command(cmd);
}

/// Adds acks to a call: id, lease token and `result` (`""` for none) each.
fn push_acks(cmd: &mut redis::Cmd, leases: &[Lease], result: &str) {
    for (id, token) in leases {
        cmd.arg(id).arg(token).arg(result);
    }
}

/// Adds one exchange of one ack request to a pipeline, each ack with
/// `result` (`""` for none).
fn push_ack(pipe: &mut redis::Pipeline, keys: &QueueKeys, leases: &[Lease], result: &str) {
    let mut cmd = exchange(keys);
    cmd.arg(leases.len());
    push_acks(&mut cmd, leases, result);
    // No enqueues or claims.
    cmd.arg(0).arg(0);
    pipe.add_command(cmd);
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
                let mut pipe = redis::pipe();
                while remaining > 0 {
                    let take = remaining.min(per_call);
                    push_enqueue(&mut pipe, &keys, take as usize, &body, "");
                    remaining -= take;
                }
                pipe.query_async::<Vec<Value>>(&mut con).await?;
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
    n: usize,
    body: &[u8],
    result_bytes: usize,
) -> Result<f64> {
    const PER_CALL: usize = 100;
    const CALLS: usize = 20;
    unlink_queue(con, keys).await?;
    let result = match result_bytes {
        0 => String::new(),
        // A JSON string of that many bytes, quotes included.
        _ => format!("\"{}\"", "r".repeat(result_bytes.saturating_sub(2))),
    };
    let before = redis_stats::used_memory(con).await?;
    for round in 0..n.div_ceil(PER_CALL * CALLS) {
        let mut pipe = redis::pipe();
        let left = n - round * PER_CALL * CALLS;
        for call in 0..CALLS.min(left.div_ceil(PER_CALL)) {
            let take = (left - call * PER_CALL).min(PER_CALL);
            push_enqueue(&mut pipe, keys, take, body, "3600000");
        }
        pipe.query_async::<Vec<Value>>(con).await?;
    }
    let mut done = 0;
    while done < n {
        let mut pipe = redis::pipe();
        for _ in 0..CALLS {
            push_claim(&mut pipe, keys, PER_CALL, &[]);
        }
        let replies: Vec<Value> = pipe.query_async(con).await?;
        let mut pipe = redis::pipe();
        let mut leased = 0;
        for leases in replies.iter().map(|r| claimed(r).0) {
            if !leases.is_empty() {
                leased += leases.len();
                push_ack(&mut pipe, keys, &leases, &result);
            }
        }
        anyhow::ensure!(leased > 0, "only {done} of {n} jobs could be claimed");
        let replies: Vec<Value> = pipe.query_async(con).await?;
        done += replies.iter().map(acked).sum::<u64>() as usize;
    }
    let after = redis_stats::used_memory(con).await?;
    unlink_queue(con, keys).await?;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

pub async fn unlink_queue(con: &mut MultiplexedConnection, keys: &QueueKeys) -> Result<()> {
    let mut cmd = redis::cmd("UNLINK");
    for key in Key::ALL {
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

    async fn enqueue(&self, con: &mut MultiplexedConnection) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        for _ in 0..self.calls() {
            push_enqueue(&mut pipe, &self.keys, self.per_call(), &self.body, "");
        }
        pipe.query_async::<Vec<Value>>(con).await.map(drop)
    }

    async fn claim(&self, con: &mut MultiplexedConnection) -> redis::RedisResult<Vec<Vec<Lease>>> {
        let mut pipe = redis::pipe();
        for _ in 0..self.calls() {
            push_claim(&mut pipe, &self.keys, self.per_call(), &[]);
        }
        let replies: Vec<Value> = pipe.query_async(con).await?;
        Ok(replies.iter().map(|r| claimed(r).0).collect())
    }

    async fn ack(
        &self,
        con: &mut MultiplexedConnection,
        leases: &[Vec<Lease>],
    ) -> redis::RedisResult<u64> {
        let mut pipe = redis::pipe();
        let mut calls = 0;
        for call in leases.iter().filter(|l| !l.is_empty()) {
            push_ack(&mut pipe, &self.keys, call, "");
            calls += 1;
        }
        if calls == 0 {
            return Ok(0);
        }
        let replies: Vec<Value> = pipe.query_async(con).await?;
        Ok(replies.iter().map(acked).sum())
    }

    /// The worker loop's shape in one round trip: single-job enqueues, then
    /// single-job claims that each ack one job leased by the round before.
    async fn enqueue_and_claim_acking(
        &self,
        con: &mut MultiplexedConnection,
        held: &mut Vec<Lease>,
    ) -> redis::RedisResult<(u64, usize)> {
        let mut pipe = redis::pipe();
        for _ in 0..self.calls() {
            push_enqueue(&mut pipe, &self.keys, 1, &self.body, "");
        }
        let mut acks = std::mem::take(held).into_iter();
        for _ in 0..self.calls() {
            let ack: Vec<Lease> = acks.next().into_iter().collect();
            push_claim(&mut pipe, &self.keys, 1, &ack);
        }
        let replies: Vec<Value> = pipe.query_async(con).await?;
        let mut acked = 0;
        for reply in &replies[self.calls()..] {
            let (leases, ok) = claimed(reply);
            acked += ok;
            held.extend(leases);
        }
        Ok((acked, held.len()))
    }

    async fn round(
        &self,
        con: &mut MultiplexedConnection,
        held: &mut Vec<Lease>,
        st: &mut TaskStats,
        w: &Window,
    ) -> redis::RedisResult<()> {
        let wanted = self.calls() * self.per_call();
        if self.op == Op::WorkerLoop {
            let start = Instant::now();
            let (acked, leased) = self.enqueue_and_claim_acking(con, held).await?;
            let end = Instant::now();
            st.record(w, "enqueue_claim_ack_pipeline", start, end);
            if leased < wanted {
                st.short_claims += 1;
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
            st.short_claims += 1;
        }
        let acked = self.ack(con, &leases).await?;
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
            && let Err(error) = self.ack(&mut con, &[held]).await
        {
            st.error(format!("acking the last leases: {error}"));
        }
        st
    }
}
