//! A queue's push target: set, read, delete. prioq's instances claim the
//! queue's jobs and POST each to the target (see `crate::pusher`).

use axum::extract::State;
use axum::http::StatusCode;
use rand::distr::{Alphanumeric, SampleString};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, JsonBody};
use super::jobs::view::timestamp;
use super::params::QueuePath;
use crate::queue::{PushState, PushTarget};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(push, put_push, delete_push))
}

const MAX_URL_CHARS: usize = 2_000;
const CONCURRENCY: std::ops::RangeInclusive<u32> = 1..=1_000;
const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=3_600_000;
const LEASE_MS: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// A lease is at most this long unless asked: a delivery's lease is
/// extended while its request runs.
const DEFAULT_MAX_LEASE_MS: u64 = 30_000;
const SECRET_CHARS: std::ops::RangeInclusive<usize> = 16..=256;

/// Where and how to push a queue's jobs.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://billing.internal/jobs", "concurrency": 8, "timeout_ms": 30000}))]
pub struct PushRequest {
    /// An absolute `http` or `https` URL, up to 2000 characters; each job
    /// is POSTed to it. Redirects are not followed.
    #[schema(max_length = 2000)]
    url: String,
    /// Deliveries under way at once at most, across every instance, 1 to
    /// 1000; default 1.
    #[schema(minimum = 1, maximum = 1000, default = 1)]
    concurrency: Option<u32>,
    /// How long a delivery may take, 100 to 3600000; default 30000. No
    /// answer by then is a failed delivery.
    #[schema(minimum = 100, maximum = 3_600_000, default = 30000)]
    timeout_ms: Option<u64>,
    /// The lease each delivery holds, extended every third of it while the
    /// request runs, 1000 to 3600000; default `timeout_ms`, at most 30000.
    #[schema(minimum = 1000, maximum = 3_600_000)]
    lease_ms: Option<u64>,
    /// The key of the signatures, 16 to 256 characters; default the
    /// target's current one, or a new random one for a new target.
    #[schema(min_length = 16, max_length = 256)]
    secret: Option<String>,
}

/// A queue's push target and how its deliveries go.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"url": "https://billing.internal/jobs", "concurrency": 8, "timeout_ms": 30000, "lease_ms": 30000, "health": {"in_flight": 3, "delivered": 1204, "failed": 7, "stale": 0, "consecutive_failures": 0, "last_status": 200, "last_error": "push: HTTP 503: busy", "last_success_at": "2026-11-29T23:58:12.345Z", "last_failure_at": "2026-11-29T23:41:02.100Z"}}))]
pub struct PushView {
    url: String,
    concurrency: u32,
    timeout_ms: u64,
    lease_ms: u64,
    /// The signatures' key: in the answer to a `PUT` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    health: PushHealthView,
}

/// How a target's deliveries go, across every instance.
#[derive(Debug, Serialize, ToSchema)]
pub struct PushHealthView {
    /// Deliveries under way now.
    in_flight: u64,
    /// Deliveries answered 2xx and acked.
    delivered: u64,
    /// Deliveries answered otherwise, or not at all, and nacked.
    failed: u64,
    /// Deliveries whose lease ran out before they ended: their jobs were
    /// taken back and are delivered again.
    stale: u64,
    /// Failed or stale deliveries since the last one delivered.
    consecutive_failures: u64,
    /// The HTTP status of the last delivery that ended; 0 when no answer
    /// came; null before any.
    last_status: Option<u16>,
    /// Why the last failed delivery failed; null before any.
    last_error: Option<String>,
    last_success_at: Option<String>,
    last_failure_at: Option<String>,
}

impl PushView {
    pub fn new(state: PushState, with_secret: bool) -> Self {
        let health = state.health;
        Self {
            url: state.target.url,
            concurrency: state.target.concurrency,
            timeout_ms: state.target.timeout_ms,
            lease_ms: state.target.lease_ms,
            secret: with_secret.then_some(state.target.secret),
            health: PushHealthView {
                in_flight: health.in_flight,
                delivered: health.delivered,
                failed: health.failed,
                stale: health.stale,
                consecutive_failures: health.consecutive_failures,
                last_status: health.last_status,
                last_error: health.last_error,
                last_success_at: health.last_success_at.map(timestamp),
                last_failure_at: health.last_failure_at.map(timestamp),
            },
        }
    }
}

impl PushRequest {
    /// The target it asks for; its secret empty when it names none.
    fn into_target(self) -> Result<PushTarget> {
        let url = check_url(&self.url)?;
        let concurrency = self.concurrency.unwrap_or(1);
        if !CONCURRENCY.contains(&concurrency) {
            return Err(ApiError::validation("concurrency", "must be 1 to 1000"));
        }
        let timeout_ms = self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !TIMEOUT_MS.contains(&timeout_ms) {
            return Err(ApiError::validation("timeout_ms", "must be 100 to 3600000"));
        }
        let lease_ms = self
            .lease_ms
            .unwrap_or_else(|| timeout_ms.clamp(*LEASE_MS.start(), DEFAULT_MAX_LEASE_MS));
        if !LEASE_MS.contains(&lease_ms) {
            return Err(ApiError::validation("lease_ms", "must be 1000 to 3600000"));
        }
        let secret = match self.secret {
            Some(secret) if !SECRET_CHARS.contains(&secret.chars().count()) => {
                return Err(ApiError::validation(
                    "secret",
                    "must be 16 to 256 characters",
                ));
            }
            secret => secret.unwrap_or_default(),
        };
        Ok(PushTarget {
            url,
            concurrency,
            timeout_ms,
            lease_ms,
            secret,
        })
    }
}

/// An absolute `http` or `https` URL with a host.
fn check_url(url: &str) -> Result<String> {
    let refuse = |reason: &str| Err(ApiError::validation("url", reason));
    if url.chars().count() > MAX_URL_CHARS {
        return refuse("must be at most 2000 characters");
    }
    match reqwest::Url::parse(url) {
        Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") => {
            refuse("must be an http or https URL")
        }
        Ok(parsed) if parsed.host_str().is_none_or(str::is_empty) => refuse("must name a host"),
        Ok(parsed) => Ok(parsed.into()),
        Err(error) => refuse(&format!("is not an absolute URL: {error}")),
    }
}

/// Read a queue's push target and its health.
///
/// 404 when the queue has none. The signatures' secret is not shown.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/push", tag = "push",
    params(QueuePath),
    responses(
        (status = 200, description = "The target and its health", body = PushView),
        (status = 404, description = "The queue has no push target", body = crate::http::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn push(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<JsonBody<PushView>> {
    match state.broker.push(path.queue.as_str()).await? {
        Some(push) => Ok(JsonBody(PushView::new(push, false))),
        None => Err(no_target()),
    }
}

/// Set a queue's push target.
///
/// From then on prioq's instances (this one at once, the others from
/// their next sweep of the queue) claim the queue's jobs, at most
/// `concurrency` at once across all of them, and POST each to `url` as
/// JSON (`queue`, `lease_token`, `fence` and `job`, the job's view), with
/// the headers `prioq-signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256
/// of "<t>.<body>" under the secret>`), `prioq-queue`, `prioq-job-id`,
/// `prioq-attempt`, `prioq-fence` and the job's `traceparent`. A 2xx
/// answer acks the job (a JSON body is its result); 429 and 503 nack it
/// with their `Retry-After`; any other answer, none within `timeout_ms`,
/// or a failed connection nacks it with the error. Replacing a target
/// keeps its health. The answer shows the secret.
#[utoipa::path(
    put, path = "/v1/queues/{queue}/push", tag = "push",
    params(QueuePath),
    request_body = PushRequest,
    responses(
        (status = 201, description = "Set; the queue had none", body = PushView),
        (status = 200, description = "Replaced", body = PushView),
    )
)]
pub async fn put_push(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    JsonBody(request): JsonBody<PushRequest>,
) -> Result<(StatusCode, JsonBody<PushView>)> {
    let queue = path.queue.as_str();
    let mut target = request.into_target()?;
    // No secret named: the current one is kept, a new target gets one.
    if target.secret.is_empty() {
        target.secret = match state.broker.push(queue).await? {
            Some(push) => push.target.secret,
            None => Alphanumeric.sample_string(&mut rand::rng(), 32),
        };
    }
    let created = state.broker.put_push(queue, &target).await?;
    let push = state.broker.push(queue).await?.unwrap_or(PushState {
        target,
        health: Default::default(),
    });
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, JsonBody(PushView::new(push, true))))
}

/// Delete a queue's push target.
///
/// Deliveries under way end as they would; no new one starts (each
/// instance's next take of a slot finds the target gone). 404 when the
/// queue has none.
#[utoipa::path(
    delete, path = "/v1/queues/{queue}/push", tag = "push",
    params(QueuePath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "The queue has no push target", body = crate::http::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn delete_push(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<StatusCode> {
    if !state.broker.drop_push(path.queue.as_str()).await? {
        return Err(no_target());
    }
    Ok(StatusCode::NO_CONTENT)
}

fn no_target() -> ApiError {
    ApiError::NotFound("the queue has no push target".into())
}
