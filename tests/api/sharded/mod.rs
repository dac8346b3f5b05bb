//! Sharded queues (the `shards` setting) on the local three-master Redis
//! Cluster, with 3 and 8 shards:
//!
//! - `spread`: jobs spread evenly over the shards, and over the primaries.
//! - `order`: priority order and FIFO across shards.
//! - `workers`: fifty workers on two instances; SIGKILLed workers' jobs
//!   taken back on every shard.
//! - `features`: the features of an unsharded queue (the checks the other
//!   modules run) on a sharded one.
//! - `reshard`: the number of shards changed only while the queue is empty.
//! - `failover`: a primary's failover under load.
//! - `slot_move`: a shard's slot moved to another primary under load, and
//!   one left half moved for a while.

mod failover;
mod features;
mod order;
mod reshard;
mod slot_move;
mod spread;
mod workers;

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys};
use serde_json::json;

use crate::support::app::configure;
use crate::support::cluster::{ClusterConfig, cluster_connection, shared_cluster};
use crate::support::{redis, spawn_app_with};

/// Splits `queues` over `shards` shards in the Redis of `config`, before a
/// check runs there.
async fn preshard(config: &Config, queues: &[&str], shards: u32) {
    let app = spawn_app_with(config.clone()).await;
    for queue in queues {
        let settings = configure(&app, queue, json!({"shards": shards})).await;
        assert_eq!(settings["shards"], json!(shards), "{settings}");
    }
    app.stop().await;
}

/// A fresh prefix on the shared cluster, with `queues` split over `shards`.
async fn sharded_cluster(queues: &[&str], shards: u32) -> Config {
    let config = shared_cluster().config();
    preshard(&config, queues, shards).await;
    config
}

/// How many jobs each shard's `key` holds.
async fn per_shard(config: &Config, queue: &str, shards: u32, key: Key) -> Vec<u64> {
    let urls: Vec<String> = config.redis_url.split(',').map(str::to_owned).collect();
    let mut conn = cluster_connection(&urls).await;
    let mut counts = Vec::new();
    for shard in 0..shards {
        let keys = QueueKeys::shard(&config.key_prefix, queue, shard, shards);
        let count: u64 = redis::cmd("ZCARD")
            .arg(keys.key(key))
            .query_async(&mut conn)
            .await
            .expect("ZCARD");
        counts.push(count);
    }
    counts
}

fn assert_even(counts: &[u64], total: u64, what: &str) {
    let share = total as f64 / counts.len() as f64;
    assert_eq!(counts.iter().sum::<u64>(), total, "{what}: {counts:?}");
    assert!(
        counts
            .iter()
            .all(|n| (*n as f64 - share).abs() <= share * 0.1),
        "{what}: each shard within ±10% of {share}: {counts:?}"
    );
}
