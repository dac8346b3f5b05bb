//! Every endpoint of the contract, its status codes and problem codes.
//!
//! Each test runs its own prioq instance with its own key prefix on the
//! shared Redis, so `snapshot()` sees only that test's keys.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use prioq::config::Config;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp, spawn_app, spawn_app_with, test_config};

// ---------------------------------------------------------------------------
// Small tools of this file.
// ---------------------------------------------------------------------------

fn id_of(job: &Value) -> &str {
    job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("job without id: {job}"))
}

fn ids_of(jobs: &[Value]) -> Vec<String> {
    jobs.iter().map(|job| id_of(job).to_owned()).collect()
}

/// Asserts an answer is a problem with this status and code.
fn assert_problem(answer: &Answer, status: StatusCode, code: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.problem_code(), code, "{answer:?}");
}

/// Asserts a 422 naming `field`.
fn assert_invalid_field(answer: &Answer, field: &str) {
    assert_problem(
        answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
    assert_eq!(answer.body["field"], json!(field), "{answer:?}");
    let detail = answer.body["detail"].as_str().expect("detail");
    assert!(
        detail.contains(field),
        "detail does not name `{field}`: {answer:?}"
    );
}

/// Milliseconds since the epoch of a contract timestamp
/// (`2026-11-29T23:58:12.345Z`), checking its exact shape.
pub(crate) fn ms_of(value: &Value) -> i64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {value}"));
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 24
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            10 => *b == b'T',
            13 | 16 => *b == b':',
            19 => *b == b'.',
            23 => *b == b'Z',
            _ => b.is_ascii_digit(),
        });
    assert!(
        shape_ok,
        "not an RFC 3339 UTC timestamp with milliseconds: {text}"
    );
    let num = |range: std::ops::Range<usize>| -> i64 { text[range].parse().expect("digits") };
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    assert!(
        (1..=12).contains(&month) && (1..=31).contains(&day),
        "{text}"
    );
    // Days from civil (H. Hinnant), proleptic Gregorian.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + num(11..13)) * 60 + num(14..16)) * 60_000 + num(17..19) * 1000 + num(20..23)
}

/// A timestamp that is well formed and close to this machine's clock
/// (the service and Redis run here).
fn assert_recent(value: &Value) -> i64 {
    let ms = ms_of(value);
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("fits");
    assert!((ms - now).abs() < 60_000, "{value} is not near now ({now})");
    ms
}

async fn post_raw(
    app: &TestApp,
    url: String,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> Answer {
    let mut request = app.http.post(url).body(body);
    if let Some(content_type) = content_type {
        request = request.header(CONTENT_TYPE, content_type);
    }
    app.send(request).await
}

/// A POST with no body and no content type.
async fn post_empty(app: &TestApp, url: String) -> Answer {
    app.send(app.http.post(url)).await
}

async fn delete(app: &TestApp, url: String) -> Answer {
    app.send(app.http.delete(url)).await
}

/// Status, content type and text of an answer that need not be JSON.
async fn get_text(app: &TestApp, path: &str) -> (StatusCode, String, String) {
    let response = app.http.get(app.url(path)).send().await.expect("answered");
    let status = response.status();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, content_type, response.text().await.expect("body"))
}

fn job_url(app: &TestApp, queue: &str, id: &str, rest: &str) -> String {
    app.queue_url(queue, &format!("/jobs/{id}{rest}"))
}

/// Enqueues one job and leases it; the only pending job of `queue` must be
/// this one.
async fn enqueue_and_claim(app: &TestApp, queue: &str, body: Value, claim: Value) -> Value {
    let job = app.enqueue(queue, body).await;
    let leased = app.claim(queue, claim).await;
    assert_eq!(leased.len(), 1, "{leased:?}");
    assert_eq!(id_of(&leased[0]), id_of(&job));
    leased.into_iter().next().expect("one job")
}

async fn nack(app: &TestApp, queue: &str, leased: &Value, extra: Value) -> Answer {
    let mut body = json!({"lease_token": leased["lease_token"]});
    for (key, value) in extra.as_object().expect("object") {
        body[key] = value.clone();
    }
    app.post(job_url(app, queue, id_of(leased), "/nack"), body)
        .await
}

async fn extend(app: &TestApp, queue: &str, id: &str, token: &Value, lease_ms: u64) -> Answer {
    app.post(
        job_url(app, queue, id, "/extend"),
        json!({"lease_token": token, "lease_ms": lease_ms}),
    )
    .await
}

/// Makes a dead job through claim and `nack dead:true`; returns the nack's view.
async fn make_dead(app: &TestApp, queue: &str, body: Value, error: &str) -> Value {
    let leased = enqueue_and_claim(app, queue, body, json!({})).await;
    let answer = nack(app, queue, &leased, json!({"dead": true, "error": error})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["state"], "dead", "{answer:?}");
    answer.body
}

async fn dlq_page(app: &TestApp, queue: &str, query: &str) -> Answer {
    app.get(app.queue_url(queue, &format!("/dlq{query}"))).await
}

/// Walks the DLQ with pages of `limit`; returns the pages' ids.
async fn dlq_pages(app: &TestApp, queue: &str, limit: u32) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", limit.to_string())];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.clone()));
        }
        let url = app.queue_url(queue, "/dlq");
        let page = app.send(app.http.get(url).query(&query)).await;
        assert_eq!(page.status, StatusCode::OK, "{page:?}");
        let jobs = page.body["jobs"].as_array().expect("jobs").clone();
        for job in &jobs {
            assert_eq!(job["state"], "dead", "{job}");
            assert_recent(&job["dead_at"]);
        }
        pages.push(ids_of(&jobs));
        assert!(pages.len() <= 100, "the DLQ pages never end");
        match &page.body["next_cursor"] {
            Value::Null => return pages,
            Value::String(next) => cursor = Some(next.clone()),
            other => panic!("next_cursor is neither a string nor null: {other}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Enqueue
// ---------------------------------------------------------------------------

#[tokio::test]
async fn enqueue_creates_a_pending_job_with_defaults_and_a_location() {
    let app = spawn_app().await;
    let answer = app
        .post(
            app.queue_url("emails", "/jobs"),
            json!({"task": "send_email"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let job = &answer.body;
    let id = id_of(job);
    assert!(!id.is_empty());
    assert_eq!(job["created"], true);
    assert_eq!(job["queue"], "emails");
    assert_eq!(job["task"], "send_email");
    assert_eq!(job["priority"], 1);
    assert_eq!(job["args"], json!({}));
    assert_eq!(job["max_attempts"], 5);
    assert_eq!(job["attempts"], 0);
    assert_eq!(job["state"], "pending");
    assert_recent(&job["enqueued_at"]);
    for absent in [
        "run_at",
        "lease_token",
        "lease_expires_at",
        "worker",
        "last_error",
    ] {
        assert!(job[absent].is_null(), "{absent} set on a new job: {job}");
    }
    let location = answer.headers.get(LOCATION).expect("Location header");
    let location = location.to_str().expect("ASCII");
    assert_eq!(location, format!("/v1/queues/emails/jobs/{id}"));

    // The Location names the stored job.
    let stored = app.get(app.url(location)).await;
    assert_eq!(stored.status, StatusCode::OK, "{stored:?}");
    for field in [
        "id",
        "task",
        "priority",
        "args",
        "max_attempts",
        "attempts",
        "state",
        "enqueued_at",
    ] {
        assert_eq!(stored.body[field], job[field], "{field}");
    }
    assert_eq!(app.stats("emails").await["pending"], 1);
}

#[tokio::test]
async fn enqueue_keeps_the_fields_it_is_given() {
    let app = spawn_app().await;
    let args = json!({"to": "a@example.com", "n": [1, 2.5, null, {"deep": true}], "s": "é✓"});
    let job = app
        .enqueue(
            "q",
            json!({"task": "t", "args": args, "priority": 0, "id": "order-1234:a_b.c", "max_attempts": 3}),
        )
        .await;
    assert_eq!(id_of(&job), "order-1234:a_b.c");
    let stored = app.job("q", "order-1234:a_b.c").await;
    assert_eq!(stored.status, StatusCode::OK, "{stored:?}");
    assert_eq!(stored.body["args"], args);
    assert_eq!(stored.body["priority"], 0);
    assert_eq!(stored.body["max_attempts"], 3);
    assert_eq!(stored.body["task"], "t");

    // Non-object args are kept as sent too.
    let scalar = app
        .enqueue("q", json!({"task": "t", "args": [1, "two"]}))
        .await;
    assert_eq!(
        app.job("q", id_of(&scalar)).await.body["args"],
        json!([1, "two"])
    );
}

#[tokio::test]
async fn enqueue_max_attempts_defaults_to_the_configured_value() {
    let mut config = test_config();
    config.max_attempts = 7;
    let app = spawn_app_with(config).await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    assert_eq!(job["max_attempts"], 7);
    assert_eq!(app.job("q", id_of(&job)).await.body["max_attempts"], 7);
}

#[tokio::test]
async fn enqueue_with_a_known_client_id_answers_that_job_and_adds_nothing() {
    let app = spawn_app().await;
    let first = app
        .enqueue(
            "q",
            json!({"task": "first", "id": "order-1", "args": {"v": 1}}),
        )
        .await;
    assert_eq!(first["created"], true);
    let before = app.snapshot().await;

    let again = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "second", "id": "order-1", "priority": 7, "args": {"v": 2}}),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert_eq!(again.body["created"], false);
    assert_eq!(again.body["id"], "order-1");
    assert_eq!(again.body["task"], "first");
    assert_eq!(again.body["priority"], 1);
    assert_eq!(again.body["args"], json!({"v": 1}));
    assert_eq!(again.body["enqueued_at"], first["enqueued_at"]);
    assert!(
        again.headers.get(LOCATION).is_none(),
        "no Location for an existing job"
    );
    assert_eq!(
        app.snapshot().await,
        before,
        "an idempotent enqueue wrote something"
    );
    assert_eq!(app.stats("q").await["pending"], 1);
}

#[tokio::test]
async fn client_id_stays_idempotent_while_processing_and_dead_and_is_reusable_after_ack() {
    let app = spawn_app().await;
    let queue = "q";
    let repeat = || {
        app.post(
            app.queue_url(queue, "/jobs"),
            json!({"task": "other", "id": "k"}),
        )
    };

    let leased = enqueue_and_claim(&app, queue, json!({"task": "t", "id": "k"}), json!({})).await;
    let while_processing = repeat().await;
    assert_eq!(
        while_processing.status,
        StatusCode::OK,
        "{while_processing:?}"
    );
    assert_eq!(while_processing.body["created"], false);
    assert_eq!(while_processing.body["state"], "processing");
    assert_eq!(app.stats(queue).await["pending"], 0, "nothing was added");

    let dead = nack(&app, queue, &leased, json!({"dead": true})).await;
    assert_eq!(dead.body["state"], "dead", "{dead:?}");
    let while_dead = repeat().await;
    assert_eq!(while_dead.status, StatusCode::OK, "{while_dead:?}");
    assert_eq!(while_dead.body["created"], false);
    assert_eq!(while_dead.body["state"], "dead");
    assert_eq!(app.stats(queue).await["pending"], 0, "nothing was added");

    // Requeue, claim and ack it: the id is free again.
    let requeued = post_empty(&app, app.queue_url(queue, "/dlq/k/requeue")).await;
    assert_eq!(requeued.status, StatusCode::OK, "{requeued:?}");
    let leased = app
        .claim_one(queue)
        .await
        .expect("requeued job is claimable");
    assert_eq!(app.ack(queue, &leased).await.status, StatusCode::NO_CONTENT);
    let reused = repeat().await;
    assert_eq!(reused.status, StatusCode::CREATED, "{reused:?}");
    assert_eq!(reused.body["created"], true);
    assert_eq!(reused.body["task"], "other");
}

#[tokio::test]
async fn enqueue_with_delay_is_scheduled_until_run_at() {
    let app = spawn_app().await;
    let job = app
        .enqueue("q", json!({"task": "later", "delay_ms": 60_000}))
        .await;
    assert_eq!(job["state"], "scheduled");
    let enqueued_at = assert_recent(&job["enqueued_at"]);
    assert_eq!(ms_of(&job["run_at"]) - enqueued_at, 60_000, "{job}");
    let stored = app.job("q", id_of(&job)).await.body;
    assert_eq!(stored["state"], "scheduled");
    assert_eq!(stored["run_at"], job["run_at"]);
    assert!(
        app.claim("q", json!({})).await.is_empty(),
        "a scheduled job was claimable"
    );
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["scheduled"].clone()),
        (json!(0), json!(1))
    );

    // A short delay passes and the job becomes claimable.
    let soon = app
        .enqueue("q", json!({"task": "soon", "delay_ms": 150}))
        .await;
    assert_eq!(soon["state"], "scheduled");
    app.wait_for_job("q", id_of(&soon), Duration::from_secs(5), |j| {
        j["state"] == "pending"
    })
    .await;
    let leased = app.claim_one("q").await.expect("due job is claimable");
    assert_eq!(id_of(&leased), id_of(&soon));
}

#[tokio::test]
async fn enqueue_rejects_out_of_range_fields_naming_the_field() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "existing"})).await;
    let before = app.snapshot().await;
    let cases = [
        (json!({"task": "t", "priority": 256}), "priority"),
        (json!({"task": "t", "priority": -1}), "priority"),
        (json!({"task": "t", "priority": "high"}), "priority"),
        (json!({"task": ""}), "task"),
        (json!({"task": "x".repeat(201)}), "task"),
        (json!({"task": "é".repeat(201)}), "task"),
        (json!({"args": {}}), "task"),
        (json!({"task": 5}), "task"),
        (json!({"task": "t", "id": "has space"}), "id"),
        (json!({"task": "t", "id": "a/b"}), "id"),
        (json!({"task": "t", "id": ""}), "id"),
        (json!({"task": "t", "id": "x".repeat(129)}), "id"),
        (
            json!({"task": "t", "delay_ms": 2_592_000_001_u64}),
            "delay_ms",
        ),
        (json!({"task": "t", "delay_ms": -1}), "delay_ms"),
        (json!({"task": "t", "max_attempts": 0}), "max_attempts"),
        (json!({"task": "t", "max_attempts": 1001}), "max_attempts"),
    ];
    for (body, field) in cases {
        let answer = app.post(app.queue_url("q", "/jobs"), body.clone()).await;
        assert_invalid_field(&answer, field);
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected enqueue wrote something"
    );
}

#[tokio::test]
async fn enqueue_accepts_the_bounds_of_every_range() {
    let app = spawn_app().await;
    let cases = [
        json!({"task": "t", "priority": 0}),
        json!({"task": "t", "priority": 255}),
        json!({"task": "x".repeat(200)}),
        json!({"task": "é".repeat(200)}),
        json!({"task": "t", "id": "x".repeat(128)}),
        json!({"task": "t", "delay_ms": 2_592_000_000_u64}),
        json!({"task": "t", "max_attempts": 1}),
        json!({"task": "t", "max_attempts": 1000}),
    ];
    for body in cases {
        let job = app.enqueue("q", body.clone()).await;
        for key in ["task", "priority", "max_attempts"] {
            if let Some(sent) = body.get(key) {
                assert_eq!(&job[key], sent, "{key}");
            }
        }
    }
    let stats = app.stats("q").await;
    assert_eq!(stats["pending"], 7);
    assert_eq!(stats["scheduled"], 1);
}

#[tokio::test]
async fn enqueue_with_malformed_json_is_400() {
    let app = spawn_app().await;
    for body in [
        "{\"task\":",
        "not json",
        "{\"task\": \"t\"} trailing",
        "",
        "{'task': 't'}",
    ] {
        let answer = post_raw(
            &app,
            app.queue_url("q", "/jobs"),
            Some("application/json"),
            body,
        )
        .await;
        assert_problem(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert!(
        app.snapshot().await.is_empty(),
        "a malformed enqueue wrote something"
    );
}

#[tokio::test]
async fn enqueue_requires_a_json_content_type() {
    let app = spawn_app().await;
    let url = app.queue_url("q", "/jobs");
    let body = r#"{"task": "t"}"#;
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let answer = post_raw(&app, url.clone(), content_type, body).await;
        assert_problem(
            &answer,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        );
    }
    assert!(
        app.snapshot().await.is_empty(),
        "a 415 enqueue wrote something"
    );
    let answer = post_raw(&app, url, Some("application/json; charset=utf-8"), body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
}

#[tokio::test]
async fn enqueue_body_above_the_configured_limit_is_413() {
    let mut config = test_config();
    config.max_body_bytes = 1024;
    let app = spawn_app_with(config).await;
    app.enqueue("q", json!({"task": "t", "args": {"pad": "x".repeat(900)}}))
        .await;
    let before = app.snapshot().await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "t", "args": {"pad": "x".repeat(2000)}}),
        )
        .await;
    assert_problem(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let batch = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": (0..200).map(|_| json!({"task": "t"})).collect::<Vec<_>>()}),
        )
        .await;
    assert_problem(&batch, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(
        app.snapshot().await,
        before,
        "an oversized request wrote something"
    );
}

#[tokio::test]
async fn bad_queue_name_or_job_id_in_the_path_is_400() {
    let app = spawn_app().await;
    let long = "a".repeat(129);
    for queue in ["_bad", ".bad", "a%20b", "a:b", "%C3%A9", long.as_str()] {
        let enqueue = app
            .post(app.queue_url(queue, "/jobs"), json!({"task": "t"}))
            .await;
        assert_problem(&enqueue, StatusCode::BAD_REQUEST, "invalid_request");
        let stats = app.get(app.queue_url(queue, "")).await;
        assert_problem(&stats, StatusCode::BAD_REQUEST, "invalid_request");
        let claim = app.post(app.queue_url(queue, "/claim"), json!({})).await;
        assert_problem(&claim, StatusCode::BAD_REQUEST, "invalid_request");
    }
    let long_id = "x".repeat(129);
    for id in ["a%20b", "a%2Fb", "%C3%A9", long_id.as_str()] {
        let job = app.get(job_url(&app, "q", id, "")).await;
        assert_problem(&job, StatusCode::BAD_REQUEST, "invalid_request");
        let ack = app
            .post(job_url(&app, "q", id, "/ack"), json!({"lease_token": "t"}))
            .await;
        assert_problem(&ack, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // The longest valid name is fine.
    app.enqueue(&"a".repeat(128), json!({"task": "t"})).await;
    assert!(
        !app.snapshot()
            .await
            .keys()
            .any(|k| k.contains("_bad") || k.contains("a:b")),
        "a bad queue name reached Redis"
    );
}

// ---------------------------------------------------------------------------
// Enqueue many
// ---------------------------------------------------------------------------

#[tokio::test]
async fn batch_answers_the_jobs_in_request_order_with_created_flags() {
    let app = spawn_app().await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "a", "priority": 3},
                {"task": "b", "args": {"n": 2}},
                {"task": "c", "delay_ms": 60000},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    let tasks: Vec<_> = jobs.iter().map(|j| j["task"].clone()).collect();
    assert_eq!(tasks, [json!("a"), json!("b"), json!("c")]);
    assert!(jobs.iter().all(|j| j["created"] == true), "{jobs:?}");
    assert_eq!(jobs[0]["priority"], 3);
    assert_eq!(jobs[1]["priority"], 1);
    assert_eq!(jobs[1]["args"], json!({"n": 2}));
    assert_eq!(jobs[2]["state"], "scheduled");
    assert_eq!(ids_of(jobs).into_iter().collect::<HashSet<_>>().len(), 3);
    for job in jobs {
        let stored = app.job("q", id_of(job)).await;
        assert_eq!(stored.status, StatusCode::OK, "{stored:?}");
        assert_eq!(stored.body["task"], job["task"]);
    }
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["scheduled"].clone()),
        (json!(2), json!(1))
    );
}

#[tokio::test]
async fn batch_repeating_a_client_id_creates_one_job() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "known", "id": "old"}))
        .await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "first", "id": "dup"},
                {"task": "other"},
                {"task": "second", "id": "dup", "priority": 9},
                {"task": "again", "id": "old"},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    let created: Vec<_> = jobs.iter().map(|j| j["created"].clone()).collect();
    assert_eq!(
        created,
        [json!(true), json!(true), json!(false), json!(false)]
    );
    assert_eq!(jobs[2]["id"], "dup");
    assert_eq!(jobs[2]["task"], "first");
    assert_eq!(jobs[2]["priority"], 1);
    assert_eq!(jobs[3]["task"], "known");
    assert_eq!(app.stats("q").await["pending"], 3, "old, dup and other");
}

#[tokio::test]
async fn batch_with_one_invalid_job_is_rejected_whole_naming_its_index() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "existing"})).await;
    let before = app.snapshot().await;
    let good = json!({"task": "ok"});
    let cases = [
        (
            json!([good, {"task": "t", "priority": 256}]),
            "jobs[1].priority",
        ),
        (json!([good, good, {"task": ""}]), "jobs[2].task"),
        (
            json!([good, {"task": "t", "max_attempts": 0}]),
            "jobs[1].max_attempts",
        ),
        (
            json!([{"task": "t", "id": "no spaces"}, good]),
            "jobs[0].id",
        ),
        (
            json!([good, {"task": "t", "delay_ms": 2_592_000_001_u64}]),
            "jobs[1].delay_ms",
        ),
    ];
    for (jobs, field) in cases {
        let answer = app
            .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_invalid_field(&answer, field);
    }
    // A job without a task: the field names the index.
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [good, {"args": {}}]}),
        )
        .await;
    assert_problem(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
    let field = answer.body["field"].as_str().expect("field");
    assert_eq!(field, "jobs[1].task", "{answer:?}");
    assert!(
        answer.body["detail"]
            .as_str()
            .expect("detail")
            .contains("task"),
        "{answer:?}"
    );

    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected batch enqueued something"
    );
}

#[tokio::test]
async fn batch_must_hold_1_to_1000_jobs() {
    let app = spawn_app().await;
    let url = app.queue_url("q", "/jobs/batch");
    let empty = app.post(url.clone(), json!({"jobs": []})).await;
    assert_invalid_field(&empty, "jobs");
    let jobs: Vec<Value> = (0..1001)
        .map(|i| json!({"task": format!("t{i}")}))
        .collect();
    let too_many = app.post(url.clone(), json!({"jobs": jobs})).await;
    assert_invalid_field(&too_many, "jobs");
    let missing = app.post(url.clone(), json!({})).await;
    assert_invalid_field(&missing, "jobs");
    assert!(
        app.snapshot().await.is_empty(),
        "a rejected batch wrote something"
    );

    let full = app.post(url, json!({"jobs": &jobs[..1000]})).await;
    assert_eq!(full.status, StatusCode::OK, "{full:?}");
    assert_eq!(full.body["jobs"].as_array().expect("jobs").len(), 1000);
    assert_eq!(full.body["jobs"][999]["task"], "t999");
    assert_eq!(app.stats("q").await["pending"], 1000);
}

#[tokio::test]
async fn batch_fifo_inside_a_priority_follows_request_order() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "a", "priority": 2},
                {"task": "b", "priority": 0},
                {"task": "c", "priority": 2},
                {"task": "d", "priority": 0},
                {"task": "e", "priority": 2},
                {"task": "f", "priority": 2},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let mut claimed = Vec::new();
    while let Some(job) = app.claim_one("q").await {
        claimed.push(job["task"].as_str().expect("task").to_owned());
    }
    assert_eq!(claimed, ["b", "d", "a", "c", "e", "f"]);
}

// ---------------------------------------------------------------------------
// Claim
// ---------------------------------------------------------------------------

#[tokio::test]
async fn claim_answers_an_empty_list_when_nothing_is_claimable() {
    let app = spawn_app().await;
    let answer = app
        .post(app.queue_url("never-used", "/claim"), json!({}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["jobs"], json!([]));

    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let drained = app
        .post(app.queue_url("q", "/claim"), json!({"max_jobs": 10}))
        .await;
    assert_eq!(drained.status, StatusCode::OK, "{drained:?}");
    assert_eq!(
        drained.body["jobs"],
        json!([]),
        "a leased job was handed out again"
    );
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["lease_token"],
        leased["lease_token"]
    );
}

#[tokio::test]
async fn claim_accepts_a_request_without_body_or_content_type() {
    let mut config = test_config();
    config.default_lease_ms = 120_000;
    let app = spawn_app_with(config).await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let answer = post_empty(&app, app.queue_url("q", "/claim")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    assert_eq!(ids_of(jobs), [id_of(&job)]);
    let leased = &jobs[0];
    assert_eq!(leased["state"], "processing");
    assert!(leased["worker"].is_null(), "{leased}");
    // The default lease comes from the configuration.
    let lease = ms_of(&leased["lease_expires_at"]) - ms_of(&job["enqueued_at"]);
    assert!((120_000..125_000).contains(&lease), "lease of {lease} ms");
}

#[tokio::test]
async fn claim_rejects_out_of_range_fields() {
    let app = spawn_app().await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let before = app.snapshot().await;
    let cases = [
        (json!({"lease_ms": 99}), "lease_ms"),
        (json!({"lease_ms": 43_200_001}), "lease_ms"),
        (json!({"max_jobs": 0}), "max_jobs"),
        (json!({"max_jobs": 101}), "max_jobs"),
        (json!({"max_jobs": -1}), "max_jobs"),
        (json!({"wait_ms": 20_001}), "wait_ms"),
        (json!({"worker": "w".repeat(201)}), "worker"),
    ];
    for (body, field) in cases {
        let answer = app.post(app.queue_url("q", "/claim"), body).await;
        assert_invalid_field(&answer, field);
    }
    let wrong_type = post_raw(&app, app.queue_url("q", "/claim"), Some("text/plain"), "{}").await;
    assert_problem(
        &wrong_type,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let malformed = post_raw(
        &app,
        app.queue_url("q", "/claim"),
        Some("application/json"),
        "{",
    )
    .await;
    assert_problem(&malformed, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected claim wrote something"
    );
    assert_eq!(app.job("q", id_of(&job)).await.body["state"], "pending");

    // The bounds themselves are accepted.
    let leased = app
        .claim(
            "q",
            json!({"lease_ms": 43_200_000, "max_jobs": 100, "wait_ms": 0}),
        )
        .await;
    assert_eq!(ids_of(&leased), [id_of(&job)]);
}

#[tokio::test]
async fn claim_with_max_jobs_leases_several_with_their_lease_details() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let mut enqueued = Vec::new();
    for i in 0..5 {
        enqueued.push(app.enqueue("q", json!({"task": format!("t{i}")})).await);
    }
    let leased = app
        .claim(
            "q",
            json!({"worker": "billing-7", "lease_ms": 30_000, "max_jobs": 3}),
        )
        .await;
    assert_eq!(ids_of(&leased), ids_of(&enqueued[..3]), "oldest first");
    let mut tokens = HashSet::new();
    for job in &leased {
        assert_eq!(job["state"], "processing", "{job}");
        assert_eq!(job["worker"], "billing-7", "{job}");
        let token = job["lease_token"].as_str().expect("lease_token");
        assert!(!token.is_empty());
        tokens.insert(token.to_owned());
        let lease = ms_of(&job["lease_expires_at"]) - ms_of(&enqueued[4]["enqueued_at"]);
        assert!(
            (30_000..35_000).contains(&lease),
            "lease of {lease} ms: {job}"
        );
        let stored = app.job("q", id_of(job)).await.body;
        assert_eq!(stored["state"], "processing");
        assert_eq!(stored["lease_token"], job["lease_token"]);
        assert_eq!(stored["lease_expires_at"], job["lease_expires_at"]);
        assert_eq!(stored["worker"], "billing-7");
    }
    assert_eq!(tokens.len(), 3, "lease tokens are distinct");
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["processing"].clone()),
        (json!(2), json!(3))
    );

    let rest = app.claim("q", json!({"max_jobs": 100})).await;
    assert_eq!(ids_of(&rest), ids_of(&enqueued[3..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_never_hand_out_a_job_twice() {
    let app = std::sync::Arc::new(spawn_app().await);
    let jobs: Vec<Value> = (0..60).map(|i| json!({"task": format!("t{i}")})).collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let claims: Vec<_> = (0..12)
        .map(|_| {
            let app = std::sync::Arc::clone(&app);
            tokio::spawn(async move { ids_of(&app.claim("q", json!({"max_jobs": 7})).await) })
        })
        .collect();
    let mut seen = Vec::new();
    for claim in claims {
        seen.extend(claim.await.expect("claim task"));
    }
    let unique: HashSet<_> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a job was handed out twice");
    assert_eq!(seen.len(), 60, "12 claims of 7 cover all 60 jobs");
}

#[tokio::test]
async fn claim_with_wait_answers_as_soon_as_a_job_arrives() {
    let app = std::sync::Arc::new(spawn_app().await);
    let waiting = {
        let app = std::sync::Arc::clone(&app);
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let jobs = app.claim("q", json!({"wait_ms": 10_000})).await;
            (jobs, started.elapsed())
        })
    };
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let (jobs, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&jobs), [id_of(&job)]);
    assert!(
        waited < Duration::from_secs(4),
        "the waiting claim took {waited:?}"
    );
}

/// Starts a claim that waits up to 10 s; answers its jobs and how long it took.
fn waiting_claim(
    app: &std::sync::Arc<TestApp>,
    queue: &'static str,
) -> tokio::task::JoinHandle<(Vec<Value>, Duration)> {
    let app = std::sync::Arc::clone(app);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let jobs = app.claim(queue, json!({"wait_ms": 10_000})).await;
        (jobs, started.elapsed())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_claim_gets_a_delayed_job_as_soon_as_it_is_due() {
    let app = std::sync::Arc::new(spawn_app().await);
    let waiting = waiting_claim(&app, "q");
    let job = app
        .enqueue("q", json!({"task": "t", "delay_ms": 300}))
        .await;
    let (jobs, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&jobs), [id_of(&job)]);
    assert!(
        waited < Duration::from_secs(3),
        "the waiting claim took {waited:?}"
    );
    assert!(
        waited >= Duration::from_millis(250),
        "claimed before it was due: {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_claim_gets_a_requeued_or_nacked_job_promptly() {
    let app = std::sync::Arc::new(spawn_app().await);
    let dead = make_dead(&app, "q", json!({"task": "t"}), "boom").await;
    let waiting = waiting_claim(&app, "q");
    let requeue = post_empty(
        &app,
        app.queue_url("q", &format!("/dlq/{}/requeue", id_of(&dead))),
    )
    .await;
    assert_eq!(requeue.status, StatusCode::OK, "{requeue:?}");
    let (jobs, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&jobs), [id_of(&dead)]);
    assert!(
        waited < Duration::from_secs(3),
        "the waiting claim took {waited:?}"
    );

    let waiting = waiting_claim(&app, "q");
    let answer = nack(&app, "q", &jobs[0], json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let (again, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&again), [id_of(&dead)]);
    assert_eq!(again[0]["attempts"], 1);
    assert!(
        waited < Duration::from_secs(3),
        "the waiting claim took {waited:?}"
    );
}

#[tokio::test]
async fn claim_with_wait_answers_empty_when_the_wait_is_over() {
    let app = spawn_app().await;
    let started = tokio::time::Instant::now();
    let jobs = app.claim("q", json!({"wait_ms": 300})).await;
    let waited = started.elapsed();
    assert!(jobs.is_empty());
    assert!(
        waited >= Duration::from_millis(290),
        "answered after {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "answered after {waited:?}");
}

// ---------------------------------------------------------------------------
// Ack
// ---------------------------------------------------------------------------

#[tokio::test]
async fn ack_with_the_current_token_deletes_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "t", "args": {"big": "x"}}),
        json!({}),
    )
    .await;
    let id = id_of(&leased);
    let answer = app.ack("q", &leased).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    assert!(answer.body.is_null(), "204 with a body: {answer:?}");
    assert_problem(&app.job("q", id).await, StatusCode::NOT_FOUND, "not_found");
    assert_problem(
        &app.ack("q", &leased).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let stats = app.stats("q").await;
    for count in ["pending", "scheduled", "processing", "dead"] {
        assert_eq!(stats[count], 0, "{count}: {stats}");
    }
    // Nothing of the job is left in Redis.
    let snapshot = app.snapshot().await;
    assert!(
        snapshot.values().all(|contents| !contents.contains(id)),
        "the acked job left traces: {snapshot:?}"
    );
}

#[tokio::test]
async fn ack_with_a_wrong_token_is_lease_lost_and_leaves_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({"worker": "w"})).await;
    let id = id_of(&leased);
    let before = app.snapshot().await;
    for token in ["not-the-token", "x"] {
        let answer = app
            .post(
                job_url(&app, "q", id, "/ack"),
                json!({"lease_token": token}),
            )
            .await;
        assert_problem(&answer, StatusCode::CONFLICT, "lease_lost");
    }
    assert_eq!(app.snapshot().await, before);
    let stored = app.job("q", id).await.body;
    assert_eq!(stored["state"], "processing");
    assert_eq!(stored["lease_token"], leased["lease_token"]);
    assert_eq!(app.ack("q", &leased).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn ack_of_an_unknown_job_is_not_found() {
    let app = spawn_app().await;
    let answer = app
        .post(
            job_url(&app, "q", "ghost", "/ack"),
            json!({"lease_token": "t"}),
        )
        .await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn ack_of_a_job_never_claimed_is_lease_lost() {
    let app = spawn_app().await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let before = app.snapshot().await;
    let answer = app
        .post(
            job_url(&app, "q", id_of(&job), "/ack"),
            json!({"lease_token": "guess"}),
        )
        .await;
    assert_problem(&answer, StatusCode::CONFLICT, "lease_lost");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(app.job("q", id_of(&job)).await.body["state"], "pending");
}

#[tokio::test]
async fn ack_body_must_be_json_with_a_lease_token() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let url = job_url(&app, "q", id_of(&leased), "/ack");
    assert_invalid_field(&app.post(url.clone(), json!({})).await, "lease_token");
    let no_type = post_raw(&app, url.clone(), None, r#"{"lease_token": "t"}"#).await;
    assert_problem(
        &no_type,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let malformed = post_raw(&app, url, Some("application/json"), "{").await;
    assert_problem(&malformed, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["state"],
        "processing"
    );
}

// ---------------------------------------------------------------------------
// Ack many
// ---------------------------------------------------------------------------

#[tokio::test]
async fn ack_many_answers_each_entry_in_request_order() {
    let app = spawn_app().await;
    let a = enqueue_and_claim(&app, "q", json!({"task": "a"}), json!({})).await;
    let b = enqueue_and_claim(&app, "q", json!({"task": "b"}), json!({})).await;
    let pending = app.enqueue("q", json!({"task": "c"})).await;
    let answer = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [
                {"id": id_of(&a), "lease_token": a["lease_token"]},
                {"id": id_of(&b), "lease_token": "stale"},
                {"id": "ghost", "lease_token": "t"},
                {"id": id_of(&pending), "lease_token": "t"},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body["results"],
        json!([
            {"id": id_of(&a), "status": 204},
            {"id": id_of(&b), "status": 409, "code": "lease_lost"},
            {"id": "ghost", "status": 404, "code": "not_found"},
            {"id": id_of(&pending), "status": 409, "code": "lease_lost"},
        ])
    );
    assert_problem(
        &app.job("q", id_of(&a)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(app.job("q", id_of(&b)).await.body["state"], "processing");
    assert_eq!(app.job("q", id_of(&pending)).await.body["state"], "pending");

    // The same job twice: acked once, then gone.
    let twice = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [
                {"id": id_of(&b), "lease_token": b["lease_token"]},
                {"id": id_of(&b), "lease_token": b["lease_token"]},
            ]}),
        )
        .await;
    assert_eq!(twice.status, StatusCode::OK, "{twice:?}");
    let statuses: Vec<_> = twice.body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(204), json!(404)]);
}

#[tokio::test]
async fn ack_many_must_hold_1_to_1000_valid_entries() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let url = app.queue_url("q", "/ack");
    assert_invalid_field(&app.post(url.clone(), json!({"jobs": []})).await, "jobs");
    let too_many: Vec<Value> = (0..1001)
        .map(|i| json!({"id": format!("j{i}"), "lease_token": "t"}))
        .collect();
    assert_invalid_field(
        &app.post(url.clone(), json!({"jobs": too_many})).await,
        "jobs",
    );
    // One bad entry rejects the request, the good entry included.
    let answer = app
        .post(
            url,
            json!({"jobs": [
                {"id": id_of(&leased), "lease_token": leased["lease_token"]},
                {"id": "bad id", "lease_token": "t"},
            ]}),
        )
        .await;
    assert_invalid_field(&answer, "jobs[1].id");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["state"],
        "processing"
    );
}

// ---------------------------------------------------------------------------
// Extend
// ---------------------------------------------------------------------------

#[tokio::test]
async fn extend_moves_the_deadline_and_keeps_the_token() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "t"}),
        json!({"lease_ms": 10_000, "worker": "w"}),
    )
    .await;
    let id = id_of(&leased);
    let answer = extend(&app, "q", id, &leased["lease_token"], 60_000).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let extended = &answer.body;
    assert_eq!(extended["id"], id);
    assert_eq!(extended["state"], "processing");
    assert_eq!(extended["lease_token"], leased["lease_token"]);
    assert_eq!(extended["worker"], "w");
    let gained = ms_of(&extended["lease_expires_at"]) - ms_of(&leased["lease_expires_at"]);
    assert!(
        (50_000..55_000).contains(&gained),
        "the deadline moved by {gained} ms"
    );
    let stored = app.job("q", id).await.body;
    assert_eq!(stored["lease_expires_at"], extended["lease_expires_at"]);

    // Extending can also shorten: the deadline is now + lease_ms.
    let shorter = extend(&app, "q", id, &leased["lease_token"], 5_000).await;
    assert_eq!(shorter.status, StatusCode::OK, "{shorter:?}");
    assert!(ms_of(&shorter.body["lease_expires_at"]) < ms_of(&extended["lease_expires_at"]));
    assert_eq!(app.ack("q", &leased).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn extend_with_a_wrong_token_is_lease_lost_and_unknown_is_not_found() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let id = id_of(&leased);
    let before = app.snapshot().await;
    let wrong = extend(&app, "q", id, &json!("stale"), 60_000).await;
    assert_problem(&wrong, StatusCode::CONFLICT, "lease_lost");
    let unknown = extend(&app, "q", "ghost", &json!("t"), 60_000).await;
    assert_problem(&unknown, StatusCode::NOT_FOUND, "not_found");
    let short = extend(&app, "q", id, &leased["lease_token"], 99).await;
    assert_invalid_field(&short, "lease_ms");
    let long = extend(&app, "q", id, &leased["lease_token"], 43_200_001).await;
    assert_invalid_field(&long, "lease_ms");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.job("q", id).await.body["lease_expires_at"],
        leased["lease_expires_at"]
    );

    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let never_claimed = extend(&app, "q", id_of(&pending), &json!("t"), 60_000).await;
    assert_problem(&never_claimed, StatusCode::CONFLICT, "lease_lost");
}

// ---------------------------------------------------------------------------
// Nack
// ---------------------------------------------------------------------------

#[tokio::test]
async fn nack_returns_the_job_to_pending_behind_its_class_with_one_more_attempt() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let first = app.enqueue("q", json!({"task": "first"})).await;
    let second = app.enqueue("q", json!({"task": "second"})).await;
    let leased = app.claim_one("q").await.expect("claimed");
    assert_eq!(id_of(&leased), id_of(&first));

    let answer = nack(&app, "q", &leased, json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let job = &answer.body;
    assert_eq!(job["state"], "pending");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["priority"], 1);
    for gone in ["lease_token", "lease_expires_at", "worker", "run_at"] {
        assert!(job[gone].is_null(), "{gone} still set: {job}");
    }
    let stored = app.job("q", id_of(&first)).await.body;
    assert_eq!(
        (stored["state"].clone(), stored["attempts"].clone()),
        (json!("pending"), json!(1))
    );

    // Behind the job already waiting in its priority.
    let next = app.claim("q", json!({"max_jobs": 2})).await;
    assert_eq!(ids_of(&next), [id_of(&second), id_of(&first)]);
    assert_eq!(next[1]["attempts"], 1);
    // The old lease is dead.
    assert_problem(
        &app.ack("q", &leased).await,
        StatusCode::CONFLICT,
        "lease_lost",
    );
}

#[tokio::test]
async fn nack_with_delay_schedules_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let answer = nack(&app, "q", &leased, json!({"delay_ms": 60_000})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["state"], "scheduled");
    assert_eq!(answer.body["attempts"], 1);
    let run_at = ms_of(&answer.body["run_at"]);
    let after_enqueue = run_at - ms_of(&leased["enqueued_at"]);
    assert!(
        (60_000..65_000).contains(&after_enqueue),
        "run_at {after_enqueue} ms after the enqueue"
    );
    assert!(
        app.claim("q", json!({})).await.is_empty(),
        "a scheduled job was claimable"
    );
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["scheduled"].clone(), stats["pending"].clone()),
        (json!(1), json!(0))
    );

    let too_far = enqueue_and_claim(&app, "r", json!({"task": "t"}), json!({})).await;
    let answer = nack(&app, "r", &too_far, json!({"delay_ms": 2_592_000_001_u64})).await;
    assert_invalid_field(&answer, "delay_ms");
}

#[tokio::test]
async fn nack_with_priority_moves_the_job_to_that_class() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t", "priority": 1}), json!({})).await;
    let answer = nack(&app, "q", &leased, json!({"priority": 4})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["priority"], 4);
    assert_eq!(answer.body["state"], "pending");
    assert_eq!(app.job("q", id_of(&leased)).await.body["priority"], 4);
    let classes = app.stats("q").await["classes"].clone();
    assert_eq!(classes.as_array().expect("classes").len(), 1, "{classes}");
    assert_eq!(classes[0]["priority"], 4);
    assert_eq!(classes[0]["pending"], 1);

    let again = app.claim_one("q").await.expect("claimed");
    assert_invalid_field(
        &nack(&app, "q", &again, json!({"priority": 256})).await,
        "priority",
    );
}

#[tokio::test]
async fn nack_with_error_keeps_it_as_last_error() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let answer = nack(
        &app,
        "q",
        &leased,
        json!({"error": "timeout talking to SMTP"}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["last_error"], "timeout talking to SMTP");
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["last_error"],
        "timeout talking to SMTP"
    );
    // Claimed again, the job still shows its last error.
    let again = app.claim_one("q").await.expect("claimed");
    assert_eq!(again["last_error"], "timeout talking to SMTP");
}

#[tokio::test]
async fn nack_dead_dead_letters_the_job_with_dead_at() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let answer = nack(&app, "q", &leased, json!({"dead": true, "error": "poison"})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let job = &answer.body;
    assert_eq!(job["state"], "dead");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["last_error"], "poison");
    assert!(job["lease_token"].is_null());
    let dead_at = assert_recent(&job["dead_at"]);
    assert!(dead_at >= ms_of(&job["enqueued_at"]));
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["dead"].clone(), stats["pending"].clone()),
        (json!(1), json!(0))
    );
    assert!(
        app.claim("q", json!({})).await.is_empty(),
        "a dead job was claimable"
    );
    let dlq = dlq_page(&app, "q", "").await;
    assert_eq!(
        ids_of(dlq.body["jobs"].as_array().expect("jobs")),
        [id_of(&leased)]
    );
}

#[tokio::test]
async fn nack_reaching_max_attempts_dead_letters_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "t", "max_attempts": 2}),
        json!({}),
    )
    .await;
    let first = nack(&app, "q", &leased, json!({"error": "one"})).await;
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    assert_eq!(
        (first.body["state"].clone(), first.body["attempts"].clone()),
        (json!("pending"), json!(1))
    );
    let leased = app.claim_one("q").await.expect("claimed again");
    // Even with a delay, the last attempt goes to the DLQ.
    let second = nack(
        &app,
        "q",
        &leased,
        json!({"error": "two", "delay_ms": 60_000}),
    )
    .await;
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    assert_eq!(second.body["state"], "dead");
    assert_eq!(second.body["attempts"], 2);
    assert_eq!(second.body["last_error"], "two");
    assert_recent(&second.body["dead_at"]);
    assert_eq!(app.stats("q").await["dead"], 1);
}

#[tokio::test]
async fn nack_rejects_an_error_above_2000_characters() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let answer = nack(&app, "q", &leased, json!({"error": "e".repeat(2001)})).await;
    assert_invalid_field(&answer, "error");
    assert_eq!(app.snapshot().await, before);
    let long = "é".repeat(2000);
    let answer = nack(&app, "q", &leased, json!({"error": long})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["last_error"], json!(long));
}

#[tokio::test]
async fn nack_with_a_wrong_token_is_lease_lost_and_unknown_is_not_found() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let stale = json!({"id": id_of(&leased), "lease_token": "stale"});
    let answer = nack(&app, "q", &stale, json!({"dead": true, "error": "x"})).await;
    assert_problem(&answer, StatusCode::CONFLICT, "lease_lost");
    let ghost = json!({"id": "ghost", "lease_token": "t"});
    assert_problem(
        &nack(&app, "q", &ghost, json!({})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(app.snapshot().await, before);
    let stored = app.job("q", id_of(&leased)).await.body;
    assert_eq!(
        (stored["state"].clone(), stored["attempts"].clone()),
        (json!("processing"), json!(0))
    );
    assert!(stored["last_error"].is_null());
}

// ---------------------------------------------------------------------------
// Job: GET and DELETE
// ---------------------------------------------------------------------------

#[tokio::test]
async fn get_job_shows_every_state() {
    let app = spawn_app().await;
    let pending = app.enqueue("q", json!({"task": "p", "priority": 5})).await;
    let scheduled = app
        .enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;
    let processing =
        enqueue_and_claim(&app, "r", json!({"task": "c"}), json!({"worker": "w"})).await;
    let dead = make_dead(&app, "d", json!({"task": "d"}), "boom").await;

    let view = app.job("q", id_of(&pending)).await;
    assert_eq!(view.status, StatusCode::OK, "{view:?}");
    assert_eq!(view.body["state"], "pending");
    assert_eq!(view.body["priority"], 5);
    assert_eq!(view.body["queue"], "q");

    let view = app.job("q", id_of(&scheduled)).await.body;
    assert_eq!(view["state"], "scheduled");
    assert_eq!(view["run_at"], scheduled["run_at"]);
    assert_recent(&view["run_at"]);

    let view = app.job("r", id_of(&processing)).await.body;
    assert_eq!(view["state"], "processing");
    assert_eq!(view["lease_token"], processing["lease_token"]);
    assert_eq!(view["lease_expires_at"], processing["lease_expires_at"]);
    assert_eq!(view["worker"], "w");

    let view = app.job("d", id_of(&dead)).await.body;
    assert_eq!(view["state"], "dead");
    assert_eq!(view["dead_at"], dead["dead_at"]);
    assert_eq!(view["last_error"], "boom");

    assert_problem(
        &app.job("q", "ghost").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // Jobs belong to their queue.
    assert_problem(
        &app.job("r", id_of(&pending)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test]
async fn delete_removes_pending_scheduled_and_dead_jobs() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "boom").await;
    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let scheduled = app
        .enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;
    for job in [&pending, &scheduled, &dead] {
        let answer = delete(&app, job_url(&app, "q", id_of(job), "")).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
        assert!(answer.body.is_null());
        assert_problem(
            &app.job("q", id_of(job)).await,
            StatusCode::NOT_FOUND,
            "not_found",
        );
        let again = delete(&app, job_url(&app, "q", id_of(job), "")).await;
        assert_problem(&again, StatusCode::NOT_FOUND, "not_found");
    }
    let stats = app.stats("q").await;
    for count in ["pending", "scheduled", "processing", "dead"] {
        assert_eq!(stats[count], 0, "{count}: {stats}");
    }
    assert!(app.claim("q", json!({})).await.is_empty());
    assert_eq!(dlq_page(&app, "q", "").await.body["total"], 0);

    // A deleted job's client id may be used again.
    let first = app.enqueue("q", json!({"task": "first", "id": "k"})).await;
    let answer = delete(&app, job_url(&app, "q", id_of(&first), "")).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    let again = app.enqueue("q", json!({"task": "again", "id": "k"})).await;
    assert_eq!(
        (again["created"].clone(), again["task"].clone()),
        (json!(true), json!("again"))
    );
}

#[tokio::test]
async fn delete_of_a_processing_job_is_conflict() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let answer = delete(&app, job_url(&app, "q", id_of(&leased), "")).await;
    assert_problem(&answer, StatusCode::CONFLICT, "conflict");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["state"],
        "processing"
    );
    assert_eq!(app.ack("q", &leased).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn delete_of_an_unknown_job_is_not_found() {
    let app = spawn_app().await;
    let answer = delete(&app, job_url(&app, "q", "ghost", "")).await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}

// ---------------------------------------------------------------------------
// Dead-letter queue
// ---------------------------------------------------------------------------

#[tokio::test]
async fn dlq_lists_most_recent_first_and_pages_with_a_cursor() {
    let app = spawn_app().await;
    // Ids sort the other way round from the order the jobs die in.
    let mut dead = Vec::new();
    for (i, id) in ["dlq-e", "dlq-d", "dlq-c", "dlq-b", "dlq-a"]
        .into_iter()
        .enumerate()
    {
        let job = make_dead(
            &app,
            "q",
            json!({"task": "t", "id": id, "max_attempts": 1}),
            &format!("error {i}"),
        )
        .await;
        dead.push(job);
    }
    // Most recently dead first; the service's own dead_at decides, ties by id.
    let mut expected = dead.clone();
    expected
        .sort_by(|a, b| (ms_of(&b["dead_at"]), id_of(b)).cmp(&(ms_of(&a["dead_at"]), id_of(a))));
    let expected = ids_of(&expected);

    let all = dlq_page(&app, "q", "").await;
    assert_eq!(all.status, StatusCode::OK, "{all:?}");
    assert_eq!(all.body["total"], 5);
    assert!(all.body["next_cursor"].is_null(), "{all:?}");
    let jobs = all.body["jobs"].as_array().expect("jobs");
    assert_eq!(ids_of(jobs), expected);
    for job in jobs {
        let original = dead.iter().find(|d| d["id"] == job["id"]).expect("known");
        assert_eq!(job["last_error"], original["last_error"]);
        assert_eq!(job["dead_at"], original["dead_at"]);
        assert_eq!(job["attempts"], 1);
    }

    let pages = dlq_pages(&app, "q", 2).await;
    let sizes: Vec<_> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(
        pages.concat(),
        expected,
        "pages cover the DLQ in order, once"
    );
    let first = dlq_page(&app, "q", "?limit=2").await;
    assert_eq!(
        first.body["total"], 5,
        "total counts the whole DLQ, not the page"
    );
    assert!(first.body["next_cursor"].is_string());
}

#[tokio::test]
async fn dlq_pages_jobs_that_died_in_the_same_millisecond_without_gaps() {
    let app = spawn_app().await;
    // Ids whose byte order is not their order of arrival, with the
    // characters a cursor must carry: . : - _ and one id a prefix of another.
    let ids = ["same-b", "a", "a-1", "A", "a.b", "a:b", "Z_9", "0", "a.b.c"];
    let jobs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"task": "t", "id": id, "max_attempts": 1}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let leased = app
        .claim("q", json!({"lease_ms": 100, "max_jobs": 100}))
        .await;
    assert_eq!(leased.len(), ids.len());
    let mut dead_at = HashSet::new();
    for job in &leased {
        let dead = app
            .wait_for_job("q", id_of(job), Duration::from_secs(5), |j| {
                j["state"] == "dead"
            })
            .await;
        dead_at.insert(dead["dead_at"].as_str().expect("dead_at").to_owned());
    }
    // One sweep took every lease back at once: they all share one dead_at.
    assert_eq!(dead_at.len(), 1, "{dead_at:?}");
    let all: BTreeSet<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    let whole = dlq_pages(&app, "q", 1000).await;
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].iter().cloned().collect::<BTreeSet<_>>(), all);

    for limit in [1, 2, 3, 4, 8, 9] {
        let pages = dlq_pages(&app, "q", limit).await;
        let seen = pages.concat();
        assert_eq!(
            seen, whole[0],
            "limit {limit}: pages differ from the whole list: {pages:?}"
        );
        assert!(
            pages[..pages.len() - 1]
                .iter()
                .all(|p| p.len() == limit as usize),
            "limit {limit}: {pages:?}"
        );
        assert!(
            !pages.last().expect("a page").is_empty(),
            "limit {limit}: an empty last page"
        );
    }
}

#[tokio::test]
async fn dlq_rejects_bad_paging_parameters() {
    let app = spawn_app().await;
    make_dead(&app, "q", json!({"task": "t"}), "boom").await;
    for query in [
        "?limit=0",
        "?limit=1001",
        "?limit=-1",
        "?limit=abc",
        "?cursor=garbage",
        "?cursor=abc.def",
        "?cursor=",
    ] {
        let answer = dlq_page(&app, "q", query).await;
        assert_problem(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    for query in ["?limit=1", "?limit=1000", ""] {
        let answer = dlq_page(&app, "q", query).await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {answer:?}");
        assert_eq!(answer.body["jobs"].as_array().expect("jobs").len(), 1);
    }
}

#[tokio::test]
async fn dlq_of_a_queue_without_dead_jobs_is_empty() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "t"})).await;
    for queue in ["q", "never-used"] {
        let answer = dlq_page(&app, queue, "").await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.body["jobs"], json!([]));
        assert_eq!(answer.body["total"], 0);
        assert!(answer.body["next_cursor"].is_null());
    }
}

#[tokio::test]
async fn requeue_returns_a_dead_job_to_pending_with_attempts_reset() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "t", "priority": 2}), "boom").await;
    let id = id_of(&dead);

    // No body, no content type.
    let answer = post_empty(&app, app.queue_url("q", &format!("/dlq/{id}/requeue"))).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["state"], "pending");
    assert_eq!(answer.body["attempts"], 0);
    assert_eq!(answer.body["priority"], 2);
    assert!(answer.body["dead_at"].is_null(), "{answer:?}");
    assert_eq!(app.stats("q").await["dead"], 0);
    assert_eq!(dlq_page(&app, "q", "").await.body["total"], 0);
    let leased = app.claim_one("q").await.expect("requeued job is claimable");
    assert_eq!(id_of(&leased), id);

    // A requeued job enters its class behind the jobs already waiting there.
    let dead = nack(&app, "q", &leased, json!({"dead": true})).await.body;
    assert_eq!(dead["state"], "dead");
    let waiting = app
        .enqueue("q", json!({"task": "waiting", "priority": 2}))
        .await;
    let answer = post_empty(&app, app.queue_url("q", &format!("/dlq/{id}/requeue"))).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let order = app.claim("q", json!({"max_jobs": 2})).await;
    assert_eq!(ids_of(&order), [id_of(&waiting), id]);
    let leased = order[1].clone();

    // With a new priority.
    let dead = nack(&app, "q", &leased, json!({"dead": true})).await.body;
    assert_eq!(dead["state"], "dead");
    let answer = app
        .post(
            app.queue_url("q", &format!("/dlq/{id}/requeue")),
            json!({"priority": 3}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        (
            answer.body["state"].clone(),
            answer.body["priority"].clone()
        ),
        (json!("pending"), json!(3))
    );
    assert_eq!(answer.body["attempts"], 0);
    assert_eq!(app.stats("q").await["classes"][0]["priority"], 3);

    // With an empty JSON object.
    let leased = app.claim_one("q").await.expect("claimable");
    nack(&app, "q", &leased, json!({"dead": true})).await;
    let answer = app
        .post(app.queue_url("q", &format!("/dlq/{id}/requeue")), json!({}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        (
            answer.body["state"].clone(),
            answer.body["priority"].clone()
        ),
        (json!("pending"), json!(3))
    );

    // A bad body is still refused.
    let leased = app.claim_one("q").await.expect("claimable");
    nack(&app, "q", &leased, json!({"dead": true})).await;
    let url = app.queue_url("q", &format!("/dlq/{id}/requeue"));
    assert_invalid_field(
        &app.post(url.clone(), json!({"priority": 256})).await,
        "priority",
    );
    let text = post_raw(&app, url, Some("text/plain"), "priority=3").await;
    assert_problem(
        &text,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    assert_eq!(app.job("q", id).await.body["state"], "dead");
}

#[tokio::test]
async fn requeue_of_a_job_that_is_not_dead_is_conflict_and_unknown_is_not_found() {
    let app = spawn_app().await;
    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let scheduled = app
        .enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;
    let processing = enqueue_and_claim(&app, "r", json!({"task": "c"}), json!({})).await;
    let before = app.snapshot().await;
    for (queue, job) in [("q", &pending), ("q", &scheduled), ("r", &processing)] {
        let url = app.queue_url(queue, &format!("/dlq/{}/requeue", id_of(job)));
        assert_problem(
            &post_empty(&app, url).await,
            StatusCode::CONFLICT,
            "conflict",
        );
    }
    let unknown = post_empty(&app, app.queue_url("q", "/dlq/ghost/requeue")).await;
    assert_problem(&unknown, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.snapshot().await, before);
}

#[tokio::test]
async fn delete_from_the_dlq_removes_only_dead_jobs() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "boom").await;
    let url = app.queue_url("q", &format!("/dlq/{}", id_of(&dead)));
    let answer = delete(&app, url.clone()).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    assert_problem(&delete(&app, url).await, StatusCode::NOT_FOUND, "not_found");
    assert_problem(
        &app.job("q", id_of(&dead)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(dlq_page(&app, "q", "").await.body["total"], 0);

    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let processing = enqueue_and_claim(&app, "r", json!({"task": "c"}), json!({})).await;
    let before = app.snapshot().await;
    let answer = delete(
        &app,
        app.queue_url("q", &format!("/dlq/{}", id_of(&pending))),
    )
    .await;
    assert_problem(&answer, StatusCode::CONFLICT, "conflict");
    let answer = delete(
        &app,
        app.queue_url("r", &format!("/dlq/{}", id_of(&processing))),
    )
    .await;
    assert_problem(&answer, StatusCode::CONFLICT, "conflict");
    let answer = delete(&app, app.queue_url("q", "/dlq/ghost")).await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(app.job("q", id_of(&pending)).await.body["state"], "pending");
}

// ---------------------------------------------------------------------------
// Queues
// ---------------------------------------------------------------------------

#[tokio::test]
async fn queue_stats_count_jobs_by_state_and_priority_class() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    make_dead(&app, "q", json!({"task": "dead", "priority": 0}), "boom").await;
    enqueue_and_claim(&app, "q", json!({"task": "busy", "priority": 0}), json!({})).await;
    let oldest = app.enqueue("q", json!({"task": "a", "priority": 0})).await;
    app.enqueue("q", json!({"task": "b", "priority": 0})).await;
    let oldest_bulk = app.enqueue("q", json!({"task": "c", "priority": 5})).await;
    app.enqueue("q", json!({"task": "d", "priority": 5})).await;
    let last = app.enqueue("q", json!({"task": "e", "priority": 5})).await;
    app.enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;

    let stats = app.stats("q").await;
    // Enqueued after the stats were read: its time bounds the stats' "now".
    let probe = app.enqueue("probe", json!({"task": "t"})).await;
    assert_eq!(stats["queue"], "q");
    assert_eq!(stats["pending"], 5);
    assert_eq!(stats["scheduled"], 1);
    assert_eq!(stats["processing"], 1);
    assert_eq!(stats["expired_leases"], 0);
    assert_eq!(stats["dead"], 1);
    let classes = stats["classes"].as_array().expect("classes");
    let shape: Vec<_> = classes
        .iter()
        .map(|c| (c["priority"].clone(), c["pending"].clone()))
        .collect();
    assert_eq!(
        shape,
        [(json!(0), json!(2)), (json!(5), json!(3))],
        "{stats}"
    );
    for (class, oldest) in classes.iter().zip([&oldest, &oldest_bulk]) {
        let age = class["oldest_age_ms"].as_i64().expect("oldest_age_ms");
        let enqueued = ms_of(&oldest["enqueued_at"]);
        let at_least = ms_of(&last["enqueued_at"]) - enqueued;
        let at_most = ms_of(&probe["enqueued_at"]) - enqueued;
        assert!(
            (at_least..=at_most).contains(&age),
            "age {age} not in {at_least}..={at_most}: {stats}"
        );
    }
}

#[tokio::test]
async fn queue_stats_count_expired_leases() {
    let mut config = test_config();
    // A sweeper that does not run during the test.
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({"lease_ms": 100})).await;
    assert_recent(&leased["lease_expires_at"]);
    // Only the clock brings the deadline: poll the stats until it has passed.
    let started = tokio::time::Instant::now();
    loop {
        let stats = app.stats("q").await;
        assert_eq!(stats["processing"], 1);
        if stats["expired_leases"] == 1 {
            break;
        }
        assert_eq!(stats["expired_leases"], 0);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the lease never counted as expired: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn never_used_queue_answers_zeros() {
    let app = spawn_app().await;
    let stats = app.stats("never-used").await;
    assert_eq!(
        stats,
        json!({"queue": "never-used", "pending": 0, "scheduled": 0, "processing": 0,
               "expired_leases": 0, "dead": 0, "classes": [], "groups": 0, "paused": false,
               "completed": 0})
    );
    assert!(
        app.snapshot().await.is_empty(),
        "reading stats wrote something"
    );
}

#[tokio::test]
async fn queue_list_names_every_queue_that_had_jobs() {
    let app = spawn_app().await;
    let empty = app.get(app.url("/v1/queues")).await;
    assert_eq!(empty.status, StatusCode::OK, "{empty:?}");
    assert_eq!(empty.body["queues"], json!([]));

    app.enqueue("alpha", json!({"task": "t"})).await;
    app.enqueue("alpha", json!({"task": "t", "priority": 0}))
        .await;
    let leased = enqueue_and_claim(&app, "beta", json!({"task": "t"}), json!({})).await;
    assert_eq!(
        app.ack("beta", &leased).await.status,
        StatusCode::NO_CONTENT
    );
    app.stats("gamma").await;
    assert!(app.claim("delta", json!({})).await.is_empty());
    assert_eq!(dlq_page(&app, "epsilon", "").await.status, StatusCode::OK);

    let answer = app.get(app.url("/v1/queues")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let queues = answer.body["queues"].as_array().expect("queues");
    let names: BTreeSet<_> = queues
        .iter()
        .map(|q| q["queue"].as_str().expect("queue"))
        .collect();
    assert_eq!(names, BTreeSet::from(["alpha", "beta"]), "{answer:?}");
    let alpha = queues
        .iter()
        .find(|q| q["queue"] == "alpha")
        .expect("alpha");
    assert_eq!(without_ages(alpha), without_ages(&app.stats("alpha").await));
    assert_eq!(alpha["pending"], 2);
    assert_eq!(alpha["classes"].as_array().expect("classes").len(), 2);
    let beta = queues.iter().find(|q| q["queue"] == "beta").expect("beta");
    assert_eq!(beta["pending"], 0);
    assert_eq!(beta["processing"], 0);
}

/// Queue stats without the class ages, which move on between two reads.
fn without_ages(stats: &Value) -> Value {
    let mut stats = stats.clone();
    for class in stats["classes"].as_array_mut().expect("classes") {
        class
            .as_object_mut()
            .expect("class")
            .remove("oldest_age_ms");
    }
    stats
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

#[tokio::test]
async fn healthz_and_readyz_answer_ok() {
    let app = spawn_app().await;
    let health = app.get(app.url("/healthz")).await;
    assert_eq!(health.status, StatusCode::OK, "{health:?}");
    assert_eq!(health.body, json!({"status": "ok"}));
    let ready = app.get(app.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK, "{ready:?}");
    assert_eq!(ready.body["status"], "ok");
}

#[tokio::test]
async fn readyz_is_503_when_redis_cannot_be_reached() {
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{}", crate::helpers::free_port());
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config).await;
    let health = app.get(app.url("/healthz")).await;
    assert_eq!(health.status, StatusCode::OK, "{health:?}");
    let ready = app.get(app.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE, "{ready:?}");
    let enqueue = app
        .post(app.queue_url("q", "/jobs"), json!({"task": "t"}))
        .await;
    assert_problem(
        &enqueue,
        StatusCode::SERVICE_UNAVAILABLE,
        "backend_unavailable",
    );
    let detail = enqueue.body["detail"].as_str().expect("detail");
    assert!(!detail.contains("q}:"), "a key name leaked: {detail}");
}

#[tokio::test]
async fn openapi_document_is_openapi_3_1_with_the_v1_paths() {
    let app = spawn_app().await;
    let answer = app.get(app.url("/openapi.json")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let content_type = answer
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    assert!(
        content_type.is_some_and(|t| t.starts_with("application/json")),
        "{content_type:?}"
    );
    let version = answer.body["openapi"].as_str().expect("openapi version");
    assert!(version.starts_with("3.1."), "{version}");
    let paths = answer.body["paths"].as_object().expect("paths");
    let expected = [
        ("/v1/queues/{queue}/jobs", "post"),
        ("/v1/queues/{queue}/jobs/batch", "post"),
        ("/v1/queues/{queue}/claim", "post"),
        ("/v1/queues/{queue}/jobs/{id}/ack", "post"),
        ("/v1/queues/{queue}/ack", "post"),
        ("/v1/queues/{queue}/jobs/{id}/extend", "post"),
        ("/v1/queues/{queue}/jobs/{id}/nack", "post"),
        ("/v1/queues/{queue}/jobs/{id}", "get"),
        ("/v1/queues/{queue}/jobs/{id}", "delete"),
        ("/v1/queues/{queue}/dlq", "get"),
        ("/v1/queues/{queue}/dlq/{id}/requeue", "post"),
        ("/v1/queues/{queue}/dlq/{id}", "delete"),
        ("/v1/queues/{queue}", "get"),
        ("/v1/queues", "get"),
    ];
    for (path, method) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
}

#[tokio::test]
async fn openapi_json_is_the_committed_document() {
    let app = spawn_app().await;
    let answer = app.get(app.url("/openapi.json")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    let committed = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("the committed OpenAPI document {path}: {error}"));
    let committed: Value = serde_json::from_str(&committed).expect("committed document is JSON");
    assert_eq!(
        answer.body, committed,
        "GET /openapi.json differs from {path}"
    );
}

/// The value of the Prometheus sample `name{labels}` (labels in any order,
/// exactly these).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    wanted.sort();
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (inside, value) = rest.split_once("} ")?;
        let mut have: Vec<String> = inside.split(',').map(str::to_owned).collect();
        have.sort();
        (have == wanted).then(|| value.trim().parse().ok())?
    })
}

#[tokio::test]
async fn metrics_are_prometheus_text_open_without_a_token() {
    let mut config = with_tokens("secret");
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let authed = |request: reqwest::RequestBuilder| app.send(request.bearer_auth("secret"));
    // Queue names of this test only: counters are per process.
    let (flow, expiry) = ("metrics-flow", "metrics-expiry");
    for priority in [3, 3, 0] {
        let answer = authed(
            app.http
                .post(app.queue_url(flow, "/jobs"))
                .json(&json!({"task": "t", "priority": priority})),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    let claimed = authed(
        app.http
            .post(app.queue_url(flow, "/claim"))
            .json(&json!({"max_jobs": 2})),
    )
    .await;
    let leased = claimed.body["jobs"].as_array().expect("jobs").clone();
    assert_eq!(leased.len(), 2, "{claimed:?}");
    let acked = authed(
        app.http
            .post(job_url(&app, flow, id_of(&leased[0]), "/ack"))
            .json(&json!({"lease_token": leased[0]["lease_token"]})),
    )
    .await;
    assert_eq!(acked.status, StatusCode::NO_CONTENT, "{acked:?}");
    let buried = authed(
        app.http
            .post(job_url(&app, flow, id_of(&leased[1]), "/nack"))
            .json(&json!({"lease_token": leased[1]["lease_token"], "dead": true})),
    )
    .await;
    assert_eq!(buried.body["state"], "dead", "{buried:?}");
    let created = authed(
        app.http
            .post(app.queue_url(expiry, "/jobs"))
            .json(&json!({"task": "t"})),
    )
    .await;
    let expiring = authed(
        app.http
            .post(app.queue_url(expiry, "/claim"))
            .json(&json!({"lease_ms": 100})),
    )
    .await;
    assert_eq!(
        expiring.body["jobs"].as_array().map(Vec::len),
        Some(1),
        "{expiring:?}"
    );
    let id = id_of(&created.body).to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let job = authed(app.http.get(job_url(&app, expiry, &id, ""))).await;
        if job.body["state"] == "pending" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease was never taken back: {job:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (status, content_type, text) = get_text(&app, "/metrics").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let expect = |name: &str, labels: &[(&str, &str)], value: f64| {
        assert_eq!(
            sample(&text, name, labels),
            Some(value),
            "{name}{labels:?} in:\n{text}"
        );
    };
    expect(
        "prioq_jobs_pending",
        &[("queue", flow), ("priority", "3")],
        1.0,
    );
    expect("prioq_jobs_processing", &[("queue", flow)], 0.0);
    expect("prioq_jobs_dead", &[("queue", flow)], 1.0);
    expect("prioq_jobs_enqueued_total", &[("queue", flow)], 3.0);
    expect("prioq_jobs_claimed_total", &[("queue", flow)], 2.0);
    expect("prioq_jobs_acked_total", &[("queue", flow)], 1.0);
    expect("prioq_jobs_dead_lettered_total", &[("queue", flow)], 1.0);
    expect("prioq_leases_expired_total", &[("queue", expiry)], 1.0);
    expect(
        "prioq_jobs_pending",
        &[("queue", expiry), ("priority", "1")],
        1.0,
    );
    let age = sample(
        &text,
        "prioq_oldest_job_age_seconds",
        &[("queue", flow), ("priority", "3")],
    )
    .unwrap_or_else(|| panic!("no oldest job age for {flow}:\n{text}"));
    assert!((0.0..60.0).contains(&age), "{age}");
    assert!(
        text.lines().any(
            |line| line.starts_with("prioq_http_request_duration_seconds")
                && line.contains("route=\"/v1/queues/{queue}/jobs\"")
                && line.contains("status=\"201\"")
        ),
        "no request duration histogram by route and status:\n{text}"
    );
}

#[tokio::test]
async fn docs_page_is_served_open_without_a_token() {
    let config = with_tokens("secret");
    let app = spawn_app_with(config).await;
    let (status, content_type, text) = get_text(&app, "/docs").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(content_type.starts_with("text/html"), "{content_type}");
}

#[tokio::test]
async fn unknown_route_is_a_404_problem() {
    let app = spawn_app().await;
    for path in ["/nope", "/v1", "/v1/nope", "/v2/queues/q/jobs"] {
        let answer = app.get(app.url(path)).await;
        assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
    }
    let answer = app
        .post(
            job_url(&app, "q", "j", "/unknown"),
            json!({"lease_token": "t"}),
        )
        .await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn wrong_method_is_a_405_problem_naming_the_allowed_methods() {
    let app = spawn_app().await;
    let requests = [
        (app.http.put(app.queue_url("q", "/jobs")), &["POST"][..]),
        (app.http.get(app.queue_url("q", "/claim")), &["POST"]),
        (app.http.get(app.queue_url("q", "/jobs/batch")), &["POST"]),
        (
            app.http.put(job_url(&app, "q", "j", "")),
            &["GET", "DELETE"],
        ),
        (app.http.delete(app.queue_url("q", "")), &["GET"]),
        (app.http.get(app.queue_url("q", "/dlq/j")), &["DELETE"]),
        (app.http.post(app.url("/healthz")), &["GET"]),
    ];
    for (request, allowed) in requests {
        let answer = app.send(request).await;
        assert_problem(
            &answer,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        );
        let allow = answer
            .headers
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("405 without Allow: {answer:?}"));
        let listed: Vec<&str> = allow.split(',').map(str::trim).collect();
        for method in allowed {
            assert!(listed.contains(method), "Allow: {allow} lacks {method}");
        }
    }
    assert!(app.snapshot().await.is_empty());
}

// ---------------------------------------------------------------------------
// Auth
// ---------------------------------------------------------------------------

/// Test settings with these API tokens, parsed as the `--api-tokens` flag is.
fn with_tokens(tokens: &str) -> Config {
    let mut config = test_config();
    config.api_tokens = Config::parse_from(["prioq", "--api-tokens", tokens]).api_tokens;
    config
}

fn assert_unauthorized(answer: &Answer) {
    assert_problem(answer, StatusCode::UNAUTHORIZED, "unauthorized");
    let challenge = answer
        .headers
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok());
    assert!(
        challenge.is_some_and(|c| c.starts_with("Bearer")),
        "{answer:?}"
    );
}

#[tokio::test]
async fn v1_routes_need_one_of_the_configured_tokens() {
    let app = spawn_app_with(with_tokens("token-one,token-two")).await;
    let http = &app.http;
    let routes = || {
        [
            http.post(app.queue_url("q", "/jobs"))
                .json(&json!({"task": "t"})),
            http.post(app.queue_url("q", "/jobs/batch"))
                .json(&json!({"jobs": [{"task": "t"}]})),
            http.post(app.queue_url("q", "/claim")).json(&json!({})),
            http.post(app.queue_url("q", "/ack"))
                .json(&json!({"jobs": [{"id": "j", "lease_token": "t"}]})),
            http.post(job_url(&app, "q", "j", "/ack"))
                .json(&json!({"lease_token": "t"})),
            http.post(job_url(&app, "q", "j", "/extend"))
                .json(&json!({"lease_token": "t"})),
            http.post(job_url(&app, "q", "j", "/nack"))
                .json(&json!({"lease_token": "t"})),
            http.get(job_url(&app, "q", "j", "")),
            http.delete(job_url(&app, "q", "j", "")),
            http.get(app.queue_url("q", "/dlq")),
            http.post(app.queue_url("q", "/dlq/j/requeue")),
            http.delete(app.queue_url("q", "/dlq/j")),
            http.get(app.queue_url("q", "")),
            http.get(app.url("/v1/queues")),
        ]
    };
    for request in routes() {
        assert_unauthorized(&app.send(request).await);
    }
    for request in routes() {
        assert_unauthorized(&app.send(request.bearer_auth("wrong-token")).await);
    }
    for request in routes() {
        assert_unauthorized(
            &app.send(request.header("authorization", "Basic dG9rZW4tb25lOg=="))
                .await,
        );
    }
    for request in routes() {
        // A prefix of a valid token is not a valid token.
        assert_unauthorized(&app.send(request.bearer_auth("token-on")).await);
    }
    assert!(
        app.snapshot().await.is_empty(),
        "an unauthorized request wrote something"
    );

    for token in ["token-one", "token-two"] {
        let created = app
            .send(
                http.post(app.queue_url("q", "/jobs"))
                    .bearer_auth(token)
                    .json(&json!({"task": token})),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
        let read = app
            .send(
                http.get(job_url(&app, "q", id_of(&created.body), ""))
                    .bearer_auth(token),
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{read:?}");
        let claimed = app
            .send(
                http.post(app.queue_url("q", "/claim"))
                    .bearer_auth(token)
                    .json(&json!({})),
            )
            .await;
        assert_eq!(claimed.status, StatusCode::OK, "{claimed:?}");
        let stats = app
            .send(http.get(app.url("/v1/queues")).bearer_auth(token))
            .await;
        assert_eq!(stats.status, StatusCode::OK, "{stats:?}");
    }
}

#[tokio::test]
async fn operations_routes_stay_open_when_tokens_are_configured() {
    let app = spawn_app_with(with_tokens("token-one,token-two")).await;
    let health = app.get(app.url("/healthz")).await;
    assert_eq!(
        (health.status, health.body),
        (StatusCode::OK, json!({"status": "ok"}))
    );
    let ready = app.get(app.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK, "{ready:?}");
    let openapi = app.get(app.url("/openapi.json")).await;
    assert_eq!(openapi.status, StatusCode::OK, "{openapi:?}");
    assert!(openapi.body["openapi"].is_string());
}

#[tokio::test]
async fn auth_is_checked_before_the_body_is_read() {
    let mut config = with_tokens("token-one,token-two");
    config.max_body_bytes = 1024;
    let app = spawn_app_with(config).await;
    let url = app.queue_url("q", "/jobs");
    assert_unauthorized(&post_raw(&app, url.clone(), Some("application/json"), "{not json").await);
    assert_unauthorized(&post_raw(&app, url.clone(), Some("text/plain"), "task=t").await);
    assert_unauthorized(
        &post_raw(
            &app,
            url.clone(),
            Some("application/json"),
            "x".repeat(5000),
        )
        .await,
    );
    assert_unauthorized(&app.post(url, json!({"priority": 999})).await);
}

#[tokio::test]
async fn unauthorized_requests_change_nothing() {
    let app = spawn_app_with(with_tokens("token-one,token-two")).await;
    let http = &app.http;
    let authed = |request: reqwest::RequestBuilder| app.send(request.bearer_auth("token-one"));
    let pending = authed(
        http.post(app.queue_url("q", "/jobs"))
            .json(&json!({"task": "p"})),
    )
    .await
    .body;
    authed(
        http.post(app.queue_url("q", "/jobs"))
            .json(&json!({"task": "c"})),
    )
    .await;
    let claimed = authed(http.post(app.queue_url("q", "/claim")).json(&json!({})))
        .await
        .body;
    let leased = claimed["jobs"][0].clone();
    assert_eq!(leased["state"], "processing", "{claimed}");
    let before = app.snapshot().await;

    let attempts = [
        http.post(app.queue_url("q", "/jobs"))
            .json(&json!({"task": "sneaky"})),
        http.post(app.queue_url("q", "/jobs/batch"))
            .json(&json!({"jobs": [{"task": "sneaky"}]})),
        http.post(app.queue_url("q", "/claim"))
            .json(&json!({"max_jobs": 10})),
        http.post(job_url(&app, "q", id_of(&leased), "/ack"))
            .json(&json!({"lease_token": leased["lease_token"]})),
        http.post(job_url(&app, "q", id_of(&leased), "/nack"))
            .json(&json!({"lease_token": leased["lease_token"], "dead": true})),
        http.post(job_url(&app, "q", id_of(&leased), "/extend"))
            .json(&json!({"lease_token": leased["lease_token"], "lease_ms": 100})),
        http.delete(job_url(&app, "q", id_of(&pending), "")),
    ];
    for request in attempts {
        assert_unauthorized(&app.send(request.bearer_auth("nope")).await);
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "an unauthorized request changed Redis"
    );
}

#[tokio::test]
async fn empty_entries_in_the_token_list_never_authorize() {
    let app = spawn_app_with(with_tokens("token-one,,")).await;
    let url = app.queue_url("q", "/jobs");
    for header in ["Bearer ", "Bearer", "Bearer  ", ""] {
        let answer = app
            .send(
                app.http
                    .post(url.clone())
                    .header("authorization", header)
                    .json(&json!({"task": "t"})),
            )
            .await;
        assert_unauthorized(&answer);
    }
    let answer = app
        .send(
            app.http
                .post(url)
                .bearer_auth("token-one")
                .json(&json!({"task": "t"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(stats_with_token(&app, "q", "token-one").await["pending"], 1);
}

/// Stats read with a bearer token.
async fn stats_with_token(app: &TestApp, queue: &str, token: &str) -> Value {
    let answer = app
        .send(app.http.get(app.queue_url(queue, "")).bearer_auth(token))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.body
}

// ---------------------------------------------------------------------------
// Content types and stale leases on every route
// ---------------------------------------------------------------------------

#[tokio::test]
async fn routes_with_a_json_body_refuse_other_content_types() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let id = id_of(&leased);
    let token = leased["lease_token"].as_str().expect("token");
    let before = app.snapshot().await;
    let routes = [
        (app.queue_url("q", "/jobs"), json!({"task": "t"})),
        (
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "t"}]}),
        ),
        (app.queue_url("q", "/claim"), json!({"max_jobs": 1})),
        (
            job_url(&app, "q", id, "/ack"),
            json!({"lease_token": token}),
        ),
        (
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id, "lease_token": token}]}),
        ),
        (
            job_url(&app, "q", id, "/extend"),
            json!({"lease_token": token, "lease_ms": 1000}),
        ),
        (
            job_url(&app, "q", id, "/nack"),
            json!({"lease_token": token, "dead": true}),
        ),
        (
            app.queue_url("q", &format!("/dlq/{id}/requeue")),
            json!({"priority": 3}),
        ),
    ];
    for (url, body) in routes {
        let body = body.to_string();
        for content_type in [None, Some("text/plain")] {
            let answer = post_raw(&app, url.clone(), content_type, body.clone()).await;
            assert_problem(
                &answer,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
            );
        }
    }
    assert_eq!(app.snapshot().await, before, "a 415 request changed Redis");
}

#[tokio::test]
async fn a_lease_taken_back_by_the_sweeper_is_lost_for_ack_extend_and_nack() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({"lease_ms": 100})).await;
    let id = id_of(&leased);
    let back = app
        .wait_for_job("q", id, Duration::from_secs(5), |j| j["state"] == "pending")
        .await;
    assert_eq!(back["attempts"], 1, "an expired lease counts as an attempt");
    assert!(back["lease_token"].is_null());
    let before = app.snapshot().await;
    assert_problem(
        &app.ack("q", &leased).await,
        StatusCode::CONFLICT,
        "lease_lost",
    );
    let extended = extend(&app, "q", id, &leased["lease_token"], 60_000).await;
    assert_problem(&extended, StatusCode::CONFLICT, "lease_lost");
    let nacked = nack(&app, "q", &leased, json!({"dead": true})).await;
    assert_problem(&nacked, StatusCode::CONFLICT, "lease_lost");
    let many = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id, "lease_token": leased["lease_token"]}]}),
        )
        .await;
    assert_eq!(many.body["results"][0]["status"], 409, "{many:?}");
    assert_eq!(many.body["results"][0]["code"], "lease_lost", "{many:?}");
    assert_eq!(app.snapshot().await, before);
    let stored = app.job("q", id).await.body;
    assert_eq!(
        (stored["state"].clone(), stored["attempts"].clone()),
        (json!("pending"), json!(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_enqueues_with_one_client_id_create_one_job() {
    let app = std::sync::Arc::new(spawn_app().await);
    let enqueues: Vec<_> = (0..10)
        .map(|i| {
            let app = std::sync::Arc::clone(&app);
            tokio::spawn(async move {
                app.post(
                    app.queue_url("q", "/jobs"),
                    json!({"task": format!("t{i}"), "id": "same"}),
                )
                .await
            })
        })
        .collect();
    let mut created = 0;
    let mut tasks = HashSet::new();
    for enqueue in enqueues {
        let answer = enqueue.await.expect("enqueue task");
        match answer.status {
            StatusCode::CREATED => created += 1,
            StatusCode::OK => assert_eq!(answer.body["created"], false),
            _ => panic!("{answer:?}"),
        }
        tasks.insert(answer.body["task"].as_str().expect("task").to_owned());
    }
    assert_eq!(created, 1);
    assert_eq!(tasks.len(), 1, "every answer shows the one job: {tasks:?}");
    assert_eq!(app.stats("q").await["pending"], 1);
}

// ---------------------------------------------------------------------------
// Rejected requests
// ---------------------------------------------------------------------------

#[tokio::test]
async fn rejected_requests_change_nothing() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "boom").await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "c"}),
        json!({"lease_ms": 600_000}),
    )
    .await;
    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let leased_id = id_of(&leased);
    let token = &leased["lease_token"];
    let before = app.snapshot().await;

    let jobs = app.queue_url("q", "/jobs");
    let rejected = [
        post_raw(&app, jobs.clone(), Some("application/json"), "{\"task\": ").await,
        post_raw(&app, jobs.clone(), Some("text/plain"), r#"{"task": "t"}"#).await,
        app.post(jobs.clone(), json!({"task": "t", "priority": 256})).await,
        app.post(jobs.clone(), json!({"task": "t", "id": "p", "max_attempts": 0})).await,
        app.post(app.queue_url("q", "/jobs/batch"), json!({"jobs": [{"task": "ok"}, {"task": ""}]}))
            .await,
        app.post(app.queue_url("q", "/claim"), json!({"max_jobs": 0})).await,
        app.post(app.queue_url("q", "/ack"), json!({"jobs": []})).await,
        app.post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": leased_id, "lease_token": token}, {"id": "", "lease_token": "t"}]}),
        )
        .await,
        app.post(job_url(&app, "q", leased_id, "/ack"), json!({"lease_token": "stale"})).await,
        app.post(job_url(&app, "q", id_of(&pending), "/ack"), json!({"lease_token": "stale"})).await,
        app.post(job_url(&app, "q", id_of(&dead), "/ack"), json!({"lease_token": "stale"})).await,
        extend(&app, "q", leased_id, &json!("stale"), 60_000).await,
        extend(&app, "q", leased_id, token, 99).await,
        nack(&app, "q", &json!({"id": leased_id, "lease_token": "stale"}), json!({"dead": true})).await,
        nack(&app, "q", &leased, json!({"error": "e".repeat(2001)})).await,
        nack(&app, "q", &leased, json!({"delay_ms": 2_592_000_001_u64})).await,
        delete(&app, job_url(&app, "q", leased_id, "")).await,
        delete(&app, app.queue_url("q", &format!("/dlq/{}", id_of(&pending)))).await,
        post_empty(&app, app.queue_url("q", &format!("/dlq/{}/requeue", id_of(&pending)))).await,
        post_empty(&app, app.queue_url("q", &format!("/dlq/{leased_id}/requeue"))).await,
        dlq_page(&app, "q", "?limit=0").await,
    ];
    for answer in &rejected {
        assert!(answer.status.is_client_error(), "not rejected: {answer:?}");
        answer.problem_code();
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected request changed Redis"
    );
    assert_eq!(
        app.ack("q", &leased).await.status,
        StatusCode::NO_CONTENT,
        "the lease still holds"
    );
}

/// Every route that reads a JSON body, with a valid body for a leased job
/// `leased` (in queue "q") and a dead job `dead`.
fn json_routes(app: &TestApp, leased: &Value, dead: &Value) -> Vec<(String, Value)> {
    let token = &leased["lease_token"];
    let id = id_of(leased);
    vec![
        (app.queue_url("q", "/jobs"), json!({"task": "t"})),
        (
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "t"}]}),
        ),
        (app.queue_url("q", "/claim"), json!({"max_jobs": 1})),
        (job_url(app, "q", id, "/ack"), json!({"lease_token": token})),
        (
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id, "lease_token": token}]}),
        ),
        (
            job_url(app, "q", id, "/extend"),
            json!({"lease_token": token}),
        ),
        (
            job_url(app, "q", id, "/nack"),
            json!({"lease_token": token}),
        ),
        (
            app.queue_url("q", &format!("/dlq/{}/requeue", id_of(dead))),
            json!({"priority": 2}),
        ),
    ]
}

#[tokio::test]
async fn json_followed_by_more_characters_is_400_on_every_route() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "x").await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "l"}), json!({})).await;
    let before = app.snapshot().await;
    for (url, body) in json_routes(&app, &leased, &dead) {
        // Both an empty object (fields missing) and a valid body, each with
        // a stray closing brace: the syntax error is what is reported.
        for text in ["{}}".to_owned(), format!("{body}}}"), format!("{body} x")] {
            let answer = post_raw(&app, url.clone(), Some("application/json"), text.clone()).await;
            assert_eq!(
                answer.status,
                StatusCode::BAD_REQUEST,
                "{url} {text}: {answer:?}"
            );
            assert_eq!(answer.problem_code(), "invalid_request", "{url} {text}");
        }
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a malformed body changed Redis"
    );
}

#[tokio::test]
async fn unknown_body_fields_are_refused_naming_them_on_every_route() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "x").await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "l"}), json!({})).await;
    let before = app.snapshot().await;
    for (url, mut body) in json_routes(&app, &leased, &dead) {
        body["priorty"] = json!(0);
        let answer = app.post(url.clone(), body).await;
        assert_invalid_field(&answer, "priorty");
    }
    // Inside a list, the entry's index is named.
    let batch = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "a"}, {"task": "b", "delay": 5000}]}),
        )
        .await;
    assert_invalid_field(&batch, "jobs[1].delay");
    let many = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id_of(&leased), "lease_token": leased["lease_token"], "token": "x"}]}),
        )
        .await;
    assert_invalid_field(&many, "jobs[0].token");
    assert_eq!(app.snapshot().await, before, "a refused body changed Redis");
}

#[tokio::test]
async fn openapi_declares_every_request_body_closed() {
    let app = spawn_app().await;
    let document = app.get(app.url("/openapi.json")).await.body;
    let schemas = document["components"]["schemas"]
        .as_object()
        .expect("schemas");
    for name in [
        "EnqueueRequest",
        "EnqueueBatchRequest",
        "ClaimRequest",
        "AckRequest",
        "AckManyRequest",
        "AckEntry",
        "ExtendRequest",
        "NackRequest",
        "RequeueRequest",
    ] {
        assert_eq!(
            schemas[name]["additionalProperties"],
            json!(false),
            "{name} is not closed"
        );
    }
}
