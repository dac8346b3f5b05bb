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

use crate::support::clock::ms_of;
use crate::support::{Answer, TestApp, spawn_app, spawn_app_with, test_config};

mod ack;
mod ack_many;
mod auth;
mod claim;
mod content_types;
mod dlq;
mod enqueue;
mod enqueue_many;
mod extend;
mod job;
mod nack;
mod operations;
mod queues;
mod rejected;
mod run_at;

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

/// Test settings with these API tokens, parsed as the `--api-tokens` flag is.
fn with_tokens(tokens: &str) -> Config {
    let mut config = test_config();
    config.api_tokens = Config::parse_from(["prioq", "--api-tokens", tokens]).api_tokens;
    config
}
