//! Ack many.

use super::*;

#[tokio::test]
async fn ack_many_answers_each_entry_in_request_order() {
    let app = spawn_app().await;
    let a = enqueue_and_claim(&app, "q", json!({"task": "a"}), json!({})).await;
    let b = enqueue_and_claim(&app, "q", json!({"task": "b"}), json!({})).await;
    let pending = app.enqueue("q", json!({"task": "c"})).await;
    let answer = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [
                {"id": id_of(&a), "lease_token": a["lease_token"]},
                {"id": id_of(&b), "lease_token": "stale"},
                {"id": "ghost", "lease_token": "t"},
                {"id": id_of(&pending), "lease_token": "t"},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body["results"],
        json!([
            {"id": id_of(&a), "status": 204},
            {"id": id_of(&b), "status": 409, "code": "lease_lost"},
            {"id": "ghost", "status": 404, "code": "not_found"},
            {"id": id_of(&pending), "status": 409, "code": "lease_lost"},
        ])
    );
    assert_problem(
        &app.job("q", id_of(&a)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(app.job("q", id_of(&b)).await.body["state"], "processing");
    assert_eq!(app.job("q", id_of(&pending)).await.body["state"], "pending");

    // The same job twice: acked once, then gone.
    let twice = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [
                {"id": id_of(&b), "lease_token": b["lease_token"]},
                {"id": id_of(&b), "lease_token": b["lease_token"]},
            ]}),
        )
        .await;
    assert_eq!(twice.status, StatusCode::OK, "{twice:?}");
    let statuses: Vec<_> = twice.body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(204), json!(404)]);
}

#[tokio::test]
async fn ack_many_must_hold_1_to_1000_valid_entries() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let before = app.snapshot().await;
    let url = app.queue_url("q", "/ack");
    assert_invalid_field(&app.post(url.clone(), json!({"jobs": []})).await, "jobs");
    let too_many: Vec<Value> = (0..1001)
        .map(|i| json!({"id": format!("j{i}"), "lease_token": "t"}))
        .collect();
    assert_invalid_field(
        &app.post(url.clone(), json!({"jobs": too_many})).await,
        "jobs",
    );
    // One bad entry rejects the request, the good entry included.
    let answer = app
        .post(
            url,
            json!({"jobs": [
                {"id": id_of(&leased), "lease_token": leased["lease_token"]},
                {"id": "bad id", "lease_token": "t"},
            ]}),
        )
        .await;
    assert_invalid_field(&answer, "jobs[1].id");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["state"],
        "processing"
    );
}
