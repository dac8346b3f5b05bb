//! Priority order and FIFO across shards.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prioq::queue::store::keys::shard_of;
use reqwest::StatusCode;
use serde_json::json;

use super::sharded_cluster;
use crate::guide::check_priority_order;
use crate::support::spawn_app_with;

/// Jobs enqueued one after the other come out most urgent first and, in a
/// priority, in the order they went in, whichever shards they are in.
async fn check_order(shards: u32) {
    let mut config = sharded_cluster(&["q", "order"], shards).await;
    config.bulk_floor = 0.0;
    check_priority_order(config.clone()).await;
    let app = spawn_app_with(config).await;
    let mut expected: Vec<(u64, usize, String)> = Vec::new();
    for n in 0..240 {
        let priority = [5, 1, 9, 1, 0, 5][n % 6];
        let job = app
            .enqueue("order", json!({"task": "t", "priority": priority}))
            .await;
        expected.push((priority, n, job["id"].as_str().expect("id").to_owned()));
    }
    expected.sort();
    let spread: BTreeSet<u32> = expected
        .iter()
        .map(|(_, _, id)| shard_of(id, shards))
        .collect();
    assert_eq!(spread.len(), shards as usize, "jobs in every shard");
    let mut claimed = Vec::new();
    loop {
        let jobs = app.claim("order", json!({"max_jobs": 7})).await;
        if jobs.is_empty() {
            break;
        }
        claimed.extend(
            jobs.iter()
                .map(|job| job["id"].as_str().expect("id").to_owned()),
        );
    }
    let expected: Vec<String> = expected.into_iter().map(|(_, _, id)| id).collect();
    assert_eq!(claimed, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_hand_out_the_most_urgent_first_and_fifo_within() {
    check_order(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_shards_hand_out_the_most_urgent_first_and_fifo_within() {
    check_order(8).await;
}

/// Producers and consumers at once, on two instances: no job comes out
/// ahead of one that was enqueued before it was by more than the claims
/// in flight when the older job arrived can take (`CLAIMERS` × `MAX_JOBS`),
/// as docs/operations.md states ("Sharded queues").
async fn check_fifo_bound(shards: u32) -> usize {
    const PRODUCERS: usize = 4;
    const CLAIMERS: usize = 6;
    const MAX_JOBS: usize = 2;
    const PER_PRODUCER: usize = 300;
    let config = sharded_cluster(&["fifo"], shards).await;
    let apps = [
        Arc::new(spawn_app_with(config.clone()).await),
        Arc::new(spawn_app_with(config).await),
    ];
    // One clock of events: enqueue and claim starts and ends.
    let clock = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (app, clock) = (Arc::clone(&apps[p % 2]), Arc::clone(&clock));
            tokio::spawn(async move {
                let mut spans = Vec::new();
                for n in 0..PER_PRODUCER {
                    let id = format!("p{p}-{n}");
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let job = app.enqueue("fifo", json!({"task": "t", "id": id})).await;
                    assert_eq!(job["id"], json!(id));
                    spans.push((id, start, clock.fetch_add(1, Ordering::SeqCst)));
                }
                spans
            })
        })
        .collect();
    let total = PRODUCERS * PER_PRODUCER;
    let taken = Arc::new(AtomicU64::new(0));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|c| {
            let (app, clock, taken) = (
                Arc::clone(&apps[c % 2]),
                Arc::clone(&clock),
                Arc::clone(&taken),
            );
            tokio::spawn(async move {
                let mut spans = Vec::new();
                while taken.load(Ordering::SeqCst) < total as u64 {
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let jobs = app
                        .claim("fifo", json!({"max_jobs": MAX_JOBS, "wait_ms": 200}))
                        .await;
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    taken.fetch_add(jobs.len() as u64, Ordering::SeqCst);
                    for job in jobs {
                        assert_eq!(app.ack("fifo", &job).await.status, StatusCode::NO_CONTENT);
                        spans.push((job["id"].as_str().expect("id").to_owned(), start, end));
                    }
                }
                spans
            })
        })
        .collect();
    let mut enqueued = HashMap::new();
    for producer in producers {
        for (id, start, end) in producer.await.expect("producer") {
            enqueued.insert(id, (start, end));
        }
    }
    let mut claimed = HashMap::new();
    for claimer in claimers {
        for (id, start, end) in claimer.await.expect("claimer") {
            assert!(claimed.insert(id, (start, end)).is_none(), "claimed twice");
        }
    }
    assert_eq!(claimed.len(), total);
    // For each job: the jobs enqueued wholly after it that were claimed
    // wholly before it.
    let mut worst = (0, String::new());
    for (id, (_, enqueued_end)) in &enqueued {
        let (claim_start, _) = claimed[id];
        let overtakers: Vec<_> = enqueued
            .iter()
            .filter(|(other, (start, _))| *start > *enqueued_end && claimed[*other].1 < claim_start)
            .map(|(other, span)| (other, span, claimed[other]))
            .collect();
        if overtakers.len() > worst.0 {
            worst = (
                overtakers.len(),
                format!(
                    "{id} enqueued {:?}, claimed {:?}; overtaken by (id, enqueued, claimed) {overtakers:?}",
                    enqueued[id], claimed[id]
                ),
            );
        }
    }
    assert!(
        worst.0 <= CLAIMERS * MAX_JOBS,
        "a job was overtaken by {} jobs enqueued after it: {}",
        worst.0,
        worst.1
    );
    worst.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_keep_fifo_within_the_claims_in_flight() {
    let worst = check_fifo_bound(3).await;
    eprintln!("3 shards: a job was overtaken by {worst} newer jobs at most");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_shards_keep_fifo_within_the_claims_in_flight() {
    let worst = check_fifo_bound(8).await;
    eprintln!("8 shards: a job was overtaken by {worst} newer jobs at most");
}
