//! The enqueue's options that are objects of their own (a dedup key, a
//! backoff), and their checks.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::request::MAX_DELAY_MS;
use crate::http::error::{ApiError, Result};
use crate::http::params::is_job_id;
use crate::queue::{Backoff, Dedup};

/// A job's dedup key. The job that takes it holds it while it is pending,
/// scheduled or processing, and until `ttl_ms` has passed since its
/// enqueue; a job deleted, or dropped on expiry, lets it go at once.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"key": "refresh-user-42", "ttl_ms": 60000, "mode": "drop"}))]
pub struct DedupRequest {
    /// 1 to 128 of A-Z a-z 0-9 _ . : -
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
    key: String,
    /// How long the key stays held after its job's enqueue, even once the
    /// job ended: 0 to 2592000000 (30 days); default 0.
    #[serde(default)]
    #[schema(maximum = 2_592_000_000_u64)]
    ttl_ms: u64,
    #[serde(default)]
    mode: DedupMode,
}

/// What an enqueue does when its key is held.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DedupMode {
    /// Throttle (the default): answered 200 `created: false` with the job
    /// that holds the key; nothing changes.
    #[default]
    Drop,
    /// Debounce: while the job that holds the key is pending or
    /// scheduled, it takes this enqueue's task, args and priority and its
    /// delay starts again (200 `created: false, replaced: true`); once it
    /// is processing or has ended, this enqueue makes a new job, which
    /// takes the key.
    Replace,
}

impl DedupRequest {
    pub(super) fn checked(self, field: fmt::Arguments<'_>) -> Result<Dedup> {
        if !is_job_id(&self.key) {
            return Err(ApiError::validation(
                format!("{field}dedup.key"),
                "must be 1 to 128 of A-Z a-z 0-9 _ . : -",
            ));
        }
        if self.ttl_ms > MAX_DELAY_MS {
            return Err(ApiError::validation(
                format!("{field}dedup.ttl_ms"),
                "must be 0 to 2592000000 (30 days)",
            ));
        }
        Ok(Dedup {
            key: self.key,
            ttl_ms: self.ttl_ms,
            replace: matches!(self.mode, DedupMode::Replace),
        })
    }
}

/// A job's backoff: after its n-th failed attempt it is `scheduled` for
/// `delay_ms` (`fixed`) or `delay_ms × 2^(n−1)` (`exponential`, at most 30
/// days) before it is pending again. A nack's own `delay_ms` (0 too) wins.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"type": "exponential", "delay_ms": 1000}))]
pub struct BackoffSpec {
    #[serde(rename = "type")]
    kind: BackoffKind,
    /// 1 to 2592000000 (30 days): the first failure's wait.
    #[schema(minimum = 1, maximum = 2_592_000_000_u64)]
    delay_ms: u64,
}

/// How a backoff's wait grows with the failures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackoffKind {
    /// The same wait after every failure.
    Fixed,
    /// The wait doubles with each failure.
    Exponential,
}

impl BackoffSpec {
    pub(super) fn checked(self, field: fmt::Arguments<'_>) -> Result<Backoff> {
        if !(1..=MAX_DELAY_MS).contains(&self.delay_ms) {
            return Err(ApiError::validation(
                format!("{field}backoff.delay_ms"),
                "must be 1 to 2592000000 (30 days)",
            ));
        }
        Ok(Backoff {
            delay_ms: self.delay_ms,
            exponential: matches!(self.kind, BackoffKind::Exponential),
        })
    }
}

impl From<Backoff> for BackoffSpec {
    fn from(backoff: Backoff) -> Self {
        Self {
            kind: if backoff.exponential {
                BackoffKind::Exponential
            } else {
                BackoffKind::Fixed
            },
            delay_ms: backoff.delay_ms,
        }
    }
}
