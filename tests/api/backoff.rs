//! A job's backoff: after a failed attempt (a nack without `delay_ms`, a
//! lease that expired) the job waits its backoff, fixed or doubling with
//! each failure, before it is claimable again; a nack's own `delay_ms`
//! wins; a bad backoff is refused and enqueues nothing.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use prioq::queue::store::record::Record;

use crate::support::app::configure;
use crate::support::clock::{ms_of, now_ms};
use crate::support::{TestApp, redis_connection, spawn_app};

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

/// A batch takes each entry's backoff as single enqueues would, on a
/// queue split over shards too (the batch split by shard on the way).
#[tokio::test]
async fn a_batch_gives_each_job_its_own_backoff() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"shards": 3})).await;
    let jobs: Vec<Value> = (0..6)
        .map(|i| {
            let mut job = json!({"task": "t", "id": format!("b{i}")});
            if i % 2 == 0 {
                job["backoff"] = json!({"type": "fixed", "delay_ms": 100 + i});
            }
            job
        })
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    for (i, sent) in jobs.iter().enumerate() {
        let id = format!("b{i}");
        let answered = &answer.body["jobs"][i];
        let read = app.job("q", &id).await.body;
        assert_eq!(answered["id"], id.as_str());
        assert_eq!(answered.get("backoff"), sent.get("backoff"), "{answered}");
        assert_eq!(read.get("backoff"), sent.get("backoff"), "{read}");
    }
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

/// The raw record of job `id` of `queue`, from Redis.
async fn record(app: &TestApp, queue: &str, id: &str) -> Vec<u8> {
    let jobs = app
        .snapshot()
        .await
        .into_keys()
        .find(|key| key.contains(&format!("{{{queue}}}")) && key.ends_with(":jobs"))
        .expect("the jobs hash");
    let mut conn = redis_connection(&app.config.redis_url).await;
    redis::cmd("HGET")
        .arg(jobs)
        .arg(id)
        .query_async(&mut conn)
        .await
        .expect("a record")
}

/// A backoff lives beside the record, not in it: an older version of
/// prioq running beside this one during a rolling upgrade reads and
/// rewrites the record of a job with one as of any other. And it goes
/// with its job.
#[tokio::test]
async fn a_backoff_is_kept_out_of_the_record_and_goes_with_its_job() {
    let app = spawn_app().await;
    let job = json!({"task": "t", "id": "j", "args": {"n": 1}});
    let mut backing_off = job.clone();
    backing_off["backoff"] = json!({"type": "fixed", "delay_ms": 1});
    let queues = [("plain", job), ("backs-off", backing_off)];
    for (queue, job) in &queues {
        app.enqueue(queue, job.clone()).await;
        for _ in 0..2 {
            let leased = claim_when_due(&app, queue, "j").await;
            nack(&app, queue, &leased, json!({"error": "boom"})).await;
        }
    }
    let (plain, backs_off) = (
        record(&app, "plain", "j").await,
        record(&app, "backs-off", "j").await,
    );
    let (plain, backs_off) = (
        Record::decode(&plain).expect("a record"),
        Record::decode(&backs_off).expect("a record"),
    );
    assert_eq!(
        (backs_off.attempts, backs_off.last_error, backs_off.args),
        (plain.attempts, plain.last_error, plain.args)
    );
    assert_eq!(plain.encode().len(), backs_off.encode().len());
    let view = app.job("backs-off", "j").await.body;
    assert_eq!(view["backoff"], json!({"type": "fixed", "delay_ms": 1}));

    // Acked, neither leaves anything of a backoff behind.
    for (queue, _) in &queues {
        let leased = claim_when_due(&app, queue, "j").await;
        assert_eq!(app.ack(queue, &leased).await.status, StatusCode::NO_CONTENT);
    }
    let snapshot = app.snapshot().await;
    assert!(
        !snapshot.keys().any(|key| key.ends_with(":backoff")),
        "{snapshot:?}"
    );
    assert!(
        snapshot
            .iter()
            .all(|(key, value)| !key.ends_with(":meta") || !value.contains("backing_off")),
        "{snapshot:?}"
    );
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
