//! A primary's failover under load, on a cluster with a replica per
//! primary.

use std::sync::Arc;
use std::time::Duration;

use prioq::queue::store::keys::{Key, QueueKeys};
use prioq_chaos::checker::Violation;
use prioq_chaos::scenario::{Load, Shape, unfinished, violations};
use serde_json::json;

use super::preshard;
use crate::support::cluster::{ClusterConfig, RedisCluster, redis_json, replica_serving};
use crate::support::recorded::two_instances_recorded;
use crate::support::{redis, until};

/// 3 shards, on a cluster of three primaries with a replica each, every
/// node with AOF `appendfsync always`. A replica takes over from its
/// primary (`CLUSTER FAILOVER`, which waits for the replica to catch up)
/// mid-load; then the load goes on and the queue drains, every job is
/// read back, and the checker finds nothing but what sharding allows: no
/// job acknowledged to a producer lost, none delivered again after its
/// ack, no two leases at once, no stale ack accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_failover_under_load_loses_nothing_acknowledged() {
    let cluster = RedisCluster::start_with(1, "--appendonly yes --appendfsync always");
    let mut config = cluster.config();
    config.redis_timeout_ms = 1000;
    preshard(&config, &["failover"], 3).await;
    let recorded = two_instances_recorded(config.clone(), "sharded-failover-history").await;
    let scenario = Arc::clone(&recorded.scenario);
    let shape = Shape {
        producers: 2,
        consumers: 3,
        count: 5000,
        pace: Duration::from_millis(3),
        lease_ms: 2000,
    };
    let load = Load::start(&scenario, "failover", shape);
    let created = |n: u64| {
        let scenario = Arc::clone(&scenario);
        move || {
            let done = scenario.created() >= n;
            async move { done }
        }
    };
    until(
        Duration::from_secs(15),
        "200 jobs before the failover",
        created(200),
    )
    .await;

    // The replica of the primary that serves shard 1 takes over.
    let shard = QueueKeys::shard(&config.key_prefix, "failover", 1, 3);
    let replica = replica_serving(&cluster, shard.key(Key::Pending)).await;
    let mut conn = crate::support::redis_connection(&format!("redis://127.0.0.1:{replica}")).await;
    let () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query_async(&mut conn)
        .await
        .expect("CLUSTER FAILOVER");
    until(Duration::from_secs(20), "the replica is a primary", || {
        let mut conn = conn.clone();
        async move {
            let role: Vec<redis::Value> = redis::cmd("ROLE")
                .query_async(&mut conn)
                .await
                .expect("ROLE");
            redis_json(&role[0]) == json!("master")
        }
    })
    .await;
    let after = scenario.created() + 200;
    until(
        Duration::from_secs(20),
        "200 more jobs after the failover",
        created(after),
    )
    .await;
    load.drain(Duration::from_secs(30)).await;
    let ops = scenario.finish().await.expect("the history");
    // The order rules judge claims as one sorted set would answer them;
    // a queue split over shards answers from each shard's head as read
    // when the claim starts, and inside a priority up to the races of
    // claims in flight (docs/operations.md, "Sharded queues"). Every other rule holds.
    let found: Vec<Violation> = violations(&ops)
        .into_iter()
        .filter(|v| !matches!(v.rule, "priority_order" | "fifo_order"))
        .collect();
    assert_eq!(found, Vec::<Violation>::new());
    assert_eq!(unfinished(&ops), Vec::<&str>::new(), "every job acked");
}
