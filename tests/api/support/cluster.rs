//! The local Redis Cluster (the testbed crate starts it, for the benches
//! too), the one most cluster tests share, prioq settings for it, and what
//! tests read of it: who serves a slot, the replicas.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys};
pub(crate) use prioq_testbed::RedisCluster;
use redis::cluster_async::ClusterConnection;
use serde_json::{Value, json};

use super::app::test_config;
use super::redis_server::redis_connection;

/// The cluster most cluster tests share, each under its own key prefix.
pub(crate) fn shared_cluster() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(RedisCluster::start)
}

/// prioq settings for a cluster.
pub(crate) trait ClusterConfig {
    /// The settings tests start from ([`test_config`]), seeded with two of
    /// the cluster's nodes.
    fn config(&self) -> Config;
}

impl ClusterConfig for RedisCluster {
    fn config(&self) -> Config {
        let mut config = test_config();
        config.redis_cluster = true;
        config.redis_url = self.urls()[..2].join(",");
        config
    }
}

pub(crate) async fn cluster_connection(urls: &[String]) -> ClusterConnection {
    redis::cluster::ClusterClient::new(urls.to_vec())
        .expect("cluster URLs")
        .get_async_connection()
        .await
        .expect("the cluster answers")
}

/// The port of the primary serving each slot, from `CLUSTER SLOTS`.
pub(crate) async fn primary_of_slot(url: &str) -> BTreeMap<u16, u16> {
    let mut conn = redis_connection(url).await;
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async::<redis::Value>(&mut conn)
        .await
        .map(|value| redis_json(&value))
        .expect("CLUSTER SLOTS")
        .as_array()
        .cloned()
        .expect("ranges");
    let mut owner = BTreeMap::new();
    for range in ranges {
        let (from, to) = (
            range[0].as_u64().expect("from"),
            range[1].as_u64().expect("to"),
        );
        let port = range[2][1].as_u64().expect("port") as u16;
        for slot in from..=to {
            owner.insert(slot as u16, port);
        }
    }
    owner
}

/// The slot of `key` (`CLUSTER KEYSLOT`).
pub(crate) async fn key_slot(conn: &mut ClusterConnection, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .expect("KEYSLOT")
}

/// The slot of shard `shard` of `queue` split over `shards`, under
/// `prefix`: every key of the shard is in it.
pub(crate) async fn shard_slot(
    conn: &mut ClusterConnection,
    prefix: &str,
    (queue, shard, shards): (&str, u32, u32),
) -> u16 {
    let keys = QueueKeys::shard(prefix, queue, shard, shards);
    key_slot(conn, keys.key(Key::Pending)).await
}

/// The port of a replica of the primary that serves `key`.
pub(crate) async fn replica_serving(cluster: &RedisCluster, key: &str) -> u16 {
    let mut conn = cluster_connection(&cluster.urls()).await;
    let slot = key_slot(&mut conn, key).await;
    let mut node = redis_connection(&cluster.urls()[0]).await;
    // Replicas show in `CLUSTER SLOTS` once the nodes have heard of them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ranges = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async::<redis::Value>(&mut node)
            .await
            .map(|value| redis_json(&value))
            .expect("CLUSTER SLOTS");
        let replica = ranges.as_array().expect("ranges").iter().find_map(|range| {
            let (from, to) = (range[0].as_u64()?, range[1].as_u64()?);
            (from..=to)
                .contains(&u64::from(slot))
                .then(|| range[3][1].as_u64())?
        });
        if let Some(port) = replica {
            return port as u16;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no replica serves slot {slot}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Redis reply as JSON, to pick through.
pub(crate) fn redis_json(value: &redis::Value) -> Value {
    match value {
        redis::Value::Array(items) => Value::Array(items.iter().map(redis_json).collect()),
        redis::Value::Int(n) => json!(n),
        redis::Value::BulkString(bytes) => json!(String::from_utf8_lossy(bytes)),
        redis::Value::SimpleString(text) => json!(text),
        _ => Value::Null,
    }
}
