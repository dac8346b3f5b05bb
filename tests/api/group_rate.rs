//! The rate limit per group (`group_rate_limit`): each named group's own
//! token bucket, fleet-wide; a group at its limit waits without holding
//! back the others' jobs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::app::{a_long_poll_waits_for_the_next_token, configure, enqueue_many};
use crate::support::{TestApp, spawn_app, spawn_app_with, test_config};

/// Claims one job at a time until a claim finds none; answers how many
/// jobs each group got (`""` for jobs without one).
async fn drain_by_group(app: &TestApp, queue: &str) -> BTreeMap<String, usize> {
    let mut got = BTreeMap::new();
    while let Some(job) = app.claim_one(queue).await {
        let group = job["group"].as_str().unwrap_or_default().to_owned();
        *got.entry(group).or_default() += 1;
    }
    got
}

#[tokio::test]
async fn a_group_at_its_limit_waits_without_holding_back_the_others() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(
        &app,
        "q",
        json!({"group_rate_limit": {"per_second": 0.001, "burst": 2}}),
    )
    .await;
    // The flooding group comes first in every class: the others' jobs wait
    // behind its heads until it is held back.
    enqueue_many(&app, "q", Some("flood"), 0, "f-", 50).await;
    enqueue_many(&app, "q", Some("a"), 1, "a-", 5).await;
    enqueue_many(&app, "q", Some("b"), 1, "b-", 5).await;
    enqueue_many(&app, "q", None, 2, "n-", 5).await;
    let got = drain_by_group(&app, "q").await;
    let expected: BTreeMap<String, usize> = [("flood", 2), ("a", 2), ("b", 2), ("", 5)]
        .into_iter()
        .map(|(group, n)| (group.to_owned(), n))
        .collect();
    assert_eq!(got, expected);
    let stats = app.stats("q").await;
    assert_eq!(stats["pending"], json!(50 - 2 + 3 + 3), "{stats}");
}

#[tokio::test]
async fn a_claim_of_many_spends_a_group_s_tokens_as_claims_of_one_would() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(
        &app,
        "q",
        json!({"group_rate_limit": {"per_second": 0.001, "burst": 3}}),
    )
    .await;
    enqueue_many(&app, "q", Some("g"), 0, "g-", 20).await;
    enqueue_many(&app, "q", Some("h"), 1, "h-", 20).await;
    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    let ids: Vec<&str> = jobs
        .iter()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["g-0", "g-1", "g-2", "h-0", "h-1", "h-2"]);
}

/// Two instances claim as fast as they can from two groups limited to 20
/// jobs a second, burst 5: over any window each group gets at most
/// burst + rate × t jobs, and its tokens keep coming.
pub(crate) async fn check_group_rate_fleet_wide(config: Config) {
    let a = Arc::new(spawn_app_with(config.clone()).await);
    let b = Arc::new(spawn_app_with(config).await);
    let (rate, burst) = (20.0, 5.0);
    configure(
        &a,
        "q",
        json!({"group_rate_limit": {"per_second": rate, "burst": burst as u64}}),
    )
    .await;
    enqueue_many(&a, "q", Some("x"), 1, "x-", 500).await;
    enqueue_many(&a, "q", Some("y"), 1, "y-", 500).await;
    let started = Instant::now();
    let window = Duration::from_millis(1500);
    let claimers: Vec<_> = (0..6)
        .map(|n| {
            let app = Arc::clone(if n % 2 == 0 { &a } else { &b });
            tokio::spawn(async move {
                let mut got: BTreeMap<String, usize> = BTreeMap::new();
                while started.elapsed() < window {
                    for job in app.claim("q", json!({"max_jobs": 2, "wait_ms": 100})).await {
                        let group = job["group"].as_str().expect("group").to_owned();
                        *got.entry(group).or_default() += 1;
                    }
                }
                got
            })
        })
        .collect();
    let mut handed: BTreeMap<String, usize> = BTreeMap::new();
    for claimer in claimers {
        for (group, n) in claimer.await.expect("claimer") {
            *handed.entry(group).or_default() += n;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let bound = burst + rate * elapsed;
    for group in ["x", "y"] {
        let got = handed.get(group).copied().unwrap_or_default() as f64;
        assert!(
            got <= bound,
            "{group}: {got} in {elapsed:.2} s; bound {bound:.1}"
        );
        assert!(
            got >= 0.8 * (burst + rate * window.as_secs_f64()),
            "{group}: {got} in {elapsed:.2} s: far below its limit"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_gets_at_most_its_rate_fleet_wide() {
    check_group_rate_fleet_wide(test_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_held_by_a_group_s_limit_wakes_for_its_next_token() {
    let app = spawn_app().await;
    configure(
        &app,
        "q",
        json!({"group_rate_limit": {"per_second": 2.0, "burst": 1}}),
    )
    .await;
    enqueue_many(&app, "q", Some("g"), 1, "g-", 5).await;
    a_long_poll_waits_for_the_next_token(&app, "q").await;
}

#[tokio::test]
async fn lifting_the_limit_lets_the_held_groups_out_at_once_and_metrics_show_them() {
    let app = spawn_app().await;
    configure(
        &app,
        "q",
        json!({"group_rate_limit": {"per_second": 0.001, "burst": 1}}),
    )
    .await;
    enqueue_many(&app, "q", Some("g"), 1, "g-", 4).await;
    assert_eq!(app.claim("q", json!({"max_jobs": 4})).await.len(), 1);
    let held = r#"prioq_groups_rate_limited{queue="q"}"#;
    assert_eq!(app.metric(held).await, 1.0);
    configure(&app, "q", json!({"group_rate_limit": null})).await;
    assert_eq!(app.claim("q", json!({"max_jobs": 4})).await.len(), 3);
    assert_eq!(app.metric(held).await, 0.0);
}

#[tokio::test]
async fn a_sharded_queue_holds_each_group_to_its_burst_fleet_wide() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(
        &app,
        "q",
        json!({"shards": 2, "group_rate_limit": {"per_second": 0.001, "burst": 4}}),
    )
    .await;
    enqueue_many(&app, "q", Some("g"), 1, "g-", 60).await;
    let got = drain_by_group(&app, "q").await;
    assert_eq!(got.get("g"), Some(&4), "{got:?}");
}

#[tokio::test]
async fn a_group_rate_limit_needs_both_fields_in_bounds() {
    let app = spawn_app().await;
    let patch = |body: Value| {
        let request = app
            .http
            .patch(app.queue_url("q", "/settings"))
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string());
        app.send(request)
    };
    for (body, field) in [
        (
            json!({"group_rate_limit": {"per_second": 0.0001, "burst": 1}}),
            "group_rate_limit.per_second",
        ),
        (
            json!({"group_rate_limit": {"per_second": 1, "burst": 0}}),
            "group_rate_limit.burst",
        ),
        (
            json!({"group_rate_limit": {"burst": 3}}),
            "group_rate_limit.per_second",
        ),
        (json!({"group_rate_limit": 5}), "group_rate_limit"),
    ] {
        let answer = patch(body).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
        assert_eq!(answer.body["field"], field, "{answer:?}");
    }
    let set = configure(
        &app,
        "q",
        json!({"group_rate_limit": {"per_second": 5, "burst": 5}}),
    )
    .await;
    assert_eq!(
        set["group_rate_limit"],
        json!({"per_second": 5.0, "burst": 5})
    );
}
