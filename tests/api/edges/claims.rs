//! Retry-safe claims: a claim repeated with its `request_id` and `worker`
//! answers the same jobs under the same leases, leases nothing new and
//! applies its acks once; under connections killed mid-call, workers that
//! retry so leave no job leased to nobody.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::{configure, enqueue_many};
use crate::support::clock::within;
use crate::support::cluster::{ClusterConfig, RedisCluster, shared_cluster};
use crate::support::{
    RedisServer, TestApp, redis_connection, spawn_app, spawn_app_with, test_config, until,
};

fn leases(answer: &Value) -> Vec<(String, String)> {
    let mut leases: Vec<(String, String)> = answer["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| {
            (
                job["id"].as_str().expect("id").to_owned(),
                job["lease_token"].as_str().expect("token").to_owned(),
            )
        })
        .collect();
    leases.sort();
    leases
}

async fn claim(app: &TestApp, body: Value) -> Value {
    let answer = app.post(app.queue_url("q", "/claim"), body).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.body
}

async fn repeat_answers_the_same(app: &TestApp) {
    enqueue_many(app, "q", None, 1, "j", 6).await;
    let first = claim(
        app,
        json!({"max_jobs": 2, "worker": "w1", "request_id": "r-1"}),
    )
    .await;
    let taken = leases(&first);
    assert_eq!(taken.len(), 2, "{first}");
    let again = claim(
        app,
        json!({"max_jobs": 2, "worker": "w1", "request_id": "r-1"}),
    )
    .await;
    assert_eq!(
        leases(&again),
        taken,
        "a repeat answered other jobs or leases"
    );
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].as_u64(), stats["processing"].as_u64()),
        (Some(4), Some(2)),
        "{stats}"
    );

    // The same request id from another worker is another claim.
    let other = claim(
        app,
        json!({"max_jobs": 1, "worker": "w2", "request_id": "r-1"}),
    )
    .await;
    assert_eq!(leases(&other).len(), 1, "{other}");
    assert!(!taken.contains(&leases(&other)[0]), "{other}");

    // A claim that acks, repeated: the same new jobs, the acks once.
    let acks: Vec<Value> = taken
        .iter()
        .map(|(id, token)| json!({"id": id, "lease_token": token}))
        .collect();
    let body = json!({"max_jobs": 2, "worker": "w1", "request_id": "r-2", "ack": acks});
    let acking = claim(app, body.clone()).await;
    let statuses = |answer: &Value| -> Vec<u64> {
        answer["acked"]
            .as_array()
            .expect("acked")
            .iter()
            .map(|a| a["status"].as_u64().expect("status"))
            .collect()
    };
    assert_eq!(statuses(&acking), [204, 204], "{acking}");
    let repeated = claim(app, body).await;
    assert_eq!(
        leases(&repeated),
        leases(&acking),
        "the repeat leased other jobs"
    );
    assert_eq!(
        statuses(&repeated),
        [204, 204],
        "the repeat answered other acks: {repeated}"
    );
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].as_u64(), stats["processing"].as_u64()),
        (Some(1), Some(3)),
        "{stats}"
    );
    for (id, _) in &taken {
        assert_eq!(
            app.job("q", id).await.status,
            StatusCode::NOT_FOUND,
            "{id} was acked"
        );
    }
}

#[tokio::test]
async fn a_repeated_claim_answers_the_same_jobs_and_acks_once() {
    repeat_answers_the_same(&spawn_app().await).await;
}

#[tokio::test]
async fn a_repeated_claim_on_a_sharded_queue_answers_the_same_jobs_and_acks_once() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"shards": 4})).await;
    repeat_answers_the_same(&app).await;
}

#[tokio::test]
async fn a_repeated_claim_on_the_cluster_answers_the_same_jobs_and_acks_once() {
    let app = spawn_app_with(shared_cluster().config()).await;
    configure(&app, "q", json!({"shards": 3})).await;
    repeat_answers_the_same(&app).await;
}

/// Claims with request ids, each retried with its id until it is
/// answered, while every node drops every client connection every 100 ms
/// (`urls`: the nodes of the Redis `config` talks to): every job is acked,
/// and none is left leased to nobody (the leases are long, so such a job
/// would still be processing at the end). The claims wait for the kills to
/// keep up (one kill per `CLAIMS_PER_KILL` claims), so every run has them
/// all along, however fast it goes.
async fn no_job_leased_to_nobody(mut config: Config, urls: Vec<String>) {
    const JOBS: usize = 400;
    const WORKERS: usize = 6;
    const CLAIMS_PER_KILL: u32 = 30;
    config.redis_timeout_ms = 1000;
    let app = Arc::new(spawn_app_with(config).await);
    enqueue_many(&app, "q", None, 1, "j", JOBS).await;

    let stop = Arc::new(AtomicBool::new(false));
    let all_kills = Arc::new(AtomicU32::new(0));
    let claims = Arc::new(AtomicU32::new(0));
    let killers: Vec<_> = urls
        .into_iter()
        .map(|url| {
            let (stop, all_kills) = (Arc::clone(&stop), Arc::clone(&all_kills));
            tokio::spawn(async move {
                let mut redis = redis_connection(&url).await;
                let mut kills = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let killed: redis::RedisResult<u64> = redis::cmd("CLIENT")
                        .arg("KILL")
                        .arg("TYPE")
                        .arg("normal")
                        .arg("SKIPME")
                        .arg("yes")
                        .query_async(&mut redis)
                        .await;
                    if killed.is_ok_and(|n| n > 0) {
                        kills += 1;
                        all_kills.fetch_add(1, Ordering::Relaxed);
                    }
                }
                kills
            })
        })
        .collect();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (app, all_kills, claims) =
                (Arc::clone(&app), Arc::clone(&all_kills), Arc::clone(&claims));
            tokio::spawn(async move {
                let mut acked = 0;
                for n in 0.. {
                    let claim = claims.fetch_add(1, Ordering::Relaxed);
                    until(Duration::from_secs(30), "the connection kills", || async {
                        all_kills.load(Ordering::Relaxed) * CLAIMS_PER_KILL >= claim
                    })
                    .await;
                    let body = json!({"max_jobs": 3, "worker": format!("w{w}"), "request_id": format!("w{w}-{n}"), "lease_ms": 120_000});
                    let jobs = loop {
                        let answer = app.post(app.queue_url("q", "/claim"), body.clone()).await;
                        match answer.status {
                            StatusCode::OK => break answer.body["jobs"].as_array().expect("jobs").clone(),
                            StatusCode::SERVICE_UNAVAILABLE => continue,
                            other => panic!("claim answered {other}: {answer:?}"),
                        }
                    };
                    if jobs.is_empty() {
                        return acked;
                    }
                    for job in jobs {
                        // An ack whose first try may have gone through
                        // answers 404 (acked, not kept) when repeated.
                        loop {
                            let status = app.ack("q", &job).await.status;
                            match status {
                                StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => break,
                                StatusCode::SERVICE_UNAVAILABLE => continue,
                                other => panic!("ack answered {other}"),
                            }
                        }
                        acked += 1;
                    }
                }
                unreachable!()
            })
        })
        .collect();
    let mut acked = 0;
    for worker in workers {
        acked += within(Duration::from_secs(120), worker)
            .await
            .expect("worker");
    }
    stop.store(true, Ordering::Relaxed);
    let mut kills = 0;
    for killer in killers {
        kills += killer.await.expect("killer");
    }
    assert!(kills > 3, "the connections were killed {kills} times only");
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].as_u64(), stats["processing"].as_u64()),
        (Some(0), Some(0)),
        "jobs left leased to nobody: {stats}"
    );
    assert_eq!(acked, JOBS, "every job acked once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_retrying_with_request_ids_leave_no_job_leased_to_nobody() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    no_job_leased_to_nobody(config, vec![server.url()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_sharded_queue_workers_retrying_with_request_ids_leave_no_job_leased_to_nobody() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config.clone()).await;
    configure(&app, "q", json!({"shards": 4})).await;
    drop(app);
    no_job_leased_to_nobody(config, vec![server.url()]).await;
}

/// The same on a cluster of its own (the cluster client must not resend a
/// claim by itself after a dropped connection), on a queue split over its
/// three primaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_workers_retrying_with_request_ids_leave_no_job_leased_to_nobody() {
    let cluster = RedisCluster::start();
    let config = cluster.config();
    let app = spawn_app_with(config.clone()).await;
    configure(&app, "q", json!({"shards": 3})).await;
    drop(app);
    no_job_leased_to_nobody(config, cluster.urls()).await;
}
