//! Extend.

use super::*;

#[tokio::test]
async fn extend_moves_the_deadline_and_keeps_the_token() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "t"}),
        json!({"lease_ms": 10_000, "worker": "w"}),
    )
    .await;
    let id = id_of(&leased);
    let answer = extend(&app, "q", id, &leased["lease_token"], 60_000).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let extended = &answer.body;
    assert_eq!(extended["id"], id);
    assert_eq!(extended["state"], "processing");
    assert_eq!(extended["lease_token"], leased["lease_token"]);
    assert_eq!(extended["worker"], "w");
    let gained = ms_of(&extended["lease_expires_at"]) - ms_of(&leased["lease_expires_at"]);
    assert!(
        (50_000..55_000).contains(&gained),
        "the deadline moved by {gained} ms"
    );
    let stored = app.job("q", id).await.body;
    assert_eq!(stored["lease_expires_at"], extended["lease_expires_at"]);

    // Extending can also shorten: the deadline is now + lease_ms.
    let shorter = extend(&app, "q", id, &leased["lease_token"], 5_000).await;
    assert_eq!(shorter.status, StatusCode::OK, "{shorter:?}");
    assert!(ms_of(&shorter.body["lease_expires_at"]) < ms_of(&extended["lease_expires_at"]));
    assert_eq!(app.ack("q", &leased).await.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn extend_with_a_wrong_token_is_lease_lost_and_unknown_is_not_found() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let id = id_of(&leased);
    let before = app.snapshot().await;
    let wrong = extend(&app, "q", id, &json!("stale"), 60_000).await;
    assert_problem(&wrong, StatusCode::CONFLICT, "lease_lost");
    let unknown = extend(&app, "q", "ghost", &json!("t"), 60_000).await;
    assert_problem(&unknown, StatusCode::NOT_FOUND, "not_found");
    let short = extend(&app, "q", id, &leased["lease_token"], 99).await;
    assert_invalid_field(&short, "lease_ms");
    let long = extend(&app, "q", id, &leased["lease_token"], 43_200_001).await;
    assert_invalid_field(&long, "lease_ms");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.job("q", id).await.body["lease_expires_at"],
        leased["lease_expires_at"]
    );

    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let never_claimed = extend(&app, "q", id_of(&pending), &json!("t"), 60_000).await;
    assert_problem(&never_claimed, StatusCode::CONFLICT, "lease_lost");
}
