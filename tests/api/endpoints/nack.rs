//! Nack.

use super::*;

#[tokio::test]
async fn nack_returns_the_job_to_pending_behind_its_class_with_one_more_attempt() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let first = app.enqueue("q", json!({"task": "first"})).await;
    let second = app.enqueue("q", json!({"task": "second"})).await;
    let leased = app.claim_one("q").await.expect("claimed");
    assert_eq!(id_of(&leased), id_of(&first));

    let answer = nack(&app, "q", &leased, json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let job = &answer.body;
    assert_eq!(job["state"], "pending");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["priority"], 1);
    for gone in ["lease_token", "lease_expires_at", "worker", "run_at"] {
        assert!(job[gone].is_null(), "{gone} still set: {job}");
    }
    let stored = app.job("q", id_of(&first)).await.body;
    assert_eq!(
        (stored["state"].clone(), stored["attempts"].clone()),
        (json!("pending"), json!(1))
    );

    // Behind the job already waiting in its priority.
    let next = app.claim("q", json!({"max_jobs": 2})).await;
    assert_eq!(ids_of(&next), [id_of(&second), id_of(&first)]);
    assert_eq!(next[1]["attempts"], 1);
    // The old lease is dead.
    assert_problem(
        &app.ack("q", &leased).await,
        StatusCode::CONFLICT,
        "lease_lost",
    );
}

#[tokio::test]
async fn nack_with_delay_schedules_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let answer = nack(&app, "q", &leased, json!({"delay_ms": 60_000})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["state"], "scheduled");
    assert_eq!(answer.body["attempts"], 1);
    let run_at = ms_of(&answer.body["run_at"]);
    let after_enqueue = run_at - ms_of(&leased["enqueued_at"]);
    assert!(
        (60_000..65_000).contains(&after_enqueue),
        "run_at {after_enqueue} ms after the enqueue"
    );
    assert!(
        app.claim("q", json!({})).await.is_empty(),
        "a scheduled job was claimable"
    );
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["scheduled"].clone(), stats["pending"].clone()),
        (json!(1), json!(0))
    );

    let too_far = enqueue_and_claim(&app, "r", json!({"task": "t"}), json!({})).await;
    let answer = nack(&app, "r", &too_far, json!({"delay_ms": 2_592_000_001_u64})).await;
    assert_invalid_field(&answer, "delay_ms");
}

#[tokio::test]
async fn nack_with_priority_moves_the_job_to_that_class() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t", "priority": 1}), json!({})).await;
    let answer = nack(&app, "q", &leased, json!({"priority": 4})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["priority"], 4);
    assert_eq!(answer.body["state"], "pending");
    assert_eq!(app.job("q", id_of(&leased)).await.body["priority"], 4);
    let classes = app.stats("q").await["classes"].clone();
    assert_eq!(classes.as_array().expect("classes").len(), 1, "{classes}");
    assert_eq!(classes[0]["priority"], 4);
    assert_eq!(classes[0]["pending"], 1);

    let again = app.claim_one("q").await.expect("claimed");
    assert_invalid_field(
        &nack(&app, "q", &again, json!({"priority": 256})).await,
        "priority",
    );
}

#[tokio::test]
async fn nack_with_error_keeps_it_as_last_error() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let answer = nack(
        &app,
        "q",
        &leased,
        json!({"error": "timeout talking to SMTP"}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["last_error"], "timeout talking to SMTP");
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["last_error"],
        "timeout talking to SMTP"
    );
    // Claimed again, the job still shows its last error.
    let again = app.claim_one("q").await.expect("claimed");
    assert_eq!(again["last_error"], "timeout talking to SMTP");
}

#[tokio::test]
async fn nack_dead_dead_letters_the_job_with_dead_at() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let answer = nack(&app, "q", &leased, json!({"dead": true, "error": "poison"})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let job = &answer.body;
    assert_eq!(job["state"], "dead");
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["last_error"], "poison");
    assert!(job["lease_token"].is_null());
    let dead_at = assert_recent(&job["dead_at"]);
    assert!(dead_at >= ms_of(&job["enqueued_at"]));
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["dead"].clone(), stats["pending"].clone()),
        (json!(1), json!(0))
    );
    assert!(
        app.claim("q", json!({})).await.is_empty(),
        "a dead job was claimable"
    );
    let dlq = dlq_page(&app, "q", "").await;
    assert_eq!(
        ids_of(dlq.body["jobs"].as_array().expect("jobs")),
        [id_of(&leased)]
    );
}

#[tokio::test]
async fn nack_reaching_max_attempts_dead_letters_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "t", "max_attempts": 2}),
        json!({}),
    )
    .await;
    let first = nack(&app, "q", &leased, json!({"error": "one"})).await;
    assert_eq!(first.status, StatusCode::OK, "{first:?}");
    assert_eq!(
        (first.body["state"].clone(), first.body["attempts"].clone()),
        (json!("pending"), json!(1))
    );
    let leased = app.claim_one("q").await.expect("claimed again");
    // Even with a delay, the last attempt goes to the DLQ.
    let second = nack(
        &app,
        "q",
        &leased,
        json!({"error": "two", "delay_ms": 60_000}),
    )
    .await;
    assert_eq!(second.status, StatusCode::OK, "{second:?}");
    assert_eq!(second.body["state"], "dead");
    assert_eq!(second.body["attempts"], 2);
    assert_eq!(second.body["last_error"], "two");
    assert_recent(&second.body["dead_at"]);
    assert_eq!(app.stats("q").await["dead"], 1);
}

#[tokio::test]
async fn nack_rejects_an_error_above_2000_characters() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let answer = nack(&app, "q", &leased, json!({"error": "e".repeat(2001)})).await;
    assert_invalid_field(&answer, "error");
    assert_eq!(app.snapshot().await, before);
    let long = "é".repeat(2000);
    let answer = nack(&app, "q", &leased, json!({"error": long})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["last_error"], json!(long));
}

#[tokio::test]
async fn nack_with_a_wrong_token_is_lease_lost_and_unknown_is_not_found() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let stale = json!({"id": id_of(&leased), "lease_token": "stale"});
    let answer = nack(&app, "q", &stale, json!({"dead": true, "error": "x"})).await;
    assert_problem(&answer, StatusCode::CONFLICT, "lease_lost");
    let ghost = json!({"id": "ghost", "lease_token": "t"});
    assert_problem(
        &nack(&app, "q", &ghost, json!({})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(app.snapshot().await, before);
    let stored = app.job("q", id_of(&leased)).await.body;
    assert_eq!(
        (stored["state"].clone(), stored["attempts"].clone()),
        (json!("processing"), json!(0))
    );
    assert!(stored["last_error"].is_null());
}
