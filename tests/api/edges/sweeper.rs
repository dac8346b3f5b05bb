//! A queue whose sweep fails does not stop the sweep of the others.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{redis_connection, spawn_app, until};

#[tokio::test]
async fn a_failing_queue_is_skipped_and_the_next_queues_leases_still_end() {
    let app = spawn_app().await;
    // Listed first (the sweeper goes by name), and broken: its processing
    // set is a string, so every sweep of it fails with WRONGTYPE.
    app.enqueue("a-broken", json!({"task": "t"})).await;
    let mut redis = redis_connection(&app.config.redis_url).await;
    let processing = format!("{}:{{a-broken}}:processing", app.config.key_prefix);
    let _: () = redis::cmd("SET")
        .arg(&processing)
        .arg("not a sorted set")
        .query_async(&mut redis)
        .await
        .expect("SET");

    app.enqueue("b-good", json!({"task": "t", "id": "j"})).await;
    let leased = app
        .claim("b-good", json!({"lease_ms": 200}))
        .await
        .pop()
        .expect("the job");
    until(
        Duration::from_secs(5),
        "the lease of b-good taken back",
        || async {
            let stats = app.stats("b-good").await;
            stats["pending"] == 1 && stats["processing"] == 0
        },
    )
    .await;
    assert_eq!(
        app.ack("b-good", &leased).await.status,
        StatusCode::CONFLICT
    );
    let again = app.claim_one("b-good").await.expect("the job again");
    assert_eq!(again["attempts"], 1, "{again}");
}
