//! The requests an `exchange` call carries (enqueues, claims, acks) and
//! what it answers each.

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::queue::job::{Job, JobOptions};

/// A job on its way to the `exchange` function.
#[derive(Debug)]
pub struct OutgoingJob {
    pub id: String,
    /// The record's body (`record::body`).
    pub body: Vec<u8>,
    pub options: JobOptions,
    /// In a sharded queue, its arrival number when its request took one
    /// for each of its jobs, in order, before it was split over shards;
    /// `None` takes the next of its call's (see `Route`).
    pub arrival: Option<u64>,
    /// Its dependencies as the enqueue part takes them: `<d|i>` (a failed
    /// one fails the job, or is ignored), then each ref `queue/id`, after
    /// `=` when it lives in the job's own shard, space-separated.
    pub after: Option<String>,
}

/// Whether the queue's `max_pending` may refuse an enqueue request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Refused when its new jobs would take the jobs waiting past it.
    Bounded,
    /// Taken whatever the bound: a request split over shards, checked in
    /// each before any part was sent (`fill`), or a schedule's job.
    Admitted,
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
    /// A part of a sharded queue's claim hands out only these jobs, those
    /// it picked in the shard's line, in order, that still wait (see
    /// `claim_shards`). Empty: not a part; any job may be handed out.
    pub picked: Vec<String>,
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
    /// The shards of a sharded queue the claim could not reach (their
    /// read or their part failed): their jobs may have been passed over.
    pub skipped: Vec<u32>,
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
    Enqueue(Vec<OutgoingJob>, Admission),
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

impl Exchange {
    pub(super) fn enqueues(&self) -> bool {
        matches!(self, Self::Enqueue(..))
    }

    /// The same request, unless it enqueues (its claim and acks are shared).
    pub(super) fn draining(&self) -> Option<Self> {
        match self {
            Self::Enqueue(..) => None,
            Self::Claim(claim) => Some(Self::Claim(Arc::clone(claim))),
            Self::Ack(acks) => Some(Self::Ack(Arc::clone(acks))),
        }
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
