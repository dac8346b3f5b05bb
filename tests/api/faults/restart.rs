//! Redis killed with SIGKILL under load and started again on the same port
//! and files, with each kind of persistence.

use std::time::Duration;

use serde_json::json;

use crate::support::inventory::{Inventory, inventory};
use crate::support::ledger::Report;
use crate::support::load::{Load, two_instances, until_ledger};
use crate::support::{RedisServer, TempDir, test_config};

/// Jobs enqueued with a delay just before Redis goes down: they are
/// certainly in Redis (scheduled) when it dies.
const DELAYED_AT_RESTART: usize = 20;

/// Two instances under load (two producers, three consumers) while their
/// Redis, run with the persistence `flags`, is killed with SIGKILL and
/// started again on the same port and files. Returns the audit and what
/// Redis holds at the end, once the load has stopped and the queue drained.
async fn restart_under_load(flags: &str) -> (Report, Inventory) {
    let data = TempDir::new("faults-restart");
    let first = RedisServer::start_in(&data.path, flags);
    let port = first.port;
    let mut server = Some(first);
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{port}");
    config.redis_timeout_ms = 500;
    let (_a, _b, ledger, client) = two_instances(&config, "restart").await;
    let load = Load::start(&client, 2, 3, 1500);

    until_ledger(
        &ledger,
        Duration::from_secs(10),
        "200 jobs before the restart",
        |l| l.created() >= 200 && l.acked() >= 50,
    )
    .await;
    for n in 0..DELAYED_AT_RESTART {
        let body = json!({"task": "t", "delay_ms": 1500});
        assert!(client.enqueue(&format!("delayed-{n}"), body).await);
    }
    // Down (SIGKILL) until both sides have felt it, then up again on the
    // same port and files. A consumer feels it in its claim, or in the ack
    // it retries while Redis is away (then it claims nothing until the ack
    // went through: all three may be in acks).
    drop(server.take());
    until_ledger(
        &ledger,
        Duration::from_secs(10),
        "producers and consumers see the outage",
        |l| {
            l.counted("enqueue retried after 503") > 0
                && l.counted("claim retried after 503") + l.counted("ack retried after 503") > 0
        },
    )
    .await;
    let created_before = ledger.created();
    server = Some(RedisServer::spawn(port, &data.path, flags));
    until_ledger(
        &ledger,
        Duration::from_secs(15),
        "200 more jobs after the restart",
        |l| l.created() >= created_before + 200,
    )
    .await;
    load.drain(&client, Duration::from_secs(20)).await;

    let stored = inventory(&config.redis_url, &config.key_prefix, "restart").await;
    let report = ledger.audit(&stored);
    // Every request in the gap was answered (a 503 at once: nothing
    // listens on the port), none left hanging.
    let unanswered: Vec<_> = report
        .counts
        .keys()
        .filter(|what| what.ends_with("after no answer"))
        .collect();
    assert!(unanswered.is_empty(), "{unanswered:?}");
    assert!(report.count("enqueue retried after 503") > 0);
    drop(server);
    (report, stored)
}

/// AOF with `appendfsync always`: every write is on disk before Redis
/// answers, so a restart loses nothing that was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_under_load_with_appendfsync_always_loses_nothing() {
    let (report, stored) = restart_under_load("--appendonly yes --appendfsync always").await;
    report.assert_clean("Redis (appendfsync always) restarted under load");
    assert_eq!(stored.jobs.len(), 0, "every job acked: {:?}", stored.jobs);
}

/// AOF with `appendfsync everysec`: Redis writes the AOF to the operating
/// system before it answers and syncs it to disk once a second, so when
/// only the Redis process dies (SIGKILL) nothing answered is lost either.
/// (The second of writes everysec can lose goes with the machine: an OS
/// crash or a power cut, which a test on loopback cannot cause.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_process_killed_under_load_with_appendfsync_everysec_loses_nothing() {
    let (report, stored) = restart_under_load("--appendonly yes --appendfsync everysec").await;
    report.assert_clean("Redis (appendfsync everysec) killed and restarted under load");
    assert_eq!(stored.jobs.len(), 0, "every job acked: {:?}", stored.jobs);
}

/// No persistence: Redis comes back empty. Every job it held is gone,
/// enqueues answered 201 included (at least the delayed ones, scheduled
/// when it died), and the audit says so, naming nothing else. The service
/// itself carries on: the queue works again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_under_load_without_persistence_loses_the_jobs_it_held() {
    let (report, _) = restart_under_load("--appendonly no").await;
    let lost: Vec<&String> = report
        .violations
        .iter()
        .filter(|v| v.contains(": LOST: "))
        .collect();
    let others: Vec<&String> = report
        .violations
        .iter()
        .filter(|v| !v.contains(": LOST: "))
        .collect();
    eprintln!(
        "Redis without persistence restarted under load: {} jobs answered 201 lost; {:?}",
        lost.len(),
        report.counts
    );
    assert!(others.is_empty(), "{others:#?}");
    for n in 0..DELAYED_AT_RESTART {
        let id = format!("job delayed-{n}: LOST");
        assert!(lost.iter().any(|v| v.starts_with(&id)), "{id}: {lost:#?}");
    }
}
