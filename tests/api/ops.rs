//! Operations: the real binary stopping on SIGTERM and SIGINT, and the
//! service living through a Redis that goes away or stalls.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::clock::within;
use crate::support::{
    AOF_ALWAYS, Answer, RedisServer, Service, TempDir, TestApp, free_port, redis, redis_connection,
    script_calls, send_signal, spawn_app_with, test_config, unique_prefix, until,
    until_script_calls_exceed,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_requests_and_exits_zero() {
    stops_gracefully_on("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_drains_requests_and_exits_zero() {
    stops_gracefully_on("INT").await;
}

/// A long poll waits and an enqueue is in flight (its headers read, its
/// body not yet sent) when `signal` arrives: the poll answers at once with
/// no job, the listener closes, the enqueue still completes once its body
/// comes, and the process then exits 0.
async fn stops_gracefully_on(signal: &str) {
    // Its own Redis, so its script count tells when the poll has looked.
    let redis = RedisServer::start();
    let mut service = Service::start(&redis.url()).await;
    let http = reqwest::Client::new();

    let mut conn = redis_connection(&redis.url()).await;
    let before = script_calls(&mut conn).await;
    let poll = tokio::spawn({
        let http = http.clone();
        let url = service.url("/v1/queues/stopping/claim");
        async move {
            let response = http
                .post(url)
                .json(&json!({"wait_ms": 15000}))
                .send()
                .await
                .expect("the long poll is answered");
            let answered_at = Instant::now();
            let status = response.status();
            let body: Value = response.json().await.expect("JSON");
            (status, body, answered_at)
        }
    });
    until_script_calls_exceed(&mut conn, before).await;

    // An enqueue in flight: with `Expect: 100-continue` the server says
    // "100 Continue" once the handler reads the body, so we know it runs.
    let body = json!({"task": "in-flight", "id": "late-1"}).to_string();
    let mut in_flight = TcpStream::connect(("127.0.0.1", service.port))
        .await
        .expect("connects");
    let head = format!(
        "POST /v1/queues/inflight/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\
         Expect: 100-continue\r\n\r\n",
        body.len()
    );
    in_flight
        .write_all(head.as_bytes())
        .await
        .expect("head sent");
    let interim = read_until(&mut in_flight, b"\r\n\r\n").await;
    assert!(
        interim.starts_with("HTTP/1.1 100"),
        "expected 100 Continue, got {interim:?}"
    );

    let signalled_at = Instant::now();
    send_signal(service.pid(), signal);

    let (status, answer, answered_at) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .expect("the long poll answers within 5 s of the signal")
        .expect("poll task");
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["jobs"], json!([]));
    let early = answered_at.duration_since(signalled_at);
    assert!(
        early < Duration::from_secs(3),
        "answered {early:?} after the signal"
    );

    // No new connections while the enqueue is still in flight...
    until(Duration::from_secs(5), "the listener closes", || {
        service.refuses_connections()
    })
    .await;
    assert!(
        service.still_running(),
        "exited with a request still in flight:\n{}",
        service.log()
    );
    // ...which completes all the same.
    in_flight
        .write_all(body.as_bytes())
        .await
        .expect("body sent");
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(5),
        in_flight.read_to_string(&mut response),
    )
    .await
    .expect("the in-flight enqueue is answered")
    .expect("read answer");
    assert!(
        response.starts_with("HTTP/1.1 201"),
        "in-flight enqueue: {response}"
    );
    assert!(response.contains(r#""created":true"#), "{response}");

    let exit = service.exit_within(Duration::from_secs(5)).await;
    assert!(exit.success(), "exit status {exit}:\n{}", service.log());
    assert!(service.refuses_connections().await);

    // The enqueue took effect: an instance started afterwards finds the job.
    let mut config = test_config();
    config.redis_url = redis.url();
    config.key_prefix = service.prefix.clone();
    let after = spawn_app_with(config).await;
    let job = after.job("inflight", "late-1").await;
    assert_eq!(job.status, StatusCode::OK, "{job:?}");
    assert_eq!(job.body["state"], "pending");
}

/// Reads from `stream` until `end` has been seen; returns what was read.
async fn read_until(stream: &mut TcpStream, end: &[u8]) -> String {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    let deadline = Duration::from_secs(5);
    while !seen.ends_with(end) {
        let read = tokio::time::timeout(deadline, stream.read(&mut byte))
            .await
            .expect("the server answers in time")
            .expect("read");
        assert!(read == 1, "connection closed after {seen:?}");
        seen.push(byte[0]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Client ids and how the service answered them.
#[derive(Debug, Default)]
struct Tally {
    created: BTreeSet<String>,
    unavailable: BTreeSet<String>,
}

/// Enqueues job `id` on `app` and files the answer, which must be 201 or
/// a 503 `backend_unavailable` problem given within `bound`.
async fn enqueue_and_file(app: &TestApp, id: &str, bound: Duration, tally: &mut Tally) -> Answer {
    let answer = within(
        bound,
        app.post(
            app.queue_url("outage", "/jobs"),
            json!({"task": "t", "id": id}),
        ),
    )
    .await;
    match answer.status {
        StatusCode::CREATED => {
            tally.created.insert(id.to_owned());
        }
        StatusCode::SERVICE_UNAVAILABLE => {
            assert_eq!(answer.problem_code(), "backend_unavailable");
            tally.unavailable.insert(id.to_owned());
        }
        other => panic!("enqueue {id}: unexpected {other}: {answer:?}"),
    }
    answer
}

/// Asserts every route touching Redis answers 503 `backend_unavailable`
/// within `bound`, and `/readyz` 503 `unavailable`.
async fn assert_unavailable(app: &TestApp, bound: Duration) {
    let requests = [
        // Short: a claim that reaches a stalled Redis runs when it resumes
        // and leases a job to nobody until then.
        app.http
            .post(app.queue_url("outage", "/claim"))
            .json(&json!({"lease_ms": 1000})),
        app.http.get(app.queue_url("outage", "")),
        app.http.get(app.queue_url("outage", "/jobs/before-0")),
        app.http.get(app.url("/v1/queues")),
    ];
    for request in requests {
        let answer = within(bound, app.send(request)).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        assert_eq!(answer.problem_code(), "backend_unavailable");
        let detail = answer.body["detail"].as_str().unwrap_or_default();
        assert!(
            !detail.contains(&app.config.key_prefix),
            "leaks keys: {detail}"
        );
    }
    let ready = within(bound, app.get(app.url("/readyz"))).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE, "{ready:?}");
    assert_eq!(ready.body["status"], "unavailable");
}

async fn until_ready(app: &TestApp) {
    until(
        Duration::from_secs(10),
        "/readyz answers 200 again",
        || async {
            app.http
                .get(app.url("/readyz"))
                .send()
                .await
                .is_ok_and(|a| a.status() == StatusCode::OK)
        },
    )
    .await;
}

/// Clients of the Redis at `url` with a pattern subscription: one per
/// instance's wake-up listener.
async fn wake_listeners(url: &str) -> usize {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    clients
        .lines()
        .filter(|client| !client.contains(" psub=0 "))
        .count()
}

/// The pending jobs of queue `outage`, claimed all at once: their ids,
/// failing on any duplicate.
async fn claim_all_ids(app: &TestApp) -> BTreeSet<String> {
    let jobs = app.claim("outage", json!({"max_jobs": 100})).await;
    let ids: BTreeSet<String> = jobs
        .iter()
        .map(|j| j["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(ids.len(), jobs.len(), "a job handed out twice: {jobs:?}");
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_going_away_answers_503_and_the_service_recovers_by_itself() {
    let data = TempDir::new("redis-outage");
    let redis = RedisServer::start_in(&data.path, AOF_ALWAYS);
    let port = redis.port;
    let mut config = test_config();
    config.redis_url = redis.url();
    config.redis_timeout_ms = 500;
    let a = Arc::new(spawn_app_with(config.clone()).await);
    let b = spawn_app_with(config).await;
    let bound = Duration::from_millis(1500);
    let mut tally = Tally::default();
    for n in 0..5 {
        enqueue_and_file(&a, &format!("before-{n}"), bound, &mut tally).await;
    }
    assert_eq!(tally.created.len(), 5, "{tally:?}");
    let before = a.snapshot().await;

    drop(redis);
    for n in 0..5 {
        let app = if n % 2 == 0 { &a } else { &b };
        let answer = enqueue_and_file(app, &format!("during-{n}"), bound, &mut tally).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
    }
    assert_unavailable(&a, bound).await;
    assert_unavailable(&b, bound).await;

    let redis = RedisServer::start_on(port, &data.path);
    until_ready(&a).await;
    until_ready(&b).await;
    // Nothing of the refused requests reached Redis.
    assert_eq!(a.snapshot().await, before, "the outage left traces");

    // The clients retry: each refused enqueue is created once, and once only.
    for id in tally.unavailable.clone() {
        let retried = a
            .post(
                a.queue_url("outage", "/jobs"),
                json!({"task": "t", "id": id}),
            )
            .await;
        assert_eq!(retried.status, StatusCode::CREATED, "{retried:?}");
        tally.created.insert(id.clone());
        let again = b
            .post(
                b.queue_url("outage", "/jobs"),
                json!({"task": "t", "id": id}),
            )
            .await;
        assert_eq!(again.status, StatusCode::OK, "{again:?}");
        assert_eq!(again.body["created"], false);
    }
    let stats = a.stats("outage").await;
    assert_eq!(stats["pending"], json!(tally.created.len()), "{stats}");
    assert_eq!(claim_all_ids(&b).await, tally.created);

    // Wake-ups come back too: both listeners subscribe again, and a long
    // poll on one instance is woken by an enqueue on the other.
    until(
        Duration::from_secs(10),
        "both wake-up listeners subscribe again",
        || async { wake_listeners(&redis.url()).await == 2 },
    )
    .await;
    let mut conn = redis_connection(&redis.url()).await;
    let calls = script_calls(&mut conn).await;
    let poll = tokio::spawn({
        let a = Arc::clone(&a);
        async move { a.claim("woken", json!({"wait_ms": 4000})).await }
    });
    until_script_calls_exceed(&mut conn, calls).await;
    let enqueued_at = Instant::now();
    let job = b.enqueue("woken", json!({"task": "t"})).await;
    let claimed = poll.await.expect("poll answers");
    assert_eq!(claimed.len(), 1, "not woken after the outage");
    assert_eq!(claimed[0]["id"], job["id"]);
    let latency = enqueued_at.elapsed();
    assert!(latency < Duration::from_secs(2), "woken after {latency:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_down_at_start_is_waited_for() {
    let data = TempDir::new("redis-late");
    let port = free_port();
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{port}");
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config).await;
    let bound = Duration::from_millis(1500);
    let mut tally = Tally::default();
    let answer = enqueue_and_file(&app, "early", bound, &mut tally).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
    assert_unavailable(&app, bound).await;

    let redis = RedisServer::start_on(port, &data.path);
    until_ready(&app).await;
    let job = app.enqueue("outage", json!({"task": "t"})).await;
    assert_eq!(job["created"], true);
    until(
        Duration::from_secs(10),
        "the wake-up listener subscribes",
        || async { wake_listeners(&redis.url()).await == 1 },
    )
    .await;
}

/// Stops a process with SIGSTOP and resumes it on drop, so a failing test
/// does not leave Redis frozen.
#[derive(Debug)]
struct Frozen(u32);

impl Frozen {
    fn stop(pid: u32) -> Self {
        send_signal(pid, "STOP");
        Self(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        send_signal(self.0, "CONT");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_redis_answers_503_within_the_timeout_and_nothing_is_half_done() {
    let redis = RedisServer::start();
    let mut config = test_config();
    config.redis_url = redis.url();
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config).await;
    // About the 500 ms bound, with room for a loaded machine.
    let bound = Duration::from_millis(1500);
    let mut tally = Tally::default();
    for n in 0..3 {
        enqueue_and_file(&app, &format!("before-{n}"), bound, &mut tally).await;
    }
    assert_eq!(tally.created.len(), 3);

    let frozen = Frozen::stop(redis.pid());
    let mut during = BTreeSet::new();
    for n in 0..4 {
        let id = format!("during-{n}");
        let answer = enqueue_and_file(&app, &id, bound, &mut tally).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        during.insert(id);
    }
    // Concurrent requests are bounded too, not queued behind each other.
    let answers = within(
        bound,
        futures_util::future::join_all((0..8).map(|_| {
            app.post(
                app.queue_url("outage", "/claim"),
                json!({"wait_ms": 0, "lease_ms": 1000}),
            )
        })),
    )
    .await;
    for answer in &answers {
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
        assert_eq!(answer.problem_code(), "backend_unavailable");
    }
    assert_unavailable(&app, bound).await;
    drop(frozen);
    until_ready(&app).await;
    // A claim that reached Redis before the stall ran when it resumed and
    // leased a job to nobody; its short lease brings the job back.
    until(
        Duration::from_secs(10),
        "jobs leased to nobody come back",
        || async { app.stats("outage").await["processing"] == 0 },
    )
    .await;

    // A script sent before the stall ran whole once Redis resumed, or not
    // at all: each job is there complete or absent, never in part.
    let mut applied = BTreeSet::new();
    for id in &during {
        let answer = app.job("outage", id).await;
        match answer.status {
            StatusCode::OK => {
                assert_eq!(answer.body["state"], "pending", "{answer:?}");
                assert_eq!(answer.body["task"], "t", "{answer:?}");
                applied.insert(id.clone());
            }
            StatusCode::NOT_FOUND => {}
            other => panic!("job {id}: {other}: {answer:?}"),
        }
    }
    let stats = app.stats("outage").await;
    assert_eq!(
        stats["pending"],
        json!(tally.created.len() + applied.len()),
        "{stats}"
    );
    // Retried with the same ids: created if not applied, else recognised.
    for id in &during {
        let retried = app
            .post(
                app.queue_url("outage", "/jobs"),
                json!({"task": "t", "id": id}),
            )
            .await;
        let expected = if applied.contains(id) {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        assert_eq!(retried.status, expected, "{retried:?}");
        tally.created.insert(id.clone());
    }
    let stats = app.stats("outage").await;
    assert_eq!(stats["pending"], json!(tally.created.len()), "{stats}");
    assert_eq!(claim_all_ids(&app).await, tally.created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grace_period_keeps_serving_while_readiness_turns_load_balancers_away() {
    let mut config = test_config();
    config.shutdown_grace_ms = 1500;
    let app = spawn_app_with(config).await;
    let started = Instant::now();
    app.shutdown_token().cancel();

    let ready = app.get(app.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.body["status"], "stopping");
    let enqueued = app
        .post(app.queue_url("grace", "/jobs"), json!({"task": "t"}))
        .await;
    assert_eq!(
        enqueued.status,
        StatusCode::CREATED,
        "still serving in the grace period"
    );
    assert_eq!(
        enqueued
            .headers
            .get("connection")
            .and_then(|v| v.to_str().ok()),
        Some("close"),
        "answers close their connections so a proxy keeps none"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "checked inside the grace period"
    );

    let address = app.base.trim_start_matches("http://").to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&address).await.is_ok() {
        assert!(Instant::now() < deadline, "the listener never closed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "closed only after the grace period"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_shares_the_port_with_http1() {
    let app = spawn_app_with(test_config()).await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    // Fifty enqueues multiplexed on the one connection an h2 client keeps.
    let enqueues = (0..50).map(|n| {
        h2.post(app.queue_url("h2", "/jobs"))
            .json(&json!({"task": "t", "id": format!("job-{n}")}))
            .send()
    });
    for answer in futures_util::future::join_all(enqueues).await {
        let answer = answer.expect("answered over h2c");
        assert_eq!(answer.version(), reqwest::Version::HTTP_2);
        assert_eq!(answer.status(), StatusCode::CREATED);
    }
    let claimed = h2
        .post(app.queue_url("h2", "/claim"))
        .json(&json!({"max_jobs": 50}))
        .send()
        .await
        .expect("answered");
    assert_eq!(claimed.version(), reqwest::Version::HTTP_2);
    let claimed: Value = claimed.json().await.expect("JSON");
    let jobs = claimed["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 50);
    // The same port still speaks HTTP/1.1 to a plain client.
    let answer = app.ack("h2", &jobs[0]).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let plain = app
        .http
        .get(app.url("/healthz"))
        .send()
        .await
        .expect("answered");
    assert_eq!(plain.version(), reqwest::Version::HTTP_11);
}

/// Sends `request` with `x-request-id: id` and answers its status.
async fn status_of(request: reqwest::RequestBuilder, id: &str) -> StatusCode {
    request
        .header("x-request-id", id)
        .send()
        .await
        .expect("answered")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_logs_name_failures_and_slowness_and_successes_only_when_asked() {
    let redis = RedisServer::start();
    let http = reqwest::Client::new();
    let quiet = Service::start(&redis.url()).await;
    let chatty = Service::start_with(
        &redis.url(),
        &unique_prefix(),
        &[("PRIOQ_LOG_REQUESTS", "true")],
    )
    .await;
    let strict = Service::start_with(
        &redis.url(),
        &unique_prefix(),
        &[("PRIOQ_SLOW_REQUEST_MS", "0")],
    )
    .await;
    let enqueue = |service: &Service| {
        http.post(service.url("/v1/queues/q/jobs"))
            .json(&json!({"task": "t"}))
    };
    assert_eq!(
        status_of(enqueue(&quiet), "ok-quiet").await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_of(enqueue(&chatty), "ok-chatty").await,
        StatusCode::CREATED
    );
    assert_eq!(
        status_of(enqueue(&strict), "slow-strict").await,
        StatusCode::CREATED
    );
    // A long poll waits on purpose: not slow, however long it asked for.
    let poll = http
        .post(quiet.url("/v1/queues/empty/claim"))
        .json(&json!({"wait_ms": 1200}));
    assert_eq!(status_of(poll, "poll-quiet").await, StatusCode::OK);
    let missing = http.get(quiet.url("/v1/queues/q/jobs/nope"));
    assert_eq!(
        status_of(missing, "missing-quiet").await,
        StatusCode::NOT_FOUND
    );
    drop(redis);
    assert_eq!(
        status_of(enqueue(&quiet), "down-quiet").await,
        StatusCode::SERVICE_UNAVAILABLE
    );

    let quiet_log = quiet.log();
    let failed = quiet_log
        .lines()
        .find(|line| line.contains("down-quiet"))
        .unwrap_or_else(|| panic!("the failed request is not logged:\n{quiet_log}"));
    assert!(
        failed.contains("request failed") && failed.contains("cause"),
        "{failed}"
    );
    for id in ["ok-quiet", "poll-quiet", "missing-quiet"] {
        assert!(!quiet_log.contains(id), "{id} was logged:\n{quiet_log}");
    }
    let chatty_log = chatty.log();
    let line = chatty_log
        .lines()
        .find(|line| line.contains("ok-chatty"))
        .unwrap_or_else(|| panic!("the request is not logged:\n{chatty_log}"));
    let latency = line
        .split("latency_ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no latency: {line}"));
    let decimals = latency.split('.').nth(1).map(str::len);
    assert_eq!(
        decimals,
        Some(3),
        "latency printed with fixed precision: {line}"
    );
    let strict_log = strict.log();
    assert!(
        strict_log
            .lines()
            .any(|line| line.contains("slow-strict") && line.contains("slow request")),
        "{strict_log}"
    );
}
