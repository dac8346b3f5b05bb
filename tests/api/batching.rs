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
    // A call held in Redis holds its connection: a metrics scrape (which
    // reads from Redis) whose reads the round-robin puts behind one waits
    // for the held call. With two calls held and few connections, every
    // scrape's run of reads can meet one of them; with many, few do.
    config.redis_pool_size = 64;
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

/// The instance's metric `name` for `queue` (a lane's gauge or counter:
/// `prioq_requests_waiting`, the requests queued for its next call;
/// `prioq_batched_calls_total`, its calls sent so far, each counted as it
/// goes), or 0 when the scrape does not answer soon. A scrape reads the
/// queues' depths from Redis, and a read that the round-robin puts on the
/// connection of the held call waits behind it until Redis resumes; the
/// next scrape's reads go by other connections.
async fn lane_metric(app: &TestApp, name: &str, queue: &str) -> f64 {
    let Ok(text) = tokio::time::timeout(Duration::from_millis(500), app.metrics()).await else {
        return 0.0;
    };
    let (series, label) = (format!("{name}{{"), format!("queue=\"{queue}\""));
    text.lines()
        .filter(|line| line.starts_with(series.as_str()))
        .find(|line| line.contains(label.as_str()))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

async fn requests_waiting(app: &TestApp, queue: &str) -> f64 {
    lane_metric(app, "prioq_requests_waiting", queue).await
}

async fn batched_calls(app: &TestApp, queue: &str) -> f64 {
    lane_metric(app, "prioq_batched_calls_total", queue).await
}

/// Waits until `queued` requests wait in `queue`'s lane, then lets Redis
/// go on.
async fn resume_once_queued(
    app: &TestApp,
    conn: &redis::aio::MultiplexedConnection,
    queue: &str,
    queued: usize,
) {
    until(
        Duration::from_secs(10),
        "the requests queue in the lane",
        || async { requests_waiting(app, queue).await >= queued as f64 },
    )
    .await;
    unpause(conn).await;
}

async fn unpause(conn: &redis::aio::MultiplexedConnection) {
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async::<()>(&mut conn.clone())
        .await
        .expect("CLIENT UNPAUSE");
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
    let resume = resume_once_queued(app, &conn, queue, queued);
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

/// A batch enqueue of 100 jobs, `name-0` to `name-99`.
fn batch(name: &str) -> Value {
    let jobs: Vec<Value> = (0..100)
        .map(|n| json!({"task": "t", "id": format!("{name}-{n}")}))
        .collect();
    json!({"jobs": jobs})
}

/// With Redis's writes paused, sends a one-job enqueue (id `first`) and
/// waits until Redis holds its call; then sends the two requests `behind`
/// (url, body), 200 jobs or claims in all, a second call's worth, and
/// waits until they go in a second call while the first is still held;
/// then runs `then`, which must let Redis go on. Answers the held
/// enqueue's answer, the two requests' and `then`'s output.
async fn beside_a_held_call<T>(
    server: &RedisServer,
    app: &TestApp,
    behind: [(String, Value); 2],
    then: impl Future<Output = T>,
) -> (crate::support::Answer, [crate::support::Answer; 2], T) {
    let mut conn = redis_connection(&server.url()).await;
    let sent_before = batched_calls(app, "q").await;
    pause_clients(&mut conn, 15_000, "WRITE").await;
    let held = app.post(
        app.queue_url("q", "/jobs"),
        json!({"task": "t", "id": "first"}),
    );
    let rest = async {
        until(
            Duration::from_secs(10),
            "Redis holds the first call",
            || async { blocked_clients(&server.url()).await >= 1 },
        )
        .await;
        let [(url_a, a), (url_b, b)] = behind;
        let both = futures_util::future::join(app.post(url_a, a), app.post(url_b, b));
        let after = async {
            until(
                Duration::from_secs(10),
                "the two go in a second call while the first is held",
                || async { batched_calls(app, "q").await >= sent_before + 2.0 },
            )
            .await;
            then.await
        };
        tokio::join!(both, after)
    };
    let (held, ((a, b), out)) = tokio::join!(held, rest);
    (held, [a, b], out)
}

/// The ids of the jobs of a batch enqueue's or a claim's answer, in its
/// order.
fn answered_ids(answer: &crate::support::Answer) -> Vec<String> {
    answer.body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| text(&job["id"]))
        .collect()
}

fn batch_ids(name: &str) -> Vec<String> {
    (0..100).map(|n| format!("{name}-{n}")).collect()
}

/// An instance of its own (`private_app`) whose queue `q` holds the 300
/// jobs of batches `a`, `b` and `c`, oldest first; and a connection to its
/// Redis.
async fn with_300_jobs() -> (RedisServer, TestApp, redis::aio::MultiplexedConnection) {
    let (server, app) = private_app().await;
    let url = app.queue_url("q", "/jobs/batch");
    for name in ["a", "b", "c"] {
        assert_eq!(
            app.post(url.clone(), batch(name)).await.status,
            StatusCode::OK
        );
    }
    let conn = redis_connection(&server.url()).await;
    (server, app, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_waiting_behind_a_held_call_go_in_a_second_call_beside_it() {
    let (server, app, conn) = with_300_jobs().await;
    let calls_before = script_calls(&mut conn.clone()).await;
    let claim = |worker: &str| {
        (
            app.queue_url("q", "/claim"),
            json!({"max_jobs": 100, "worker": worker}),
        )
    };
    // Two calls are in flight: one-job enqueues sent now wait for one of
    // them to return.
    let singles = async {
        let singles = futures_util::future::join_all((0..3).map(|n| {
            app.post(
                app.queue_url("q", "/jobs"),
                json!({"task": "t", "id": format!("single-{n}")}),
            )
        }));
        let resume = resume_once_queued(&app, &conn, "q", 3);
        tokio::join!(singles, resume).0
    };
    let (held, claims, singles) =
        beside_a_held_call(&server, &app, [claim("w1"), claim("w2")], singles).await;
    assert_eq!(held.status, StatusCode::CREATED, "{held:?}");
    for answer in &singles {
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    let calls = script_calls(&mut conn.clone()).await - calls_before;
    assert_eq!(
        calls, 3,
        "the held call, the claims' beside it, the singles'"
    );
    // The two claims took the 200 oldest jobs, each a run of them in order
    // (which claim came first in their call is up to how they arrived).
    let mut taken: Vec<Vec<String>> = claims
        .iter()
        .map(|answer| {
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            answered_ids(answer)
        })
        .collect();
    taken.sort();
    assert_eq!(taken, [batch_ids("a"), batch_ids("b")]);
    let stats = app.stats("q").await;
    assert_eq!(
        (&stats["pending"], &stats["processing"]),
        (&json!(104), &json!(200))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_calls_in_flight_cut_off_resend_the_enqueue_and_answer_the_claims_503() {
    let (server, app, conn) = with_300_jobs().await;
    let claim = (
        app.queue_url("q", "/claim"),
        json!({"max_jobs": 100, "worker": "w"}),
    );
    // Both calls are held when Redis drops prioq's connections (this
    // test's own is kept), then Redis goes on.
    let cut = async {
        let killed = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query_async::<i64>(&mut conn.clone())
            .await
            .expect("CLIENT KILL");
        unpause(&conn).await;
        killed
    };
    let (held, claims, killed) =
        beside_a_held_call(&server, &app, [claim.clone(), claim], cut).await;
    assert!(
        killed >= 2,
        "the two calls' connections were cut ({killed})"
    );
    // An enqueue of an id fixed before sending is sent again on its own.
    assert_eq!(held.status, StatusCode::CREATED, "{held:?}");
    // A claim is not: it may have leased jobs.
    for answer in &claims {
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        assert_eq!(answer.body["code"], "backend_unavailable", "{answer:?}");
        assert_eq!(answer.body["effect"], "unknown", "{answer:?}");
    }
    // No job lost or made twice: 300 and `first`, waiting or leased.
    let stats = app.stats("q").await;
    let (pending, processing) = (&stats["pending"], &stats["processing"]);
    assert_eq!(
        pending.as_u64().expect("pending") + processing.as_u64().expect("processing"),
        301,
        "{stats}"
    );
    assert_eq!(
        app.get(app.queue_url("q", "/jobs/first")).await.body["state"],
        "pending"
    );
}
