//! Rejected requests.

use super::*;

#[tokio::test]
async fn rejected_requests_change_nothing() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "boom").await;
    let leased = enqueue_and_claim(
        &app,
        "q",
        json!({"task": "c"}),
        json!({"lease_ms": 600_000}),
    )
    .await;
    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let leased_id = id_of(&leased);
    let token = &leased["lease_token"];
    let before = app.snapshot().await;

    let jobs = app.queue_url("q", "/jobs");
    let rejected = [
        post_raw(&app, jobs.clone(), Some("application/json"), "{\"task\": ").await,
        post_raw(&app, jobs.clone(), Some("text/plain"), r#"{"task": "t"}"#).await,
        app.post(jobs.clone(), json!({"task": "t", "priority": 256})).await,
        app.post(jobs.clone(), json!({"task": "t", "id": "p", "max_attempts": 0})).await,
        app.post(app.queue_url("q", "/jobs/batch"), json!({"jobs": [{"task": "ok"}, {"task": ""}]}))
            .await,
        app.post(app.queue_url("q", "/claim"), json!({"max_jobs": 0})).await,
        app.post(app.queue_url("q", "/ack"), json!({"jobs": []})).await,
        app.post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": leased_id, "lease_token": token}, {"id": "", "lease_token": "t"}]}),
        )
        .await,
        app.post(job_url(&app, "q", leased_id, "/ack"), json!({"lease_token": "stale"})).await,
        app.post(job_url(&app, "q", id_of(&pending), "/ack"), json!({"lease_token": "stale"})).await,
        app.post(job_url(&app, "q", id_of(&dead), "/ack"), json!({"lease_token": "stale"})).await,
        extend(&app, "q", leased_id, &json!("stale"), 60_000).await,
        extend(&app, "q", leased_id, token, 99).await,
        nack(&app, "q", &json!({"id": leased_id, "lease_token": "stale"}), json!({"dead": true})).await,
        nack(&app, "q", &leased, json!({"error": "e".repeat(2001)})).await,
        nack(&app, "q", &leased, json!({"delay_ms": 2_592_000_001_u64})).await,
        delete(&app, job_url(&app, "q", leased_id, "")).await,
        delete(&app, app.queue_url("q", &format!("/dlq/{}", id_of(&pending)))).await,
        post_empty(&app, app.queue_url("q", &format!("/dlq/{}/requeue", id_of(&pending)))).await,
        post_empty(&app, app.queue_url("q", &format!("/dlq/{leased_id}/requeue"))).await,
        dlq_page(&app, "q", "?limit=0").await,
        // Arrays are not objects, though serde's structs would take their
        // fields in order.
        app.post(jobs.clone(), json!(["t"])).await,
        app.post(app.queue_url("q", "/jobs/batch"), json!({"jobs": [["t"]]})).await,
        app.post(app.queue_url("q", "/claim"), json!([])).await,
        app.post(app.queue_url("q", "/claim"), json!({"ack": [[leased_id, token]]})).await,
        app.post(app.queue_url("q", "/ack"), json!({"jobs": [[leased_id, token]]})).await,
        app.post(job_url(&app, "q", leased_id, "/ack"), json!([token])).await,
    ];
    for answer in &rejected {
        assert!(answer.status.is_client_error(), "not rejected: {answer:?}");
        answer.problem_code();
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected request changed Redis"
    );
    assert_eq!(
        app.ack("q", &leased).await.status,
        StatusCode::NO_CONTENT,
        "the lease still holds"
    );
}

/// Every route that reads a JSON body, with a valid body for a leased job
/// `leased` (in queue "q") and a dead job `dead`.
fn json_routes(app: &TestApp, leased: &Value, dead: &Value) -> Vec<(String, Value)> {
    let token = &leased["lease_token"];
    let id = id_of(leased);
    vec![
        (app.queue_url("q", "/jobs"), json!({"task": "t"})),
        (
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "t"}]}),
        ),
        (app.queue_url("q", "/claim"), json!({"max_jobs": 1})),
        (job_url(app, "q", id, "/ack"), json!({"lease_token": token})),
        (
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id, "lease_token": token}]}),
        ),
        (
            job_url(app, "q", id, "/extend"),
            json!({"lease_token": token}),
        ),
        (
            job_url(app, "q", id, "/nack"),
            json!({"lease_token": token}),
        ),
        (
            app.queue_url("q", &format!("/dlq/{}/requeue", id_of(dead))),
            json!({"priority": 2}),
        ),
    ]
}

#[tokio::test]
async fn json_followed_by_more_characters_is_400_on_every_route() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "x").await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "l"}), json!({})).await;
    let before = app.snapshot().await;
    for (url, body) in json_routes(&app, &leased, &dead) {
        // Both an empty object (fields missing) and a valid body, each with
        // a stray closing brace: the syntax error is what is reported.
        for text in ["{}}".to_owned(), format!("{body}}}"), format!("{body} x")] {
            let answer = post_raw(&app, url.clone(), Some("application/json"), text.clone()).await;
            assert_eq!(
                answer.status,
                StatusCode::BAD_REQUEST,
                "{url} {text}: {answer:?}"
            );
            assert_eq!(answer.problem_code(), "invalid_request", "{url} {text}");
        }
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a malformed body changed Redis"
    );
}

#[tokio::test]
async fn unknown_body_fields_are_refused_naming_them_on_every_route() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "x").await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "l"}), json!({})).await;
    let before = app.snapshot().await;
    for (url, mut body) in json_routes(&app, &leased, &dead) {
        body["priorty"] = json!(0);
        let answer = app.post(url.clone(), body).await;
        assert_invalid_field(&answer, "priorty");
    }
    // Inside a list, the entry's index is named.
    let batch = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "a"}, {"task": "b", "delay": 5000}]}),
        )
        .await;
    assert_invalid_field(&batch, "jobs[1].delay");
    let many = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id_of(&leased), "lease_token": leased["lease_token"], "token": "x"}]}),
        )
        .await;
    assert_invalid_field(&many, "jobs[0].token");
    assert_eq!(app.snapshot().await, before, "a refused body changed Redis");
}

#[tokio::test]
async fn openapi_declares_every_request_body_closed() {
    let app = spawn_app().await;
    let document = app.get(app.url("/openapi.json")).await.body;
    let schemas = document["components"]["schemas"]
        .as_object()
        .expect("schemas");
    for name in [
        "EnqueueRequest",
        "EnqueueBatchRequest",
        "ClaimRequest",
        "AckRequest",
        "AckManyRequest",
        "AckEntry",
        "ExtendRequest",
        "NackRequest",
        "RequeueRequest",
    ] {
        assert_eq!(
            schemas[name]["additionalProperties"],
            json!(false),
            "{name} is not closed"
        );
    }
}
