//! Storms of worker processes killed with SIGKILL holding their jobs.

use std::collections::BTreeMap;
use std::time::Duration;

use prioq_chaos::checker::Violation;
use prioq_chaos::history::{Call, Lease, Op, Outcome};
use prioq_chaos::run::client::now_ms;
use prioq_chaos::scenario::{Scenario, final_states, violations};
use reqwest::StatusCode;
use serde_json::json;
use tokio::time::Instant;

use crate::support::worker::claim_in_process_and_kill_answer;
use crate::support::{RedisServer, TempDir, spawn_app_with, test_config};

const STORM_JOBS: usize = 60;
const STORM_FAILING: usize = 10;
const STORM_LEASE_MS: u64 = 300;
const QUEUE: &str = "storm";
/// The worker name of the processes killed holding their job.
const DOOMED: &str = "doomed";

/// One lease of the history, and whether its holder was killed.
#[derive(Debug)]
struct Delivery<'h> {
    lease: &'h Lease,
    abandoned: bool,
    /// When Redis granted it, by its clock.
    granted_at: i64,
}

/// Every lease the history's claims answered, by job, in the order Redis
/// granted them.
fn deliveries(ops: &[Op]) -> BTreeMap<&str, Vec<Delivery<'_>>> {
    let mut by_job: BTreeMap<&str, Vec<Delivery<'_>>> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.outcome == Outcome::Ok) {
        let Call::Claim {
            worker,
            lease_ms,
            jobs,
            ..
        } = &op.call
        else {
            continue;
        };
        for lease in jobs {
            by_job.entry(&lease.id).or_default().push(Delivery {
                lease,
                abandoned: worker == DOOMED,
                granted_at: lease.expires_at - *lease_ms as i64,
            });
        }
    }
    for list in by_job.values_mut() {
        list.sort_by_key(|d| d.granted_at);
    }
    by_job
}

/// The tokens of the acks answered 204.
fn acked_tokens(ops: &[Op]) -> Vec<&str> {
    ops.iter()
        .filter(|op| op.status == Some(204))
        .filter_map(|op| match &op.call {
            Call::Ack(ack) => Some(ack.token.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_crash_storm_reclaims_every_abandoned_job_with_exact_attempts() {
    let redis = RedisServer::start();
    let mut config = test_config();
    config.redis_url = redis.url();
    let app = spawn_app_with(config.clone()).await;
    let history = TempDir::new("crash-storm-history");
    let scenario = Scenario::new(vec![app.base.clone()], &history.path).expect("the history file");
    // Not kept once acked: the killed workers' tokens then find no job.
    let jobs = (0..STORM_JOBS)
        .map(|n| {
            (
                format!("ok-{n}"),
                json!({"task": "ok", "max_attempts": 20, "retain_ms": 0}),
            )
        })
        .chain((0..STORM_FAILING).map(|n| {
            let extra = json!({"task": "fail", "max_attempts": 3, "retain_ms": 0});
            (format!("fail-{n}"), extra)
        }));
    for (id, extra) in jobs {
        assert!(
            scenario
                .enqueue("producer", QUEUE, &id, (0, 0), &extra)
                .await
        );
    }

    // Rounds of four claims by workers here and one by a worker process
    // that is killed holding its job: a fifth of the claims abandoned.
    let claim_url = app.queue_url(QUEUE, "/claim");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut crashed = 0;
    let mut handled = 0;
    let mut rounds = 0;
    while !scenario.drained(QUEUE).await {
        assert!(Instant::now() < deadline, "the storm never settled");
        rounds += 1;
        // Workers here take their time: a lease of 10 s.
        let round: Vec<Lease> = futures_util::future::join_all((0..4).map(|w| {
            let scenario = &scenario;
            async move {
                let worker = format!("w{w}");
                let request_id = format!("{worker}-{rounds}");
                let shape = (10_000, 1, 2000);
                let leases = scenario.claim(&worker, QUEUE, &request_id, shape).await;
                for lease in &leases {
                    if lease.id.starts_with("fail-") {
                        let nack = (0, "always fails", false);
                        let nacked = scenario.nack(&worker, QUEUE, lease, nack).await;
                        assert_eq!(nacked.status, Some(200), "{nacked:?}");
                    } else {
                        let acked = scenario.ack(&worker, QUEUE, lease).await;
                        assert_eq!(acked.status, Some(204), "{acked:?}");
                    }
                }
                leases
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
        let request_id = format!("{DOOMED}-{rounds}");
        let start_ms = now_ms();
        let killed =
            claim_in_process_and_kill_answer(&claim_url, STORM_LEASE_MS, &request_id).await;
        let status = (killed.status != 0).then_some(killed.status);
        let claim = (DOOMED, QUEUE, request_id.as_str());
        let answer = (status, killed.answer);
        crashed += scenario
            .claimed_elsewhere(claim, STORM_LEASE_MS, start_ms, answer)
            .len();
    }

    let ops = scenario.finish().await.expect("the history");
    assert_eq!(violations(&ops), Vec::<Violation>::new());
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
    let by_job = deliveries(&ops);
    let acked = acked_tokens(&ops);
    let states = final_states(&ops);
    assert_eq!(
        by_job.len(),
        STORM_JOBS + STORM_FAILING,
        "every job delivered"
    );
    for (id, list) in &by_job {
        // Every delivery before the last ended without an ack.
        for (ended_without_ack, delivery) in list.iter().enumerate() {
            assert_eq!(
                delivery.lease.attempts, ended_without_ack as u32,
                "{id}: {list:#?}"
            );
        }
        let abandoned = list.iter().filter(|d| d.abandoned).count();
        let last = list.last().expect("delivered");
        if id.starts_with("ok-") {
            assert!(
                acked.contains(&last.lease.token.as_str()),
                "{id}: {list:#?}"
            );
            assert_eq!(list.len(), abandoned + 1, "{id}");
            assert_eq!(states[id], None, "{id}: acked, not kept");
        } else {
            assert_eq!(list.len(), 3, "{id}: three deliveries, then dead");
            assert_eq!(states[id], Some("dead"), "{id}");
            let job = app.job(QUEUE, id).await.body;
            let reason = if last.abandoned {
                "lease expired"
            } else {
                "always fails"
            };
            assert_eq!(
                (job["attempts"].as_u64(), job["last_error"].as_str()),
                (Some(3), Some(reason)),
                "{id}: {job}"
            );
        }
    }

    // The killed workers' tokens, presented now, change nothing.
    let before = crate::support::snapshot(&config.redis_url, &config.key_prefix).await;
    let abandoned = by_job.values().flatten().filter(|d| d.abandoned);
    for delivery in abandoned {
        let lease = delivery.lease;
        let path = format!("/jobs/{}/ack", lease.id);
        let late = app
            .post(
                app.queue_url(QUEUE, &path),
                json!({"lease_token": lease.token}),
            )
            .await;
        let expected = if lease.id.starts_with("ok-") {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::CONFLICT
        };
        assert_eq!(late.status, expected, "{lease:?}: {late:?}");
    }
    assert_eq!(
        crate::support::snapshot(&config.redis_url, &config.key_prefix).await,
        before
    );
}
