//! The guide's four verification checks, as it writes them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use prioq::config::Config;

use crate::support::worker::claim_in_process_and_kill_answer;
use crate::support::{spawn_app_with, test_config};

/// 1. Priorities 2, 0, 1, 0 are claimed as the two 0s in enqueue order,
///    then 1, then 2.
#[tokio::test]
async fn priorities_are_claimed_most_urgent_first_and_fifo_within() {
    check_priority_order(test_config()).await;
}

pub(crate) async fn check_priority_order(config: Config) {
    let mut config = config;
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    let mut ids = Vec::new();
    for priority in [2, 0, 1, 0] {
        let job = app
            .enqueue("q", json!({"task": "t", "priority": priority}))
            .await;
        ids.push(job["id"].as_str().expect("id").to_owned());
    }
    let mut claimed = Vec::new();
    while let Some(job) = app.claim_one("q").await {
        claimed.push(job["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(
        claimed,
        [
            ids[1].clone(),
            ids[3].clone(),
            ids[2].clone(),
            ids[0].clone()
        ]
    );
}

/// 2. 50 concurrent workers over 10,000 jobs: no duplicates, no gaps,
///    exactly 10,000 acks, pending and processing empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_workers_process_ten_thousand_jobs_exactly_once() {
    check_fifty_workers(test_config()).await;
}

/// Fifty workers on two instances drain 10,000 jobs of queue `load`: each
/// is delivered and acked exactly once.
pub(crate) async fn check_fifty_workers(config: Config) {
    let queue = "load";
    let app = Arc::new(spawn_app_with(config.clone()).await);
    let other = Arc::new(spawn_app_with(config).await);
    let mut enqueued = HashSet::new();
    for batch in 0..10 {
        let jobs: Vec<Value> = (0..1000)
            .map(|i| json!({"task": "t", "args": {"n": batch * 1000 + i}, "priority": i % 3}))
            .collect();
        let answer = app
            .post(app.queue_url(queue, "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        for job in answer.body["jobs"].as_array().expect("jobs") {
            enqueued.insert(job["id"].as_str().expect("id").to_owned());
        }
    }
    assert_eq!(enqueued.len(), 10_000);

    let claimed = Arc::new(Mutex::new(Vec::new()));
    let acks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..50)
        .map(|w| {
            let instance = if w % 2 == 0 { &app } else { &other };
            let (app, claimed, acks) = (
                Arc::clone(instance),
                Arc::clone(&claimed),
                Arc::clone(&acks),
            );
            tokio::spawn(async move {
                while let Some(job) = app
                    .claim(queue, json!({"worker": format!("w{w}")}))
                    .await
                    .pop()
                {
                    claimed
                        .lock()
                        .expect("lock")
                        .push(job["id"].as_str().expect("id").to_owned());
                    let answer = app.ack(queue, &job).await;
                    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
                    acks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker finishes");
    }

    let claimed = claimed.lock().expect("lock").clone();
    let distinct: HashSet<String> = claimed.iter().cloned().collect();
    assert_eq!(claimed.len(), 10_000, "every job delivered exactly once");
    assert_eq!(distinct, enqueued, "no gaps, no strangers");
    assert_eq!(acks.load(std::sync::atomic::Ordering::Relaxed), 10_000);
    let stats = app.stats(queue).await;
    assert_eq!(
        (stats["pending"].clone(), stats["processing"].clone()),
        (json!(0), json!(0))
    );
}

/// Starts a worker process, waits until it holds a job, kills it with
/// SIGKILL and returns the id of the job it held.
async fn claim_in_process_and_kill(claim_url: &str) -> String {
    let claimed = claim_in_process_and_kill_answer(claim_url, 400, "guide-crash").await;
    let Some(job) = &claimed.job else {
        panic!("the worker claimed nothing: {claimed:?}");
    };
    job["id"].as_str().expect("id").to_owned()
}

/// 3. A worker process killed with SIGKILL while holding a job: the job is
///    back in pending with attempts = 1 within one lease plus one sweep,
///    and dead-lettered after max_attempts such deaths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_with_sigkill_loses_nothing() {
    check_sigkill_recovery(test_config()).await;
}

pub(crate) async fn check_sigkill_recovery(config: Config) {
    let app = spawn_app_with(config).await;
    let job = app
        .enqueue("crash", json!({"task": "t", "max_attempts": 3}))
        .await;
    let id = job["id"].as_str().expect("id");
    let claim_url = app.queue_url("crash", "/claim");
    // Lease 400 ms, sweep every 50 ms; allow for a slow, shared machine.
    let within = Duration::from_millis(400 + 50 + 1500);

    for death in 1..=3 {
        let held = claim_in_process_and_kill(&claim_url).await;
        assert_eq!(held, id);
        let expected = if death < 3 { "pending" } else { "dead" };
        let back = app
            .wait_for_job("crash", id, within, |j| j["state"] == expected)
            .await;
        assert_eq!(
            back["attempts"],
            json!(death),
            "one attempt per death: {back}"
        );
        assert_eq!(back["last_error"], json!("lease expired"));
    }
    let dlq = app.get(app.queue_url("crash", "/dlq")).await;
    assert_eq!(dlq.body["jobs"][0]["id"], json!(id));
}

/// 4. Under continuous priority-0 load the oldest bulk job's age stays
///    bounded, and each floor claim takes the oldest bulk job.
#[tokio::test]
async fn bulk_keeps_draining_under_continuous_urgent_load() {
    let (with_floor, _) = run_urgent_load(0.1).await;
    // A bulk job arrives every 20 claims and the floor takes one every 10:
    // once the 5 jobs present at the start are gone, each bulk job waits
    // less than 10 claims, however long the urgent load lasts.
    let waits: Vec<usize> = with_floor
        .iter()
        .map(|(enqueued, claimed)| claimed.expect("every bulk job drains") - enqueued)
        .collect();
    let settled = &waits[waits.len() / 2..];
    assert!(
        settled.iter().all(|&wait| wait <= 10),
        "bulk waits: {waits:?}"
    );

    let (without_floor, urgent_left) = run_urgent_load(0.0).await;
    assert!(urgent_left > 0, "the urgent load never ran dry");
    assert!(
        without_floor.iter().all(|(_, claimed)| claimed.is_none()),
        "without a floor bulk starves (control)"
    );
}

/// Runs 400 claims while urgent jobs arrive faster than they are claimed;
/// 5 bulk jobs wait at the start and one more arrives every 20 claims.
/// Returns, per bulk job in enqueue order, the claim number at which it
/// arrived and at which it was claimed, and the urgent jobs left.
async fn run_urgent_load(bulk_floor: f64) -> (Vec<(usize, Option<usize>)>, u64) {
    let mut config = test_config();
    config.bulk_floor = bulk_floor;
    let app = spawn_app_with(config).await;
    let mut bulk: Vec<(String, usize, Option<usize>)> = Vec::new();
    for _ in 0..5 {
        let job = app
            .enqueue("mixed", json!({"task": "bulk", "priority": 9}))
            .await;
        bulk.push((job["id"].as_str().expect("id").to_owned(), 0, None));
    }
    let mut bulk_claim_order = Vec::new();
    for n in 0..400 {
        for _ in 0..2 {
            app.enqueue("mixed", json!({"task": "urgent", "priority": 0}))
                .await;
        }
        if n % 20 == 10 {
            let job = app
                .enqueue("mixed", json!({"task": "bulk", "priority": 9}))
                .await;
            bulk.push((job["id"].as_str().expect("id").to_owned(), n, None));
        }
        let job = app.claim_one("mixed").await.expect("never empty");
        if job["priority"] == json!(9) {
            let id = job["id"].as_str().expect("id");
            bulk_claim_order.push(id.to_owned());
            let entry = bulk
                .iter_mut()
                .find(|(b, _, _)| b == id)
                .expect("known bulk job");
            entry.2 = Some(n);
        }
        assert_eq!(app.ack("mixed", &job).await.status, StatusCode::NO_CONTENT);
    }
    let arrival_order: Vec<String> = bulk
        .iter()
        .filter(|(_, _, claimed)| claimed.is_some())
        .map(|(id, _, _)| id.clone())
        .collect();
    assert_eq!(
        bulk_claim_order, arrival_order,
        "each floor claim takes the oldest bulk job"
    );
    let urgent_left = app.stats("mixed").await["classes"][0]["pending"]
        .as_u64()
        .unwrap_or(0);
    (
        bulk.into_iter()
            .map(|(_, enqueued, claimed)| (enqueued, claimed))
            .collect(),
        urgent_left,
    )
}
