//! The enqueue request (one job, and a batch of them) and its checks,
//! which a schedule's job shares; what the request becomes is a
//! `NewJob`.

use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::spec::{BackoffSpec, DedupRequest};
use crate::http::error::{ApiError, Result};
use crate::http::extract::objects;
use crate::http::params::{QueueName, is_job_id};
use crate::otel::TraceHeaders;
use crate::queue::{After, Expiry, JobOptions, MAX_RETAIN_MS, NewJob};

const MAX_TASK_CHARS: usize = 200;
pub(super) const MAX_DELAY_MS: u64 = 2_592_000_000;

/// A delay (enqueue's or nack's) is at most 30 days. `field` is written
/// out only for an error (so are the other checks' names).
pub(crate) fn check_delay(field: impl fmt::Display, delay_ms: u64) -> Result<()> {
    if delay_ms > MAX_DELAY_MS {
        return Err(ApiError::validation(
            field.to_string(),
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
pub(crate) fn check_json(
    field: impl fmt::Display,
    value: &RawValue,
    max: Option<(usize, &str)>,
) -> Result<()> {
    if let Some((bytes, reason)) = max
        && value.get().len() > bytes
    {
        return Err(ApiError::validation(field.to_string(), reason));
    }
    if let Err(error) = serde_json::from_str::<serde_json::Value>(value.get()) {
        return Err(ApiError::validation(
            field.to_string(),
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
    /// Keep the job scheduled until this time (RFC 3339, with its offset)
    /// by Redis's clock, which every time prioq keeps is read from; a time
    /// passed makes it pending at once. At most 30 days ahead; not with
    /// `delay_ms` or `after`.
    #[schema(format = DateTime, example = "2026-12-24T09:00:00Z")]
    run_at: Option<String>,
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
    /// How long the job waits after a failed attempt (a nack without
    /// `delay_ms`, or a lease that expired) before it may be claimed
    /// again; none: at once.
    backoff: Option<BackoffSpec>,
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

pub(crate) fn empty_args() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!("`{{}}` is JSON"))
}

pub(crate) fn default_priority() -> u8 {
    1
}

impl EnqueueRequest {
    /// Checks the ranges serde cannot; `field` prefixes the field names.
    pub(super) fn into_new_job(
        self,
        field: fmt::Arguments<'_>,
        queue: &str,
        default_max_attempts: u32,
    ) -> Result<NewJob> {
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
        check_delay(format_args!("{field}delay_ms"), self.delay_ms)?;
        let run_at_ms = self
            .run_at
            .as_deref()
            .map(|at| checked_run_at(field, at, self.delay_ms > 0 || self.after.is_some()))
            .transpose()?;
        check_json(format_args!("{field}args"), &self.args, None)?;
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
        let backoff = self
            .backoff
            .map(|backoff| backoff.checked(field))
            .transpose()?;
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
            options: JobOptions {
                priority: self.priority,
                delay_ms: self.delay_ms,
                run_at_ms,
                max_attempts,
                group: self.group,
                retain_ms: self.retain_ms,
                expiry,
                dedup,
                backoff,
            },
            after,
            trace: None,
        })
    }
}

/// A `run_at` in ms since the epoch: an RFC 3339 time at most 30 days
/// ahead of this instance's clock (Redis's may differ by seconds, not
/// days), on an enqueue that sets no other start (`delayed`).
fn checked_run_at(field: fmt::Arguments<'_>, at: &str, delayed: bool) -> Result<u64> {
    let field = format!("{field}run_at");
    if delayed {
        return Err(ApiError::validation(field, "not with delay_ms or after"));
    }
    let Some(at_ms) = at
        .parse::<jiff::Timestamp>()
        .ok()
        .and_then(|at| u64::try_from(at.as_millisecond()).ok())
    else {
        return Err(ApiError::validation(
            field,
            "must be an RFC 3339 time after 1970 with its offset, such as 2026-12-24T09:00:00Z",
        ));
    };
    let now_ms = u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0);
    if at_ms > now_ms.saturating_add(MAX_DELAY_MS) {
        return Err(ApiError::validation(field, "must be at most 30 days ahead"));
    }
    Ok(at_ms)
}

/// The most dependencies a job may have.
const MAX_AFTER: usize = 100;

/// The refs of an `after` as `(queue, id)`, each once: `id` names a job of
/// `queue`, `other/id` one of queue `other`.
fn checked_refs(
    field: fmt::Arguments<'_>,
    queue: &str,
    refs: Vec<String>,
) -> Result<Vec<(String, String)>> {
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

/// The job a schedule enqueues at each fire time, checked by the enqueue
/// rules (fields named without a prefix).
pub(crate) fn scheduled_job(
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
        run_at: None,
        max_attempts,
        group,
        retain_ms: Some(retain_ms),
        expires_in_ms: None,
        on_expiry: None,
        dedup: None,
        after: None,
        on_dependency_failure: None,
        backoff: None,
    }
    .into_new_job(format_args!(""), "", default_max_attempts)
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

impl EnqueueBatchRequest {
    /// Checks every entry (a 422 names its index), each carrying `trace`.
    pub(super) fn into_new_jobs(
        self,
        queue: &str,
        default_max_attempts: u32,
        trace: Option<&TraceHeaders>,
    ) -> Result<Vec<NewJob>> {
        if !(1..=MAX_BATCH).contains(&self.jobs.len()) {
            return Err(ApiError::validation("jobs", "must hold 1 to 1000 jobs"));
        }
        self.jobs
            .into_iter()
            .enumerate()
            .map(|(i, job)| {
                let mut job =
                    job.into_new_job(format_args!("jobs[{i}]."), queue, default_max_attempts)?;
                job.trace = trace.cloned();
                Ok(job)
            })
            .collect()
    }
}
