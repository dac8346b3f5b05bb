//! Operations.

use super::*;

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
    config.redis_url = format!("redis://127.0.0.1:{}", crate::support::free_port());
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
        (app.http.post(app.queue_url("q", "")), &["GET", "DELETE"]),
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
