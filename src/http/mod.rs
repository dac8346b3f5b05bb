//! The HTTP face of prioq: routes by resource, each handler translating
//! between the JSON of the contract and one queue operation; around them,
//! request ids, one log line and one histogram sample per request, auth,
//! and a problem answer for every rejection.

mod claims;
mod dlq;
pub mod error;
mod exposition;
pub mod extract;
pub(crate) mod jobs;
mod leases;
mod openapi;
mod ops;
mod params;
mod push;
mod queues;
mod schedules;
mod settings;
mod ui;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::Config;
use crate::queue::Broker;
use error::{ApiError, ErrorCause};
pub use openapi::{ApiDoc, document};

/// The longest a request may wait (`wait_ms`): a long poll of a claim, or a
/// read of a job waiting for it to end.
pub const MAX_WAIT_MS: u64 = 20_000;

/// What every handler can reach; cloned for every request, so one `Arc`.
#[derive(Debug, Clone)]
pub struct AppState(Arc<AppContext>);

#[derive(Debug)]
pub struct AppContext {
    pub broker: Arc<Broker>,
    pub config: Arc<Config>,
    /// Cancelled when the service stops: long polls answer early.
    pub shutdown: CancellationToken,
}

impl AppState {
    pub fn new(context: AppContext) -> Self {
        Self(Arc::new(context))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppContext;

    fn deref(&self) -> &AppContext {
        &self.0
    }
}

/// Set on a response by a handler that waited on purpose (a long poll):
/// that long is not slowness.
#[derive(Debug, Clone, Copy)]
pub struct AskedToWait(pub Duration);

const REQUEST_ID: &str = "x-request-id";

/// The whole application's routes.
pub fn router(state: AppState) -> Router {
    let (v1, ops) = openapi::routes();
    // Each layer wraps every route, and a route is cloned, layers and all,
    // for each request: one middleware (`observe`, which also guards the
    // `/v1` routes) keeps that to a few allocations.
    Router::new()
        .merge(Router::from(v1))
        .merge(Router::from(ops))
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

/// Gives the request an id (the proxy's, or a fresh one) that the answer
/// echoes and its log line carries; refuses a `/v1` request that `refusal`
/// refuses; records the request's duration by matched route and status,
/// and logs a line for a failed, slow or abandoned request (for every
/// request with `PRIOQ_LOG_REQUESTS`). While the instance shuts down,
/// answers close their connections.
async fn observe(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request
        .headers()
        .get(REQUEST_ID)
        .filter(|id| (1..=200).contains(&id.len()) && id.to_str().is_ok())
        .cloned()
        .or_else(|| HeaderValue::from_str(&format!("{:016x}", rand::random::<u64>())).ok());
    if let Some(id) = &id {
        request.headers_mut().insert(REQUEST_ID, id.clone());
    }
    let route = request.extensions().get::<MatchedPath>().cloned();
    let mut outcome = Outcome {
        state: state.clone(),
        started,
        method: request.method().clone(),
        route,
        request_id: id.clone(),
        answer: None,
    };
    let guarded = outcome
        .route
        .as_ref()
        .is_some_and(|route| route.as_str().starts_with("/v1/"));
    let mut response = match guarded.then(|| refusal(&state, &request)).flatten() {
        Some(refused) => refused.into_response(),
        None => next.run(request).await,
    };
    outcome.answer = Some((
        response.status().as_u16(),
        response.extensions().get::<ErrorCause>().cloned(),
        response
            .extensions()
            .get::<AskedToWait>()
            .map(|wait| wait.0),
    ));
    drop(outcome);
    if let Some(id) = id {
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

/// What `observe` reports of one request when it ends: answered (status,
/// server-side cause, wait asked for), or dropped because the client went
/// away first (status 499, as nginx calls it).
struct Outcome {
    state: AppState,
    started: Instant,
    method: axum::http::Method,
    route: Option<MatchedPath>,
    request_id: Option<HeaderValue>,
    answer: Option<(u16, Option<ErrorCause>, Option<Duration>)>,
}

impl Drop for Outcome {
    fn drop(&mut self) {
        const CLIENT_WENT_AWAY: u16 = 499;
        let elapsed = self.started.elapsed();
        let status = self.answer.as_ref().map_or(CLIENT_WENT_AWAY, |a| a.0);
        let route = self.route.as_ref().map_or("unmatched", MatchedPath::as_str);
        exposition::request_duration(route, status).record(elapsed.as_secs_f64());
        let asked_to_wait = self.answer.as_ref().and_then(|a| a.2).unwrap_or_default();
        let slow = elapsed.saturating_sub(asked_to_wait) > self.state.config.slow_request();
        let method = &self.method;
        let request_id = self
            .request_id
            .as_ref()
            .and_then(|id| id.to_str().ok())
            .unwrap_or_default();
        let latency_ms = format_args!("{:.3}", elapsed.as_secs_f64() * 1000.0);
        match &self.answer {
            Some((_, Some(cause), _)) => {
                tracing::error!(request_id, %method, route, status, %latency_ms, cause = %cause.0, "request failed")
            }
            None => {
                tracing::info!(request_id, %method, route, status, %latency_ms, "client went away before the answer")
            }
            Some(_) if slow => {
                tracing::warn!(request_id, %method, route, status, %latency_ms, "slow request")
            }
            Some(_) if self.state.config.log_requests => {
                tracing::info!(request_id, %method, route, status, %latency_ms, "request")
            }
            Some(_) => {}
        }
    }
}

/// Why a `/v1` request is refused before its handler runs, if it is: the
/// bearer token is looked at first, then browsers of other sites.
fn refusal(state: &AppState, request: &Request) -> Option<ApiError> {
    unauthorized(state, request).or_else(|| browser_refusal(state, request))
}

/// What a browser page of another site can send without the page being
/// allowed to: a change (POST, PUT, PATCH,
/// DELETE) fetched cross-site or same-site (`Sec-Fetch-Site`) or from
/// another origin than the service's own and the allowed ones (`Origin`),
/// 403; and a form's or plain text's content type, which a page may post
/// anywhere without asking, 415. Clients that send none of these headers
/// (curl, services) are untouched; the dashboard's own requests are
/// same-origin.
fn browser_refusal(state: &AppState, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|value| value.to_str().ok());
    let form = text(header::CONTENT_TYPE)
        .and_then(|value| value.split(';').next())
        .map(str::trim)
        .is_some_and(|essence| {
            [
                "application/x-www-form-urlencoded",
                "multipart/form-data",
                "text/plain",
            ]
            .iter()
            .any(|form| essence.eq_ignore_ascii_case(form))
        });
    if form {
        return Some(ApiError::UnsupportedMediaType);
    }
    let changes = !matches!(
        *request.method(),
        axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
    );
    let cross_site = text(header::HeaderName::from_static("sec-fetch-site")).is_some_and(|site| {
        site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")
    });
    let foreign = text(header::ORIGIN).is_some_and(|origin| {
        let hosts = [
            header::HeaderName::from_static("x-forwarded-host"),
            header::HOST,
        ];
        let own = hosts
            .into_iter()
            .filter_map(&text)
            .any(|host| origin_host(origin).is_some_and(|of| of.eq_ignore_ascii_case(host)));
        let allowed = state
            .config
            .allowed_origins
            .iter()
            .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin));
        !own && !allowed
    });
    (changes && (cross_site || foreign)).then_some(ApiError::ForbiddenOrigin)
}

/// The `host[:port]` of an origin (`scheme://host[:port]`).
fn origin_host(origin: &str) -> Option<&str> {
    origin.split_once("://").map(|(_, host)| host)
}

/// A missing or wrong bearer token, when tokens are configured.
fn unauthorized(state: &AppState, request: &Request) -> Option<ApiError> {
    let mut tokens = state.config.tokens().peekable();
    tokens.peek()?;
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
    (!accepted).then_some(ApiError::Unauthorized)
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
