//! A job's history (`GET …/jobs/{id}/history`) while the queue keeps
//! them (`history_ms`): every event of its life in order, with the
//! claims' workers and fences, the nacks' and lease expiries' errors, kept
//! after the job is gone; none kept without the setting.

use std::time::Duration;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::configure;
use crate::support::{TestApp, spawn_app, spawn_app_with, test_config};

async fn history(app: &TestApp, queue: &str, id: &str) -> Vec<Value> {
    let answer = app
        .get(app.queue_url(queue, &format!("/jobs/{id}/history")))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["id"], id);
    answer.body["events"].as_array().expect("events").clone()
}

fn names(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().expect("event"))
        .collect()
}

async fn claim_as(app: &TestApp, queue: &str, worker: &str, lease_ms: u64) -> Value {
    let jobs = app
        .claim(queue, json!({"worker": worker, "lease_ms": lease_ms}))
        .await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    jobs[0].clone()
}

#[tokio::test]
async fn a_jobs_life_is_in_its_history_after_it_is_gone() {
    check_life_in_history(test_config()).await;
}

#[tokio::test]
async fn a_sharded_queue_keeps_each_jobs_history_in_its_shard() {
    let config = test_config();
    let app = spawn_app_with(config.clone()).await;
    configure(&app, "h", json!({"shards": 3})).await;
    check_life_in_history(config).await;
}

pub(crate) async fn check_life_in_history(config: Config) {
    let app = spawn_app_with(config).await;
    configure(&app, "h", json!({"history_ms": 60000})).await;
    app.enqueue(
        "h",
        json!({"id": "life", "task": "t", "priority": 3, "max_attempts": 5}),
    )
    .await;
    let first = claim_as(&app, "h", "w-1", 30000).await;
    let nacked = app
        .post(
            app.queue_url("h", "/jobs/life/nack"),
            json!({"lease_token": first["lease_token"], "error": "smtp timeout"}),
        )
        .await;
    assert_eq!(nacked.status, StatusCode::OK, "{nacked:?}");
    let second = claim_as(&app, "h", "w-2", 100).await;
    // The sweeper takes the lease back once it runs out.
    app.wait_for_job("h", "life", Duration::from_secs(10), |job| {
        job["state"] == "pending"
    })
    .await;
    let third = claim_as(&app, "h", "w-3", 30000).await;
    assert_eq!(app.ack("h", &third).await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.job("h", "life").await.status, StatusCode::NOT_FOUND);

    let events = history(&app, "h", "life").await;
    assert_eq!(
        names(&events),
        [
            "enqueued",
            "claimed",
            "nacked",
            "claimed",
            "lease_expired",
            "claimed",
            "acked"
        ],
        "{events:?}"
    );
    assert_eq!(events[0]["priority"], 3);
    for (event, claim, worker) in [(1, &first, "w-1"), (3, &second, "w-2"), (5, &third, "w-3")] {
        assert_eq!(events[event]["worker"], worker, "{events:?}");
        assert_eq!(events[event]["fence"], claim["fence"], "{events:?}");
    }
    assert_eq!(events[2]["state"], "pending");
    assert_eq!(events[2]["error"], "smtp timeout");
    assert_eq!(events[4]["error"], "lease expired");
    let times: Vec<&str> = events
        .iter()
        .map(|e| e["at"].as_str().expect("at"))
        .collect();
    assert!(times.windows(2).all(|t| t[0] <= t[1]), "{times:?}");
}

#[tokio::test]
async fn the_dlq_cancel_and_delete_are_in_the_history() {
    let app = spawn_app().await;
    configure(&app, "d", json!({"history_ms": 60000})).await;
    app.enqueue("d", json!({"id": "doomed", "task": "t", "max_attempts": 1}))
        .await;
    let job = claim_as(&app, "d", "w", 30000).await;
    app.post(
        app.queue_url("d", "/jobs/doomed/nack"),
        json!({"lease_token": job["lease_token"], "error": "bad input"}),
    )
    .await;
    let requeued = app
        .post(app.queue_url("d", "/dlq/doomed/requeue"), json!({}))
        .await;
    assert!(requeued.status.is_success(), "{requeued:?}");
    let deleted = app
        .send(app.http.delete(app.queue_url("d", "/jobs/doomed")))
        .await;
    assert!(deleted.status.is_success(), "{deleted:?}");
    app.enqueue(
        "d",
        json!({"id": "stopped", "task": "t", "delay_ms": 60000}),
    )
    .await;
    let cancelled = app
        .post(app.queue_url("d", "/jobs/stopped/cancel"), json!({}))
        .await;
    assert!(cancelled.status.is_success(), "{cancelled:?}");

    let events = history(&app, "d", "doomed").await;
    assert_eq!(
        names(&events),
        ["enqueued", "claimed", "nacked", "requeued", "deleted"],
        "{events:?}"
    );
    assert_eq!(events[2]["state"], "dead");
    assert_eq!(events[2]["error"], "bad input");
    assert_eq!(
        names(&history(&app, "d", "stopped").await),
        ["enqueued", "cancelled"]
    );
}

#[tokio::test]
async fn a_queue_without_history_ms_keeps_none() {
    let app = spawn_app().await;
    app.enqueue("plain", json!({"id": "p", "task": "t"})).await;
    assert_eq!(history(&app, "plain", "p").await, Vec::<Value>::new());
    let job = claim_as(&app, "plain", "w", 30000).await;
    app.ack("plain", &job).await;
    // Gone, and nothing remembered: as unknown as a job that never was.
    for id in ["p", "never-was"] {
        let answer = app
            .get(app.queue_url("plain", &format!("/jobs/{id}/history")))
            .await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
        assert_eq!(answer.body["code"], "not_found", "{answer:?}");
    }
}
