//! Dependencies (`after`): a job waits (`waiting`, never claimed) until
//! every job it names is completed, then is pending; a dependency that
//! ends dead, cancelled or deleted fails it (to the DLQ) or, with
//! `on_dependency_failure: ignore`, counts as finished; a claim's answer
//! carries the dependencies' results. Dependencies in other queues (and
//! other shards, other cluster slots) are told by the sweeper from the
//! ended job's outbox, also when the instance that ended it died first.

use std::time::Duration;

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys, shard_of};
use prioq::queue::store::library::{Function, LIBRARY};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::clock::{ms_of, now_ms};
use crate::support::redis_server::command_calls;
use crate::support::{
    Answer, RedisServer, Service, TestApp, redis, redis_connection, spawn_app_with, test_config,
    unique_prefix, until,
};

fn id_of(job: &Value) -> &str {
    job["id"].as_str().expect("id")
}

/// Waits until job `id` of `queue` is in `state`.
async fn until_state(app: &TestApp, queue: &str, id: &str, state: &str) -> Value {
    until(
        Duration::from_secs(10),
        &format!("{queue}/{id} is {state}"),
        || async { app.job(queue, id).await.body["state"] == state },
    )
    .await;
    app.job(queue, id).await.body
}

/// Claims the one job of `queue` there is, and acks it with `result`.
async fn run(app: &TestApp, queue: &str, id: &str, result: Value) {
    let jobs = app.claim(queue, json!({"max_jobs": 10})).await;
    let ids: Vec<&str> = jobs.iter().map(id_of).collect();
    assert_eq!(ids, [id], "only {id} is claimable");
    let ack = app
        .post(
            app.queue_url(queue, &format!("/jobs/{id}/ack")),
            json!({"lease_token": jobs[0]["lease_token"], "result": result}),
        )
        .await;
    assert_eq!(ack.status, StatusCode::NO_CONTENT, "{ack:?}");
}

/// A chain a → b → c in one queue: each waits for the one before, is
/// never claimed meanwhile, and is released when it completes (acked
/// without retention), with its result in the claim's answer.
pub(crate) async fn check_chain(config: Config) {
    let app = spawn_app_with(config).await;
    app.enqueue("q", json!({"task": "t", "id": "a"})).await;
    let b = app
        .enqueue("q", json!({"task": "t", "id": "b", "after": ["a"]}))
        .await;
    assert_eq!(b["state"], "waiting", "{b}");
    assert_eq!(b["waiting_for"], 1, "{b}");
    assert_eq!(
        b["dependencies"],
        json!([{"ref": "q/a", "state": null, "result": null}])
    );
    let c = app
        .enqueue(
            "q",
            json!({"task": "t", "id": "c", "after": ["q/b"], "priority": 0}),
        )
        .await;
    assert_eq!(c["state"], "waiting", "{c}");
    let stats = app.stats("q").await;
    assert_eq!(
        (&stats["pending"], &stats["waiting"]),
        (&json!(1), &json!(2)),
        "{stats}"
    );

    run(&app, "q", "a", json!({"rows": 3})).await;
    until_state(&app, "q", "b", "pending").await;
    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    assert_eq!(jobs.len(), 1, "c still waits: {jobs:?}");
    assert_eq!(id_of(&jobs[0]), "b");
    assert_eq!(
        jobs[0]["dependencies"],
        json!([{"ref": "q/a", "state": "completed", "result": {"rows": 3}}])
    );
    assert_eq!(jobs[0]["waiting_for"], 0);
    let ack = app.ack("q", &jobs[0]).await;
    assert_eq!(ack.status, StatusCode::NO_CONTENT, "{ack:?}");
    let c = until_state(&app, "q", "c", "pending").await;
    assert_eq!(c["dependencies"][0]["state"], "completed", "{c}");
    let stats = app.stats("q").await;
    assert_eq!(
        (&stats["pending"], &stats["waiting"]),
        (&json!(1), &json!(0)),
        "{stats}"
    );
}

#[tokio::test]
async fn a_chain_runs_in_order_each_with_the_result_before_it() {
    check_chain(test_config()).await;
}

/// An ack inside a claim releases a dependant in time for that claim, as
/// an ack alone followed by a claim does.
#[tokio::test]
async fn an_ack_inside_a_claim_releases_a_dependant_for_that_claim_as_an_ack_alone_does() {
    let app = spawn_app_with(test_config()).await;
    for queue in ["alone", "inside"] {
        app.enqueue(queue, json!({"task": "t", "id": "a"})).await;
        app.enqueue(queue, json!({"task": "t", "id": "b", "after": ["a"]}))
            .await;
    }
    // One by one: the ack, then a claim.
    let a = app.claim("alone", json!({})).await.remove(0);
    assert_eq!(app.ack("alone", &a).await.status, StatusCode::NO_CONTENT);
    let alone = app.claim("alone", json!({})).await;
    // Together: the claim carries the ack.
    let a = app.claim("inside", json!({})).await.remove(0);
    let inside = app
        .post(
            app.queue_url("inside", "/claim"),
            json!({"ack": [{"id": "a", "lease_token": a["lease_token"]}]}),
        )
        .await;
    assert_eq!(inside.status, StatusCode::OK, "{inside:?}");
    let ids = |jobs: &[Value]| jobs.iter().map(|j| id_of(j).to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(&alone), ["b"]);
    assert_eq!(
        ids(inside.body["jobs"].as_array().expect("jobs")),
        ids(&alone),
        "{inside:?}"
    );
}

/// A dependant with a delay is scheduled once released, its delay counted
/// from then; the waiting jobs show in the metrics.
#[tokio::test]
async fn a_released_dependant_with_a_delay_is_scheduled_from_its_release() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("q", json!({"task": "t", "id": "a"})).await;
    let b = app
        .enqueue(
            "q",
            json!({"task": "t", "id": "b", "after": ["a"], "delay_ms": 600_000}),
        )
        .await;
    assert_eq!(
        (&b["state"], &b["run_at"]),
        (&json!("waiting"), &json!(null)),
        "{b}"
    );
    until(
        Duration::from_secs(10),
        "the gauge counts the waiting job",
        || async {
            app.metrics()
                .await
                .lines()
                .any(|line| line.starts_with("prioq_jobs_waiting{") && line.ends_with(" 1"))
        },
    )
    .await;
    // Its delay counts from its release, not from its enqueue.
    while now_ms() <= ms_of(&b["enqueued_at"]) + 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = now_ms();
    run(&app, "q", "a", json!(null)).await;
    let b = until_state(&app, "q", "b", "scheduled").await;
    assert!(ms_of(&b["run_at"]) >= before + 600_000, "{b}");
    assert_eq!(app.stats("q").await["waiting"], 0);
}

/// A dependency that ends dead, cancelled or deleted sends its dependant
/// to the DLQ naming it, or counts as finished for one that ignores
/// failures.
pub(crate) async fn check_failures(config: Config) {
    let app = spawn_app_with(config).await;
    for id in ["poison", "dropped", "removed"] {
        app.enqueue("q", json!({"task": "t", "id": id, "max_attempts": 1}))
            .await;
    }
    let enqueue = |id: &str, after: &str, ignore: bool| {
        let mut body = json!({"task": "t", "id": id, "after": [after]});
        if ignore {
            body["on_dependency_failure"] = json!("ignore");
        }
        app.enqueue("q", body)
    };
    enqueue("after-poison", "poison", false).await;
    enqueue("after-dropped", "dropped", false).await;
    enqueue("after-removed", "removed", false).await;
    enqueue("lenient", "poison", true).await;

    let poison = app.claim("q", json!({"max_jobs": 1})).await;
    assert_eq!(id_of(&poison[0]), "poison");
    let nack = app
        .post(
            app.queue_url("q", "/jobs/poison/nack"),
            json!({"lease_token": poison[0]["lease_token"], "error": "boom"}),
        )
        .await;
    assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    let cancel = app
        .post(app.queue_url("q", "/jobs/dropped/cancel"), json!({}))
        .await;
    assert_eq!(cancel.status, StatusCode::OK, "{cancel:?}");
    let delete = app
        .send(app.http.delete(app.queue_url("q", "/jobs/removed")))
        .await;
    assert_eq!(delete.status, StatusCode::NO_CONTENT, "{delete:?}");

    for (id, dependency, how) in [
        ("after-poison", "poison", "dead"),
        ("after-dropped", "dropped", "cancelled"),
        ("after-removed", "removed", "deleted"),
    ] {
        let job = until_state(&app, "q", id, "dead").await;
        assert_eq!(
            job["last_error"],
            format!("dependency q/{dependency} {how}"),
            "{job}"
        );
    }
    let lenient = until_state(&app, "q", "lenient", "pending").await;
    assert_eq!(
        lenient["dependencies"],
        json!([{"ref": "q/poison", "state": "dead", "result": null}])
    );
    let jobs = app.claim("q", json!({"max_jobs": 10})).await;
    let ids: Vec<&str> = jobs.iter().map(id_of).collect();
    assert_eq!(ids, ["lenient"]);
}

#[tokio::test]
async fn a_failed_dependency_fails_its_dependant_unless_ignored() {
    check_failures(test_config()).await;
}

/// Dependencies in another queue, one completed before the dependant is
/// enqueued (retained: it exists) and one still to run.
pub(crate) async fn check_across_queues(config: Config) {
    let app = spawn_app_with(config).await;
    app.enqueue(
        "images",
        json!({"task": "t", "id": "done", "retain_ms": 60_000}),
    )
    .await;
    run(&app, "images", "done", json!("thumb.png")).await;
    app.enqueue("images", json!({"task": "t", "id": "todo"}))
        .await;
    let report = app
        .enqueue(
            "reports",
            json!({"task": "t", "id": "r", "after": ["images/done", "images/todo"]}),
        )
        .await;
    assert_eq!(report["state"], "waiting", "{report}");
    let report = until_state(&app, "reports", "r", "waiting").await;
    assert_eq!(report["waiting_for"], 1, "{report}");
    assert_eq!(
        report["dependencies"],
        json!([
            {"ref": "images/done", "state": "completed", "result": "thumb.png"},
            {"ref": "images/todo", "state": null, "result": null},
        ])
    );
    assert!(app.claim("reports", json!({})).await.is_empty());
    run(&app, "images", "todo", json!(2)).await;
    until_state(&app, "reports", "r", "pending").await;
    let jobs = app.claim("reports", json!({})).await;
    assert_eq!(jobs[0]["dependencies"][1]["result"], 2, "{jobs:?}");
}

#[tokio::test]
async fn a_dependency_in_another_queue_releases_its_dependant() {
    check_across_queues(test_config()).await;
}

/// A ref to no job answers 422 naming it, and nothing is enqueued; in a
/// batch a ref may name an earlier entry.
pub(crate) async fn check_refs(config: Config) {
    let app = spawn_app_with(config).await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "t", "id": "x", "after": ["nobody"]}),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
    assert_eq!(answer.problem_code(), "validation_failed");
    assert_eq!(answer.body["field"], "after[0]", "{answer:?}");
    assert_eq!(app.job("q", "x").await.status, StatusCode::NOT_FOUND);

    let batch = |jobs: Value| app.post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}));
    let answer = batch(json!([
        {"task": "t", "id": "first"},
        {"task": "t", "id": "second", "after": ["first", "other/none"]},
    ]))
    .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
    assert_eq!(answer.body["field"], "jobs[1].after[1]");
    assert_eq!(app.job("q", "first").await.status, StatusCode::NOT_FOUND);

    let answer = batch(json!([
        {"task": "t", "id": "first"},
        {"task": "t", "id": "second", "after": ["first"]},
        {"task": "t", "id": "third", "after": ["second", "first"]},
    ]))
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(states(&answer), ["pending", "waiting", "waiting"]);
    run(&app, "q", "first", json!(null)).await;
    run_when_pending(&app, "q", "second").await;
    run_when_pending(&app, "q", "third").await;

    for (after, why) in [(json!([]), "after"), (json!(["bad id!"]), "after[0]")] {
        let answer = app
            .post(
                app.queue_url("q", "/jobs"),
                json!({"task": "t", "after": after}),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{answer:?}"
        );
        assert_eq!(answer.body["field"], why, "{answer:?}");
    }
    let answer = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "t", "on_dependency_failure": "ignore"}),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
}

async fn run_when_pending(app: &TestApp, queue: &str, id: &str) {
    until_state(app, queue, id, "pending").await;
    run(app, queue, id, json!(null)).await;
}

#[tokio::test]
async fn refs_to_no_job_are_refused_and_a_batch_may_name_its_earlier_entries() {
    check_refs(test_config()).await;
}

/// A waiting job can be cancelled; a dependency it had then has nobody to
/// release.
#[tokio::test]
async fn a_waiting_job_is_cancelled_and_its_own_dependants_fail() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("q", json!({"task": "t", "id": "a"})).await;
    app.enqueue("q", json!({"task": "t", "id": "b", "after": ["a"]}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "c", "after": ["b"]}))
        .await;
    let cancel = app
        .post(app.queue_url("q", "/jobs/b/cancel"), json!({}))
        .await;
    assert_eq!(cancel.status, StatusCode::OK, "{cancel:?}");
    assert_eq!(cancel.body["state"], "cancelled", "{cancel:?}");
    let c = until_state(&app, "q", "c", "dead").await;
    assert_eq!(c["last_error"], "dependency q/b cancelled");
    run(&app, "q", "a", json!(null)).await;
    assert_eq!(app.stats("q").await["waiting"], 0);
}

/// A processing dependency whose cancel was asked ends cancelled with its
/// ack, and fails its dependant.
#[tokio::test]
async fn a_dependency_acked_after_its_cancel_fails_its_dependant() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("q", json!({"task": "t", "id": "x", "retain_ms": 60_000}))
        .await;
    app.enqueue("q", json!({"task": "t", "id": "y", "after": ["x"]}))
        .await;
    let x = app.claim("q", json!({})).await.remove(0);
    let cancel = app
        .post(app.queue_url("q", "/jobs/x/cancel"), json!({}))
        .await;
    assert_eq!(cancel.body["cancel_requested"], true, "{cancel:?}");
    let ack = app.ack("q", &x).await;
    assert_eq!(ack.status, StatusCode::NO_CONTENT, "{ack:?}");
    assert_eq!(app.job("q", "x").await.body["state"], "cancelled");
    let y = until_state(&app, "q", "y", "dead").await;
    assert_eq!(y["last_error"], "dependency q/x cancelled", "{y}");
}

/// A batch of a sharded queue whose entries name earlier ones in other
/// shards and in their own: each is made after those it names.
pub(crate) async fn check_batch_across_shards(config: Config, shards: u32) {
    let app = spawn_app_with(config).await;
    // a in one shard; b in another; c in b's.
    let id_in = |shard: u32, not: &str| {
        (0..)
            .map(|n| format!("{not}-{n}"))
            .find(|id| shard_of(id, shards) == shard)
            .expect("an id")
    };
    let a = id_in(0, "a");
    let b = id_in(1, "b");
    let c = id_in(1, "c");
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "t", "id": a},
                {"task": "t", "id": b, "after": [a]},
                {"task": "t", "id": c, "after": [b]},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(states(&answer), ["pending", "waiting", "waiting"]);
    run(&app, "q", &a, json!(null)).await;
    run_when_pending(&app, "q", &b).await;
    run_when_pending(&app, "q", &c).await;

    // One dependency named by two entries of a batch, one in its shard and
    // one in another: both hear of its end.
    let x = id_in(2, "x");
    let (near, far) = (id_in(2, "near"), id_in(0, "far"));
    app.enqueue("q", json!({"task": "t", "id": x})).await;
    let answer = app
        .post(
            app.queue_url("q", "/jobs/batch"),
            json!({"jobs": [
                {"task": "t", "id": near, "after": [x]},
                {"task": "t", "id": far, "after": [x]},
            ]}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    run(&app, "q", &x, json!(null)).await;
    until_state(&app, "q", &near, "pending").await;
    until_state(&app, "q", &far, "pending").await;
}

/// The instance that ended a dependency is SIGKILLed between the two steps
/// of telling a dependant in another queue: the end is in the outbox, and
/// another instance's sweeper tells it, once. The nack that ends it goes
/// straight to Redis, as the `nack` call of an instance killed before its
/// courier told the dependant (an instance tells at once after its own
/// nack, see below): the kill cannot race the courier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependant_hears_of_its_dependency_after_the_instance_that_ended_it_was_killed() {
    // A Redis of its own, whose commands tell when the first instance's
    // sweeper has made its one pass.
    let server = RedisServer::start();
    let url = server.url();
    let prefix = unique_prefix();
    let mut conn = redis_connection(&url).await;
    // Its sweeper passes once at start (over no queue: it lists them and
    // finds none), then not for an hour: it never takes the second step.
    let first = Service::start_with(&url, &prefix, &[("PRIOQ_SWEEP_INTERVAL_MS", "3600000")]).await;
    until(
        Duration::from_secs(10),
        "the first sweep lists the queues",
        || async { command_calls(&mut conn.clone(), &["smembers"]).await >= 1 },
    )
    .await;
    let http = reqwest::Client::new();
    let post = |path: String, body: Value| {
        let request = http.post(first.url(&path)).json(&body).send();
        async move {
            let answer = request.await.expect("answered");
            let status = answer.status();
            (status, answer.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, _) = post(
        "/v1/queues/a/jobs".into(),
        json!({"task": "t", "id": "x", "max_attempts": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = post(
        "/v1/queues/b/jobs".into(),
        json!({"task": "t", "id": "y", "after": ["a/x"], "on_dependency_failure": "ignore"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, claimed) = post("/v1/queues/a/claim".into(), json!({})).await;
    let token = &claimed["jobs"][0]["lease_token"];
    let keys = QueueKeys::new(&prefix, "a");
    let mut nack = LIBRARY.call(Function::Nack, &keys);
    nack.arg("x")
        .arg(token.as_str().expect("a lease token"))
        .arg(0)
        .arg("0")
        .arg("")
        .arg("1")
        .arg("boom");
    let _: redis::Value = nack.cmd.query_async(&mut conn).await.expect("nack");
    let view: Value = http
        .get(first.url("/v1/queues/a/jobs/x"))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a job view");
    assert_eq!(view["state"], "dead", "{view}");
    drop(first);

    let outbox_key = keys.key(Key::OutboxDue).to_owned();
    let outbox: Vec<String> = redis::cmd("ZRANGE")
        .arg(&outbox_key)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .expect("ZRANGE");
    assert_eq!(outbox, ["x"], "the first step was taken, the second not");

    let mut config = test_config();
    config.key_prefix = prefix;
    config.redis_url = url;
    let second = spawn_app_with(config).await;
    let y = until_state(&second, "b", "y", "pending").await;
    assert_eq!(
        y["dependencies"],
        json!([{"ref": "a/x", "state": "dead", "result": null}])
    );
    until(Duration::from_secs(10), "the outbox is empty", || {
        let mut conn = conn.clone();
        let key = outbox_key.clone();
        async move {
            redis::cmd("ZCARD")
                .arg(key)
                .query_async::<u64>(&mut conn)
                .await
                .expect("ZCARD")
                == 0
        }
    })
    .await;
}

/// An app on a Redis of its own whose sweeper sweeps once at start
/// (awaited: it has listed the queues), then not for an hour, so that
/// only the calls themselves tell dependants.
async fn app_that_sweeps_once() -> (RedisServer, TestApp) {
    let server = RedisServer::start();
    let conn = redis_connection(&server.url()).await;
    let mut config = test_config();
    config.redis_url = server.url();
    config.sweep_interval_ms = 3_600_000;
    let app = spawn_app_with(config).await;
    until(
        Duration::from_secs(10),
        "the first sweep lists the queues",
        || async { command_calls(&mut conn.clone(), &["smembers"]).await >= 1 },
    )
    .await;
    (server, app)
}

/// An ack's call tells the dependants elsewhere at once (its instance's
/// courier), not at the next sweep: here the sweeper sweeps once at
/// start, then not for an hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_tells_dependants_in_other_queues_at_once() {
    let (_server, app) = app_that_sweeps_once().await;
    app.enqueue("a", json!({"task": "t", "id": "x"})).await;
    app.enqueue("b", json!({"task": "t", "id": "y", "after": ["a/x"]}))
        .await;
    run(&app, "a", "x", json!({"n": 1})).await;
    let y = until_state(&app, "b", "y", "pending").await;
    assert_eq!(
        y["dependencies"],
        json!([{"ref": "a/x", "state": "completed", "result": {"n": 1}}])
    );
}

/// A queue deleted with `purge` tells the dependants of its jobs in other
/// queues that those were deleted: they fail (or, ignoring failures, run)
/// instead of waiting for ever.
#[tokio::test]
async fn a_purged_queue_tells_dependants_in_other_queues() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("a", json!({"task": "t", "id": "x"})).await;
    app.enqueue("a", json!({"task": "t", "id": "same", "after": ["x"]}))
        .await;
    app.enqueue("b", json!({"task": "t", "id": "strict", "after": ["a/x"]}))
        .await;
    app.enqueue(
        "b",
        json!({"task": "t", "id": "lenient", "after": ["a/x"], "on_dependency_failure": "ignore"}),
    )
    .await;
    let purged = app
        .send(app.http.delete(app.queue_url("a", "?purge=true")))
        .await;
    assert_eq!(purged.status, StatusCode::NO_CONTENT, "{purged:?}");
    let strict = until_state(&app, "b", "strict", "dead").await;
    assert_eq!(strict["last_error"], "dependency a/x deleted", "{strict}");
    let lenient = until_state(&app, "b", "lenient", "pending").await;
    assert_eq!(
        lenient["dependencies"],
        json!([{"ref": "a/x", "state": "deleted", "result": null}])
    );
}

/// A nack to the DLQ, a cancel and a delete tell dependants in other
/// queues at once, as an ack does: no sweep comes in this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_a_cancel_and_a_delete_tell_dependants_in_other_queues_at_once() {
    let (_server, app) = app_that_sweeps_once().await;
    for id in ["nacked", "cancelled", "deleted"] {
        app.enqueue("a", json!({"task": "t", "id": id})).await;
        app.enqueue(
            "b",
            json!({"task": "t", "id": format!("after-{id}"), "after": [format!("a/{id}")]}),
        )
        .await;
    }
    let nacked = app.claim("a", json!({"max_jobs": 1})).await;
    assert_eq!(id_of(&nacked[0]), "nacked");
    let nack = app
        .post(
            app.queue_url("a", "/jobs/nacked/nack"),
            json!({"lease_token": nacked[0]["lease_token"], "dead": true}),
        )
        .await;
    assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    let cancel = app
        .post(app.queue_url("a", "/jobs/cancelled/cancel"), json!({}))
        .await;
    assert_eq!(cancel.status, StatusCode::OK, "{cancel:?}");
    let delete = app
        .send(app.http.delete(app.queue_url("a", "/jobs/deleted")))
        .await;
    assert_eq!(delete.status, StatusCode::NO_CONTENT, "{delete:?}");
    for (id, how) in [
        ("nacked", "dead"),
        ("cancelled", "cancelled"),
        ("deleted", "deleted"),
    ] {
        let job = until_state(&app, "b", &format!("after-{id}"), "dead").await;
        assert_eq!(
            job["last_error"],
            format!("dependency a/{id} {how}"),
            "{job}"
        );
    }
}

/// The states of the jobs of a batch's answer, in order.
fn states(answer: &Answer) -> Vec<&str> {
    let jobs = answer.body["jobs"].as_array().expect("jobs");
    jobs.iter()
        .map(|job| job["state"].as_str().expect("a state"))
        .collect()
}
