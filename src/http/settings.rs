//! A queue's settings: read, change by JSON merge patch (RFC 7396), pause
//! and resume.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, JsonBody, present_object};
use super::params::{QueuePath, is_job_id};
use crate::queue::store::keys::MAX_SHARDS;
use crate::queue::{MAX_RETAIN_MS, RateLimit, Settings, SettingsChange};

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/queues/{queue}/settings",
            get(settings).patch(change_settings),
        )
        .route("/v1/queues/{queue}/pause", post(pause))
        .route("/v1/queues/{queue}/resume", post(resume))
}

const MAX_IN_FLIGHT: std::ops::RangeInclusive<u64> = 1..=1_000_000;
const GROUP_MAX_IN_FLIGHT: std::ops::RangeInclusive<u64> = 1..=100_000;
const MAX_RATE: f64 = 1_000_000.0;
const BURST: std::ops::RangeInclusive<u64> = 1..=1_000_000;
const WEIGHT: std::ops::RangeInclusive<u32> = 1..=100;
const MAX_WEIGHTS: usize = 10_000;
const RETAIN_MS: std::ops::RangeInclusive<u64> = 0..=MAX_RETAIN_MS;
const SHARDS: std::ops::RangeInclusive<u32> = 1..=MAX_SHARDS;

/// How a queue hands out its jobs.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"paused": false, "max_in_flight": 200, "rate_limit": {"per_second": 50.0, "burst": 50}, "group_weights": {"tenant-42": 5}, "group_max_in_flight": 10, "retain_ms": 86400000, "shards": 1}))]
pub struct SettingsView {
    /// While true, claims hand out nothing.
    paused: bool,
    /// Jobs of the queue processing at once at most, fleet-wide.
    max_in_flight: Option<u64>,
    /// Over any t seconds the fleet hands out at most burst + per_second × t jobs.
    rate_limit: Option<RateLimitView>,
    /// Groups' weights in their fair share (default 1).
    group_weights: BTreeMap<String, u32>,
    /// Jobs of one named group processing at once at most, fleet-wide.
    group_max_in_flight: Option<u64>,
    /// How long jobs enqueued without a `retain_ms` of their own are kept
    /// once acked (ms; 0: deleted on ack).
    retain_ms: u64,
    /// The number of Redis hash slots the queue's jobs are spread over.
    shards: u32,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RateLimitView {
    per_second: f64,
    burst: u64,
}

impl From<Settings> for SettingsView {
    fn from(settings: Settings) -> Self {
        Self {
            paused: settings.paused,
            max_in_flight: settings.max_in_flight,
            rate_limit: settings
                .rate_limit
                .map(|RateLimit { per_second, burst }| RateLimitView { per_second, burst }),
            group_weights: settings.group_weights,
            group_max_in_flight: settings.group_max_in_flight,
            retain_ms: settings.retain_ms,
            shards: settings.shards,
        }
    }
}

/// A JSON merge patch of the settings: a field left out stays as it is,
/// `null` resets it to its default.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_in_flight": 200, "rate_limit": {"per_second": 50.0, "burst": 50}, "group_weights": {"tenant-42": 5, "tenant-7": null}}))]
pub struct SettingsPatch {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<bool>)]
    paused: Option<Option<bool>>,
    /// 1 to 1000000.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 1_000_000)]
    max_in_flight: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present_object")]
    #[schema(value_type = Option<RateLimitPatch>)]
    rate_limit: Option<Option<RateLimitPatch>>,
    /// Weights 1 to 100 by group; `null` drops a group's weight (back to 1).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<BTreeMap<String, Option<u32>>>)]
    group_weights: Option<Option<BTreeMap<String, Option<u32>>>>,
    /// 1 to 100000.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 100_000)]
    group_max_in_flight: Option<Option<u64>>,
    /// 0 to 2592000000 (30 days); `null` resets it to 0.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 2_592_000_000_u64)]
    retain_ms: Option<Option<u64>>,
    /// 1 to 64; `null` resets it to 1. Changes only while the queue holds
    /// no job in any state, else 409 and nothing changes.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 64)]
    shards: Option<Option<u32>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitPatch {
    /// Above 0, at most 1000000.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>, maximum = 1_000_000)]
    per_second: Option<Option<f64>>,
    /// 1 to 1000000.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 1_000_000)]
    burst: Option<Option<u64>>,
}

/// A field that is there, `null` or not: tells a `null` (reset) from a
/// field left out, which `#[serde(default)]` leaves `None`.
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

fn check_range<T: PartialOrd + Copy>(
    field: &str,
    value: Option<Option<T>>,
    range: &std::ops::RangeInclusive<T>,
    reason: &str,
) -> Result<Option<Option<T>>> {
    match value {
        Some(Some(v)) if !range.contains(&v) => Err(ApiError::validation(field, reason)),
        other => Ok(other),
    }
}

impl SettingsPatch {
    /// Checks what serde cannot and turns the patch into a change.
    fn into_change(self) -> Result<SettingsChange> {
        let mut change = SettingsChange {
            paused: self.paused.map(|paused| paused.unwrap_or(false)),
            max_in_flight: check_range(
                "max_in_flight",
                self.max_in_flight,
                &MAX_IN_FLIGHT,
                "must be 1 to 1000000",
            )?,
            group_max_in_flight: check_range(
                "group_max_in_flight",
                self.group_max_in_flight,
                &GROUP_MAX_IN_FLIGHT,
                "must be 1 to 100000",
            )?,
            retain_ms: check_range(
                "retain_ms",
                self.retain_ms,
                &RETAIN_MS,
                "must be 0 to 2592000000",
            )?,
            shards: check_range("shards", self.shards, &SHARDS, "must be 1 to 64")?
                .map(|shards| shards.unwrap_or(1)),
            ..SettingsChange::default()
        };
        match self.rate_limit {
            None => {}
            Some(None) => {
                change.rate_per_second = Some(None);
                change.rate_burst = Some(None);
            }
            Some(Some(rate)) => {
                if let Some(Some(per_second)) = rate.per_second
                    && !(per_second > 0.0 && per_second <= MAX_RATE)
                {
                    return Err(ApiError::validation(
                        "rate_limit.per_second",
                        "must be above 0 and at most 1000000",
                    ));
                }
                change.rate_per_second = rate.per_second;
                change.rate_burst = check_range(
                    "rate_limit.burst",
                    rate.burst,
                    &BURST,
                    "must be 1 to 1000000",
                )?;
            }
        }
        match self.group_weights {
            None => {}
            Some(None) => change.clear_weights = true,
            Some(Some(weights)) => {
                if weights.len() > MAX_WEIGHTS {
                    return Err(ApiError::validation(
                        "group_weights",
                        "must hold at most 10000 groups",
                    ));
                }
                for (group, weight) in weights {
                    let field = format!("group_weights.{group}");
                    if !is_job_id(&group) {
                        return Err(ApiError::validation(
                            field,
                            "a group is 1 to 128 of A-Z a-z 0-9 _ . : -",
                        ));
                    }
                    let weight = check_range(&field, Some(weight), &WEIGHT, "must be 1 to 100")?;
                    change.group_weights.push((group, weight.flatten()));
                }
            }
        }
        Ok(change)
    }
}

/// Read a queue's settings.
///
/// A queue never configured answers the defaults.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/settings", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "The settings", body = SettingsView))
)]
pub async fn settings(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<axum::Json<SettingsView>> {
    let settings = state.broker.settings(path.queue.as_str()).await?;
    Ok(axum::Json(settings.into()))
}

/// Change a queue's settings.
///
/// A JSON merge patch (RFC 7396), sent as `application/merge-patch+json`
/// or `application/json`: fields left out stay, `null` resets a field to
/// its default. Every instance applies the change to its next claim. An
/// unknown field or a value out of range answers 422 naming it, and
/// nothing changes. `shards` changes only while the queue holds no job in
/// any state; otherwise 409 `conflict`, and nothing changes.
#[utoipa::path(
    patch, path = "/v1/queues/{queue}/settings", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    request_body(content = SettingsPatch, content_type = "application/merge-patch+json"),
    responses((status = 200, description = "The settings after the change", body = SettingsView))
)]
pub async fn change_settings(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    JsonBody(patch): JsonBody<SettingsPatch>,
) -> Result<axum::Json<SettingsView>> {
    let change = patch.into_change()?;
    let settings = state.broker.configure(path.queue.as_str(), &change).await?;
    Ok(axum::Json(settings.into()))
}

async fn set_paused(
    state: &AppState,
    queue: &str,
    paused: bool,
) -> Result<axum::Json<SettingsView>> {
    let change = SettingsChange {
        paused: Some(paused),
        ..SettingsChange::default()
    };
    Ok(axum::Json(
        state.broker.configure(queue, &change).await?.into(),
    ))
}

/// Pause a queue.
///
/// Claims hand out nothing until the queue is resumed (long polls keep
/// waiting); enqueue, ack, extend, nack and the sweeper go on.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/pause", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "The settings, paused", body = SettingsView))
)]
pub async fn pause(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<axum::Json<SettingsView>> {
    set_paused(&state, path.queue.as_str(), true).await
}

/// Resume a paused queue.
///
/// Waiting long polls on every instance are woken.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/resume", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "The settings, not paused", body = SettingsView))
)]
pub async fn resume(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<axum::Json<SettingsView>> {
    set_paused(&state, path.queue.as_str(), false).await
}
