//! The job view every endpoint that returns a job answers with (enqueues,
//! claims, the DLQ, reads), and the times in it.

use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::spec::BackoffSpec;
use crate::queue::{Enqueued, Job, JobState, Lease, Outcome};

/// The jobs of a batch enqueue, in request order.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"jobs": [{"id": "order-1234", "queue": "emails", "task": "send_email", "args": {"to": "a@example.com"}, "priority": 0, "group": null, "state": "processing", "attempts": 0, "max_attempts": 5, "enqueued_at": "2026-11-29T23:58:12.345Z", "run_at": null, "lease_token": "9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1", "lease_expires_at": "2026-11-29T23:59:12.345Z", "worker": "billing-7", "last_error": null}]}))]
pub struct JobList {
    pub jobs: Vec<JobView>,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateName {
    Pending,
    Scheduled,
    Processing,
    Dead,
    /// Acked, and kept with its result until its retention ends.
    Completed,
    /// Ended by a cancel; kept until its retention ends.
    Cancelled,
    /// Waiting for its dependencies to complete; never claimed.
    Waiting,
}

/// A job, as every endpoint that returns one shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"id": "order-1234", "queue": "emails", "task": "send_email", "args": {"to": "a@example.com"}, "priority": 0, "group": null, "state": "processing", "attempts": 0, "max_attempts": 5, "enqueued_at": "2026-11-29T23:58:12.345Z", "run_at": null, "lease_token": "9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1", "lease_expires_at": "2026-11-29T23:59:12.345Z", "worker": "billing-7", "last_error": null}))]
pub struct JobView {
    pub id: String,
    pub queue: String,
    pub task: String,
    #[schema(value_type = Value)]
    pub args: Box<RawValue>,
    pub priority: u8,
    /// The job's group; null when it has none.
    pub group: Option<String>,
    /// The schedule whose fire time made the job (fired jobs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Its wait after a failed attempt (jobs enqueued with one only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffSpec>,
    pub state: StateName,
    /// Deliveries that ended without an ack.
    pub attempts: u32,
    pub max_attempts: u32,
    pub enqueued_at: String,
    /// When a scheduled job becomes claimable.
    pub run_at: Option<String>,
    pub lease_token: Option<String>,
    pub lease_expires_at: Option<String>,
    pub worker: Option<String>,
    /// The lease's fence (processing jobs only): a number that grows with
    /// every grant of this job and, on one shard, of every job of the
    /// queue. Pass it to the systems the worker writes to, which refuse a
    /// write with a smaller fence than the last they took: a worker whose
    /// lease ran out cannot overwrite its successor's work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    pub last_error: Option<String>,
    /// When the job was dead-lettered (dead jobs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<String>,
    /// The latest progress its worker reported (with an extend), until the
    /// job ends; null until then.
    #[schema(value_type = Option<Value>)]
    pub progress: Option<Box<RawValue>>,
    /// When the job was acked or cancelled (completed and cancelled jobs
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// What the worker sent with its ack (completed jobs, and cancelled
    /// jobs that were acked; null when it sent none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<Option<Box<RawValue>>>,
    /// When the job, not claimed by then, is no longer delivered (jobs
    /// enqueued with `expires_in_ms`, until they end; null otherwise).
    pub expires_at: Option<String>,
    /// The W3C trace context its enqueue came with; null when none.
    pub trace: Option<TraceView>,
    /// The dedup key the job holds, until it lets it go; null otherwise
    /// (and in a claim's answer).
    pub dedup_key: Option<String>,
    /// True while a processing job has been asked to stop by a cancel: its
    /// worker should stop; the job ends `cancelled` with its lease.
    pub cancel_requested: bool,
    /// The reason its cancel gave; null when none.
    pub cancel_reason: Option<String>,
    /// The dependencies not finished yet of a job enqueued with `after`,
    /// until it ends; null for a job without any.
    pub waiting_for: Option<u32>,
    /// The dependencies of a job enqueued with `after`, in its order,
    /// until it ends: how each ended (`state` null while it has not) and
    /// the result of each completed one; null for a job without any. A
    /// claim's answer has them all finished.
    pub dependencies: Option<Vec<DependencyView>>,
    /// Up to 100 of the jobs that wait for this one and have not heard of
    /// its end yet (`queue/id` each); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependants: Vec<String>,
    /// Whether an enqueue added the job (enqueue answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// True when an enqueue with its dedup key (mode `replace`) gave the
    /// waiting job its task, args, priority and delay (enqueue answers
    /// only, when it did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<bool>,
}

/// The `traceparent` and `tracestate` headers an enqueue came with.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceView {
    pub traceparent: String,
    /// Null when none came, or when it was malformed.
    pub tracestate: Option<String>,
}

impl JobView {
    pub fn new(queue: &str, job: Job) -> Self {
        let fence = job.lease.as_ref().and_then(Lease::fence);
        let (lease_token, lease_expires_at, worker) = match job.lease {
            Some(lease) => (
                Some(lease.token),
                Some(timestamp(lease.expires_at_ms)),
                lease.worker,
            ),
            None => (None, None, None),
        };
        Self {
            id: job.id,
            queue: queue.to_owned(),
            task: job.task,
            args: job.args,
            priority: job.priority,
            group: job.group,
            schedule: job.schedule,
            backoff: job.backoff.map(BackoffSpec::from),
            state: match job.state {
                JobState::Pending => StateName::Pending,
                JobState::Scheduled => StateName::Scheduled,
                JobState::Processing => StateName::Processing,
                JobState::Dead => StateName::Dead,
                JobState::Completed => StateName::Completed,
                JobState::Cancelled => StateName::Cancelled,
                JobState::Waiting => StateName::Waiting,
            },
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            enqueued_at: timestamp(job.enqueued_at_ms),
            run_at: job.run_at_ms.map(timestamp),
            lease_token,
            lease_expires_at,
            worker,
            fence,
            last_error: job.last_error,
            dead_at: job.dead_at_ms.map(timestamp),
            progress: job.progress,
            completed_at: job.completed_at_ms.map(timestamp),
            result: matches!(job.state, JobState::Completed | JobState::Cancelled)
                .then_some(job.result),
            cancel_requested: job.state == JobState::Processing && job.cancel.is_some(),
            cancel_reason: job.cancel.filter(|reason| !reason.is_empty()),
            expires_at: job.expires_at_ms.map(timestamp),
            trace: job.trace.map(|trace| TraceView {
                traceparent: trace.traceparent,
                tracestate: Some(trace.tracestate).filter(|s| !s.is_empty()),
            }),
            dedup_key: job.dedup_key,
            waiting_for: job.dependencies.as_ref().map(|deps| deps.left),
            dependencies: job.dependencies.map(|deps| {
                deps.list
                    .into_iter()
                    .map(|dependency| DependencyView {
                        reference: dependency.reference,
                        state: dependency.outcome.map(|outcome| match outcome {
                            Outcome::Completed => DependencyState::Completed,
                            Outcome::Dead => DependencyState::Dead,
                            Outcome::Cancelled => DependencyState::Cancelled,
                            Outcome::Deleted => DependencyState::Deleted,
                        }),
                        result: dependency.result,
                    })
                    .collect()
            }),
            dependants: job.dependants,
            created: None,
            replaced: None,
        }
    }
}

/// One dependency of a job.
#[derive(Debug, Serialize, ToSchema)]
pub struct DependencyView {
    /// `queue/id`.
    #[serde(rename = "ref")]
    pub reference: String,
    /// How it ended; null while it has not.
    pub state: Option<DependencyState>,
    /// What its worker sent with its ack (completed ones); null for none.
    #[schema(value_type = Option<Value>)]
    pub result: Option<Box<RawValue>>,
}

/// How a dependency ended.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DependencyState {
    Completed,
    Dead,
    Cancelled,
    /// Deleted, or dropped on expiry, before it ended.
    Deleted,
}

impl JobView {
    /// An enqueue's answer for one job.
    pub(super) fn enqueued(queue: &str, enqueued: Enqueued) -> Self {
        let mut view = Self::new(queue, enqueued.job);
        view.created = Some(enqueued.created);
        view.replaced = enqueued.replaced.then_some(true);
        view
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-29T23:58:12.345Z`;
/// empty out of jiff's range (years -9999 to 9999).
pub fn timestamp(unix_ms: i64) -> String {
    jiff::Timestamp::from_millisecond(unix_ms)
        .map(|at| format!("{at:.3}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::timestamp;

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_764_460_000_123), "2025-11-29T23:46:40.123Z");
        assert_eq!(timestamp(1_764_460_000_007), "2025-11-29T23:46:40.007Z");
        assert_eq!(timestamp(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(timestamp(i64::MAX), "");
    }
}
