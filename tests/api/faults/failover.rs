//! A replica promoted after its primary died: what it lacks.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{
    RedisServer, TempDir, redis, redis_connection, spawn_app_with, test_config, until,
};

/// A field of `INFO replication` of the Redis at `url`, 0 when absent.
async fn replication_offset(url: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut redis_connection(url).await)
        .await
        .expect("INFO replication");
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|offset| offset.trim().parse().ok())
        .unwrap_or(0)
}

/// A replica promoted after its primary died has only what it had
/// received. Here the replica stops receiving (it is pointed at a master
/// that does not exist) before the primary answers an enqueue, an ack and
/// a claim; then the primary is killed and the replica promoted, and an
/// instance on it finds: the enqueue answered 201 gone, the acked job back
/// in pending (it will run again), the claimed job pending and unleased;
/// what was replicated before is intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replica_promoted_after_the_primary_died_lacks_the_writes_it_had_not_received() {
    let (primary_dir, replica_dir) = (TempDir::new("primary"), TempDir::new("replica"));
    // The replica syncs at once (not after the default 5 s delay).
    let primary = RedisServer::start_in(
        &primary_dir.path,
        "--appendonly no --repl-diskless-sync-delay 0",
    );
    let primary_port = primary.port;
    let replica = RedisServer::start_in(
        &replica_dir.path,
        &format!("--appendonly no --replicaof 127.0.0.1 {primary_port}"),
    );
    let mut config = test_config();
    config.redis_url = primary.url();
    let app = spawn_app_with(config.clone()).await;
    for n in 0..3 {
        app.enqueue("failover", json!({"task": "t", "id": format!("job-{n}")}))
            .await;
    }
    let first = app.claim_one("failover").await.expect("job-0");
    assert_eq!(
        app.ack("failover", &first).await.status,
        StatusCode::NO_CONTENT
    );
    // All of that reached the replica: its offset caught up with the
    // primary's. (WAIT on a fresh connection would not tell: it counts the
    // replicas that have that connection's writes, and it made none.)
    let primary_url = primary.url();
    until(Duration::from_secs(10), "the replica is online", || async {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut redis_connection(&primary_url).await)
            .await
            .expect("INFO replication");
        info.contains("state=online")
    })
    .await;
    let written = replication_offset(&primary_url, "master_repl_offset").await;
    let replica_url = replica.url();
    until(
        Duration::from_secs(10),
        "the replica has every write so far",
        || async { replication_offset(&replica_url, "slave_repl_offset").await >= written },
    )
    .await;

    // The replica falls behind: what the primary answers now never reaches it.
    let mut replica_conn = redis_connection(&replica.url()).await;
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        // Port 1: nothing listens there. (A free port could meanwhile be
        // taken by another test's Redis, which the replica would copy.)
        .arg(1)
        .query_async::<()>(&mut replica_conn)
        .await
        .expect("REPLICAOF");
    app.enqueue("failover", json!({"task": "t", "id": "job-3"}))
        .await;
    let second = app.claim_one("failover").await.expect("job-1");
    assert_eq!(second["id"], "job-1");
    assert_eq!(
        app.ack("failover", &second).await.status,
        StatusCode::NO_CONTENT
    );
    let third = app.claim_one("failover").await.expect("job-2");
    assert_eq!(third["id"], "job-2");

    // The primary dies; the replica is promoted; the service moves to it.
    drop(app);
    drop(primary);
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async::<()>(&mut replica_conn)
        .await
        .expect("REPLICAOF NO ONE");
    config.redis_url = replica.url();
    let promoted = spawn_app_with(config).await;
    let state = async |id: &str| {
        let answer = promoted.job("failover", id).await;
        match answer.status {
            StatusCode::OK => (
                answer.body["state"].as_str().unwrap_or_default().to_owned(),
                answer.body["attempts"].as_u64(),
            ),
            status => (status.to_string(), None),
        }
    };
    let lost_ack = state("job-1").await;
    let lost_claim = state("job-2").await;
    let lost_enqueue = state("job-3").await;
    let kept_ack = state("job-0").await;
    assert_eq!(
        kept_ack.0, "404 Not Found",
        "acked before the replica fell behind"
    );
    assert_eq!(
        lost_enqueue.0, "404 Not Found",
        "an enqueue answered 201 is gone"
    );
    assert_eq!(
        lost_ack,
        ("pending".to_owned(), Some(0)),
        "an acked job is back"
    );
    assert_eq!(
        lost_claim,
        ("pending".to_owned(), Some(0)),
        "a lease is gone"
    );
    let again = promoted.claim("failover", json!({"max_jobs": 10})).await;
    let ids: Vec<&str> = again.iter().filter_map(|j| j["id"].as_str()).collect();
    assert_eq!(ids, ["job-1", "job-2"]);
}
