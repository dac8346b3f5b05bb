//! Operations endpoints, open without a token: health, readiness, the
//! OpenAPI document.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Serialize;
use utoipa::{OpenApi, ToSchema};

use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi))
}

/// Health or readiness.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// `ok`, or `unavailable` when Redis does not answer.
    status: &'static str,
}

/// Liveness: 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process runs", body = Status)))]
pub async fn healthz() -> axum::Json<Status> {
    axum::Json(Status { status: "ok" })
}

/// Readiness: 200 when Redis answers, else 503.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Redis answers", body = Status),
        (status = 503, description = "Redis does not answer", body = Status),
    ))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, axum::Json<Status>) {
    match state.broker.ping().await {
        Ok(()) => (StatusCode::OK, axum::Json(Status { status: "ok" })),
        Err(error) => {
            tracing::warn!(error = %anyhow::Error::from(error), "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(Status {
                    status: "unavailable",
                }),
            )
        }
    }
}

/// The OpenAPI document of this API.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(super::ApiDoc::openapi())
}
