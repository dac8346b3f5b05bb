//! What Redis holds of a queue, read straight from its keys through
//! prioq's own key layout and record format: each job's state, and
//! whatever is inconsistent between those keys (a transition applied in
//! part), which no answer over HTTP shows.

use std::collections::{BTreeMap, HashMap};

use prioq::queue::store::keys::{Key, MARK, QueueKeys};
use prioq::queue::store::record::Record;

use super::redis_server::redis_connection;

/// Every job of one queue, read straight from Redis, and whatever is
/// inconsistent between its keys (a transition applied in part).
#[derive(Debug, Default)]
pub(crate) struct Inventory {
    /// Each job's state, by id.
    pub(crate) jobs: BTreeMap<String, &'static str>,
    pub(crate) problems: Vec<String>,
}

/// Reads queue `queue` of prefix `prefix` from the Redis at `url`, through
/// prioq's own key layout and record format.
pub(crate) async fn inventory(url: &str, prefix: &str, queue: &str) -> Inventory {
    let mut conn = redis_connection(url).await;
    inventory_of_shards(&mut conn, prefix, queue, 1).await
}

/// Reads every shard of a queue split over `shards` through `conn` (a
/// cluster's, for a queue on a cluster), as [`inventory`] does.
pub(crate) async fn inventory_of_shards(
    conn: &mut impl redis::aio::ConnectionLike,
    prefix: &str,
    queue: &str,
    shards: u32,
) -> Inventory {
    let mut sets: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut records: HashMap<String, Vec<u8>> = HashMap::new();
    let mut leases: HashMap<String, String> = HashMap::new();
    for shard in 0..shards {
        let keys = QueueKeys::shard(prefix, queue, shard, shards);
        for (state, key) in [
            ("pending", Key::Pending),
            ("scheduled", Key::Scheduled),
            ("processing", Key::Processing),
            ("dead", Key::Dead),
        ] {
            let members: Vec<String> = redis::cmd("ZRANGE")
                .arg(keys.key(key))
                .arg(0)
                .arg(-1)
                .query_async(conn)
                .await
                .expect("ZRANGE");
            // `processing` also holds the mark that keeps it a skiplist.
            sets.push((state, members.into_iter().filter(|m| m != MARK).collect()));
        }
        let shard_records: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
            .arg(keys.key(Key::Jobs))
            .query_async(conn)
            .await
            .expect("HGETALL");
        records.extend(shard_records);
        let shard_leases: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(keys.key(Key::Leases))
            .query_async(conn)
            .await
            .expect("HGETALL");
        leases.extend(shard_leases.into_iter().filter(|(id, _)| id != MARK));
    }
    let mut inventory = Inventory::default();
    let mut state_of: HashMap<&str, &'static str> = HashMap::new();
    for (state, members) in &sets {
        for id in members {
            if let Some(other) = state_of.insert(id, state) {
                inventory
                    .problems
                    .push(format!("job {id} is both {other} and {state}"));
            }
        }
    }
    for (id, record) in &records {
        let Some(state) = state_of.get(id.as_str()).copied() else {
            inventory
                .problems
                .push(format!("job {id} has a record but no state: {record:?}"));
            continue;
        };
        if Record::decode(record).is_none() {
            inventory
                .problems
                .push(format!("job {id} has a malformed record: {record:?}"));
            continue;
        }
        let lease = leases.get(id);
        if (state == "processing") != lease.is_some() {
            inventory
                .problems
                .push(format!("job {id} is {state} with lease {lease:?}"));
        }
        inventory.jobs.insert(id.clone(), state);
    }
    for (id, state) in state_of {
        if !records.contains_key(id) {
            inventory
                .problems
                .push(format!("job {id} is {state} without a record"));
        }
    }
    for id in leases.keys() {
        if !records.contains_key(id) {
            inventory
                .problems
                .push(format!("job {id} left a lease behind without a record"));
        }
    }
    inventory
}
