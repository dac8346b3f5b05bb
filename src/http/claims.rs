//! Claim: jobs leased, most urgent first, with a long poll and the acks a
//! worker brings along; what the lease holder does next is in `leases`.

use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::Extension;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use tracing::Instrument;
use utoipa::ToSchema;

use super::error::{ApiError, Result};
use super::extract::{ApiPath, JsonBody, OptionalJsonBody, optional_objects};
use super::jobs::view::JobView;
use super::leases::{AckEntry, AckResult, LEASE_MS, MAX_ACKS, ack_results, check_ack_entries};
use super::params::{QueuePath, is_job_id};
use super::{AppState, AskedToWait};
use crate::otel;
use crate::queue::ClaimOptions;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(claim))
}

const MAX_WORKER_CHARS: usize = 200;

/// How to claim; every field is optional.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "billing-7", "lease_ms": 60000, "max_jobs": 1, "wait_ms": 0, "ack": [{"id": "order-1233", "lease_token": "4fJ2kX9qLm0aB7cD1eF3gH-1"}]}))]
pub struct ClaimRequest {
    /// Who claims, shown on the leased jobs; up to 200 characters.
    #[schema(max_length = 200)]
    worker: Option<String>,
    /// Lease length, 100 to 43200000; default from configuration.
    #[schema(minimum = 100, maximum = 43_200_000)]
    lease_ms: Option<u64>,
    /// 1 to 100; default 1.
    #[schema(minimum = 1, maximum = 100)]
    max_jobs: Option<u32>,
    /// Long poll: wait up to this long (0 to 20000) for a claimable job.
    #[serde(default)]
    #[schema(maximum = 20_000)]
    wait_ms: u64,
    /// Jobs to acknowledge first, each by the single-ack rules (0 to 1000):
    /// a worker's finished job and its next claim in one request.
    #[serde(default, deserialize_with = "optional_objects")]
    #[schema(max_items = 1000)]
    ack: Option<Vec<AckEntry>>,
    /// Makes the claim safe to retry: a claim repeated with the same
    /// `request_id` and `worker` while the first answer's leases run
    /// answers the same jobs with the same lease tokens (those still
    /// leased under them), leases nothing new, and applies its `ack`
    /// entries at most once. Send a fresh one per claim, and the same one
    /// when retrying a claim whose answer was lost.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    request_id: Option<String>,
}

/// The leased jobs, and the outcome of each ack the claim brought.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"jobs": [{"id": "order-1234", "queue": "emails", "task": "send_email", "args": {"to": "a@example.com"}, "priority": 0, "group": null, "state": "processing", "attempts": 0, "max_attempts": 5, "enqueued_at": "2026-11-29T23:58:12.345Z", "run_at": null, "lease_token": "9f1c0e6a2b7d4c3e8a5f1b-1", "lease_expires_at": "2026-11-29T23:59:12.345Z", "worker": "billing-7", "last_error": null}], "acked": [{"id": "order-1233", "status": 204}]}))]
pub struct ClaimResponse {
    /// State `processing`, with their lease tokens; empty when nothing was
    /// claimable.
    jobs: Vec<JobView>,
    /// One result per entry of `ack`, in request order; only when `ack` was
    /// sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    acked: Option<Vec<AckResult>>,
    /// On a sharded queue, the shards the claim could not reach (their
    /// Redis failing over, say) and went on without: their jobs may have
    /// been passed over by the jobs answered. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skipped_shards: Vec<u32>,
}

/// Claim jobs.
///
/// Leases up to `max_jobs` jobs, most urgent first and oldest first inside
/// a priority, except for the bulk floor's share, which takes the oldest
/// job of the least urgent priority. With `wait_ms` the request waits for a
/// job to become claimable. An empty list means nothing was claimable.
/// With `ack`, those jobs are acknowledged first, in the same step when no
/// wait is needed, and before any wait begins.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/claim", tag = "leases",
    params(QueuePath),
    request_body(content = ClaimRequest, description = "May be left out"),
    responses(
        (status = 200, description = "The leased jobs (state `processing`) and the acks' outcomes", body = ClaimResponse),
    )
)]
pub async fn claim(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    OptionalJsonBody(request): OptionalJsonBody<ClaimRequest>,
) -> Result<(Extension<AskedToWait>, JsonBody<ClaimResponse>)> {
    let lease_ms = request.lease_ms.unwrap_or(state.config.default_lease_ms);
    if !LEASE_MS.contains(&lease_ms) {
        return Err(ApiError::validation("lease_ms", "must be 100 to 43200000"));
    }
    let max_jobs = request.max_jobs.unwrap_or(1);
    if !(1..=100).contains(&max_jobs) {
        return Err(ApiError::validation("max_jobs", "must be 1 to 100"));
    }
    if request.wait_ms > super::MAX_WAIT_MS {
        return Err(ApiError::validation("wait_ms", "must be 0 to 20000"));
    }
    if let Some(worker) = &request.worker
        && worker.chars().count() > MAX_WORKER_CHARS
    {
        return Err(ApiError::validation(
            "worker",
            "must be at most 200 characters",
        ));
    }
    let (acks, asked_to_ack) = match request.ack {
        Some(entries) if entries.len() > MAX_ACKS => {
            return Err(ApiError::validation("ack", "must hold 0 to 1000 entries"));
        }
        Some(entries) => (check_ack_entries("ack", entries)?, true),
        None => (Vec::new(), false),
    };
    if let Some(id) = &request.request_id
        && !is_job_id(id)
    {
        return Err(ApiError::validation(
            "request_id",
            "a request id is 1 to 128 of A-Z a-z 0-9 _ . : -",
        ));
    }
    let ids: Vec<String> = acks.iter().map(|ack| ack.id.clone()).collect();
    let wait = Duration::from_millis(request.wait_ms);
    let options = ClaimOptions {
        worker: request.worker.filter(|w| !w.is_empty()),
        lease_ms,
        max_jobs,
        request_id: request.request_id,
        wait,
        acks,
    };
    let queue = path.queue.as_str();
    let receive = otel::receive_span(queue);
    // Ends with the claim that settles them.
    let _settle = (!ids.is_empty()).then(|| otel::settle_span(queue, "ack", &ids));
    let claimed = state
        .broker
        .claim(queue, options, &state.shutdown)
        .instrument(receive.clone())
        .await?;
    let received = (claimed.jobs.iter()).map(|job| (job.id.as_str(), job.trace.as_ref()));
    otel::link_jobs(&receive, received);
    let answer = JsonBody(ClaimResponse {
        jobs: claimed
            .jobs
            .into_iter()
            .map(|job| JobView::new(queue, job))
            .collect(),
        acked: asked_to_ack.then(|| ack_results(ids, claimed.acked)),
        skipped_shards: claimed.skipped,
    });
    Ok((Extension(AskedToWait(wait)), answer))
}
