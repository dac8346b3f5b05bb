//! A slot holding one of a sharded queue's shards moved to another
//! primary while producers and workers run (an operator's resharding of
//! the cluster), and a move that cannot finish in time left half moved
//! for a while, then moved on.

use std::sync::Arc;
use std::time::Duration;

use prioq_chaos::checker::Violation;
use prioq_chaos::scenario::{Load, Shape, unfinished, violations};
use prioq_chaos::slots::{Migration, Moved, move_slot};
use serde_json::json;

use super::preshard;
use crate::support::app::configure;
use crate::support::cluster::{
    ClusterConfig, RedisCluster, cluster_connection, primary_of_slot, shard_slot,
};
use crate::support::recorded::two_instances_recorded;
use crate::support::{redis, redis_connection, spawn_app_with, until};

/// Moves the slot of shard 1 of a 3-shard queue that keeps histories (one
/// key per job in the slot) from its primary to another, `how` its keys
/// go, with 300 jobs enqueued before and two producers and three workers
/// running on two instances throughout; a move left open goes on once
/// clients met it (enqueues refused). Then the queue drains, every job is
/// read back and the checker judges the history. Answers where the first move left
/// the slot, the slot, and its owners before and after.
async fn move_under_load(queue: &str, how: Migration) -> (Moved, u16, u16, u16) {
    let cluster = RedisCluster::start();
    let config = cluster.config();
    preshard(&config, &[queue], 3).await;
    let app = spawn_app_with(config.clone()).await;
    configure(&app, queue, json!({"history_ms": 600_000})).await;
    app.stop().await;
    let recorded = two_instances_recorded(config.clone(), "slot-move-history").await;
    let scenario = Arc::clone(&recorded.scenario);
    let shape = Shape {
        producers: 2,
        consumers: 3,
        count: 1500,
        pace: Duration::from_millis(3),
        lease_ms: 5000,
    };
    let load = Load::start(&scenario, queue, shape);
    let created = |n: u64| {
        let scenario = Arc::clone(&scenario);
        move || {
            let done = scenario.created() >= n;
            async move { done }
        }
    };
    until(Duration::from_secs(20), "300 jobs", created(300)).await;

    let mut conn = cluster_connection(&cluster.urls()).await;
    let slot = shard_slot(&mut conn, &config.key_prefix, (queue, 1, 3)).await;
    let before = primary_of_slot(&cluster.urls()[0]).await[&slot];
    let other = *cluster.ports.iter().find(|p| **p != before).expect("ports");
    let url = |port: u16| format!("redis://127.0.0.1:{port}");
    let first = move_slot(&url(before), &url(other), slot, how)
        .await
        .expect("the move's steps");
    if first == Moved::Open {
        // Half moved while the load goes on: the shard's enqueues are
        // refused (503, effect none, retried by the producers; so are
        // claims with a request id, which may not pass over a shard that
        // may hold their answer). Then the move goes on to the end.
        let refused = scenario.answered("enqueue", Some(503));
        until(
            Duration::from_secs(30),
            "enqueues refused with the slot half moved",
            || {
                let done = scenario.answered("enqueue", Some(503)) >= refused + 3;
                async move { done }
            },
        )
        .await;
        let rest = Migration {
            timeout: Duration::from_secs(120),
            ..how
        };
        let moved = move_slot(&url(before), &url(other), slot, rest)
            .await
            .expect("the move's steps");
        assert_eq!(moved, Moved::There, "the move went on to the end");
    }

    // The slot is closed on every primary: no `[slot->-node]` or
    // `[slot-<-node]` left open.
    for port in &cluster.ports {
        let mut node = redis_connection(&url(*port)).await;
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut node)
            .await
            .expect("CLUSTER NODES");
        assert!(
            !nodes.contains(&format!("[{slot}-")),
            "slot {slot} left open on {port}: {nodes}"
        );
    }
    let after = scenario.created() + 300;
    until(
        Duration::from_secs(30),
        "300 more jobs after the move",
        created(after),
    )
    .await;
    load.drain(Duration::from_secs(60)).await;
    let ops = scenario.finish().await.expect("the history");
    // Every rule, the order rules included: a claim that met the slot
    // half moved (TRYAGAIN, ASK) names the shard as skipped, and the
    // claims beside it are not judged for order.
    assert_eq!(violations(&ops), Vec::<Violation>::new());
    assert_eq!(unfinished(&ops), Vec::<&str>::new(), "every job acked");
    // The owner, once every primary agrees on it.
    let owners = || async {
        let mut seen = Vec::new();
        for url in cluster.urls() {
            seen.push(primary_of_slot(&url).await[&slot]);
        }
        seen
    };
    until(
        Duration::from_secs(10),
        "the primaries agree on the owner",
        || async {
            let seen = owners().await;
            seen.iter().all(|port| *port == seen[0])
        },
    )
    .await;
    let owner = owners().await[0];
    (first, slot, before, owner)
}

/// The slot moves five keys at a time with a pause between: calls meet
/// TRYAGAIN and ASK for a while, nothing is lost, nothing handed out twice
/// while its lease holds, and the slot ends on the other primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shards_slot_moved_under_load_loses_nothing() {
    let how = Migration {
        keys: 5,
        pause: Duration::from_millis(20),
        timeout: Duration::from_secs(120),
    };
    let (moved, slot, before, after) = move_under_load("moving", how).await;
    assert_eq!(moved, Moved::There);
    assert_ne!(after, before, "slot {slot} on another primary");
}

/// A move given too little time to empty the source is left open until
/// producers meet it (calls of the shard meet TRYAGAIN and ASK: claims
/// skip it, its enqueues answer 503 with effect none), then goes on to
/// the end: nothing lost, nothing handed out twice. (The harness's first
/// slot move closed the slot with keys on the target: every job there
/// read back as lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_left_half_moved_loses_nothing_once_moved_on() {
    let how = Migration {
        keys: 2,
        pause: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
    };
    let (first, slot, before, after) = move_under_load("halfway", how).await;
    assert_eq!(first, Moved::Open);
    assert_ne!(after, before, "slot {slot} on another primary");
}
