//! Bounded queues (`max_pending`): an enqueue whose new jobs would take
//! the jobs waiting to be handed out past the bound answers 429
//! `queue_full` with `Retry-After`, and changes nothing; a batch is taken
//! whole or refused whole, on a sharded queue too.

use prioq::queue::store::keys::shard_of;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::{configure, patch_settings};
use crate::support::{Answer, TestApp, spawn_app, spawn_app_with, test_config};

async fn post_job(app: &TestApp, queue: &str, body: Value) -> Answer {
    app.post(app.queue_url(queue, "/jobs"), body).await
}

async fn post_batch(app: &TestApp, queue: &str, jobs: Value) -> Answer {
    app.post(app.queue_url(queue, "/jobs/batch"), json!({"jobs": jobs}))
        .await
}

/// A `queue_full` problem: 429, `effect: none`, `Retry-After` in seconds.
fn assert_full(answer: &Answer) {
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{answer:?}");
    assert_eq!(answer.problem_code(), "queue_full");
    assert_eq!(answer.body["effect"], "none", "{answer:?}");
    let retry_after = answer.headers.get("retry-after").expect("Retry-After");
    let seconds: u64 = retry_after
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(seconds >= 1, "{answer:?}");
}

#[tokio::test]
async fn an_enqueue_past_max_pending_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_pending": 3})).await;
    // Waiting: pending, delayed and waiting for a dependency all count.
    app.enqueue("q", json!({"task": "t", "id": "a"})).await;
    app.enqueue("q", json!({"task": "t", "id": "later", "delay_ms": 60_000}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "after", "after": ["a"]}))
        .await;
    let before = app.snapshot().await;
    let refused = post_job(&app, "q", json!({"task": "t", "id": "d"})).await;
    assert_full(&refused);
    assert_eq!(app.snapshot().await, before, "nothing changed");
    assert_eq!(app.job("q", "d").await.status, StatusCode::NOT_FOUND);
    let fill = r#"prioq_queue_fill_ratio{queue="q"}"#;
    assert_eq!(app.metric(fill).await, 1.0);
    // A known id is answered as ever, the queue full or not.
    let again = post_job(&app, "q", json!({"task": "t", "id": "a"})).await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    // A job handed out frees its place; one processing does not count.
    let claimed = app.claim("q", json!({})).await;
    assert_eq!(claimed[0]["id"], "a");
    app.enqueue("q", json!({"task": "t", "id": "d"})).await;
    assert_full(&post_job(&app, "q", json!({"task": "t", "id": "e"})).await);
    // Completed (kept) and dead jobs do not count either.
    assert_eq!(
        app.ack("q", &claimed[0]).await.status,
        StatusCode::NO_CONTENT
    );
    // The dependant was released by the ack: still waiting, still counted.
    assert_full(&post_job(&app, "q", json!({"task": "t", "id": "e"})).await);
    // Lifting the bound lets it in.
    configure(&app, "q", json!({"max_pending": null})).await;
    app.enqueue("q", json!({"task": "t", "id": "e"})).await;
    assert!(
        !app.metrics().await.contains(fill),
        "no fill without a bound"
    );
}

#[tokio::test]
async fn completed_and_dead_jobs_leave_room() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_pending": 2, "retain_ms": 60_000})).await;
    app.enqueue("q", json!({"task": "t", "id": "done"})).await;
    app.enqueue("q", json!({"task": "t", "id": "poison", "max_attempts": 1}))
        .await;
    assert_full(&post_job(&app, "q", json!({"task": "t"})).await);
    let jobs = app.claim("q", json!({"max_jobs": 2})).await;
    for job in &jobs {
        if job["id"] == "done" {
            assert_eq!(app.ack("q", job).await.status, StatusCode::NO_CONTENT);
        } else {
            let url = app.queue_url("q", "/jobs/poison/nack");
            let body = json!({"lease_token": job["lease_token"], "error": "bad"});
            assert_eq!(app.post(url, body).await.status, StatusCode::OK);
        }
    }
    assert_eq!(app.job("q", "done").await.body["state"], "completed");
    assert_eq!(app.job("q", "poison").await.body["state"], "dead");
    app.enqueue("q", json!({"task": "t"})).await;
    app.enqueue("q", json!({"task": "t"})).await;
    assert_full(&post_job(&app, "q", json!({"task": "t"})).await);
}

#[tokio::test]
async fn a_batch_is_taken_whole_or_refused_whole() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_pending": 4})).await;
    app.enqueue("q", json!({"task": "t", "id": "a"})).await;
    app.enqueue("q", json!({"task": "t", "id": "b"})).await;
    let before = app.snapshot().await;
    let three =
        json!([{"task": "t", "id": "c"}, {"task": "t", "id": "d"}, {"task": "t", "id": "e"}]);
    assert_full(&post_batch(&app, "q", three).await);
    assert_eq!(app.snapshot().await, before, "no job of the batch was made");
    // Known ids count for nothing: two new jobs and a known one fit.
    let fits =
        json!([{"task": "t", "id": "a"}, {"task": "t", "id": "c"}, {"task": "t", "id": "d"}]);
    let answer = post_batch(&app, "q", fits).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let created: Vec<bool> = answer.body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["created"].as_bool().expect("created"))
        .collect();
    assert_eq!(created, [false, true, true]);
    assert_eq!(app.stats("q").await["pending"], 4);
}

/// A queue split over 2 shards with `max_pending` 4 holds 2 in each; a
/// batch that spans the shards is checked in each before any part is
/// written: refused whole when one shard is full, though the other has
/// room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_batch_is_refused_whole_when_one_shard_is_full() {
    const SHARDS: u32 = 2;
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(&app, "s", json!({"shards": SHARDS, "max_pending": 4})).await;
    let of_shard = |shard: u32| {
        (0..)
            .map(move |n| format!("s{shard}-{n}"))
            .filter(move |id| shard_of(id, SHARDS) == shard)
    };
    let zero: Vec<String> = of_shard(0).take(3).collect();
    let one: Vec<String> = of_shard(1).take(3).collect();
    for id in &zero[..2] {
        app.enqueue("s", json!({"task": "t", "id": id})).await;
    }
    assert_full(&post_job(&app, "s", json!({"task": "t", "id": zero[2]})).await);
    let before = app.snapshot().await;
    let spanning = json!([{"task": "t", "id": one[0]}, {"task": "t", "id": zero[2]}]);
    assert_full(&post_batch(&app, "s", spanning).await);
    assert_eq!(app.snapshot().await, before, "no part was written");
    let fits = json!([{"task": "t", "id": one[0]}, {"task": "t", "id": one[1]}, {"task": "t", "id": zero[0]}]);
    let answer = post_batch(&app, "s", fits).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(app.stats("s").await["pending"], 4);
}

#[tokio::test]
async fn max_pending_out_of_range_is_refused() {
    let app = spawn_app().await;
    for bad in [
        json!(0),
        json!(-1),
        json!(1_000_000_001_u64),
        json!("10"),
        json!(1.5),
    ] {
        let answer = patch_settings(&app, "q", json!({"max_pending": bad})).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {answer:?}"
        );
        assert_eq!(answer.problem_code(), "validation_failed");
        assert_eq!(answer.body["field"], "max_pending");
    }
    let view = configure(&app, "q", json!({"max_pending": 10})).await;
    assert_eq!(view["max_pending"], 10);
}

/// Args whose job counts `size` bytes against `max_pending_bytes` with the
/// task "t": the task's length (one byte), the task, the args as sent.
fn args_of(size: usize) -> Value {
    let overhead = 2 + r#"{"pad":""}"#.len();
    json!({"pad": "x".repeat(size - overhead)})
}

fn bytes_waiting(stats: &Value) -> u64 {
    stats["pending_bytes"].as_u64().expect("pending_bytes")
}

/// `max_pending_bytes` bounds the bytes of the jobs waiting: a job that
/// would take them past it is refused (429 `queue_full`, nothing
/// changed) while a smaller one fits; a job handed out frees its bytes,
/// one put back by a nack or a requeue takes them again, and a cancel, a
/// delete and a replace by dedup key give back or change what they held.
#[tokio::test]
async fn an_enqueue_past_max_pending_bytes_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"max_pending_bytes": 1_000})).await;
    for id in ["a", "b", "c"] {
        let job = json!({"task": "t", "id": id, "args": args_of(300), "max_attempts": 1});
        app.enqueue("q", job).await;
    }
    assert_eq!(bytes_waiting(&app.stats("q").await), 900);
    let before = app.snapshot().await;
    let refused = post_job(
        &app,
        "q",
        json!({"task": "t", "id": "d", "args": args_of(300)}),
    )
    .await;
    assert_full(&refused);
    let detail = refused.body["detail"].as_str().expect("detail");
    assert!(
        detail.contains("900 bytes") && detail.contains("max_pending_bytes allows 1000"),
        "{detail}"
    );
    assert_eq!(app.snapshot().await, before, "nothing changed");
    let fill = r#"prioq_queue_bytes_fill_ratio{queue="q"}"#;
    assert_eq!(app.metric(fill).await, 0.9);
    // A batch is taken whole or refused whole by bytes too.
    let two = json!([{"task": "t", "id": "e", "args": args_of(50)}, {"task": "t", "id": "f", "args": args_of(60)}]);
    assert_full(&post_batch(&app, "q", two).await);
    assert_eq!(app.snapshot().await, before, "no job of the batch was made");
    app.enqueue(
        "q",
        json!({"task": "t", "id": "small", "args": args_of(100)}),
    )
    .await;
    assert_eq!(bytes_waiting(&app.stats("q").await), 1_000);

    // Handed out: its bytes are free; put back by a nack: counted again.
    let claimed = app.claim("q", json!({})).await;
    assert_eq!(claimed[0]["id"], "a");
    assert_eq!(bytes_waiting(&app.stats("q").await), 700);
    let nack = json!({"lease_token": claimed[0]["lease_token"], "error": "bad"});
    let answer = app.post(app.queue_url("q", "/jobs/a/nack"), nack).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    // max_attempts 1: dead, not waiting; a requeue makes it wait again.
    assert_eq!(app.job("q", "a").await.body["state"], "dead");
    assert_eq!(bytes_waiting(&app.stats("q").await), 700);
    let requeued = app
        .post(app.queue_url("q", "/dlq/a/requeue"), json!({}))
        .await;
    assert_eq!(requeued.status, StatusCode::OK, "{requeued:?}");
    assert_eq!(bytes_waiting(&app.stats("q").await), 1_000);

    // A cancel and a delete give their bytes back.
    let cancelled = app
        .post(app.queue_url("q", "/jobs/b/cancel"), json!({}))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{cancelled:?}");
    assert_eq!(bytes_waiting(&app.stats("q").await), 700);
    let deleted = app
        .send(app.http.delete(app.queue_url("q", "/jobs/small")))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    assert_eq!(bytes_waiting(&app.stats("q").await), 600);
    // A replace by dedup key counts the new body in place of the old.
    let keyed = json!({"task": "t", "id": "k", "args": args_of(100), "dedup": {"key": "k"}});
    app.enqueue("q", keyed).await;
    let replace =
        json!({"task": "t", "args": args_of(250), "dedup": {"key": "k", "mode": "replace"}});
    let answer = post_job(&app, "q", replace).await;
    assert_eq!(answer.body["replaced"], true, "{answer:?}");
    assert_eq!(bytes_waiting(&app.stats("q").await), 850);

    // Lifted, the bound counts nothing; set again, it counts the jobs
    // that enter waiting from then on.
    let view = configure(&app, "q", json!({"max_pending_bytes": null})).await;
    assert_eq!(view["max_pending_bytes"], Value::Null);
    assert_eq!(app.stats("q").await["pending_bytes"], Value::Null);
    assert!(
        !app.metrics().await.contains(fill),
        "no fill without a bound"
    );
    configure(&app, "q", json!({"max_pending_bytes": 1_000})).await;
    assert_eq!(bytes_waiting(&app.stats("q").await), 0);
    app.enqueue("q", json!({"task": "t", "id": "new", "args": args_of(40)}))
        .await;
    assert_eq!(bytes_waiting(&app.stats("q").await), 40);
    // An old job claimed frees nothing it was not counted for.
    let claimed = app.claim("q", json!({"max_jobs": 10})).await;
    assert_eq!(claimed.len(), 4, "{claimed:?}");
    assert_eq!(bytes_waiting(&app.stats("q").await), 0);
}

/// A queue split over 2 shards with `max_pending_bytes` 600 holds 300
/// bytes in each: a batch that spans them is refused whole when it would
/// overfill one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_batch_is_refused_whole_past_a_shards_bytes() {
    const SHARDS: u32 = 2;
    let app = spawn_app().await;
    configure(
        &app,
        "s",
        json!({"shards": SHARDS, "max_pending_bytes": 600}),
    )
    .await;
    let of_shard = |shard: u32| {
        (0..)
            .map(move |n| format!("s{shard}-{n}"))
            .find(|id| shard_of(id, SHARDS) == shard)
            .expect("an id")
    };
    let (zero, one) = (of_shard(0), of_shard(1));
    app.enqueue("s", json!({"task": "t", "id": "z", "args": args_of(250)}))
        .await;
    let shard_of_z = shard_of("z", SHARDS);
    let other = if shard_of_z == 0 { &one } else { &zero };
    let same = if shard_of_z == 0 { &zero } else { &one };
    let before = app.snapshot().await;
    let spanning = json!([{"task": "t", "id": other, "args": args_of(100)}, {"task": "t", "id": same, "args": args_of(100)}]);
    let refused = post_batch(&app, "s", spanning).await;
    assert_full(&refused);
    assert!(
        refused.body["detail"]
            .as_str()
            .expect("detail")
            .contains("250 bytes"),
        "{refused:?}"
    );
    assert_eq!(app.snapshot().await, before, "no part was written");
    let fits = json!([{"task": "t", "id": other, "args": args_of(100)}, {"task": "t", "id": same, "args": args_of(50)}]);
    let answer = post_batch(&app, "s", fits).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(bytes_waiting(&app.stats("s").await), 400);
}

#[tokio::test]
async fn max_pending_bytes_out_of_range_is_refused() {
    let app = spawn_app().await;
    for bad in [json!(0), json!(1_000_000_000_001_u64), json!("10")] {
        let answer = patch_settings(&app, "q", json!({"max_pending_bytes": bad})).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {answer:?}"
        );
        assert_eq!(answer.body["field"], "max_pending_bytes");
    }
}
