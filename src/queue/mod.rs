//! The queue's semantics over Redis, one method per operation on
//! [`Broker`], each one call of a Redis function. No HTTP types in here.
//!
//! - `jobs`: the job operations (enqueue, claim, ack, extend, nack, read,
//!   wait, delete, requeue); `settings`, `stats`, `paging` (the DLQ's and
//!   the groups' pages), `sweep` (one sweep of a queue) and `schedules`
//!   the others, by subject. This module keeps the `Broker` and the
//!   registry of queues.
//! - `shards`: which shards a queue has, routing each operation to its
//!   shards and merging their answers.
//! - `exchange`: the concurrent enqueues, claims and acks of a queue sent
//!   together in one call (`lane`: group commit) and the call's wire format
//!   (`wire`).
//! - `store`: the Redis side: connections, the function library, key
//!   names, a job's stored form.
//! - `job`: a job decoded; `error`: what can go wrong; `wake`: wake-ups
//!   between instances; `counters`: this instance's counters per queue.

mod broker;
mod counters;
mod courier;
mod deps;
mod error;
mod exchange;
mod job;
mod jobs;
mod paging;
mod push;
mod registry;
mod schedules;
mod search;
mod settings;
mod shards;
mod stats;
pub mod store;
mod sweep;
pub(crate) mod wake;

pub use broker::{Broker, BrokerConfig};
pub use error::{Bound, QueueError, Result};
pub use exchange::{
    Ack, AckOutcome, Admission, ClaimEntry, Claimed, EnqueueReply, Exchange, Exchanged, Held,
    Known, OutgoingJob, Route, exchange_answers, exchange_command,
};
pub use job::{
    After, Backoff, Dedup, Dependencies, Dependency, Event, Expiry, Job, JobOptions, JobState,
    Lease, NewJob, Outcome, is_job_id,
};
pub use jobs::claim::ClaimOptions;
pub use jobs::enqueue::Enqueued;
pub use jobs::lease::Nack;
pub use paging::{DeadPage, GroupPage, GroupStats, PageCursor};
pub use push::{PushEnd, PushHealth, PushState, PushTarget};
pub use schedules::{Cron, CronError, Debt, DueSchedule, Fired, Schedule, ScheduleSpec, job_id};
pub use search::{Search, SearchCursor, SearchPage};
pub use settings::Settings;
pub use settings::change::{Refusal, SettingsChange};
pub use settings::table::{self as setting_table, MAX_RETAIN_MS};
pub use stats::{ClassStats, QueueStats};
pub use store::{RedisPool, RedisSettings};
pub use sweep::{SweepCursors, Swept};
