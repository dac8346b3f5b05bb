//! The recorded history: one JSON object a line, one line an operation.
//!
//! Every operation says who made it (`process`), on which queue, when it
//! started and ended (milliseconds of the runner's wall clock), how it
//! ended (`outcome`) and, by its `kind`, what it sent and what it was
//! answered. Times that Redis reported (lease deadlines, enqueue times)
//! are kept apart from the runner's, in fields ending in `_at`: the
//! checker never compares the two clocks without bounding their offset.
//!
//! A new operation kind is one more variant of [`Call`].

use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How an operation ended, as far as its caller can know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Answered with success.
    Ok,
    /// Known to have had no effect: refused, or never sent.
    Failed,
    /// May or may not have had its effect: a timeout, a dropped
    /// connection, a 503 or 507 with `"effect": "unknown"`.
    Unknown,
}

/// A job's backoff, as an enqueue sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    pub delay_ms: u64,
    pub exponential: bool,
}

impl Backoff {
    /// The wait after the job's `attempts`-th failed attempt, as prioq
    /// computes it (doubling, at most 30 days).
    pub fn wait_ms(self, attempts: u32) -> u64 {
        if !self.exponential {
            return self.delay_ms;
        }
        let doublings = attempts.saturating_sub(1).min(32);
        (self.delay_ms << doublings).min(2_592_000_000)
    }
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Its number, unique in the history; violations name operations by it.
    pub op: u64,
    pub process: String,
    pub queue: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub outcome: Outcome,
    /// The HTTP status, when there was an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(flatten)]
    pub call: Call,
}

/// What an operation sent and, when answered, what it was told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Call {
    /// A queue's settings, as patched.
    Configure {
        max_in_flight: Option<u64>,
        group_max_in_flight: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shards: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_pending: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_pending_bytes: Option<u64>,
        /// Job histories kept (`history_ms`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        history_ms: Option<u64>,
    },
    /// A recurring schedule put in place; its jobs' ids are
    /// `{name}:{fire time}`.
    Schedule {
        name: String,
        cron: String,
    },
    Enqueue {
        id: String,
        priority: u8,
        group: Option<String>,
        delay_ms: u64,
        /// The jobs it waits for: ids of its queue's, `queue/id` of
        /// another's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        after: Vec<String>,
        /// Its deduplication key, as sent (mode `drop`, or `replace` when
        /// `replace`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dedup: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replace: bool,
        /// Its expiry, as sent (dead-lettered when it comes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_in_ms: Option<u64>,
        /// Its deadline as answered, by Redis's clock.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created: Option<bool>,
        /// The id of the job the answer named: another job's when the
        /// dedup key was held by it (nothing was made).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered: Option<String>,
        /// Answered `replaced: true`: the job that held the key took this
        /// enqueue's task, args and priority.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replaced: bool,
        /// Its backoff, as sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backoff: Option<Backoff>,
        /// The time it may first be handed out, as sent (`run_at`, ms by
        /// Redis's clock), in place of a delay.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_at: Option<i64>,
        /// The bytes its job counts against `max_pending_bytes` (its task's
        /// length, the task, the args as sent; the load sends no trace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
    },
    Claim {
        worker: String,
        request_id: String,
        lease_ms: u64,
        max_jobs: u32,
        /// Acks sent inside the claim.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        acks: Vec<AckEntry>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        jobs: Vec<Lease>,
        /// The status of each ack sent inside the claim, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        acked: Vec<u16>,
        /// The shards of a sharded queue the claim said it could not
        /// reach (`skipped_shards`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skipped: Vec<u32>,
    },
    Ack(AckEntry),
    Extend {
        id: String,
        token: String,
        lease_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<i64>,
    },
    Nack {
        id: String,
        token: String,
        /// As sent; `None`: not sent (the job's backoff applies).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delay_ms: Option<u64>,
        /// What an answer ok said: the job's attempts and state, and when
        /// it is due (`scheduled` only), by Redis's clock.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempts: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_at: Option<i64>,
    },
    /// A cancel, and the state it answered (`cancelled`, or `processing`
    /// for a running job asked to stop).
    Cancel {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
    },
    /// A job read back at the end of the run: its state (`None`: 404).
    Read {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enqueued_at: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Its history's events, read with it on a queue that keeps
        /// histories.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        events: Option<Vec<Event>>,
    },
}

/// An event of a job's history, as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
}

/// An ack: alone, or inside a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AckEntry {
    pub id: String,
    pub token: String,
    pub result: Value,
}

/// A job a claim leased, as the answer showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    pub token: String,
    pub priority: u8,
    pub group: Option<String>,
    pub attempts: u32,
    /// When the job was enqueued, by Redis's clock (ms since the epoch).
    pub enqueued_at: i64,
    /// The lease's deadline, by Redis's clock.
    pub expires_at: i64,
    /// The client id of the enqueue whose task, args and priority the job
    /// was handed out with (`args.by`): its own, or a replace's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The fence the claim answered (histories written before it was
    /// recorded have none: see [`Lease::fence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
}

impl Call {
    /// An enqueue of job `id` that waits for nothing and has no key,
    /// expiry, backoff or start time, answered with the job view `view`
    /// (`Null` when unanswered), counting `bytes` against the queue's bound.
    pub fn plain_enqueue(
        id: &str,
        priority: u8,
        group: Option<String>,
        view: &Value,
        bytes: Option<u64>,
    ) -> Self {
        Self::Enqueue {
            id: id.to_owned(),
            priority,
            group,
            delay_ms: 0,
            after: Vec::new(),
            dedup: None,
            replace: false,
            expires_in_ms: None,
            expires_at: None,
            created: view["created"].as_bool(),
            answered: view["id"].as_str().map(str::to_owned),
            replaced: false,
            backoff: None,
            run_at: None,
            bytes,
        }
    }
}

impl Lease {
    /// The fence the claim answered; for a history that did not record
    /// it, the one its token ends with (`<prefix>-<fence>`).
    pub fn fence(&self) -> Option<u64> {
        self.fence
            .or_else(|| self.token.rsplit_once('-')?.1.parse().ok())
    }
}

/// Reads a history written by [`write_line`]; an error names the line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Op>> {
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    file.lines()
        .enumerate()
        .map(|(n, line)| {
            let line = line?;
            serde_json::from_str(&line)
                .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), n + 1))
        })
        .collect()
}

/// Appends `op` as one line.
pub fn write_line(out: &mut impl Write, op: &Op) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, op)?;
    out.write_all(b"\n")
}
