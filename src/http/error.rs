//! Every error a client can see, rendered as an RFC 9457 problem with a
//! stable `code`, and the extractors whose rejections take the same shape.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

use crate::queue::QueueError;

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
    #[error("{detail}")]
    BackendUnavailable {
        detail: &'static str,
        #[source]
        source: anyhow::Error,
    },
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
                source: anyhow::anyhow!("arrival tags exhausted"),
            },
            QueueError::Invalid(field) => {
                let reason = match field.as_str() {
                    "group_weights" => "would hold more than 10000 weights",
                    _ => "a rate limit needs both `per_second` and `burst`",
                };
                Self::validation(field, reason)
            }
            QueueError::ShardsChanged => Self::BackendUnavailable {
                detail: "the queue's number of shards is being changed; the request had no effect, retry it",
                source: anyhow::anyhow!("shards changed under the request"),
            },
            QueueError::Unavailable(source) => Self::BackendUnavailable {
                detail: "Redis cannot be reached; the request had no effect",
                source,
            },
            QueueError::Unknown(source) => Self::BackendUnavailable {
                detail: "Redis did not complete the request; its effect is unknown, retry it",
                source,
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
        let problem = Problem {
            kind: format!("urn:prioq:problem:{code_name}"),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: self.to_string(),
            code,
            field,
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
        match &self {
            Self::BackendUnavailable { source, .. } => {
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

/// A JSON request body; every way it can be wrong answers as a problem.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self> {
        if !is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let body = body_bytes(request, state).await?;
        parse_json(&body).map(Self)
    }
}

/// A JSON body that may be left out altogether (no body, no content type),
/// meaning every field takes its default.
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self> {
        let json = is_json(request.headers());
        let has_type = request.headers().contains_key(header::CONTENT_TYPE);
        let body = body_bytes(request, state).await?;
        if body.is_empty() && (json || !has_type) {
            return Ok(Self(T::default()));
        }
        if !json {
            return Err(ApiError::UnsupportedMediaType);
        }
        parse_json(&body).map(Self)
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| {
            let essence = essence.trim();
            essence.eq_ignore_ascii_case("application/json")
                || essence
                    .rsplit_once('+')
                    .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json"))
        })
}

async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection: BytesRejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::InvalidRequest(rejection.body_text())
            }
        })
}

/// Parses JSON, telling malformed JSON (400) from well-formed JSON with
/// wrong, missing or unknown fields (422, naming the field). A syntax error
/// anywhere in the body wins over a field error met before it.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if !inner.is_data() {
            return malformed(&inner);
        }
        // The typed parse stops at the first field error; the rest of the
        // body may not be JSON at all.
        if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            return malformed(&syntax);
        }
        field_error(&path, &without_position(&inner))
    })?;
    deserializer.end().map_err(|error| malformed(&error))?;
    Ok(value)
}

/// Names the field a data error is about: `path` is where serde stood,
/// and a missing or unknown field is named in `reason`.
fn field_error(path: &str, reason: &str) -> ApiError {
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| reason.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next());
    let field = match (path, named) {
        (".", Some(name)) => name.to_owned(),
        (".", None) => "(body)".to_owned(),
        (_, Some(name)) if reason.starts_with("missing") => format!("{path}.{name}"),
        // An unknown field's path already ends with its name.
        (_, _) => path.to_owned(),
    };
    ApiError::validation(field, reason)
}

fn malformed(error: &serde_json::Error) -> ApiError {
    ApiError::InvalidRequest(format!("malformed JSON: {}", without_position(error)))
}

fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((reason, _)) => reason.to_owned(),
        None => text,
    }
}

/// Path parameters; a segment that fails to parse answers 400.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|rejection: PathRejection| ApiError::InvalidRequest(rejection.body_text()))
    }
}

/// A query string; one that fails to parse answers 400.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Self(value))
            .map_err(|rejection: QueryRejection| ApiError::InvalidRequest(rejection.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        #[allow(dead_code)]
        task: String,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Batch {
        #[allow(dead_code)]
        jobs: Vec<Entry>,
    }

    fn field_of(error: ApiError) -> String {
        match error {
            ApiError::Validation { field, .. } => field,
            other => panic!("not a validation error: {other:?}"),
        }
    }

    #[test]
    fn trailing_characters_are_malformed_even_when_a_field_is_missing() {
        for body in [&b"{}}"[..], b"{} x", b"{\"jobs\": [{}]}]", b"{\"task\": 1,"] {
            let error = parse_json::<Batch>(body).expect_err("refused");
            assert!(matches!(error, ApiError::InvalidRequest(_)), "{error:?}");
        }
    }

    #[test]
    fn unknown_fields_are_named_with_their_path() {
        let top = parse_json::<Entry>(br#"{"task": "x", "priorty": 0}"#).expect_err("refused");
        assert_eq!(field_of(top), "priorty");
        let nested =
            parse_json::<Batch>(br#"{"jobs": [{"task": "x"}, {"task": "y", "delay": 5}]}"#)
                .expect_err("refused");
        assert_eq!(field_of(nested), "jobs[1].delay");
    }

    #[test]
    fn missing_fields_are_named_with_their_path() {
        let top = parse_json::<Entry>(b"{}").expect_err("refused");
        assert_eq!(field_of(top), "task");
        let nested = parse_json::<Batch>(br#"{"jobs": [{"task": "x"}, {}]}"#).expect_err("refused");
        assert_eq!(field_of(nested), "jobs[1].task");
    }
}
