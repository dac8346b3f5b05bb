//! Expiry (`expires_in_ms`, `on_expiry`): a job not claimed by its
//! deadline is never delivered, not even before the sweeper runs; the
//! sweeper moves it within about one sweep interval; a job claimed in
//! time runs, and is not delivered again after its deadline.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::enqueue_many;
use crate::support::clock::{ms_of, now_ms};
use crate::support::{TestApp, spawn_app_with, test_config, until};

/// A config whose sweeper does not run during a test: what is checked is
/// the claim's own doing.
fn without_sweeper(mut config: Config) -> Config {
    config.sweep_interval_ms = 3_600_000;
    config
}

/// Waits until Redis's clock (this machine's: Redis runs here) is past
/// `deadline_ms`.
async fn until_past(deadline_ms: i64) {
    until(
        Duration::from_secs(5),
        "the deadline passes",
        || async move { now_ms() > deadline_ms },
    )
    .await;
}

/// Jobs whose expiry passed are skipped by a claim that meets them before
/// any sweep: dead-lettered with `last_error: "expired"`, or removed with
/// `on_expiry: "drop"`; live jobs behind them are handed out. Answers the
/// instance, for checks of what is left in Redis.
pub(crate) async fn check_claim_skips_expired_jobs(config: Config) -> TestApp {
    let app = spawn_app_with(without_sweeper(config)).await;
    let dead = app
        .enqueue(
            "q",
            json!({"task": "t", "id": "dead", "priority": 0, "expires_in_ms": 50}),
        )
        .await;
    let dropped = app
        .enqueue(
            "q",
            json!({"task": "t", "id": "dropped", "priority": 0, "group": "g",
                   "expires_in_ms": 50, "on_expiry": "drop"}),
        )
        .await;
    app.enqueue(
        "q",
        json!({"task": "t", "id": "next", "priority": 0, "group": "g"}),
    )
    .await;
    app.enqueue(
        "q",
        json!({"task": "t", "id": "live", "priority": 1, "expires_in_ms": 600_000}),
    )
    .await;
    let expires_at = ms_of(&dead["expires_at"]);
    assert_eq!(expires_at, ms_of(&dead["enqueued_at"]) + 50, "{dead}");
    assert_eq!(
        ms_of(&dropped["expires_at"]),
        ms_of(&dropped["enqueued_at"]) + 50
    );
    until_past(expires_at.max(ms_of(&dropped["expires_at"]))).await;

    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    let mut ids: Vec<&str> = jobs
        .iter()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["live", "next"], "{jobs:?}");
    // A job claimed in time shows its deadline.
    let live = jobs.iter().find(|job| job["id"] == "live").expect("live");
    assert!(ms_of(&live["expires_at"]) > now_ms(), "{live}");

    let view = app.job("q", "dead").await;
    assert_eq!(
        (&view.body["state"], &view.body["last_error"]),
        (&json!("dead"), &json!("expired")),
        "{view:?}"
    );
    assert_eq!(app.job("q", "dropped").await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.metric(r#"prioq_jobs_expired_total{queue="q"}"#).await,
        2.0
    );
    // Acked, the claimed jobs leave nothing of their expiry behind.
    for job in &jobs {
        assert_eq!(app.ack("q", job).await.status, StatusCode::NO_CONTENT);
    }
    let stats = app.stats("q").await;
    assert_eq!(
        (&stats["pending"], &stats["dead"]),
        (&json!(0), &json!(1)),
        "{stats}"
    );
    app
}

#[tokio::test]
async fn a_claim_skips_expired_jobs_before_any_sweep() {
    let app = check_claim_skips_expired_jobs(test_config()).await;
    // A job deleted while it waits takes its deadline with it.
    app.enqueue(
        "q",
        json!({"task": "t", "id": "deleted", "group": "g", "expires_in_ms": 600_000}),
    )
    .await;
    let deleted = app
        .send(app.http.delete(app.queue_url("q", "/jobs/deleted")))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    let snapshot = app.snapshot().await;
    let left: Vec<&String> = snapshot
        .keys()
        .filter(|key| key.contains(":expiry"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let meta = snapshot
        .iter()
        .find_map(|(key, value)| key.ends_with(":meta").then_some(value))
        .expect("meta");
    assert!(!meta.contains("expiring"), "{meta}");
}

/// The sweeper ends expired pending, scheduled and grouped jobs within
/// about one sweep interval, with no claim.
pub(crate) async fn check_sweeper_ends_expired_jobs(config: Config) {
    let app = spawn_app_with(config).await;
    let jobs = [
        json!({"task": "t", "id": "pending", "expires_in_ms": 100}),
        json!({"task": "t", "id": "scheduled", "delay_ms": 60_000, "expires_in_ms": 100}),
        json!({"task": "t", "id": "grouped", "group": "g", "expires_in_ms": 100}),
        json!({"task": "t", "id": "waiting", "group": "g", "expires_in_ms": 100, "on_expiry": "drop"}),
    ];
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.status);
    let expires_at = ms_of(&answer.body["jobs"][0]["expires_at"]);
    for id in ["pending", "scheduled", "grouped"] {
        let job = app
            .wait_for_job("q", id, Duration::from_secs(5), |job| {
                job["state"] == "dead"
            })
            .await;
        assert_eq!(job["last_error"], "expired", "{job}");
        assert!(ms_of(&job["dead_at"]) >= expires_at, "{job}");
    }
    until(Duration::from_secs(5), "the dropped job goes", || async {
        app.job("q", "waiting").await.status == StatusCode::NOT_FOUND
    })
    .await;
    let stats = app.stats("q").await;
    assert_eq!(
        (&stats["pending"], &stats["scheduled"], &stats["dead"]),
        (&json!(0), &json!(0), &json!(3)),
        "{stats}"
    );
    // The group's bookkeeping let go of the jobs: its next job is claimed.
    app.enqueue("q", json!({"task": "t", "id": "after", "group": "g"}))
        .await;
    let claimed = app.claim_one("q").await.expect("a job");
    assert_eq!(claimed["id"], "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_ends_expired_waiting_jobs() {
    check_sweeper_ends_expired_jobs(test_config()).await;
}

/// A queue whose head is hundreds of expired jobs: a claim moves them out
/// a bounded number at a time, and a long poll still gets the live job
/// behind them without a sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_full_of_expired_jobs_is_moved_out_as_claims_meet_it() {
    let app = spawn_app_with(without_sweeper(test_config())).await;
    let jobs: Vec<Value> = (0..500)
        .map(|n| json!({"task": "t", "id": format!("x-{n}"), "priority": 0, "expires_in_ms": 50}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.status);
    enqueue_many(&app, "q", None, 1, "live-", 1).await;
    until_past(ms_of(&answer.body["jobs"][499]["expires_at"])).await;

    let claimed = app.claim("q", json!({"wait_ms": 10_000})).await;
    let ids: Vec<&str> = claimed
        .iter()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["live-0"]);
    let stats = app.stats("q").await;
    assert_eq!(
        (&stats["pending"], &stats["dead"]),
        (&json!(0), &json!(500)),
        "{stats}"
    );
}

/// A job claimed before its deadline runs; given back after it (a nack,
/// or its lease's end), it is not delivered again: dead, "expired".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_claimed_in_time_is_not_delivered_again_after_its_deadline() {
    let app = spawn_app_with(test_config()).await;
    for id in ["nacked", "lapsed"] {
        app.enqueue(
            "q",
            json!({"task": "t", "id": id, "expires_in_ms": 300, "on_expiry": "drop"}),
        )
        .await;
    }
    let jobs = app
        .claim("q", json!({"max_jobs": 2, "lease_ms": 400}))
        .await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let nacked = jobs
        .iter()
        .find(|job| job["id"] == "nacked")
        .expect("nacked");
    until_past(ms_of(&nacked["expires_at"])).await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/nacked/nack"),
            json!({"lease_token": nacked["lease_token"], "error": "boom"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        (&answer.body["state"], &answer.body["last_error"]),
        (&json!("dead"), &json!("expired")),
        "{answer:?}"
    );
    let lapsed = app
        .wait_for_job("q", "lapsed", Duration::from_secs(5), |job| {
            job["state"] != "processing"
        })
        .await;
    assert_eq!(
        (&lapsed["state"], &lapsed["last_error"], &lapsed["attempts"]),
        (&json!("dead"), &json!("expired"), &json!(1)),
        "{lapsed}"
    );
    assert!(app.claim("q", json!({})).await.is_empty());
}

/// A job given back before its deadline waits again, and still expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_given_back_in_time_still_expires() {
    let app = spawn_app_with(without_sweeper(test_config())).await;
    let job = app
        .enqueue("q", json!({"task": "t", "id": "j", "expires_in_ms": 1000}))
        .await;
    let claimed = app.claim_one("q").await.expect("a job");
    let answer = app
        .post(
            app.queue_url("q", "/jobs/j/nack"),
            json!({"lease_token": claimed["lease_token"]}),
        )
        .await;
    assert_eq!(
        (answer.status, &answer.body["state"]),
        (StatusCode::OK, &json!("pending")),
        "{answer:?}"
    );
    assert_eq!(answer.body["expires_at"], job["expires_at"]);
    until_past(ms_of(&job["expires_at"])).await;
    assert!(app.claim("q", json!({})).await.is_empty());
    assert_eq!(app.job("q", "j").await.body["last_error"], "expired");
}

/// Claims race the deadlines of jobs expiring one after the other, ever
/// more slowly (the first at once, the last in 10 s), so that the claims
/// overtake the deadlines somewhere: no claim hands out a job at or after
/// its `expires_at`, by Redis's clock (a lease's deadline is Redis's time
/// of the claim plus lease_ms), and every job is either claimed once or
/// dead, "expired".
pub(crate) async fn check_expiry_racing_claims(config: Config) {
    const JOBS: usize = 400;
    const LEASE_MS: i64 = 600_000;
    let app = Arc::new(spawn_app_with(config).await);
    let jobs: Vec<Value> = (0..JOBS)
        .map(|n| json!({"task": "t", "id": format!("r-{n}"), "expires_in_ms": 1 + n * n / 16}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.status);
    until_past(ms_of(&answer.body["jobs"][0]["expires_at"])).await;
    let claimers: Vec<_> = (0..4)
        .map(|_| {
            let app = Arc::clone(&app);
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let jobs = app
                        .claim("q", json!({"max_jobs": 3, "lease_ms": LEASE_MS}))
                        .await;
                    if jobs.is_empty() && app.stats("q").await["pending"] == 0 {
                        return got;
                    }
                    got.extend(jobs);
                }
            })
        })
        .collect();
    let mut claimed = HashSet::new();
    for claimer in claimers {
        for job in claimer.await.expect("claimer") {
            let claimed_at = ms_of(&job["lease_expires_at"]) - LEASE_MS;
            assert!(
                claimed_at < ms_of(&job["expires_at"]),
                "claimed at {claimed_at}: {job}"
            );
            assert!(
                claimed.insert(job["id"].as_str().expect("id").to_owned()),
                "{job}"
            );
        }
    }
    for n in 0..JOBS {
        let id = format!("r-{n}");
        if !claimed.contains(&id) {
            let job = app
                .wait_for_job("q", &id, Duration::from_secs(5), |job| {
                    job["state"] == "dead"
                })
                .await;
            assert_eq!(job["last_error"], "expired", "{job}");
        }
    }
    assert!(!claimed.is_empty(), "some jobs were claimed in time");
    assert!(claimed.len() < JOBS, "some jobs expired first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expiry_racing_claims_never_hands_out_an_expired_job() {
    check_expiry_racing_claims(test_config()).await;
}

#[tokio::test]
async fn expiry_fields_are_checked() {
    let app = spawn_app_with(test_config()).await;
    for (body, field) in [
        (json!({"task": "t", "expires_in_ms": 0}), "expires_in_ms"),
        (
            json!({"task": "t", "expires_in_ms": 2_592_000_001_u64}),
            "expires_in_ms",
        ),
        (json!({"task": "t", "on_expiry": "drop"}), "on_expiry"),
    ] {
        let answer = app.post(app.queue_url("q", "/jobs"), body).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
        assert_eq!(answer.problem_code(), "validation_failed", "{answer:?}");
        assert!(
            answer.body["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(field),
            "{answer:?}"
        );
    }
    let answer = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "t", "expires_in_ms": 10, "on_expiry": "later"}),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
    let plain = app.enqueue("q", json!({"task": "t"})).await;
    assert!(plain["expires_at"].is_null(), "{plain}");
}
