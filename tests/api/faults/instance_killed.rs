//! One of two instances behind nginx killed with SIGKILL mid-load, and
//! where "no duplicate" ends: a retried enqueue whose first job was
//! already acked.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::warm_up_scripts;
use crate::support::clock::within;
use crate::support::inventory::inventory;
use crate::support::ledger::Ledger;
use crate::support::load::{Client, consume, produce, until_ledger};
use crate::support::nginx::Nginx;
use crate::support::redis_server::Paused;
use crate::support::{RedisServer, Service, spawn_app_with, test_config, unique_prefix, until};

const PROXIED_JOBS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instance_killed_behind_nginx_mid_load_loses_nothing_and_doubles_no_known_job() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let env = [("PRIOQ_SWEEP_INTERVAL_MS", "100")];
    let mut doomed = Service::start_with(&server.url(), &prefix, &env).await;
    let survivor = Service::start_with(&server.url(), &prefix, &env).await;
    let nginx = Nginx::start(&[&doomed.base, &survivor.base]).await;
    let ledger = Arc::new(Ledger::default());
    let client = Client::new(Arc::clone(&ledger), vec![nginx.url("")], "proxied");

    let stop = CancellationToken::new();
    let producers: Vec<_> = (0..2)
        .map(|p| {
            tokio::spawn(produce(
                client.clone(),
                format!("p{p}"),
                PROXIED_JOBS / 2,
                Duration::from_millis(2),
                stop.clone(),
            ))
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|c| tokio::spawn(consume(client.clone(), format!("c{c}"), 1000, stop.clone())))
        .collect();

    until_ledger(
        &ledger,
        Duration::from_secs(15),
        "a third of the jobs acked",
        |l| l.acked() >= (PROXIED_JOBS / 3) as u64,
    )
    .await;
    crate::support::send_signal(doomed.pid(), "KILL");
    until(
        Duration::from_secs(5),
        "the killed instance is gone",
        || {
            let gone = !doomed.still_running();
            async move { gone }
        },
    )
    .await;
    for producer in producers {
        producer.await.expect("producer");
    }
    // Leases handed out by the dead instance whose answers died with it
    // come back after 1 s.
    client.until_drained(Duration::from_secs(20)).await;
    stop.cancel();
    for consumer in consumers {
        consumer.await.expect("consumer");
    }

    let stored = inventory(&server.url(), &prefix, "proxied").await;
    let report = ledger.audit(&stored);
    report.assert_clean("an instance killed behind nginx");
    // Every client id acked, nothing left. An id acked twice is a job
    // whose enqueue answer died with the instance and that was claimed and
    // acked before the producer's retry came: the id was free again and
    // the retry created it anew (the audit checked that order).
    let mut acks: BTreeMap<String, u64> = BTreeMap::new();
    for delivery in ledger.deliveries() {
        if delivery.acked() || delivery.maybe_acked() {
            *acks.entry(delivery.id).or_default() += 1;
        }
    }
    assert_eq!(acks.len(), PROXIED_JOBS, "every job acked");
    let twice: u64 = acks.values().map(|n| n - 1).sum();
    assert_eq!(
        twice,
        report.count("jobs created again by a retried enqueue after their ack")
    );
    assert!(
        twice <= report.count("enqueues of unknown outcome (then retried)"),
        "{acks:?}"
    );
    assert!(stored.jobs.is_empty(), "{:?}", stored.jobs);
    eprintln!("nginx logged:\n{}", nginx.error_log());
}

/// Where "no duplicate" ends, step by step. An enqueue's answer is lost
/// (here a 503 "effect unknown": Redis was paused for writes, so the
/// script waited there and ran afterwards) yet the job was created; a
/// worker claims and acks it; then the producer's retry with the same
/// client id, done as README says, finds the id free again and creates a
/// second job: the work is done twice. Only a retry that arrives while the
/// job is still known (pending, scheduled, processing or dead) is
/// recognised. In the load test above this happens when an enqueue's
/// answer dies with the killed instance and the job is consumed before the
/// retry lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_retried_after_its_lost_first_job_was_acked_creates_a_second_job() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config).await;
    warm_up_scripts(&app).await;
    let url = app.queue_url("again", "/jobs");
    let body = json!({"task": "charge", "id": "order-1"});
    // The queue is known (an enqueue puts its name in the registry first,
    // a write that a pause would hold back too).
    let first = app.enqueue("again", json!({"task": "warm"})).await;
    let leased = app.claim_one("again").await.expect("a job");
    assert_eq!(leased["id"], first["id"]);
    assert_eq!(
        app.ack("again", &leased).await.status,
        StatusCode::NO_CONTENT
    );

    let paused = Paused::start(&server, "WRITE", 30_000);
    let lost = within(
        Duration::from_millis(1500),
        app.post(url.clone(), body.clone()),
    )
    .await;
    assert_eq!(lost.status, StatusCode::SERVICE_UNAVAILABLE, "{lost:?}");
    assert!(
        lost.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("unknown")),
        "{lost:?}"
    );
    paused.end().await;
    let created = app
        .wait_for_job("again", "order-1", Duration::from_secs(5), |j| {
            j["state"] == "pending"
        })
        .await;
    assert_eq!(created["attempts"], 0);
    let job = app.claim_one("again").await.expect("the job");
    assert_eq!(job["id"], "order-1");
    assert_eq!(app.ack("again", &job).await.status, StatusCode::NO_CONTENT);

    let retried = app.post(url, body).await;
    assert_eq!(retried.status, StatusCode::CREATED, "{retried:?}");
    assert_eq!(retried.body["created"], true);
    let again = app.claim_one("again").await.expect("a second job");
    assert_eq!(
        (again["id"].as_str(), again["attempts"].as_u64()),
        (Some("order-1"), Some(0))
    );
}
