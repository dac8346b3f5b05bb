//! A worker's loop in one request: a claim that acknowledges the jobs it
//! brings first.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    RedisServer, redis_connection, script_calls, spawn_app, spawn_app_with, test_config, until,
};

fn entry(job: &Value) -> Value {
    json!({"id": job["id"], "lease_token": job["lease_token"]})
}

#[tokio::test]
async fn claim_acks_its_entries_first_and_answers_each_in_order() {
    let app = spawn_app().await;
    for n in 0..4 {
        app.enqueue("q", json!({"task": "t", "id": format!("job-{n}")}))
            .await;
    }
    let held = app.claim("q", json!({"max_jobs": 2})).await;
    let stale = json!({"id": held[1]["id"], "lease_token": "not-the-token"});
    let answer = app
        .post(
            app.queue_url("q", "/claim"),
            json!({"max_jobs": 1, "ack": [entry(&held[0]), stale, {"id": "gone", "lease_token": "x"}]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body["acked"],
        json!([
            {"id": "job-0", "status": 204},
            {"id": "job-1", "status": 409, "code": "lease_lost"},
            {"id": "gone", "status": 404, "code": "not_found"},
        ])
    );
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], "job-2");
    assert_eq!(app.job("q", "job-0").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.job("q", "job-1").await.body["state"], "processing");
    // Without `ack`, the answer has no `acked`.
    let plain = app.post(app.queue_url("q", "/claim"), json!({})).await;
    assert!(plain.body.get("acked").is_none(), "{plain:?}");
    // An empty `ack` list is answered with an empty `acked`.
    let empty = app
        .post(app.queue_url("q", "/claim"), json!({"ack": []}))
        .await;
    assert_eq!(empty.body["acked"], json!([]));
}

#[tokio::test]
async fn claim_with_acks_is_one_call_to_redis() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    for n in 0..3 {
        app.enqueue("q", json!({"task": "t", "id": format!("job-{n}")}))
            .await;
    }
    let first = app.claim("q", json!({"max_jobs": 2})).await;
    let mut conn = redis_connection(&server.url()).await;
    let before = script_calls(&mut conn).await;
    let answer = app
        .post(
            app.queue_url("q", "/claim"),
            json!({"ack": [entry(&first[0]), entry(&first[1])]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["jobs"][0]["id"], "job-2");
    assert_eq!(script_calls(&mut conn).await - before, 1);
}

#[tokio::test]
async fn a_malformed_ack_entry_is_refused_and_nothing_is_acked_or_claimed() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "t"})).await;
    app.enqueue("q", json!({"task": "t"})).await;
    let held = app.claim_one("q").await.expect("a job");
    let before = app.snapshot().await;
    for (ack, field) in [
        (json!([entry(&held), {"id": "x"}]), "ack[1].lease_token"),
        (
            json!([entry(&held), {"id": "a/b", "lease_token": "t"}]),
            "ack[1].id",
        ),
        (
            json!([{"id": "x", "lease_token": ""}]),
            "ack[0].lease_token",
        ),
        (
            json!([{"id": "x", "lease_token": "t", "token": "t"}]),
            "ack[0].token",
        ),
        (json!({"id": "x"}), "ack"),
    ] {
        let answer = app
            .post(app.queue_url("q", "/claim"), json!({"ack": ack}))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
        assert_eq!(answer.body["field"], field, "{answer:?}");
    }
    let too_many: Vec<Value> = (0..1001)
        .map(|n| json!({"id": format!("j{n}"), "lease_token": "t"}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/claim"), json!({"ack": too_many}))
        .await;
    assert_eq!(answer.body["field"], "ack", "{answer:?}");
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused claim changed Redis"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_claim_has_applied_its_acks_before_it_waits() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "t", "id": "done"})).await;
    let held = app.claim_one("q").await.expect("the job");
    let waiting = {
        let (http, url, body) = (
            app.http.clone(),
            app.queue_url("q", "/claim"),
            json!({"wait_ms": 10_000, "ack": [entry(&held)]}),
        );
        tokio::spawn(async move {
            let answer = http.post(url).json(&body).send().await.expect("answered");
            answer.json::<Value>().await.expect("JSON")
        })
    };
    // The ack is seen while the claim still waits for a job.
    until(Duration::from_secs(5), "the ack is applied", || async {
        app.job("q", "done").await.status == StatusCode::NOT_FOUND
    })
    .await;
    assert!(!waiting.is_finished(), "the claim stopped waiting");
    app.enqueue("q", json!({"task": "t", "id": "next"})).await;
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken by the enqueue")
        .expect("joins");
    assert_eq!(answer["acked"], json!([{"id": "done", "status": 204}]));
    assert_eq!(answer["jobs"][0]["id"], "next");
}
