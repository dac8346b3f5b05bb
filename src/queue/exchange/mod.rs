//! The operations whose requests are sent in batches (see `lane`):
//! enqueue, claim (with the acks a worker sends along) and ack. The
//! requests of all three that arrive together on one queue go in one call
//! of the `exchange` function, acks first, then enqueues, then claims; the
//! call's reply becomes one answer per request (`wire`). The claims of a
//! sharded queue read each shard's line first (`HeadsBatch`).

pub(crate) mod lane;
mod wire;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use redis;
use serde_json::value::RawValue;

use crate::queue::deps::Courier;
use crate::queue::error::{QueueError, Result};
use crate::queue::job::Job;
use crate::queue::store::keys::QueueKeys;
use crate::queue::store::library::{Function, LIBRARY};
use crate::queue::store::{Call, Redis, Repeat};
use lane::{Batch, Lane};
use wire::malformed;
pub(crate) use wire::{CLAIM_PROMOTE_BATCH, known_job, push_jobs};
pub use wire::{Route, exchange_answers, exchange_command};

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
    pub expiry: Option<Expiry>,
    pub dedup: Option<Dedup>,
    /// Its dependencies as the enqueue part takes them: `<d|i>` (a failed
    /// one fails the job, or is ignored), then each ref `queue/id`, after
    /// `=` when it lives in the job's own shard, space-separated.
    pub after: Option<String>,
}

/// When a job not claimed by then is never delivered, and what becomes of
/// it then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// From its enqueue.
    pub in_ms: u64,
    /// Removed rather than dead-lettered.
    pub drop: bool,
}

/// A job's deduplication key: while the job that holds it lives, and
/// until `ttl_ms` has passed since that job's enqueue, another enqueue
/// with the key is answered with that job (`replace`: while it waits, it
/// takes the new one's task, args, priority and delay instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedup {
    pub key: String,
    pub ttl_ms: u64,
    pub replace: bool,
}

/// A job an enqueue found already there, under its id or its dedup key.
#[derive(Debug)]
pub struct Known {
    pub job: Job,
    /// The job held the dedup key and was waiting: it took the enqueued
    /// job's task, args, priority and delay.
    pub replaced: bool,
    /// The job was made by this enqueue, with dependencies: answered in
    /// its stored form, which says whether it waits.
    pub made: bool,
}

/// What the `exchange` function says of one enqueue request's jobs.
#[derive(Debug)]
pub struct EnqueueReply {
    /// Redis's time of the enqueue.
    pub now_ms: i64,
    /// Per job: `None` when it was created, else the job already known
    /// under its id or its dedup key.
    pub known: Vec<Option<Known>>,
    /// When the call was sent again after its connection dropped: how
    /// long before `now_ms` its first send began, at most. A job known now
    /// but enqueued since then may have been created by that first send.
    pub resent_within_ms: Option<i64>,
}

impl EnqueueReply {
    /// Whether `known`, answered for a job sent under `id`, may have been
    /// created by this request's own first send, whose answer was lost.
    pub fn maybe_created_here(&self, id: &str, known: &Known) -> bool {
        known.job.id == id
            && !known.replaced
            && self
                .resent_within_ms
                .is_some_and(|within| known.job.enqueued_at_ms >= self.now_ms - within)
    }
}

/// One acknowledgement.
#[derive(Debug, Clone)]
pub struct Ack {
    pub id: String,
    pub lease_token: String,
    /// Kept with the job when it is retained once acked; dropped otherwise.
    pub result: Option<Box<RawValue>>,
}

/// The result of one acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    Acked,
    LeaseLost,
    NotFound,
}

/// One request's claim: its acks first, then up to `max_jobs` jobs.
#[derive(Debug)]
pub struct ClaimEntry {
    pub lease_ms: u64,
    pub max_jobs: u32,
    /// `""` for none.
    pub worker: String,
    /// Makes the claim safe to repeat: a repeat with the same id and
    /// worker answers what the first did (see `claim_all` in
    /// `lua/lib/claim.lua`).
    pub request_id: Option<String>,
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
    /// Jobs whose expiry had come that the claim's calls ended on the way
    /// (a call's count goes with its first claim).
    pub expired: u64,
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
    /// Told of the calls that left ended jobs in the shard's outbox.
    pub(crate) courier: Courier,
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
        match self.send(entries).await {
            // Out of memory, Redis refused the whole call for its enqueues:
            // the acks and claims go again without them (they run then),
            // and the enqueues are refused.
            Err(QueueError::Full(error)) if entries.iter().any(|e| !e.enqueues()) => {
                let others: Vec<Exchange> = entries.iter().filter_map(Exchange::draining).collect();
                let mut answered = self.send(&others).await?.into_iter();
                Ok(entries
                    .iter()
                    .map(|entry| match entry.enqueues() {
                        true => Err(QueueError::Full(anyhow::anyhow!("{error:#}"))),
                        false => answered.next().unwrap_or_else(|| Err(malformed())),
                    })
                    .collect())
            }
            other => other,
        }
    }
}

impl Exchange {
    fn enqueues(&self) -> bool {
        matches!(self, Self::Enqueue(_))
    }

    /// The same request, unless it enqueues (its claim and acks are shared).
    fn draining(&self) -> Option<Self> {
        match self {
            Self::Enqueue(_) => None,
            Self::Claim(claim) => Some(Self::Claim(Arc::clone(claim))),
            Self::Ack(acks) => Some(Self::Ack(Arc::clone(acks))),
        }
    }
}

impl ExchangeBatch {
    /// One call of the function carrying `entries`.
    async fn send(&self, entries: &[Exchange]) -> Result<Vec<Result<Exchanged>>> {
        let route = Route {
            shards: self.shards,
            arrival: self.take_arrivals(entries).await?,
        };
        let cmd = exchange_command(&self.keys, self.floor_ppm, route, entries);
        // Enqueues of ids fixed before sending add nothing the second time.
        let repeat = match entries.iter().all(Exchange::enqueues) {
            true => Repeat::Safe,
            false => Repeat::Once,
        };
        let (reply, resent) = self.redis.query_told(&Call { cmd, repeat }).await?;
        let (mut answers, outboxed) = exchange_answers(entries, reply)?;
        if outboxed > 0 {
            self.courier.deliver();
        }
        if let Some(resent) = resent {
            // A millisecond more: Redis's times are whole milliseconds.
            let within = i64::try_from(resent.as_millis())
                .unwrap_or(i64::MAX)
                .saturating_add(1);
            for answer in &mut answers {
                if let Ok(Exchanged::Enqueued(reply)) = answer {
                    reply.resent_within_ms = Some(within);
                }
            }
        }
        Ok(answers)
    }

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
    let mut cmd = Call::safe(redis::cmd("HINCRBY"));
    cmd.arg(meta).arg("arrivals").arg(count);
    let last: u64 = redis.query(&cmd).await?;
    Ok(last - count as u64 + 1)
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
    /// How many of `scores` the claims sharing this read have picked: each
    /// picks after those before it, as claims one after the other would.
    pub(crate) taken: AtomicUsize,
}

/// One claim's read of a shard: how many claims of one job it stands for
/// (a read shared by several claims reads for all of them),
/// and its request id's field of `claims` when it has one.
#[derive(Debug)]
pub(crate) struct HeadsEntry {
    pub(crate) claims: u32,
    pub(crate) field: Option<String>,
}

/// What a shard says to one claim: its line, and whether it answered the
/// claim's request id jobs before (the claim is a repeat).
#[derive(Debug)]
pub(crate) struct Heads {
    pub(crate) line: Arc<Line>,
    pub(crate) answered: bool,
}

impl Batch for HeadsBatch {
    type Entry = HeadsEntry;
    type Reply = Heads;

    fn size(entry: &HeadsEntry) -> (usize, usize) {
        (entry.claims as usize, 0)
    }

    async fn call(&self, entries: &[HeadsEntry]) -> Result<Vec<Result<Self::Reply>>> {
        let mut cmd = LIBRARY.call(Function::Heads, &self.keys);
        cmd.arg(CLAIM_PROMOTE_BATCH)
            .arg(entries.iter().map(|entry| entry.claims).sum::<u32>().max(1))
            .arg(self.floor_ppm)
            .arg(self.shards);
        for field in entries.iter().filter_map(|entry| entry.field.as_ref()) {
            cmd.arg(field);
        }
        let reply: Vec<String> = self.redis.query(&cmd).await?;
        let (capped, rest) = reply.split_first().ok_or_else(malformed)?;
        let fields = entries.iter().filter(|entry| entry.field.is_some()).count();
        if rest.len() < fields {
            return Err(malformed());
        }
        let (flags, scores) = rest.split_at(fields);
        let line = Arc::new(Line {
            capped: capped == "1",
            scores: scores
                .iter()
                .map(|score| score.parse::<f64>().map_err(|_| malformed()))
                .collect::<Result<_>>()?,
            taken: AtomicUsize::new(0),
        });
        let mut flags = flags.iter();
        Ok(entries
            .iter()
            .map(|entry| {
                let answered =
                    entry.field.is_some() && flags.next().is_some_and(|flag| flag == "1");
                Ok(Heads {
                    line: Arc::clone(&line),
                    answered,
                })
            })
            .collect())
    }
}

impl ClaimEntry {
    /// The field of the shard's `claims` that keeps this claim's answer,
    /// when it has a request id: as `claim_field` in `lua/lib/claim.lua`.
    pub(crate) fn field(&self) -> Option<String> {
        let id = self.request_id.as_ref()?;
        Some(format!("{}:{id}{}", id.len(), self.worker))
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
