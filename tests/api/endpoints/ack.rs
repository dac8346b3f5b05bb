//! Ack.

use super::*;

#[tokio::test]
async fn ack_with_the_current_token_deletes_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "t", "args": {"big": "x"}}),
        json!({}),
    )
    .await;
    let id = id_of(&leased);
    let answer = app.ack("q", &leased).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    assert!(answer.body.is_null(), "204 with a body: {answer:?}");
    assert_problem(&app.job("q", id).await, StatusCode::NOT_FOUND, "not_found");
    assert_problem(
        &app.ack("q", &leased).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let stats = app.stats("q").await;
    for count in ["pending", "scheduled", "processing", "dead"] {
        assert_eq!(stats[count], 0, "{count}: {stats}");
    }
    // Nothing of the job is left in Redis.
    let snapshot = app.snapshot().await;
    assert!(
        snapshot.values().all(|contents| !contents.contains(id)),
        "the acked job left traces: {snapshot:?}"
    );
}

#[tokio::test]
async fn ack_with_a_wrong_token_is_lease_lost_and_leaves_the_job() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({"worker": "w"})).await;
    let id = id_of(&leased);
    let before = app.snapshot().await;
    for token in ["not-the-token", "x"] {
        let answer = app
            .post(
                job_url(&app, "q", id, "/ack"),
                json!({"lease_token": token}),
            )
            .await;
        assert_problem(&answer, StatusCode::CONFLICT, "lease_lost");
    }
    assert_eq!(app.snapshot().await, before);
    let stored = app.job("q", id).await.body;
    assert_eq!(stored["state"], "processing");
    assert_eq!(stored["lease_token"], leased["lease_token"]);
    assert_eq!(app.ack("q", &leased).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn ack_of_an_unknown_job_is_not_found() {
    let app = spawn_app().await;
    let answer = app
        .post(
            job_url(&app, "q", "ghost", "/ack"),
            json!({"lease_token": "t"}),
        )
        .await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn ack_of_a_job_never_claimed_is_lease_lost() {
    let app = spawn_app().await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let before = app.snapshot().await;
    let answer = app
        .post(
            job_url(&app, "q", id_of(&job), "/ack"),
            json!({"lease_token": "guess"}),
        )
        .await;
    assert_problem(&answer, StatusCode::CONFLICT, "lease_lost");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(app.job("q", id_of(&job)).await.body["state"], "pending");
}

#[tokio::test]
async fn ack_body_must_be_json_with_a_lease_token() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let url = job_url(&app, "q", id_of(&leased), "/ack");
    assert_invalid_field(&app.post(url.clone(), json!({})).await, "lease_token");
    let no_type = post_raw(&app, url.clone(), None, r#"{"lease_token": "t"}"#).await;
    assert_problem(
        &no_type,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let malformed = post_raw(&app, url, Some("application/json"), "{").await;
    assert_problem(&malformed, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["state"],
        "processing"
    );
}
