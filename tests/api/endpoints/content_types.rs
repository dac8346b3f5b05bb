//! Content types and stale leases on every route.

use super::*;

#[tokio::test]
async fn routes_with_a_json_body_refuse_other_content_types() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let id = id_of(&leased);
    let token = leased["lease_token"].as_str().expect("token");
    let before = app.snapshot().await;
    let routes = [
        (app.queue_url("q", "/jobs"), json!({"task": "t"})),
        (
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "t"}]}),
        ),
        (app.queue_url("q", "/claim"), json!({"max_jobs": 1})),
        (
            job_url(&app, "q", id, "/ack"),
            json!({"lease_token": token}),
        ),
        (
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id, "lease_token": token}]}),
        ),
        (
            job_url(&app, "q", id, "/extend"),
            json!({"lease_token": token, "lease_ms": 1000}),
        ),
        (
            job_url(&app, "q", id, "/nack"),
            json!({"lease_token": token, "dead": true}),
        ),
        (
            app.queue_url("q", &format!("/dlq/{id}/requeue")),
            json!({"priority": 3}),
        ),
    ];
    for (url, body) in routes {
        let body = body.to_string();
        for content_type in [None, Some("text/plain")] {
            let answer = post_raw(&app, url.clone(), content_type, body.clone()).await;
            assert_problem(
                &answer,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
            );
        }
    }
    assert_eq!(app.snapshot().await, before, "a 415 request changed Redis");
}

#[tokio::test]
async fn a_lease_taken_back_by_the_sweeper_is_lost_for_ack_extend_and_nack() {
    let app = spawn_app().await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({"lease_ms": 100})).await;
    let id = id_of(&leased);
    let back = app
        .wait_for_job("q", id, Duration::from_secs(5), |j| j["state"] == "pending")
        .await;
    assert_eq!(back["attempts"], 1, "an expired lease counts as an attempt");
    assert!(back["lease_token"].is_null());
    let before = app.snapshot().await;
    assert_problem(
        &app.ack("q", &leased).await,
        StatusCode::CONFLICT,
        "lease_lost",
    );
    let extended = extend(&app, "q", id, &leased["lease_token"], 60_000).await;
    assert_problem(&extended, StatusCode::CONFLICT, "lease_lost");
    let nacked = nack(&app, "q", &leased, json!({"dead": true})).await;
    assert_problem(&nacked, StatusCode::CONFLICT, "lease_lost");
    let many = app
        .post(
            app.queue_url("q", "/ack"),
            json!({"jobs": [{"id": id, "lease_token": leased["lease_token"]}]}),
        )
        .await;
    assert_eq!(many.body["results"][0]["status"], 409, "{many:?}");
    assert_eq!(many.body["results"][0]["code"], "lease_lost", "{many:?}");
    assert_eq!(app.snapshot().await, before);
    let stored = app.job("q", id).await.body;
    assert_eq!(
        (stored["state"].clone(), stored["attempts"].clone()),
        (json!("pending"), json!(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_enqueues_with_one_client_id_create_one_job() {
    let app = std::sync::Arc::new(spawn_app().await);
    let enqueues: Vec<_> = (0..10)
        .map(|i| {
            let app = std::sync::Arc::clone(&app);
            tokio::spawn(async move {
                app.post(
                    app.queue_url("q", "/jobs"),
                    json!({"task": format!("t{i}"), "id": "same"}),
                )
                .await
            })
        })
        .collect();
    let mut created = 0;
    let mut tasks = HashSet::new();
    for enqueue in enqueues {
        let answer = enqueue.await.expect("enqueue task");
        match answer.status {
            StatusCode::CREATED => created += 1,
            StatusCode::OK => assert_eq!(answer.body["created"], false),
            _ => panic!("{answer:?}"),
        }
        tasks.insert(answer.body["task"].as_str().expect("task").to_owned());
    }
    assert_eq!(created, 1);
    assert_eq!(tasks.len(), 1, "every answer shows the one job: {tasks:?}");
    assert_eq!(app.stats("q").await["pending"], 1);
}

#[tokio::test]
async fn answers_are_json_and_say_so() {
    let app = spawn_app().await;
    let body = json!({"jobs": [{"task": "t", "args": {"n": 1}}, {"task": "t", "args": [2]}]});
    let enqueued = post_raw(
        &app,
        app.queue_url("q", "/jobs/batch"),
        Some("application/json"),
        body.to_string(),
    )
    .await;
    let claimed = post_raw(
        &app,
        app.queue_url("q", "/claim"),
        Some("application/json"),
        json!({"max_jobs": 2}).to_string(),
    )
    .await;
    let health = app.send(app.http.get(app.url("/healthz"))).await;
    for answer in [&enqueued, &claimed, &health] {
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let content_type = answer
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        assert_eq!(content_type, Some("application/json"), "{answer:?}");
    }
    let args: Vec<&Value> = claimed.body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| &job["args"])
        .collect();
    assert_eq!(args, [&json!({"n": 1}), &json!([2])]);
}
