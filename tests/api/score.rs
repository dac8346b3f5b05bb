//! The score's arrival tags at their limits: for jobs without a group, a
//! class's tags count its arrivals, one each.

use reqwest::StatusCode;
use serde_json::json;

use prioq::queue::store::keys::{Key, QueueKeys, tag_field};

use crate::support::{redis, redis_connection, spawn_app};

const SEQ_SPAN: u64 = 1 << 44;

#[tokio::test]
async fn fifo_stays_exact_at_the_top_of_the_counter() {
    let app = spawn_app().await;
    let mut conn = redis_connection(&app.config.redis_url).await;
    let keys = QueueKeys::new(&app.config.key_prefix, "edge");
    // The highest arrivals the score holds, in the least urgent class: the
    // finish tag of its jobs without a group.
    let _: () = redis::cmd("HSET")
        .arg(keys.key(Key::Meta))
        .arg(tag_field(255, ""))
        .arg(SEQ_SPAN - 3)
        .query_async(&mut conn)
        .await
        .expect("HSET");
    let first = app
        .enqueue("edge", json!({"task": "t", "priority": 255}))
        .await;
    let second = app
        .enqueue("edge", json!({"task": "t", "priority": 255}))
        .await;
    let claimed = app.claim("edge", json!({"max_jobs": 2})).await;
    assert_eq!(claimed[0]["id"], first["id"]);
    assert_eq!(claimed[1]["id"], second["id"]);
}

#[tokio::test]
async fn exhausted_counter_refuses_without_writing_and_restarts_once_drained() {
    let app = spawn_app().await;
    let waiting = app.enqueue("full", json!({"task": "t"})).await;
    let mut conn = redis_connection(&app.config.redis_url).await;
    let keys = QueueKeys::new(&app.config.key_prefix, "full");
    let _: () = redis::cmd("HSET")
        .arg(keys.key(Key::Meta))
        .arg(tag_field(1, ""))
        .arg(SEQ_SPAN - 1)
        .query_async(&mut conn)
        .await
        .expect("HSET");

    let before = app.snapshot().await;
    let refused = app
        .post(app.queue_url("full", "/jobs"), json!({"task": "t"}))
        .await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.problem_code(), "backend_unavailable");
    assert_eq!(app.snapshot().await, before, "nothing written");

    // Drained: the counter restarts and enqueues work again, in order.
    let job = app.claim_one("full").await.expect("the waiting job");
    assert_eq!(job["id"], waiting["id"]);
    let a = app.enqueue("full", json!({"task": "t"})).await;
    let b = app.enqueue("full", json!({"task": "t"})).await;
    let claimed = app.claim("full", json!({"max_jobs": 2})).await;
    assert_eq!((&claimed[0]["id"], &claimed[1]["id"]), (&a["id"], &b["id"]));
}
