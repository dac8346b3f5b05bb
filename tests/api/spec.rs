//! The committed OpenAPI document is the one the service serves.

use serde_json::Value;

use crate::support::spawn_app;

#[tokio::test]
async fn served_openapi_matches_the_committed_file() {
    let app = spawn_app().await;
    let served = app.get(app.url("/openapi.json")).await;
    let committed: Value = serde_json::from_str(include_str!("../../openapi/openapi.json"))
        .expect("openapi/openapi.json is JSON");
    assert!(
        served.body == committed,
        "openapi/openapi.json is stale: regenerate it with `cargo run -- openapi > openapi/openapi.json`"
    );
}
