//! Finding jobs: a queue's jobs in any state by id, task, group, dedup
//! key, a field of their args and their state, in pages.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::view::JobView;
use crate::http::AppState;
use crate::http::error::{ApiError, Result};
use crate::http::extract::{ApiPath, ApiQuery, JsonBody};
use crate::http::params::QueuePath;
use crate::queue::{Search, SearchCursor};

const MAX_LIMIT: u32 = 100;
const MAX_FILTER_CHARS: usize = 200;
const STATES: [&str; 7] = [
    "pending",
    "scheduled",
    "processing",
    "dead",
    "completed",
    "cancelled",
    "waiting",
];

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// A part of the job's id.
    id: Option<String>,
    /// The job's task.
    task: Option<String>,
    /// The job's group.
    group: Option<String>,
    /// The dedup key the job holds.
    dedup_key: Option<String>,
    /// A top-level field of the job's args; with `value`.
    field: Option<String>,
    /// The field's value: a string's text, or a number's or boolean's JSON
    /// text (`42`, `true`).
    value: Option<String>,
    /// `pending`, `scheduled`, `processing`, `dead`, `completed`,
    /// `cancelled` or `waiting`.
    state: Option<String>,
    /// Jobs a page asks for, 1 to 100; default 20.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of the jobs found.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"jobs": [{"id": "order-1234", "queue": "emails", "task": "send_email", "args": {"to": "a@example.com", "tenant": "acme"}, "priority": 0, "group": "acme", "state": "dead", "attempts": 5, "max_attempts": 5, "enqueued_at": "2026-11-29T23:58:12.345Z", "run_at": null, "lease_token": null, "lease_expires_at": null, "worker": null, "last_error": "smtp timeout"}], "next_cursor": "0.1536", "scanned": 10000}))]
pub struct SearchPageView {
    /// The jobs found, in no particular order.
    jobs: Vec<JobView>,
    /// Pass as `cursor` for the next page; null once every job was looked
    /// at. A page may hold fewer jobs than asked (even none) and still
    /// have a next one: it stops after looking at 10,000 jobs.
    next_cursor: Option<String>,
    /// The jobs this page looked at.
    scanned: u64,
}

/// A filter's text: at most 200 characters; empty or absent for none.
fn filter(field: &str, value: Option<String>) -> Result<String> {
    let value = value.unwrap_or_default();
    if value.chars().count() > MAX_FILTER_CHARS {
        return Err(ApiError::validation(
            field,
            "must be at most 200 characters",
        ));
    }
    Ok(value)
}

impl SearchQuery {
    fn into_search(self) -> Result<(Search, u32, SearchCursor)> {
        let limit = self.limit.unwrap_or(20);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::validation("limit", "must be 1 to 100"));
        }
        let cursor = match self.cursor {
            Some(cursor) => cursor.parse().map_err(|()| {
                ApiError::InvalidRequest("`cursor` is not a cursor this API gave".into())
            })?,
            None => SearchCursor::default(),
        };
        let state = filter("state", self.state)?;
        if !state.is_empty() && !STATES.contains(&state.as_str()) {
            return Err(ApiError::validation(
                "state",
                "must be pending, scheduled, processing, dead, completed, cancelled or waiting",
            ));
        }
        let (field, value) = (filter("field", self.field)?, self.value);
        match (field.is_empty(), &value) {
            (true, Some(_)) => return Err(ApiError::validation("field", "is needed with `value`")),
            (false, None) => return Err(ApiError::validation("value", "is needed with `field`")),
            _ => {}
        }
        let search = Search {
            id_part: filter("id", self.id)?,
            task: filter("task", self.task)?,
            group: filter("group", self.group)?,
            dedup_key: filter("dedup_key", self.dedup_key)?,
            value: filter("value", value)?,
            field,
            state,
        };
        Ok((search, limit, cursor))
    }
}

/// Find jobs.
///
/// A queue's jobs in any state (pending, scheduled, processing, dead,
/// completed, cancelled, waiting) that match every filter given: a part
/// of the id, the task, the group, the dedup key held, a top-level field
/// of the args (`field` and `value`), the state. Without filters, every
/// job. A page is a step of a scan of the queue's jobs: about `limit`
/// jobs, in no order; a job that changes state meanwhile may be seen
/// twice or missed, as by any scan. Redis looks at up to 1,000 jobs a
/// call, and a page at up to 10,000.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/jobs", tag = "jobs",
    params(QueuePath, SearchQuery),
    responses(
        (status = 200, description = "A page of the jobs found", body = SearchPageView),
        (status = 422, description = "A filter is out of its bounds, or `field` and `value` are not given together", body = crate::http::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn search(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    ApiQuery(query): ApiQuery<SearchQuery>,
) -> Result<JsonBody<SearchPageView>> {
    let queue = path.queue.as_str();
    let (search, limit, cursor) = query.into_search()?;
    let page = state.broker.search(queue, &search, limit, cursor).await?;
    Ok(JsonBody(SearchPageView {
        jobs: (page.jobs.into_iter())
            .map(|job| JobView::new(queue, job))
            .collect(),
        next_cursor: page.next_cursor.map(|cursor| cursor.to_string()),
        scanned: page.scanned,
    }))
}
