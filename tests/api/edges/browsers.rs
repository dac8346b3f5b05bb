//! Browsers from other sites: cross-site writes refused (403
//! `forbidden_origin`), form and text bodies refused (415), both with no
//! effect; services and the service's own origin unaffected.

use reqwest::StatusCode;
use serde_json::json;

use super::assert_problem;
use crate::support::{TestApp, spawn_app_with, test_config};

async fn paused(app: &TestApp) -> bool {
    let settings = app.get(app.queue_url("q", "/settings")).await;
    settings.body["paused"].as_bool().expect("paused")
}

#[tokio::test]
async fn cross_site_writes_are_refused_and_change_nothing() {
    let mut config = test_config();
    config.allowed_origins = vec!["https://ops.example".to_owned()];
    let app = spawn_app_with(config).await;
    app.enqueue("q", json!({"task": "t"})).await;
    let before = app.snapshot().await;
    let pause = || app.http.post(app.queue_url("q", "/pause"));

    for (header, value) in [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
        ("origin", "https://evil.example"),
        ("origin", "null"),
    ] {
        let refused = app.send(pause().header(header, value)).await;
        assert_problem(&refused, StatusCode::FORBIDDEN, "forbidden_origin", None);
    }
    let delete = app
        .send(
            app.http
                .delete(app.queue_url("q", "?purge=true"))
                .header("origin", "https://evil.example"),
        )
        .await;
    assert_problem(&delete, StatusCode::FORBIDDEN, "forbidden_origin", None);
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused request changed Redis"
    );
    assert!(!paused(&app).await);

    // Reads from anywhere, and writes from the service's own origin, a
    // listed one, the same origin by fetch metadata, or no browser at all.
    let read = app
        .send(
            app.http
                .get(app.queue_url("q", ""))
                .header("sec-fetch-site", "cross-site"),
        )
        .await;
    assert_eq!(read.status, StatusCode::OK, "{read:?}");
    for (header, value) in [
        ("origin", app.base.clone()),
        ("origin", "https://ops.example".to_owned()),
        ("sec-fetch-site", "same-origin".to_owned()),
        ("sec-fetch-site", "none".to_owned()),
    ] {
        let taken = app.send(pause().header(header, value.as_str())).await;
        assert_eq!(taken.status, StatusCode::OK, "{header}: {value}: {taken:?}");
    }
    assert!(paused(&app).await);
}

#[tokio::test]
async fn form_and_text_bodies_are_refused_with_or_without_a_body() {
    let app = spawn_app_with(test_config()).await;
    crate::support::app::configure(&app, "q", json!({"paused": true})).await;
    let before = app.snapshot().await;
    for content_type in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/plain",
        "text/plain; charset=utf-8",
    ] {
        for body in ["a=b", ""] {
            let refused = app
                .send(
                    app.http
                        .post(app.queue_url("q", "/resume"))
                        .header("content-type", content_type)
                        .body(body),
                )
                .await;
            assert_problem(
                &refused,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                None,
            );
        }
        let enqueue = app
            .send(
                app.http
                    .post(app.queue_url("q", "/jobs"))
                    .header("content-type", content_type)
                    .body(r#"{"task": "t"}"#),
            )
            .await;
        assert_problem(
            &enqueue,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            None,
        );
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused request changed Redis"
    );
    // A bodyless POST with no content type, as curl sends it, is served.
    let resumed = app.send(app.http.post(app.queue_url("q", "/resume"))).await;
    assert_eq!(resumed.status, StatusCode::OK, "{resumed:?}");
    assert_eq!(resumed.body["paused"], false);
}
