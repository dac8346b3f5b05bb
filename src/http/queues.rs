//! Queue statistics: depth by state and by priority class.

use axum::extract::State;
use futures_util::future::try_join_all;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, ApiQuery, JsonBody};
use super::params::{QueuePath, parse_cursor};
use super::push::PushView;
use crate::queue::{PushState, QueueStats};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(queues))
        .routes(routes!(queue, delete_queue))
        .routes(routes!(groups))
        .routes(routes!(scale))
}

/// One queue's counts.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"queue": "emails", "pending": 12, "scheduled": 0, "processing": 3, "expired_leases": 0, "dead": 1, "classes": [{"priority": 0, "pending": 2, "oldest_age_ms": 1530}, {"priority": 9, "pending": 10, "oldest_age_ms": 64200}], "groups": 2, "paused": false, "completed": 0, "shards": 1, "push": null}))]
pub struct QueueView {
    queue: String,
    pending: u64,
    scheduled: u64,
    processing: u64,
    /// Leases past their deadline that the sweeper has not taken back yet.
    expired_leases: u64,
    dead: u64,
    /// Pending jobs per priority, most urgent first.
    classes: Vec<ClassView>,
    /// Named groups with jobs pending or processing.
    groups: u64,
    /// Whether claims are paused.
    paused: bool,
    /// Jobs acked and kept until their retention ends.
    completed: u64,
    /// Jobs waiting for their dependencies (never claimed until released).
    waiting: u64,
    /// The bytes of the waiting jobs counted against `max_pending_bytes`
    /// (those that entered waiting since it was set); null when the queue
    /// has no such bound.
    pending_bytes: Option<u64>,
    /// The number of Redis hash slots the queue's jobs are spread over
    /// (its `shards` setting).
    shards: u32,
    /// Its push target and how its deliveries go; null when it has none.
    push: Option<PushView>,
}

/// One priority class of the pending jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClassView {
    priority: u8,
    pending: u64,
    /// How long the class's next job in line has waited; the starvation
    /// signal. With groups, the fair order may put a small group's newer
    /// job before a big group's older ones.
    oldest_age_ms: u64,
}

impl QueueView {
    fn new(queue: String, stats: QueueStats, push: Option<PushState>) -> Self {
        Self {
            queue,
            pending: stats.pending,
            scheduled: stats.scheduled,
            processing: stats.processing,
            expired_leases: stats.expired_leases,
            dead: stats.dead,
            classes: stats
                .classes
                .into_iter()
                .map(|class| ClassView {
                    priority: class.priority,
                    pending: class.pending,
                    oldest_age_ms: class.oldest_age_ms,
                })
                .collect(),
            groups: stats.groups,
            paused: stats.paused,
            completed: stats.completed,
            waiting: stats.waiting,
            pending_bytes: stats.max_pending_bytes.map(|_| stats.pending_bytes),
            shards: stats.shards,
            push: push.map(|push| PushView::new(push, false)),
        }
    }
}

/// Every queue.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"queues": [{"queue": "emails", "pending": 12, "scheduled": 0, "processing": 3, "expired_leases": 0, "dead": 1, "classes": [{"priority": 0, "pending": 2, "oldest_age_ms": 1530}, {"priority": 9, "pending": 10, "oldest_age_ms": 64200}], "groups": 2, "paused": false, "completed": 0}]}))]
pub struct QueueList {
    queues: Vec<QueueView>,
}

/// A queue's counts.
///
/// A queue never used answers with zeros.
#[utoipa::path(
    get, path = "/v1/queues/{queue}", tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The queue's counts", body = QueueView),
    )
)]
pub async fn queue(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<JsonBody<QueueView>> {
    let queue = path.queue.as_str();
    let (stats, push) = tokio::try_join!(state.broker.stats(queue), state.broker.push(queue))?;
    Ok(JsonBody(QueueView::new(queue.to_owned(), stats, push)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// Delete the queue's jobs too, in any state; without it a queue that
    /// holds jobs answers 409.
    purge: Option<bool>,
}

/// Delete a queue.
///
/// Removes its settings, schedules and every key, takes it off the list of
/// queues and drops its metric series. A queue holding jobs in any state
/// answers 409 `conflict`, unless `?purge=true`, which deletes them too.
/// Enqueues and schedule writes meanwhile answer 503 (no effect); after it,
/// a write makes the queue anew.
#[utoipa::path(
    delete, path = "/v1/queues/{queue}", tag = "queues",
    params(QueuePath, DeleteQuery),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such queue", body = crate::http::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The queue holds jobs and `purge` was not asked", body = crate::http::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_queue(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> Result<axum::http::StatusCode> {
    let queue = path.queue.as_str();
    match state
        .broker
        .delete_queue(queue, query.purge.unwrap_or(false))
        .await
    {
        Ok(()) => Ok(axum::http::StatusCode::NO_CONTENT),
        Err(crate::queue::QueueError::NotFound) => Err(ApiError::NotFound("no such queue".into())),
        Err(error) => Err(error.into()),
    }
}

/// Every queue on the list of queues, by name.
#[utoipa::path(
    get, path = "/v1/queues", tag = "queues",
    responses(
        (status = 200, description = "Every queue's counts", body = QueueList),
    )
)]
pub async fn queues(State(state): State<AppState>) -> Result<JsonBody<QueueList>> {
    let names = state.broker.queues().await?;
    let views =
        try_join_all(names.iter().map(|name| async {
            tokio::try_join!(state.broker.stats(name), state.broker.push(name))
        }))
        .await?;
    Ok(JsonBody(QueueList {
        queues: names
            .into_iter()
            .zip(views)
            .map(|(name, (stats, push))| QueueView::new(name, stats, push))
            .collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupsQuery {
    /// Page size, 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of a queue's named groups.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"groups": [{"group": "tenant-42", "pending": 1200, "processing": 3, "weight": 5}], "next_cursor": null}))]
pub struct GroupsPage {
    /// Groups with jobs pending or processing, most pending first.
    groups: Vec<GroupView>,
    /// Pass as `cursor` for the next page; null on the last page.
    next_cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupView {
    group: String,
    pending: u64,
    processing: u64,
    /// Its weight in the fair share of a priority class.
    weight: u32,
}

/// List a queue's groups.
///
/// Named groups with jobs pending or processing, most pending first.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/groups", tag = "queues",
    params(QueuePath, GroupsQuery),
    responses(
        (status = 200, description = "A page of groups", body = GroupsPage),
    )
)]
pub async fn groups(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    ApiQuery(query): ApiQuery<GroupsQuery>,
) -> Result<JsonBody<GroupsPage>> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::InvalidRequest("`limit` must be 1 to 1000".into()));
    }
    let cursor = parse_cursor(query.cursor)?;
    let page = state
        .broker
        .groups(path.queue.as_str(), limit, cursor.as_ref())
        .await?;
    Ok(JsonBody(GroupsPage {
        groups: page
            .groups
            .into_iter()
            .map(|group| GroupView {
                group: group.group,
                pending: group.pending,
                processing: group.processing,
                weight: group.weight,
            })
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ScaleQuery {
    /// Jobs one worker should have, pending or processing, 1 to 100000;
    /// default 1.
    #[param(minimum = 1, maximum = 100000)]
    per_worker: Option<u64>,
}

/// What an autoscaler reads of a queue, in the shape KEDA's `metrics-api`
/// scaler reads (`valueLocation: desired_workers`, or any other field).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"pending": 120, "processing": 8, "oldest_pending_age_ms": 5300, "desired_workers": 13}))]
pub struct ScaleView {
    pending: u64,
    processing: u64,
    /// How long the longest-waiting next job of any priority has waited
    /// (0 when none is pending).
    oldest_pending_age_ms: u64,
    /// ceil((pending + processing) / per_worker).
    desired_workers: u64,
}

/// A queue's load, for autoscalers.
///
/// A queue never used answers with zeros.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/scale", tag = "queues",
    params(QueuePath, ScaleQuery),
    responses(
        (status = 200, description = "The queue's load", body = ScaleView),
        (status = 422, description = "`per_worker` out of range", body = crate::http::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn scale(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    ApiQuery(query): ApiQuery<ScaleQuery>,
) -> Result<JsonBody<ScaleView>> {
    let per_worker = query.per_worker.unwrap_or(1);
    if !(1..=100_000).contains(&per_worker) {
        return Err(ApiError::validation("per_worker", "must be 1 to 100000"));
    }
    let stats = state.broker.stats(path.queue.as_str()).await?;
    Ok(JsonBody(ScaleView {
        pending: stats.pending,
        processing: stats.processing,
        oldest_pending_age_ms: stats
            .classes
            .iter()
            .map(|class| class.oldest_age_ms)
            .max()
            .unwrap_or(0),
        desired_workers: (stats.pending + stats.processing).div_ceil(per_worker),
    }))
}
