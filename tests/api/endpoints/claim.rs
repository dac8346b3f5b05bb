//! Claim.

use super::*;

#[tokio::test]
async fn claim_answers_an_empty_list_when_nothing_is_claimable() {
    let app = spawn_app().await;
    let answer = app
        .post(app.queue_url("never-used", "/claim"), json!({}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["jobs"], json!([]));

    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({})).await;
    let drained = app
        .post(app.queue_url("q", "/claim"), json!({"max_jobs": 10}))
        .await;
    assert_eq!(drained.status, StatusCode::OK, "{drained:?}");
    assert_eq!(
        drained.body["jobs"],
        json!([]),
        "a leased job was handed out again"
    );
    assert_eq!(
        app.job("q", id_of(&leased)).await.body["lease_token"],
        leased["lease_token"]
    );
}

#[tokio::test]
async fn claim_accepts_a_request_without_body_or_content_type() {
    let mut config = test_config();
    config.default_lease_ms = 120_000;
    let app = spawn_app_with(config).await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let answer = post_empty(&app, app.queue_url("q", "/claim")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    assert_eq!(ids_of(jobs), [id_of(&job)]);
    let leased = &jobs[0];
    assert_eq!(leased["state"], "processing");
    assert!(leased["worker"].is_null(), "{leased}");
    // The default lease comes from the configuration.
    let lease = ms_of(&leased["lease_expires_at"]) - ms_of(&job["enqueued_at"]);
    assert!((120_000..125_000).contains(&lease), "lease of {lease} ms");
}

#[tokio::test]
async fn claim_rejects_out_of_range_fields() {
    let app = spawn_app().await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let before = app.snapshot().await;
    let cases = [
        (json!({"lease_ms": 99}), "lease_ms"),
        (json!({"lease_ms": 43_200_001}), "lease_ms"),
        (json!({"max_jobs": 0}), "max_jobs"),
        (json!({"max_jobs": 101}), "max_jobs"),
        (json!({"max_jobs": -1}), "max_jobs"),
        (json!({"wait_ms": 20_001}), "wait_ms"),
        (json!({"worker": "w".repeat(201)}), "worker"),
    ];
    for (body, field) in cases {
        let answer = app.post(app.queue_url("q", "/claim"), body).await;
        assert_invalid_field(&answer, field);
    }
    let wrong_type = post_raw(&app, app.queue_url("q", "/claim"), Some("text/plain"), "{}").await;
    assert_problem(
        &wrong_type,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let malformed = post_raw(
        &app,
        app.queue_url("q", "/claim"),
        Some("application/json"),
        "{",
    )
    .await;
    assert_problem(&malformed, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected claim wrote something"
    );
    assert_eq!(app.job("q", id_of(&job)).await.body["state"], "pending");

    // The bounds themselves are accepted.
    let leased = app
        .claim(
            "q",
            json!({"lease_ms": 43_200_000, "max_jobs": 100, "wait_ms": 0}),
        )
        .await;
    assert_eq!(ids_of(&leased), [id_of(&job)]);
}

#[tokio::test]
async fn claim_with_max_jobs_leases_several_with_their_lease_details() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let mut enqueued = Vec::new();
    for i in 0..5 {
        enqueued.push(app.enqueue("q", json!({"task": format!("t{i}")})).await);
    }
    let leased = app
        .claim(
            "q",
            json!({"worker": "billing-7", "lease_ms": 30_000, "max_jobs": 3}),
        )
        .await;
    assert_eq!(ids_of(&leased), ids_of(&enqueued[..3]), "oldest first");
    let mut tokens = HashSet::new();
    for job in &leased {
        assert_eq!(job["state"], "processing", "{job}");
        assert_eq!(job["worker"], "billing-7", "{job}");
        let token = job["lease_token"].as_str().expect("lease_token");
        assert!(!token.is_empty());
        tokens.insert(token.to_owned());
        let lease = ms_of(&job["lease_expires_at"]) - ms_of(&enqueued[4]["enqueued_at"]);
        assert!(
            (30_000..35_000).contains(&lease),
            "lease of {lease} ms: {job}"
        );
        let stored = app.job("q", id_of(job)).await.body;
        assert_eq!(stored["state"], "processing");
        assert_eq!(stored["lease_token"], job["lease_token"]);
        assert_eq!(stored["lease_expires_at"], job["lease_expires_at"]);
        assert_eq!(stored["worker"], "billing-7");
    }
    assert_eq!(tokens.len(), 3, "lease tokens are distinct");
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["processing"].clone()),
        (json!(2), json!(3))
    );

    let rest = app.claim("q", json!({"max_jobs": 100})).await;
    assert_eq!(ids_of(&rest), ids_of(&enqueued[3..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_never_hand_out_a_job_twice() {
    let app = std::sync::Arc::new(spawn_app().await);
    let jobs: Vec<Value> = (0..60).map(|i| json!({"task": format!("t{i}")})).collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let claims: Vec<_> = (0..12)
        .map(|_| {
            let app = std::sync::Arc::clone(&app);
            tokio::spawn(async move { ids_of(&app.claim("q", json!({"max_jobs": 7})).await) })
        })
        .collect();
    let mut seen = Vec::new();
    for claim in claims {
        seen.extend(claim.await.expect("claim task"));
    }
    let unique: HashSet<_> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a job was handed out twice");
    assert_eq!(seen.len(), 60, "12 claims of 7 cover all 60 jobs");
}

#[tokio::test]
async fn claim_with_wait_answers_as_soon_as_a_job_arrives() {
    let app = std::sync::Arc::new(spawn_app().await);
    let waiting = {
        let app = std::sync::Arc::clone(&app);
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let jobs = app.claim("q", json!({"wait_ms": 10_000})).await;
            (jobs, started.elapsed())
        })
    };
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let (jobs, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&jobs), [id_of(&job)]);
    assert!(
        waited < Duration::from_secs(4),
        "the waiting claim took {waited:?}"
    );
}

/// Starts a claim that waits up to 10 s; answers its jobs and how long it took.
fn waiting_claim(
    app: &std::sync::Arc<TestApp>,
    queue: &'static str,
) -> tokio::task::JoinHandle<(Vec<Value>, Duration)> {
    let app = std::sync::Arc::clone(app);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let jobs = app.claim(queue, json!({"wait_ms": 10_000})).await;
        (jobs, started.elapsed())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_claim_gets_a_delayed_job_as_soon_as_it_is_due() {
    let app = std::sync::Arc::new(spawn_app().await);
    let waiting = waiting_claim(&app, "q");
    let job = app
        .enqueue("q", json!({"task": "t", "delay_ms": 300}))
        .await;
    let (jobs, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&jobs), [id_of(&job)]);
    assert!(
        waited < Duration::from_secs(3),
        "the waiting claim took {waited:?}"
    );
    assert!(
        waited >= Duration::from_millis(250),
        "claimed before it was due: {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_claim_gets_a_requeued_or_nacked_job_promptly() {
    let app = std::sync::Arc::new(spawn_app().await);
    let dead = make_dead(&app, "q", json!({"task": "t"}), "boom").await;
    let waiting = waiting_claim(&app, "q");
    let requeue = post_empty(
        &app,
        app.queue_url("q", &format!("/dlq/{}/requeue", id_of(&dead))),
    )
    .await;
    assert_eq!(requeue.status, StatusCode::OK, "{requeue:?}");
    let (jobs, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&jobs), [id_of(&dead)]);
    assert!(
        waited < Duration::from_secs(3),
        "the waiting claim took {waited:?}"
    );

    let waiting = waiting_claim(&app, "q");
    let answer = nack(&app, "q", &jobs[0], json!({})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let (again, waited) = waiting.await.expect("claim task");
    assert_eq!(ids_of(&again), [id_of(&dead)]);
    assert_eq!(again[0]["attempts"], 1);
    assert!(
        waited < Duration::from_secs(3),
        "the waiting claim took {waited:?}"
    );
}

#[tokio::test]
async fn claim_with_wait_answers_empty_when_the_wait_is_over() {
    let app = spawn_app().await;
    let started = tokio::time::Instant::now();
    let jobs = app.claim("q", json!({"wait_ms": 300})).await;
    let waited = started.elapsed();
    assert!(jobs.is_empty());
    assert!(
        waited >= Duration::from_millis(290),
        "answered after {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "answered after {waited:?}");
}
