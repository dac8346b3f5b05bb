//! Queues come and go: DELETE /v1/queues/{queue}, reads that create
//! nothing, metric series only for the queues that exist, PRIOQ_MAX_QUEUES.

use reqwest::StatusCode;
use serde_json::json;

use super::assert_problem;
use crate::support::{TestApp, spawn_app, spawn_app_with, test_config};

async fn delete_queue(app: &TestApp, queue: &str, purge: bool) -> crate::support::Answer {
    let query = if purge { "?purge=true" } else { "" };
    app.send(app.http.delete(app.queue_url(queue, query))).await
}

async fn listed(app: &TestApp) -> Vec<String> {
    let answer = app.get(app.url("/v1/queues")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let mut names: Vec<String> = answer.body["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["queue"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

/// The lines of /metrics that name `queue`.
async fn series_of(app: &TestApp, queue: &str) -> Vec<String> {
    let label = format!("queue=\"{queue}\"");
    app.metrics()
        .await
        .lines()
        .filter(|line| line.contains(&label))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn an_empty_queue_is_deleted_with_its_keys_settings_and_series() {
    let app = spawn_app().await;
    let job = app.enqueue("gone", json!({"task": "t"})).await;
    let leased = app.claim_one("gone").await.expect("the job");
    assert_eq!(leased["id"], job["id"]);
    assert_eq!(
        app.ack("gone", &leased).await.status,
        StatusCode::NO_CONTENT
    );
    crate::support::app::configure(&app, "gone", json!({"max_in_flight": 3})).await;
    app.enqueue("kept", json!({"task": "t"})).await;
    assert!(
        !series_of(&app, "gone").await.is_empty(),
        "a listed queue has series"
    );

    let deleted = delete_queue(&app, "gone", false).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    assert_eq!(listed(&app).await, ["kept"]);
    let left: Vec<String> = app
        .snapshot()
        .await
        .into_keys()
        .filter(|key| key.contains("{gone}"))
        .collect();
    assert_eq!(
        left,
        Vec::<String>::new(),
        "keys of the deleted queue remain"
    );
    assert_eq!(series_of(&app, "gone").await, Vec::<String>::new());
    // Its settings are gone: a new queue of that name starts from defaults.
    let settings = app.get(app.queue_url("gone", "/settings")).await;
    assert_eq!(settings.body["max_in_flight"], json!(null), "{settings:?}");

    let again = delete_queue(&app, "gone", false).await;
    assert_problem(&again, StatusCode::NOT_FOUND, "not_found", None);
    assert_eq!(app.stats("kept").await["pending"], 1);
}

#[tokio::test]
async fn a_queue_holding_jobs_is_deleted_only_with_purge() {
    let app = spawn_app().await;
    app.enqueue("full", json!({"task": "pending"})).await;
    app.enqueue("full", json!({"task": "later", "delay_ms": 60_000}))
        .await;
    app.enqueue("full", json!({"task": "busy"})).await;
    app.claim("full", json!({"max_jobs": 1})).await;
    let before = app.snapshot().await;

    let refused = delete_queue(&app, "full", false).await;
    assert_problem(&refused, StatusCode::CONFLICT, "conflict", None);
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused delete changed Redis"
    );
    // The queue still takes jobs after the refusal.
    app.enqueue("full", json!({"task": "more"})).await;

    let purged = delete_queue(&app, "full", true).await;
    assert_eq!(purged.status, StatusCode::NO_CONTENT, "{purged:?}");
    assert!(app.snapshot().await.is_empty(), "purge left keys behind");
    assert_eq!(listed(&app).await, Vec::<String>::new());
    let stats = app.stats("full").await;
    assert_eq!(
        (stats["pending"].clone(), stats["processing"].clone()),
        (json!(0), json!(0))
    );
}

#[tokio::test]
async fn reads_of_unknown_queues_create_no_key_and_no_series() {
    let app = spawn_app().await;
    app.enqueue("real", json!({"task": "t"})).await;
    let keys_before = app.snapshot().await;
    // The first round makes the series of the routes and statuses read
    // (bounded by the API's routes); the next 49 queues must add none.
    let mut lines_before = 0;
    for n in 0..50 {
        if n == 1 {
            // Twice: the first scrape makes the series of /metrics itself.
            app.metrics().await;
            lines_before = app.metrics().await.lines().count();
        }
        let queue = format!("ghost-{n}");
        assert_eq!(app.job(&queue, "j").await.status, StatusCode::NOT_FOUND);
        app.stats(&queue).await;
        for path in ["/settings", "/dlq", "/groups", "/schedules", "/scale"] {
            let answer = app.get(app.queue_url(&queue, path)).await;
            assert_eq!(answer.status, StatusCode::OK, "{path}: {answer:?}");
        }
        assert!(app.claim(&queue, json!({})).await.is_empty());
    }
    assert_eq!(app.snapshot().await, keys_before, "reads wrote to Redis");
    let metrics = app.metrics().await;
    assert_eq!(metrics.lines().count(), lines_before, "reads grew /metrics");
    let ghosts: Vec<&str> = metrics
        .lines()
        .filter(|line| line.contains("ghost"))
        .collect();
    assert_eq!(
        ghosts,
        Vec::<&str>::new(),
        "series of queues that do not exist"
    );
    assert_eq!(listed(&app).await, ["real"]);
}

#[tokio::test]
async fn one_queue_more_than_the_limit_is_refused_and_a_deletion_makes_room() {
    let mut config = test_config();
    config.max_queues = 2;
    let app = spawn_app_with(config).await;
    app.enqueue("one", json!({"task": "t"})).await;
    app.enqueue("two", json!({"task": "t"})).await;
    let before = app.snapshot().await;

    let refused = app
        .post(app.queue_url("three", "/jobs"), json!({"task": "t"}))
        .await;
    assert_problem(
        &refused,
        StatusCode::INSUFFICIENT_STORAGE,
        "limit_reached",
        Some("none"),
    );
    let schedule = app
        .send(
            app.http
                .put(app.queue_url("three", "/schedules/s"))
                .json(&json!({"cron": "* * * * *", "task": "t"})),
        )
        .await;
    assert_problem(
        &schedule,
        StatusCode::INSUFFICIENT_STORAGE,
        "limit_reached",
        Some("none"),
    );
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused write changed Redis"
    );
    // The queues already listed go on taking writes.
    app.enqueue("two", json!({"task": "t"})).await;

    let purged = delete_queue(&app, "one", true).await;
    assert_eq!(purged.status, StatusCode::NO_CONTENT, "{purged:?}");
    app.enqueue("three", json!({"task": "t"})).await;
    assert_eq!(listed(&app).await, ["three", "two"]);
}
