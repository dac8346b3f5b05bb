//! Storms of worker processes killed with SIGKILL holding their jobs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::support::inventory::inventory;
use crate::support::ledger::{Delivery, Ledger, Reply};
use crate::support::load::{Acked, Client};
use crate::support::worker::claim_in_process_and_kill_answer;
use crate::support::{RedisServer, spawn_app_with, test_config};

const STORM_JOBS: usize = 60;
const STORM_FAILING: usize = 10;
const STORM_LEASE_MS: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_crash_storm_reclaims_every_abandoned_job_with_exact_attempts() {
    let redis = RedisServer::start();
    let mut config = test_config();
    config.redis_url = redis.url();
    let app = spawn_app_with(config.clone()).await;
    let ledger = Arc::new(Ledger::default());
    let client = Client::new(Arc::clone(&ledger), vec![app.base.clone()], "storm");
    for n in 0..STORM_JOBS {
        assert!(
            client
                .enqueue(
                    &format!("ok-{n}"),
                    json!({"task": "ok", "max_attempts": 20})
                )
                .await
        );
    }
    for n in 0..STORM_FAILING {
        assert!(
            client
                .enqueue(
                    &format!("fail-{n}"),
                    json!({"task": "fail", "max_attempts": 3})
                )
                .await
        );
    }

    // Rounds of four claims by workers here and one by a worker process
    // that is killed holding its job: a fifth of the claims abandoned.
    let claim_url = app.queue_url("storm", "/claim");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut crashed = 0;
    let mut handled = 0;
    while client
        .stats()
        .await
        .is_some_and(|s| s["pending"] != 0 || s["processing"] != 0)
    {
        assert!(Instant::now() < deadline, "the storm never settled");
        // Workers here take their time: a lease of 10 s.
        let round: Vec<usize> = futures_util::future::join_all((0..4).map(|w| {
            let client = &client;
            async move {
                let deliveries = client.claim(&format!("w{w}"), 10_000, 1, 2000).await;
                for delivery in &deliveries {
                    if client.ledger.delivery(*delivery).task == "fail" {
                        let nacked = client.nack(*delivery, 0, "always fails", false).await;
                        assert_eq!(nacked.status, 200, "{nacked:?}");
                    } else {
                        assert_eq!(client.ack(*delivery).await, Acked::Yes);
                    }
                }
                deliveries
            }
        }))
        .await
        .into_iter()
        .flatten()
        .collect();
        handled += round.len();
        if round.len() < 4 {
            continue; // The rest is leased to killed workers: wait for it.
        }
        let killed = claim_in_process_and_kill_answer(&claim_url, STORM_LEASE_MS).await;
        let reply = Reply {
            status: killed.status,
            body: killed.answer,
        };
        for delivery in ledger.claim_answered(&reply, STORM_LEASE_MS, "doomed") {
            ledger.abandoned(delivery);
            crashed += 1;
        }
    }

    let stored = inventory(&config.redis_url, &config.key_prefix, "storm").await;
    let report = ledger.audit(&stored);
    report.assert_clean("worker crash storm");
    let total = crashed + handled;
    eprintln!("storm: {total} claims, {crashed} abandoned by killed processes");
    assert!(crashed >= 15, "{crashed} crashes");
    assert!(
        crashed * 5 <= total + 5 && crashed * 5 + 20 >= total,
        "{crashed} of {total}"
    );

    // Per job: one delivery per abandon plus the one that finished it, and
    // the attempts each delivery showed count the abandons and nacks
    // before it, exactly.
    let mut history: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    for delivery in ledger.deliveries() {
        history
            .entry(delivery.id.clone())
            .or_default()
            .push(delivery);
    }
    assert_eq!(
        history.len(),
        STORM_JOBS + STORM_FAILING,
        "every job delivered"
    );
    for (id, deliveries) in &history {
        // Every delivery before the last ended without an ack.
        for (ended_without_ack, delivery) in deliveries.iter().enumerate() {
            assert_eq!(
                delivery.attempts, ended_without_ack as u64,
                "{id}: {deliveries:#?}"
            );
        }
        let abandoned = deliveries.iter().filter(|d| d.abandoned).count();
        if id.starts_with("ok-") {
            assert!(
                deliveries.last().is_some_and(Delivery::acked),
                "{id}: {deliveries:#?}"
            );
            assert_eq!(deliveries.len(), abandoned + 1, "{id}");
            assert!(!stored.jobs.contains_key(id));
        } else {
            assert_eq!(deliveries.len(), 3, "{id}: three deliveries, then dead");
            let job = &stored.jobs[id];
            assert_eq!((job.state, job.attempts), ("dead", 3), "{id}: {job:?}");
            let last = deliveries.last().expect("delivered");
            let reason = if last.abandoned {
                "lease expired"
            } else {
                "always fails"
            };
            assert_eq!(job.last_error.as_deref(), Some(reason), "{id}");
        }
    }
    assert_eq!(stored.count("dead"), STORM_FAILING as u64);
    assert_eq!(stored.jobs.len(), STORM_FAILING);

    // The killed workers' tokens, presented now, change nothing.
    let before = crate::support::snapshot(&config.redis_url, &config.key_prefix).await;
    for delivery in ledger.deliveries().iter().filter(|d| d.abandoned) {
        let late = client
            .post(
                &format!("/jobs/{}/ack", delivery.id),
                &json!({"lease_token": delivery.token}),
            )
            .await;
        let expected = if delivery.id.starts_with("ok-") {
            404
        } else {
            409
        };
        assert_eq!(late.status, expected, "{delivery:?}: {late:?}");
    }
    assert_eq!(
        crate::support::snapshot(&config.redis_url, &config.key_prefix).await,
        before
    );
}
