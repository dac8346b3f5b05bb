//! Jobs spread evenly over the shards, and the shards over the primaries.

use std::collections::BTreeMap;

use prioq::queue::store::keys::Key;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{assert_even, per_shard, sharded_cluster};
use crate::support::cluster::{cluster_connection, primary_of_slot, shard_slot, shared_cluster};
use crate::support::spawn_app_with;

async fn check_spread(shards: u32) {
    let config = sharded_cluster(&["made", "named"], shards).await;
    let app = spawn_app_with(config.clone()).await;
    for batch in 0..100 {
        let jobs: Vec<Value> = (0..100).map(|_| json!({"task": "t"})).collect();
        let made = app
            .post(app.queue_url("made", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(made.status, StatusCode::OK, "{made:?}");
        let jobs: Vec<Value> = (0..100)
            .map(|n| json!({"task": "t", "id": format!("order-{}", batch * 100 + n)}))
            .collect();
        let named = app
            .post(app.queue_url("named", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(named.status, StatusCode::OK, "{named:?}");
    }
    let made = per_shard(&config, "made", shards, Key::Pending).await;
    assert_even(&made, 10_000, "ids made by prioq");
    let named = per_shard(&config, "named", shards, Key::Pending).await;
    assert_even(&named, 10_000, "the client's ids");
    let stats = app.stats("made").await;
    assert_eq!(
        (stats["pending"].clone(), stats["shards"].clone()),
        (json!(10_000), json!(shards))
    );

    // The shards land on every primary, in as even a share as K allows.
    let owner = primary_of_slot(&shared_cluster().urls()[0]).await;
    let mut conn = cluster_connection(&shared_cluster().urls()).await;
    let mut on_primary: BTreeMap<u16, u32> = BTreeMap::new();
    for shard in 0..shards {
        let slot = shard_slot(&mut conn, &config.key_prefix, ("made", shard, shards)).await;
        *on_primary.entry(owner[&slot]).or_default() += 1;
    }
    let most = on_primary.values().max().copied().unwrap_or_default();
    let least = on_primary.values().min().copied().unwrap_or_default();
    assert_eq!(on_primary.len(), 3.min(shards as usize), "{on_primary:?}");
    assert!(
        most - least <= shards.div_ceil(3) - shards / 3,
        "{on_primary:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_spread_jobs_evenly_over_the_shards_and_the_primaries() {
    check_spread(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_shards_spread_jobs_evenly_over_the_shards_and_the_primaries() {
    check_spread(8).await;
}
