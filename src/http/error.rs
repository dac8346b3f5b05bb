//! Every error a client can see, rendered as an RFC 9457 problem with a
//! stable `code`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::queue::{Bound, QueueError};

/// What went wrong, in the client's terms.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("a valid bearer token is required")]
    Unauthorized,
    #[error("{0}")]
    NotFound(String),
    #[error(
        "the lease token is not the job's current lease; the job was taken back or claimed again"
    )]
    LeaseLost,
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("the request body is larger than the configured limit")]
    PayloadTooLarge,
    #[error("the request body must be JSON, sent with `Content-Type: application/json`")]
    UnsupportedMediaType,
    #[error("`{field}`: {reason}")]
    Validation { field: String, reason: String },
    #[error("the server failed to answer this request")]
    Internal,
    #[error("a browser page of another site may not change this service")]
    ForbiddenOrigin,
    /// Redis did not serve the request; `effect` says whether it may have
    /// taken effect.
    #[error("{detail}")]
    BackendUnavailable {
        detail: &'static str,
        effect: Effect,
        #[source]
        source: anyhow::Error,
    },
    #[error(
        "Redis is out of memory and refused a write that would grow it; the request had no effect"
    )]
    BackendFull {
        #[source]
        source: anyhow::Error,
    },
    #[error("the limit on {0} is reached; the request had no effect")]
    LimitReached(&'static str),
    /// The queue's `max_pending` or `max_pending_bytes` would be
    /// exceeded: nothing changed.
    #[error(
        "the queue is full: {waiting} {} wait to be handed out and {} allows {limit} (a sharded queue's per shard); the request had no effect, retry it later",
        bound.unit(),
        bound.setting()
    )]
    QueueFull {
        waiting: u64,
        limit: u64,
        bound: Bound,
    },
}

/// What a `queue_full` answer's `Retry-After` asks of the producer (s): a
/// second, about the time a busy queue's workers take to free some room.
const QUEUE_FULL_RETRY_AFTER_S: &str = "1";

/// Whether a request that Redis did not serve may have taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Nothing was applied: retrying is always safe.
    None,
    /// A write may have been applied: retry with the same ids, tokens or
    /// request id.
    Unknown,
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Validation {
            field: field.into(),
            reason: reason.into(),
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::LeaseLost | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BackendUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::BackendFull { .. } | Self::LimitReached(_) => StatusCode::INSUFFICIENT_STORAGE,
            Self::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::ForbiddenOrigin => StatusCode::FORBIDDEN,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable, machine-readable name of the error.
    pub fn code(&self) -> ProblemCode {
        match self {
            Self::InvalidRequest(_) => ProblemCode::InvalidRequest,
            Self::Unauthorized => ProblemCode::Unauthorized,
            Self::NotFound(_) => ProblemCode::NotFound,
            Self::LeaseLost => ProblemCode::LeaseLost,
            Self::Conflict(_) => ProblemCode::Conflict,
            Self::MethodNotAllowed(_) => ProblemCode::MethodNotAllowed,
            Self::PayloadTooLarge => ProblemCode::PayloadTooLarge,
            Self::UnsupportedMediaType => ProblemCode::UnsupportedMediaType,
            Self::Validation { .. } => ProblemCode::ValidationFailed,
            Self::BackendUnavailable { .. } => ProblemCode::BackendUnavailable,
            Self::BackendFull { .. } => ProblemCode::BackendFull,
            Self::LimitReached(_) => ProblemCode::LimitReached,
            Self::QueueFull { .. } => ProblemCode::QueueFull,
            Self::ForbiddenOrigin => ProblemCode::ForbiddenOrigin,
            Self::Internal => ProblemCode::InternalError,
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(error: QueueError) -> Self {
        match error {
            QueueError::NotFound => Self::NotFound("no such job".into()),
            QueueError::LeaseLost => Self::LeaseLost,
            QueueError::Conflict => Self::Conflict("the job's state does not allow this".into()),
            QueueError::NotEmpty => Self::Conflict(
                "the queue holds jobs: its number of shards can change only while it holds none"
                    .into(),
            ),
            QueueError::SequenceExhausted => Self::BackendUnavailable {
                detail: "the priority class has used up its arrival tags until it is drained; the request had no effect",
                effect: Effect::None,
                source: anyhow::anyhow!("arrival tags exhausted"),
            },
            QueueError::Invalid(field) => {
                let reason = match field.split_once('.') {
                    Some((object, _)) => format!("`{object}` needs every one of its fields"),
                    None => "would hold more weights than a queue may have".to_owned(),
                };
                Self::validation(field, reason)
            }
            QueueError::UnknownDependency { job, at } => {
                Self::validation(format!("jobs[{job}].after[{at}]"), "names no job")
            }
            QueueError::ShardsChanged => Self::BackendUnavailable {
                detail: "the queue's number of shards is being changed; the request had no effect, retry it",
                effect: Effect::None,
                source: anyhow::anyhow!("shards changed under the request"),
            },
            QueueError::Unavailable(source) => Self::BackendUnavailable {
                detail: "Redis cannot be reached, or refused the request before running it; the request had no effect",
                effect: Effect::None,
                source,
            },
            QueueError::Unknown(source) => Self::BackendUnavailable {
                detail: "Redis did not complete the request; its effect is unknown, retry it",
                effect: Effect::Unknown,
                source,
            },
            QueueError::Full(source) => Self::BackendFull { source },
            QueueError::Deleting => Self::BackendUnavailable {
                detail: "the queue is being deleted; the request had no effect",
                effect: Effect::None,
                source: anyhow::anyhow!("the queue is being deleted"),
            },
            QueueError::Unregistered => Self::BackendUnavailable {
                detail: "the queue could not be put on the list of queues; the request had no effect",
                effect: Effect::None,
                source: anyhow::anyhow!("the queue is not on the list of queues"),
            },
            QueueError::HoldsJobs => {
                Self::Conflict("the queue holds jobs: `?purge=true` deletes them with it".into())
            }
            QueueError::LimitReached(limit) => Self::LimitReached(limit),
            QueueError::QueueFull {
                waiting,
                limit,
                bound,
            } => Self::QueueFull {
                waiting,
                limit,
                bound,
            },
        }
    }
}

/// The `code` member of every problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    InvalidRequest,
    Unauthorized,
    NotFound,
    LeaseLost,
    Conflict,
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
    BackendUnavailable,
    BackendFull,
    LimitReached,
    QueueFull,
    ForbiddenOrigin,
    InternalError,
}

/// Why a request failed on the server's side; the request log line reports
/// it, the client never sees it.
#[derive(Debug, Clone)]
pub struct ErrorCause(pub String);

/// An RFC 9457 problem details object.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"type": "urn:prioq:problem:lease_lost", "title": "Conflict", "status": 409, "detail": "the lease token is not the job's current lease; the job was taken back or claimed again", "code": "lease_lost"}))]
pub struct Problem {
    /// Identifies the kind of problem; one per `code`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    pub code: ProblemCode,
    /// The request field that failed validation, for `validation_failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For 429, 503 and 507: whether the request may have taken effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        let code_name = serde_json::to_value(code)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let field = match &self {
            Self::Validation { field, .. } => Some(field.clone()),
            _ => None,
        };
        let effect = match &self {
            Self::BackendUnavailable { effect, .. } => Some(*effect),
            Self::BackendFull { .. } | Self::LimitReached(_) | Self::QueueFull { .. } => {
                Some(Effect::None)
            }
            _ => None,
        };
        let problem = Problem {
            kind: format!("urn:prioq:problem:{code_name}"),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: self.to_string(),
            code,
            field,
            effect,
        };
        let mut response = (status, Json(problem)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if matches!(self, Self::Unauthorized) {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(self, Self::QueueFull { .. }) {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(QUEUE_FULL_RETRY_AFTER_S),
            );
        }
        match &self {
            Self::BackendUnavailable { source, .. } | Self::BackendFull { source } => {
                response
                    .extensions_mut()
                    .insert(ErrorCause(format!("{source:#}")));
            }
            Self::Internal => {
                response
                    .extensions_mut()
                    .insert(ErrorCause("a handler panicked".into()));
            }
            _ => {}
        }
        response
    }
}
