//! The HTTP face of prioq: routes by resource, each handler translating
//! between the JSON of the contract and one queue operation.

mod claims;
mod dlq;
pub mod error;
mod jobs;
mod ops;
mod params;
mod queues;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio_util::sync::CancellationToken;
use utoipa::OpenApi;

use crate::config::Config;
use crate::queue::Broker;
use error::ApiError;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub broker: Arc<Broker>,
    pub config: Arc<Config>,
    /// Cancelled when the service stops: long polls answer early.
    pub shutdown: CancellationToken,
}

/// The whole application's routes.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .merge(jobs::router())
        .merge(claims::router())
        .merge(dlq::router())
        .merge(queues::router())
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .merge(api)
        .merge(ops::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("this route does not take that method".into())
}

/// Checks the bearer token before anything else of the request is read.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let tokens = &state.config.api_tokens;
    if tokens.is_empty() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    // Compare against every token, each in constant time, so timing tells
    // neither which token nor how much of one matched.
    let accepted = presented.is_some_and(|presented| {
        tokens.iter().fold(false, |found, token| {
            found | constant_time_eq(token.as_bytes(), presented.as_bytes())
        })
    });
    if accepted {
        next.run(request).await
    } else {
        axum::response::IntoResponse::into_response(ApiError::Unauthorized)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The OpenAPI document, generated from the handlers.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "prioq", description = "A priority job queue over Redis, spoken to in HTTP/JSON."),
    paths(
        jobs::enqueue, jobs::enqueue_batch, jobs::job, jobs::delete_job,
        claims::claim, claims::ack, claims::ack_many, claims::extend, claims::nack,
        dlq::dead_jobs, dlq::requeue, dlq::delete_dead,
        queues::queues, queues::queue,
        ops::healthz, ops::readyz, ops::openapi,
    ),
    components(schemas(error::Problem, error::ProblemCode)),
    tags(
        (name = "jobs", description = "Enqueue, read and delete jobs"),
        (name = "leases", description = "Claim jobs and end their leases"),
        (name = "dlq", description = "The dead-letter queue"),
        (name = "queues", description = "Queue statistics"),
        (name = "operations", description = "Health and documentation"),
    )
)]
pub struct ApiDoc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_matches_only_equal_bytes() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
