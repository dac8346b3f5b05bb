//! Priority order and FIFO across shards.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prioq::queue::store::keys::{QueueKeys, shard_of};
use prioq::queue::{ClaimEntry, Exchange, Exchanged, Route, exchange_answers, exchange_command};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::json;

use super::sharded_cluster;
use crate::guide::check_priority_order;
use crate::support::app::configure;
use crate::support::clock::{ms_of, now_ms};
use crate::support::{redis_connection, spawn_app_with, test_config, until};

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

/// Producers and consumers at once, on two instances, a job in four
/// urgent: no claim hands out a job while one that ranks before it waits
/// (more urgent, or of its priority and enqueued, answered, before its
/// own enqueue began) whose enqueue was answered before the claim began,
/// as docs/operations.md states ("Sharded queues"): a claim's part in one
/// shard takes no job that ranks after another shard's next job, and
/// claims sharing a read take the jobs they picked, though urgent jobs
/// land among them meanwhile.
async fn check_fifo_under_load(shards: u32) {
    const PRODUCERS: usize = 4;
    const CLAIMERS: usize = 6;
    const MAX_JOBS: usize = 2;
    const PER_PRODUCER: usize = 300;
    let mut config = sharded_cluster(&["fifo"], shards).await;
    // The floor's turns take a shard's least urgent job by design.
    config.bulk_floor = 0.0;
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
                    let priority = u64::from(n % 4 != 0);
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let job = app
                        .enqueue("fifo", json!({"task": "t", "id": id, "priority": priority}))
                        .await;
                    assert_eq!(job["id"], json!(id));
                    spans.push((id, priority, start, clock.fetch_add(1, Ordering::SeqCst)));
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
        for (id, priority, start, end) in producer.await.expect("producer") {
            enqueued.insert(id, (priority, start, end));
        }
    }
    let mut claimed = HashMap::new();
    for claimer in claimers {
        for (id, start, end) in claimer.await.expect("claimer") {
            assert!(claimed.insert(id, (start, end)).is_none(), "claimed twice");
        }
    }
    assert_eq!(claimed.len(), total);
    // For each job: the jobs ranked after it, claimed wholly before it by
    // a claim that began once it was enqueued.
    let mut worst = (0, String::new());
    for (id, &(priority, _, enqueued_end)) in &enqueued {
        let (claim_start, _) = claimed[id];
        let overtakers: Vec<_> = enqueued
            .iter()
            .filter(|(other, (other_priority, start, _))| {
                let ranks_after = *other_priority > priority
                    || (*other_priority == priority && *start > enqueued_end);
                let (other_start, other_end) = claimed[*other];
                ranks_after && other_start > enqueued_end && other_end < claim_start
            })
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
    assert_eq!(
        worst.0, 0,
        "a job was overtaken by {} jobs ranked after it: {}",
        worst.0, worst.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_keep_priority_and_fifo_under_concurrent_claims() {
    check_fifo_under_load(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_shards_keep_priority_and_fifo_under_concurrent_claims() {
    check_fifo_under_load(8).await;
}

/// Random steps made one after the other on a queue of 3 shards and on an
/// unsharded copy: enqueues of batches of jobs without a group at random
/// priorities, claims of random sizes (acked at once). Both hand out the
/// same jobs in the same order, to the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_hands_out_what_an_unsharded_copy_does() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    for seed in 0..16 {
        let mut rng = StdRng::seed_from_u64(seed);
        let (sharded, single) = (format!("sharded-{seed}"), format!("single-{seed}"));
        configure(&app, &sharded, json!({"shards": 3})).await;
        let mut made = 0;
        let (mut out_sharded, mut out_single) = (Vec::new(), Vec::new());
        for step in 0..60 {
            if step < 50 && rng.random_bool(0.5) {
                let jobs: Vec<_> = (0..rng.random_range(1..=8))
                    .map(|_| {
                        made += 1;
                        json!({"task": "t", "id": format!("j{made}"), "priority": rng.random_range(0..4)})
                    })
                    .collect();
                for queue in [&sharded, &single] {
                    let answer = app
                        .post(app.queue_url(queue, "/jobs/batch"), json!({"jobs": jobs}))
                        .await;
                    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
                }
                continue;
            }
            let max_jobs = if step < 50 {
                rng.random_range(1..=6)
            } else {
                100
            };
            for (queue, out) in [(&sharded, &mut out_sharded), (&single, &mut out_single)] {
                for job in app.claim(queue, json!({"max_jobs": max_jobs})).await {
                    assert_eq!(app.ack(queue, &job).await.status, StatusCode::NO_CONTENT);
                    out.push(job["id"].as_str().expect("id").to_owned());
                }
            }
            assert_eq!(out_sharded, out_single, "seed {seed}, step {step}");
        }
        assert_eq!(out_sharded.len(), made, "seed {seed}: every job handed out");
    }
}

/// A part of a sharded queue's claim takes the jobs it picked from its
/// shard's line and no other: an urgent job that landed since the read,
/// ranked among the picks, stays for the next claim. Parts held to a
/// window of scores (the first pick's to the last's) took it in place of
/// the last pick, which a claim sharing the read then passed over (the
/// fault schedule's seed 2036 found it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_takes_the_jobs_it_picked_not_one_that_landed_among_them() {
    const SHARDS: u32 = 2;
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config.clone()).await;
    configure(&app, "picks", json!({"shards": SHARDS})).await;
    // Three ids of shard 0: two jobs read, and one landing after the read.
    let ids: Vec<String> = (0..)
        .map(|n| format!("job-{n}"))
        .filter(|id| shard_of(id, SHARDS) == 0)
        .take(3)
        .collect();
    let (urgent, next, landed) = (&ids[0], &ids[1], &ids[2]);
    app.enqueue("picks", json!({"task": "t", "id": urgent, "priority": 0}))
        .await;
    app.enqueue("picks", json!({"task": "t", "id": next, "priority": 1}))
        .await;
    app.enqueue("picks", json!({"task": "t", "id": landed, "priority": 0}))
        .await;
    // The part a claim sends after reading [urgent, next] in the line.
    let keys = QueueKeys::shard(&config.key_prefix, "picks", 0, SHARDS);
    let part = vec![Exchange::Claim(Arc::new(ClaimEntry {
        lease_ms: 60_000,
        max_jobs: 2,
        worker: "w".into(),
        request_id: None,
        acks: Vec::new(),
        picked: vec![urgent.clone(), next.clone()],
    }))];
    let route = Route {
        shards: SHARDS,
        arrival: None,
    };
    let reply = exchange_command(&keys, 0, route, &part)
        .query_async(&mut redis_connection(&config.redis_url).await)
        .await
        .expect("exchange");
    let (mut answers, _) = exchange_answers(&part, reply).expect("answers");
    let Ok(Exchanged::Claimed(claimed)) = answers.remove(0) else {
        panic!("a claim's answer");
    };
    let taken: Vec<&str> = claimed.jobs.iter().map(|job| job.id.as_str()).collect();
    assert_eq!(taken, [urgent.as_str(), next.as_str()]);
    let view = app.job("picks", landed).await;
    assert_eq!(view.body["state"], "pending", "{view:?}");
    let then = app.claim("picks", json!({"max_jobs": 3})).await;
    assert_eq!(then.len(), 1);
    assert_eq!(then[0]["id"], json!(landed));
}

/// A claim with a request id whose first round came up short (its picks
/// in one shard had expired) looks again, but may not ask again a shard
/// that answered its first round (here the shard of the job it acked):
/// that shard's next job, older than the other shard's, stops the picks.
/// The claim answered the other shard's job in its place, passing over
/// the older one (the fault schedule's seed 2042 found it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_round_does_not_pass_over_a_shard_it_cannot_ask_again() {
    const SHARDS: u32 = 2;
    let mut config = test_config();
    config.bulk_floor = 0.0;
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    let q = "rounds";
    configure(&app, q, json!({"shards": SHARDS})).await;
    let of = |shard: u32, prefix: &str, count: usize| -> Vec<String> {
        (0..)
            .map(|n| format!("{prefix}-{n}"))
            .filter(|id| shard_of(id, SHARDS) == shard)
            .take(count)
            .collect()
    };
    let (zero, one) = (of(0, "a", 3), of(1, "b", 3));
    let (acked, first, second) = (&zero[0], &zero[1], &zero[2]);
    let (expiring, later) = (&one[..2], &one[2]);
    // A job of shard 0 the claim will ack, leased first.
    app.enqueue(q, json!({"task": "t", "id": acked, "priority": 9}))
        .await;
    let held = app.claim(q, json!({"max_jobs": 1})).await;
    assert_eq!(held[0]["id"], json!(acked));
    // Shard 0: two jobs of priority 1; shard 1: one enqueued after them,
    // and two urgent ones that expire before the claim.
    for id in [first, second] {
        app.enqueue(q, json!({"task": "t", "id": id, "priority": 1}))
            .await;
    }
    app.enqueue(q, json!({"task": "t", "id": later, "priority": 1}))
        .await;
    let mut deadline = 0;
    for id in expiring {
        let job = app
            .enqueue(
                q,
                json!({"task": "t", "id": id, "priority": 0, "expires_in_ms": 200}),
            )
            .await;
        deadline = deadline.max(ms_of(&job["expires_at"]));
    }
    until(
        Duration::from_secs(5),
        "the urgent jobs expired",
        || async { now_ms() > deadline + 20 },
    )
    .await;

    let claimed = app
        .claim(
            q,
            json!({"max_jobs": 3, "request_id": "r-1", "worker": "w",
                   "ack": [{"id": acked, "lease_token": held[0]["lease_token"]}]}),
        )
        .await;
    let ids: Vec<&str> = claimed
        .iter()
        .map(|j| j["id"].as_str().expect("id"))
        .collect();
    assert_eq!(
        ids,
        [first.as_str()],
        "nothing after {second} while it waits"
    );
    let next = app.claim(q, json!({"max_jobs": 2})).await;
    let ids: Vec<&str> = next.iter().map(|j| j["id"].as_str().expect("id")).collect();
    assert_eq!(ids, [second.as_str(), later.as_str()]);
}
