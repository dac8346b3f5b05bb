//! A job's history: its events, kept while its queue's `history_ms` is set.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::view::timestamp;
use crate::http::AppState;
use crate::http::error::Result;
use crate::http::extract::{ApiPath, JsonBody};
use crate::http::params::JobPath;
use crate::queue::Event;

/// A job's history, oldest event first.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"id": "order-1234", "events": [
    {"at": "2026-11-29T23:58:12.345Z", "event": "enqueued", "priority": 0},
    {"at": "2026-11-29T23:58:12.351Z", "event": "claimed", "fence": 1796417467412853u64, "worker": "billing-7"},
    {"at": "2026-11-29T23:58:14.002Z", "event": "nacked", "state": "scheduled", "error": "timeout talking to SMTP"},
    {"at": "2026-11-29T23:58:19.010Z", "event": "claimed", "fence": 1796417474010112u64, "worker": "billing-3"},
    {"at": "2026-11-29T23:58:19.420Z", "event": "acked"}
]}))]
pub struct HistoryView {
    id: String,
    /// Up to the last 100 events; empty when the queue keeps no history
    /// (`history_ms` 0, the default), or it lapsed, while the job exists.
    events: Vec<EventView>,
}

/// One event of a job's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventView {
    at: String,
    /// `enqueued`, `claimed`, `acked`, `nacked`, `lease_expired`,
    /// `cancelled`, `expired` (its expiry came before a claim), `requeued`
    /// (from the DLQ) or `deleted`.
    event: String,
    /// The priority it was enqueued with (`enqueued`).
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<u8>,
    /// The lease's fence (`claimed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    fence: Option<u64>,
    /// The worker that claimed it (`claimed`, when it named itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<String>,
    /// Where the lease's end put the job (`nacked`, `lease_expired`):
    /// `pending`, `scheduled`, `dead` or `cancelled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    /// The error it ended with (`nacked`, `lease_expired`).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<Event> for EventView {
    fn from(event: Event) -> Self {
        Self {
            at: timestamp(event.at_ms),
            event: event.event,
            priority: event.priority,
            fence: event.fence,
            worker: event.worker,
            state: event.state,
            error: event.error,
        }
    }
}

/// Read a job's history.
///
/// Its enqueue, each claim with its worker and fence, each nack and lease
/// expiry with its error and where it put the job, and its end, oldest
/// first, while its queue keeps histories (the setting `history_ms`: how
/// long after its last event a history is kept, whatever became of the
/// job). A job that exists while its queue keeps none answers an empty
/// list; a job neither known nor remembered answers 404.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/jobs/{id}/history", tag = "jobs",
    params(JobPath),
    responses((status = 200, description = "The job's events", body = HistoryView))
)]
pub async fn history(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<JobPath>,
) -> Result<JsonBody<HistoryView>> {
    let events = state
        .broker
        .history(path.queue.as_str(), path.id.as_str())
        .await?;
    Ok(JsonBody(HistoryView {
        id: path.id.as_str().to_owned(),
        events: events.into_iter().map(EventView::from).collect(),
    }))
}
