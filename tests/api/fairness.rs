//! Groups: fair sharing inside a priority class, weights, and caps per
//! group; and the queue settings that brake a queue: pause, max in
//! flight, rate limit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;

use prioq::config::Config;

use crate::support::app::{
    a_long_poll_waits_for_the_next_token, configure, enqueue_many, patch_settings,
};
use crate::support::{TestApp, spawn_app, spawn_app_with, test_config, until};

/// Claims up to `count` jobs one request at a time; answers their ids in
/// claim order.
async fn claim_ids(app: &TestApp, queue: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    while ids.len() < count {
        let jobs = app.claim(queue, json!({"max_jobs": 1})).await;
        let Some(job) = jobs.first() else { break };
        ids.push(job["id"].as_str().expect("id").to_owned());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_flooding_a_class_delays_another_group_by_about_one_job_each() {
    check_fair_share(test_config()).await;
}

pub(crate) async fn check_fair_share(config: Config) {
    let app = spawn_app_with(config).await;
    enqueue_many(&app, "q", Some("big"), 3, "big-", 100_000).await;
    enqueue_many(&app, "q", Some("small"), 3, "small-", 10).await;
    let ids = claim_ids(&app, "q", 20).await;
    let small: Vec<&String> = ids.iter().filter(|id| id.starts_with("small-")).collect();
    assert_eq!(
        small.len(),
        10,
        "the small group's jobs within the first 20: {ids:?}"
    );
    // FIFO inside each group.
    let expected: Vec<String> = (0..10).map(|n| format!("small-{n}")).collect();
    assert_eq!(small, expected.iter().collect::<Vec<_>>());
    let big: Vec<&String> = ids.iter().filter(|id| id.starts_with("big-")).collect();
    let expected: Vec<String> = (0..big.len()).map(|n| format!("big-{n}")).collect();
    assert_eq!(big, expected.iter().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_without_a_group_share_with_groups_as_one_group() {
    let app = spawn_app().await;
    enqueue_many(&app, "q", None, 1, "plain-", 1000).await;
    enqueue_many(&app, "q", Some("g"), 1, "g-", 5).await;
    let ids = claim_ids(&app, "q", 10).await;
    assert_eq!(
        ids.iter().filter(|id| id.starts_with("g-")).count(),
        5,
        "{ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_share_a_class_in_proportion() {
    check_weights(test_config()).await;
}

pub(crate) async fn check_weights(config: Config) {
    let app = spawn_app_with(config).await;
    configure(&app, "q", json!({"group_weights": {"heavy": 3}})).await;
    enqueue_many(&app, "q", Some("heavy"), 1, "h-", 400).await;
    enqueue_many(&app, "q", Some("light"), 1, "l-", 400).await;
    let ids = claim_ids(&app, "q", 200).await;
    let heavy = ids.iter().filter(|id| id.starts_with("h-")).count();
    assert!(
        (148..=152).contains(&heavy),
        "3:1 over 200 claims, got {heavy} heavy"
    );
    // The light group is not starved either way.
    let light = ids.len() - heavy;
    assert!((48..=52).contains(&light), "{light} light");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_comes_before_fairness_and_one_group_keeps_exact_fifo() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    // Interleaved arrivals of one group over three classes, and another
    // group's more urgent jobs after them.
    let mut expected_by_class: BTreeMap<u8, Vec<String>> = BTreeMap::new();
    for n in 0..30 {
        let priority = [5u8, 2, 9][n % 3];
        let id = format!("a-{n}");
        app.enqueue(
            "q",
            json!({"task": "t", "id": id, "priority": priority, "group": "a"}),
        )
        .await;
        expected_by_class.entry(priority).or_default().push(id);
    }
    enqueue_many(&app, "q", Some("b"), 0, "urgent-", 5).await;
    let ids = claim_ids(&app, "q", 35).await;
    let expected: Vec<String> = (0..5)
        .map(|n| format!("urgent-{n}"))
        .chain(expected_by_class.into_values().flatten())
        .collect();
    assert_eq!(ids, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bulk_floor_takes_the_least_urgent_class_in_its_fair_order() {
    let mut config = test_config();
    config.bulk_floor = 0.5;
    let app = spawn_app_with(config).await;
    enqueue_many(&app, "q", Some("big"), 9, "big-", 100).await;
    enqueue_many(&app, "q", Some("small"), 9, "small-", 2).await;
    enqueue_many(&app, "q", None, 0, "urgent-", 100).await;
    let ids = claim_ids(&app, "q", 8).await;
    let bulk: Vec<&String> = ids.iter().filter(|id| !id.starts_with("urgent-")).collect();
    assert_eq!(bulk, ["big-0", "small-0", "big-1", "small-1"], "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_cap_holds_under_concurrent_claimers_on_two_instances() {
    check_group_cap(test_config()).await;
}

pub(crate) async fn check_group_cap(config: Config) {
    let a = Arc::new(spawn_app_with(config.clone()).await);
    let b = Arc::new(spawn_app_with(config).await);
    configure(&a, "q", json!({"group_max_in_flight": 3})).await;
    enqueue_many(&a, "q", Some("busy"), 1, "busy-", 1000).await;
    enqueue_many(&a, "q", Some("other"), 1, "other-", 1000).await;
    // Behind both big groups: a group of one job, never blocked by them.
    enqueue_many(&a, "q", Some("late"), 1, "late-", 1).await;
    // Fifty claimers that hold what they get, until nothing more comes.
    let claimers: Vec<_> = (0..50)
        .map(|n| {
            let app = Arc::clone(if n % 2 == 0 { &a } else { &b });
            tokio::spawn(async move {
                let mut held = Vec::new();
                loop {
                    let jobs = app.claim("q", json!({"max_jobs": 1 + n % 3})).await;
                    if jobs.is_empty() {
                        return held;
                    }
                    held.extend(jobs);
                }
            })
        })
        .collect();
    let mut held = Vec::new();
    for claimer in claimers {
        held.extend(claimer.await.expect("claimer"));
    }
    let mut by_group: BTreeMap<String, usize> = BTreeMap::new();
    for job in &held {
        *by_group
            .entry(job["group"].as_str().expect("group").to_owned())
            .or_default() += 1;
    }
    assert_eq!(
        by_group,
        BTreeMap::from([("busy".into(), 3), ("late".into(), 1), ("other".into(), 3)]),
    );
    let groups = a.get(a.queue_url("q", "/groups")).await.body;
    assert_eq!(
        groups["groups"],
        // Ties in pending go by group, descending.
        json!([
            {"group": "other", "pending": 997, "processing": 3, "weight": 1},
            {"group": "busy", "pending": 997, "processing": 3, "weight": 1},
            {"group": "late", "pending": 0, "processing": 1, "weight": 1},
        ])
    );
    // A slot freed on one instance is taken on the other, by the capped
    // group's next job.
    let busy = held
        .iter()
        .find(|job| job["group"] == "busy")
        .expect("a busy job");
    assert_eq!(a.ack("q", busy).await.status, StatusCode::NO_CONTENT);
    let next = b.claim("q", json!({"max_jobs": 5})).await;
    assert_eq!(next.len(), 1, "{next:?}");
    // Its oldest waiting job; in a sharded queue, the oldest of the shard
    // whose slot was freed.
    if a.stats("q").await["shards"] == 1 {
        assert_eq!(next[0]["id"], "busy-3");
    } else {
        assert_eq!(next[0]["group"], "busy");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_a_group_cap_lets_its_jobs_out_again() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"group_max_in_flight": 1})).await;
    enqueue_many(&app, "q", Some("g"), 1, "g-", 5).await;
    assert_eq!(claim_ids(&app, "q", 5).await, ["g-0"]);
    configure(&app, "q", json!({"group_max_in_flight": null})).await;
    // The sweeper gives the group its head back.
    let ids = std::sync::Mutex::new(Vec::new());
    until(
        Duration::from_secs(5),
        "the group's jobs come out",
        || async {
            let got = claim_ids(&app, "q", 4).await;
            let mut ids = ids.lock().expect("ids");
            ids.extend(got);
            ids.len() == 4
        },
    )
    .await;
    assert_eq!(ids.into_inner().expect("ids"), ["g-1", "g-2", "g-3", "g-4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_jobs_deleted_nacked_or_taken_back_keep_their_group_whole() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    enqueue_many(&app, "q", Some("g"), 1, "g-", 4).await;
    // The head and a job behind it, deleted.
    for id in ["g-0", "g-2"] {
        let answer = app
            .send(app.http.delete(app.queue_url("q", &format!("/jobs/{id}"))))
            .await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT);
    }
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["groups"].clone()),
        (json!(2), json!(1))
    );
    let first = app.claim("q", json!({"lease_ms": 200})).await;
    assert_eq!(first[0]["id"], "g-1");
    assert_eq!(first[0]["group"], "g");
    // Nacked: back behind the group's other job.
    let nacked = app
        .post(
            app.queue_url("q", "/jobs/g-1/nack"),
            json!({"lease_token": first[0]["lease_token"]}),
        )
        .await;
    assert_eq!(nacked.body["state"], "pending");
    assert_eq!(nacked.body["group"], "g");
    let next = app.claim("q", json!({"lease_ms": 200})).await;
    assert_eq!(next[0]["id"], "g-3");
    // Taken back by the sweeper: pending again, in its group.
    app.wait_for_job("q", "g-3", Duration::from_secs(5), |job| {
        job["state"] == "pending"
    })
    .await;
    assert_eq!(claim_ids(&app, "q", 2).await, ["g-1", "g-3"]);
    let groups = app.get(app.queue_url("q", "/groups")).await.body;
    assert_eq!(
        groups["groups"],
        json!([{"group": "g", "pending": 0, "processing": 2, "weight": 1}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_on_one_instance_holds_claims_on_another_and_resume_wakes_them() {
    check_pause(test_config()).await;
}

pub(crate) async fn check_pause(config: Config) {
    let a = spawn_app_with(config.clone()).await;
    let b = Arc::new(spawn_app_with(config).await);
    a.enqueue("q", json!({"task": "t", "id": "held"})).await;
    let paused = a.post(a.queue_url("q", "/pause"), Value::Null).await;
    assert_eq!(
        (paused.status, &paused.body["paused"]),
        (StatusCode::OK, &json!(true))
    );
    assert!(
        b.claim("q", json!({})).await.is_empty(),
        "a paused queue hands out nothing"
    );
    assert_eq!(b.stats("q").await["paused"], true);
    // Enqueue and ack go on while paused.
    a.enqueue("q", json!({"task": "t", "id": "more"})).await;
    let waiting = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let started = Instant::now();
            (
                b.claim("q", json!({"wait_ms": 15_000})).await,
                started.elapsed(),
            )
        })
    };
    b.until_long_polls_wait(1).await;
    let resumed = a.post(a.queue_url("q", "/resume"), Value::Null).await;
    assert_eq!(resumed.body["paused"], false);
    let (jobs, took) = waiting.await.expect("joins");
    assert_eq!(jobs[0]["id"], "held");
    assert!(
        took < Duration::from_secs(3),
        "woken by the resume, not a recheck: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_holds_the_queue_and_a_freed_slot_wakes_a_long_poll() {
    let app = Arc::new(spawn_app().await);
    configure(&app, "q", json!({"max_in_flight": 2})).await;
    enqueue_many(&app, "q", None, 1, "j-", 5).await;
    let held = app.claim("q", json!({"max_jobs": 5})).await;
    assert_eq!(held.len(), 2);
    assert!(app.claim("q", json!({})).await.is_empty());
    let waiting = {
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let started = Instant::now();
            (
                app.claim("q", json!({"wait_ms": 15_000})).await,
                started.elapsed(),
            )
        })
    };
    app.until_long_polls_wait(1).await;
    assert_eq!(app.ack("q", &held[0]).await.status, StatusCode::NO_CONTENT);
    let (jobs, took) = waiting.await.expect("joins");
    assert_eq!(jobs[0]["id"], "j-2");
    assert!(
        took < Duration::from_secs(3),
        "woken by the freed slot, not a recheck: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rate_limit_bounds_what_the_fleet_hands_out_over_a_window() {
    check_rate_limit(test_config()).await;
}

pub(crate) async fn check_rate_limit(config: Config) {
    let a = Arc::new(spawn_app_with(config.clone()).await);
    let b = Arc::new(spawn_app_with(config).await);
    enqueue_many(&a, "q", None, 1, "j-", 2000).await;
    let (rate, burst) = (40.0, 10.0);
    configure(
        &a,
        "q",
        json!({"rate_limit": {"per_second": rate, "burst": burst as u64}}),
    )
    .await;
    let started = Instant::now();
    let window = Duration::from_millis(1500);
    let claimers: Vec<_> = (0..8)
        .map(|n| {
            let app = Arc::clone(if n % 2 == 0 { &a } else { &b });
            tokio::spawn(async move {
                let mut got = 0;
                while started.elapsed() < window {
                    got += app
                        .claim("q", json!({"max_jobs": 3, "wait_ms": 100}))
                        .await
                        .len();
                }
                got
            })
        })
        .collect();
    let mut handed = 0;
    for claimer in claimers {
        handed += claimer.await.expect("claimer");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let bound = burst + rate * elapsed;
    assert!(
        (handed as f64) <= bound,
        "{handed} handed out in {elapsed:.2} s; bound {bound:.1}"
    );
    assert!(
        (handed as f64) >= 0.8 * (burst + rate * window.as_secs_f64()),
        "{handed} handed out in {elapsed:.2} s: far below the limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_long_poll_sleeps_until_its_next_token() {
    let app = spawn_app().await;
    enqueue_many(&app, "q", None, 1, "j-", 10).await;
    configure(
        &app,
        "q",
        json!({"rate_limit": {"per_second": 2.0, "burst": 1}}),
    )
    .await;
    a_long_poll_waits_for_the_next_token(&app, "q").await;
}

#[tokio::test]
async fn settings_merge_patches_field_by_field() {
    let app = spawn_app().await;
    let defaults = app.get(app.queue_url("fresh", "/settings")).await.body;
    assert_eq!(
        defaults,
        json!({"paused": false, "max_in_flight": null, "rate_limit": null,
               "group_weights": {}, "group_max_in_flight": null, "group_rate_limit": null, "max_wait_ms": null, "max_pending": null,
               "max_pending_bytes": null, "retain_ms": 0, "history_ms": 0, "shards": 1})
    );
    configure(
        &app,
        "q",
        json!({"max_in_flight": 5, "group_weights": {"a": 2, "b": 3}}),
    )
    .await;
    configure(
        &app,
        "q",
        json!({"rate_limit": {"per_second": 2.5, "burst": 3}, "retain_ms": 60_000}),
    )
    .await;
    let merged = configure(
        &app,
        "q",
        json!({"rate_limit": {"burst": 7}, "group_weights": {"a": null, "c": 1}}),
    )
    .await;
    assert_eq!(
        merged,
        json!({"paused": false, "max_in_flight": 5, "rate_limit": {"per_second": 2.5, "burst": 7},
               "group_weights": {"b": 3, "c": 1}, "group_max_in_flight": null,
               "group_rate_limit": null, "max_wait_ms": null, "max_pending": null, "max_pending_bytes": null, "retain_ms": 60_000, "history_ms": 0, "shards": 1})
    );
    assert_eq!(app.get(app.queue_url("q", "/settings")).await.body, merged);
    let reset = configure(
        &app,
        "q",
        json!({"max_in_flight": null, "rate_limit": null, "group_weights": null, "retain_ms": null}),
    )
    .await;
    assert_eq!(reset, defaults);
}

#[tokio::test]
async fn a_weight_of_one_is_kept_shown_and_counted() {
    let app = spawn_app().await;
    let set = configure(&app, "q", json!({"group_weights": {"x": 100, "y": 1}})).await;
    assert_eq!(set["group_weights"], json!({"x": 100, "y": 1}));
    let ones: serde_json::Map<String, Value> =
        (0..10_000).map(|n| (format!("g{n}"), json!(1))).collect();
    let all = configure(&app, "all", json!({"group_weights": ones})).await;
    assert_eq!(
        all["group_weights"].as_object().expect("weights").len(),
        10_000
    );
    let more = patch_settings(&app, "all", json!({"group_weights": {"one-more": 1}})).await;
    assert_eq!(more.status, StatusCode::UNPROCESSABLE_ENTITY, "{more:?}");
    assert_eq!(more.body["field"], "group_weights", "{more:?}");
}

#[tokio::test]
async fn invalid_settings_are_refused_naming_the_field_and_change_nothing() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_in_flight": 5})).await;
    let before = app.snapshot().await;
    let too_many: serde_json::Map<String, Value> =
        (0..10_001).map(|n| (format!("g{n}"), json!(2))).collect();
    for (patch, field) in [
        (json!({"max_in_flight": 0}), "max_in_flight"),
        (json!({"max_in_flight": 1_000_001}), "max_in_flight"),
        (json!({"shards": 0}), "shards"),
        (json!({"shards": 65}), "shards"),
        (json!({"max_in_flight": "5"}), "max_in_flight"),
        (json!({"paused": 1}), "paused"),
        (
            json!({"group_max_in_flight": 100_001}),
            "group_max_in_flight",
        ),
        (
            json!({"rate_limit": {"per_second": 0, "burst": 1}}),
            "rate_limit.per_second",
        ),
        (
            json!({"rate_limit": {"per_second": 0.0009, "burst": 1}}),
            "rate_limit.per_second",
        ),
        (
            json!({"group_rate_limit": {"per_second": 0.0009, "burst": 1}}),
            "group_rate_limit.per_second",
        ),
        (
            json!({"rate_limit": {"per_second": 2, "burst": 0}}),
            "rate_limit.burst",
        ),
        (json!({"rate_limit": {"burst": 3}}), "rate_limit.per_second"),
        (
            json!({"rate_limit": {"per_second": 2, "burst": 1, "every": 1}}),
            "rate_limit.every",
        ),
        (json!({"group_weights": {"a": 101}}), "group_weights.a"),
        (json!({"group_weights": {"a b": 2}}), "group_weights.a b"),
        (json!({"group_weights": too_many}), "group_weights"),
        (json!({"max_in_flight": 6, "paused_": true}), "paused_"),
        (
            json!({"rate_limit": {"per_second": "1", "burst": 1}}),
            "rate_limit.per_second",
        ),
        (json!({"rate_limit": [1, 1]}), "rate_limit"),
        (json!([]), "(body)"),
        (json!([5]), "(body)"),
        (json!(42), "(body)"),
        (json!("paused"), "(body)"),
        (json!(null), "(body)"),
    ] {
        let answer = patch_settings(&app, "q", patch).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {answer:?}"
        );
        assert_eq!(answer.body["field"], field, "{answer:?}");
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused patch changed Redis"
    );
}

#[tokio::test]
async fn the_groups_list_pages_most_pending_first_and_metrics_show_the_deepest() {
    let app = spawn_app().await;
    for n in 0..25usize {
        enqueue_many(
            &app,
            "q",
            Some(&format!("g{n:02}")),
            1,
            &format!("g{n:02}-"),
            n + 1,
        )
        .await;
    }
    configure(&app, "q", json!({"group_weights": {"g24": 7}})).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let query = match &cursor {
            Some(cursor) => format!("/groups?limit=10&cursor={cursor}"),
            None => "/groups?limit=10".to_owned(),
        };
        let page = app.get(app.queue_url("q", &query)).await.body;
        seen.extend(page["groups"].as_array().expect("groups").iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 25);
    assert_eq!(
        seen[0],
        json!({"group": "g24", "pending": 25, "processing": 0, "weight": 7})
    );
    let pending: Vec<u64> = seen
        .iter()
        .map(|g| g["pending"].as_u64().expect("n"))
        .collect();
    assert!(pending.windows(2).all(|w| w[0] >= w[1]), "{pending:?}");
    assert_eq!(app.stats("q").await["groups"], 25);

    let text = app.metrics().await;
    let shown: BTreeSet<&str> = text
        .lines()
        .filter(|line| line.starts_with("prioq_jobs_group_pending{"))
        .collect();
    assert_eq!(shown.len(), 20, "{text}");
    assert!(text.contains("prioq_jobs_group_pending{queue=\"q\",group=\"g24\"} 25"));
    assert!(text.contains("prioq_queue_paused{queue=\"q\"} 0"));
}

#[tokio::test]
async fn a_claim_for_many_jobs_takes_more_of_a_group_than_its_head() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    enqueue_many(&app, "q", Some("a"), 1, "a-", 3).await;
    enqueue_many(&app, "q", Some("b"), 1, "b-", 1).await;
    let jobs = app.claim("q", json!({"max_jobs": 4})).await;
    let ids: Vec<&str> = jobs
        .iter()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["a-0", "b-0", "a-1", "a-2"]);
}
