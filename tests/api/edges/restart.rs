//! Redis restarts: once Redis answers again, the connections that broke
//! are replaced before they cost a request; while it is down, a request
//! that was never sent says its effect is none.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::json;

use super::assert_problem;
use crate::support::{RedisServer, TempDir, TestApp, spawn_app_with, test_config, until};

const FLAGS: &str = "--appendonly no";

/// One request of each kind, the safe-to-repeat ones and the others; the
/// statuses, each with what was asked.
async fn one_of_each(app: &TestApp, round: usize) -> Vec<(String, StatusCode)> {
    let q = |rest: &str| app.queue_url("q", rest);
    let id = format!("after-{round}");
    let requests = vec![
        (
            "enqueue",
            app.http
                .post(q("/jobs"))
                .json(&json!({"task": "t", "id": id})),
        ),
        (
            "enqueue without id",
            app.http.post(q("/jobs")).json(&json!({"task": "t"})),
        ),
        (
            "claim",
            app.http.post(q("/claim")).json(&json!({"max_jobs": 1})),
        ),
        ("stats", app.http.get(q(""))),
        ("job", app.http.get(q(&format!("/jobs/{id}")))),
        ("settings", app.http.get(q("/settings"))),
        ("dlq", app.http.get(q("/dlq"))),
        ("queues", app.http.get(app.url("/v1/queues"))),
        ("pause", app.http.post(q("/pause"))),
        ("resume", app.http.post(q("/resume"))),
    ];
    let mut statuses = Vec::new();
    for (what, request) in requests {
        let answer = app.send(request).await;
        statuses.push((what.to_owned(), answer.status));
    }
    statuses
}

/// `rounds` rounds of `one_of_each`, none answered with a 5xx.
async fn all_served(app: &TestApp, rounds: usize, when: &str) {
    for round in 0..rounds {
        let failed: Vec<_> = one_of_each(app, round)
            .await
            .into_iter()
            .filter(|(_, status)| status.is_server_error())
            .collect();
        assert_eq!(failed, Vec::new(), "round {round} {when}");
    }
}

/// Fills the instance's pool: concurrent requests each hold a connection.
async fn warm(app: &TestApp) {
    let enqueues =
        (0..24).map(|n| app.enqueue("q", json!({"task": "t", "id": format!("warm-{n}")})));
    join_all(enqueues).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_restart_costs_the_next_requests_nothing() {
    let data = TempDir::new("edges-restart");
    let server = RedisServer::start_in(&data.path, FLAGS);
    let port = server.port;
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    warm(&app).await;

    // Down and up again while nothing asks (no request, no probe): every
    // pooled connection broke meanwhile.
    drop(server);
    let _server = RedisServer::spawn(port, &data.path, FLAGS);
    // The contract's allowance: from a second after Redis answers again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    all_served(&app, 3, "after the restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_down_a_refusal_says_no_effect_and_readiness_comes_back() {
    let data = TempDir::new("edges-down");
    let server = RedisServer::start_in(&data.path, FLAGS);
    let port = server.port;
    let mut config = test_config();
    config.redis_url = server.url();
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config).await;
    warm(&app).await;

    drop(server);
    until(Duration::from_secs(5), "/readyz answers 503", || async {
        app.get(app.url("/readyz")).await.status == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    let refused = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "t", "id": "down"}),
        )
        .await;
    assert_problem(
        &refused,
        StatusCode::SERVICE_UNAVAILABLE,
        "backend_unavailable",
        Some("none"),
    );

    let _server = RedisServer::spawn(port, &data.path, FLAGS);
    until(Duration::from_secs(10), "/readyz answers 200", || async {
        app.get(app.url("/readyz")).await.status == StatusCode::OK
    })
    .await;
    all_served(&app, 1, "after /readyz was 200 again").await;
}

/// prioq started while Redis is down, refusing requests (every pooled
/// connection tried and found broken), then Redis up: the very first
/// request once Redis answers is served, not refused by a connection that
/// was still broken from before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_once_redis_answers_is_served() {
    let data = TempDir::new("edges-back");
    let port = RedisServer::start_in(&data.path, FLAGS).port;
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{port}");
    config.redis_timeout_ms = 500;
    // No sweep meanwhile: nothing but the requests below tries Redis.
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    // As many refused requests as the pool has connections, and more.
    for n in 0..(2 * app.config.redis_pool_size) {
        let refused = app
            .post(
                app.queue_url("q", "/jobs"),
                json!({"task": "t", "id": format!("down-{n}")}),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{refused:?}"
        );
    }
    // Down a while longer: the connections' own attempts to come back
    // have given up by then.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _server = RedisServer::spawn(port, &data.path, FLAGS);
    all_served(&app, 3, "once Redis answers").await;
}
