//! Queues.

use super::*;

#[tokio::test]
async fn queue_stats_count_jobs_by_state_and_priority_class() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    make_dead(&app, "q", json!({"task": "dead", "priority": 0}), "boom").await;
    enqueue_and_claim(&app, "q", json!({"task": "busy", "priority": 0}), json!({})).await;
    let oldest = app.enqueue("q", json!({"task": "a", "priority": 0})).await;
    app.enqueue("q", json!({"task": "b", "priority": 0})).await;
    let oldest_bulk = app.enqueue("q", json!({"task": "c", "priority": 5})).await;
    app.enqueue("q", json!({"task": "d", "priority": 5})).await;
    let last = app.enqueue("q", json!({"task": "e", "priority": 5})).await;
    app.enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;

    let stats = app.stats("q").await;
    // Enqueued after the stats were read: its time bounds the stats' "now".
    let probe = app.enqueue("probe", json!({"task": "t"})).await;
    assert_eq!(stats["queue"], "q");
    assert_eq!(stats["pending"], 5);
    assert_eq!(stats["scheduled"], 1);
    assert_eq!(stats["processing"], 1);
    assert_eq!(stats["expired_leases"], 0);
    assert_eq!(stats["dead"], 1);
    let classes = stats["classes"].as_array().expect("classes");
    let shape: Vec<_> = classes
        .iter()
        .map(|c| (c["priority"].clone(), c["pending"].clone()))
        .collect();
    assert_eq!(
        shape,
        [(json!(0), json!(2)), (json!(5), json!(3))],
        "{stats}"
    );
    for (class, oldest) in classes.iter().zip([&oldest, &oldest_bulk]) {
        let age = class["oldest_age_ms"].as_i64().expect("oldest_age_ms");
        let enqueued = ms_of(&oldest["enqueued_at"]);
        let at_least = ms_of(&last["enqueued_at"]) - enqueued;
        let at_most = ms_of(&probe["enqueued_at"]) - enqueued;
        assert!(
            (at_least..=at_most).contains(&age),
            "age {age} not in {at_least}..={at_most}: {stats}"
        );
    }
}

#[tokio::test]
async fn queue_stats_count_expired_leases() {
    let mut config = test_config();
    // A sweeper that does not run during the test.
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    let leased = enqueue_and_claim(&app, "q", json!({"task": "t"}), json!({"lease_ms": 100})).await;
    assert_recent(&leased["lease_expires_at"]);
    // Only the clock brings the deadline: poll the stats until it has passed.
    let started = tokio::time::Instant::now();
    loop {
        let stats = app.stats("q").await;
        assert_eq!(stats["processing"], 1);
        if stats["expired_leases"] == 1 {
            break;
        }
        assert_eq!(stats["expired_leases"], 0);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the lease never counted as expired: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn never_used_queue_answers_zeros() {
    let app = spawn_app().await;
    let stats = app.stats("never-used").await;
    assert_eq!(
        stats,
        json!({"queue": "never-used", "pending": 0, "scheduled": 0, "processing": 0,
               "expired_leases": 0, "dead": 0, "classes": [], "groups": 0, "paused": false,
               "completed": 0, "waiting": 0, "pending_bytes": null, "shards": 1, "push": null})
    );
    assert!(
        app.snapshot().await.is_empty(),
        "reading stats wrote something"
    );
}

#[tokio::test]
async fn queue_list_names_every_queue_that_had_jobs() {
    let app = spawn_app().await;
    let empty = app.get(app.url("/v1/queues")).await;
    assert_eq!(empty.status, StatusCode::OK, "{empty:?}");
    assert_eq!(empty.body["queues"], json!([]));

    app.enqueue("alpha", json!({"task": "t"})).await;
    app.enqueue("alpha", json!({"task": "t", "priority": 0}))
        .await;
    let leased = enqueue_and_claim(&app, "beta", json!({"task": "t"}), json!({})).await;
    assert_eq!(
        app.ack("beta", &leased).await.status,
        StatusCode::NO_CONTENT
    );
    app.stats("gamma").await;
    assert!(app.claim("delta", json!({})).await.is_empty());
    assert_eq!(dlq_page(&app, "epsilon", "").await.status, StatusCode::OK);

    let answer = app.get(app.url("/v1/queues")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let queues = answer.body["queues"].as_array().expect("queues");
    let names: BTreeSet<_> = queues
        .iter()
        .map(|q| q["queue"].as_str().expect("queue"))
        .collect();
    assert_eq!(names, BTreeSet::from(["alpha", "beta"]), "{answer:?}");
    let alpha = queues
        .iter()
        .find(|q| q["queue"] == "alpha")
        .expect("alpha");
    assert_eq!(without_ages(alpha), without_ages(&app.stats("alpha").await));
    assert_eq!(alpha["pending"], 2);
    assert_eq!(alpha["classes"].as_array().expect("classes").len(), 2);
    let beta = queues.iter().find(|q| q["queue"] == "beta").expect("beta");
    assert_eq!(beta["pending"], 0);
    assert_eq!(beta["processing"], 0);
}

/// Queue stats without the class ages, which move on between two reads.
fn without_ages(stats: &Value) -> Value {
    let mut stats = stats.clone();
    for class in stats["classes"].as_array_mut().expect("classes") {
        class
            .as_object_mut()
            .expect("class")
            .remove("oldest_age_ms");
    }
    stats
}

/// A settings change Redis refuses (here a rate without its burst, which
/// only the function can tell, as it depends on what the queue holds) on a
/// queue nobody used lists nothing and writes nothing; the same change
/// made whole lists the queue.
#[tokio::test]
async fn a_refused_settings_change_lists_no_queue() {
    let app = spawn_app().await;
    let refused = crate::support::app::patch_settings(
        &app,
        "fresh",
        json!({"rate_limit": {"per_second": 5}}),
    )
    .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{refused:?}"
    );
    assert_eq!(refused.body["field"], "rate_limit.burst", "{refused:?}");
    assert!(
        app.snapshot().await.is_empty(),
        "a refused change wrote something"
    );
    let listed = app.get(app.url("/v1/queues")).await;
    assert_eq!(listed.body["queues"], json!([]), "{listed:?}");

    crate::support::app::configure(
        &app,
        "fresh",
        json!({"rate_limit": {"per_second": 5, "burst": 2}}),
    )
    .await;
    let listed = app.get(app.url("/v1/queues")).await;
    assert_eq!(listed.body["queues"][0]["queue"], "fresh", "{listed:?}");
}

#[tokio::test]
async fn scale_answers_the_load_and_the_workers_it_needs() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let never = app.get(app.queue_url("never", "/scale")).await;
    assert_eq!(never.status, StatusCode::OK, "{never:?}");
    assert_eq!(
        never.body,
        json!({"pending": 0, "processing": 0, "oldest_pending_age_ms": 0, "desired_workers": 0})
    );
    for _ in 0..2 {
        enqueue_and_claim(&app, "q", json!({"task": "busy"}), json!({})).await;
    }
    let oldest = app
        .enqueue("q", json!({"task": "old", "priority": 9}))
        .await;
    let mut last = Value::Null;
    for _ in 0..4 {
        last = app.enqueue("q", json!({"task": "t", "priority": 0})).await;
    }
    let answer = app.get(app.queue_url("q", "/scale?per_worker=3")).await;
    // Enqueued after the answer: its time bounds the answer's "now".
    let probe = app.enqueue("probe", json!({"task": "t"})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["pending"], 5);
    assert_eq!(answer.body["processing"], 2);
    // ceil(7 / 3)
    assert_eq!(answer.body["desired_workers"], 3);
    let age = answer.body["oldest_pending_age_ms"].as_i64().expect("age");
    // The oldest job of any class, priority 9's: it had waited at least
    // from its enqueue until the last job came.
    let at_least = ms_of(&last["enqueued_at"]) - ms_of(&oldest["enqueued_at"]);
    let at_most = ms_of(&probe["enqueued_at"]) - ms_of(&oldest["enqueued_at"]);
    assert!(
        (0..=at_most).contains(&age),
        "age {age} not in 0..={at_most}"
    );
    assert!(age >= at_least, "age {age} below {at_least}");
    let per_one = app.get(app.queue_url("q", "/scale")).await;
    assert_eq!(per_one.body["desired_workers"], 7);
    for bad in ["0", "100001"] {
        let refused = app
            .get(app.queue_url("q", &format!("/scale?per_worker={bad}")))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{refused:?}"
        );
        assert_eq!(refused.problem_code(), "validation_failed", "{refused:?}");
    }
}
