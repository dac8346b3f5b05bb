//! Redis killed with SIGKILL under load and started again on the same port
//! and files, with each kind of persistence.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use prioq_chaos::checker::Violation;
use prioq_chaos::history::{Call, Op};
use prioq_chaos::run::client::now_ms;
use prioq_chaos::scenario::{Load, Scenario, Shape, unfinished, violations};
use serde_json::Value;

use crate::support::recorded::two_instances_recorded;
use crate::support::{RedisServer, TempDir, test_config, until};

/// Jobs enqueued with a delay just before Redis goes down: they are
/// certainly in Redis (scheduled) when it dies.
const DELAYED_AT_RESTART: usize = 20;
const QUEUE: &str = "restart";

/// What a restart under load left: the history, and when Redis was
/// started again (the runner's clock).
struct Restarted {
    ops: Vec<Op>,
    restarted_ms: i64,
}

/// Two instances under load (two producers, three consumers) while their
/// Redis, run with the persistence `flags`, is killed with SIGKILL and
/// started again on the same port and files; then the load stops, the
/// queue drains and every job is read back into the history.
async fn restart_under_load(flags: &str) -> Restarted {
    let data = TempDir::new("faults-restart");
    let first = RedisServer::start_in(&data.path, flags);
    let port = first.port;
    let mut server = Some(first);
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{port}");
    config.redis_timeout_ms = 500;
    let recorded = two_instances_recorded(config, "faults-restart-history").await;
    let scenario = Arc::clone(&recorded.scenario);
    let shape = Shape {
        producers: 2,
        consumers: 3,
        count: 5000,
        pace: Duration::from_millis(3),
        lease_ms: 1500,
    };
    let load = Load::start(&scenario, QUEUE, shape);

    let seen = |what: &'static str, condition: fn(&Scenario) -> bool| {
        let scenario = Arc::clone(&scenario);
        until(Duration::from_secs(15), what, move || {
            let holds = condition(&scenario);
            async move { holds }
        })
    };
    seen("200 jobs before the restart", |s| {
        s.created() >= 200 && s.acked() >= 50
    })
    .await;
    for n in 0..DELAYED_AT_RESTART {
        let id = format!("delayed-{n}");
        let job = (0, 1500);
        assert!(
            scenario
                .enqueue("delayer", QUEUE, &id, job, &Value::Null)
                .await
        );
    }
    // Down (SIGKILL) until both sides have felt it, then up again on the
    // same port and files. A consumer feels it in its claim, or in the ack
    // it retries while Redis is away (then it claims nothing until the ack
    // went through: all three may be in acks).
    drop(server.take());
    seen("producers and consumers see the outage", |s| {
        s.answered("enqueue", Some(503)) > 0
            && s.answered("claim", Some(503)) + s.answered("ack", Some(503)) > 0
    })
    .await;
    let created_before = scenario.created();
    let restarted_ms = now_ms();
    server = Some(RedisServer::spawn(port, &data.path, flags));
    until(
        Duration::from_secs(15),
        "200 more jobs after the restart",
        || {
            let holds = scenario.created() >= created_before + 200;
            async move { holds }
        },
    )
    .await;
    load.drain(Duration::from_secs(20)).await;
    let ops = scenario.finish().await.expect("the history");
    // Every request in the gap was answered (a 503 at once: nothing
    // listens on the port), none left hanging.
    let unanswered: Vec<&Op> = ops.iter().filter(|op| op.status.is_none()).collect();
    assert!(unanswered.is_empty(), "{unanswered:#?}");
    drop(server);
    Restarted { ops, restarted_ms }
}

/// AOF with `appendfsync always`: every write is on disk before Redis
/// answers, so a restart loses nothing that was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_under_load_with_appendfsync_always_loses_nothing() {
    let run = restart_under_load("--appendonly yes --appendfsync always").await;
    assert_eq!(violations(&run.ops), Vec::<Violation>::new());
    assert_eq!(unfinished(&run.ops), Vec::<&str>::new(), "every job acked");
}

/// AOF with `appendfsync everysec`: Redis writes the AOF to the operating
/// system before it answers and syncs it to disk once a second, so when
/// only the Redis process dies (SIGKILL) nothing answered is lost either.
/// (The second of writes everysec can lose goes with the machine: an OS
/// crash or a power cut, which a test on loopback cannot cause.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_process_killed_under_load_with_appendfsync_everysec_loses_nothing() {
    let run = restart_under_load("--appendonly yes --appendfsync everysec").await;
    assert_eq!(violations(&run.ops), Vec::<Violation>::new());
    assert_eq!(unfinished(&run.ops), Vec::<&str>::new(), "every job acked");
}

/// No persistence: Redis comes back empty. Every job it held is gone,
/// enqueues answered 201 included (at least the delayed ones, scheduled
/// when it died), and the checker says so: a lost job for each, every one
/// enqueued before the restart. Its order rules, which take a job enqueued
/// ok and never claimed for pending, may name a lost job as the one a
/// claim should have taken first; nothing else is reported. The service
/// itself carries on: the queue works again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_under_load_without_persistence_loses_the_jobs_it_held() {
    let run = restart_under_load("--appendonly no").await;
    let by_number = |n: u64| run.ops.iter().find(|op| op.op == n);
    let found = violations(&run.ops);
    let (lost, others): (Vec<&Violation>, Vec<&Violation>) =
        found.iter().partition(|v| v.rule == "lost_job");
    // A lost job's violation names its enqueue answered ok, then its read.
    let mut lost_ids = BTreeSet::new();
    for violation in &lost {
        let enqueue = by_number(violation.ops[0]).expect("the enqueue");
        let Call::Enqueue { id, .. } = &enqueue.call else {
            panic!("{violation}: not an enqueue first");
        };
        assert!(
            enqueue.end_ms < run.restarted_ms,
            "{violation}: enqueued after the restart"
        );
        lost_ids.insert(id.as_str());
    }
    for n in 0..DELAYED_AT_RESTART {
        let id = format!("delayed-{n}");
        assert!(lost_ids.contains(id.as_str()), "{id}: {lost_ids:?}");
    }
    let unexplained: Vec<&&Violation> = others
        .iter()
        .filter(|v| {
            let order = matches!(v.rule, "priority_order" | "fifo_order");
            let witness = v.ops.get(1).and_then(|&n| by_number(n));
            !(order
                && witness.is_some_and(|op| {
                    matches!(&op.call, Call::Enqueue { id, .. } if lost_ids.contains(id.as_str()))
                }))
        })
        .collect();
    assert!(unexplained.is_empty(), "{unexplained:#?}");
    eprintln!(
        "Redis without persistence restarted under load: {} jobs answered 201 lost, \
         {} order violations naming one of them",
        lost.len(),
        others.len()
    );
}
