//! A job: as the operations answer it (`Job`, decoded from the functions'
//! view in `decode`), as an enqueue adds it (`NewJob`, with its
//! options), and the events of its history (`event`).

pub(crate) mod decode;
mod event;

pub use event::Event;

use serde_json::value::RawValue;

use crate::otel::TraceHeaders;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Scheduled,
    Processing,
    Dead,
    /// Acked, and kept with its result until its retention ends.
    Completed,
    /// Ended by a cancel, and kept until its retention ends.
    Cancelled,
    /// Waiting for its dependencies to complete.
    Waiting,
}

/// How a dependency of a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Dead,
    Cancelled,
    Deleted,
}

/// One dependency of a job: its ref (`queue/id`), and how it ended, with
/// its result when it completed with one; `None` while it has not ended.
#[derive(Debug, Clone)]
pub struct Dependency {
    pub reference: String,
    pub outcome: Option<Outcome>,
    pub result: Option<Box<RawValue>>,
}

/// The dependencies of a job enqueued with `after`.
#[derive(Debug, Clone)]
pub struct Dependencies {
    /// A failed dependency counts as finished (else it fails the job).
    pub ignore_failure: bool,
    /// Those not finished yet.
    pub left: u32,
    pub list: Vec<Dependency>,
}

/// A job's current lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub token: String,
    pub worker: Option<String>,
    pub expires_at_ms: i64,
}

impl Lease {
    /// Its fence, the number its token ends with (see `hand_out` in
    /// `lua/lib/claim.lua`).
    pub fn fence(&self) -> Option<u64> {
        self.token.rsplit('-').next()?.parse().ok()
    }
}

/// One job, in any state.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub task: String,
    pub args: Box<RawValue>,
    pub priority: u8,
    pub state: JobState,
    pub attempts: u32,
    pub max_attempts: u32,
    pub enqueued_at_ms: i64,
    /// When a scheduled job becomes claimable.
    pub run_at_ms: Option<i64>,
    pub lease: Option<Lease>,
    pub last_error: Option<String>,
    pub dead_at_ms: Option<i64>,
    pub completed_at_ms: Option<i64>,
    /// What the worker that completed the job sent with its ack.
    pub result: Option<Box<RawValue>>,
    /// The latest progress its worker reported, until the job ends.
    pub progress: Option<Box<RawValue>>,
    /// The group the job shares its priority class with fairly.
    pub group: Option<String>,
    /// The schedule that made the job.
    pub schedule: Option<String>,
    /// How long it waits after a failed attempt.
    pub backoff: Option<Backoff>,
    /// When the job, not claimed by then, is no longer delivered; until
    /// it ends.
    pub expires_at_ms: Option<i64>,
    /// The dedup key the job holds, until it lets it go.
    pub dedup_key: Option<String>,
    /// The reason of the cancel asked of it (`Some("")` for none given):
    /// a processing job's, or a cancelled job's.
    pub cancel: Option<String>,
    /// Those of a job enqueued with `after`, until it ends.
    pub dependencies: Option<Dependencies>,
    /// Up to 100 of the jobs waiting for it that have not heard of its end
    /// (`queue/id` each).
    pub dependants: Vec<String>,
    pub trace: Option<TraceHeaders>,
}

/// Whether `id` has the form of a job id, `^[A-Za-z0-9_.:-]{1,128}$`:
/// also that of groups.
pub fn is_job_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// A job to add.
#[derive(Debug)]
pub struct NewJob {
    /// The client's id, for an idempotent enqueue; a fresh one when `None`.
    pub id: Option<String>,
    pub task: String,
    pub args: Box<RawValue>,
    pub options: JobOptions,
    /// The jobs it waits for.
    pub after: Option<After>,
    /// The W3C trace it was enqueued under.
    pub trace: Option<TraceHeaders>,
}

/// How a job is to be run: the options of an enqueue that go with the job
/// to the functions as they are (its id, task and args go as its record's
/// body, its dependencies once registered). A new job option is a field
/// here, its argument in `exchange::wire::push_jobs`, and the Lua that
/// reads it (`lua/lib/enqueue.lua`); the jobs prioq makes itself (a
/// schedule's) take its default.
#[derive(Debug, Clone)]
pub struct JobOptions {
    pub priority: u8,
    pub delay_ms: u64,
    /// When it may first be claimed (ms since the epoch by Redis's clock),
    /// instead of `delay_ms`: a time passed, at once.
    pub run_at_ms: Option<u64>,
    pub max_attempts: u32,
    /// The group it shares its priority class with fairly; `None` joins
    /// the group of jobs without one.
    pub group: Option<String>,
    /// How long it is kept once acked, in ms; `None` for the queue's
    /// `retain_ms`.
    pub retain_ms: Option<u64>,
    pub expiry: Option<Expiry>,
    pub dedup: Option<Dedup>,
    /// How long it waits before its next attempt after a failure.
    pub backoff: Option<Backoff>,
}

/// The options of an enqueue that sets none, as the API takes it (but
/// `max_attempts`, whose default is configured: the API's own default).
impl Default for JobOptions {
    fn default() -> Self {
        Self {
            priority: 1,
            delay_ms: 0,
            run_at_ms: None,
            max_attempts: 5,
            group: None,
            retain_ms: None,
            expiry: None,
            dedup: None,
            backoff: None,
        }
    }
}

/// How long a job waits, after a failed attempt (a nack without
/// `delay_ms`, or a lease that expired), before it may be claimed again:
/// `delay_ms` each time, or, when `exponential`, `delay_ms` doubled with
/// each failure after the first (at most 30 days).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub delay_ms: u64,
    pub exponential: bool,
}

impl Backoff {
    /// Its entry in the queue's `backoff` hash, `<f|e><delay ms>` (see
    /// `lua/lib/keys.lua`), as an enqueue sends it.
    pub(crate) fn entry(self) -> String {
        let kind = if self.exponential { 'e' } else { 'f' };
        format!("{kind}{}", self.delay_ms)
    }

    /// From its entry; `None` when it is not one.
    pub(crate) fn from_entry(entry: &str) -> Option<Self> {
        let exponential = match entry.as_bytes().first()? {
            b'e' => true,
            b'f' => false,
            _ => return None,
        };
        Some(Self {
            delay_ms: entry.get(1..)?.parse().ok()?,
            exponential,
        })
    }
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

/// The jobs a job waits for, and what their failure does.
#[derive(Debug, Clone)]
pub struct After {
    /// Each `(queue, id)`, without repeats.
    pub refs: Vec<(String, String)>,
    /// A dependency that ends dead, cancelled or deleted counts as
    /// finished; else it sends the job to the DLQ.
    pub ignore_failure: bool,
}

impl NewJob {
    /// The job as it was created under `id` at `now` (ms).
    pub(crate) fn into_job(self, id: String, now: i64) -> Job {
        let options = self.options;
        let delay = match options.run_at_ms {
            Some(at) => i64::try_from(at).map_or(i64::MAX, |at| at.saturating_sub(now).max(0)),
            None => i64::try_from(options.delay_ms).unwrap_or(i64::MAX),
        };
        Job {
            id,
            task: self.task,
            args: self.args,
            priority: options.priority,
            state: if delay > 0 {
                JobState::Scheduled
            } else {
                JobState::Pending
            },
            attempts: 0,
            max_attempts: options.max_attempts,
            enqueued_at_ms: now,
            run_at_ms: (delay > 0).then(|| now + delay),
            lease: None,
            last_error: None,
            dead_at_ms: None,
            completed_at_ms: None,
            result: None,
            progress: None,
            group: options.group,
            schedule: None,
            backoff: options.backoff,
            expires_at_ms: options
                .expiry
                .map(|expiry| now.saturating_add(i64::try_from(expiry.in_ms).unwrap_or(i64::MAX))),
            dedup_key: options.dedup.map(|dedup| dedup.key),
            cancel: None,
            dependencies: None,
            dependants: Vec::new(),
            trace: self.trace,
        }
    }
}
