//! Cancellation (`POST .../jobs/{id}/cancel`): a waiting job ends
//! `cancelled` at once; a processing one is told (`cancel_requested` on
//! its extends) and ends `cancelled` on its ack, nack or lease's end,
//! never delivered again; completed and dead jobs are a conflict.

use std::time::Duration;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Answer, TestApp, spawn_app_with, test_config, until};

async fn cancel(app: &TestApp, queue: &str, id: &str, body: Option<Value>) -> Answer {
    let url = app.queue_url(queue, &format!("/jobs/{id}/cancel"));
    match body {
        Some(body) => app.post(url, body).await,
        None => app.send(app.http.post(url)).await,
    }
}

fn id_of(job: &Value) -> &str {
    job["id"].as_str().expect("id")
}

/// Pending, scheduled and grouped jobs end cancelled at once, kept for
/// their retention or removed; nothing cancelled is claimed; a repeat
/// answers 200 again.
pub(crate) async fn check_cancel_waiting(config: Config) {
    let app = spawn_app_with(config).await;
    let kept = app
        .enqueue("q", json!({"task": "t", "id": "kept", "retain_ms": 60_000}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "gone"})).await;
    app.enqueue("q", json!({"task": "t", "id": "later", "delay_ms": 60_000}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "head", "group": "g"}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "next", "group": "g"}))
        .await;

    let answer = cancel(&app, "q", "kept", Some(json!({"reason": "not needed"}))).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["state"], json!("cancelled"), "{answer:?}");
    assert_eq!(answer.body["cancel_reason"], json!("not needed"));
    assert_eq!(answer.body["id"], kept["id"]);
    let again = cancel(&app, "q", "kept", None).await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert_eq!(again.body["state"], json!("cancelled"));
    assert_eq!(
        again.body["cancel_reason"],
        json!("not needed"),
        "the first reason stays"
    );
    let read = app.job("q", "kept").await;
    assert_eq!(read.body["state"], json!("cancelled"), "{read:?}");

    for id in ["gone", "later", "head"] {
        let answer = cancel(&app, "q", id, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{id}: {answer:?}");
        assert_eq!(answer.body["state"], json!("cancelled"), "{id}: {answer:?}");
        assert_eq!(answer.body["cancel_reason"], json!(null));
        // Without retention: removed.
        assert_eq!(app.job("q", id).await.status, StatusCode::NOT_FOUND, "{id}");
    }
    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    let ids: Vec<&str> = jobs.iter().map(id_of).collect();
    assert_eq!(ids, ["next"], "the group's next job took the head's place");
    let stats = app.stats("q").await;
    assert_eq!(stats["pending"], json!(0), "{stats}");
    assert_eq!(stats["scheduled"], json!(0), "{stats}");

    let unknown = cancel(&app, "q", "nobody", None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.problem_code(), "not_found");
}

#[tokio::test]
async fn a_waiting_job_is_cancelled_at_once_and_never_claimed() {
    check_cancel_waiting(test_config()).await;
}

/// A processing job told to stop: its extend says so; it ends cancelled
/// on its ack (result kept), its nack (no retry) and its lease's end (no
/// redelivery).
pub(crate) async fn check_cancel_processing(config: Config) {
    let app = spawn_app_with(config).await;
    for id in ["acked", "nacked", "abandoned"] {
        app.enqueue("q", json!({"task": "t", "id": id, "retain_ms": 60_000}))
            .await;
    }
    let jobs = app
        .claim("q", json!({"max_jobs": 2, "lease_ms": 60_000}))
        .await;
    let abandoned = app
        .claim("q", json!({"max_jobs": 1, "lease_ms": 300}))
        .await
        .pop()
        .expect("a job");
    assert_eq!(id_of(&abandoned), "abandoned");
    for job in jobs.iter().chain([&abandoned]) {
        let answer = cancel(&app, "q", id_of(job), Some(json!({"reason": "stop"}))).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.body["state"], json!("processing"), "{answer:?}");
        assert_eq!(answer.body["cancel_requested"], json!(true), "{answer:?}");
    }
    let (acked, nacked) = (&jobs[0], &jobs[1]);
    let extended = app
        .post(
            app.queue_url("q", &format!("/jobs/{}/extend", id_of(acked))),
            json!({"lease_token": acked["lease_token"]}),
        )
        .await;
    assert_eq!(extended.status, StatusCode::OK, "{extended:?}");
    assert_eq!(
        extended.body["cancel_requested"],
        json!(true),
        "{extended:?}"
    );

    let ack = app
        .post(
            app.queue_url("q", &format!("/jobs/{}/ack", id_of(acked))),
            json!({"lease_token": acked["lease_token"], "result": {"partial": true}}),
        )
        .await;
    assert_eq!(ack.status, StatusCode::NO_CONTENT, "{ack:?}");
    let read = app.job("q", id_of(acked)).await.body;
    assert_eq!(read["state"], json!("cancelled"), "{read}");
    assert_eq!(read["result"], json!({"partial": true}), "{read}");

    let nack = app
        .post(
            app.queue_url("q", &format!("/jobs/{}/nack", id_of(nacked))),
            json!({"lease_token": nacked["lease_token"], "error": "stopped"}),
        )
        .await;
    assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    assert_eq!(nack.body["state"], json!("cancelled"), "{nack:?}");

    until(
        Duration::from_secs(10),
        "the abandoned lease ends cancelled",
        || async { app.job("q", "abandoned").await.body["state"] == json!("cancelled") },
    )
    .await;
    assert!(
        app.claim_one("q").await.is_none(),
        "nothing cancelled comes back"
    );
    let stats = app.stats("q").await;
    assert_eq!(stats["pending"], json!(0), "{stats}");
    assert_eq!(stats["dead"], json!(0), "{stats}");

    // Completed and dead jobs cannot be cancelled.
    app.enqueue("q", json!({"task": "t", "id": "done", "retain_ms": 60_000}))
        .await;
    let done = app.claim_one("q").await.expect("done");
    assert_eq!(app.ack("q", &done).await.status, StatusCode::NO_CONTENT);
    let conflict = cancel(&app, "q", "done", None).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{conflict:?}");
    assert_eq!(conflict.problem_code(), "conflict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processing_job_is_told_and_ends_cancelled_with_its_lease() {
    check_cancel_processing(test_config()).await;
}

/// A cancel racing the ack of the job it cancels: one outcome, whole:
/// either the cancel came first (the ack still answers 204 and the job is
/// `cancelled` with its result) or the ack did (the cancel is a conflict
/// and the job `completed`); never both, never delivered again.
pub(crate) async fn check_cancel_racing_ack(config: Config) {
    let app = spawn_app_with(config).await;
    let (mut cancelled, mut completed) = (0, 0);
    for round in 0..60 {
        let id = format!("race-{round}");
        app.enqueue("q", json!({"task": "t", "id": id, "retain_ms": 60_000}))
            .await;
        let job = app.claim_one("q").await.expect("the job");
        let (acked, told) = tokio::join!(app.ack("q", &job), cancel(&app, "q", &id, None));
        assert_eq!(
            acked.status,
            StatusCode::NO_CONTENT,
            "round {round}: {acked:?}"
        );
        let read = app.job("q", &id).await.body;
        match told.status {
            StatusCode::OK => {
                cancelled += 1;
                assert_eq!(read["state"], json!("cancelled"), "round {round}: {read}");
            }
            StatusCode::CONFLICT => {
                completed += 1;
                assert_eq!(read["state"], json!("completed"), "round {round}: {read}");
            }
            _ => panic!("round {round}: {told:?}"),
        }
        assert!(
            app.claim_one("q").await.is_none(),
            "round {round}: delivered again"
        );
    }
    assert_eq!(cancelled + completed, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_an_ack_has_one_outcome() {
    check_cancel_racing_ack(test_config()).await;
}

#[tokio::test]
async fn a_cancel_with_a_bad_body_is_refused_and_changes_nothing() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("q", json!({"task": "t", "id": "j"})).await;
    for body in [
        json!({"reason": "x".repeat(2001)}),
        json!({"reason": 5}),
        json!({"why": "no"}),
    ] {
        let answer = cancel(&app, "q", "j", Some(body)).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
        assert_eq!(answer.problem_code(), "validation_failed");
    }
    assert_eq!(app.job("q", "j").await.body["state"], json!("pending"));
}
