//! A primary's failover under load, on a cluster with a replica per
//! primary.

use std::sync::Arc;
use std::time::Duration;

use prioq::queue::store::keys::{Key, QueueKeys};
use serde_json::json;

use super::preshard;
use crate::support::cluster::{
    ClusterConfig, RedisCluster, cluster_connection, redis_json, replica_serving,
};
use crate::support::inventory::inventory_of_shards;
use crate::support::load::{Load, two_instances};
use crate::support::{redis, until};

/// 3 shards, on a cluster of three primaries with a replica each, every
/// node with AOF `appendfsync always`. A replica takes over from its
/// primary (`CLUSTER FAILOVER`, which waits for the replica to catch up)
/// mid-load; then the load goes on and the queue drains. Every job
/// acknowledged to a producer is processed; none is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_failover_under_load_loses_nothing_acknowledged() {
    let cluster = RedisCluster::start_with(1, "--appendonly yes --appendfsync always");
    let mut config = cluster.config();
    config.redis_timeout_ms = 1000;
    preshard(&config, &["failover"], 3).await;
    let (_a, _b, ledger, client) = two_instances(&config, "failover").await;
    let load = Load::start(&client, 2, 3, 2000);
    let created = |n: u64| {
        let ledger = Arc::clone(&ledger);
        move || {
            let done = ledger.created() >= n;
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
    let after = ledger.created() + 200;
    until(
        Duration::from_secs(20),
        "200 more jobs after the failover",
        created(after),
    )
    .await;
    load.drain(&client, Duration::from_secs(30)).await;
    let mut conn = cluster_connection(&cluster.urls()).await;
    let stored = inventory_of_shards(&mut conn, &config.key_prefix, "failover", 3).await;
    let report = ledger.audit(&stored);
    report.assert_clean("a primary failed over under load (appendfsync always)");
    assert_eq!(stored.jobs.len(), 0, "every job acked: {:?}", stored.jobs);
}
