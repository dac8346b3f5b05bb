//! Finding jobs (`GET /v1/queues/{queue}/jobs`): by a part of the id, the
//! task, the group, the dedup key, a field of the args and the state, in
//! every state; pages that together give every job once; refusals.

use std::collections::BTreeSet;

use prioq::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::configure;
use crate::support::{TestApp, spawn_app, spawn_app_with, test_config};

/// Every job `query` finds, following the pages; their ids, sorted.
async fn found(app: &TestApp, queue: &str, query: &str) -> BTreeSet<String> {
    let (mut ids, mut cursor) = (BTreeSet::new(), None::<String>);
    loop {
        let at = cursor.map_or(String::new(), |c| format!("&cursor={c}"));
        let answer = app
            .get(app.queue_url(queue, &format!("/jobs?limit=20&{query}{at}")))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {answer:?}");
        for job in answer.body["jobs"].as_array().expect("jobs") {
            let id = job["id"].as_str().expect("id").to_owned();
            assert!(ids.insert(id.clone()), "{id} found twice by {query}");
        }
        match answer.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return ids,
        }
    }
}

fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|id| (*id).to_owned()).collect()
}

#[tokio::test]
async fn jobs_are_found_by_every_filter_in_every_state() {
    check_filters(test_config()).await;
}

#[tokio::test]
async fn a_sharded_queue_is_searched_shard_by_shard() {
    let config = test_config();
    let app = spawn_app_with(config.clone()).await;
    configure(&app, "s", json!({"shards": 3})).await;
    check_filters(config).await;
}

pub(crate) async fn check_filters(config: Config) {
    let app = spawn_app_with(config).await;
    let q = "s";
    let enqueue = |body: Value| app.enqueue(q, body);
    enqueue(json!({"id": "mail-1", "task": "mail", "group": "acme", "args": {"tenant": "acme", "n": 1}})).await;
    enqueue(json!({"id": "sms-2", "task": "sms", "group": "beta", "args": {"tenant": "beta", "n": 2}, "dedup": {"key": "k-1"}})).await;
    enqueue(json!({"id": "mail-3", "task": "mail", "args": {"tenant": "acme", "vip": true}, "delay_ms": 600000})).await;
    // Claimed in turn: the first is acked and kept, the next runs, the
    // third dies.
    for (id, task) in [
        ("run-4", "report"),
        ("run-5", "report"),
        ("run-6", "report"),
    ] {
        enqueue(json!({"id": id, "task": task, "priority": 0, "retain_ms": 60000, "max_attempts": 1, "args": {"n": 4}})).await;
    }
    let claimed = app.claim(q, json!({"max_jobs": 3})).await;
    let by_id = |id: &str| {
        claimed
            .iter()
            .find(|j| j["id"] == id)
            .expect("claimed")
            .clone()
    };
    assert_eq!(
        app.ack(q, &by_id("run-4")).await.status,
        StatusCode::NO_CONTENT
    );
    let dead = app
        .post(
            app.queue_url(q, "/jobs/run-6/nack"),
            json!({"lease_token": by_id("run-6")["lease_token"], "error": "bad"}),
        )
        .await;
    assert_eq!(dead.status, StatusCode::OK, "{dead:?}");

    let all = ids(&["mail-1", "sms-2", "mail-3", "run-4", "run-5", "run-6"]);
    assert_eq!(found(&app, q, "").await, all);
    assert_eq!(found(&app, q, "id=mail").await, ids(&["mail-1", "mail-3"]));
    assert_eq!(
        found(&app, q, "task=report").await,
        ids(&["run-4", "run-5", "run-6"])
    );
    assert_eq!(found(&app, q, "group=beta").await, ids(&["sms-2"]));
    assert_eq!(found(&app, q, "dedup_key=k-1").await, ids(&["sms-2"]));
    assert_eq!(
        found(&app, q, "field=tenant&value=acme").await,
        ids(&["mail-1", "mail-3"])
    );
    assert_eq!(
        found(&app, q, "field=n&value=4").await,
        ids(&["run-4", "run-5", "run-6"])
    );
    assert_eq!(
        found(&app, q, "field=vip&value=true").await,
        ids(&["mail-3"])
    );
    for (state, expected) in [
        ("pending", ids(&["mail-1", "sms-2"])),
        ("scheduled", ids(&["mail-3"])),
        ("processing", ids(&["run-5"])),
        ("completed", ids(&["run-4"])),
        ("dead", ids(&["run-6"])),
        ("waiting", ids(&[])),
    ] {
        assert_eq!(
            found(&app, q, &format!("state={state}")).await,
            expected,
            "{state}"
        );
    }
    assert_eq!(
        found(&app, q, "task=mail&state=pending").await,
        ids(&["mail-1"])
    );
    // A found job is shown as a read shows it.
    let page = app.get(app.queue_url(q, "/jobs?id=run-6")).await;
    assert_eq!(page.body["jobs"][0]["state"], "dead");
    assert_eq!(page.body["jobs"][0]["last_error"], "bad");
}

#[tokio::test]
async fn pages_give_every_job_once() {
    const JOBS: usize = 250;
    let config = test_config();
    let app = spawn_app_with(config).await;
    configure(&app, "many", json!({"shards": 2})).await;
    let jobs: Vec<Value> = (0..JOBS)
        .map(|n| json!({"id": format!("j-{n:03}"), "task": "t", "args": {"odd": n % 2 == 1}}))
        .collect();
    for chunk in jobs.chunks(100) {
        let answer = app
            .post(app.queue_url("many", "/jobs/batch"), json!({"jobs": chunk}))
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
    }
    let every: BTreeSet<String> = (0..JOBS).map(|n| format!("j-{n:03}")).collect();
    assert_eq!(found(&app, "many", "").await, every);
    let odd: BTreeSet<String> = (0..JOBS)
        .filter(|n| n % 2 == 1)
        .map(|n| format!("j-{n:03}"))
        .collect();
    assert_eq!(found(&app, "many", "field=odd&value=true").await, odd);
}

#[tokio::test]
async fn a_bad_search_is_refused() {
    let app = spawn_app().await;
    for (query, code, field) in [
        ("state=done", "validation_failed", "state"),
        ("limit=0", "validation_failed", "limit"),
        ("limit=101", "validation_failed", "limit"),
        ("field=n", "validation_failed", "value"),
        ("value=1", "validation_failed", "field"),
        ("cursor=x", "invalid_request", "cursor"),
    ] {
        let answer = app.get(app.queue_url("q", &format!("/jobs?{query}"))).await;
        assert_eq!(answer.problem_code(), code, "{query}: {answer:?}");
        assert!(
            answer.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains(field)),
            "{query}: {answer:?}"
        );
    }
    let long = "x".repeat(201);
    let answer = app
        .get(app.queue_url("q", &format!("/jobs?group={long}")))
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
}
