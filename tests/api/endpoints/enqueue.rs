//! Enqueue.

use super::*;

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
