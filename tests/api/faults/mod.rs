//! Reliability under faults: Redis restarted under load, a replica
//! promoted, one of two instances killed behind nginx, storms of crashing
//! worker processes, Redis stalls, clients that hang up during a long poll,
//! a thousand long polls at once. Real processes on loopback, every loop
//! bounded.
//!
//! The load tests (`restart`, `instance_killed`, `crash_storm`, and the
//! soak and the sharded failover elsewhere) record every request in a
//! history through `prioq_chaos::scenario`, read every job back at the
//! end and hand the history to `prioq_chaos::checker`: no job enqueued ok
//! lost, none leased again after its ack, no two leases of a job valid at
//! once, no stale ack accepted, claims in order. Each also checks its own
//! fault's story (503s at once, exact attempts, the jobs a Redis without
//! persistence loses). The others (`failover`, `stall`, `hangup`, `crowd`)
//! tell a story of their own step by step.
//!
//! - `restart`: Redis killed under load and started again, with and
//!   without persistence.
//! - `failover`: a replica promoted after its primary died.
//! - `instance_killed`: one of two instances behind nginx killed mid-load;
//!   a retried enqueue whose first job was acked.
//! - `crash_storm`: worker processes killed holding their jobs.
//! - `stall`: Redis held with `CLIENT PAUSE` under requests in flight.
//! - `hangup`: clients that hang up during a long poll.
//! - `crowd`: a thousand long polls, and job waits, at once.

mod crash_storm;
mod crowd;
mod failover;
mod hangup;
mod instance_killed;
mod restart;
mod stall;

use reqwest::StatusCode;
use serde_json::json;

use crate::support::TestApp;

/// Runs every script the stall tests use once, on another queue, so that
/// Redis has them all cached as on any running service. (A script Redis
/// does not know yet answers NOSCRIPT once the pause is over, and the
/// service, which gave up on the request by then, does not send it again.)
async fn warm_up_scripts(app: &TestApp) {
    let job = app.enqueue("warm-up", json!({"task": "t"})).await;
    let id = job["id"].as_str().expect("id");
    let leased = app.claim_one("warm-up").await.expect("a job");
    let token = json!({"lease_token": leased["lease_token"]});
    let extend = app
        .post(
            app.queue_url("warm-up", &format!("/jobs/{id}/extend")),
            token.clone(),
        )
        .await;
    assert_eq!(extend.status, StatusCode::OK, "{extend:?}");
    let nack = app
        .post(app.queue_url("warm-up", &format!("/jobs/{id}/nack")), token)
        .await;
    assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    let leased = app.claim_one("warm-up").await.expect("a job");
    assert_eq!(
        app.ack("warm-up", &leased).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.job("warm-up", id).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(app.queue_url("warm-up", "")).await.status,
        StatusCode::OK
    );
}
