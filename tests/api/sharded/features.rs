//! The features of an unsharded queue on a sharded one: the checks the
//! other modules run, schedules' owed fires, every endpoint that names one
//! job.

use std::time::Duration;

use prioq::queue::store::keys::{Key, QueueKeys};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{preshard, sharded_cluster};
use crate::cancel::{check_cancel_processing, check_cancel_racing_ack, check_cancel_waiting};
use crate::completion::{check_retention, check_wait_woken_across_instances};
use crate::dedup::{
    check_dedup_racing_ack, check_drop_answers_the_holder, check_removed_jobs_let_go,
    check_replace, check_ttl_after_the_end,
};
use crate::dependencies::{
    check_across_queues, check_batch_across_shards, check_chain, check_failures, check_refs,
};
use crate::expiry::{
    check_claim_skips_expired_jobs, check_expiry_racing_claims, check_sweeper_ends_expired_jobs,
};
use crate::fairness::{check_group_cap, check_pause, check_rate_limit};
use crate::leases::{check_cross_instance_wake_up, check_fencing};
use crate::schedules::{check_deleted_schedule, check_fires_once_per_fire_time};
use crate::support::app::{configure, enqueue_many};
use crate::support::cluster::{ClusterConfig, RedisCluster, cluster_connection, shared_cluster};
use crate::support::{redis, spawn_app, spawn_app_with, until};

#[tokio::test]
async fn sharded_stale_lease_ack_is_rejected() {
    check_fencing(sharded_cluster(&["fence"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_long_poll_wakes_for_a_job_enqueued_on_another_instance() {
    let cluster = RedisCluster::start();
    let config = cluster.config();
    preshard(&config, &["wake"], 3).await;
    check_cross_instance_wake_up(config, &cluster.urls()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_retention_keeps_completed_jobs_for_their_window() {
    check_retention(sharded_cluster(&["kept"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_wait_on_one_instance_is_answered_when_another_acks() {
    check_wait_woken_across_instances(sharded_cluster(&["waited"], 8).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_three_instances_fire_each_fire_time_exactly_once() {
    check_fires_once_per_fire_time(sharded_cluster(&["ticks"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_deleted_schedule_stops_firing() {
    check_deleted_schedule(sharded_cluster(&["ticks"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_pause_on_one_instance_holds_claims_on_another() {
    check_pause(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_group_cap_holds_fleet_wide_when_it_divides_evenly() {
    // A cap of 3 over 3 shards: 1 in each, 3 fleet-wide, as unsharded.
    check_group_cap(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_claim_skips_expired_jobs_before_any_sweep() {
    check_claim_skips_expired_jobs(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_the_sweeper_ends_expired_waiting_jobs() {
    check_sweeper_ends_expired_jobs(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_an_expiry_racing_claims_never_hands_out_an_expired_job() {
    check_expiry_racing_claims(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_rate_limit_bounds_what_the_fleet_hands_out() {
    // A burst of 10 over 2 shards: 5 in each, the bound as unsharded.
    check_rate_limit(sharded_cluster(&["q"], 2).await).await;
}

/// A fire recorded as owed whose job was never made (its instance died
/// between the two calls) is paid by a sweeper, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_left_owed_is_paid_by_a_sweeper_once() {
    let config = sharded_cluster(&["owed"], 3).await;
    let mut conn = cluster_connection(&shared_cluster().urls()).await;
    let home = QueueKeys::new(&config.key_prefix, "owed");
    let spec = json!({"cron": "0 0 1 1 *", "timezone": "UTC", "task": "report",
                      "args": {"n": 1}, "priority": 3, "max_attempts": 2, "group": null,
                      "retain_ms": 0, "paused": false});
    let owed = home.key(Key::ScheduleOwed);
    owe(&mut conn, owed, &spec).await;
    let app = spawn_app_with(config.clone()).await;
    let job = app
        .wait_for_job("owed", "nightly:1000", Duration::from_secs(5), |j| {
            j["state"] == "pending"
        })
        .await;
    assert_eq!(
        (
            job["task"].clone(),
            job["args"].clone(),
            job["priority"].clone(),
            job["schedule"].clone()
        ),
        (json!("report"), json!({"n": 1}), json!(3), json!("nightly"))
    );
    until_paid(&conn, owed, "the debt is cleared").await;
    // Paid again (a second sweeper saw the debt too): nothing new.
    let claimed = app.claim("owed", json!({})).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        app.ack("owed", &claimed[0]).await.status,
        StatusCode::NO_CONTENT
    );
    owe(&mut conn, owed, &spec).await;
    until_paid(&conn, owed, "the repeated debt is cleared").await;
    assert_eq!(
        app.job("owed", "nightly:1000").await.status,
        StatusCode::NOT_FOUND
    );
}

/// Records the fire `nightly:1000` of a schedule of definition `spec` as
/// owed in hash `owed`, since long ago.
async fn owe(conn: &mut redis::cluster_async::ClusterConnection, owed: &str, spec: &Value) {
    redis::cmd("HSET")
        .arg(owed)
        .arg("nightly:1000")
        .arg(format!("1000:{spec}"))
        .query_async::<()>(conn)
        .await
        .expect("HSET");
}

/// Waits until no fire is owed in hash `owed`.
async fn until_paid(conn: &redis::cluster_async::ClusterConnection, owed: &str, what: &str) {
    until(Duration::from_secs(5), what, || {
        let mut conn = conn.clone();
        let owed = owed.to_owned();
        async move {
            let left: u64 = redis::cmd("HLEN")
                .arg(owed)
                .query_async(&mut conn)
                .await
                .expect("HLEN");
            left == 0
        }
    })
    .await;
}

/// Every endpoint that names one job, the DLQ's pages, the groups' page
/// and the stats, on a queue of 3 shards in one Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_in_one_redis_answers_as_one_queue() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"shards": 3})).await;
    enqueue_many(&app, "q", Some("g"), 4, "j-", 30).await;
    let stats = app.stats("q").await;
    assert_eq!(
        (
            stats["pending"].clone(),
            stats["groups"].clone(),
            stats["shards"].clone()
        ),
        (json!(30), json!(1), json!(3))
    );
    // Thirty jobs bury themselves (max_attempts 1).
    for _ in 0..30 {
        let job = app.claim("q", json!({})).await.pop().expect("a job");
        let nack = app
            .post(
                app.queue_url(
                    "q",
                    &format!("/jobs/{}/nack", job["id"].as_str().expect("id")),
                ),
                json!({"lease_token": job["lease_token"], "dead": true}),
            )
            .await;
        assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .get(app.queue_url("q", &format!("/dlq?limit=7{cursor}")))
            .await;
        assert_eq!(page.body["total"], json!(30));
        let jobs = page.body["jobs"].as_array().expect("jobs").clone();
        seen.extend(jobs.iter().map(|job| {
            (
                job["dead_at"].as_str().expect("dead_at").to_owned(),
                job["id"].as_str().expect("id").to_owned(),
            )
        }));
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    let mut newest_first = seen.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen.len(), 30);
    assert_eq!(seen, newest_first, "one order across shards, no repeats");
    let requeued = app
        .post(app.queue_url("q", "/dlq/j-7/requeue"), json!({}))
        .await;
    assert_eq!(requeued.status, StatusCode::OK, "{requeued:?}");
    let deleted = app
        .send(app.http.delete(app.queue_url("q", "/dlq/j-8")))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    assert_eq!(app.job("q", "j-8").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.job("q", "j-7").await.body["state"], json!("pending"));
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["dead"].clone()),
        (json!(1), json!(28))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_drop_answers_the_job_that_holds_the_key() {
    check_drop_answers_the_holder(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_key_is_held_for_its_ttl_then_let_go() {
    check_ttl_after_the_end(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replace_gives_a_waiting_job_the_new_fields() {
    check_replace(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_deleted_dropped_or_purged_job_never_blocks_its_key() {
    check_removed_jobs_let_go(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_dedup_key_racing_its_jobs_ack_has_one_holder_at_most() {
    check_dedup_racing_ack(sharded_cluster(&["q"], 3).await).await;
}

/// Jobs with client ids live in their ids' shards, each of which keeps
/// its own entry of a key: at most one holder per shard (docs/operations.md's
/// bound); without ids, one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_key_has_at_most_one_holder_per_shard() {
    let app = spawn_app_with(sharded_cluster(&["q"], 3).await).await;
    let jobs: Vec<Value> = (0..30)
        .map(|n| json!({"task": "t", "id": format!("job-{n}"), "dedup": {"key": "k"}}))
        .chain((0..30).map(|_| json!({"task": "t", "dedup": {"key": "generated"}})))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({ "jobs": jobs }))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let made = |key: &str| {
        answer.body["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter(|job| job["created"] == json!(true) && job["dedup_key"] == json!(key))
            .count()
    };
    assert!((1..=3).contains(&made("k")), "{answer:?}");
    assert_eq!(made("generated"), 1, "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_waiting_job_is_cancelled_at_once() {
    check_cancel_waiting(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_processing_job_ends_cancelled_with_its_lease() {
    check_cancel_processing(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_cancel_racing_an_ack_has_one_outcome() {
    check_cancel_racing_ack(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_chain_runs_in_order_across_shards() {
    check_chain(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_failed_dependency_fails_its_dependant() {
    check_failures(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_refs_and_earlier_batch_entries_in_other_shards() {
    check_refs(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_dependencies_across_sharded_queues() {
    check_across_queues(sharded_cluster(&["images", "reports"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_a_batch_names_earlier_entries_across_shards_and_in_its_own() {
    check_batch_across_shards(sharded_cluster(&["q"], 3).await, 3).await;
}
