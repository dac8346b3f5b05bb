//! Operations endpoints, open without a token: health, readiness,
//! metrics, the OpenAPI document.

use axum::extract::State;
use axum::http::{StatusCode, header};
use futures_util::future::try_join_all;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::extract::JsonBody;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
}

/// Health or readiness.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "ok"}))]
pub struct Status {
    /// `ok`; `unavailable` when Redis does not answer; `stopping` while the
    /// instance shuts down.
    status: &'static str,
    /// What an operator should know though the instance is ready: Redis
    /// evicting keys when full.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

impl Status {
    fn of(status: &'static str) -> Self {
        Self {
            status,
            warnings: Vec::new(),
        }
    }
}

/// Liveness: 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process runs", body = Status)))]
pub async fn healthz() -> JsonBody<Status> {
    JsonBody(Status::of("ok"))
}

/// Readiness: 200 when Redis answers, else 503; 503 too once the instance
/// is shutting down.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Redis answers", body = Status),
        (status = 503, description = "Redis does not answer", body = Status),
    ))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, JsonBody<Status>) {
    if state.shutdown.is_cancelled() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            JsonBody(Status::of("stopping")),
        );
    }
    match state.broker.ping().await {
        Ok(()) => {
            let warnings = state.broker.memory_warning().await.into_iter().collect();
            (
                StatusCode::OK,
                JsonBody(Status {
                    status: "ok",
                    warnings,
                }),
            )
        }
        Err(error) => {
            tracing::warn!(error = %anyhow::Error::from(error), "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                JsonBody(Status::of("unavailable")),
            )
        }
    }
}

/// Prometheus metrics.
///
/// Counters and the request-duration histogram of this instance, and the
/// depth of every queue (read from Redis at scrape time, O(priorities) per
/// queue).
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain; version=0.0.4"),
        (status = 503, description = "Redis does not answer", body = super::error::Problem, content_type = "application/problem+json"),
    ))]
pub async fn metrics(
    State(state): State<AppState>,
) -> Result<([(header::HeaderName, &'static str); 1], String), super::error::ApiError> {
    let queues = state.broker.queues().await?;
    let figures = try_join_all(queues.into_iter().map(|queue| async {
        let stats = state.broker.stats(&queue).await?;
        let groups = state
            .broker
            .groups(&queue, super::exposition::GROUPS_SHOWN, None)
            .await?
            .groups;
        Ok::<_, crate::queue::QueueError>(super::exposition::QueueFigures {
            queue,
            stats,
            groups,
        })
    }))
    .await?;
    let body = super::exposition::render_metrics(&figures);
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body))
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi() -> JsonBody<&'static utoipa::openapi::OpenApi> {
    JsonBody(&super::openapi::DOCUMENT)
}
