//! Redis stalled with `CLIENT PAUSE` while requests are in flight.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::warm_up_scripts;
use crate::support::clock::{ms_of, within};
use crate::support::inventory::inventory;
use crate::support::redis_server::Paused;
use crate::support::{Answer, RedisServer, TestApp, spawn_app_with, test_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_pause_all_answers_503_in_time_and_applies_each_request_whole_or_not_at_all() {
    stalled_requests_apply_whole_or_not_at_all("ALL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_pause_write_answers_503_in_time_and_runs_every_held_script_afterwards() {
    let outcomes = stalled_requests_apply_whole_or_not_at_all("WRITE").await;
    // Each script that reached Redis waited there and ran once Redis
    // resumed, though the client had its 503 long before; a request queued
    // behind a held call of its queue was refused unsent, and said so.
    for (what, (applied, said_no_effect)) in &outcomes {
        assert!(applied ^ said_no_effect, "{what}: {outcomes:?}");
    }
    // The first of the queue's batched requests and the two unbatched ones
    // were sent.
    let applied = outcomes.values().filter(|(applied, _)| *applied).count();
    assert!(applied >= 3, "{outcomes:?}");
}

/// Redis paused in `mode` while an enqueue, a claim, an ack, a nack, an
/// extend and two reads are in flight: each write (and, in mode ALL, each
/// read) answers 503
/// `backend_unavailable` within the configured timeout (500 ms here) plus
/// a margin; once Redis resumes, each request has taken effect whole or
/// not at all, one whose 503 said "no effect" has none, and the client's
/// retries (same id, same token) settle everything. Returns, per write,
/// whether it took effect and whether its 503 said it had none.
async fn stalled_requests_apply_whole_or_not_at_all(
    mode: &'static str,
) -> BTreeMap<&'static str, (bool, bool)> {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config.clone()).await;
    let bound = Duration::from_millis(1500);
    let queue = "paused";
    warm_up_scripts(&app).await;

    // Three leases to end during the stall, and a job left to claim.
    for n in 0..4 {
        app.enqueue(queue, json!({"task": "t", "id": format!("job-{n}")}))
            .await;
    }
    let leases = app
        .claim(
            queue,
            json!({"worker": "holder", "lease_ms": 60_000, "max_jobs": 3}),
        )
        .await;
    let [acked, nacked, extended] = <[Value; 3]>::try_from(leases).expect("three leases");
    let spare = "job-3";
    let ack_path = format!("/jobs/{}/ack", acked["id"].as_str().expect("id"));
    let ack_body = json!({"lease_token": acked["lease_token"]});
    let nack_path = format!("/jobs/{}/nack", nacked["id"].as_str().expect("id"));
    let nack_body = json!({"lease_token": nacked["lease_token"], "error": "stalled"});
    let enqueue_body = json!({"task": "t", "id": "new"});
    let claim_body = json!({"worker": "stalled", "lease_ms": 1000});
    let extend_path = format!("/jobs/{}/extend", extended["id"].as_str().expect("id"));
    let extend_body = json!({"lease_token": extended["lease_token"], "lease_ms": 120_000});
    let post = |path: &str, body: &Value| app.post(app.queue_url(queue, path), body.clone());
    let spare_path = format!("/jobs/{spare}");
    let writes: [(&'static str, &str, &Value); 5] = [
        ("enqueue", "/jobs", &enqueue_body),
        ("claim", "/claim", &claim_body),
        ("ack", &ack_path, &ack_body),
        ("nack", &nack_path, &nack_body),
        ("extend", &extend_path, &extend_body),
    ];

    let paused = Paused::start(&server, mode, 3000);
    let started = Instant::now();
    let (answers, reads, ready) =
        tokio::join!(
            futures_util::future::join_all(writes.iter().map(|(what, path, body)| async {
                (*what, within(bound, post(path, body)).await)
            }),),
            futures_util::future::join_all([
                within(bound, app.get(app.queue_url(queue, &spare_path))),
                within(bound, app.get(app.queue_url(queue, ""))),
            ]),
            within(bound, app.get(app.url("/readyz"))),
        );
    let answered_within = started.elapsed();
    paused.end().await;

    for (what, answer) in answers.iter().map(|(w, a)| (*w, a)) {
        assert_eq!(answer.status, 503, "{mode} {what}: {answer:?}");
        assert_eq!(
            answer.body["code"], "backend_unavailable",
            "{mode} {what}: {answer:?}"
        );
    }
    // Reads call functions declared `no-writes` (FCALL_RO), which a WRITE
    // pause lets through; but one sent on a connection where a held write
    // waits ahead of it waits too, as Redis serves a connection in order.
    for answer in &reads {
        match (mode, answer.status.as_u16()) {
            ("WRITE", 200) => {}
            (_, 503) => assert_eq!(answer.body["code"], "backend_unavailable"),
            _ => panic!("{mode} read: {answer:?}"),
        }
    }
    // Readiness runs a script, which a WRITE pause holds back like every
    // queue script: the instance is not ready in either mode.
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{mode}: {ready:?}"
    );

    // Once Redis resumes: the claim first, before its 1 s lease runs out.
    let mut applied = BTreeMap::new();
    let spare_job = settled(&app, queue, spare).await.body;
    let claim_applied = spare_job["state"] == "processing";
    applied.insert("claim", claim_applied);
    if claim_applied {
        // Leased to nobody: back after its lease, with one more attempt.
        assert_eq!(spare_job["worker"], "stalled", "{spare_job}");
        let back = app
            .wait_for_job(queue, spare, Duration::from_secs(5), |j| {
                j["state"] == "pending"
            })
            .await;
        assert_eq!(
            (back["attempts"].as_u64(), back["last_error"].as_str()),
            (Some(1), Some("lease expired")),
            "{back}"
        );
    } else {
        assert_eq!(spare_job["state"], "pending", "{spare_job}");
    }

    let new = app.job(queue, "new").await;
    let enqueued = new.status == StatusCode::OK;
    if enqueued {
        assert_eq!(
            (new.body["state"].as_str(), new.body["task"].as_str()),
            (Some("pending"), Some("t")),
            "{new:?}"
        );
    } else {
        assert_eq!(new.status, StatusCode::NOT_FOUND, "{new:?}");
    }
    applied.insert("enqueue", enqueued);
    let retried = post("/jobs", &enqueue_body).await;
    assert_eq!(
        retried.status,
        if enqueued { 200 } else { 201 },
        "{retried:?}"
    );

    let after = app.job(queue, acked["id"].as_str().expect("id")).await;
    let ack_applied = after.status == StatusCode::NOT_FOUND;
    if !ack_applied {
        assert_eq!(after.body["lease_token"], acked["lease_token"], "{after:?}");
    }
    applied.insert("ack", ack_applied);
    let retried = post(&ack_path, &ack_body).await;
    assert_eq!(
        retried.status,
        if ack_applied { 404 } else { 204 },
        "{retried:?}"
    );

    let after = app
        .job(queue, nacked["id"].as_str().expect("id"))
        .await
        .body;
    let nack_applied = after["state"] == "pending";
    let fields = (
        after["state"].as_str(),
        after["attempts"].as_u64(),
        after["last_error"].as_str(),
        after["lease_token"].as_str(),
    );
    if nack_applied {
        assert_eq!(
            fields,
            (Some("pending"), Some(1), Some("stalled"), None),
            "{after}"
        );
    } else {
        let token = nacked["lease_token"].as_str();
        assert_eq!(
            fields,
            (Some("processing"), Some(0), None, token),
            "{after}"
        );
    }
    applied.insert("nack", nack_applied);
    let retried = post(&nack_path, &nack_body).await;
    assert_eq!(
        retried.status,
        if nack_applied { 409 } else { 200 },
        "{retried:?}"
    );

    let after = app
        .job(queue, extended["id"].as_str().expect("id"))
        .await
        .body;
    assert_eq!(after["lease_token"], extended["lease_token"], "{after}");
    let extend_applied =
        ms_of(&after["lease_expires_at"]) > ms_of(&extended["lease_expires_at"]) + 30_000;
    applied.insert("extend", extend_applied);

    for (what, answer) in &answers {
        if applied[what] {
            assert!(
                !said_no_effect(answer),
                "{mode} {what} took effect though its 503 said it had none: {answer:?}"
            );
        }
    }
    eprintln!(
        "CLIENT PAUSE {mode}: every request answered 503 within {answered_within:?}; \
         took effect once Redis resumed: {applied:?}; answers: {:?}",
        answers
            .iter()
            .map(|(what, a)| (
                *what,
                a.body["detail"].as_str().unwrap_or_default().to_owned()
            ))
            .collect::<Vec<_>>()
    );
    let stored = inventory(&config.redis_url, &config.key_prefix, queue).await;
    assert!(stored.problems.is_empty(), "{:?}", stored.problems);
    // Two jobs acked, the rest there: job-1 and job-3 pending, job-2
    // processing, `new` pending.
    let states: BTreeMap<&str, &str> = stored
        .jobs
        .iter()
        .map(|(id, state)| (id.as_str(), *state))
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            ("job-1", "pending"),
            ("job-2", "processing"),
            ("job-3", "pending"),
            ("new", "pending")
        ]),
    );
    answers
        .iter()
        .map(|(what, answer)| (*what, (applied[what], said_no_effect(answer))))
        .collect()
}

/// A 503 whose `detail` says the request had no effect.
fn said_no_effect(answer: &Answer) -> bool {
    answer.status == StatusCode::SERVICE_UNAVAILABLE
        && answer.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("had no effect"))
}

/// Job `id`, read once the service answers again after a stall.
async fn settled(app: &TestApp, queue: &str, id: &str) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = app.job(queue, id).await;
        if answer.status != StatusCode::SERVICE_UNAVAILABLE {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "the service never answered again: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
