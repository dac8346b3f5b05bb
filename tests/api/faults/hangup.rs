//! Clients that hang up during a long poll.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::redis_server::{Paused, blocked_clients};
use crate::support::{
    RedisServer, Service, redis_connection, script_calls, spawn_app_with, test_config,
    unique_prefix, until, until_script_calls_exceed,
};

/// Sends a long poll on a raw connection, without reading the answer.
async fn raw_claim(port: u16, body: &Value) -> TcpStream {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connects");
    let request = format!(
        "POST /v1/queues/hangup/claim HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    stream
}

/// Whether process `pid` holds the socket of the loopback TCP connection
/// between its port `server_port` and the client port `client_port`
/// (found in /proc/net/tcp by ports, then among the process's
/// descriptors by inode).
fn holds_connection(pid: u32, server_port: u16, client_port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port_of = |address: &str| {
        address
            .rsplit_once(':')
            .and_then(|(_, port)| u16::from_str_radix(port, 16).ok())
    };
    let inode = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ours =
            port_of(fields.get(1)?)? == server_port && port_of(fields.get(2)?)? == client_port;
        ours.then(|| fields.get(9).map(|inode| (*inode).to_owned()))?
    });
    let Some(inode) = inode.filter(|inode| inode != "0") else {
        return false;
    };
    let socket = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(Result::ok).any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == socket.as_str())
            })
        })
        .unwrap_or(false)
}

/// Waits until process `pid` no longer holds the connection from client
/// port `client_port` to its port `server_port`: it closed it.
async fn until_connection_closed(pid: u32, server_port: u16, client_port: u16) {
    until(
        Duration::from_secs(2),
        "the service closes the connection",
        || {
            let held = holds_connection(pid, server_port, client_port);
            async move { !held }
        },
    )
    .await;
}

/// A client hangs up while its long poll waits: the service closes the
/// connection and drops the waiting claim at once, so the job enqueued
/// next is not leased to the vanished client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_hanging_up_during_a_long_poll_claims_nothing() {
    let server = RedisServer::start();
    let service = Service::start_with(&server.url(), &unique_prefix(), &[]).await;
    let mut conn = redis_connection(&server.url()).await;

    let calls = script_calls(&mut conn).await;
    let poll = raw_claim(
        service.port,
        &json!({"worker": "gone", "wait_ms": 15_000, "lease_ms": 500}),
    )
    .await;
    let client_port = poll.local_addr().expect("local address").port();
    until_script_calls_exceed(&mut conn, calls).await;
    assert!(
        holds_connection(service.pid(), service.port, client_port),
        "the waiting poll holds its connection"
    );
    let hung_up = Instant::now();
    drop(poll);
    until_connection_closed(service.pid(), service.port, client_port).await;
    eprintln!("hang-up noticed within {:?}", hung_up.elapsed());

    let http = reqwest::Client::new();
    let enqueued = http
        .post(service.url("/v1/queues/hangup/jobs"))
        .json(&json!({"task": "t", "id": "after-hangup"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(enqueued.status(), StatusCode::CREATED);
    let claimed: Value = http
        .post(service.url("/v1/queues/hangup/claim"))
        .json(&json!({"worker": "present"}))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    let job = &claimed["jobs"][0];
    assert_eq!(job["id"], "after-hangup", "{claimed}");
    assert_eq!(
        job["attempts"], 0,
        "never leased to the vanished client: {job}"
    );
}

/// A client hangs up after its claim reached Redis and before the answer
/// came back (Redis is paused for writes meanwhile): the claim runs once
/// Redis resumes, the job is leased to nobody, and it comes back after its
/// lease with attempts + 1 and last_error "lease expired".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_hanging_up_after_its_claim_ran_gets_the_job_back_after_the_lease() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    // No sweep during the test, so the only script Redis holds back is
    // the claim's; a second instance sweeps afterwards.
    let service = Service::start_with(
        &server.url(),
        &prefix,
        &[("PRIOQ_SWEEP_INTERVAL_MS", "600000")],
    )
    .await;
    let http = reqwest::Client::new();
    let enqueued = http
        .post(service.url("/v1/queues/hangup/jobs"))
        .json(&json!({"task": "t", "id": "held"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(enqueued.status(), StatusCode::CREATED);
    // The claim script is in Redis's script cache, as on any running
    // service: the EVALSHA held back by the pause is the claim itself.
    // (Were it not, Redis would answer NOSCRIPT once resumed, and the
    // service, which has dropped the request by then, would not send it
    // again: no claim at all.)
    let warm = http
        .post(service.url("/v1/queues/warm-up/claim"))
        .send()
        .await
        .expect("answered");
    assert_eq!(warm.status(), StatusCode::OK);

    let paused = Paused::start(&server, "WRITE", 30_000);
    let poll = raw_claim(
        service.port,
        &json!({"worker": "gone", "wait_ms": 15_000, "lease_ms": 500}),
    )
    .await;
    until(
        Duration::from_secs(5),
        "the claim waits in Redis",
        || async { blocked_clients(&server.url()).await == 1 },
    )
    .await;
    let client_port = poll.local_addr().expect("local address").port();
    drop(poll);
    until_connection_closed(service.pid(), service.port, client_port).await;
    paused.end().await;

    let held = reqwest::Client::new()
        .get(service.url("/v1/queues/hangup/jobs/held"))
        .send()
        .await
        .expect("answered")
        .json::<Value>()
        .await
        .expect("JSON");
    assert_eq!(
        (held["state"].as_str(), held["worker"].as_str()),
        (Some("processing"), Some("gone")),
        "{held}"
    );
    let mut config = test_config();
    config.redis_url = server.url();
    config.key_prefix = prefix;
    let sweeper = spawn_app_with(config).await;
    let back = sweeper
        .wait_for_job("hangup", "held", Duration::from_secs(5), |j| {
            j["state"] == "pending"
        })
        .await;
    assert_eq!(
        (back["attempts"].as_u64(), back["last_error"].as_str()),
        (Some(1), Some("lease expired")),
        "{back}"
    );
}
