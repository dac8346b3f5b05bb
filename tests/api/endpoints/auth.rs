//! Auth.

use super::*;

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
