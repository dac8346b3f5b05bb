//! Recurring schedules: create or replace, list, read, delete, pause and
//! resume. Each fire time enqueues one job, fleet-wide (see
//! `queue::schedules`).

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, ApiQuery, JsonBody};
use super::jobs::request::{default_priority, empty_args, scheduled_job};
use super::jobs::view::timestamp;
use super::params::{QueuePath, ScheduleName, SchedulePath};
use crate::queue::{Cron, CronError, QueueError, Schedule, ScheduleSpec};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(schedules))
        .routes(routes!(schedule, put_schedule, delete_schedule))
        .routes(routes!(pause_schedule))
        .routes(routes!(resume_schedule))
}

/// A schedule: a cron pattern in a time zone, and the job each of its fire
/// times enqueues.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"cron": "*/5 * * * *", "timezone": "Europe/Berlin", "task": "report", "args": {"kind": "daily"}, "priority": 1, "max_attempts": 5, "group": null, "retain_ms": 0, "paused": false}))]
pub struct ScheduleRequest {
    /// Five fields (minute, hour, day of month, month, day of week), or six
    /// with seconds first; `*`, lists, ranges, steps, names (`JAN`, `MON`),
    /// `L`, `#`, `W`; or `@hourly`, `@daily`, `@weekly`, `@monthly`,
    /// `@yearly`.
    #[schema(max_length = 200)]
    cron: String,
    /// An IANA time zone name; default `UTC`.
    #[serde(default = "utc")]
    #[schema(default = "UTC")]
    timezone: String,
    /// The task of the jobs it enqueues, 1 to 200 characters.
    #[schema(min_length = 1, max_length = 200)]
    task: String,
    /// Their args; default `{}`.
    #[serde(default = "empty_args")]
    #[schema(value_type = Value)]
    args: Box<RawValue>,
    /// Their priority, 0 to 255; default 1.
    #[serde(default = "default_priority")]
    #[schema(default = 1, maximum = 255)]
    priority: u8,
    /// Their deliveries before the DLQ, 1 to 1000; default from configuration.
    #[schema(minimum = 1, maximum = 1000)]
    max_attempts: Option<u32>,
    /// Their group.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    group: Option<String>,
    /// How long they are kept once acked, 0 to 2592000000 ms; default 0.
    #[serde(default)]
    #[schema(maximum = 2_592_000_000_u64)]
    retain_ms: u64,
    /// While true, the schedule fires nothing.
    #[serde(default)]
    paused: bool,
}

fn utc() -> String {
    "UTC".to_owned()
}

/// The longest cron pattern taken.
const MAX_CRON_CHARS: usize = 200;

impl ScheduleRequest {
    /// Checks the pattern, the time zone and the job by the enqueue rules.
    fn into_spec(self, default_max_attempts: u32) -> Result<(ScheduleSpec, Cron)> {
        if self.cron.chars().count() > MAX_CRON_CHARS {
            return Err(ApiError::validation(
                "cron",
                "must be at most 200 characters",
            ));
        }
        let cron = Cron::parse(&self.cron, &self.timezone).map_err(|error| match error {
            CronError::Pattern(reason) => {
                ApiError::validation("cron", format!("not a cron pattern: {reason}"))
            }
            CronError::TimeZone(_) => {
                ApiError::validation("timezone", "must be an IANA time zone name")
            }
        })?;
        let job = scheduled_job(
            self.task,
            self.args,
            self.priority,
            self.max_attempts,
            self.group,
            self.retain_ms,
            default_max_attempts,
        )?;
        let spec = ScheduleSpec {
            cron: self.cron,
            timezone: self.timezone,
            task: job.task,
            args: job.args,
            priority: job.options.priority,
            max_attempts: job.options.max_attempts,
            group: job.options.group,
            retain_ms: self.retain_ms,
            paused: self.paused,
        };
        Ok((spec, cron))
    }
}

/// A schedule as it stands.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"name": "nightly-report", "queue": "reports", "cron": "0 2 * * *", "timezone": "Europe/Berlin", "task": "report", "args": {}, "priority": 1, "max_attempts": 5, "group": null, "retain_ms": 0, "paused": false, "next_run_at": "2026-12-01T01:00:00.000Z", "last_run_at": "2026-11-30T01:00:00.000Z", "last_job_id": "nightly-report:1764464400000"}))]
pub struct ScheduleView {
    name: String,
    queue: String,
    cron: String,
    timezone: String,
    task: String,
    #[schema(value_type = Value)]
    args: Box<RawValue>,
    priority: u8,
    max_attempts: u32,
    group: Option<String>,
    retain_ms: u64,
    paused: bool,
    /// When it fires next; null while paused.
    next_run_at: Option<String>,
    /// Its last fire time that enqueued a job; null before the first.
    last_run_at: Option<String>,
    /// The id of that job: `{name}:{fire time in ms since the epoch}`.
    last_job_id: Option<String>,
}

impl ScheduleView {
    fn new(queue: &str, schedule: Schedule) -> Self {
        let last_job_id = schedule.last_job_id();
        let Schedule {
            name,
            spec,
            next_run_ms,
            last_run_ms,
        } = schedule;
        Self {
            name,
            queue: queue.to_owned(),
            cron: spec.cron,
            timezone: spec.timezone,
            task: spec.task,
            args: spec.args,
            priority: spec.priority,
            max_attempts: spec.max_attempts,
            group: spec.group,
            retain_ms: spec.retain_ms,
            paused: spec.paused,
            next_run_at: next_run_ms.map(timestamp),
            last_run_at: last_run_ms.map(timestamp),
            last_job_id,
        }
    }
}

/// A page of a queue's schedules.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    /// By name.
    schedules: Vec<ScheduleView>,
    /// Pass as `cursor` for the next page; null on the last page.
    next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SchedulesQuery {
    /// Page size, 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// `NotFound` names the schedule, not a job.
fn schedule_error(error: QueueError) -> ApiError {
    match error {
        QueueError::NotFound => ApiError::NotFound("no such schedule".into()),
        other => other.into(),
    }
}

/// List a queue's schedules.
///
/// By name, a page at a time.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/schedules", tag = "schedules",
    params(QueuePath, SchedulesQuery),
    responses((status = 200, description = "A page of the schedules, by name", body = ScheduleList))
)]
pub async fn schedules(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    ApiQuery(query): ApiQuery<SchedulesQuery>,
) -> Result<JsonBody<ScheduleList>> {
    let queue = path.queue.as_str();
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::InvalidRequest("`limit` must be 1 to 1000".into()));
    }
    // A cursor is the name the previous page ended with.
    let after = query
        .cursor
        .map(|cursor| {
            ScheduleName::try_from(cursor).map_err(|_| {
                ApiError::InvalidRequest("`cursor` is not a cursor this API gave".into())
            })
        })
        .transpose()?;
    let (schedules, next_cursor) = state
        .broker
        .schedules(queue, limit, after.as_ref().map(ScheduleName::as_str))
        .await?;
    Ok(JsonBody(ScheduleList {
        schedules: schedules
            .into_iter()
            .map(|s| ScheduleView::new(queue, s))
            .collect(),
        next_cursor,
    }))
}

/// Read a schedule.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/schedules/{name}", tag = "schedules",
    params(SchedulePath),
    responses((status = 200, description = "The schedule", body = ScheduleView))
)]
pub async fn schedule(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<SchedulePath>,
) -> Result<JsonBody<ScheduleView>> {
    let queue = path.queue.as_str();
    let schedule = state
        .broker
        .schedule(queue, path.name.as_str())
        .await
        .map_err(schedule_error)?;
    Ok(JsonBody(ScheduleView::new(queue, schedule)))
}

/// Create or replace a schedule.
///
/// It fires next at its first fire time after now (none while paused); a
/// replaced schedule keeps its last run. Each fire time enqueues one job,
/// fleet-wide, with id `{name}:{fire time in ms}`.
#[utoipa::path(
    put, path = "/v1/queues/{queue}/schedules/{name}", tag = "schedules",
    params(SchedulePath),
    request_body = ScheduleRequest,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 200, description = "Replaced", body = ScheduleView),
    )
)]
pub async fn put_schedule(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<SchedulePath>,
    JsonBody(request): JsonBody<ScheduleRequest>,
) -> Result<(StatusCode, JsonBody<ScheduleView>)> {
    let queue = path.queue.as_str();
    let (spec, cron) = request.into_spec(state.config.max_attempts)?;
    let (schedule, created) = state
        .broker
        .put_schedule(queue, path.name.as_str(), spec, &cron)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, JsonBody(ScheduleView::new(queue, schedule))))
}

/// Delete a schedule; the jobs it made stay.
#[utoipa::path(
    delete, path = "/v1/queues/{queue}/schedules/{name}", tag = "schedules",
    params(SchedulePath),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete_schedule(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<SchedulePath>,
) -> Result<StatusCode> {
    state
        .broker
        .delete_schedule(path.queue.as_str(), path.name.as_str())
        .await
        .map_err(schedule_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause a schedule: it fires nothing until resumed.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/schedules/{name}/pause", tag = "schedules",
    params(SchedulePath),
    responses((status = 200, description = "The schedule, paused", body = ScheduleView))
)]
pub async fn pause_schedule(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<SchedulePath>,
) -> Result<JsonBody<ScheduleView>> {
    set_paused(&state, &path, true).await
}

/// Resume a paused schedule: it fires next at its first fire time after
/// now; the times passed while paused fire nothing.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/schedules/{name}/resume", tag = "schedules",
    params(SchedulePath),
    responses((status = 200, description = "The schedule, not paused", body = ScheduleView))
)]
pub async fn resume_schedule(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<SchedulePath>,
) -> Result<JsonBody<ScheduleView>> {
    set_paused(&state, &path, false).await
}

async fn set_paused(
    state: &AppState,
    path: &SchedulePath,
    paused: bool,
) -> Result<JsonBody<ScheduleView>> {
    let (queue, name) = (path.queue.as_str(), path.name.as_str());
    let mut spec = state
        .broker
        .schedule(queue, name)
        .await
        .map_err(schedule_error)?
        .spec;
    spec.paused = paused;
    let cron = Cron::parse(&spec.cron, &spec.timezone)
        .map_err(|error| ApiError::from(QueueError::Unknown(error.into())))?;
    let (schedule, _) = state.broker.put_schedule(queue, name, spec, &cron).await?;
    Ok(JsonBody(ScheduleView::new(queue, schedule)))
}
