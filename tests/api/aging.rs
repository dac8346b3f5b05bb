//! Priority aging (`max_wait_ms`): a job without a group that waited its
//! limit in its priority is claimed as if it had the next more urgent
//! one, at the front of it, in the order the aged aged; step by step, so
//! a job of priority p is claimed as priority 0 after p limits.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::app::{configure, patch_settings};
use crate::support::clock::{ms_of, now_ms};
use crate::support::{TestApp, spawn_app, spawn_app_with, test_config, until};

/// Puts `count` jobs of priority 0 on `queue`, a hundred a request.
async fn flood(app: &TestApp, queue: &str, count: usize) {
    for first in (0..count).step_by(100) {
        let jobs: Vec<Value> = (first..(first + 100).min(count))
            .map(|n| json!({"task": "t", "id": format!("urgent-{n}"), "priority": 0}))
            .collect();
        let answer = app
            .post(app.queue_url(queue, "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    }
}

/// Under a backlog of priority-0 jobs that outlasts it, a priority-5 job
/// of a queue aging every `LIMIT` is claimed, one job a claim, by a claim
/// that began, by Redis's clock, no sooner than five limits after its
/// enqueue, and by the first claim that begins five limits after its
/// enqueue's answer, ahead of urgent jobs still waiting:
/// its steps fall due at their times, whenever claims come (a claim after
/// several takes them all), so the first claim past the fifth takes it
/// from the front of priority 0. (Counted from each step's claim
/// instead, a slow claim delayed every step after it: under load a job
/// was passed over seven claims past its five limits.)
async fn check_flood(shards: u32) {
    const LIMIT: Duration = Duration::from_millis(150);
    const LEASE_MS: u64 = 60_000;
    let mut config = test_config();
    // A floor turn would take it from the least urgent class at once.
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(
        &app,
        "aging",
        json!({"max_wait_ms": LIMIT.as_millis() as u64, "shards": shards}),
    )
    .await;
    flood(&app, "aging", 4000).await;
    let patient = app
        .enqueue(
            "aging",
            json!({"task": "t", "id": "patient", "priority": 5}),
        )
        .await;
    let enqueued_ms = ms_of(&patient["enqueued_at"]);
    let answered = Instant::now();
    let aged = answered + LIMIT * 5;
    let mut after_aged = 0;
    loop {
        let start = Instant::now();
        let jobs = app.claim("aging", json!({"lease_ms": LEASE_MS})).await;
        assert_eq!(jobs.len(), 1, "the backlog outlasts the wait");
        if jobs[0]["id"] == "patient" {
            // By Redis's clock, which ages jobs: the claim that took it
            // began (its lease's deadline less the lease) five limits or
            // more after the enqueue. (This machine's wall clock can move
            // against the test's monotonic one: compared across the two,
            // the claim once seemed 2 ms early.)
            let claimed_ms = ms_of(&jobs[0]["lease_expires_at"]) - LEASE_MS as i64;
            let waited = claimed_ms - enqueued_ms;
            assert!(
                waited >= 5 * LIMIT.as_millis() as i64,
                "aged too soon: {waited} ms"
            );
            // Taken ahead of urgent jobs still waiting, not after the
            // last of them.
            let next = app.claim("aging", json!({"lease_ms": LEASE_MS})).await;
            assert_eq!(next.len(), 1, "the backlog ran out before the job aged");
            break;
        }
        if start > aged {
            after_aged += 1;
            assert!(
                after_aged <= 1,
                "still passed over {after_aged} claims past its five limits"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_urgent_jobs_holds_a_job_no_longer_than_its_limits() {
    check_flood(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_urgent_jobs_holds_a_job_no_longer_than_its_limits_on_a_sharded_queue() {
    check_flood(3).await;
}

/// Steps that fell due while no claim came are all taken by the next
/// claim: a priority-5 job left five limits with no claim at all is the
/// next claim's, ahead of the urgent backlog. (Counted from each step's
/// claim, it moved one class and the claim took an urgent job.)
#[tokio::test]
async fn steps_due_between_claims_are_taken_at_once() {
    const LIMIT_MS: i64 = 100;
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(&app, "idle", json!({"max_wait_ms": LIMIT_MS})).await;
    flood(&app, "idle", 100).await;
    let patient = app
        .enqueue("idle", json!({"task": "t", "id": "patient", "priority": 5}))
        .await;
    let due = ms_of(&patient["enqueued_at"]) + 5 * LIMIT_MS;
    until(Duration::from_secs(5), "five limits passed", || async {
        now_ms() > due + 20
    })
    .await;
    let jobs = app.claim("idle", json!({})).await;
    assert_eq!(jobs[0]["id"], "patient");
}

/// Two jobs of priority 2 age into priority 1 and go ahead of a job of a
/// named group waiting there (it does not age), in the order they aged.
#[tokio::test]
async fn the_aged_go_first_in_their_new_priority_in_the_order_they_aged() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_wait_ms": 1000})).await;
    app.enqueue(
        "q",
        json!({"task": "t", "id": "native", "priority": 1, "group": "g"}),
    )
    .await;
    app.enqueue("q", json!({"task": "t", "id": "first", "priority": 2}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "second", "priority": 2}))
        .await;
    // The sweeper ages them once their second in priority 2 is up.
    until(Duration::from_secs(5), "both aged", || async {
        let stats = app.stats("q").await;
        let classes = stats["classes"].as_array().cloned().unwrap_or_default();
        classes.iter().all(|class| class["priority"] != 2)
    })
    .await;
    let claimed = app.claim("q", json!({"max_jobs": 3})).await;
    let ids: Vec<&str> = claimed
        .iter()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["first", "second", "native"]);
    // A job keeps its own priority; aging only moves its place in line.
    assert_eq!(claimed[0]["priority"], 2);
}

#[tokio::test]
async fn without_max_wait_ms_nothing_ages_and_nothing_is_kept_for_it() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_wait_ms": 60_000})).await;
    app.enqueue("q", json!({"task": "t", "priority": 3})).await;
    let aging = |snapshot: &std::collections::BTreeMap<String, String>| {
        snapshot.keys().any(|key| key.ends_with(":aging"))
    };
    assert!(aging(&app.snapshot().await), "the job's aging time is kept");
    configure(&app, "q", json!({"max_wait_ms": null})).await;
    assert!(!aging(&app.snapshot().await), "dropped with the setting");
}

#[tokio::test]
async fn max_wait_ms_out_of_range_is_refused() {
    let app = spawn_app().await;
    for bad in [json!(0), json!(-5), json!(2_592_000_001_u64), json!("1s")] {
        let answer = patch_settings(&app, "q", json!({"max_wait_ms": bad})).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {answer:?}"
        );
        assert_eq!(answer.body["field"], "max_wait_ms");
    }
}
