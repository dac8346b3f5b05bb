//! Deduplication by key (`dedup {key, ttl_ms, mode}`): an enqueue whose
//! key is held is answered with the job that holds it (`drop`), or gives
//! that job, while it waits, its task, args, priority and delay
//! (`replace`); a key is held while its job lives and until `ttl_ms` after
//! its enqueue, and let go at once when its job is deleted or dropped.

use std::time::Duration;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::clock::{ms_of, now_ms};
use crate::support::{Answer, TestApp, spawn_app_with, test_config, until};

/// Posts one job; answers the whole answer.
async fn post_job(app: &TestApp, queue: &str, job: Value) -> Answer {
    app.post(app.queue_url(queue, "/jobs"), job).await
}

/// Posts one job that its key turns away: answers the job it was
/// answered with.
async fn turned_away(app: &TestApp, queue: &str, job: Value) -> Value {
    let answer = post_job(app, queue, job).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["created"], json!(false), "{answer:?}");
    answer.body
}

/// Waits until an enqueue with `job`'s key makes a job (the key was let
/// go); answers it.
async fn made_once_let_go(app: &TestApp, queue: &str, job: Value) -> Value {
    let made = std::sync::Mutex::new(None);
    until(Duration::from_secs(10), "the key is let go", || async {
        let answer = post_job(app, queue, job.clone()).await;
        let done = answer.status == StatusCode::CREATED;
        if done {
            *made.lock().expect("lock") = Some(answer.body);
        }
        done
    })
    .await;
    made.into_inner().expect("lock").expect("made")
}

/// `drop`: while the job that holds the key waits or runs, enqueues with
/// the key are answered with it; once it is acked (ttl 0) the next one
/// makes a job. Also in one batch: the first entry takes the key.
pub(crate) async fn check_drop_answers_the_holder(config: Config) {
    let app = spawn_app_with(config).await;
    let first = app
        .enqueue(
            "q",
            json!({"task": "t", "args": {"n": 1}, "dedup": {"key": "k"}}),
        )
        .await;
    assert_eq!(first["dedup_key"], json!("k"), "{first}");
    let again = turned_away(
        &app,
        "q",
        json!({"task": "other", "args": {"n": 2}, "priority": 0, "dedup": {"key": "k"}}),
    )
    .await;
    assert_eq!(again["id"], first["id"], "{again}");
    assert_eq!(again["args"], json!({"n": 1}), "nothing changed: {again}");
    assert_eq!(again["priority"], json!(1), "{again}");
    assert!(again.get("replaced").is_none(), "{again}");

    let claimed = app.claim_one("q").await.expect("the job");
    assert_eq!(claimed["id"], first["id"]);
    let running = turned_away(&app, "q", json!({"task": "t", "dedup": {"key": "k"}})).await;
    assert_eq!(running["id"], first["id"]);
    assert_eq!(running["state"], json!("processing"), "{running}");
    assert!(app.claim_one("q").await.is_none(), "one job only");

    assert_eq!(app.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    let next = app
        .enqueue("q", json!({"task": "t", "dedup": {"key": "k"}}))
        .await;
    assert_ne!(next["id"], first["id"], "{next}");

    let batch = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "t", "dedup": {"key": "b"}},
                {"task": "t", "dedup": {"key": "b"}},
                {"task": "t", "dedup": {"key": "k"}},
            ]}),
        )
        .await;
    assert_eq!(batch.status, StatusCode::OK, "{batch:?}");
    let jobs = &batch.body["jobs"];
    assert_eq!(jobs[0]["created"], json!(true), "{batch:?}");
    assert_eq!(jobs[1]["created"], json!(false), "{batch:?}");
    assert_eq!(jobs[1]["id"], jobs[0]["id"], "{batch:?}");
    assert_eq!(jobs[2]["created"], json!(false), "{batch:?}");
    assert_eq!(jobs[2]["id"], next["id"], "{batch:?}");
    assert_eq!(app.stats("q").await["pending"], json!(2));
}

#[tokio::test]
async fn drop_answers_the_job_that_holds_the_key_while_it_lives() {
    check_drop_answers_the_holder(test_config()).await;
}

/// A key with a ttl outlives its job's ack: the acked job is kept,
/// completed with its result, and answered until the ttl has passed since
/// its enqueue; then the sweeper lets the key go, and the job with it.
pub(crate) async fn check_ttl_after_the_end(config: Config) {
    let app = spawn_app_with(config).await;
    let job = json!({"task": "t", "dedup": {"key": "k", "ttl_ms": 1500}});
    let first = app.enqueue("q", job.clone()).await;
    let claimed = app.claim_one("q").await.expect("the job");
    let acked = app
        .post(
            app.queue_url(
                "q",
                &format!("/jobs/{}/ack", first["id"].as_str().expect("id")),
            ),
            json!({"lease_token": claimed["lease_token"], "result": {"sent": true}}),
        )
        .await;
    assert_eq!(acked.status, StatusCode::NO_CONTENT, "{acked:?}");
    let kept = turned_away(&app, "q", job.clone()).await;
    assert_eq!(kept["id"], first["id"], "{kept}");
    assert_eq!(kept["state"], json!("completed"), "{kept}");
    assert_eq!(kept["result"], json!({"sent": true}), "{kept}");

    let next = made_once_let_go(&app, "q", job).await;
    let held_until = ms_of(&first["enqueued_at"]) + 1500;
    assert!(
        ms_of(&next["enqueued_at"]) >= held_until,
        "let go before its ttl: {first} then {next}"
    );
    // Kept no longer than its key: the sweeper deletes it about then.
    let id = first["id"].as_str().expect("id");
    until(Duration::from_secs(5), "the acked job is gone", || async {
        app.job("q", id).await.status == StatusCode::NOT_FOUND
    })
    .await;
}

#[tokio::test]
async fn a_key_is_held_for_its_ttl_after_its_job_is_acked_then_let_go() {
    check_ttl_after_the_end(test_config()).await;
}

/// `replace`: a waiting holder takes the new task, args and priority, its
/// delay starts again; once it runs the next enqueue makes a job, and the
/// running job's ack does not let the newer job's key go.
pub(crate) async fn check_replace(config: Config) {
    let app = spawn_app_with(config).await;
    let replace = |task: &str, n: u32, priority: u8, delay_ms: u64| {
        json!({"task": task, "args": {"n": n}, "priority": priority, "delay_ms": delay_ms,
               "dedup": {"key": "r", "mode": "replace"}})
    };
    let first = app.enqueue("q", replace("a", 1, 5, 60_000)).await;
    assert_eq!(first["state"], json!("scheduled"));
    let later = turned_away(&app, "q", replace("a", 2, 5, 60_000)).await;
    assert_eq!(later["replaced"], json!(true), "{later}");
    assert_eq!(later["id"], first["id"]);
    assert!(
        ms_of(&later["run_at"]) > ms_of(&first["run_at"]),
        "the delay starts again: {first} then {later}"
    );
    let now = turned_away(&app, "q", replace("b", 3, 0, 0)).await;
    assert_eq!(now["replaced"], json!(true), "{now}");
    assert_eq!(now["id"], first["id"]);
    assert_eq!(now["state"], json!("pending"), "{now}");
    assert_eq!(now["task"], json!("b"));
    assert_eq!(now["args"], json!({"n": 3}));
    assert_eq!(now["priority"], json!(0));

    let claimed = app.claim_one("q").await.expect("the job");
    assert_eq!(claimed["id"], first["id"]);
    assert_eq!(claimed["task"], json!("b"));
    assert_eq!(claimed["args"], json!({"n": 3}));
    let second = app.enqueue("q", replace("c", 4, 1, 0)).await;
    assert_ne!(
        second["id"], first["id"],
        "one more run after the running one"
    );

    assert_eq!(app.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    let held = turned_away(&app, "q", json!({"task": "t", "dedup": {"key": "r"}})).await;
    assert_eq!(
        held["id"], second["id"],
        "the newer job keeps its key: {held}"
    );
    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["id"], second["id"]);
}

#[tokio::test]
async fn replace_gives_a_waiting_job_the_new_fields_and_one_more_run_after_a_running_one() {
    check_replace(test_config()).await;
}

/// A job deleted, dropped on expiry, or deleted from the DLQ lets its key
/// go at once, whatever its ttl.
pub(crate) async fn check_removed_jobs_let_go(config: Config) {
    let app = spawn_app_with(config).await;
    let keyed = |key: &str| json!({"task": "t", "dedup": {"key": key, "ttl_ms": 600_000}});

    let deleted = app.enqueue("q", keyed("deleted")).await;
    let id = deleted["id"].as_str().expect("id");
    let answer = app
        .send(app.http.delete(app.queue_url("q", &format!("/jobs/{id}"))))
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    app.enqueue("q", keyed("deleted")).await;

    let mut dropped = keyed("dropped");
    dropped["expires_in_ms"] = json!(50);
    dropped["on_expiry"] = json!("drop");
    dropped["priority"] = json!(0);
    let expiring = app.enqueue("q", dropped).await;
    let deadline = ms_of(&expiring["expires_at"]);
    until(Duration::from_secs(5), "the deadline passes", || async {
        now_ms() > deadline
    })
    .await;
    made_once_let_go(&app, "q", keyed("dropped")).await;

    let mut dies = keyed("dead");
    dies["max_attempts"] = json!(1);
    dies["priority"] = json!(0);
    app.enqueue("q", dies).await;
    let claimed = app
        .claim("q", json!({"max_jobs": 1}))
        .await
        .pop()
        .expect("a job");
    let id = claimed["id"].as_str().expect("id");
    let nacked = app
        .post(
            app.queue_url("q", &format!("/jobs/{id}/nack")),
            json!({"lease_token": claimed["lease_token"], "error": "boom"}),
        )
        .await;
    assert_eq!(nacked.body["state"], json!("dead"), "{nacked:?}");
    let held = turned_away(&app, "q", keyed("dead")).await;
    assert_eq!(
        held["id"],
        json!(id),
        "a dead job holds its key for its ttl"
    );
    let answer = app
        .send(app.http.delete(app.queue_url("q", &format!("/dlq/{id}"))))
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    app.enqueue("q", keyed("dead")).await;
}

#[tokio::test]
async fn a_deleted_dropped_or_purged_job_never_blocks_its_key() {
    check_removed_jobs_let_go(test_config()).await;
}

/// Enqueues with a key racing the ack of the job that holds it (ttl 0):
/// each is answered with the live holder or makes the next one, never
/// both; at most one job holds the key at once, and once all are acked
/// nothing of the key is left.
pub(crate) async fn check_dedup_racing_ack(config: Config) {
    let app = spawn_app_with(config).await;
    let job = json!({"task": "t", "dedup": {"key": "race"}});
    app.enqueue("q", job.clone()).await;
    for round in 0..60 {
        let holder = app.claim_one("q").await.expect("the holder");
        let (acked, enqueued) =
            tokio::join!(app.ack("q", &holder), post_job(&app, "q", job.clone()));
        assert_eq!(
            acked.status,
            StatusCode::NO_CONTENT,
            "round {round}: {acked:?}"
        );
        match enqueued.status {
            // Before the ack: answered with the holder, which then ended.
            StatusCode::OK => {
                assert_eq!(
                    enqueued.body["id"], holder["id"],
                    "round {round}: {enqueued:?}"
                );
                app.enqueue("q", job.clone()).await;
            }
            // After: the next holder.
            StatusCode::CREATED => assert_ne!(enqueued.body["id"], holder["id"]),
            _ => panic!("round {round}: {enqueued:?}"),
        }
        let waiting = app.stats("q").await;
        assert_eq!(
            waiting["pending"],
            json!(1),
            "round {round}: one holder, {waiting}"
        );
        assert_eq!(waiting["processing"], json!(0), "round {round}: {waiting}");
    }
    let last = app.claim_one("q").await.expect("the last holder");
    assert_eq!(app.ack("q", &last).await.status, StatusCode::NO_CONTENT);
    app.enqueue("q", job).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedup_key_racing_its_jobs_ack_has_one_holder_at_most() {
    check_dedup_racing_ack(test_config()).await;
    // And nothing of a key outlives its job: after the last ack only
    // the live holder's entries remain.
    let app = spawn_app_with(test_config()).await;
    let job = app
        .enqueue(
            "q",
            json!({"task": "t", "dedup": {"key": "k", "ttl_ms": 200}}),
        )
        .await;
    let claimed = app.claim_one("q").await.expect("the job");
    assert_eq!(claimed["id"], job["id"]);
    assert_eq!(app.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    until(
        Duration::from_secs(10),
        "the key and its job are gone",
        || async {
            let snapshot = app.snapshot().await;
            !snapshot
                .keys()
                .any(|key| key.contains(":dedup") || key.ends_with(":jobs"))
                && snapshot
                    .iter()
                    .all(|(key, value)| !key.ends_with(":meta") || !value.contains("keyed"))
        },
    )
    .await;
}

#[tokio::test]
async fn a_dedup_request_out_of_its_bounds_is_refused_and_adds_nothing() {
    let app = spawn_app_with(test_config()).await;
    let cases = [
        (json!({"key": "no spaces"}), "dedup.key"),
        (json!({"key": ""}), "dedup.key"),
        (
            json!({"key": "k", "ttl_ms": 2_592_000_001_u64}),
            "dedup.ttl_ms",
        ),
        (json!({"key": "k", "mode": "merge"}), "mode"),
        (json!({"key": "k", "extra": 1}), "extra"),
        (json!({"ttl_ms": 5}), "key"),
    ];
    for (dedup, field) in cases {
        let answer = post_job(&app, "q", json!({"task": "t", "dedup": dedup})).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{dedup}: {answer:?}"
        );
        assert_eq!(answer.problem_code(), "validation_failed", "{answer:?}");
        assert!(
            answer.body.to_string().contains(field),
            "{dedup}: names {field}: {answer:?}"
        );
    }
    let batch = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [{"task": "t"}, {"task": "t", "dedup": {"key": "bad key"}}]}),
        )
        .await;
    assert_eq!(batch.status, StatusCode::UNPROCESSABLE_ENTITY, "{batch:?}");
    assert!(
        batch.body.to_string().contains("jobs[1].dedup.key"),
        "{batch:?}"
    );
    assert!(app.claim_one("q").await.is_none(), "nothing was added");
}

/// A replaced job of a group, its group's head, goes behind the group's
/// jobs enqueued before the replace, as a job enqueued then would, and the
/// group's next job becomes its head.
#[tokio::test]
async fn a_replaced_group_head_goes_behind_its_group() {
    let app = spawn_app_with(test_config()).await;
    let keyed = |n: u32| {
        json!({"task": "t", "args": {"n": n}, "group": "g",
               "dedup": {"key": "r", "mode": "replace"}})
    };
    let head = app.enqueue("q", keyed(1)).await;
    let behind = app
        .enqueue("q", json!({"task": "t", "id": "behind", "group": "g"}))
        .await;
    let replaced = turned_away(&app, "q", keyed(2)).await;
    assert_eq!(replaced["id"], head["id"]);
    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    let order: Vec<&Value> = jobs.iter().map(|job| &job["id"]).collect();
    assert_eq!(order, [&behind["id"], &head["id"]], "{jobs:?}");
    assert_eq!(jobs[1]["args"], json!({"n": 2}));
}
