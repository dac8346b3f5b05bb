//! Leases and the fleet: fencing, sweepers racing, FIFO and wake-ups
//! across instances sharing one Redis.

use std::sync::Arc;
use std::time::Duration;

use prioq::config::Config;
use prioq::queue::{Broker, BrokerConfig, RedisPool, SweepCursors};
use reqwest::StatusCode;
use serde_json::json;

use crate::support::{
    RedisServer, TestApp, redis, redis_connection, script_calls, spawn_app, spawn_app_with,
    test_config,
};

#[tokio::test]
async fn stale_lease_ack_is_rejected_and_spares_the_new_holder() {
    check_fencing(test_config()).await;
}

pub(crate) async fn check_fencing(config: Config) {
    let app = spawn_app_with(config).await;
    let job = app.enqueue("fence", json!({"task": "t"})).await;
    let id = job["id"].as_str().expect("id");
    let first = app
        .claim("fence", json!({"worker": "slow", "lease_ms": 150}))
        .await
        .pop()
        .expect("claimed");
    app.wait_for_job("fence", id, Duration::from_secs(3), |j| {
        j["state"] == "pending"
    })
    .await;
    let second = app
        .claim("fence", json!({"worker": "fresh"}))
        .await
        .pop()
        .expect("claimed again");
    assert_ne!(first["lease_token"], second["lease_token"]);
    // The worker whose lease ran out holds the smaller fence: downstream
    // refuses its writes once its successor's went in.
    let fence = |job: &serde_json::Value| job["fence"].as_u64().expect("a fence");
    assert!(fence(&second) > fence(&first), "{first}\n{second}");

    let stale = app.ack("fence", &first).await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(stale.problem_code(), "lease_lost");
    let now = app.job("fence", id).await.body;
    assert_eq!(now["state"], "processing");
    assert_eq!(now["worker"], "fresh");
    assert_eq!(now["lease_token"], second["lease_token"]);
    assert_eq!(now["fence"], second["fence"]);
    assert_eq!(
        app.ack("fence", &second).await.status,
        StatusCode::NO_CONTENT
    );
}

/// Fences grow with every grant across a queue, in the order of the
/// grants, whichever job; a claim repeated under its request id answers
/// the fences it gave the first time.
#[tokio::test]
async fn fences_grow_across_a_queue_and_a_repeated_claim_answers_the_same() {
    let app = spawn_app().await;
    for n in 0..6 {
        app.enqueue("fences", json!({"task": "t", "id": format!("f{n}")}))
            .await;
    }
    let mut fences = Vec::new();
    for max_jobs in [1, 3, 2] {
        let body = json!({"max_jobs": max_jobs, "request_id": format!("r{max_jobs}")});
        let jobs = app.claim("fences", body.clone()).await;
        let again = app.claim("fences", body).await;
        let of = |jobs: &[serde_json::Value]| -> Vec<u64> {
            jobs.iter()
                .map(|j| j["fence"].as_u64().expect("fence"))
                .collect()
        };
        assert_eq!(of(&again), of(&jobs), "a repeat answers the same fences");
        fences.extend(of(&jobs));
    }
    assert_eq!(fences.len(), 6);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences in the order of their grants: {fences:?}"
    );
}

#[tokio::test]
async fn ack_after_the_deadline_succeeds_until_the_sweeper_takes_the_job_back() {
    let mut config = test_config();
    // A sweeper that never runs during the test.
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    let job = app.enqueue("late", json!({"task": "t"})).await;
    let id = job["id"].as_str().expect("id");
    let leased = app
        .claim("late", json!({"lease_ms": 100}))
        .await
        .pop()
        .expect("claimed");
    until_leases_expire(&app, "late", 1).await;
    assert_eq!(
        app.ack("late", &leased).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.job("late", id).await.status, StatusCode::NOT_FOUND);
}

/// Waits until `count` leases of `queue` are past their deadline.
async fn until_leases_expire(app: &TestApp, queue: &str, count: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while app.stats(queue).await["expired_leases"] != count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "leases never expired"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn broker(app: &TestApp) -> Broker {
    let pool = RedisPool::new(&prioq::startup::redis_settings(&app.config)).expect("pool");
    Broker::new(
        pool,
        BrokerConfig {
            redis_timeout: Duration::from_secs(5),
            bulk_floor: 0.0,
            ..prioq::startup::broker_config(&app.config)
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_sweepers_count_one_attempt_per_expired_lease() {
    let mut config = test_config();
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    let jobs: Vec<_> = (0..200).map(|_| json!({"task": "t"})).collect();
    let answer = app
        .post(app.queue_url("race", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let claimed = app
        .claim("race", json!({"lease_ms": 100, "max_jobs": 100}))
        .await;
    let claimed_more = app
        .claim("race", json!({"lease_ms": 100, "max_jobs": 100}))
        .await;
    assert_eq!(claimed.len() + claimed_more.len(), 200);
    let last = claimed_more.last().expect("claimed")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    until_leases_expire(&app, "race", 200).await;

    // Eight sweepers on two connections pools, all at once, in small batches.
    let brokers = [Arc::new(broker(&app)), Arc::new(broker(&app))];
    let sweepers: Vec<_> = (0..8)
        .map(|i| {
            let broker = Arc::clone(&brokers[i % 2]);
            tokio::spawn(async move {
                let mut total = 0;
                loop {
                    let taken = broker
                        .sweep("race", 0, 7, &SweepCursors::default())
                        .await
                        .expect("sweep")
                        .reclaimed;
                    if taken == 0 {
                        return total;
                    }
                    total += taken;
                }
            })
        })
        .collect();
    let mut taken_back = 0;
    for sweeper in sweepers {
        taken_back += sweeper.await.expect("sweeper");
    }
    assert_eq!(taken_back, 200, "each lease taken back exactly once");
    let stats = app.stats("race").await;
    assert_eq!(
        (stats["pending"].clone(), stats["processing"].clone()),
        (json!(200), json!(0))
    );
    let job = app.job("race", &last).await.body;
    assert_eq!(job["attempts"], 1);
    // Every job: attempts exactly 1.
    let all = app.claim("race", json!({"max_jobs": 100})).await;
    let rest = app.claim("race", json!({"max_jobs": 100})).await;
    assert!(all.iter().chain(&rest).all(|j| j["attempts"] == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_holds_across_two_instances_sharing_one_redis() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    let mut ids = Vec::new();
    for n in 0..60 {
        let app = if n % 2 == 0 { &a } else { &b };
        let job = app
            .enqueue("shared", json!({"task": "t", "priority": 3}))
            .await;
        ids.push(job["id"].as_str().expect("id").to_owned());
    }
    let mut claimed = Vec::new();
    for n in 0..60 {
        let app = if n % 3 == 0 { &b } else { &a };
        let job = app.claim_one("shared").await.expect("job");
        claimed.push(job["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(claimed, ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_floor_share_is_exact_across_the_fleet() {
    let mut config = test_config();
    config.bulk_floor = 0.25;
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    let urgent: Vec<_> = (0..100)
        .map(|_| json!({"task": "u", "priority": 0}))
        .collect();
    let bulk: Vec<_> = (0..100)
        .map(|_| json!({"task": "b", "priority": 200}))
        .collect();
    for jobs in [urgent, bulk] {
        let answer = a
            .post(a.queue_url("share", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    let mut bulk_claimed = 0;
    for n in 0..40 {
        let app = if n % 2 == 0 { &a } else { &b };
        // Mixed claim sizes: every job handed out counts once.
        let jobs = app.claim("share", json!({"max_jobs": 1 + n % 3})).await;
        bulk_claimed += jobs.iter().filter(|j| j["priority"] == 200).count();
    }
    // 80 jobs handed out (40 claims of 1, 2, 3 jobs...): a quarter are bulk.
    let handed_out: usize = (0..40).map(|n| 1 + n % 3).sum();
    assert_eq!(bulk_claimed, handed_out / 4);
}

/// Script calls the Redis servers at `conns` have run so far.
async fn scripts_run(conns: &mut [redis::aio::MultiplexedConnection]) -> u64 {
    let mut total = 0;
    for conn in conns {
        total += script_calls(conn).await;
    }
    total
}

/// Connections to each of `urls`, to count their script calls.
pub(crate) async fn script_counters(urls: &[String]) -> Vec<redis::aio::MultiplexedConnection> {
    let mut conns = Vec::new();
    for url in urls {
        conns.push(redis_connection(url).await);
    }
    conns
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_poll_on_one_instance_wakes_for_a_job_enqueued_on_another() {
    // Its own server, so its script count tells when the poll has looked.
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    check_cross_instance_wake_up(config, &[server.url()]).await;
}

/// `servers` are all the Redis servers behind `config`, used by nothing
/// else meanwhile: their script counts tell when the poll has looked.
pub(crate) async fn check_cross_instance_wake_up(config: Config, servers: &[String]) {
    let a = Arc::new(spawn_app_with(config.clone()).await);
    let b = spawn_app_with(config).await;
    let mut conns = script_counters(servers).await;
    let before = scripts_run(&mut conns).await;

    // 4 s is below the 5 s self-recheck: only a wake-up can answer in time.
    let poll = tokio::spawn({
        let a = Arc::clone(&a);
        async move { a.claim("wake", json!({"wait_ms": 4000})).await }
    });
    until_polling(&mut conns, before).await;
    let enqueued_at = tokio::time::Instant::now();
    let job = b.enqueue("wake", json!({"task": "t"})).await;
    let claimed = poll.await.expect("poll answers");
    let latency = enqueued_at.elapsed();
    assert_eq!(claimed.len(), 1, "woken by the other instance's enqueue");
    assert_eq!(claimed[0]["id"], job["id"]);
    assert!(
        latency < Duration::from_secs(2),
        "answered {latency:?} after the enqueue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_answers_empty_when_the_wait_is_over() {
    let app = spawn_app().await;
    let started = tokio::time::Instant::now();
    let jobs = app.claim("quiet", json!({"wait_ms": 300})).await;
    assert!(jobs.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(300));
}

/// Waits until the long poll sent after `before` was counted has looked
/// for a job once (and found none).
async fn until_polling(conns: &mut [redis::aio::MultiplexedConnection], before: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while scripts_run(conns).await == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the long poll never looked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_waiting_long_polls_early() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    let app = Arc::new(spawn_app_with(config).await);
    let poll = tokio::spawn({
        let app = Arc::clone(&app);
        async move {
            let started = tokio::time::Instant::now();
            let answer = app
                .post(app.queue_url("bye", "/claim"), json!({"wait_ms": 15000}))
                .await;
            (answer, started.elapsed())
        }
    });
    // The poll waits: a script counted before would not say so (the
    // instance's own calls at start count too), and a shutdown before the
    // request was read closes its connection unanswered.
    app.until_long_polls_wait(1).await;
    app.shutdown_token().cancel();
    let (answer, took) = poll.await.expect("poll answers");
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["jobs"], json!([]));
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_job_is_claimable_only_once_due() {
    let app = spawn_app().await;
    let job = app
        .enqueue("later", json!({"task": "t", "delay_ms": 400}))
        .await;
    assert_eq!(job["state"], "scheduled");
    assert!(
        app.claim_one("later").await.is_none(),
        "not claimable before run_at"
    );
    // The sweeper promotes it and wakes the poll.
    let jobs = app.claim("later", json!({"wait_ms": 3000})).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], job["id"]);
}
