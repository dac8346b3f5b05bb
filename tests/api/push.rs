//! Push delivery: prioq POSTs a queue's jobs to an HTTP endpoint started
//! by the test (`support::receiver`), signed, acks on 2xx, nacks on the
//! rest (429 and 503 by their `Retry-After`), extends the lease while the
//! request runs, holds the target's concurrency across instances, and a
//! delivery held by an instance killed with SIGKILL is delivered again.

use std::time::Duration;

use hmac::{Hmac, Mac};
use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::support::app::configure;
use crate::support::receiver::{Receiver, Reply};
use crate::support::redis_server::shared_redis;
use crate::support::{Answer, Service, TestApp, spawn_app, spawn_app_with, test_config, until};

const SECRET: &str = "a-secret-of-the-test-0123456789";

async fn put_push(app: &TestApp, queue: &str, body: Value) -> Answer {
    app.send(app.http.put(app.queue_url(queue, "/push")).json(&body))
        .await
}

/// Sets `queue`'s target, asserting it was taken.
async fn push_to(app: &TestApp, queue: &str, body: Value) -> Value {
    let answer = put_push(app, queue, body).await;
    assert!(answer.status.is_success(), "{answer:?}");
    answer.body
}

async fn health(app: &TestApp, queue: &str) -> Value {
    let answer = app.get(app.queue_url(queue, "/push")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.body["health"].clone()
}

/// Waits until the target's health satisfies `holds`, failing after 10 s.
async fn until_health(app: &TestApp, queue: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let health = health(app, queue).await;
        if holds(&health) {
            return health;
        }
        assert!(tokio::time::Instant::now() < deadline, "health: {health}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_pushed_job_is_signed_acked_and_its_answer_kept() {
    check_signed_and_acked(test_config()).await;
}

pub(crate) async fn check_signed_and_acked(config: Config) {
    let receiver = Receiver::start([], Reply::ok(r#"{"sent": true}"#)).await;
    let app = spawn_app_with(config).await;
    let set = put_push(
        &app,
        "mail",
        json!({"url": receiver.url, "secret": SECRET, "concurrency": 2}),
    )
    .await;
    assert_eq!(set.status, StatusCode::CREATED, "{set:?}");
    assert_eq!(set.body["secret"], SECRET);
    let job = app
        .enqueue(
            "mail",
            json!({"id": "m-1", "task": "send", "args": {"to": "a@example.com"}, "retain_ms": 60000}),
        )
        .await;
    assert_eq!(job["id"], "m-1");

    let pushed = receiver.until_received(1, Duration::from_secs(10)).await;
    let pushed = &pushed[0];
    // The signature: HMAC-SHA256 of "<t>.<body>" under the secret.
    let signature = pushed.header("prioq-signature");
    let (t, v1) = signature
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
        .unwrap_or_else(|| panic!("signature shape: {signature}"));
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("key");
    mac.update(format!("{t}.").as_bytes());
    mac.update(&pushed.body);
    let expected: String = (mac.finalize().into_bytes().iter())
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v1, expected);
    let sent_at: i64 = t.parse().expect("seconds");
    assert!((sent_at - crate::support::clock::now_ms() / 1000).abs() <= 5);

    let body = &pushed.json;
    assert_eq!(body["queue"], "mail");
    assert_eq!(body["job"]["id"], "m-1");
    assert_eq!(body["job"]["args"], json!({"to": "a@example.com"}));
    assert_eq!(body["job"]["state"], "processing");
    assert_eq!(body["lease_token"], body["job"]["lease_token"]);
    assert_eq!(body["fence"], body["job"]["fence"]);
    assert!(body["fence"].as_u64().is_some(), "{body}");
    assert_eq!(pushed.header("prioq-fence"), body["fence"].to_string());
    assert_eq!(pushed.header("prioq-job-id"), "m-1");
    assert_eq!(pushed.header("prioq-queue"), "mail");
    assert_eq!(pushed.header("prioq-attempt"), "1");

    let done = app
        .wait_for_job("mail", "m-1", Duration::from_secs(10), |job| {
            job["state"] == "completed"
        })
        .await;
    assert_eq!(done["result"], json!({"sent": true}));
    assert_eq!(done["attempts"], 0);
    let health = until_health(&app, "mail", |h| h["in_flight"] == 0).await;
    assert_eq!(health["delivered"], 1, "{health}");
    assert_eq!(health["failed"], 0, "{health}");
    assert_eq!(health["last_status"], 200, "{health}");
    assert_eq!(health["consecutive_failures"], 0, "{health}");
    assert!(health["last_success_at"].is_string(), "{health}");

    // The queue's view shows the target, without its secret.
    let view = app.stats("mail").await;
    assert_eq!(view["push"]["url"], json!(receiver.url));
    assert_eq!(view["push"]["concurrency"], 2);
    assert!(view["push"].get("secret").is_none(), "{view}");
    let metrics = app.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("prioq_push_deliveries_total")
                && line.contains("outcome=\"delivered\"")
                && line.contains("queue=\"mail\"")
                && line.ends_with(" 1")),
        "{metrics}"
    );
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn answers_429_and_503_wait_their_retry_after() {
    let receiver = Receiver::start(
        [
            Reply::status(429, "slow down").retry_after("1"),
            Reply::status(503, "busy").retry_after("1"),
        ],
        Reply::ok("{}"),
    )
    .await;
    let app = spawn_app().await;
    app.enqueue(
        "busy",
        json!({"id": "b-1", "task": "t", "retain_ms": 60000}),
    )
    .await;
    push_to(&app, "busy", json!({"url": receiver.url})).await;

    let pushed = receiver.until_received(3, Duration::from_secs(15)).await;
    for pair in pushed.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(900),
            "a retry came {gap:?} after a Retry-After of 1 s"
        );
    }
    let done = app
        .wait_for_job("busy", "b-1", Duration::from_secs(10), |job| {
            job["state"] == "completed"
        })
        .await;
    // Each refused delivery counted as an attempt, with its error.
    assert_eq!(done["attempts"], 2, "{done}");
    assert_eq!(pushed[2].header("prioq-attempt"), "3");
    let fences: Vec<u64> = (pushed.iter())
        .map(|p| p.json["fence"].as_u64().expect("fence"))
        .collect();
    assert!(fences.windows(2).all(|f| f[0] < f[1]), "{fences:?}");
    let health = until_health(&app, "busy", |h| h["delivered"] == 1).await;
    assert_eq!(health["failed"], 2, "{health}");
    assert!(
        health["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("HTTP 503: busy")),
        "{health}"
    );
}

#[tokio::test]
async fn a_failing_endpoint_dead_letters_the_job_after_its_attempts() {
    let receiver = Receiver::start([], Reply::status(500, "boom")).await;
    let app = spawn_app().await;
    app.enqueue("fail", json!({"id": "f-1", "task": "t", "max_attempts": 2}))
        .await;
    push_to(&app, "fail", json!({"url": receiver.url})).await;
    let dead = app
        .wait_for_job("fail", "f-1", Duration::from_secs(15), |job| {
            job["state"] == "dead"
        })
        .await;
    assert_eq!(dead["last_error"], "push: HTTP 500: boom");
    let health = until_health(&app, "fail", |h| h["failed"] == 2).await;
    assert_eq!(health["consecutive_failures"], 2, "{health}");
    assert_eq!(health["last_status"], 500, "{health}");
    assert_eq!(health["delivered"], 0, "{health}");
    assert_eq!(receiver.received().len(), 2);
}

#[tokio::test]
async fn a_hanging_endpoint_times_out_and_the_job_is_pushed_again() {
    let receiver = Receiver::start([Reply::hang()], Reply::ok("{}")).await;
    let app = spawn_app().await;
    app.enqueue(
        "hang",
        json!({"id": "h-1", "task": "t", "retain_ms": 60000}),
    )
    .await;
    push_to(
        &app,
        "hang",
        json!({"url": receiver.url, "timeout_ms": 500}),
    )
    .await;
    let done = app
        .wait_for_job("hang", "h-1", Duration::from_secs(15), |job| {
            job["state"] == "completed"
        })
        .await;
    assert_eq!(done["attempts"], 1, "{done}");
    assert_eq!(receiver.received().len(), 2);
    let health = until_health(&app, "hang", |h| h["delivered"] == 1).await;
    assert_eq!(health["failed"], 1, "{health}");
    assert_eq!(health["last_error"], "push: no answer within 500 ms");
}

/// A request that runs longer than the lease: the pusher extends the
/// lease while it runs, so the sweeper never takes the job back (without
/// the extends it would at 1 s, and the job would be pushed twice).
#[tokio::test]
async fn a_slow_answer_keeps_its_lease_by_extending_it() {
    let receiver = Receiver::start([], Reply::ok("{}").after(Duration::from_millis(2500))).await;
    let app = spawn_app().await;
    app.enqueue(
        "slow",
        json!({"id": "s-1", "task": "t", "retain_ms": 60000}),
    )
    .await;
    push_to(
        &app,
        "slow",
        json!({"url": receiver.url, "lease_ms": 1000, "timeout_ms": 10000}),
    )
    .await;
    receiver.until_received(1, Duration::from_secs(10)).await;
    until_health(&app, "slow", |h| h["in_flight"] == 1).await;
    let done = app
        .wait_for_job("slow", "s-1", Duration::from_secs(15), |job| {
            job["state"] == "completed"
        })
        .await;
    assert_eq!(done["attempts"], 0, "{done}");
    assert_eq!(receiver.received().len(), 1);
    // The slots the pusher holds while it waits for the next job are not
    // deliveries under way.
    let health = until_health(&app, "slow", |h| h["delivered"] == 1).await;
    assert_eq!(health["stale"], 0, "{health}");
    assert_eq!(health["in_flight"], 0, "{health}");
}

/// Two instances share a target of concurrency 2: never more than two
/// requests at once, though each instance alone would send two (four
/// together, were the limit kept per instance).
#[tokio::test]
async fn the_concurrency_holds_across_instances() {
    check_concurrency_across_instances(test_config()).await;
}

pub(crate) async fn check_concurrency_across_instances(config: Config) {
    const JOBS: usize = 20;
    let receiver = Receiver::start([], Reply::ok("{}").after(Duration::from_millis(300))).await;
    let first = spawn_app_with(config.clone()).await;
    let second = spawn_app_with(config).await;
    let jobs: Vec<Value> = (0..JOBS)
        .map(|n| json!({"id": format!("c-{n}"), "task": "t"}))
        .collect();
    let answer = first
        .post(
            first.queue_url("shared", "/jobs/batch"),
            json!({"jobs": jobs}),
        )
        .await;
    assert!(answer.status.is_success(), "{answer:?}");
    // Set through each, so both start at once.
    for app in [&first, &second] {
        push_to(
            app,
            "shared",
            json!({"url": receiver.url, "concurrency": 2}),
        )
        .await;
    }
    receiver.until_received(JOBS, Duration::from_secs(30)).await;
    until(Duration::from_secs(10), "every job acked", || async {
        let view = second.stats("shared").await;
        view["pending"] == 0 && view["processing"] == 0
    })
    .await;
    assert_eq!(receiver.most_held(), 2);
}

/// The instance delivering a job is killed with SIGKILL mid-request: its
/// lease runs out, the job is taken back and another instance pushes it
/// again, with a larger fence; it completes once.
#[tokio::test]
async fn a_push_held_by_a_killed_instance_is_pushed_again() {
    let receiver = Receiver::start([Reply::hang()], Reply::ok("{}")).await;
    let mut config = test_config();
    let redis = shared_redis().url();
    let killed = Service::start_with(
        &redis,
        &config.key_prefix,
        &[("PRIOQ_SWEEP_INTERVAL_MS", "3600000")],
    )
    .await;
    let http = reqwest::Client::new();
    let put = http
        .put(format!("{}/v1/queues/kill/push", killed.base))
        .json(&json!({"url": receiver.url, "lease_ms": 1000, "timeout_ms": 60000}))
        .send()
        .await
        .expect("answered");
    assert_eq!(put.status(), StatusCode::CREATED);
    let enqueued = http
        .post(format!("{}/v1/queues/kill/jobs", killed.base))
        .json(&json!({"id": "k-1", "task": "t", "retain_ms": 60000}))
        .send()
        .await
        .expect("answered");
    assert_eq!(enqueued.status(), StatusCode::CREATED);
    let first = receiver.until_received(1, Duration::from_secs(10)).await;
    drop(killed);

    config.sweep_interval_ms = 50;
    let app = spawn_app_with(config).await;
    let pushed = receiver.until_received(2, Duration::from_secs(20)).await;
    let done = app
        .wait_for_job("kill", "k-1", Duration::from_secs(10), |job| {
            job["state"] == "completed"
        })
        .await;
    assert_eq!(done["attempts"], 1, "the lost lease counts: {done}");
    let fence = |n: usize| pushed[n].json["fence"].as_u64().expect("fence");
    assert!(fence(1) > first[0].json["fence"].as_u64().expect("fence"));
    assert_ne!(
        pushed[0].json["job"]["worker"],
        pushed[1].json["job"]["worker"]
    );
    assert_eq!(receiver.received().len(), 2);
}

#[tokio::test]
async fn a_sharded_queue_pushes_from_every_shard() {
    check_sharded_push(test_config()).await;
}

pub(crate) async fn check_sharded_push(config: Config) {
    const JOBS: usize = 12;
    let receiver = Receiver::start([], Reply::ok("{}")).await;
    let app = spawn_app_with(config).await;
    configure(&app, "wide", json!({"shards": 3})).await;
    for n in 0..JOBS {
        app.enqueue("wide", json!({"id": format!("w-{n}"), "task": "t"}))
            .await;
    }
    push_to(&app, "wide", json!({"url": receiver.url, "concurrency": 4})).await;
    let pushed = receiver.until_received(JOBS, Duration::from_secs(20)).await;
    let mut ids: Vec<String> = (pushed.iter())
        .map(|r| r.json["job"]["id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), JOBS);
    until(Duration::from_secs(10), "every job acked", || async {
        let view = app.stats("wide").await;
        view["pending"] == 0 && view["processing"] == 0
    })
    .await;
}

#[tokio::test]
async fn a_target_is_checked_and_a_refusal_changes_nothing() {
    let app = spawn_app().await;
    let refused = [
        (json!({"url": "ftp://example.com/x"}), "url"),
        (json!({"url": "not a url"}), "url"),
        (
            json!({"url": "http://example.com", "concurrency": 0}),
            "concurrency",
        ),
        (
            json!({"url": "http://example.com", "timeout_ms": 50}),
            "timeout_ms",
        ),
        (
            json!({"url": "http://example.com", "lease_ms": 10}),
            "lease_ms",
        ),
        (
            json!({"url": "http://example.com", "secret": "short"}),
            "secret",
        ),
        (json!({"url": 5}), "url"),
    ];
    for (body, field) in refused {
        let answer = put_push(&app, "checked", body.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {answer:?}"
        );
        assert_eq!(answer.problem_code(), "validation_failed");
        assert!(
            answer.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains(field)),
            "{body}: {answer:?}"
        );
    }
    let unknown = put_push(
        &app,
        "checked",
        json!({"url": "http://example.com", "retries": 3}),
    )
    .await;
    assert_eq!(
        unknown.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{unknown:?}"
    );
    let none = app.get(app.queue_url("checked", "/push")).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    assert_eq!(none.problem_code(), "not_found");
    assert_eq!(app.stats("checked").await["push"], Value::Null);

    // A new target gets a secret; a replacement without one keeps it.
    let set = push_to(&app, "checked", json!({"url": "http://127.0.0.1:9/jobs"})).await;
    let secret = set["secret"].as_str().expect("secret").to_owned();
    assert_eq!(secret.len(), 32);
    let replaced = put_push(
        &app,
        "checked",
        json!({"url": "http://127.0.0.1:9/x", "concurrency": 3}),
    )
    .await;
    assert_eq!(replaced.status, StatusCode::OK, "{replaced:?}");
    assert_eq!(replaced.body["secret"], json!(secret));
    assert_eq!(replaced.body["concurrency"], 3);
    assert_eq!(replaced.body["lease_ms"], 30000);
    let read = app.get(app.queue_url("checked", "/push")).await;
    assert_eq!(read.body["url"], "http://127.0.0.1:9/x");
    assert!(read.body.get("secret").is_none(), "{read:?}");

    let delete = || app.send(app.http.delete(app.queue_url("checked", "/push")));
    assert_eq!(delete().await.status, StatusCode::NO_CONTENT);
    let again = delete().await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(again.problem_code(), "not_found");

    // Deleting the queue deletes its target.
    push_to(&app, "checked", json!({"url": "http://127.0.0.1:9/jobs"})).await;
    let gone = app
        .send(app.http.delete(app.queue_url("checked", "?purge=true")))
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT, "{gone:?}");
    let read = app.get(app.queue_url("checked", "/push")).await;
    assert_eq!(read.status, StatusCode::NOT_FOUND);
}
