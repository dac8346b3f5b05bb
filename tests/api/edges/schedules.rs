//! Schedules are bounded (PRIOQ_MAX_SCHEDULES) and listed in pages.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::assert_problem;
use crate::support::{Answer, TestApp, spawn_app_with, test_config};

async fn put(app: &TestApp, queue: &str, name: &str) -> Answer {
    app.send(
        app.http
            .put(app.queue_url(queue, &format!("/schedules/{name}")))
            .json(&json!({"cron": "0 3 * * *", "task": name})),
    )
    .await
}

#[tokio::test]
async fn one_schedule_more_than_the_limit_is_refused_and_replacing_one_is_not() {
    let mut config = test_config();
    config.max_schedules = 3;
    let app = spawn_app_with(config).await;
    for name in ["a", "b", "c"] {
        assert_eq!(put(&app, "q", name).await.status, StatusCode::CREATED);
    }
    let before = app.snapshot().await;
    let refused = put(&app, "q", "d").await;
    assert_problem(
        &refused,
        StatusCode::INSUFFICIENT_STORAGE,
        "limit_reached",
        Some("none"),
    );
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused schedule changed Redis"
    );
    let replaced = put(&app, "q", "b").await;
    assert_eq!(replaced.status, StatusCode::OK, "{replaced:?}");
    // The limit is per queue.
    assert_eq!(put(&app, "other", "d").await.status, StatusCode::CREATED);
}

#[tokio::test]
async fn schedules_are_listed_in_pages_by_name() {
    let app = spawn_app_with(test_config()).await;
    let mut names: Vec<String> = (0..7).map(|n| format!("s{n}")).collect();
    for name in names.iter().rev() {
        assert_eq!(put(&app, "q", name).await.status, StatusCode::CREATED);
    }
    names.sort();
    let mut seen = Vec::new();
    let mut query = "limit=3".to_owned();
    let mut pages = 0;
    loop {
        let page = app
            .get(app.queue_url("q", &format!("/schedules?{query}")))
            .await;
        assert_eq!(page.status, StatusCode::OK, "{page:?}");
        let items = page.body["schedules"].as_array().expect("schedules");
        assert!(items.len() <= 3, "{page:?}");
        seen.extend(
            items
                .iter()
                .map(|s| s["name"].as_str().expect("name").to_owned()),
        );
        pages += 1;
        match &page.body["next_cursor"] {
            Value::String(next) => query = format!("limit=3&cursor={next}"),
            Value::Null => break,
            other => panic!("next_cursor is {other}"),
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(seen, names);
    assert_eq!(pages, 3);

    // A cursor is a schedule's name: one no schedule can have is refused.
    for bad in [
        "limit=0",
        "limit=1001",
        "cursor=",
        "cursor=%FF",
        "cursor=a%2Fb",
    ] {
        let refused = app
            .get(app.queue_url("q", &format!("/schedules?{bad}")))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {refused:?}"
        );
    }
}
