//! Changing the number of shards: refused while the queue holds a job,
//! and learnt by every instance at its next call.

use std::collections::BTreeMap;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::configure;
use crate::support::cluster::{ClusterConfig, shared_cluster};
use crate::support::{Answer, TestApp, spawn_app_with};

/// A job in any state holds the number of shards where it is; once the
/// queue is empty it changes, and every job then lands where the new
/// number says.
async fn check_reshard_refused_while_jobs_exist(config: Config) {
    let app = spawn_app_with(config).await;
    configure(&app, "q", json!({"shards": 3, "retain_ms": 60_000})).await;
    let states: [(&str, Value); 4] = [
        ("pending", json!({"task": "t", "id": "a"})),
        (
            "scheduled",
            json!({"task": "t", "id": "b", "delay_ms": 600_000}),
        ),
        ("processing", json!({"task": "t", "id": "c"})),
        ("completed", json!({"task": "t", "id": "d"})),
    ];
    for (state, body) in states {
        app.enqueue("q", body.clone()).await;
        let id = body["id"].as_str().expect("id");
        match state {
            "processing" => assert_eq!(app.claim("q", json!({})).await.len(), 1),
            "completed" => {
                let job = app.claim("q", json!({})).await.pop().expect("job");
                assert_eq!(app.ack("q", &job).await.status, StatusCode::NO_CONTENT);
            }
            _ => {}
        }
        assert_eq!(app.job("q", id).await.body["state"], json!(state));
        let before = snapshot(&app).await;
        let answer = reshard_and_pause(&app, 8).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{state}: {answer:?}");
        assert_eq!(answer.problem_code(), "conflict");
        assert_eq!(snapshot(&app).await, before, "{state}: nothing changed");
        let settings = app.get(app.queue_url("q", "/settings")).await.body;
        assert_eq!(
            (settings["shards"].clone(), settings["paused"].clone()),
            (json!(3), json!(false))
        );
        // The queue still takes jobs.
        let more = app.enqueue("q", json!({"task": "t"})).await;
        let more = more["id"].as_str().expect("id");
        let delete = app
            .send(
                app.http
                    .delete(app.queue_url("q", &format!("/jobs/{more}"))),
            )
            .await;
        assert_eq!(delete.status, StatusCode::NO_CONTENT);
        // Empty the queue for the next state.
        match state {
            "processing" | "completed" => {}
            _ => {
                let delete = app
                    .send(app.http.delete(app.queue_url("q", &format!("/jobs/{id}"))))
                    .await;
                assert_eq!(delete.status, StatusCode::NO_CONTENT);
            }
        }
    }
    // Still held: c (processing) and d (completed, kept 60 s).
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["processing"].clone(), stats["completed"].clone()),
        (json!(1), json!(1))
    );
    let answer = reshard_and_pause(&app, 1).await;
    assert_eq!(answer.status, StatusCode::CONFLICT);
    // An empty queue changes: its jobs land where the new number says.
    configure(&app, "r", json!({"shards": 8, "max_in_flight": 16})).await;
    for n in 0..40 {
        app.enqueue("r", json!({"task": "t", "id": format!("r-{n}")}))
            .await;
    }
    for n in 0..40 {
        let id = format!("r-{n}");
        assert_eq!(
            app.job("r", &id).await.body["state"],
            json!("pending"),
            "{id}"
        );
    }
    let stats = app.stats("r").await;
    assert_eq!(
        (stats["pending"].clone(), stats["shards"].clone()),
        (json!(40), json!(8))
    );
    let settings = app.get(app.queue_url("r", "/settings")).await.body;
    assert_eq!(
        (
            settings["max_in_flight"].clone(),
            settings["shards"].clone()
        ),
        (json!(16), json!(8))
    );
}

/// Asks queue `q` for `shards` shards and a pause, in one patch.
async fn reshard_and_pause(app: &TestApp, shards: u32) -> Answer {
    let request = app
        .http
        .patch(app.queue_url("q", "/settings"))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"shards": shards, "paused": true}).to_string());
    app.send(request).await
}

/// Every key of the app's prefix and its contents, on one Redis; nothing
/// on a cluster (whose nodes' keys a `KEYS` on one node cannot list).
async fn snapshot(app: &TestApp) -> BTreeMap<String, String> {
    if app.config.redis_cluster {
        return BTreeMap::new();
    }
    app.snapshot().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_shards_is_refused_while_jobs_exist() {
    check_reshard_refused_while_jobs_exist(crate::support::test_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_changing_the_shards_is_refused_while_jobs_exist() {
    check_reshard_refused_while_jobs_exist(shared_cluster().config()).await;
}

/// An instance that routed a queue for 1 shard learns of a change made
/// through another instance at its next call: the job it enqueues lands
/// where the new number says, and the other instance finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_routing_for_an_old_number_of_shards_routes_anew() {
    let config = shared_cluster().config();
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    let job = a.enqueue("q", json!({"task": "t", "id": "first"})).await;
    let claimed = a.claim("q", json!({})).await.pop().expect("job");
    assert_eq!(a.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    assert_eq!(job["id"], json!("first"));
    configure(&b, "q", json!({"shards": 8})).await;
    for n in 0..20 {
        a.enqueue("q", json!({"task": "t", "id": format!("later-{n}")}))
            .await;
    }
    for n in 0..20 {
        let found = b.job("q", &format!("later-{n}")).await;
        assert_eq!(found.status, StatusCode::OK, "{found:?}");
    }
    assert_eq!(b.stats("q").await["pending"], json!(20));
    assert_eq!(a.stats("q").await["shards"], json!(8));
}

/// The queue view of an instance that routed for the old number of shards
/// shows the number its settings show, and counts every shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_view_and_the_settings_of_another_instance_agree_on_the_shards() {
    let config = crate::support::test_config();
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    assert_eq!(a.stats("q").await["shards"], json!(1));
    configure(&b, "q", json!({"shards": 4})).await;
    for n in 0..40 {
        b.enqueue("q", json!({"task": "t", "id": format!("j-{n}")}))
            .await;
    }
    let settings = a.get(a.queue_url("q", "/settings")).await.body;
    let view = a.stats("q").await;
    assert_eq!(settings["shards"], json!(4));
    assert_eq!(view["shards"], settings["shards"], "{view}");
    assert_eq!(view["pending"], json!(40), "{view}");
}
