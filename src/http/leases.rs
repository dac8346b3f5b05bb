//! What the holder of a lease does with it: ack, ack many, extend (the
//! heartbeat, with progress), nack.

use std::fmt;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::Instrument;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ProblemCode, Result};
use super::extract::{ApiPath, JsonBody, objects};
use super::jobs::request::{check_delay, check_json};
use super::jobs::view::JobView;
use super::params::{JobPath, QueuePath, is_job_id};
use crate::otel;
use crate::queue::{Ack, AckOutcome, Nack, QueueError};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ack_many))
        .routes(routes!(ack))
        .routes(routes!(extend))
        .routes(routes!(nack))
}

/// A lease's length, claimed or extended.
pub(super) const LEASE_MS: std::ops::RangeInclusive<u64> = 100..=43_200_000;
/// Acks in one request, claim or ack many.
pub(super) const MAX_ACKS: usize = 1000;
const MAX_ERROR_CHARS: usize = 2000;
const MAX_TOKEN_CHARS: usize = 200;
const MAX_RESULT_BYTES: usize = 64 * 1024;
const MAX_PROGRESS_BYTES: usize = 4 * 1024;

/// Proof of the current lease, and what the job produced.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"lease_token": "9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1", "result": {"sent": true}}))]
pub struct AckRequest {
    #[schema(min_length = 1, max_length = 200)]
    lease_token: String,
    /// Any JSON value, at most 64 KiB as sent: kept with the job while it
    /// is retained (see `retain_ms`), dropped otherwise.
    #[schema(value_type = Option<Value>)]
    result: Option<Box<RawValue>>,
}

/// Checks an ack's result, named `field`.
fn check_result(field: impl fmt::Display, result: Option<&RawValue>) -> Result<()> {
    match result {
        Some(result) => check_json(
            field,
            result,
            Some((MAX_RESULT_BYTES, "must be at most 65536 bytes of JSON")),
        ),
        None => Ok(()),
    }
}

fn check_token(field: impl fmt::Display, token: &str) -> Result<()> {
    if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
        return Err(ApiError::validation(
            field.to_string(),
            "must be a lease token from a claim",
        ));
    }
    Ok(())
}

/// Acknowledge a finished job.
///
/// The job and its payload are deleted, or, when the job is retained
/// (`retain_ms`), kept as `completed` with the `result` until its retention
/// ends; an ack repeated with the same token then answers 204 again. Works
/// after the deadline as long as the sweeper has not taken the job back.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/jobs/{id}/ack", tag = "leases",
    params(JobPath),
    request_body = AckRequest,
    responses(
        (status = 204, description = "Acknowledged; the job is gone or completed"),
    )
)]
pub async fn ack(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
    JsonBody(request): JsonBody<AckRequest>,
) -> Result<StatusCode> {
    check_token("lease_token", &request.lease_token)?;
    check_result("result", request.result.as_deref())?;
    let ack = Ack {
        id: path.id.as_str().to_owned(),
        lease_token: request.lease_token,
        result: request.result,
    };
    let span = otel::settle_span(path.queue.as_str(), "ack", std::slice::from_ref(&ack.id));
    let outcome = state
        .broker
        .ack(path.queue.as_str(), vec![ack])
        .instrument(span)
        .await?;
    match outcome.first() {
        Some(AckOutcome::Acked) => Ok(StatusCode::NO_CONTENT),
        Some(AckOutcome::LeaseLost) => Err(ApiError::LeaseLost),
        Some(AckOutcome::NotFound) => Err(ApiError::NotFound("no such job".into())),
        None => Err(ApiError::from(QueueError::Unknown(anyhow::anyhow!(
            "the exchange function answered nothing for an ack"
        )))),
    }
}

/// Many acknowledgements.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [{"id": "order-1234", "lease_token": "9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1"}, {"id": "order-1235", "lease_token": "9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-2"}]}))]
pub struct AckManyRequest {
    /// 1 to 1000 entries.
    #[serde(deserialize_with = "objects")]
    #[schema(min_items = 1, max_items = 1000)]
    jobs: Vec<AckEntry>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckEntry {
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    id: String,
    #[schema(min_length = 1, max_length = 200)]
    lease_token: String,
    /// Any JSON value, at most 64 KiB as sent: kept with the job while it
    /// is retained, dropped otherwise.
    #[schema(value_type = Option<Value>)]
    result: Option<Box<RawValue>>,
}

/// The outcome of each acknowledgement, in request order.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"results": [{"id": "order-1234", "status": 204}, {"id": "order-1235", "status": 409, "code": "lease_lost"}]}))]
pub struct AckManyResponse {
    results: Vec<AckResult>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AckResult {
    id: String,
    /// 204 acknowledged, 404 no such job, 409 lease lost.
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<ProblemCode>,
}

/// Acknowledge many jobs.
///
/// Each entry follows the single-ack rules on its own.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/ack", tag = "leases",
    params(QueuePath),
    request_body = AckManyRequest,
    responses(
        (status = 200, description = "One result per entry", body = AckManyResponse),
    )
)]
pub async fn ack_many(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    JsonBody(request): JsonBody<AckManyRequest>,
) -> Result<JsonBody<AckManyResponse>> {
    if !(1..=MAX_ACKS).contains(&request.jobs.len()) {
        return Err(ApiError::validation("jobs", "must hold 1 to 1000 entries"));
    }
    let acks = check_ack_entries("jobs", request.jobs)?;
    let ids: Vec<String> = acks.iter().map(|ack| ack.id.clone()).collect();
    let span = otel::settle_span(path.queue.as_str(), "ack", &ids);
    let outcomes = state
        .broker
        .ack(path.queue.as_str(), acks)
        .instrument(span)
        .await?;
    Ok(JsonBody(AckManyResponse {
        results: ack_results(ids, outcomes),
    }))
}

/// Checks every entry of the list named `field`, naming the first bad one.
pub(super) fn check_ack_entries(field: &str, entries: Vec<AckEntry>) -> Result<Vec<Ack>> {
    entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            if !is_job_id(&entry.id) {
                return Err(ApiError::validation(
                    format!("{field}[{i}].id"),
                    "must be 1 to 128 of A-Z a-z 0-9 _ . : -",
                ));
            }
            check_token(format_args!("{field}[{i}].lease_token"), &entry.lease_token)?;
            check_result(format_args!("{field}[{i}].result"), entry.result.as_deref())?;
            Ok(Ack {
                id: entry.id,
                lease_token: entry.lease_token,
                result: entry.result,
            })
        })
        .collect()
}

/// Each entry's outcome as the single ack would have answered it.
pub(super) fn ack_results(ids: Vec<String>, outcomes: Vec<AckOutcome>) -> Vec<AckResult> {
    ids.into_iter()
        .zip(outcomes)
        .map(|(id, outcome)| {
            let (status, code) = match outcome {
                AckOutcome::Acked => (204, None),
                AckOutcome::LeaseLost => (409, Some(ProblemCode::LeaseLost)),
                AckOutcome::NotFound => (404, Some(ProblemCode::NotFound)),
            };
            AckResult { id, status, code }
        })
        .collect()
}

/// A heartbeat: keep the lease for `lease_ms` from now, and say how far
/// the work got.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"lease_token": "9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1", "lease_ms": 60000, "progress": {"done": 40, "of": 100}}))]
pub struct ExtendRequest {
    #[schema(min_length = 1, max_length = 200)]
    lease_token: String,
    /// 100 to 43200000; default from configuration.
    #[schema(minimum = 100, maximum = 43_200_000)]
    lease_ms: Option<u64>,
    /// Any JSON value, at most 4 KiB as sent: shown as the job's `progress`
    /// until the job ends.
    #[schema(value_type = Option<Value>)]
    progress: Option<Box<RawValue>>,
}

/// Extend a lease.
///
/// The new deadline is now + `lease_ms`; the lease token stays the same.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/jobs/{id}/extend", tag = "leases",
    params(JobPath),
    request_body = ExtendRequest,
    responses(
        (status = 200, description = "The job with its new `lease_expires_at`", body = JobView),
    )
)]
pub async fn extend(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
    JsonBody(request): JsonBody<ExtendRequest>,
) -> Result<JsonBody<JobView>> {
    check_token("lease_token", &request.lease_token)?;
    let lease_ms = request.lease_ms.unwrap_or(state.config.default_lease_ms);
    if !LEASE_MS.contains(&lease_ms) {
        return Err(ApiError::validation("lease_ms", "must be 100 to 43200000"));
    }
    if let Some(progress) = &request.progress {
        check_json(
            "progress",
            progress,
            Some((MAX_PROGRESS_BYTES, "must be at most 4096 bytes of JSON")),
        )?;
    }
    let queue = path.queue.as_str();
    let job = state
        .broker
        .extend(
            queue,
            path.id.as_str(),
            &request.lease_token,
            lease_ms,
            request.progress.as_deref(),
        )
        .await?;
    Ok(JsonBody(JobView::new(queue, job)))
}

/// Give a job back without success.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"lease_token": "…", "delay_ms": 0, "error": "timeout talking to SMTP", "dead": false}))]
pub struct NackRequest {
    #[schema(min_length = 1, max_length = 200)]
    lease_token: String,
    /// Keep the job scheduled this long before it is claimable again;
    /// default the job's `backoff` (none: 0).
    #[schema(maximum = 2_592_000_000_u64)]
    delay_ms: Option<u64>,
    /// Kept as the job's `last_error`; up to 2000 characters.
    #[schema(max_length = 2000)]
    error: Option<String>,
    /// Dead-letter the job now.
    #[serde(default)]
    dead: bool,
    /// Requeue at this priority instead of the job's own.
    #[schema(maximum = 255)]
    priority: Option<u8>,
}

/// Nack a job.
///
/// `attempts` goes up by one; the job goes back to `pending` behind the jobs
/// already waiting in its priority (or `scheduled` with `delay_ms`, or
/// without it for the job's `backoff`), or to
/// `dead` when `dead` is true or its attempts reach `max_attempts`.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/jobs/{id}/nack", tag = "leases",
    params(JobPath),
    request_body = NackRequest,
    responses(
        (status = 200, description = "The job in its new state", body = JobView),
    )
)]
pub async fn nack(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
    JsonBody(request): JsonBody<NackRequest>,
) -> Result<JsonBody<JobView>> {
    check_token("lease_token", &request.lease_token)?;
    if let Some(delay_ms) = request.delay_ms {
        check_delay("delay_ms", delay_ms)?;
    }
    if let Some(error) = &request.error
        && error.chars().count() > MAX_ERROR_CHARS
    {
        return Err(ApiError::validation(
            "error",
            "must be at most 2000 characters",
        ));
    }
    let queue = path.queue.as_str();
    let nack = Nack {
        delay_ms: request.delay_ms,
        error: request.error,
        dead: request.dead,
        priority: request.priority,
    };
    let span = otel::settle_span(queue, "nack", &[path.id.as_str()]);
    let job = state
        .broker
        .nack(queue, path.id.as_str(), &request.lease_token, &nack)
        .instrument(span)
        .await?;
    Ok(JsonBody(JobView::new(queue, job)))
}
