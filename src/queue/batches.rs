//! The three operations whose requests are sent in batches (see `lane`):
//! enqueue, claim (with the acks a worker sends along) and ack. Each turns
//! its entries into one function call and the call's reply back into one
//! answer per entry.

use std::sync::Arc;

use deadpool_redis::redis::{FromRedisValue, Value};

use super::job::{Job, JobState, Lease};
use super::lane::Batch;
use super::library::{Function, LIBRARY};
use super::record::new_id;
use super::{AckOutcome, QueueError, Redis, Result};
use crate::queue::keys::QueueKeys;

/// Due scheduled jobs a claim promotes before it takes its own.
const CLAIM_PROMOTE_BATCH: u32 = 100;

/// A job on its way to the enqueue function.
#[derive(Debug)]
pub(crate) struct OutgoingJob {
    pub(crate) id: String,
    pub(crate) priority: u8,
    pub(crate) delay_ms: u64,
    pub(crate) max_attempts: u32,
    pub(crate) group: Option<String>,
    /// The record's body (`record::body`).
    pub(crate) body: Vec<u8>,
}

/// What the enqueue function says of one request's jobs.
#[derive(Debug)]
pub(crate) struct EnqueueReply {
    /// Redis's time of the enqueue.
    pub(crate) now_ms: i64,
    /// Per job: `None` when it was created, else the job already known
    /// under its id.
    pub(crate) known: Vec<Option<Job>>,
}

#[derive(Debug)]
pub(crate) struct EnqueueBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
}

impl Batch for EnqueueBatch {
    type Entry = Vec<OutgoingJob>;
    type Reply = EnqueueReply;

    fn size(jobs: &Self::Entry) -> (usize, usize) {
        (jobs.len(), jobs.iter().map(|job| job.body.len()).sum())
    }

    async fn call(&self, entries: &[Self::Entry]) -> Result<Vec<Result<EnqueueReply>>> {
        let mut cmd = LIBRARY.call(Function::Enqueue, &self.keys);
        cmd.arg(entries.len());
        for jobs in entries {
            cmd.arg(jobs.len());
            for job in jobs {
                cmd.arg(&job.id)
                    .arg(job.priority)
                    .arg(job.delay_ms)
                    .arg(job.max_attempts)
                    .arg(job.group.as_deref().unwrap_or(""))
                    .arg(&job.body);
            }
        }
        let (now_ms, replies): (i64, Vec<Vec<Value>>) = self.redis.query(&cmd).await?;
        Ok(replies
            .into_iter()
            .map(|reply| {
                let mut items = reply.into_iter();
                let status = items.next().map(String::from_redis_value);
                match status {
                    Some(Ok(status)) if status == "OK" => {
                        let known = items.map(known_job).collect::<Result<_>>()?;
                        Ok(EnqueueReply { now_ms, known })
                    }
                    Some(Ok(status)) if status == "SEQUENCE_EXHAUSTED" => {
                        Err(QueueError::SequenceExhausted)
                    }
                    _ => Err(malformed("enqueue")),
                }
            })
            .collect())
    }
}

/// `1` for a created job, else the view of the one already known.
fn known_job(item: Value) -> Result<Option<Job>> {
    match item {
        Value::Int(1) => Ok(None),
        view => Job::from_redis_value(view)
            .map(Some)
            .map_err(|_| malformed("enqueue")),
    }
}

/// One request's claim: its acks first, then up to `max_jobs` jobs.
#[derive(Debug)]
pub(crate) struct ClaimEntry {
    pub(crate) lease_ms: u64,
    pub(crate) max_jobs: u32,
    /// `""` for none.
    pub(crate) worker: String,
    /// Jobs to acknowledge first: id and lease token.
    pub(crate) acks: Vec<(String, String)>,
}

/// What one request's claim did.
#[derive(Debug, Default)]
pub struct Claimed {
    /// One outcome per ack the request brought, in order.
    pub acked: Vec<AckOutcome>,
    pub jobs: Vec<Job>,
    /// Why fewer jobs were handed out than asked, when a setting of the
    /// queue, not an empty queue, was the reason.
    pub held: Option<Held>,
}

/// A setting that held jobs back from a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    Paused,
    MaxInFlight,
    /// The next token comes in this long.
    RateLimit(std::time::Duration),
}

#[derive(Debug)]
pub(crate) struct ClaimBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
    /// Share of handed-out jobs taken from the least urgent class, in
    /// parts per million.
    pub(crate) floor_ppm: u64,
}

/// The claim function's reply per request: ack statuses, then per leased
/// job `{id, record, token}`.
type RawClaim = (Vec<String>, Vec<(String, Vec<u8>, String)>);

impl Batch for ClaimBatch {
    type Entry = ClaimEntry;
    type Reply = Claimed;

    fn size(entry: &ClaimEntry) -> (usize, usize) {
        let acks = entry.acks.iter().map(|(id, token)| id.len() + token.len());
        (
            entry.max_jobs as usize + entry.acks.len(),
            entry.worker.len() + acks.sum::<usize>(),
        )
    }

    async fn call(&self, entries: &[ClaimEntry]) -> Result<Vec<Result<Claimed>>> {
        let mut cmd = LIBRARY.call(Function::Claim, &self.keys);
        cmd.arg(CLAIM_PROMOTE_BATCH)
            .arg(self.floor_ppm)
            .arg(new_id())
            .arg(entries.len());
        for entry in entries {
            cmd.arg(entry.lease_ms)
                .arg(entry.max_jobs)
                .arg(&entry.worker)
                .arg(entry.acks.len());
            for (id, token) in &entry.acks {
                cmd.arg(id).arg(token);
            }
        }
        let (now_ms, replies, held, wait_ms): (i64, Vec<RawClaim>, String, u64) =
            self.redis.query(&cmd).await?;
        let held = match held.as_str() {
            "paused" => Some(Held::Paused),
            "max_in_flight" => Some(Held::MaxInFlight),
            "rate_limit" => Some(Held::RateLimit(std::time::Duration::from_millis(wait_ms))),
            "" => None,
            _ => return Err(malformed("claim")),
        };
        Ok(entries
            .iter()
            .zip(replies)
            .map(|(entry, (acks, jobs))| {
                let acked = acks
                    .iter()
                    .map(|status| AckOutcome::parse(status))
                    .collect::<Result<_>>()?;
                let expires_at_ms = now_ms + i64::try_from(entry.lease_ms).unwrap_or(i64::MAX);
                let jobs = jobs
                    .into_iter()
                    .map(|(id, record, token)| {
                        let lease = Lease {
                            token,
                            worker: (!entry.worker.is_empty()).then(|| entry.worker.clone()),
                            expires_at_ms,
                        };
                        let state = JobState::Processing;
                        Job::from_record(id, &record, state, None, Some(lease))
                            .ok_or_else(|| malformed("claim"))
                    })
                    .collect::<Result<_>>()?;
                Ok(Claimed { acked, jobs, held })
            })
            .collect())
    }
}

#[derive(Debug)]
pub(crate) struct AckBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
}

impl Batch for AckBatch {
    /// Ids and lease tokens.
    type Entry = Vec<(String, String)>;
    type Reply = Vec<AckOutcome>;

    fn size(leases: &Self::Entry) -> (usize, usize) {
        let bytes = leases.iter().map(|(id, token)| id.len() + token.len());
        (leases.len(), bytes.sum())
    }

    async fn call(&self, entries: &[Self::Entry]) -> Result<Vec<Result<Vec<AckOutcome>>>> {
        let mut cmd = LIBRARY.call(Function::Ack, &self.keys);
        for (id, token) in entries.iter().flatten() {
            cmd.arg(id).arg(token);
        }
        let statuses: Vec<String> = self.redis.query(&cmd).await?;
        if statuses.len() != entries.iter().map(Vec::len).sum::<usize>() {
            return Err(malformed("ack"));
        }
        let mut statuses = statuses.iter();
        Ok(entries
            .iter()
            .map(|leases| {
                statuses
                    .by_ref()
                    .take(leases.len())
                    .map(|status| AckOutcome::parse(status))
                    .collect()
            })
            .collect())
    }
}

fn malformed(function: &str) -> QueueError {
    QueueError::Unknown(anyhow::anyhow!(
        "the {function} function answered something unexpected"
    ))
}
