//! The HTTP face of prioq: routes by resource, each handler translating
//! between the JSON of the contract and one queue operation; around them,
//! request ids, one log line and one histogram sample per request, auth,
//! and a problem answer for every rejection.

mod claims;
mod dlq;
pub mod error;
mod jobs;
mod openapi;
mod ops;
mod params;
mod queues;
mod ui;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tracing::Instrument;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::Config;
use crate::queue::Broker;
use error::{ApiError, ErrorCause};
pub use openapi::ApiDoc;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub broker: Arc<Broker>,
    pub config: Arc<Config>,
    /// Cancelled when the service stops: long polls answer early.
    pub shutdown: CancellationToken,
}

const REQUEST_ID: &str = "x-request-id";

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
        .merge(SwaggerUi::new("/docs").config(utoipa_swagger_ui::Config::from("/openapi.json")))
        .merge(ui::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal.into_response()
        }))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("this route does not take that method".into())
}

/// Gives the request an id (the proxy's, or a fresh one) that every log
/// line of the request carries and the answer echoes; then logs one line
/// and records the request's duration by matched route and status. While
/// the instance shuts down, answers close their connections.
async fn observe(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = request
        .headers()
        .get(REQUEST_ID)
        .filter(|id| (1..=200).contains(&id.len()))
        .and_then(|id| id.to_str().ok())
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let id_header = HeaderValue::from_str(&request_id).ok();
    if let Some(id) = &id_header {
        request.headers_mut().insert(REQUEST_ID, id.clone());
    }
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let span = tracing::info_span!("request", request_id);
    let mut outcome = Outcome {
        span: span.clone(),
        started,
        method,
        route,
        status: None,
        cause: None,
    };
    let mut response = next.run(request).instrument(span).await;
    outcome.status = Some(response.status().as_u16());
    outcome.cause = response.extensions().get::<ErrorCause>().cloned();
    drop(outcome);
    if let Some(id) = id_header {
        response.headers_mut().insert(REQUEST_ID, id);
    }
    if state.shutdown.is_cancelled() {
        // A proxy must not reuse this connection: the listener is closing.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// What `observe` reports of one request when it ends: answered, or
/// dropped because the client went away first (status 499, as nginx
/// calls it).
struct Outcome {
    span: tracing::Span,
    started: Instant,
    method: axum::http::Method,
    route: String,
    status: Option<u16>,
    cause: Option<ErrorCause>,
}

impl Drop for Outcome {
    fn drop(&mut self) {
        const CLIENT_WENT_AWAY: u16 = 499;
        let status = self.status.unwrap_or(CLIENT_WENT_AWAY);
        let elapsed = self.started.elapsed();
        metrics::histogram!(
            "prioq_http_request_duration_seconds",
            "route" => self.route.clone(),
            "status" => status.to_string(),
        )
        .record(elapsed.as_secs_f64());
        let (method, route) = (&self.method, self.route.as_str());
        let latency_ms = elapsed.as_secs_f64() * 1000.0;
        self.span.in_scope(|| match (&self.cause, self.status) {
            (Some(cause), _) => {
                tracing::error!(%method, route, status, latency_ms, cause = %cause.0, "request failed")
            }
            (None, None) => {
                tracing::info!(%method, route, status, latency_ms, "client went away before the answer")
            }
            (None, Some(_)) => tracing::info!(%method, route, status, latency_ms, "request"),
        });
    }
}

/// Checks the bearer token before anything else of the request is read.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut tokens = state.config.tokens().peekable();
    if tokens.peek().is_none() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    // Compare against every token, each in constant time, so timing tells
    // neither which token nor how much of one matched.
    let accepted = presented.is_some_and(|presented| {
        tokens.fold(false, |found, token| {
            found | constant_time_eq(token.as_bytes(), presented.as_bytes())
        })
    });
    if accepted {
        next.run(request).await
    } else {
        ApiError::Unauthorized.into_response()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

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
