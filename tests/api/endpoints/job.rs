//! Job: GET and DELETE.

use super::*;

#[tokio::test]
async fn get_job_shows_every_state() {
    let app = spawn_app().await;
    let pending = app.enqueue("q", json!({"task": "p", "priority": 5})).await;
    let scheduled = app
        .enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;
    let processing =
        enqueue_and_claim(&app, "r", json!({"task": "c"}), json!({"worker": "w"})).await;
    let dead = make_dead(&app, "d", json!({"task": "d"}), "boom").await;

    let view = app.job("q", id_of(&pending)).await;
    assert_eq!(view.status, StatusCode::OK, "{view:?}");
    assert_eq!(view.body["state"], "pending");
    assert_eq!(view.body["priority"], 5);
    assert_eq!(view.body["queue"], "q");

    let view = app.job("q", id_of(&scheduled)).await.body;
    assert_eq!(view["state"], "scheduled");
    assert_eq!(view["run_at"], scheduled["run_at"]);
    assert_recent(&view["run_at"]);

    let view = app.job("r", id_of(&processing)).await.body;
    assert_eq!(view["state"], "processing");
    assert_eq!(view["lease_token"], processing["lease_token"]);
    assert_eq!(view["lease_expires_at"], processing["lease_expires_at"]);
    assert_eq!(view["worker"], "w");

    let view = app.job("d", id_of(&dead)).await.body;
    assert_eq!(view["state"], "dead");
    assert_eq!(view["dead_at"], dead["dead_at"]);
    assert_eq!(view["last_error"], "boom");

    assert_problem(
        &app.job("q", "ghost").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // Jobs belong to their queue.
    assert_problem(
        &app.job("r", id_of(&pending)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test]
async fn delete_removes_pending_scheduled_and_dead_jobs() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "boom").await;
    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let scheduled = app
        .enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;
    for job in [&pending, &scheduled, &dead] {
        let answer = delete(&app, job_url(&app, "q", id_of(job), "")).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
        assert!(answer.body.is_null());
        assert_problem(
            &app.job("q", id_of(job)).await,
            StatusCode::NOT_FOUND,
            "not_found",
        );
        let again = delete(&app, job_url(&app, "q", id_of(job), "")).await;
        assert_problem(&again, StatusCode::NOT_FOUND, "not_found");
    }
    let stats = app.stats("q").await;
    for count in ["pending", "scheduled", "processing", "dead"] {
        assert_eq!(stats[count], 0, "{count}: {stats}");
    }
    assert!(app.claim("q", json!({})).await.is_empty());
    assert_eq!(dlq_page(&app, "q", "").await.body["total"], 0);

    // A deleted job's client id may be used again.
    let first = app.enqueue("q", json!({"task": "first", "id": "k"})).await;
    let answer = delete(&app, job_url(&app, "q", id_of(&first), "")).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    let again = app.enqueue("q", json!({"task": "again", "id": "k"})).await;
    assert_eq!(
        (again["created"].clone(), again["task"].clone()),
        (json!(true), json!("again"))
    );
}

#[tokio::test]
async fn delete_of_a_processing_job_is_conflict() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let answer = delete(&app, job_url(&app, "q", id_of(&leased), "")).await;
    assert_problem(&answer, StatusCode::CONFLICT, "conflict");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["state"],
        "processing"
    );
    assert_eq!(app.ack("q", &leased).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn delete_of_an_unknown_job_is_not_found() {
    let app = spawn_app().await;
    let answer = delete(&app, job_url(&app, "q", "ghost", "")).await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}
