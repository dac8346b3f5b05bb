//! Completion: a job acked with retention is kept `completed` with its
//! result for its window, which doubles as deduplication and makes a
//! repeated ack safe; reads wait for a job to end, woken from any
//! instance; workers report progress with extend.

use std::time::{Duration, Instant};

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    RedisServer, TempDir, TestApp, free_port, redis, redis_connection, spawn_app_with, test_config,
    until,
};

/// Enqueues `body` on `queue` and leases that job with `app`.
async fn enqueue_and_claim(app: &TestApp, queue: &str, body: Value) -> Value {
    app.enqueue(queue, body).await;
    app.claim_one(queue).await.expect("the job")
}

/// Acks `job` with `result` (none when `Value::Null`).
async fn ack_with(
    app: &TestApp,
    queue: &str,
    job: &Value,
    result: Value,
) -> crate::support::Answer {
    let id = job["id"].as_str().expect("id");
    let mut body = json!({"lease_token": job["lease_token"]});
    if !result.is_null() {
        body["result"] = result;
    }
    app.post(app.queue_url(queue, &format!("/jobs/{id}/ack")), body)
        .await
}

/// A GET of job `id` with `wait_ms`.
async fn wait(app: &TestApp, queue: &str, id: &str, wait_ms: u64) -> crate::support::Answer {
    app.get(app.queue_url(queue, &format!("/jobs/{id}?wait_ms={wait_ms}")))
        .await
}

/// The rules of retention, on queue `kept`; answers the instance.
pub(crate) async fn check_retention(config: Config) -> TestApp {
    let app = spawn_app_with(config).await;
    let q = "kept";
    let job = enqueue_and_claim(
        &app,
        q,
        json!({"task": "t", "id": "r-1", "retain_ms": 2000}),
    )
    .await;
    let acked = ack_with(&app, q, &job, json!({"sent": 3, "to": ["a", "b"]})).await;
    assert_eq!(acked.status, StatusCode::NO_CONTENT, "{acked:?}");

    let done = app.job(q, "r-1").await;
    assert_eq!(done.status, StatusCode::OK);
    assert_eq!(done.body["state"], "completed", "{done:?}");
    assert_eq!(done.body["result"], json!({"sent": 3, "to": ["a", "b"]}));
    assert!(done.body["completed_at"].is_string(), "{done:?}");
    assert_eq!(
        (&done.body["lease_token"], &done.body["progress"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(app.stats(q).await["completed"], 1);
    assert!(
        app.metrics()
            .await
            .lines()
            .any(|line| line.starts_with("prioq_jobs_completed{queue=\"kept\"} 1")),
        "the gauge counts it"
    );

    // The ack whose answer was lost can be sent again; another token cannot.
    assert_eq!(
        ack_with(&app, q, &job, Value::Null).await.status,
        StatusCode::NO_CONTENT
    );
    let stale = app
        .post(
            app.queue_url(q, "/jobs/r-1/ack"),
            json!({"lease_token": "not-the-one"}),
        )
        .await;
    assert_eq!(
        (stale.status, stale.problem_code()),
        (StatusCode::CONFLICT, "lease_lost")
    );
    // Nor can it be nacked or extended any more.
    let nacked = app
        .post(
            app.queue_url(q, "/jobs/r-1/nack"),
            json!({"lease_token": job["lease_token"]}),
        )
        .await;
    assert_eq!(nacked.status, StatusCode::CONFLICT, "{nacked:?}");
    // The window deduplicates enqueues.
    let again = app
        .post(
            app.queue_url(q, "/jobs"),
            json!({"task": "other", "id": "r-1"}),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert_eq!(
        (
            &again.body["created"],
            &again.body["state"],
            &again.body["task"]
        ),
        (&json!(false), &json!("completed"), &json!("t"))
    );

    // After the window the job and its id are gone.
    until(Duration::from_secs(10), "the retention ends", || async {
        app.job(q, "r-1").await.status == StatusCode::NOT_FOUND
    })
    .await;
    assert_eq!(
        ack_with(&app, q, &job, Value::Null).await.status,
        StatusCode::NOT_FOUND
    );
    let fresh = app
        .post(
            app.queue_url(q, "/jobs"),
            json!({"task": "new", "id": "r-1"}),
        )
        .await;
    assert_eq!(fresh.status, StatusCode::CREATED, "{fresh:?}");
    assert_eq!(app.stats(q).await["completed"], 0);
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_with_retention_is_completed_with_its_result_until_the_window_ends() {
    let app = check_retention(test_config()).await;
    // Nothing of the completed job is left behind.
    let keys = QueueKeys::new(&app.config.key_prefix, "kept");
    let mut conn = redis_connection(&app.config.redis_url).await;
    let (completed, results, leases): (Option<f64>, bool, bool) = redis::pipe()
        .cmd("ZSCORE")
        .arg(keys.key(Key::Completed))
        .arg("r-1")
        .cmd("HEXISTS")
        .arg(keys.key(Key::Results))
        .arg("r-1")
        .cmd("HEXISTS")
        .arg(keys.key(Key::Leases))
        .arg("r-1")
        .query_async(&mut conn)
        .await
        .expect("looked up");
    assert_eq!((completed, results, leases), (None, false, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_retention_the_ack_deletes_and_the_result_is_dropped() {
    let app = spawn_app_with(test_config()).await;
    let q = "plain";
    let job = enqueue_and_claim(&app, q, json!({"task": "t", "id": "p-1"})).await;
    assert_eq!(
        ack_with(&app, q, &job, json!("ignored")).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.job(q, "p-1").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        ack_with(&app, q, &job, Value::Null).await.status,
        StatusCode::NOT_FOUND
    );
    let snapshot = app.snapshot().await;
    assert!(
        snapshot
            .keys()
            .all(|key| !key.ends_with(":results") && !key.ends_with(":completed")),
        "{snapshot:?}"
    );

    // The queue's setting is the default for jobs enqueued later; a job's
    // own retain_ms wins.
    let patched = app
        .send(
            app.http
                .patch(app.queue_url(q, "/settings"))
                .json(&json!({"retain_ms": 60_000})),
        )
        .await;
    assert_eq!(patched.body["retain_ms"], 60_000, "{patched:?}");
    let kept = enqueue_and_claim(&app, q, json!({"task": "t", "id": "p-2"})).await;
    ack_with(&app, q, &kept, json!(1)).await;
    assert_eq!(app.job(q, "p-2").await.body["state"], "completed");
    let own = enqueue_and_claim(&app, q, json!({"task": "t", "id": "p-3", "retain_ms": 0})).await;
    ack_with(&app, q, &own, json!(1)).await;
    assert_eq!(app.job(q, "p-3").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_in_a_claim_and_in_ack_many_carry_their_results() {
    let app = spawn_app_with(test_config()).await;
    let q = "many";
    let jobs: Vec<Value> = (0..3)
        .map(|n| json!({"task": "t", "id": format!("m-{n}"), "retain_ms": 60_000}))
        .collect();
    app.post(app.queue_url(q, "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    let leased = app.claim(q, json!({"max_jobs": 3})).await;
    let entry = |job: &Value, result: Value| json!({"id": job["id"], "lease_token": job["lease_token"], "result": result});
    let many = app
        .post(
            app.queue_url(q, "/ack"),
            json!({"jobs": [entry(&leased[0], json!("zero")), entry(&leased[1], json!({"n": 1}))]}),
        )
        .await;
    assert_eq!(
        many.body["results"],
        json!([{"id": "m-0", "status": 204}, {"id": "m-1", "status": 204}])
    );
    let claimed = app
        .post(
            app.queue_url(q, "/claim"),
            json!({"ack": [entry(&leased[2], json!([2])), entry(&leased[0], Value::Null)]}),
        )
        .await;
    // The second entry repeats m-0's ack with its token: 204 again.
    assert_eq!(
        claimed.body["acked"],
        json!([{"id": "m-2", "status": 204}, {"id": "m-0", "status": 204}])
    );
    for (id, result) in [
        ("m-0", json!("zero")),
        ("m-1", json!({"n": 1})),
        ("m-2", json!([2])),
    ] {
        let job = app.job(q, id).await.body;
        assert_eq!(
            (&job["state"], &job["result"]),
            (&json!("completed"), &result)
        );
    }
}

/// A read waiting on instance `a` hears the ack on instance `b`.
pub(crate) async fn check_wait_woken_across_instances(config: Config) {
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    let q = "waited";
    let job = enqueue_and_claim(
        &b,
        q,
        json!({"task": "t", "id": "w-1", "retain_ms": 60_000}),
    )
    .await;
    let waiter = {
        let url = a.queue_url(q, "/jobs/w-1?wait_ms=15000");
        let http = a.http.clone();
        tokio::spawn(async move {
            let answer = http.get(url).send().await.expect("answered");
            let status = answer.status();
            (
                status,
                answer.json::<Value>().await.expect("json"),
                Instant::now(),
            )
        })
    };
    a.until_gauge("prioq_job_waits", 1).await;
    let acked_at = Instant::now();
    assert_eq!(
        ack_with(&b, q, &job, json!({"answer": 42})).await.status,
        StatusCode::NO_CONTENT
    );
    let (status, body, answered_at) = waiter.await.expect("joins");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (&body["state"], &body["result"]),
        (&json!("completed"), &json!({"answer": 42}))
    );
    // Woken, not found by the recheck (every 5 s).
    let after = answered_at.duration_since(acked_at);
    assert!(
        after < Duration::from_secs(2),
        "answered {after:?} after the ack"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_on_one_instance_is_answered_when_another_acks() {
    check_wait_woken_across_instances(test_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_answers_at_once_for_an_ended_job_and_with_the_view_when_it_is_over() {
    let app = spawn_app_with(test_config()).await;
    let q = "ends";
    let job = enqueue_and_claim(
        &app,
        q,
        json!({"task": "t", "id": "e-1", "retain_ms": 60_000}),
    )
    .await;
    ack_with(&app, q, &job, json!(true)).await;
    let started = Instant::now();
    let done = wait(&app, q, "e-1", 15_000).await;
    assert_eq!(done.body["state"], "completed");
    assert!(started.elapsed() < Duration::from_secs(5), "not held");

    app.enqueue(q, json!({"task": "t", "id": "e-2"})).await;
    let started = Instant::now();
    let pending = wait(&app, q, "e-2", 300).await;
    assert_eq!(pending.body["state"], "pending");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "waited it out"
    );

    assert_eq!(
        wait(&app, q, "nobody", 100).await.status,
        StatusCode::NOT_FOUND
    );
    for bad in ["20001", "-1", "soon"] {
        let answer = app
            .get(app.queue_url(q, &format!("/jobs/e-2?wait_ms={bad}")))
            .await;
        assert_eq!(
            (answer.status, answer.problem_code()),
            (StatusCode::BAD_REQUEST, "invalid_request"),
            "{bad}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_hears_a_dead_letter_and_a_plain_ack_ends_it_with_404() {
    let app = spawn_app_with(test_config()).await;
    let q = "ending";
    for (id, body) in [
        ("d-1", json!({"task": "t", "id": "d-1", "max_attempts": 1})),
        ("d-2", json!({"task": "t", "id": "d-2"})),
    ] {
        let job = enqueue_and_claim(&app, q, body).await;
        let waiter = {
            let url = app.queue_url(q, &format!("/jobs/{id}?wait_ms=15000"));
            let http = app.http.clone();
            tokio::spawn(async move {
                let answer = http.get(url).send().await.expect("answered");
                let status = answer.status();
                (status, answer.json::<Value>().await.expect("json"))
            })
        };
        app.until_gauge("prioq_job_waits", 1).await;
        let ended_at = Instant::now();
        let path = if id == "d-1" { "nack" } else { "ack" };
        let ended = app
            .post(
                app.queue_url(q, &format!("/jobs/{id}/{path}")),
                json!({"lease_token": job["lease_token"]}),
            )
            .await;
        assert!(ended.status.is_success(), "{ended:?}");
        let (status, body) = waiter.await.expect("joins");
        if id == "d-1" {
            assert_eq!((status, &body["state"]), (StatusCode::OK, &json!("dead")));
        } else {
            assert_eq!(
                (status, &body["code"]),
                (StatusCode::NOT_FOUND, &json!("not_found"))
            );
        }
        assert!(ended_at.elapsed() < Duration::from_secs(2), "woken");
        app.until_gauge_below("prioq_job_waits", 1).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reported_with_extend_shows_until_the_job_ends() {
    let app = spawn_app_with(test_config()).await;
    let q = "progress";
    let job = enqueue_and_claim(
        &app,
        q,
        json!({"task": "t", "id": "g-1", "retain_ms": 60_000}),
    )
    .await;
    let app = &app;
    let extend =
        |body: Value| async move { app.post(app.queue_url(q, "/jobs/g-1/extend"), body).await };
    let token = job["lease_token"].clone();
    let first = extend(json!({"lease_token": token, "progress": {"done": 1, "of": 3}})).await;
    assert_eq!(
        first.body["progress"],
        json!({"done": 1, "of": 3}),
        "{first:?}"
    );
    extend(json!({"lease_token": token, "progress": "two of three"})).await;
    // An extend without progress keeps the last report.
    let kept = extend(json!({"lease_token": token})).await;
    assert_eq!(kept.body["progress"], "two of three");
    assert_eq!(app.job(q, "g-1").await.body["progress"], "two of three");
    // A retry keeps it; the job's end drops it.
    let nacked = app
        .post(
            app.queue_url(q, "/jobs/g-1/nack"),
            json!({"lease_token": token}),
        )
        .await;
    assert_eq!(nacked.body["progress"], "two of three");
    let again = app.claim_one(q).await.expect("the job again");
    ack_with(app, q, &again, json!("done")).await;
    let done = app.job(q, "g-1").await.body;
    assert_eq!(
        (&done["state"], &done["progress"]),
        (&json!("completed"), &Value::Null)
    );
    let keys = QueueKeys::new(&app.config.key_prefix, q);
    let mut conn = redis_connection(&app.config.redis_url).await;
    let (left, counted): (u64, Option<u64>) = redis::pipe()
        .cmd("HLEN")
        .arg(keys.key(Key::Progress))
        .cmd("HGET")
        .arg(keys.key(Key::Meta))
        .arg("progress")
        .query_async(&mut conn)
        .await
        .expect("read");
    assert_eq!((left, counted.unwrap_or(0)), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_results_progress_and_retention_are_refused_and_change_nothing() {
    let app = spawn_app_with(test_config()).await;
    let q = "limits";
    let job = enqueue_and_claim(
        &app,
        q,
        json!({"task": "t", "id": "l-1", "retain_ms": 60_000}),
    )
    .await;
    let token = job["lease_token"].clone();
    let big = |bytes: usize| Value::String("x".repeat(bytes));
    let before = app.snapshot().await;
    let cases = [
        (
            "/jobs/l-1/ack",
            json!({"lease_token": token, "result": big(64 * 1024)}),
            "result",
        ),
        (
            "/ack",
            json!({"jobs": [{"id": "l-1", "lease_token": token, "result": 1}, {"id": "l-1", "lease_token": token, "result": big(70_000)}]}),
            "jobs[1].result",
        ),
        (
            "/claim",
            json!({"ack": [{"id": "l-1", "lease_token": token, "result": big(65_536)}]}),
            "ack[0].result",
        ),
        (
            "/jobs/l-1/extend",
            json!({"lease_token": token, "progress": big(4096)}),
            "progress",
        ),
        (
            "/jobs",
            json!({"task": "t", "retain_ms": 2_592_000_001_u64}),
            "retain_ms",
        ),
        (
            "/jobs/batch",
            json!({"jobs": [{"task": "t"}, {"task": "t", "retain_ms": 2_592_000_001_u64}]}),
            "jobs[1].retain_ms",
        ),
    ];
    for (path, body, field) in cases {
        let answer = app.post(app.queue_url(q, path), body).await;
        assert_eq!(
            (
                answer.status,
                answer.problem_code(),
                answer.body["field"].as_str()
            ),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                Some(field)
            ),
            "{path}: {answer:?}"
        );
    }
    let settings = app
        .send(
            app.http
                .patch(app.queue_url(q, "/settings"))
                .json(&json!({"retain_ms": 2_592_000_001_u64})),
        )
        .await;
    assert_eq!(settings.body["field"], "retain_ms", "{settings:?}");
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused request changed Redis"
    );
    // Just within the limits.
    let ok = ack_with(&app, q, &job, big(64 * 1024 - 2)).await;
    assert_eq!(ok.status, StatusCode::NO_CONTENT, "{ok:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_job_can_be_deleted() {
    let app = spawn_app_with(test_config()).await;
    let q = "deleted";
    let job = enqueue_and_claim(
        &app,
        q,
        json!({"task": "t", "id": "x-1", "retain_ms": 60_000}),
    )
    .await;
    ack_with(&app, q, &job, json!(1)).await;
    let deleted = app
        .send(app.http.delete(app.queue_url(q, "/jobs/x-1")))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(app.job(q, "x-1").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        ack_with(&app, q, &job, Value::Null).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.stats(q).await["completed"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_jobs_and_their_results_survive_a_redis_restart() {
    let dir = TempDir::new("completion");
    let port = free_port();
    let server = RedisServer::start_on(port, &dir.path);
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    let q = "durable";
    let job = enqueue_and_claim(
        &app,
        q,
        json!({"task": "t", "id": "k-1", "retain_ms": 600_000}),
    )
    .await;
    ack_with(&app, q, &job, json!({"kept": "through a restart"})).await;
    drop(server);
    let _server = RedisServer::start_on(port, &dir.path);
    // Each pooled connection fails once on its first use after the
    // restart (503) and then reconnects: wait until a round of them works.
    let pool = app.config.redis_pool_size;
    until(Duration::from_secs(15), "Redis is back", || async {
        for _ in 0..pool {
            if app.job(q, "k-1").await.status != StatusCode::OK {
                return false;
            }
        }
        true
    })
    .await;
    let kept = app.job(q, "k-1").await.body;
    assert_eq!(
        (&kept["state"], &kept["result"]),
        (&json!("completed"), &json!({"kept": "through a restart"}))
    );
    // The token that completed it is remembered too.
    assert_eq!(
        ack_with(&app, q, &job, Value::Null).await.status,
        StatusCode::NO_CONTENT
    );
}

/// A job's record holds its last error before its group and its retention
/// after it; the claims and acks that read the group (its count in
/// flight) and the retention from the record's header find both behind
/// an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_job_that_failed_once_keeps_its_group_and_retention_to_its_end() {
    let app = spawn_app_with(test_config()).await;
    let q = "grouped-kept";
    let body = json!({"task": "t", "id": "gk-1", "group": "tenant-7", "retain_ms": 60_000});
    let first = enqueue_and_claim(&app, q, body).await;
    let nack = json!({"lease_token": first["lease_token"], "error": "the first try failed"});
    let nacked = app.post(app.queue_url(q, "/jobs/gk-1/nack"), nack).await;
    assert_eq!(nacked.status, StatusCode::OK, "{nacked:?}");
    let again = app.claim_one(q).await.expect("the job again");
    assert_eq!(again["id"], "gk-1");
    let groups = app.get(app.queue_url(q, "/groups")).await.body;
    assert_eq!(
        groups["groups"],
        json!([{"group": "tenant-7", "pending": 0, "processing": 1, "weight": 1}]),
        "{groups}"
    );
    let acked = ack_with(&app, q, &again, json!("done")).await;
    assert_eq!(acked.status, StatusCode::NO_CONTENT, "{acked:?}");
    let done = app.job(q, "gk-1").await.body;
    assert_eq!(
        (
            &done["state"],
            &done["group"],
            &done["last_error"],
            &done["result"]
        ),
        (
            &json!("completed"),
            &json!("tenant-7"),
            &json!("the first try failed"),
            &json!("done")
        ),
        "{done}"
    );
    let groups = app.get(app.queue_url(q, "/groups")).await.body;
    assert_eq!(groups["groups"], json!([]), "{groups}");
}
