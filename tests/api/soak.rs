//! The soak: a minute (`PRIOQ_SOAK_SECS` for longer) of producers,
//! consumers, worker processes killed with SIGKILL holding a job, leases
//! abandoned in-process, nacks (some delayed, some to the DLQ), delayed
//! enqueues, extends, a straggler whose acks come after its lease, and one
//! Redis restart (AOF, `appendfsync always`) in the middle. Two instances
//! share the queue. Every request goes into a history
//! (`prioq_chaos::scenario`), every job is read back at the end, and the
//! checker judges it: no job lost, none delivered again after its ack, no
//! stale-lease ack accepted, the leases of one job never overlap, claims
//! in priority and enqueue order. The test then checks that every part of
//! the load happened.
//!
//! The random choices come from `PRIOQ_SOAK_SEED` (printed; the clock by
//! default), though timing makes no two runs alike.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use prioq_chaos::checker::{Facts, Violation};
use prioq_chaos::history::Call;
use prioq_chaos::run::client::now_ms;
use prioq_chaos::scenario::{Scenario, final_states, violations};
use serde_json::json;
use tokio::time::Instant;

use crate::support::recorded::two_instances_recorded;
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

/// What the load's tasks share: the clients, when to stop, and what the
/// history does not tell (leases dropped on purpose).
struct Soak {
    scenario: Arc<Scenario>,
    stop_load: AtomicBool,
    stop_consumers: AtomicBool,
    abandoned: AtomicU64,
    killed_holding: AtomicU64,
}

/// Enqueues jobs `{name}-0`, `{name}-1`... until told to stop, about one
/// every `pace`: priorities 0 to 3, a sixth of them delayed by up to 3 s,
/// 3 or 5 attempts each.
async fn producer(soak: Arc<Soak>, name: String, seed: u64, pace: Duration) {
    let mut rng = Rng::new(seed);
    for n in 0.. {
        if soak.stop_load.load(Ordering::Relaxed) {
            return;
        }
        let delay_ms = if rng.one_in(6) {
            100 + rng.below(2900) as u64
        } else {
            0
        };
        let priority = rng.below(4) as u8;
        let extra = json!({"task": "soak", "args": {"n": n}, "max_attempts": if rng.one_in(2) { 3 } else { 5 }});
        let id = format!("{name}-{n}");
        soak.scenario
            .enqueue(&name, QUEUE, &id, (priority, delay_ms), &extra)
            .await;
        tokio::time::sleep(pace).await;
    }
}

/// Claims up to three jobs at a time until told to stop; per job: mostly
/// an ack, sometimes an extend then an ack, a nack (at once, after a
/// delay, or to the DLQ), or nothing at all (a crash: the lease is
/// abandoned).
async fn consumer(soak: Arc<Soak>, name: String, seed: u64) {
    let mut rng = Rng::new(seed);
    let scenario = &soak.scenario;
    let mut claims = 0;
    while !soak.stop_consumers.load(Ordering::Relaxed) {
        claims += 1;
        let max_jobs = 1 + u32::try_from(rng.below(3)).unwrap_or(0);
        let request_id = format!("{name}-{claims}");
        let shape = (LEASE_MS, max_jobs, 500);
        let leases = scenario.claim(&name, QUEUE, &request_id, shape).await;
        if leases.is_empty() {
            // Nothing, or Redis is away: do not spin.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for lease in &leases {
            tokio::time::sleep(Duration::from_millis(rng.below(5) as u64)).await;
            match rng.below(100) {
                0..=4 => {
                    soak.abandoned.fetch_add(1, Ordering::Relaxed);
                }
                5..=9 => {
                    scenario
                        .nack(&name, QUEUE, lease, (0, "flaky", false))
                        .await;
                }
                10..=14 => {
                    let delay = 200 + rng.below(800) as u64;
                    scenario
                        .nack(&name, QUEUE, lease, (delay, "later", false))
                        .await;
                }
                15..=16 => {
                    scenario
                        .nack(&name, QUEUE, lease, (0, "hopeless", true))
                        .await;
                }
                17..=21 => {
                    scenario.extend(&name, QUEUE, lease, LEASE_MS).await;
                    scenario.ack(&name, QUEUE, lease).await;
                }
                _ => {
                    scenario.ack(&name, QUEUE, lease).await;
                }
            }
        }
    }
}

/// Claims one job at a time with a 300 ms lease and acks it only after
/// 500 ms: by then the sweeper has usually taken it back (and another
/// worker may hold it), so the ack must be refused.
async fn straggler(soak: Arc<Soak>) {
    let mut claims = 0;
    while !soak.stop_load.load(Ordering::Relaxed) {
        claims += 1;
        let request_id = format!("straggler-{claims}");
        let leases = soak
            .scenario
            .claim("straggler", QUEUE, &request_id, (300, 1, 500))
            .await;
        if leases.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for lease in &leases {
            tokio::time::sleep(Duration::from_millis(500)).await;
            soak.scenario.ack("straggler", QUEUE, lease).await;
        }
    }
}

/// About once a second, a worker process claims a job (1 s lease) and is
/// killed with SIGKILL holding it.
async fn crasher(soak: Arc<Soak>, claim_urls: Vec<String>) {
    for n in 0.. {
        if soak.stop_load.load(Ordering::Relaxed) {
            return;
        }
        let request_id = format!("doomed-{n}");
        let start_ms = now_ms();
        let url = &claim_urls[n % claim_urls.len()];
        let killed = claim_in_process_and_kill_answer(url, 1000, &request_id).await;
        let status = (killed.status != 0).then_some(killed.status);
        let held = soak.scenario.claimed_elsewhere(
            ("doomed", QUEUE, &request_id),
            1000,
            start_ms,
            (status, killed.answer),
        );
        soak.killed_holding
            .fetch_add(held.len() as u64, Ordering::Relaxed);
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
    let recorded = two_instances_recorded(config, "soak-history").await;
    let scenario = Arc::clone(&recorded.scenario);
    let soak = Arc::new(Soak {
        scenario: Arc::clone(&scenario),
        stop_load: AtomicBool::new(false),
        stop_consumers: AtomicBool::new(false),
        abandoned: AtomicU64::new(0),
        killed_holding: AtomicU64::new(0),
    });

    let mut load = Vec::new();
    for p in 0..2 {
        let name = format!("p{p}");
        let pace = Duration::from_millis(25);
        load.push(tokio::spawn(producer(soak.clone(), name, seed + p, pace)));
    }
    load.push(tokio::spawn(straggler(soak.clone())));
    let claim_urls: Vec<String> = recorded
        .apps
        .iter()
        .map(|app| app.queue_url(QUEUE, "/claim"))
        .collect();
    load.push(tokio::spawn(crasher(soak.clone(), claim_urls)));
    let consumers: Vec<_> = (0..3)
        .map(|c| tokio::spawn(consumer(soak.clone(), format!("c{c}"), seed + 100 + c)))
        .collect();

    // Half the time, then Redis killed and started again on its files.
    let refused =
        || scenario.answered("enqueue", Some(503)) + scenario.answered("claim", Some(503));
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs / 2)).await;
    let before = refused();
    drop(server.take());
    let down = Instant::now();
    until(Duration::from_secs(10), "clients see Redis gone", || {
        let seen = refused();
        async move { seen > before }
    })
    .await;
    server = Some(RedisServer::start_on(port, &data.path));
    let gap = down.elapsed();
    tokio::time::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed())).await;

    soak.stop_load.store(true, Ordering::Relaxed);
    for task in load {
        task.await.expect("producer, straggler or crasher");
    }
    // Delays up to 3 s, leases up to 2 s, nack delays up to 1 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !scenario.drained(QUEUE).await {
        assert!(Instant::now() < deadline, "the queue never drained");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    soak.stop_consumers.store(true, Ordering::Relaxed);
    for consumer in consumers {
        consumer.await.expect("consumer");
    }

    let ops = scenario.finish().await.expect("the history");
    assert_eq!(violations(&ops), Vec::<Violation>::new());
    // Leases that ended without an ack or a nack and whose job was leased
    // again: taken back after they ran out.
    let released: BTreeSet<&str> = ops
        .iter()
        .filter_map(|op| match (&op.call, op.status) {
            (Call::Ack(ack), Some(204)) => Some(ack.token.as_str()),
            (Call::Nack { token, .. }, Some(200)) => Some(token.as_str()),
            _ => None,
        })
        .collect();
    let facts = Facts::new(&ops);
    let reclaimed: usize = facts
        .jobs
        .values()
        .map(|job| {
            let mut leases: Vec<_> = job.leases.iter().map(|&i| &facts.leases[i]).collect();
            leases.sort_by_key(|l| l.granted_at);
            leases
                .windows(2)
                .filter(|pair| !released.contains(pair[0].lease.token.as_str()))
                .count()
        })
        .sum();
    let states = final_states(&ops);
    let dead = states.values().filter(|s| **s == Some("dead")).count();
    let counts = [
        ("jobs created (201)", scenario.created()),
        ("acks answered 204", scenario.acked()),
        ("nacks answered 200", scenario.answered("nack", Some(200))),
        ("leases abandoned", soak.abandoned.load(Ordering::Relaxed)),
        (
            "leases held by worker processes killed with SIGKILL",
            soak.killed_holding.load(Ordering::Relaxed),
        ),
        (
            "leases taken back after expiry, then redelivered",
            reclaimed as u64,
        ),
        (
            "acks refused (stale lease: 409 or 404)",
            scenario.answered("ack", Some(409)) + scenario.answered("ack", Some(404)),
        ),
        (
            "extends answered 200",
            scenario.answered("extend", Some(200)),
        ),
        ("left dead", dead as u64),
        ("requests refused while Redis was down (503)", refused()),
    ];
    eprintln!("soak: {} operations, Redis down {gap:?}", ops.len());
    for (what, n) in counts {
        eprintln!("  {n:>7}  {what}");
    }
    // Every part of the load happened.
    for (what, n) in counts {
        assert!(n > 0, "no {what}");
    }
    let others: Vec<(&str, Option<&str>)> = states
        .into_iter()
        .filter(|(_, s)| !matches!(s, None | Some("completed" | "dead")))
        .collect();
    assert!(
        others.is_empty(),
        "only completed and dead jobs are left: {others:?}"
    );
    drop(server);
}
