//! A primary's failover under load, on a cluster with a replica per
//! primary.

use std::sync::Arc;
use std::time::Duration;

use prioq::queue::store::keys::{Key, QueueKeys};
use prioq_chaos::checker::Violation;
use prioq_chaos::scenario::{Load, Shape, unfinished, violations};
use serde_json::json;

use prioq::queue::store::keys::shard_of;

use super::preshard;
use crate::support::cluster::{
    ClusterConfig, RedisCluster, cluster_connection, primary_of_slot, redis_json, replica_serving,
};
use crate::support::recorded::two_instances_recorded;
use crate::support::{redis, spawn_app_with, until};

/// 3 shards, on a cluster of three primaries with a replica each, every
/// node with AOF `appendfsync always`. A replica takes over from its
/// primary (`CLUSTER FAILOVER`, which waits for the replica to catch up)
/// mid-load; then the load goes on and the queue drains, every job is
/// read back, and the checker finds nothing: no job acknowledged to a
/// producer lost, none delivered again after its ack, no two leases at
/// once, no stale ack accepted, no job passed over in order but by a
/// claim beside one that said it skipped the shard.
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
    // Every rule, the order rules included: a claim that could not reach
    // the shard failing over says so, and the claims beside it are not
    // judged for order (docs/operations.md, "Sharded queues").
    assert_eq!(violations(&ops), Vec::<Violation>::new());
    assert_eq!(unfinished(&ops), Vec::<&str>::new(), "every job acked");
}

/// A shard whose primary does not answer (its clients paused): a claim
/// goes on with the other shards' jobs and names the shard in
/// `skipped_shards`, and the instance's counter counts it; once the
/// primary answers again, the shard's jobs come out and no shard is
/// skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_names_the_shard_it_could_not_reach() {
    const SHARDS: u32 = 3;
    let cluster = RedisCluster::start();
    let mut config = cluster.config();
    config.redis_timeout_ms = 500;
    config.bulk_floor = 0.0;
    preshard(&config, &["reach"], SHARDS).await;
    let app = spawn_app_with(config.clone()).await;
    // Two jobs in each shard.
    let mut in_shard: Vec<Vec<String>> = vec![Vec::new(); SHARDS as usize];
    for n in 0.. {
        let id = format!("j{n}");
        let shard = shard_of(&id, SHARDS) as usize;
        if in_shard[shard].len() < 2 {
            app.enqueue("reach", json!({"task": "t", "id": id})).await;
            in_shard[shard].push(id);
        }
        if in_shard.iter().all(|ids| ids.len() == 2) {
            break;
        }
    }
    let key = QueueKeys::shard(&config.key_prefix, "reach", 1, SHARDS)
        .key(Key::Pending)
        .to_owned();
    let mut conn = cluster_connection(&cluster.urls()).await;
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("KEYSLOT");
    let port = primary_of_slot(&cluster.urls()[0]).await[&slot];
    let mut node = crate::support::redis_connection(&format!("redis://127.0.0.1:{port}")).await;
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(3000)
        .arg("ALL")
        .query_async(&mut node)
        .await
        .expect("CLIENT PAUSE");

    let answer = app
        .post(app.queue_url("reach", "/claim"), json!({"max_jobs": 6}))
        .await;
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{answer:?}");
    let mut got: Vec<String> = answer.body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["id"].as_str().expect("id").to_owned())
        .collect();
    got.sort();
    let mut reachable: Vec<String> = [&in_shard[0], &in_shard[2]]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    reachable.sort();
    assert_eq!(got, reachable, "{answer:?}");
    assert_eq!(answer.body["skipped_shards"], json!([1]), "{answer:?}");

    // Answering again, the shard gives its jobs, and nothing is skipped.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let last = loop {
        let answer = app
            .post(app.queue_url("reach", "/claim"), json!({"max_jobs": 6}))
            .await;
        let jobs = answer.body["jobs"].as_array().map_or(0, Vec::len);
        if answer.status == reqwest::StatusCode::OK && jobs > 0 {
            break answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the paused shard's jobs never came: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut got: Vec<String> = last.body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["id"].as_str().expect("id").to_owned())
        .collect();
    got.sort();
    assert_eq!(got, in_shard[1], "{last:?}");
    assert_eq!(last.body.get("skipped_shards"), None, "{last:?}");
    // Counted (the scrape shows a queue once every shard answers its
    // stats again).
    let skipped = app
        .metric(r#"prioq_claim_shards_skipped_total{queue="reach"}"#)
        .await;
    assert!(skipped >= 1.0, "the counter: {skipped}");
}
