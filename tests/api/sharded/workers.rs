//! Fifty workers on two instances, and workers killed with SIGKILL, on
//! every shard.

use std::collections::BTreeSet;
use std::time::Duration;

use prioq::queue::store::keys::{Key, shard_of};
use serde_json::json;

use super::{per_shard, sharded_cluster};
use crate::guide::check_fifty_workers;
use crate::support::spawn_app_with;
use crate::support::worker::claim_in_process_and_kill_answer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_fifty_workers_on_two_instances_process_every_job_once() {
    check_fifty_workers(sharded_cluster(&["load"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_shards_fifty_workers_on_two_instances_process_every_job_once() {
    check_fifty_workers(sharded_cluster(&["load"], 8).await).await;
}

/// Two jobs in each shard, each claimed by a worker process killed with
/// SIGKILL: every one is back in pending, one attempt spent, after its
/// lease.
async fn check_sigkill_on_every_shard(shards: u32) {
    let config = sharded_cluster(&["crash"], shards).await;
    let app = spawn_app_with(config.clone()).await;
    let mut ids = Vec::new();
    for shard in 0..shards {
        let mut n = 0;
        while ids
            .iter()
            .filter(|id: &&String| shard_of(id, shards) == shard)
            .count()
            < 2
        {
            let id = format!("crash-{shard}-{n}");
            if shard_of(&id, shards) == shard {
                app.enqueue("crash", json!({"task": "t", "id": id})).await;
                ids.push(id);
            }
            n += 1;
        }
    }
    let url = app.queue_url("crash", "/claim");
    let mut held = BTreeSet::new();
    for id in &ids {
        // Long enough a lease for every worker to claim before the first
        // one's ends.
        let request_id = format!("doomed-{id}");
        let claimed = claim_in_process_and_kill_answer(&url, 4000, &request_id).await;
        let job = claimed.job.expect("a job for each doomed worker");
        held.insert(job["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(held, ids.iter().cloned().collect::<BTreeSet<_>>());
    for id in &ids {
        let back = app
            .wait_for_job("crash", id, Duration::from_secs(10), |j| {
                j["state"] == "pending"
            })
            .await;
        assert_eq!(back["attempts"], json!(1), "{back}");
        assert_eq!(back["last_error"], json!("lease expired"));
    }
    assert_eq!(
        per_shard(&config, "crash", shards, Key::Pending).await,
        vec![2; shards as usize]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_take_back_sigkilled_workers_jobs_on_every_shard() {
    check_sigkill_on_every_shard(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_shards_take_back_sigkilled_workers_jobs_on_every_shard() {
    check_sigkill_on_every_shard(8).await;
}
