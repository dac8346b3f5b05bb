//! A job's backoff: after a failed attempt (a nack without `delay_ms`, a
//! lease that expired) the job waits its backoff, fixed or doubling with
//! each failure, before it is claimable again; a nack's own `delay_ms`
//! wins; a bad backoff is refused and enqueues nothing.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::configure;
use crate::support::clock::{ms_of, now_ms};
use crate::support::{TestApp, spawn_app};

/// Nacks `job` with `body` (its lease token added) and answers the job's
/// view, with this machine's clock (Redis's: it runs here) read just
/// before and just after.
async fn nack(app: &TestApp, queue: &str, job: &Value, mut body: Value) -> (i64, Value, i64) {
    body["lease_token"] = job["lease_token"].clone();
    let id = job["id"].as_str().expect("id");
    let before = now_ms();
    let answer = app
        .post(app.queue_url(queue, &format!("/jobs/{id}/nack")), body)
        .await;
    let after = now_ms();
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    (before, answer.body, after)
}

/// The job's `run_at` is its failure's time plus `wait_ms`: between the
/// clock read before the nack and after it.
fn assert_waits(view: &Value, (before, after): (i64, i64), wait_ms: i64) {
    assert_eq!(view["state"], "scheduled", "{view}");
    let run_at = ms_of(&view["run_at"]);
    assert!(
        (before + wait_ms..=after + wait_ms).contains(&run_at),
        "run_at {run_at} not within [{}, {}]: {view}",
        before + wait_ms,
        after + wait_ms
    );
}

/// Claims the job once it is due, waiting up to 5 s for it (a claim
/// that finds it not due yet waits).
async fn claim_when_due(app: &TestApp, queue: &str, id: &str) -> Value {
    let jobs = app.claim(queue, json!({"wait_ms": 5000})).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["id"], id);
    jobs[0].clone()
}

async fn check_exponential_backoff(app: &TestApp, queue: &str) {
    let job = app
        .enqueue(
            queue,
            json!({"task": "t", "id": "flaky", "max_attempts": 10,
                   "backoff": {"type": "exponential", "delay_ms": 150}}),
        )
        .await;
    assert_eq!(
        job["backoff"],
        json!({"type": "exponential", "delay_ms": 150})
    );
    let mut leased = app.claim_one(queue).await.expect("claimable at once");
    for (failure, wait_ms) in [(1, 150), (2, 300), (3, 600)] {
        let (before, view, after) = nack(app, queue, &leased, json!({"error": "boom"})).await;
        assert_eq!(view["attempts"], failure, "{view}");
        assert_waits(&view, (before, after), wait_ms);
        leased = claim_when_due(app, queue, "flaky").await;
        let run_at = ms_of(&view["run_at"]);
        assert!(now_ms() >= run_at, "handed out before {run_at}: {leased}");
    }
    // A nack's own delay wins, 0 too.
    let (_, view, _) = nack(app, queue, &leased, json!({"delay_ms": 0})).await;
    assert_eq!(view["state"], "pending", "{view}");
    assert_eq!(view["backoff"]["delay_ms"], 150, "kept through its life");
}

#[tokio::test]
async fn a_nack_without_a_delay_waits_the_jobs_backoff_doubling_with_each_failure() {
    let app = spawn_app().await;
    check_exponential_backoff(&app, "q").await;
}

#[tokio::test]
async fn a_sharded_queues_jobs_back_off_alike() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"shards": 3})).await;
    check_exponential_backoff(&app, "q").await;
}

#[tokio::test]
async fn a_lease_that_expired_waits_the_fixed_backoff_and_a_job_without_one_does_not() {
    let app = spawn_app().await;
    app.enqueue(
        "q",
        json!({"task": "t", "id": "fixed", "backoff": {"type": "fixed", "delay_ms": 400}}),
    )
    .await;
    app.enqueue("q", json!({"task": "t", "id": "plain"})).await;
    let jobs = app
        .claim("q", json!({"lease_ms": 100, "max_jobs": 2}))
        .await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let deadline = ms_of(&jobs[0]["lease_expires_at"]);
    let fixed = app
        .wait_for_job("q", "fixed", Duration::from_secs(5), |job| {
            job["attempts"] == 1
        })
        .await;
    let taken_back = now_ms();
    assert_eq!(fixed["last_error"], "lease expired", "{fixed}");
    assert_waits(&fixed, (deadline, taken_back), 400);
    let plain = app
        .wait_for_job("q", "plain", Duration::from_secs(5), |job| {
            job["attempts"] == 1
        })
        .await;
    assert_eq!(plain["state"], "pending", "{plain}");
    assert!(plain.get("backoff").is_none(), "{plain}");
}

#[tokio::test]
async fn a_bad_backoff_is_refused_and_enqueues_nothing() {
    let app = spawn_app().await;
    for (backoff, field) in [
        (json!({"type": "fixed", "delay_ms": 0}), "backoff.delay_ms"),
        (
            json!({"type": "exponential", "delay_ms": 2_592_000_001_u64}),
            "backoff.delay_ms",
        ),
        (json!({"type": "linear", "delay_ms": 10}), "type"),
        (json!({"type": "fixed"}), "delay_ms"),
        (
            json!({"type": "fixed", "delay_ms": 10, "jitter": 1}),
            "jitter",
        ),
    ] {
        let answer = app
            .post(
                app.queue_url("q", "/jobs"),
                json!({"task": "t", "backoff": backoff}),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
        assert_eq!(answer.problem_code(), "validation_failed", "{answer:?}");
        let named = answer.body.to_string();
        assert!(named.contains(field), "{field} not named: {answer:?}");
        // In a batch, too: the whole batch is refused.
        let answer = app
            .post(
                app.queue_url("q", "/jobs/batch"),
                json!({"jobs": [{"task": "ok"}, {"task": "t", "backoff": backoff}]}),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
    }
    assert!(app.claim_one("q").await.is_none(), "nothing was enqueued");
}
