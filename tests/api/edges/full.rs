//! A full Redis (`maxmemory` with `noeviction`) is still drained: claims,
//! acks, nacks, extends and deletes run; the writes that grow memory
//! (enqueues with dependencies among them) answer 507 `backend_full`
//! with `effect: none` and change nothing. An
//! evicting policy is named in /readyz.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::assert_problem;
use crate::support::{
    RedisServer, TempDir, TestApp, redis_connection, spawn_app_with, test_config, until,
};

/// Redis's memory in use and its `maxmemory`, in bytes.
async fn memory(url: &str) -> (u64, u64) {
    let mut redis = redis_connection(url).await;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut redis)
        .await
        .expect("INFO memory");
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO memory has {name}"))
    };
    (field("used_memory:"), field("maxmemory:"))
}

async fn used_below_max(url: &str) -> bool {
    let (used, max) = memory(url).await;
    used < max
}

async fn lease(app: &TestApp, max_jobs: u32, acks: Value) -> Value {
    let answer = app
        .post(
            app.queue_url("q", "/claim"),
            json!({"max_jobs": max_jobs, "ack": acks}),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "a claim under full memory: {answer:?}"
    );
    answer.body
}

fn token(job: &Value) -> &str {
    job["lease_token"].as_str().expect("lease_token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_redis_is_drained_and_refuses_growth_with_no_effect() {
    let data = TempDir::new("edges-full");
    let server = RedisServer::start_in(
        &data.path,
        "--appendonly no --maxmemory 4mb --maxmemory-policy noeviction",
    );
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    // A dead job to requeue, and another queue to delete, made first.
    app.enqueue(
        "q",
        json!({"task": "doomed", "id": "dead", "max_attempts": 1}),
    )
    .await;
    let doomed = app.claim_one("q").await.expect("the doomed job");
    let nacked = app
        .post(
            app.queue_url("q", "/jobs/dead/nack"),
            json!({"lease_token": token(&doomed)}),
        )
        .await;
    assert_eq!(nacked.body["state"], "dead", "{nacked:?}");
    app.enqueue("other", json!({"task": "t", "id": "o1"})).await;

    let pad = "x".repeat(16 * 1024);
    let mut stored = 0;
    let refusal = loop {
        let answer = app
            .post(
                app.queue_url("q", "/jobs"),
                json!({"task": "t", "id": format!("j{stored}"), "args": {"pad": pad}}),
            )
            .await;
        if answer.status != StatusCode::CREATED {
            break answer;
        }
        stored += 1;
        assert!(stored < 2000, "Redis never filled up");
    };
    assert_problem(
        &refusal,
        StatusCode::INSUFFICIENT_STORAGE,
        "backend_full",
        Some("none"),
    );
    assert!(stored > 20, "filled after {stored} jobs");
    // At the limit, memory moves by a few kilobytes between two requests
    // (a refused request's own buffers count until it is answered), so
    // one more job may fit after a refusal: the limit goes below what is
    // used, and Redis stays full whatever the request buffers do.
    let (used, _) = memory(&app.config.redis_url).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used - 256 * 1024)
        .query_async(&mut redis_connection(&app.config.redis_url).await)
        .await
        .expect("CONFIG SET maxmemory");
    let before = app.snapshot().await;

    // Every write that grows memory is refused, and changes nothing.
    let q = |rest: &str| app.queue_url("q", rest);
    let growing = [
        app.http
            .post(q("/jobs"))
            .json(&json!({"task": "t", "args": {"pad": pad}})),
        app.http
            .post(q("/jobs/batch"))
            .json(&json!({"jobs": [{"task": "t", "args": {"pad": pad}}]})),
        app.http
            .put(q("/schedules/s"))
            .json(&json!({"cron": "* * * * *", "task": "t", "args": {"pad": pad}})),
        app.http.post(q("/dlq/dead/requeue")),
        // Dependencies: one in the job's slot is checked, one elsewhere
        // registered with, before the enqueue: refused there already.
        app.http
            .post(q("/jobs"))
            .json(&json!({"task": "t", "after": ["dead"]})),
        app.http
            .post(q("/jobs/batch"))
            .json(&json!({"jobs": [{"task": "t", "after": ["other/o1"]}]})),
        app.http
            .patch(q("/settings"))
            .header("content-type", "application/merge-patch+json")
            .body(r#"{"max_in_flight": 7}"#),
    ];
    for request in growing {
        let answer = app.send(request).await;
        assert_problem(
            &answer,
            StatusCode::INSUFFICIENT_STORAGE,
            "backend_full",
            Some("none"),
        );
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused write changed Redis"
    );

    // Draining: a claim, an extend, a nack, a claim that acks, an ack of
    // many, a DELETE of a job, a dead-letter delete and a queue delete.
    let first = lease(&app, 2, json!([])).await;
    let [a, b] = [&first["jobs"][0], &first["jobs"][1]];
    let extended = app
        .post(
            q(&format!("/jobs/{}/extend", a["id"].as_str().unwrap())),
            json!({"lease_token": token(a), "lease_ms": 60_000}),
        )
        .await;
    assert_eq!(extended.status, StatusCode::OK, "{extended:?}");
    let nacked = app
        .post(
            q(&format!("/jobs/{}/nack", b["id"].as_str().unwrap())),
            json!({"lease_token": token(b)}),
        )
        .await;
    assert_eq!(nacked.status, StatusCode::OK, "{nacked:?}");
    let second = lease(&app, 3, json!([{"id": a["id"], "lease_token": token(a)}])).await;
    assert_eq!(second["acked"][0]["status"], 204, "{second}");
    let acks: Vec<Value> = second["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| json!({"id": job["id"], "lease_token": token(job)}))
        .collect();
    let many = app.post(q("/ack"), json!({"jobs": acks})).await;
    assert_eq!(many.status, StatusCode::OK, "{many:?}");
    assert!(
        many.body["results"]
            .as_array()
            .expect("results")
            .iter()
            .all(|r| r["status"] == 204),
        "{many:?}"
    );
    let last = format!("j{}", stored - 1);
    let deleted = app.send(app.http.delete(q(&format!("/jobs/{last}")))).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    let dead_deleted = app.send(app.http.delete(q("/dlq/dead"))).await;
    assert_eq!(
        dead_deleted.status,
        StatusCode::NO_CONTENT,
        "{dead_deleted:?}"
    );
    let dropped = app
        .send(app.http.delete(app.queue_url("other", "?purge=true")))
        .await;
    assert_eq!(dropped.status, StatusCode::NO_CONTENT, "{dropped:?}");

    // The rest, claim after claim, each acking the one before.
    let mut acked = 1 + acks.len();
    let mut previous: Vec<Value> = Vec::new();
    loop {
        let answer = lease(&app, 10, json!(previous)).await;
        acked += answer["acked"].as_array().map_or(0, Vec::len);
        let jobs = answer["jobs"].as_array().expect("jobs");
        if jobs.is_empty() {
            break;
        }
        previous = jobs
            .iter()
            .map(|job| json!({"id": job["id"], "lease_token": token(job)}))
            .collect();
    }
    assert_eq!(
        acked,
        stored - 1,
        "every stored job but the deleted one was acked"
    );
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].as_u64(), stats["processing"].as_u64()),
        (Some(0), Some(0)),
        "{stats}"
    );

    until(Duration::from_secs(5), "Redis below maxmemory", || {
        used_below_max(&app.config.redis_url)
    })
    .await;
    let created = app.post(q("/jobs"), json!({"task": "t"})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
}

#[tokio::test]
async fn an_evicting_policy_is_named_in_readyz() {
    let data = TempDir::new("edges-evicting");
    let server = RedisServer::start_in(
        &data.path,
        "--appendonly no --maxmemory 64mb --maxmemory-policy allkeys-lru",
    );
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    let ready = app.get(app.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK, "{ready:?}");
    let warnings = ready.body["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{ready:?}");
    assert!(
        warnings[0].as_str().expect("text").contains("allkeys-lru"),
        "{ready:?}"
    );

    // The shared Redis evicts nothing: no warning.
    let quiet = spawn_app_with(test_config()).await;
    let ready = quiet.get(quiet.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK, "{ready:?}");
    assert!(
        ready.body["warnings"].as_array().is_none_or(Vec::is_empty),
        "{ready:?}"
    );
}
