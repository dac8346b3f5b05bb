//! Jobs: enqueue (single and batch), read, delete, cancel. The enqueue
//! request and its checks are in `request` (its options that are
//! objects of their own, dedup and backoff, in `spec`); the job view every endpoint
//! answers with is in `view`; a job's history in `history`; finding
//! jobs by their fields in `search`.

pub mod history;
pub mod request;
pub mod search;
pub mod spec;
pub mod view;

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tracing::Instrument;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, ApiQuery, JsonBody, OptionalJsonBody};
use super::params::{JobPath, QueuePath};
use crate::otel::{self, TraceHeaders};
use crate::queue::QueueError;
use request::{EnqueueBatchRequest, EnqueueRequest};
use view::{JobList, JobView};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(enqueue, search::search))
        .routes(routes!(enqueue_batch))
        .routes(routes!(job, delete_job))
        .routes(routes!(cancel))
        .routes(routes!(history::history))
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
    let mut job = request.into_new_job(format_args!(""), queue, state.config.max_attempts)?;
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
            JsonBody(view),
        )
            .into_response())
    } else {
        Ok((StatusCode::OK, JsonBody(view)).into_response())
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
) -> Result<JsonBody<JobList>> {
    let queue = path.queue.as_str();
    let trace = TraceHeaders::from_headers(&headers);
    let jobs = request.into_new_jobs(queue, state.config.max_attempts, trace.as_ref())?;
    let span = otel::send_span(queue, trace.as_ref(), jobs.len());
    let enqueued = state.broker.enqueue(queue, jobs).instrument(span).await?;
    let jobs = enqueued
        .into_iter()
        .map(|enqueued| JobView::enqueued(queue, enqueued))
        .collect();
    Ok(JsonBody(JobList { jobs }))
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
) -> Result<JsonBody<JobView>> {
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
    Ok(JsonBody(JobView::new(queue, job)))
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
) -> Result<JsonBody<JobView>> {
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
    Ok(JsonBody(JobView::new(queue, job)))
}
