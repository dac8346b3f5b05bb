//! Enqueue many.

use super::*;

#[tokio::test]
async fn batch_answers_the_jobs_in_request_order_with_created_flags() {
    let app = spawn_app().await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "a", "priority": 3},
                {"task": "b", "args": {"n": 2}},
                {"task": "c", "delay_ms": 60000},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    let tasks: Vec<_> = jobs.iter().map(|j| j["task"].clone()).collect();
    assert_eq!(tasks, [json!("a"), json!("b"), json!("c")]);
    assert!(jobs.iter().all(|j| j["created"] == true), "{jobs:?}");
    assert_eq!(jobs[0]["priority"], 3);
    assert_eq!(jobs[1]["priority"], 1);
    assert_eq!(jobs[1]["args"], json!({"n": 2}));
    assert_eq!(jobs[2]["state"], "scheduled");
    assert_eq!(ids_of(jobs).into_iter().collect::<HashSet<_>>().len(), 3);
    for job in jobs {
        let stored = app.job("q", id_of(job)).await;
        assert_eq!(stored.status, StatusCode::OK, "{stored:?}");
        assert_eq!(stored.body["task"], job["task"]);
    }
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["scheduled"].clone()),
        (json!(2), json!(1))
    );
}

#[tokio::test]
async fn batch_repeating_a_client_id_creates_one_job() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "known", "id": "old"}))
        .await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "first", "id": "dup"},
                {"task": "other"},
                {"task": "second", "id": "dup", "priority": 9},
                {"task": "again", "id": "old"},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    let created: Vec<_> = jobs.iter().map(|j| j["created"].clone()).collect();
    assert_eq!(
        created,
        [json!(true), json!(true), json!(false), json!(false)]
    );
    assert_eq!(jobs[2]["id"], "dup");
    assert_eq!(jobs[2]["task"], "first");
    assert_eq!(jobs[2]["priority"], 1);
    assert_eq!(jobs[3]["task"], "known");
    assert_eq!(app.stats("q").await["pending"], 3, "old, dup and other");
}

#[tokio::test]
async fn batch_with_one_invalid_job_is_rejected_whole_naming_its_index() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "existing"})).await;
    let before = app.snapshot().await;
    let good = json!({"task": "ok"});
    let cases = [
        (
            json!([good, {"task": "t", "priority": 256}]),
            "jobs[1].priority",
        ),
        (json!([good, good, {"task": ""}]), "jobs[2].task"),
        (
            json!([good, {"task": "t", "max_attempts": 0}]),
            "jobs[1].max_attempts",
        ),
        (
            json!([{"task": "t", "id": "no spaces"}, good]),
            "jobs[0].id",
        ),
        (
            json!([good, {"task": "t", "delay_ms": 2_592_000_001_u64}]),
            "jobs[1].delay_ms",
        ),
    ];
    for (jobs, field) in cases {
        let answer = app
            .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_invalid_field(&answer, field);
    }
    // Args no JSON reader takes back (serde_json's `json!` cannot build them).
    let answer = post_raw(
        &app,
        app.queue_url("q", "/jobs/batch"),
        Some("application/json"),
        r#"{"jobs": [{"task": "ok"}, {"task": "ok"}, {"task": "t", "args": [-1e400]}]}"#,
    )
    .await;
    assert_invalid_field(&answer, "jobs[2].args");
    // A job without a task: the field names the index.
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [good, {"args": {}}]}),
        )
        .await;
    assert_problem(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
    let field = answer.body["field"].as_str().expect("field");
    assert_eq!(field, "jobs[1].task", "{answer:?}");
    assert!(
        answer.body["detail"]
            .as_str()
            .expect("detail")
            .contains("task"),
        "{answer:?}"
    );

    assert_eq!(
        app.snapshot().await,
        before,
        "a rejected batch enqueued something"
    );
}

#[tokio::test]
async fn batch_must_hold_1_to_1000_jobs() {
    let app = spawn_app().await;
    let url = app.queue_url("q", "/jobs/batch");
    let empty = app.post(url.clone(), json!({"jobs": []})).await;
    assert_invalid_field(&empty, "jobs");
    let jobs: Vec<Value> = (0..1001)
        .map(|i| json!({"task": format!("t{i}")}))
        .collect();
    let too_many = app.post(url.clone(), json!({"jobs": jobs})).await;
    assert_invalid_field(&too_many, "jobs");
    let missing = app.post(url.clone(), json!({})).await;
    assert_invalid_field(&missing, "jobs");
    assert!(
        app.snapshot().await.is_empty(),
        "a rejected batch wrote something"
    );

    let full = app.post(url, json!({"jobs": &jobs[..1000]})).await;
    assert_eq!(full.status, StatusCode::OK, "{full:?}");
    assert_eq!(full.body["jobs"].as_array().expect("jobs").len(), 1000);
    assert_eq!(full.body["jobs"][999]["task"], "t999");
    assert_eq!(app.stats("q").await["pending"], 1000);
}

#[tokio::test]
async fn batch_fifo_inside_a_priority_follows_request_order() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "a", "priority": 2},
                {"task": "b", "priority": 0},
                {"task": "c", "priority": 2},
                {"task": "d", "priority": 0},
                {"task": "e", "priority": 2},
                {"task": "f", "priority": 2},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let mut claimed = Vec::new();
    while let Some(job) = app.claim_one("q").await {
        claimed.push(job["task"].as_str().expect("task").to_owned());
    }
    assert_eq!(claimed, ["b", "d", "a", "c", "e", "f"]);
}
