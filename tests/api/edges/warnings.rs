//! What prioq warns of at start: an open service on a non-loopback address,
//! and a Redis that evicts keys.

use std::time::Duration;

use crate::support::redis_server::shared_redis;
use crate::support::{RedisServer, Service, TempDir, unique_prefix, until};

const NO_TOKEN: &str = "no API token is set and the address is not a loopback one";
const EVICTS: &str = "maxmemory-policy allkeys-lru";

#[tokio::test]
async fn an_open_service_on_every_address_is_warned_of() {
    let open = Service::start_on("0.0.0.0", &shared_redis().url(), &unique_prefix(), &[]).await;
    until(Duration::from_secs(5), "the warning in the log", || async {
        open.log().contains(NO_TOKEN)
    })
    .await;

    let guarded = Service::start_on(
        "0.0.0.0",
        &shared_redis().url(),
        &unique_prefix(),
        &[("PRIOQ_API_TOKENS", "secret")],
    )
    .await;
    let local = Service::start_on("127.0.0.1", &shared_redis().url(), &unique_prefix(), &[]).await;
    for quiet in [&guarded, &local] {
        // The warning comes before the listener opens: both answer, so
        // they would have logged it.
        let ready = reqwest::get(quiet.url("/readyz")).await.expect("answers");
        assert!(ready.status().is_success());
        assert!(!quiet.log().contains(NO_TOKEN), "{}", quiet.log());
    }
}

#[tokio::test]
async fn a_redis_that_evicts_is_warned_of_at_start() {
    let data = TempDir::new("edges-evicts");
    let server = RedisServer::start_in(
        &data.path,
        "--appendonly no --maxmemory 64mb --maxmemory-policy allkeys-lru",
    );
    let service = Service::start_on("127.0.0.1", &server.url(), &unique_prefix(), &[]).await;
    until(Duration::from_secs(5), "the warning in the log", || async {
        service.log().contains(EVICTS)
    })
    .await;
}
