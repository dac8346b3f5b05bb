//! The operations whose requests are sent in batches (see `lane`):
//! enqueue, claim (with the acks a worker sends along) and ack. The
//! requests of all three that arrive together on one queue go in one call
//! of the `exchange` function, acks first, then enqueues, then claims; the
//! call's reply becomes one answer per request. `exchange_command` and
//! `exchange_answers` are the function's argument and reply layout, in one
//! place for prioq and for tools that call the function directly (the load
//! benchmark's raw-Redis baseline).

use std::sync::Arc;

use redis::{self, Cmd, FromRedisValue, Value};

use super::job::{Job, JobState, Lease};
use super::lane::{Batch, Lane};
use super::library::{Function, LIBRARY};
use super::record::new_id;
use super::{Ack, AckOutcome, QueueError, Redis, Result};
use crate::queue::keys::QueueKeys;

/// Due scheduled jobs a claim promotes before it takes its own.
const CLAIM_PROMOTE_BATCH: u32 = 100;

/// A job on its way to the `exchange` function.
#[derive(Debug)]
pub struct OutgoingJob {
    pub id: String,
    pub priority: u8,
    pub delay_ms: u64,
    pub max_attempts: u32,
    pub group: Option<String>,
    /// `None` for the queue's retention.
    pub retain_ms: Option<u64>,
    /// The record's body (`record::body`).
    pub body: Vec<u8>,
    /// In a sharded queue, its arrival number when its request took one
    /// for each of its jobs, in order, before it was split over shards;
    /// `None` takes the next of its call's (see `Route`).
    pub arrival: Option<u64>,
}

/// What the `exchange` function says of one enqueue request's jobs.
#[derive(Debug)]
pub struct EnqueueReply {
    /// Redis's time of the enqueue.
    pub now_ms: i64,
    /// Per job: `None` when it was created, else the job already known
    /// under its id.
    pub known: Vec<Option<Job>>,
}

/// `1` for a created job, else the view of the one already known.
pub(crate) fn known_job(item: Value) -> Result<Option<Job>> {
    match item {
        Value::Int(1) => Ok(None),
        view => Job::from_redis_value(view)
            .map(Some)
            .map_err(|_| malformed()),
    }
}

/// One request's claim: its acks first, then up to `max_jobs` jobs.
#[derive(Debug)]
pub struct ClaimEntry {
    pub lease_ms: u64,
    pub max_jobs: u32,
    /// `""` for none.
    pub worker: String,
    /// Jobs to acknowledge first.
    pub acks: Vec<Ack>,
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

/// One request on its way to the `exchange` function. A claim and acks
/// are shared, not copied, with the caller, which keeps them to send again
/// when the call is refused for a changed number of shards.
#[derive(Debug)]
pub enum Exchange {
    Enqueue(Vec<OutgoingJob>),
    Claim(Arc<ClaimEntry>),
    Ack(Arc<Vec<Ack>>),
}

/// What the `exchange` function answers one request.
#[derive(Debug)]
pub enum Exchanged {
    Enqueued(EnqueueReply),
    Claimed(Claimed),
    Acked(Vec<AckOutcome>),
}

/// The acks, enqueues and claims of one queue.
#[derive(Debug)]
pub(crate) struct ExchangeBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
    /// Share of handed-out jobs taken from the least urgent class, in
    /// parts per million.
    pub(crate) floor_ppm: u64,
    /// The number of shards of the queue this lane was routed for.
    pub(crate) shards: u32,
    /// In a sharded queue, the home's `meta`, whose `arrivals` counter
    /// numbers the jobs enqueued (see `take_tags` in the library).
    pub(crate) arrivals: Option<String>,
}

/// The function's reply: Redis's time; every ack's status, the claims'
/// acks after the others; the enqueues' answers, one request after the
/// other (a status, then an item per job when it is `OK`); the claims'
/// (the number of jobs leased, then id, record and token per job); why the
/// claims got fewer jobs than asked, and the wait for the next rate limit
/// token.
type RawExchange = (i64, Vec<String>, Vec<Value>, Vec<Value>, String, u64);

/// Adds one enqueue request's jobs to a call (the enqueue part's section
/// layout): their number, then eight arguments per job. `sharded` holds,
/// in a sharded queue's call, the next arrival number of the call for the
/// jobs that have none of their own; outside one, jobs have none.
pub(crate) fn push_jobs(
    cmd: &mut Cmd,
    jobs: &[OutgoingJob],
    mut sharded: Option<&mut Option<u64>>,
) {
    cmd.arg(jobs.len());
    for job in jobs {
        let arrival = sharded.as_deref_mut().and_then(|next| {
            job.arrival.or_else(|| {
                let n = next.as_mut()?;
                *n += 1;
                Some(*n - 1)
            })
        });
        cmd.arg(&job.id)
            .arg(job.priority)
            .arg(job.delay_ms)
            .arg(job.max_attempts)
            .arg(job.group.as_deref().unwrap_or(""))
            .arg(job.retain_ms.map(|ms| ms.to_string()).unwrap_or_default())
            .arg(&job.body)
            .arg(arrival.map(|n| n.to_string()).unwrap_or_default());
    }
}

impl Batch for ExchangeBatch {
    type Entry = Exchange;
    type Reply = Exchanged;

    fn size(entry: &Exchange) -> (usize, usize) {
        let leases = |acks: &[Ack]| {
            acks.iter()
                .map(|ack| {
                    ack.id.len()
                        + ack.lease_token.len()
                        + ack.result.as_ref().map_or(0, |r| r.get().len())
                })
                .sum::<usize>()
        };
        match entry {
            Exchange::Enqueue(jobs) => (jobs.len(), jobs.iter().map(|job| job.body.len()).sum()),
            Exchange::Claim(claim) => (
                claim.max_jobs as usize + claim.acks.len(),
                claim.worker.len() + leases(&claim.acks),
            ),
            Exchange::Ack(acks) => (acks.len(), leases(acks)),
        }
    }

    async fn call(&self, entries: &[Exchange]) -> Result<Vec<Result<Exchanged>>> {
        let route = Route {
            shards: self.shards,
            arrival: self.take_arrivals(entries).await?,
        };
        let cmd = exchange_command(&self.keys, self.floor_ppm, route, entries);
        exchange_answers(entries, self.redis.query(&cmd).await?)
    }
}

impl ExchangeBatch {
    /// In a sharded queue, reserves arrival numbers for the jobs `entries`
    /// enqueue from the home's counter: answers the first.
    async fn take_arrivals(&self, entries: &[Exchange]) -> Result<Option<u64>> {
        let Some(meta) = &self.arrivals else {
            return Ok(None);
        };
        let jobs: usize = entries
            .iter()
            .map(|entry| match entry {
                Exchange::Enqueue(jobs) => jobs.iter().filter(|job| job.arrival.is_none()).count(),
                _ => 0,
            })
            .sum();
        if jobs == 0 {
            return Ok(None);
        }
        reserve_arrivals(&self.redis, meta, jobs).await.map(Some)
    }
}

/// Reserves `count` arrival numbers from a sharded queue's counter in its
/// home's `meta`: answers the first.
pub(crate) async fn reserve_arrivals(redis: &Redis, meta: &str, count: usize) -> Result<u64> {
    let mut cmd = redis::cmd("HINCRBY");
    cmd.arg(meta).arg("arrivals").arg(count);
    let last: u64 = redis.query(&cmd).await?;
    Ok(last - count as u64 + 1)
}

/// Where an `exchange` call goes: the number of shards its queue was
/// routed for, and in a sharded queue the arrival number of its first
/// enqueued job that has none of its own.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub shards: u32,
    pub arrival: Option<u64>,
}

impl Route {
    /// An unsharded queue's.
    pub const SINGLE: Self = Self {
        shards: 1,
        arrival: None,
    };
}

/// One call of the `exchange` function carrying `entries`: their acks
/// first, then their enqueues, then their claims (each with its own acks),
/// with the bulk floor's share `floor_ppm` in parts per million.
pub fn exchange_command(
    keys: &QueueKeys,
    floor_ppm: u64,
    route: Route,
    entries: &[Exchange],
) -> Cmd {
    let mut acks = Vec::new();
    let mut enqueues = Vec::new();
    let mut claims = Vec::new();
    for entry in entries {
        match entry {
            Exchange::Ack(leases) => acks.extend(leases.iter()),
            Exchange::Enqueue(jobs) => enqueues.push(jobs),
            Exchange::Claim(claim) => claims.push(claim),
        }
    }
    let mut cmd = LIBRARY.call(Function::Exchange, keys);
    cmd.arg(CLAIM_PROMOTE_BATCH)
        .arg(floor_ppm)
        .arg(new_id())
        .arg(route.shards);
    cmd.arg(acks.len());
    for ack in acks {
        push_ack(&mut cmd, ack);
    }
    cmd.arg(enqueues.len());
    let mut arrivals = route.arrival;
    for jobs in enqueues {
        push_jobs(&mut cmd, jobs, (route.shards > 1).then_some(&mut arrivals));
    }
    cmd.arg(claims.len());
    for claim in &claims {
        cmd.arg(claim.lease_ms)
            .arg(claim.max_jobs)
            .arg(&claim.worker)
            .arg(claim.acks.len());
        for ack in &claim.acks {
            push_ack(&mut cmd, ack);
        }
    }
    cmd
}

/// The answer to each of `entries`, in order, from the reply of the
/// `exchange_command` call that carried them; an error when the reply does
/// not fit them.
pub fn exchange_answers(entries: &[Exchange], reply: Value) -> Result<Vec<Result<Exchanged>>> {
    let (now_ms, statuses, enqueued, claimed, held, wait_ms) =
        RawExchange::from_redis_value(reply).map_err(|_| malformed())?;
    let held = match held.as_str() {
        "paused" => Some(Held::Paused),
        "max_in_flight" => Some(Held::MaxInFlight),
        "rate_limit" => Some(Held::RateLimit(std::time::Duration::from_millis(wait_ms))),
        "" => None,
        _ => return Err(malformed()),
    };
    // The claims' acks come after the others'.
    let ack_requests: usize = entries
        .iter()
        .map(|entry| match entry {
            Exchange::Ack(leases) => leases.len(),
            _ => 0,
        })
        .sum();
    let (ack_statuses, claim_statuses) = statuses.split_at(ack_requests.min(statuses.len()));
    let mut ack_statuses = ack_statuses.iter();
    let mut claim_statuses = claim_statuses.iter();
    let mut enqueued = enqueued.into_iter();
    let mut claimed = claimed.into_iter();
    let answers = entries
        .iter()
        .map(|entry| match entry {
            Exchange::Ack(leases) => {
                outcomes(&mut ack_statuses, leases.len()).map(Exchanged::Acked)
            }
            Exchange::Enqueue(jobs) => {
                enqueue_outcome(now_ms, &mut enqueued, jobs.len()).map(Exchanged::Enqueued)
            }
            Exchange::Claim(claim) => {
                let acked = outcomes(&mut claim_statuses, claim.acks.len())?;
                claim_outcome(claim, now_ms, &mut claimed, acked, held).map(Exchanged::Claimed)
            }
        })
        .collect();
    if ack_statuses.next().is_some()
        || claim_statuses.next().is_some()
        || enqueued.next().is_some()
        || claimed.next().is_some()
    {
        return Err(malformed());
    }
    Ok(answers)
}

/// An ack's arguments: id, lease token, result ('' for none).
fn push_ack(cmd: &mut redis::Cmd, ack: &Ack) {
    cmd.arg(&ack.id)
        .arg(&ack.lease_token)
        .arg(ack.result.as_ref().map_or("", |result| result.get()));
}

/// The next `n` ack statuses.
fn outcomes<'a>(
    statuses: &mut impl Iterator<Item = &'a String>,
    n: usize,
) -> Result<Vec<AckOutcome>> {
    (0..n)
        .map(|_| AckOutcome::parse(statuses.next().ok_or_else(malformed)?))
        .collect()
}

/// The next enqueue request's answer: a status, then, when it is `OK`, an
/// item per job (`jobs` of them).
fn enqueue_outcome(
    now_ms: i64,
    items: &mut impl Iterator<Item = Value>,
    jobs: usize,
) -> Result<EnqueueReply> {
    let status = items.next().map(String::from_redis_value);
    match status {
        Some(Ok(status)) if status == "OK" => {
            let known = (0..jobs)
                .map(|_| known_job(items.next().ok_or_else(malformed)?))
                .collect::<Result<_>>()?;
            Ok(EnqueueReply { now_ms, known })
        }
        Some(Ok(status)) if status == "SEQUENCE_EXHAUSTED" => Err(QueueError::SequenceExhausted),
        _ => Err(malformed()),
    }
}

/// The next claim request's answer: the number of jobs leased to it, then
/// id, record and lease token per job.
fn claim_outcome(
    claim: &ClaimEntry,
    now_ms: i64,
    items: &mut impl Iterator<Item = Value>,
    acked: Vec<AckOutcome>,
    held: Option<Held>,
) -> Result<Claimed> {
    let mut next = || items.next().ok_or_else(malformed);
    let count = usize::from_redis_value(next()?).map_err(|_| malformed())?;
    let expires_at_ms = now_ms + i64::try_from(claim.lease_ms).unwrap_or(i64::MAX);
    let jobs = (0..count)
        .map(|_| {
            let id = String::from_redis_value(next()?).map_err(|_| malformed())?;
            let record = Vec::<u8>::from_redis_value(next()?).map_err(|_| malformed())?;
            let token = String::from_redis_value(next()?).map_err(|_| malformed())?;
            let lease = Lease {
                token,
                worker: (!claim.worker.is_empty()).then(|| claim.worker.clone()),
                expires_at_ms,
            };
            Job::from_record(id, &record, JobState::Processing, None, Some(lease))
                .ok_or_else(malformed)
        })
        .collect::<Result<_>>()?;
    Ok(Claimed { acked, jobs, held })
}

/// The reads of one shard's heads (the `heads` function) by the claims of
/// a sharded queue: the claims waiting together share one read.
#[derive(Debug)]
pub(crate) struct HeadsBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
    /// The bulk floor's share, in parts per million of jobs handed out.
    pub(crate) floor_ppm: u64,
    /// The number of shards of the queue this lane was routed for.
    pub(crate) shards: u32,
}

/// What a shard offers claims (see `heads`).
#[derive(Debug)]
pub(crate) struct Line {
    /// A group cap or max_in_flight is set: an ack could change the line.
    pub(crate) capped: bool,
    /// The score first in line for each claim of one job, in turn.
    pub(crate) scores: Vec<f64>,
}

impl Batch for HeadsBatch {
    /// How many claims of one job the claim stands for.
    type Entry = u32;
    type Reply = Arc<Line>;

    fn size(entry: &u32) -> (usize, usize) {
        (*entry as usize, 0)
    }

    async fn call(&self, entries: &[u32]) -> Result<Vec<Result<Self::Reply>>> {
        let mut cmd = LIBRARY.call(Function::Heads, &self.keys);
        cmd.arg(CLAIM_PROMOTE_BATCH)
            .arg(entries.iter().max().copied().unwrap_or(1))
            .arg(self.floor_ppm)
            .arg(self.shards);
        let reply: Vec<String> = self.redis.query(&cmd).await?;
        let (capped, scores) = reply.split_first().ok_or_else(malformed)?;
        let heads = Arc::new(Line {
            capped: capped == "1",
            scores: scores
                .iter()
                .map(|score| score.parse::<f64>().map_err(|_| malformed()))
                .collect::<Result<_>>()?,
        });
        Ok(entries.iter().map(|_| Ok(Arc::clone(&heads))).collect())
    }
}

/// The typed way into a queue's lane.
impl Lane<ExchangeBatch> {
    pub(crate) async fn enqueue(self: &Arc<Self>, jobs: Vec<OutgoingJob>) -> Result<EnqueueReply> {
        match self.submit(Exchange::Enqueue(jobs)).await? {
            Exchanged::Enqueued(reply) => Ok(reply),
            _ => Err(malformed()),
        }
    }

    pub(crate) async fn claim(self: &Arc<Self>, claim: Arc<ClaimEntry>) -> Result<Claimed> {
        match self.submit(Exchange::Claim(claim)).await? {
            Exchanged::Claimed(claimed) => Ok(claimed),
            _ => Err(malformed()),
        }
    }

    pub(crate) async fn ack(self: &Arc<Self>, acks: Arc<Vec<Ack>>) -> Result<Vec<AckOutcome>> {
        match self.submit(Exchange::Ack(acks)).await? {
            Exchanged::Acked(outcomes) => Ok(outcomes),
            _ => Err(malformed()),
        }
    }
}

fn malformed() -> QueueError {
    QueueError::Unknown(anyhow::anyhow!(
        "the exchange function answered something unexpected"
    ))
}
