//! An enqueue's `run_at`: the job is scheduled until that time by Redis's
//! clock, a time passed makes it pending at once, and a bad one is refused
//! naming the field, with nothing written.

use super::*;

use crate::support::app::configure;
use crate::support::clock::now_ms;

const LEASE_MS: i64 = 30_000;

/// `ms` since the epoch as RFC 3339, as a client sends it.
fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .expect("a time")
        .to_string()
}

/// When the lease of a job a claim with `LEASE_MS` handed out was granted
/// (by Redis's clock).
fn granted_at(leased: &Value) -> i64 {
    ms_of(&leased["lease_expires_at"]) - LEASE_MS
}

/// Claims with a `wait_ms` long poll until `count` jobs are leased,
/// answering them; fails after 10 s.
async fn claim_all(app: &TestApp, queue: &str, count: usize) -> Vec<Value> {
    let mut leased = Vec::new();
    let deadline = now_ms() + 10_000;
    while leased.len() < count {
        assert!(
            now_ms() < deadline,
            "only {} of {count} claimed",
            leased.len()
        );
        leased.extend(
            app.claim(
                queue,
                json!({"max_jobs": count - leased.len(), "wait_ms": 2000, "lease_ms": LEASE_MS}),
            )
            .await,
        );
    }
    leased
}

#[tokio::test]
async fn a_job_with_run_at_is_scheduled_until_then_and_leased_no_earlier() {
    let app = spawn_app().await;
    // An hour ahead: not claimable now, however slow this machine is.
    let later = now_ms() + 3_600_000;
    let job = app
        .enqueue("q", json!({"task": "t", "run_at": rfc3339(later)}))
        .await;
    assert_eq!(job["state"], "scheduled", "{job}");
    assert_eq!(ms_of(&job["run_at"]), later, "{job}");
    let stored = app.job("q", id_of(&job)).await.body;
    assert_eq!(
        (stored["state"].clone(), ms_of(&stored["run_at"])),
        (json!("scheduled"), later)
    );
    assert!(
        app.claim("q", json!({})).await.is_empty(),
        "claimed before its run_at"
    );

    // Soon: a long poll gets it once due, and no earlier.
    let at = now_ms() + 400;
    let soon = app
        .enqueue("q", json!({"task": "t", "run_at": rfc3339(at)}))
        .await;
    let leased = claim_all(&app, "q", 1).await;
    assert_eq!(id_of(&leased[0]), id_of(&soon));
    assert!(
        granted_at(&leased[0]) >= at,
        "leased at {} before its run_at {at}",
        granted_at(&leased[0])
    );
}

#[tokio::test]
async fn a_run_at_passed_is_pending_at_once_and_an_offset_is_the_same_instant() {
    let app = spawn_app().await;
    let past = app
        .enqueue(
            "q",
            json!({"task": "t", "run_at": rfc3339(now_ms() - 60_000)}),
        )
        .await;
    assert_eq!(past["state"], "pending", "{past}");
    assert_eq!(past["run_at"], Value::Null, "{past}");

    // 10:00 at +01:00 is 09:00Z.
    let at = (now_ms() / 1000 + 3600) * 1000;
    let zulu = rfc3339(at);
    let shifted = jiff::Timestamp::from_millisecond(at)
        .expect("a time")
        .to_zoned(jiff::tz::TimeZone::fixed(jiff::tz::offset(1)))
        .strftime("%Y-%m-%dT%H:%M:%S%:z")
        .to_string();
    assert_ne!(shifted, zulu);
    let job = app
        .enqueue("q", json!({"task": "t", "run_at": shifted}))
        .await;
    assert_eq!(ms_of(&job["run_at"]), at, "{job}");
    let leased = app.claim_one("q").await.expect("the past job");
    assert_eq!(id_of(&leased), id_of(&past));
}

#[tokio::test]
async fn a_bad_run_at_is_refused_naming_it_and_writes_nothing() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "existing"})).await;
    let before = app.snapshot().await;
    let soon = rfc3339(now_ms() + 60_000);
    let cases = [
        json!({"task": "t", "run_at": "tomorrow"}),
        json!({"task": "t", "run_at": "2026-12-24T09:00:00"}),
        json!({"task": "t", "run_at": "1969-12-31T23:59:59Z"}),
        json!({"task": "t", "run_at": rfc3339(now_ms() + 31 * 86_400_000)}),
        json!({"task": "t", "run_at": soon, "delay_ms": 5}),
        json!({"task": "t", "run_at": soon, "after": ["existing"]}),
    ];
    for body in cases {
        let answer = app.post(app.queue_url("q", "/jobs"), body).await;
        assert_invalid_field(&answer, "run_at");
    }
    let batch = json!({"jobs": [{"task": "t", "run_at": soon}, {"task": "t", "run_at": 5}]});
    let answer = app.post(app.queue_url("q", "/jobs/batch"), batch).await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
    assert!(
        answer.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("jobs[1].run_at")),
        "{answer:?}"
    );
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused run_at wrote something"
    );
}

#[tokio::test]
async fn a_sharded_batch_keeps_each_run_at_by_its_shards_clock() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"shards": 3})).await;
    let at = now_ms() + 400;
    let jobs: Vec<Value> = (0..6)
        .map(|i| json!({"task": "t", "id": format!("j{i}"), "run_at": rfc3339(at + i)}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    for i in 0..6 {
        let view = app.job("q", &format!("j{i}")).await.body;
        assert_eq!(
            (view["state"].clone(), ms_of(&view["run_at"])),
            (json!("scheduled"), at + i),
            "{view}"
        );
    }
    let leased = claim_all(&app, "q", 6).await;
    for job in &leased {
        let i: i64 = id_of(job)[1..].parse().expect("j<n>");
        assert!(granted_at(job) >= at + i, "{job} leased before its run_at");
    }
}

#[tokio::test]
async fn a_replace_with_run_at_moves_the_waiting_job_to_it() {
    let app = spawn_app().await;
    let dedup = json!({"key": "k", "mode": "replace"});
    let owner = app
        .enqueue(
            "q",
            json!({"task": "t", "delay_ms": 60_000, "dedup": dedup}),
        )
        .await;
    let at = now_ms() + 3_600_000;
    let answer = app
        .post(
            app.queue_url("q", "/jobs"),
            json!({"task": "t2", "run_at": rfc3339(at), "dedup": dedup}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["replaced"], true, "{answer:?}");
    let view = app.job("q", id_of(&owner)).await.body;
    assert_eq!(
        (view["task"].clone(), ms_of(&view["run_at"])),
        (json!("t2"), at),
        "{view}"
    );
}
