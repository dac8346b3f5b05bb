//! The soak: a minute (`PRIOQ_SOAK_SECS` for longer) of producers,
//! consumers, worker processes killed with SIGKILL holding a job, leases
//! abandoned in-process, nacks (some delayed, some to the DLQ), delayed
//! enqueues, extends, a straggler whose acks come after its lease, and one
//! Redis restart (AOF, `appendfsync always`) in the middle. Two instances
//! share the queue. Then the audit of `support::ledger`: every job created
//! is acked exactly once or still pending, scheduled, processing or dead;
//! attempts count the deliveries that ended without an ack; no stale-lease
//! ack was accepted; the leases of one job never overlap. It prints a
//! report of the counts.
//!
//! The random choices come from `PRIOQ_SOAK_SEED` (printed; the clock by
//! default), though timing makes no two runs alike.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::inventory::inventory;
use crate::support::ledger::Reply;
use crate::support::load::{Client, two_instances};
use crate::support::rng::{self, Rng};
use crate::support::worker::claim_in_process_and_kill_answer;
use crate::support::{AOF_ALWAYS, RedisServer, TempDir, test_config, until};

const DEFAULT_SECS: u64 = 60;
/// Lease of the consumers here; the worker processes take 1 s.
const LEASE_MS: u64 = 2000;
const QUEUE: &str = "soak";

fn soak_secs() -> u64 {
    std::env::var("PRIOQ_SOAK_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(DEFAULT_SECS)
}

/// Enqueues jobs `{name}-0`, `{name}-1`... until `stop`, about one every
/// `pace`: priorities 0 to 3, a sixth of them delayed by up to 3 s, 3 or 5
/// attempts each.
async fn producer(
    client: Client,
    name: String,
    seed: u64,
    pace: Duration,
    stop: CancellationToken,
) {
    let mut rng = Rng::new(seed);
    for n in 0.. {
        if stop.is_cancelled() {
            return;
        }
        let delay_ms = if rng.one_in(6) {
            100 + rng.below(2900)
        } else {
            0
        };
        let body = json!({
            "task": "soak",
            "args": {"n": n},
            "priority": rng.below(4),
            "delay_ms": delay_ms,
            "max_attempts": if rng.one_in(2) { 3 } else { 5 },
        });
        client.enqueue(&format!("{name}-{n}"), body).await;
        tokio::time::sleep(pace).await;
    }
}

/// Claims up to three jobs at a time until `stop`; per job: mostly an ack,
/// sometimes an extend then an ack, a nack (at once, after a delay, or to
/// the DLQ), or nothing at all (a crash: the lease is abandoned).
async fn consumer(client: Client, name: String, seed: u64, stop: CancellationToken) {
    let mut rng = Rng::new(seed);
    while !stop.is_cancelled() {
        let max_jobs = 1 + u32::try_from(rng.below(3)).unwrap_or(0);
        let deliveries = client.claim(&name, LEASE_MS, max_jobs, 500).await;
        if deliveries.is_empty() {
            // Nothing, or Redis is away: do not spin.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for delivery in deliveries {
            tokio::time::sleep(Duration::from_millis(rng.below(5) as u64)).await;
            match rng.below(100) {
                0..=4 => client.ledger.abandoned(delivery),
                5..=9 => {
                    client.nack(delivery, 0, "flaky", false).await;
                }
                10..=14 => {
                    let delay = 200 + rng.below(800) as u64;
                    client.nack(delivery, delay, "later", false).await;
                }
                15..=16 => {
                    client.nack(delivery, 0, "hopeless", true).await;
                }
                17..=21 => {
                    client.extend(delivery, LEASE_MS).await;
                    client.ack(delivery).await;
                }
                _ => {
                    client.ack(delivery).await;
                }
            }
        }
    }
}

/// Claims one job at a time with a 300 ms lease and acks it only after
/// 500 ms: by then the sweeper has usually taken it back (and another
/// worker may hold it), so the ack must be refused.
async fn straggler(client: Client, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let deliveries = client.claim("straggler", 300, 1, 500).await;
        if deliveries.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for delivery in deliveries {
            tokio::time::sleep(Duration::from_millis(500)).await;
            client.ack(delivery).await;
        }
    }
}

/// About once a second, a worker process claims a job (1 s lease) and is
/// killed with SIGKILL holding it.
async fn crasher(client: Client, claim_urls: Vec<String>, stop: CancellationToken) {
    for n in 0.. {
        if stop.is_cancelled() {
            return;
        }
        let killed =
            claim_in_process_and_kill_answer(&claim_urls[n % claim_urls.len()], 1000).await;
        let reply = Reply {
            status: killed.status,
            body: killed.answer,
        };
        for delivery in client.ledger.claim_answered(&reply, 1000, "doomed") {
            client.ledger.abandoned(delivery);
            client
                .ledger
                .count("leases held by worker processes killed with SIGKILL");
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_with_crashes_nacks_delays_and_a_redis_restart_accounts_for_every_job() {
    let secs = soak_secs();
    let seed = rng::seed("PRIOQ_SOAK_SEED");
    eprintln!("soak: {secs} s, PRIOQ_SOAK_SEED={seed}");
    let data = TempDir::new("soak");
    let first = RedisServer::start_in(&data.path, AOF_ALWAYS);
    let port = first.port;
    let mut server = Some(first);
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{port}");
    config.redis_timeout_ms = 1000;
    config.sweep_interval_ms = 100;
    let (a, b, ledger, client) = two_instances(&config, QUEUE).await;

    let stop_load = CancellationToken::new();
    let stop_consumers = CancellationToken::new();
    let mut load = Vec::new();
    for p in 0..2 {
        let (client, stop) = (client.clone(), stop_load.clone());
        load.push(tokio::spawn(producer(
            client,
            format!("p{p}"),
            seed + p,
            Duration::from_millis(25),
            stop,
        )));
    }
    load.push(tokio::spawn(straggler(client.clone(), stop_load.clone())));
    let claim_urls = vec![a.queue_url(QUEUE, "/claim"), b.queue_url(QUEUE, "/claim")];
    load.push(tokio::spawn(crasher(
        client.clone(),
        claim_urls,
        stop_load.clone(),
    )));
    let consumers: Vec<_> = (0..3)
        .map(|c| {
            let (client, stop) = (client.clone(), stop_consumers.clone());
            tokio::spawn(consumer(client, format!("c{c}"), seed + 100 + c, stop))
        })
        .collect();

    // Half the time, then Redis killed and started again on its files.
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs / 2)).await;
    let before =
        ledger.counted("enqueue retried after 503") + ledger.counted("claim retried after 503");
    drop(server.take());
    let down = Instant::now();
    until(Duration::from_secs(10), "clients see Redis gone", || {
        let seen =
            ledger.counted("enqueue retried after 503") + ledger.counted("claim retried after 503");
        async move { seen > before }
    })
    .await;
    server = Some(RedisServer::start_on(port, &data.path));
    let gap = down.elapsed();
    tokio::time::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed())).await;

    stop_load.cancel();
    for task in load {
        task.await.expect("producer, straggler or crasher");
    }
    // Delays up to 3 s, leases up to 2 s, nack delays up to 1 s.
    client.until_drained(Duration::from_secs(60)).await;
    stop_consumers.cancel();
    for consumer in consumers {
        consumer.await.expect("consumer");
    }

    let stored = inventory(&config.redis_url, &config.key_prefix, QUEUE).await;
    let mut report = ledger.audit(&stored);
    report.counts.insert("seconds of load".into(), secs);
    report.counts.insert(
        "ms Redis was down (killed, then restarted)".into(),
        u64::try_from(gap.as_millis()).unwrap_or(0),
    );
    report.assert_clean("soak");
    // Every part of the load happened.
    for what in [
        "jobs created (201)",
        "acks answered 204",
        "nacks answered 200",
        "leases abandoned",
        "leases held by worker processes killed with SIGKILL",
        "leases taken back after expiry, then redelivered",
        "acks refused (stale lease: 409 or 404)",
        "extends answered 200",
        "left dead",
    ] {
        assert!(report.count(what) > 0, "no {what}");
    }
    assert!(
        report.count("enqueue retried after 503") + report.count("claim retried after 503") > 0,
        "the restart went unnoticed"
    );
    assert_eq!(
        stored.jobs.len() as u64,
        stored.count("dead"),
        "only dead jobs are left"
    );
    drop(server);
}
