//! Slow and idle connections are closed, connections are capped, long
//! polls are bounded per instance, and none of it cuts a long poll short.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::clock::within;
use crate::support::{TestApp, spawn_app_with, test_config};

async fn connect(app: &TestApp) -> TcpStream {
    let address = app.base.trim_start_matches("http://");
    TcpStream::connect(address).await.expect("connects")
}

/// Whether the server closes `stream` within `bound`, reading (and
/// dropping) whatever it sends meanwhile.
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> bool {
    let mut buffer = [0u8; 4096];
    let closed = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, closed).await.is_ok()
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_head_is_closed() {
    let mut config = test_config();
    config.header_timeout_ms = 300;
    let app = spawn_app_with(config).await;
    let mut half = connect(&app).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("writes");
    assert!(
        closed_within(&mut half, Duration::from_secs(5)).await,
        "a half head kept its connection"
    );
    // Sent a byte at a time, slower than the timeout all in all: closed too.
    let mut slow = connect(&app).await;
    let started = Instant::now();
    for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\n" {
        if slow.write_all(&[*byte]).await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        closed_within(&mut slow, Duration::from_secs(5)).await,
        "a trickled head kept its connection"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn an_idle_connection_is_closed_but_a_long_poll_is_not_cut() {
    let mut config = test_config();
    config.idle_timeout_ms = 300;
    let app = spawn_app_with(config).await;
    let mut idle = connect(&app).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("writes");
    let mut head = [0u8; 12];
    idle.read_exact(&mut head).await.expect("an answer");
    assert_eq!(&head, b"HTTP/1.1 200");
    assert!(
        closed_within(&mut idle, Duration::from_secs(5)).await,
        "an idle connection stayed open"
    );

    // A claim waiting longer than the idle timeout is answered in full.
    let started = Instant::now();
    let answer = app
        .post(app.queue_url("q", "/claim"), json!({"wait_ms": 1200}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["jobs"], json!([]));
    assert!(
        started.elapsed() >= Duration::from_millis(1100),
        "the wait was cut short"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let mut config = test_config();
    config.max_connections = 2;
    let app = spawn_app_with(config).await;
    let first = connect(&app).await;
    let _second = connect(&app).await;
    let client = reqwest::Client::new();
    let healthz = || {
        client
            .get(app.url("/healthz"))
            .timeout(Duration::from_millis(800))
            .send()
    };
    assert!(healthz().await.is_err(), "a third connection was served");
    drop(first);
    let served = within(Duration::from_secs(5), async {
        loop {
            if let Ok(answer) = healthz().await {
                return answer.status();
            }
        }
    })
    .await;
    assert_eq!(served, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_beyond_the_limit_answer_at_once() {
    let mut config = test_config();
    config.max_waiters = 2;
    let app = Arc::new(spawn_app_with(config).await);
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let app = Arc::clone(&app);
            tokio::spawn(async move { app.claim("q", json!({"wait_ms": 20_000})).await })
        })
        .collect();
    app.until_long_polls_wait(2).await;
    let started = Instant::now();
    let turned_away = within(
        Duration::from_secs(5),
        app.claim("q", json!({"wait_ms": 20_000})),
    )
    .await;
    assert!(turned_away.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the third long poll waited"
    );
    // The two that wait are real waits: jobs wake them.
    app.enqueue("q", json!({"task": "t"})).await;
    app.enqueue("q", json!({"task": "t"})).await;
    for claim in waiting {
        let jobs = within(Duration::from_secs(5), claim).await.expect("claim");
        assert_eq!(jobs.len(), 1);
    }
}
