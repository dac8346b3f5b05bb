//! Queue statistics: depth by state and by priority class.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use futures_util::future::try_join_all;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiPath, Result};
use super::params::QueuePath;
use crate::queue::QueueStats;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/queues", get(queues))
        .route("/v1/queues/{queue}", get(queue))
}

/// One queue's counts.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"queue": "emails", "pending": 12, "scheduled": 0, "processing": 3, "expired_leases": 0, "dead": 1, "classes": [{"priority": 0, "pending": 2, "oldest_age_ms": 1530}, {"priority": 9, "pending": 10, "oldest_age_ms": 64200}]}))]
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
}

/// One priority class of the pending jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClassView {
    priority: u8,
    pending: u64,
    /// How long the oldest job of the class has waited; the starvation signal.
    oldest_age_ms: u64,
}

impl QueueView {
    fn new(queue: String, stats: QueueStats) -> Self {
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
        }
    }
}

/// Every queue.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"queues": [{"queue": "emails", "pending": 12, "scheduled": 0, "processing": 3, "expired_leases": 0, "dead": 1, "classes": [{"priority": 0, "pending": 2, "oldest_age_ms": 1530}, {"priority": 9, "pending": 10, "oldest_age_ms": 64200}]}]}))]
pub struct QueueList {
    queues: Vec<QueueView>,
}

/// A queue's counts.
///
/// A queue never used answers with zeros.
#[utoipa::path(
    get, path = "/v1/queues/{queue}", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses(
        (status = 200, description = "The queue's counts", body = QueueView),
    )
)]
pub async fn queue(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<axum::Json<QueueView>> {
    let queue = path.queue.as_str();
    let stats = state.broker.stats(queue).await?;
    Ok(axum::Json(QueueView::new(queue.to_owned(), stats)))
}

/// Every queue that has ever had a job, by name.
#[utoipa::path(
    get, path = "/v1/queues", tag = "queues",
    responses(
        (status = 200, description = "Every queue's counts", body = QueueList),
    )
)]
pub async fn queues(State(state): State<AppState>) -> Result<axum::Json<QueueList>> {
    let names = state.broker.queues().await?;
    let stats = try_join_all(names.iter().map(|name| state.broker.stats(name))).await?;
    Ok(axum::Json(QueueList {
        queues: names
            .into_iter()
            .zip(stats)
            .map(|(name, stats)| QueueView::new(name, stats))
            .collect(),
    }))
}
