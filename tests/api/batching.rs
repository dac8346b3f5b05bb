//! Group commit: enqueues, claims and acks on one queue that arrive while a
//! call is in flight go to Redis together, each answered as it would have
//! been alone. Each test holds the first call inside a private Redis
//! (`CLIENT PAUSE WRITE`), lets the others queue up behind it, and counts
//! the function calls Redis ran once it resumes.

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::redis_server::{blocked_clients, command_calls, pause_clients};
use crate::support::{
    RedisServer, TestApp, redis, redis_connection, script_calls, spawn_app_with, test_config, until,
};

/// Requests queued behind the held call in each test.
const QUEUED: usize = 40;

/// An instance on a Redis of its own, so that its function calls can be
/// counted, with a long Redis timeout: the held call must outlast the
/// queueing.
async fn private_app() -> (RedisServer, TestApp) {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    config.redis_timeout_ms = 20_000;
    // No sweeper calls in the counts: its first pass starts at once, and
    // is over when it has listed the queues (there are none yet); the next
    // is an hour away. On a busy machine that first pass could otherwise
    // come late, into a test, and sweep the test's queue.
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    let conn = redis_connection(&server.url()).await;
    until(
        Duration::from_secs(10),
        "the sweeper's first pass lists the queues",
        || async { command_calls(&mut conn.clone(), &["smembers"]).await >= 1 },
    )
    .await;
    (server, app)
}

/// The instance's `prioq_requests_waiting` for `queue`, or 0 when the
/// scrape does not answer soon. A scrape reads the queues' depths from
/// Redis, and a read that the round-robin puts on the connection of the
/// held call waits behind it until Redis resumes; the next scrape's reads
/// go by other connections.
async fn requests_waiting(app: &TestApp, queue: &str) -> f64 {
    let Ok(text) = tokio::time::timeout(Duration::from_millis(500), app.metrics()).await else {
        return 0.0;
    };
    let label = format!("queue=\"{queue}\"");
    text.lines()
        .filter(|line| line.starts_with("prioq_requests_waiting{"))
        .find(|line| line.contains(label.as_str()))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

fn text(value: &Value) -> String {
    value.as_str().expect("a string").to_owned()
}

/// Sends `first` and waits until Redis holds its call; then sends `rest`
/// and waits until they all queue behind it in the instance; then resumes
/// Redis. Answers every answer, `first`'s first, and the function calls
/// Redis ran for all of them.
async fn held_then_queued(
    server: &RedisServer,
    app: &TestApp,
    queue: &str,
    first: (String, Value),
    rest: Vec<(String, Value)>,
) -> (Vec<crate::support::Answer>, u64) {
    let mut conn = redis_connection(&server.url()).await;
    let calls_before = script_calls(&mut conn).await;
    pause_clients(&mut conn, 15_000, "WRITE").await;
    let send = |(url, body): (String, Value)| {
        let request = app.http.post(url).json(&body);
        async move { app.send(request).await }
    };
    let held = tokio::spawn(app.http.post(first.0).json(&first.1).send());
    until(
        Duration::from_secs(10),
        "Redis holds the first call",
        || async { blocked_clients(&server.url()).await >= 1 },
    )
    .await;
    let queued = rest.len();
    let others = futures_util::future::join_all(rest.into_iter().map(send));
    let resume = async {
        until(
            Duration::from_secs(10),
            "the others queue behind it",
            || async { requests_waiting(app, queue).await >= queued as f64 },
        )
        .await;
        redis::cmd("CLIENT")
            .arg("UNPAUSE")
            .query_async::<()>(&mut conn.clone())
            .await
            .expect("CLIENT UNPAUSE");
    };
    let (others, ()) = tokio::join!(others, resume);
    let held = held.await.expect("joins").expect("answered");
    let status = held.status();
    let body: Value = held.json().await.unwrap_or(Value::Null);
    let mut answers = vec![crate::support::Answer {
        status,
        headers: reqwest::header::HeaderMap::new(),
        body,
    }];
    answers.extend(others);
    let calls = script_calls(&mut conn).await - calls_before;
    (answers, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_enqueues_go_in_one_call_each_answered_on_its_own() {
    let (server, app) = private_app().await;
    // Registers the queue and loads the functions.
    app.enqueue("q", json!({"task": "warm", "id": "known"}))
        .await;
    let url = app.queue_url("q", "/jobs");
    let mut rest: Vec<(String, Value)> = (0..QUEUED)
        .map(|n| {
            (
                url.clone(),
                json!({"task": "t", "id": format!("job-{n}"), "priority": n % 3}),
            )
        })
        .collect();
    // One of them repeats a known id: it alone answers 200.
    rest.push((url.clone(), json!({"task": "t", "id": "known"})));
    let (answers, calls) =
        held_then_queued(&server, &app, "q", (url, json!({"task": "first"})), rest).await;
    assert_eq!(calls, 2, "the held call, then one for all the others");
    assert_eq!(answers[0].status, StatusCode::CREATED);
    for (n, answer) in answers[1..=QUEUED].iter().enumerate() {
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        assert_eq!(answer.body["id"], format!("job-{n}"));
        assert_eq!(answer.body["priority"], (n % 3) as u64);
        assert_eq!(answer.body["created"], true);
    }
    let known = &answers[QUEUED + 1];
    assert_eq!(known.status, StatusCode::OK, "{known:?}");
    assert_eq!(
        (&known.body["task"], &known.body["created"]),
        (&json!("warm"), &json!(false))
    );
    assert_eq!(app.stats("q").await["pending"], QUEUED as u64 + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_go_in_one_call_each_with_its_own_jobs_and_lease() {
    let (server, app) = private_app().await;
    let jobs: Vec<Value> = (0..2 * QUEUED)
        .map(|n| json!({"task": "t", "id": format!("job-{n}")}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let url = app.queue_url("q", "/claim");
    // Every request with its own worker, lease and count: 1 or 2 jobs.
    let rest: Vec<(String, Value)> = (0..QUEUED)
        .map(|n| {
            let body =
                json!({"worker": format!("w-{n}"), "lease_ms": 10_000 + n, "max_jobs": 1 + n % 2});
            (url.clone(), body)
        })
        .collect();
    let (answers, calls) =
        held_then_queued(&server, &app, "q", (url, json!({"worker": "first"})), rest).await;
    assert_eq!(calls, 2, "the held call, then one for all the others");
    let mut ids = BTreeSet::new();
    let mut tokens = BTreeSet::new();
    for (n, answer) in answers.iter().enumerate().skip(1) {
        let n = n - 1;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let jobs = answer.body["jobs"].as_array().expect("jobs");
        assert_eq!(jobs.len(), 1 + n % 2, "{answer:?}");
        for job in jobs {
            assert_eq!(job["worker"], format!("w-{n}"));
            assert_eq!(job["state"], "processing");
            let leased = app.job("q", job["id"].as_str().expect("id")).await.body;
            assert_eq!(leased["lease_token"], job["lease_token"]);
            assert_eq!(leased["lease_expires_at"], job["lease_expires_at"]);
            assert!(ids.insert(text(&job["id"])), "a job handed out twice");
            assert!(
                tokens.insert(text(&job["lease_token"])),
                "a token given twice"
            );
        }
    }
    assert_eq!(answers[0].body["jobs"].as_array().map(Vec::len), Some(1));
    let first_id = text(&answers[0].body["jobs"][0]["id"]);
    assert!(
        !ids.contains(&first_id),
        "the held claim's job handed out again"
    );
    // Oldest first: the held claim took job-0, the rest took the next ones.
    assert_eq!(first_id, "job-0");
    let expected: BTreeSet<String> = (1..=ids.len()).map(|n| format!("job-{n}")).collect();
    assert_eq!(ids, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acks_go_in_one_call_each_with_its_own_outcome() {
    let (server, app) = private_app().await;
    let jobs: Vec<Value> = (0..QUEUED + 1).map(|_| json!({"task": "t"})).collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let leased = app.claim("q", json!({"max_jobs": 100})).await;
    assert_eq!(leased.len(), QUEUED + 1);
    // Right tokens, wrong tokens and unknown jobs, mixed.
    let ack = |job: &Value, token: &Value| {
        let id = job["id"].as_str().expect("id");
        (
            app.queue_url("q", &format!("/jobs/{id}/ack")),
            json!({"lease_token": token}),
        )
    };
    let rest: Vec<(String, Value)> = leased[1..]
        .iter()
        .enumerate()
        .map(|(n, job)| match n % 3 {
            0 => ack(job, &job["lease_token"]),
            1 => ack(job, &json!("stale-1")),
            _ => ack(&json!({"id": format!("unknown-{n}")}), &json!("x")),
        })
        .collect();
    let (answers, calls) = held_then_queued(
        &server,
        &app,
        "q",
        ack(&leased[0], &leased[0]["lease_token"]),
        rest,
    )
    .await;
    assert_eq!(calls, 2, "the held call, then one for all the others");
    assert_eq!(answers[0].status, StatusCode::NO_CONTENT);
    for (n, answer) in answers[1..].iter().enumerate() {
        let expected = match n % 3 {
            0 => StatusCode::NO_CONTENT,
            1 => StatusCode::CONFLICT,
            _ => StatusCode::NOT_FOUND,
        };
        assert_eq!(answer.status, expected, "entry {n}: {answer:?}");
    }
    for (n, job) in leased[1..].iter().enumerate() {
        let now = app.job("q", job["id"].as_str().expect("id")).await;
        let expected = if n % 3 == 0 {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        assert_eq!(now.status, expected, "job {n}: {now:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acks_enqueues_and_claims_go_in_one_call_each_answered_on_its_own() {
    let (server, app) = private_app().await;
    let jobs: Vec<Value> = (0..10)
        .map(|n| json!({"task": "t", "id": format!("old-{n}")}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let leased = app.claim("q", json!({"max_jobs": 10})).await;
    assert_eq!(leased.len(), 10);
    // Acks with the right token on even jobs and a stale one on odd jobs;
    // ten new jobs; ten claims of one job each.
    let mut rest: Vec<(String, Value)> = leased
        .iter()
        .enumerate()
        .map(|(n, job)| {
            let id = job["id"].as_str().expect("id");
            let token = if n % 2 == 0 {
                job["lease_token"].clone()
            } else {
                json!("stale")
            };
            (
                app.queue_url("q", &format!("/jobs/{id}/ack")),
                json!({"lease_token": token}),
            )
        })
        .collect();
    rest.extend((0..10).map(|n| {
        (
            app.queue_url("q", "/jobs"),
            json!({"task": "t", "id": format!("new-{n}")}),
        )
    }));
    rest.extend((0..10).map(|n| {
        (
            app.queue_url("q", "/claim"),
            json!({"worker": format!("w-{n}")}),
        )
    }));
    let first = (
        app.queue_url("q", "/jobs"),
        json!({"task": "t", "id": "first"}),
    );
    let (answers, calls) = held_then_queued(&server, &app, "q", first, rest).await;
    assert_eq!(calls, 2, "the held call, then one for all the others");
    assert_eq!(answers[0].status, StatusCode::CREATED);
    for (n, answer) in answers[1..=10].iter().enumerate() {
        let expected = if n % 2 == 0 {
            StatusCode::NO_CONTENT
        } else {
            StatusCode::CONFLICT
        };
        assert_eq!(answer.status, expected, "ack {n}: {answer:?}");
    }
    for answer in &answers[11..=20] {
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    // The claims took the jobs enqueued before them, oldest first: `first`
    // and nine of the ten new ones, each once.
    let mut claimed = BTreeSet::new();
    for (n, answer) in answers[21..].iter().enumerate() {
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let jobs = answer.body["jobs"].as_array().expect("jobs");
        assert_eq!(jobs.len(), 1, "claim {n}: {answer:?}");
        assert_eq!(jobs[0]["worker"], format!("w-{n}"));
        assert!(
            claimed.insert(text(&jobs[0]["id"])),
            "a job handed out twice"
        );
    }
    assert!(claimed.contains("first"), "{claimed:?}");
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["processing"].clone()),
        (json!(1), json!(15)),
        "{stats}"
    );
    for (n, job) in leased.iter().enumerate() {
        let now = app.job("q", job["id"].as_str().expect("id")).await;
        let expected = if n % 2 == 0 {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        assert_eq!(now.status, expected, "job {n}: {now:?}");
    }
}
