//! Paging through ties: groups with equal counts are each listed once, in
//! order, whatever the page size; a cursor not made by the API is refused.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::enqueue_many;
use crate::support::{TestApp, spawn_app};

/// Every group of the /groups listing, page by page of `limit`.
async fn all_groups(app: &TestApp, queue: &str, limit: usize) -> Vec<(String, u64)> {
    let mut seen = Vec::new();
    let mut query = format!("limit={limit}");
    for _ in 0..1000 {
        let page = app
            .get(app.queue_url(queue, &format!("/groups?{query}")))
            .await;
        assert_eq!(page.status, StatusCode::OK, "{page:?}");
        for group in page.body["groups"].as_array().expect("groups") {
            seen.push((
                group["group"].as_str().expect("group").to_owned(),
                group["pending"].as_u64().expect("pending"),
            ));
        }
        match &page.body["next_cursor"] {
            Value::String(next) => query = format!("limit={limit}&cursor={next}"),
            Value::Null => return seen,
            other => panic!("next_cursor is {other}"),
        }
    }
    panic!("paging does not end");
}

#[tokio::test]
async fn groups_tied_on_their_counts_are_each_listed_once() {
    let app = spawn_app().await;
    // 60 groups of two jobs, 5 of three: long runs of ties.
    for g in 0..65 {
        let count = if g < 60 { 2 } else { 3 };
        enqueue_many(
            &app,
            "q",
            Some(&format!("g{g:02}")),
            1,
            &format!("g{g:02}-"),
            count,
        )
        .await;
    }
    for limit in [1, 7, 64, 1000] {
        let seen = all_groups(&app, "q", limit).await;
        let names: BTreeSet<&str> = seen.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names.len(), 65, "limit {limit}: {seen:?}");
        assert_eq!(seen.len(), 65, "limit {limit}: a group was listed twice");
        let counts: Vec<u64> = seen.iter().map(|(_, pending)| *pending).collect();
        let mut sorted = counts.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(counts, sorted, "limit {limit}: not by count, largest first");
    }
}

#[tokio::test]
async fn a_cursor_not_made_by_the_api_is_refused() {
    let app = spawn_app().await;
    enqueue_many(&app, "q", Some("g"), 1, "j", 3).await;
    app.post(app.queue_url("q", "/jobs"), json!({"task": "t"}))
        .await;
    for path in ["/groups", "/dlq"] {
        for cursor in ["x", "AAAA", "%FF%FE", "-1"] {
            let refused = app
                .get(app.queue_url("q", &format!("{path}?cursor={cursor}")))
                .await;
            assert_eq!(
                refused.status,
                StatusCode::BAD_REQUEST,
                "{path} {cursor}: {refused:?}"
            );
        }
    }
}
