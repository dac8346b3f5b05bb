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
    shard_slot,
};
use crate::support::recorded::two_instances_recorded;
use crate::support::redis_server::pause_clients;
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
    let mut conn = cluster_connection(&cluster.urls()).await;
    let slot = shard_slot(&mut conn, &config.key_prefix, ("reach", 1, SHARDS)).await;
    let port = primary_of_slot(&cluster.urls()[0]).await[&slot];
    let mut node = crate::support::redis_connection(&format!("redis://127.0.0.1:{port}")).await;
    pause_clients(&mut node, 3000, "ALL").await;

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

/// The primary of one shard answers line reads but refuses the claims'
/// parts (an ACL that lets only the `line` function run there), and
/// claims come together while its clients are paused, so they share a
/// read of its line once the pause ends: the first to pick takes the
/// shard's job, ranked first, and its part fails; each claim that picked
/// after it passed over that job, which still waits, so each that answers
/// a job must name the shard as skipped. (A claim beside one whose part
/// failed answered the other shard's jobs and named nothing: a slot-move
/// test's checker found it, the claim that failed having said nothing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_passing_over_a_failed_part_of_a_claim_sharing_its_read_names_the_shard() {
    const SHARDS: u32 = 2;
    const CLAIMS: usize = 40;
    let cluster = RedisCluster::start();
    let mut config = cluster.config();
    config.bulk_floor = 0.0;
    config.sweep_interval_ms = 3_600_000;
    // A queue whose two shards live on different primaries.
    let mut conn = cluster_connection(&cluster.urls()).await;
    let owners = primary_of_slot(&cluster.urls()[0]).await;
    let mut primary_of = async |queue: &str, shard: u32| {
        owners[&shard_slot(&mut conn, &config.key_prefix, (queue, shard, SHARDS)).await]
    };
    let mut queue = String::new();
    for n in 0.. {
        queue = format!("passed-{n}");
        if primary_of(&queue, 0).await != primary_of(&queue, 1).await {
            break;
        }
    }
    let refusing = primary_of(&queue, 0).await;
    preshard(&config, &[&queue], SHARDS).await;
    let app = spawn_app_with(config.clone()).await;
    let of = |shard: u32, count: usize| -> Vec<String> {
        (0..)
            .map(|n| format!("j{n}"))
            .filter(|id| shard_of(id, SHARDS) == shard)
            .take(count)
            .collect()
    };
    let urgent = of(0, 1).remove(0);
    app.enqueue(&queue, json!({"task": "t", "id": urgent, "priority": 0}))
        .await;
    for id in of(1, CLAIMS) {
        app.enqueue(&queue, json!({"task": "t", "id": id, "priority": 1}))
            .await;
    }
    // Shard 0's primary: the line function only.
    let mut node = crate::support::redis_connection(&format!("redis://127.0.0.1:{refusing}")).await;
    let functions: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut node)
        .await
        .expect("FUNCTION LIST");
    let listed = redis_json(&functions).to_string();
    let line = listed
        .split('"')
        .find(|word| word.starts_with("line_"))
        .expect("the line function")
        .to_owned();
    let acl = |rules: &[&str]| {
        let mut cmd = redis::cmd("ACL");
        cmd.arg("SETUSER").arg("default").arg(rules);
        cmd
    };
    let () = acl(&["-fcall", "-fcall_ro", &format!("+fcall|{line}")])
        .query_async(&mut node)
        .await
        .expect("ACL SETUSER");
    // Its clients paused a while, so that the claims sent meanwhile wait
    // together for the read of its line after the first, and share it
    // (paused, not refused: the reads answer once the pause ends, well
    // within the Redis timeout).
    pause_clients(&mut node, 300, "ALL").await;

    let claims = (0..CLAIMS).map(|_| {
        app.post(
            app.queue_url(&queue, "/claim"),
            json!({"max_jobs": 1, "lease_ms": 60_000}),
        )
    });
    let answers = futures_util::future::join_all(claims).await;
    let () = acl(&["+@all"])
        .query_async(&mut node)
        .await
        .expect("ACL SETUSER");
    let given: Vec<_> = answers
        .iter()
        .filter(|answer| {
            answer.body["jobs"]
                .as_array()
                .is_some_and(|jobs| !jobs.is_empty())
        })
        .collect();
    assert!(!given.is_empty(), "no claim was given a job: {answers:?}");
    for answer in &given {
        assert_ne!(answer.body["jobs"][0]["id"], json!(urgent), "{answer:?}");
        assert_eq!(answer.body["skipped_shards"], json!([0]), "{answer:?}");
    }
    let view = app.job(&queue, &urgent).await;
    assert_eq!(view.body["state"], "pending", "{view:?}");
}
