//! Jobs: enqueue (single and batch), read, delete; and the job view every
//! endpoint answers with.

use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::Instrument;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, ApiQuery, JsonBody, OptionalJsonBody, objects};
use super::params::{JobPath, QueueName, QueuePath, is_job_id};
use crate::otel::{self, TraceHeaders};
use crate::queue::{
    After, Dedup, Enqueued, Expiry, Job, JobState, MAX_RETAIN_MS, NewJob, Outcome, QueueError,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(enqueue))
        .routes(routes!(enqueue_batch))
        .routes(routes!(job, delete_job))
        .routes(routes!(cancel))
}

const MAX_TASK_CHARS: usize = 200;
const MAX_DELAY_MS: u64 = 2_592_000_000;

/// A delay (enqueue's or nack's) is at most 30 days.
pub(super) fn check_delay(field: &str, delay_ms: u64) -> Result<()> {
    if delay_ms > MAX_DELAY_MS {
        return Err(ApiError::validation(
            field,
            "must be at most 2592000000 (30 days)",
        ));
    }
    Ok(())
}
const MAX_BATCH: usize = 1000;

/// Checks a JSON value a client sends to be stored and read back (args, a
/// result, a progress report): JSON every client can read back (bounded
/// nesting, no lone surrogates, numbers within range), and, with `max`, at
/// most that many bytes as sent.
pub(super) fn check_json(field: &str, value: &RawValue, max: Option<(usize, &str)>) -> Result<()> {
    if let Some((bytes, reason)) = max
        && value.get().len() > bytes
    {
        return Err(ApiError::validation(field, reason));
    }
    if let Err(error) = serde_json::from_str::<serde_json::Value>(value.get()) {
        return Err(ApiError::validation(
            field,
            format!("must be JSON any client can read back: {error}"),
        ));
    }
    Ok(())
}

/// A job to add.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"task": "send_email", "args": {"to": "a@example.com"}, "priority": 0, "id": "order-1234", "delay_ms": 0, "max_attempts": 5, "group": "tenant-42"}))]
pub struct EnqueueRequest {
    /// What the worker should do, 1 to 200 characters.
    #[schema(min_length = 1, max_length = 200)]
    task: String,
    /// Any JSON value, kept as sent; default `{}`.
    #[serde(default = "empty_args")]
    #[schema(value_type = Value)]
    args: Box<RawValue>,
    /// 0 (most urgent) to 255; default 1.
    #[serde(default = "default_priority")]
    #[schema(default = 1, maximum = 255)]
    priority: u8,
    /// A client-chosen id makes the enqueue idempotent.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    id: Option<String>,
    /// Keep the job scheduled (not claimable) this long; at most 30 days.
    #[serde(default)]
    #[schema(maximum = 2_592_000_000_u64)]
    delay_ms: u64,
    /// Deliveries before the job is dead-lettered, 1 to 1000; default from configuration.
    #[schema(minimum = 1, maximum = 1000)]
    max_attempts: Option<u32>,
    /// The group (a tenant, say) the job shares its priority with fairly;
    /// jobs without one form a group of their own.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    group: Option<String>,
    /// Keep the job this long once acked, `completed` with its result; its
    /// id stays taken meanwhile. 0 to 2592000000 (30 days); default the
    /// queue's `retain_ms` setting.
    #[schema(maximum = 2_592_000_000_u64)]
    retain_ms: Option<u64>,
    /// A job not claimed within this long is never delivered: 1 to
    /// 2592000000 (30 days).
    #[schema(minimum = 1, maximum = 2_592_000_000_u64)]
    expires_in_ms: Option<u64>,
    /// What becomes of a job whose expiry comes before it is claimed;
    /// only with `expires_in_ms`.
    on_expiry: Option<OnExpiry>,
    /// Deduplication by key: another enqueue with the key is answered
    /// with the job that holds it (see `DedupRequest`).
    dedup: Option<DedupRequest>,
    /// The jobs this one waits for (1 to 100): each a job id of this queue,
    /// or `queue/id` of another; in a batch, an earlier entry's id too.
    /// The job is `waiting` (never claimed) until every one of them is
    /// `completed`, then `pending` (or `scheduled`, its delay counted from
    /// then). A ref to no job answers 422 and nothing is enqueued.
    #[schema(min_items = 1, max_items = 100, example = json!(["fetch-1", "images/resize-7"]))]
    after: Option<Vec<String>>,
    /// What a dependency that ends dead, cancelled or deleted does to this
    /// job: `dead` (the default; it goes to the DLQ, its `last_error`
    /// naming the dependency) or `ignore` (it counts as finished). Only
    /// with `after`.
    on_dependency_failure: Option<OnDependencyFailure>,
}

/// What a failed dependency does to the job that waits for it.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDependencyFailure {
    /// To the DLQ, its `last_error` naming the dependency (the default).
    #[default]
    Dead,
    /// Counts as finished.
    Ignore,
}

/// A job's dedup key. The job that takes it holds it while it is pending,
/// scheduled or processing, and until `ttl_ms` has passed since its
/// enqueue; a job deleted, or dropped on expiry, lets it go at once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"key": "refresh-user-42", "ttl_ms": 60000, "mode": "drop"}))]
pub struct DedupRequest {
    /// 1 to 128 of A-Z a-z 0-9 _ . : -
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    key: String,
    /// How long the key stays held after its job's enqueue, even once the
    /// job ended: 0 to 2592000000 (30 days); default 0.
    #[serde(default)]
    #[schema(maximum = 2_592_000_000_u64)]
    ttl_ms: u64,
    #[serde(default)]
    mode: DedupMode,
}

/// What an enqueue does when its key is held.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DedupMode {
    /// Throttle (the default): answered 200 `created: false` with the job
    /// that holds the key; nothing changes.
    #[default]
    Drop,
    /// Debounce: while the job that holds the key is pending or
    /// scheduled, it takes this enqueue's task, args and priority and its
    /// delay starts again (200 `created: false, replaced: true`); once it
    /// is processing or has ended, this enqueue makes a new job, which
    /// takes the key.
    Replace,
}

/// What becomes of a job whose expiry comes before it is claimed.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnExpiry {
    /// To the DLQ with `last_error: "expired"` (the default).
    #[default]
    Dead,
    /// Removed.
    Drop,
}

pub(super) fn empty_args() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!("`{{}}` is JSON"))
}

pub(super) fn default_priority() -> u8 {
    1
}

impl EnqueueRequest {
    /// Checks the ranges serde cannot; `field` prefixes the field names.
    fn into_new_job(self, field: &str, queue: &str, default_max_attempts: u32) -> Result<NewJob> {
        let chars = self.task.chars().count();
        if !(1..=MAX_TASK_CHARS).contains(&chars) {
            return Err(ApiError::validation(
                format!("{field}task"),
                "must be 1 to 200 characters",
            ));
        }
        if let Some(id) = &self.id
            && !is_job_id(id)
        {
            return Err(ApiError::validation(
                format!("{field}id"),
                "must be 1 to 128 of A-Z a-z 0-9 _ . : -",
            ));
        }
        if let Some(group) = &self.group
            && !is_job_id(group)
        {
            return Err(ApiError::validation(
                format!("{field}group"),
                "must be 1 to 128 of A-Z a-z 0-9 _ . : -",
            ));
        }
        check_delay(&format!("{field}delay_ms"), self.delay_ms)?;
        check_json(&format!("{field}args"), &self.args, None)?;
        if self.retain_ms.is_some_and(|ms| ms > MAX_RETAIN_MS) {
            return Err(ApiError::validation(
                format!("{field}retain_ms"),
                "must be 0 to 2592000000 (30 days)",
            ));
        }
        let expiry = match (self.expires_in_ms, self.on_expiry) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(ApiError::validation(
                    format!("{field}on_expiry"),
                    "needs expires_in_ms",
                ));
            }
            (Some(ms), _) if !(1..=MAX_DELAY_MS).contains(&ms) => {
                return Err(ApiError::validation(
                    format!("{field}expires_in_ms"),
                    "must be 1 to 2592000000 (30 days)",
                ));
            }
            (Some(in_ms), on_expiry) => Some(Expiry {
                in_ms,
                drop: matches!(on_expiry, Some(OnExpiry::Drop)),
            }),
        };
        let dedup = self.dedup.map(|dedup| dedup.checked(field)).transpose()?;
        let after = match (self.after, self.on_dependency_failure) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(ApiError::validation(
                    format!("{field}on_dependency_failure"),
                    "needs after",
                ));
            }
            (Some(refs), on_failure) => Some(After {
                refs: checked_refs(field, queue, refs)?,
                ignore_failure: matches!(on_failure, Some(OnDependencyFailure::Ignore)),
            }),
        };
        let max_attempts = self.max_attempts.unwrap_or(default_max_attempts);
        if !(1..=1000).contains(&max_attempts) {
            return Err(ApiError::validation(
                format!("{field}max_attempts"),
                "must be 1 to 1000",
            ));
        }
        Ok(NewJob {
            id: self.id,
            task: self.task,
            args: self.args,
            priority: self.priority,
            delay_ms: self.delay_ms,
            max_attempts,
            group: self.group,
            retain_ms: self.retain_ms,
            expiry,
            dedup,
            after,
            trace: None,
        })
    }
}

/// The most dependencies a job may have.
const MAX_AFTER: usize = 100;

/// The refs of an `after` as `(queue, id)`, each once: `id` names a job of
/// `queue`, `other/id` one of queue `other`.
fn checked_refs(field: &str, queue: &str, refs: Vec<String>) -> Result<Vec<(String, String)>> {
    if !(1..=MAX_AFTER).contains(&refs.len()) {
        return Err(ApiError::validation(
            format!("{field}after"),
            "must hold 1 to 100 refs",
        ));
    }
    let mut checked: Vec<(String, String)> = Vec::with_capacity(refs.len());
    for (i, reference) in refs.into_iter().enumerate() {
        let (other_queue, id) = match reference.split_once('/') {
            Some((other_queue, id)) => (other_queue.to_owned(), id.to_owned()),
            None => (queue.to_owned(), reference),
        };
        if QueueName::try_from(other_queue.clone()).is_err() || !is_job_id(&id) {
            return Err(ApiError::validation(
                format!("{field}after[{i}]"),
                "must be a job id, or a queue name, `/` and a job id",
            ));
        }
        if !checked.iter().any(|(q, j)| *q == other_queue && *j == id) {
            checked.push((other_queue, id));
        }
    }
    Ok(checked)
}

impl DedupRequest {
    fn checked(self, field: &str) -> Result<Dedup> {
        if !is_job_id(&self.key) {
            return Err(ApiError::validation(
                format!("{field}dedup.key"),
                "must be 1 to 128 of A-Z a-z 0-9 _ . : -",
            ));
        }
        if self.ttl_ms > MAX_DELAY_MS {
            return Err(ApiError::validation(
                format!("{field}dedup.ttl_ms"),
                "must be 0 to 2592000000 (30 days)",
            ));
        }
        Ok(Dedup {
            key: self.key,
            ttl_ms: self.ttl_ms,
            replace: matches!(self.mode, DedupMode::Replace),
        })
    }
}

/// The job a schedule enqueues at each fire time, checked by the enqueue
/// rules (fields named without a prefix).
pub(super) fn scheduled_job(
    task: String,
    args: Box<RawValue>,
    priority: u8,
    max_attempts: Option<u32>,
    group: Option<String>,
    retain_ms: u64,
    default_max_attempts: u32,
) -> Result<NewJob> {
    EnqueueRequest {
        task,
        args,
        priority,
        id: None,
        delay_ms: 0,
        max_attempts,
        group,
        retain_ms: Some(retain_ms),
        expires_in_ms: None,
        on_expiry: None,
        dedup: None,
        after: None,
        on_dependency_failure: None,
    }
    .into_new_job("", "", default_max_attempts)
}

/// Many jobs to add at once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [{"task": "send_email", "args": {"to": "a@example.com"}, "priority": 0, "id": "order-1234"}, {"task": "nightly_digest", "priority": 9}]}))]
pub struct EnqueueBatchRequest {
    /// 1 to 1000 jobs; FIFO inside a priority follows this order.
    #[serde(deserialize_with = "objects")]
    #[schema(min_items = 1, max_items = 1000)]
    jobs: Vec<EnqueueRequest>,
}

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
    fn enqueued(queue: &str, enqueued: Enqueued) -> Self {
        let mut view = Self::new(queue, enqueued.job);
        view.created = Some(enqueued.created);
        view.replaced = enqueued.replaced.then_some(true);
        view
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-29T23:58:12.345Z`.
pub fn timestamp(unix_ms: i64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_default()
}

/// Enqueue a job.
///
/// With a client `id` the enqueue is idempotent: a job already known under
/// that id is answered (200, `created: false`) and nothing is added. A
/// well-formed W3C `traceparent` header (and `tracestate`) is kept with
/// the job; a malformed one is ignored.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/jobs", tag = "jobs",
    params(
        QueuePath,
        ("traceparent" = Option<String>, Header, description = "W3C trace context, `00-<trace id>-<parent id>-<flags>`: kept with the jobs and returned in their `trace`; ignored when malformed"),
        ("tracestate" = Option<String>, Header, description = "Kept with a well-formed `traceparent`"),
    ),
    request_body = EnqueueRequest,
    responses(
        (status = 201, description = "Job added", body = JobView,
         headers(("Location" = String, description = "The job's URL"))),
        (status = 200, description = "A job with this id was already known", body = JobView),
    )
)]
pub async fn enqueue(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    headers: HeaderMap,
    JsonBody(request): JsonBody<EnqueueRequest>,
) -> Result<Response> {
    let queue = path.queue.as_str();
    let mut job = request.into_new_job("", queue, state.config.max_attempts)?;
    job.trace = TraceHeaders::from_headers(&headers);
    let span = otel::send_span(queue, job.trace.as_ref(), 1);
    let enqueued = state
        .broker
        .enqueue(queue, vec![job])
        .instrument(span.clone())
        .await
        .map_err(|error| match error {
            QueueError::UnknownDependency { at, .. } => {
                ApiError::validation(format!("after[{at}]"), "names no job")
            }
            error => error.into(),
        })?
        .pop()
        .ok_or_else(|| {
            QueueError::Unknown(anyhow::anyhow!(
                "the exchange function answered nothing for an enqueue"
            ))
        })?;
    otel::record_id(&span, &enqueued.job.id);
    let created = enqueued.created;
    let view = JobView::enqueued(queue, enqueued);
    if created {
        let location = format!("/v1/queues/{queue}/jobs/{}", view.id);
        Ok((
            StatusCode::CREATED,
            [(header::LOCATION, location)],
            axum::Json(view),
        )
            .into_response())
    } else {
        Ok((StatusCode::OK, axum::Json(view)).into_response())
    }
}

/// Enqueue many jobs at once.
///
/// All or nothing: one invalid job answers 422 naming its index and nothing
/// is added. A client id repeated in one batch creates one job.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/jobs/batch", tag = "jobs",
    params(
        QueuePath,
        ("traceparent" = Option<String>, Header, description = "W3C trace context, `00-<trace id>-<parent id>-<flags>`: kept with the jobs and returned in their `trace`; ignored when malformed"),
        ("tracestate" = Option<String>, Header, description = "Kept with a well-formed `traceparent`"),
    ),
    request_body = EnqueueBatchRequest,
    responses(
        (status = 200, description = "Every job, in request order, with `created`", body = JobList),
    )
)]
pub async fn enqueue_batch(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    headers: HeaderMap,
    JsonBody(request): JsonBody<EnqueueBatchRequest>,
) -> Result<axum::Json<JobList>> {
    let queue = path.queue.as_str();
    if !(1..=MAX_BATCH).contains(&request.jobs.len()) {
        return Err(ApiError::validation("jobs", "must hold 1 to 1000 jobs"));
    }
    let trace = TraceHeaders::from_headers(&headers);
    let jobs = request
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, job)| {
            let mut job =
                job.into_new_job(&format!("jobs[{i}]."), queue, state.config.max_attempts)?;
            job.trace.clone_from(&trace);
            Ok(job)
        })
        .collect::<Result<Vec<_>>>()?;
    let span = otel::send_span(queue, trace.as_ref(), jobs.len());
    let enqueued = state.broker.enqueue(queue, jobs).instrument(span).await?;
    let jobs = enqueued
        .into_iter()
        .map(|enqueued| JobView::enqueued(queue, enqueued))
        .collect();
    Ok(axum::Json(JobList { jobs }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobQuery {
    /// Wait up to this long (0 to 20000 ms) for the job to be completed or
    /// dead; default 0.
    #[param(minimum = 0, maximum = 20000)]
    wait_ms: Option<u64>,
}

/// Read a job in any state, or wait for it to end.
///
/// With `wait_ms`, answers as soon as the job is `completed` or `dead` (at
/// once if it already is), whichever instance acked or dead-lettered it;
/// otherwise with its view when the wait is over. 404 if the job is
/// unknown, or is gone by the time it ends (acked without retention).
#[utoipa::path(
    get, path = "/v1/queues/{queue}/jobs/{id}", tag = "jobs",
    params(JobPath, JobQuery),
    responses(
        (status = 200, description = "The job", body = JobView),
    )
)]
pub async fn job(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
    ApiQuery(query): ApiQuery<JobQuery>,
) -> Result<axum::Json<JobView>> {
    let (queue, id) = (path.queue.as_str(), path.id.as_str());
    let job = match query.wait_ms.unwrap_or(0) {
        0 => state.broker.job(queue, id).await?,
        wait_ms if wait_ms <= super::MAX_WAIT_MS => {
            let wait = Duration::from_millis(wait_ms);
            state
                .broker
                .wait_for_job(queue, id, wait, &state.shutdown)
                .await?
        }
        _ => {
            return Err(ApiError::InvalidRequest(
                "`wait_ms` must be 0 to 20000".into(),
            ));
        }
    };
    Ok(axum::Json(JobView::new(queue, job)))
}

/// Delete a pending, scheduled, dead or completed job.
///
/// A job being processed cannot be deleted (409 `conflict`).
#[utoipa::path(
    delete, path = "/v1/queues/{queue}/jobs/{id}", tag = "jobs",
    params(JobPath),
    responses(
        (status = 204, description = "Deleted"),
    )
)]
pub async fn delete_job(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
) -> Result<StatusCode> {
    state
        .broker
        .delete(path.queue.as_str(), path.id.as_str())
        .await
        .map_err(|error| match ApiError::from(error) {
            ApiError::Conflict(_) => {
                ApiError::Conflict("the job is being processed; it cannot be deleted".into())
            }
            other => other,
        })?;
    Ok(StatusCode::NO_CONTENT)
}

/// Why a job is cancelled; the body may be left out.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reason": "the customer closed the order"}))]
pub struct CancelRequest {
    /// Shown as the job's `cancel_reason`; at most 2000 characters.
    #[schema(max_length = 2000)]
    reason: Option<String>,
}

/// Cancel a job.
///
/// A `pending`, `scheduled` or `waiting` job becomes `cancelled` at once:
/// kept for its retention, else removed. A `processing` job gains
/// `cancel_requested: true` (its extends answer it, so its worker can
/// stop) and ends `cancelled` on its ack (its result kept), its nack (no
/// retry) or its lease's end (never delivered again). Repeating a cancel
/// answers 200 again; a `completed` or `dead` job is 409 `conflict`.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/jobs/{id}/cancel", tag = "jobs",
    params(JobPath),
    request_body(content = CancelRequest, description = "May be left out"),
    responses(
        (status = 200, description = "The job: cancelled, or processing with `cancel_requested`", body = JobView),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
    OptionalJsonBody(request): OptionalJsonBody<CancelRequest>,
) -> Result<axum::Json<JobView>> {
    if request
        .reason
        .as_ref()
        .is_some_and(|reason| reason.chars().count() > 2000)
    {
        return Err(ApiError::validation(
            "reason",
            "must be at most 2000 characters",
        ));
    }
    let queue = path.queue.as_str();
    let job = state
        .broker
        .cancel(queue, path.id.as_str(), request.reason.as_deref())
        .await
        .map_err(|error| match ApiError::from(error) {
            ApiError::Conflict(_) => ApiError::Conflict("the job is completed or dead".into()),
            other => other,
        })?;
    Ok(axum::Json(JobView::new(queue, job)))
}
