//! The queue checks again, on a local three-master Redis Cluster: every
//! script lands on the shard owning its queue's slot, no CROSSSLOT error is
//! reachable, and wake-ups cross shards.

use std::collections::HashSet;

use prioq::queue::store::keys::{Key, QueueKeys};
use serde_json::json;

use crate::cancel::{check_cancel_processing, check_cancel_racing_ack};
use crate::completion::{check_retention, check_wait_woken_across_instances};
use crate::dedup::{check_dedup_racing_ack, check_drop_answers_the_holder, check_replace};
use crate::dependencies::{check_across_queues, check_chain, check_failures};
use crate::expiry::{check_claim_skips_expired_jobs, check_expiry_racing_claims};
use crate::fairness::{
    check_fair_share, check_group_cap, check_pause, check_rate_limit, check_weights,
};
use crate::group_rate::check_group_rate_fleet_wide;
use crate::guide::{check_fifty_workers, check_priority_order, check_sigkill_recovery};
use crate::history::check_life_in_history;
use crate::leases::{check_cross_instance_wake_up, check_fencing};
use crate::push::{check_concurrency_across_instances, check_sharded_push, check_signed_and_acked};
use crate::schedules::{
    check_deleted_schedule, check_fires_once_per_fire_time, check_paused_schedule,
};
use crate::search::check_filters;
use crate::support::cluster::{ClusterConfig, RedisCluster, shared_cluster};
use crate::support::{redis, spawn_app_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_jobs_are_found_by_every_filter() {
    check_filters(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_jobs_life_is_in_its_history() {
    check_life_in_history(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_pushed_job_is_signed_and_acked() {
    check_signed_and_acked(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_push_concurrency_holds_across_instances() {
    check_concurrency_across_instances(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_sharded_queue_pushes_from_every_shard() {
    check_sharded_push(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_claim_skips_expired_jobs_before_any_sweep() {
    check_claim_skips_expired_jobs(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_an_expiry_racing_claims_never_hands_out_an_expired_job() {
    check_expiry_racing_claims(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_chain_runs_in_order() {
    check_chain(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_failed_dependency_fails_its_dependant() {
    check_failures(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_dependency_in_another_slot_releases_its_dependant() {
    check_across_queues(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_processing_job_ends_cancelled_with_its_lease() {
    check_cancel_processing(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_cancel_racing_an_ack_has_one_outcome() {
    check_cancel_racing_ack(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_drop_answers_the_job_that_holds_the_key() {
    check_drop_answers_the_holder(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_replace_gives_a_waiting_job_the_new_fields() {
    check_replace(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_dedup_key_racing_its_jobs_ack_has_one_holder_at_most() {
    check_dedup_racing_ack(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_each_group_gets_at_most_its_rate_fleet_wide() {
    check_group_rate_fleet_wide(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_retention_keeps_completed_jobs_for_their_window() {
    check_retention(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_wait_on_one_instance_is_answered_when_another_acks() {
    check_wait_woken_across_instances(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_three_instances_fire_each_fire_time_exactly_once() {
    check_fires_once_per_fire_time(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_paused_schedule_fires_nothing_and_resumes_from_now() {
    check_paused_schedule(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_deleted_schedule_stops_firing() {
    check_deleted_schedule(shared_cluster().config()).await;
}

#[tokio::test]
async fn cluster_claims_most_urgent_first_and_fifo_within() {
    check_priority_order(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_fifty_workers_process_ten_thousand_jobs_exactly_once() {
    check_fifty_workers(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_worker_killed_with_sigkill_loses_nothing() {
    check_sigkill_recovery(shared_cluster().config()).await;
}

#[tokio::test]
async fn cluster_stale_lease_ack_is_rejected() {
    check_fencing(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_long_poll_wakes_for_a_job_enqueued_on_another_instance() {
    // Its own cluster, so script counts tell when the poll has looked.
    let cluster = RedisCluster::start();
    check_cross_instance_wake_up(cluster.config(), &cluster.urls()).await;
}

#[tokio::test]
async fn cluster_dead_letter_queue_lists_requeues_and_deletes() {
    let app = spawn_app_with(shared_cluster().config()).await;
    for n in 0..3 {
        app.enqueue("dlq", json!({"task": "t", "id": format!("d{n}")}))
            .await;
        let job = app.claim_one("dlq").await.expect("claimed");
        let nack = app
            .post(
                app.queue_url("dlq", &format!("/jobs/d{n}/nack")),
                json!({"lease_token": job["lease_token"], "dead": true, "error": "boom"}),
            )
            .await;
        assert_eq!(nack.body["state"], "dead");
    }
    let page = app.get(app.queue_url("dlq", "/dlq?limit=2")).await.body;
    assert_eq!(page["total"], 3);
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let rest = app
        .get(app.queue_url("dlq", &format!("/dlq?limit=2&cursor={cursor}")))
        .await
        .body;
    let ids: Vec<&str> = page["jobs"]
        .as_array()
        .into_iter()
        .chain(rest["jobs"].as_array())
        .flatten()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["d2", "d1", "d0"]);
    let requeued = app
        .post(app.queue_url("dlq", "/dlq/d1/requeue"), json!({}))
        .await;
    assert_eq!(requeued.body["state"], "pending");
    let deleted = app
        .send(app.http.delete(app.queue_url("dlq", "/dlq/d0")))
        .await;
    assert_eq!(deleted.status, reqwest::StatusCode::NO_CONTENT);
    assert_eq!(
        app.claim_one("dlq").await.expect("requeued job")["id"],
        "d1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_flooding_group_delays_another_by_about_one_job_each() {
    check_fair_share(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_weights_share_a_class_in_proportion() {
    check_weights(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_a_group_cap_holds_under_concurrent_claimers_on_two_instances() {
    check_group_cap(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_pause_on_one_instance_holds_claims_on_another() {
    check_pause(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_a_rate_limit_bounds_what_the_fleet_hands_out() {
    check_rate_limit(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queues_spread_over_every_shard() {
    let cluster = shared_cluster();
    let app = spawn_app_with(cluster.config()).await;
    let queues: Vec<String> = (0..24).map(|n| format!("spread-{n}")).collect();
    for queue in &queues {
        app.enqueue(queue, json!({"task": "t"})).await;
    }
    let pending_keys: HashSet<String> = queues
        .iter()
        .map(|queue| {
            QueueKeys::new(&app.config.key_prefix, queue)
                .key(Key::Pending)
                .to_owned()
        })
        .collect();
    let mut shards_used = HashSet::new();
    for url in cluster.urls() {
        let mut conn = redis::Client::open(url.clone())
            .expect("URL")
            .get_connection()
            .expect("node");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", app.config.key_prefix))
            .query(&mut conn)
            .expect("KEYS");
        if keys.iter().any(|key| pending_keys.contains(key)) {
            shards_used.insert(url);
        }
    }
    assert_eq!(
        shards_used.len(),
        3,
        "24 queues land on every one of 3 shards"
    );
    let listed = app.get(app.url("/v1/queues")).await.body;
    let names: HashSet<&str> = listed["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["queue"].as_str().expect("name"))
        .collect();
    assert!(queues.iter().all(|q| names.contains(q.as_str())));
    for queue in &queues {
        let job = app
            .claim_one(queue)
            .await
            .expect("each queue serves its job");
        assert_eq!(
            app.ack(queue, &job).await.status,
            reqwest::StatusCode::NO_CONTENT
        );
    }
}
