//! The dead-letter queue: list, requeue, delete.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, ApiQuery, JsonBody, OptionalJsonBody};
use super::jobs::view::JobView;
use super::params::{JobPath, QueuePath, parse_cursor};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(dead_jobs))
        .routes(routes!(requeue))
        .routes(routes!(delete_dead))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeadJobsQuery {
    /// Page size, 1 to 1000; default 50.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of dead jobs.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"jobs": [{"id": "order-1234", "queue": "emails", "task": "send_email", "args": {"to": "a@example.com"}, "priority": 0, "group": null, "state": "dead", "attempts": 5, "max_attempts": 5, "enqueued_at": "2026-11-29T23:58:12.345Z", "run_at": null, "lease_token": null, "lease_expires_at": null, "worker": null, "last_error": "lease expired", "dead_at": "2026-11-30T00:04:01.002Z"}], "next_cursor": "1764460841002.order-1234", "total": 1}))]
pub struct DeadJobsPage {
    /// Most recently dead first.
    jobs: Vec<JobView>,
    /// Pass as `cursor` for the next page; null on the last page.
    next_cursor: Option<String>,
    /// Dead jobs in the queue.
    total: u64,
}

/// List dead jobs.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/dlq", tag = "dlq",
    params(QueuePath, DeadJobsQuery),
    responses(
        (status = 200, description = "A page of dead jobs", body = DeadJobsPage),
    )
)]
pub async fn dead_jobs(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    ApiQuery(query): ApiQuery<DeadJobsQuery>,
) -> Result<JsonBody<DeadJobsPage>> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::InvalidRequest("`limit` must be 1 to 1000".into()));
    }
    let cursor = parse_cursor(query.cursor)?;
    let queue = path.queue.as_str();
    let page = state
        .broker
        .dead_jobs(queue, limit, cursor.as_ref())
        .await?;
    Ok(JsonBody(DeadJobsPage {
        jobs: page
            .jobs
            .into_iter()
            .map(|job| JobView::new(queue, job))
            .collect(),
        next_cursor: page.next_cursor,
        total: page.total,
    }))
}

/// Optional settings of a requeue.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"priority": 3}))]
pub struct RequeueRequest {
    /// Requeue at this priority instead of the job's own.
    #[schema(maximum = 255)]
    priority: Option<u8>,
}

/// Requeue a dead job.
///
/// The job goes back to `pending` with `attempts` 0, behind the jobs waiting
/// in its priority. The body may be left out.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/dlq/{id}/requeue", tag = "dlq",
    params(JobPath),
    request_body(content = RequeueRequest, description = "May be left out"),
    responses(
        (status = 200, description = "The job, pending again", body = JobView),
    )
)]
pub async fn requeue(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
    OptionalJsonBody(request): OptionalJsonBody<RequeueRequest>,
) -> Result<JsonBody<JobView>> {
    let queue = path.queue.as_str();
    let job = state
        .broker
        .requeue(queue, path.id.as_str(), request.priority)
        .await
        .map_err(not_dead)?;
    Ok(JsonBody(JobView::new(queue, job)))
}

/// Delete a dead job.
#[utoipa::path(
    delete, path = "/v1/queues/{queue}/dlq/{id}", tag = "dlq",
    params(JobPath),
    responses(
        (status = 204, description = "Deleted"),
    )
)]
pub async fn delete_dead(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
) -> Result<StatusCode> {
    state
        .broker
        .delete_dead(path.queue.as_str(), path.id.as_str())
        .await
        .map_err(not_dead)?;
    Ok(StatusCode::NO_CONTENT)
}

fn not_dead(error: crate::queue::QueueError) -> ApiError {
    match ApiError::from(error) {
        ApiError::Conflict(_) => {
            ApiError::Conflict("the job is not in the dead-letter queue".into())
        }
        other => other,
    }
}
