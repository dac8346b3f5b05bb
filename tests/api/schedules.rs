//! Recurring schedules: each fire time enqueues exactly one job whichever
//! instances run, missed fire times make one job, paused and deleted
//! schedules fire nothing, and bad definitions change nothing. The
//! schedules here fire every second (a sixth, seconds field), so the tests
//! run in seconds; fire times still come from Redis `TIME`.

use std::collections::BTreeSet;
use std::time::Duration;

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys};
use prioq::queue::store::library::{Function, LIBRARY};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    Answer, RedisServer, TempDir, TestApp, free_port, redis, redis_connection, spawn_app_with,
    test_config, until,
};

/// Creates or replaces schedule `name` of `queue`.
async fn put(app: &TestApp, queue: &str, name: &str, body: Value) -> Answer {
    app.send(
        app.http
            .put(app.queue_url(queue, &format!("/schedules/{name}")))
            .json(&body),
    )
    .await
}

async fn schedule(app: &TestApp, queue: &str, name: &str) -> Answer {
    app.get(app.queue_url(queue, &format!("/schedules/{name}")))
        .await
}

/// Every second, enqueueing task `tick`.
fn every_second() -> Value {
    json!({"cron": "* * * * * *", "task": "tick", "args": {"from": "schedule"}})
}

/// The fire times (ms) from `from` to `to` of `name`'s jobs in `queue`,
/// in order: a schedule fires at whole seconds, and the job of fire time t
/// is `{name}:{t}`, so each second in between is looked up. Each job found
/// names its schedule.
async fn fired(app: &TestApp, queue: &str, name: &str, from: i64, to: i64) -> Vec<i64> {
    let mut times = Vec::new();
    for t in (from..=to).step_by(1000) {
        let job = app.job(queue, &format!("{name}:{t}")).await;
        match job.status {
            StatusCode::OK => {
                assert_eq!(job.body["schedule"], json!(name), "{job:?}");
                assert_eq!(job.body["task"], "tick", "{job:?}");
                times.push(t);
            }
            StatusCode::NOT_FOUND => {}
            _ => panic!("{job:?}"),
        }
    }
    times
}

/// Waits until schedule `name` has fired at least `count` times after
/// `since` (ms), as its `last_run_at` shows.
async fn until_fired_after(app: &TestApp, queue: &str, name: &str, since: i64, count: i64) {
    until(
        Duration::from_secs(20),
        &format!("{name} fires {count} times"),
        || async {
            let view = schedule(app, queue, name).await.body;
            view["last_run_at"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|t| t.as_millisecond() >= since + 1000 * count)
        },
    )
    .await;
}

fn ms(view: &Value, field: &str) -> Option<i64> {
    view[field].as_str().map(|t| {
        t.parse::<jiff::Timestamp>()
            .expect("a time")
            .as_millisecond()
    })
}

/// Three instances sweep the same Redis every 50 ms: every fire time of an
/// every-second schedule enqueues exactly one job, none is skipped.
pub(crate) async fn check_fires_once_per_fire_time(config: Config) {
    let apps = [
        spawn_app_with(config.clone()).await,
        spawn_app_with(config.clone()).await,
        spawn_app_with(config).await,
    ];
    let q = "ticks";
    let created = put(&apps[0], q, "tick", every_second()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let first = ms(&created.body, "next_run_at").expect("next run");
    until_fired_after(&apps[1], q, "tick", first, 4).await;
    let paused = apps[2]
        .post(apps[2].queue_url(q, "/schedules/tick/pause"), json!(null))
        .await;
    assert_eq!(paused.body["next_run_at"], Value::Null, "{paused:?}");
    let last = ms(&paused.body, "last_run_at").expect("fired");
    let times = fired(&apps[0], q, "tick", first - 5000, last + 5000).await;
    assert!(times.len() >= 5, "{times:?}");
    assert_eq!(times[0], first, "{times:?}");
    for pair in times.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            1000,
            "a fire time doubled or skipped: {times:?}"
        );
    }
    let view = schedule(&apps[0], q, "tick").await.body;
    assert_eq!(
        view["last_job_id"],
        json!(format!("tick:{}", times.last().expect("fired"))),
        "{view}"
    );
    assert_eq!(
        apps[0].stats(q).await["pending"],
        json!(times.len()),
        "one job per fire time, nothing else"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_fire_each_fire_time_exactly_once() {
    check_fires_once_per_fire_time(test_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_times_missed_during_a_redis_outage_make_one_job_then_the_schedule_goes_on() {
    let dir = TempDir::new("schedules");
    let port = free_port();
    let server = RedisServer::start_on(port, &dir.path);
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    let q = "outage";
    let created = put(&app, q, "tick", every_second()).await;
    let first = ms(&created.body, "next_run_at").expect("next run");
    until_fired_after(&app, q, "tick", first, 1).await;
    // A fire may still come between this read and the stop.
    let seen = ms(&schedule(&app, q, "tick").await.body, "last_run_at").expect("fired");
    drop(server);
    // The outage is the scenario: three fire times or more pass while
    // Redis is down.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let _server = RedisServer::start_on(port, &dir.path);
    // The catch-up fire (at least 3 s on), then two more.
    until_fired_after(&app, q, "tick", seen, 5).await;
    let last = ms(&schedule(&app, q, "tick").await.body, "last_run_at").expect("fired");
    let times = fired(&app, q, "tick", first, last).await;
    assert_eq!(times.first(), Some(&first), "{times:?}");
    // One step over the outage, every other step one second.
    let jumps: Vec<(i64, i64)> = times
        .windows(2)
        .map(|p| (p[0], p[1]))
        .filter(|(a, b)| b - a != 1000)
        .collect();
    assert_eq!(jumps.len(), 1, "fire times {times:?}");
    let (from, to) = jumps[0];
    assert!(from >= seen && to - from >= 3000, "fire times {times:?}");
    assert!(
        times.iter().filter(|t| **t > to).count() >= 2,
        "the schedule goes on: {times:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_schedule_fires_nothing_and_resumes_from_now() {
    check_paused_schedule(test_config()).await;
}

/// A schedule created paused fires nothing while another one of its queue
/// fires; resumed, it fires from its next fire time after now.
pub(crate) async fn check_paused_schedule(config: Config) {
    let app = spawn_app_with(config).await;
    let q = "paused";
    let mut body = every_second();
    body["paused"] = json!(true);
    let held = put(&app, q, "held", body).await;
    assert_eq!(held.status, StatusCode::CREATED, "{held:?}");
    assert_eq!(held.body["next_run_at"], Value::Null, "{held:?}");
    // Another schedule of the queue is the clock: once it fired twice, the
    // sweeper passed two fire times of the paused one.
    let clock = put(&app, q, "clock", every_second()).await;
    let start = ms(&clock.body, "next_run_at").expect("next run");
    until_fired_after(&app, q, "clock", start, 2).await;
    let now = ms(&schedule(&app, q, "clock").await.body, "last_run_at").expect("fired");
    assert_eq!(
        fired(&app, q, "held", start - 2000, now + 1000).await,
        Vec::<i64>::new()
    );

    let resumed = app
        .post(app.queue_url(q, "/schedules/held/resume"), json!(null))
        .await;
    assert_eq!(resumed.status, StatusCode::OK, "{resumed:?}");
    assert_eq!(resumed.body["paused"], false);
    let next = ms(&resumed.body, "next_run_at").expect("next run");
    assert!(
        next > start + 2000,
        "no catching up on paused time: {resumed:?}"
    );
    until_fired_after(&app, q, "held", next, 1).await;
    let last = ms(&schedule(&app, q, "held").await.body, "last_run_at").expect("fired");
    let times = fired(&app, q, "held", start - 2000, last).await;
    assert_eq!(times.first(), Some(&next), "{times:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_schedule_stops_firing_and_its_jobs_stay() {
    check_deleted_schedule(test_config()).await;
}

/// A deleted schedule fires no more, and the jobs it made stay.
pub(crate) async fn check_deleted_schedule(config: Config) {
    let app = spawn_app_with(config).await;
    let q = "deleted";
    let created = put(&app, q, "gone", every_second()).await;
    let first = ms(&created.body, "next_run_at").expect("next run");
    until_fired_after(&app, q, "gone", first, 1).await;
    let deleted = app
        .send(app.http.delete(app.queue_url(q, "/schedules/gone")))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let made = fired(&app, q, "gone", first, first + 10_000).await;
    assert!(!made.is_empty());
    assert_eq!(
        schedule(&app, q, "gone").await.status,
        StatusCode::NOT_FOUND
    );
    let clock = put(&app, q, "clock", every_second()).await;
    let start = ms(&clock.body, "next_run_at").expect("next run");
    until_fired_after(&app, q, "clock", start, 2).await;
    let now = ms(&schedule(&app, q, "clock").await.body, "last_run_at").expect("fired");
    assert_eq!(
        fired(&app, q, "gone", first, now + 1000).await,
        made,
        "fired after its deletion"
    );
    let again = app
        .send(app.http.delete(app.queue_url(q, "/schedules/gone")))
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(again.body["detail"], "no such schedule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_listed_read_and_replaced() {
    let app = spawn_app_with(test_config()).await;
    let q = "listed";
    let daily = json!({
        "cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "task": "report",
        "args": {"kind": "daily"}, "priority": 3, "max_attempts": 2, "group": "ops",
        "retain_ms": 60000
    });
    let created = put(&app, q, "weekdays", daily.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let view = &created.body;
    for field in [
        "cron",
        "timezone",
        "task",
        "args",
        "priority",
        "max_attempts",
        "group",
        "retain_ms",
    ] {
        assert_eq!(view[field], daily[field], "{field}: {view}");
    }
    assert_eq!(
        (
            &view["name"],
            &view["queue"],
            &view["paused"],
            &view["last_run_at"],
            &view["last_job_id"]
        ),
        (
            &json!("weekdays"),
            &json!(q),
            &json!(false),
            &Value::Null,
            &Value::Null
        )
    );
    // 09:00 in Berlin on a weekday: 08:00 or 07:00 UTC.
    let next = view["next_run_at"].as_str().expect("next run");
    let zoned = next
        .parse::<jiff::Timestamp>()
        .expect("a time")
        .in_tz("Europe/Berlin")
        .expect("zone");
    assert_eq!((zoned.hour(), zoned.minute()), (9, 0), "{next}");
    assert!(!matches!(
        zoned.weekday(),
        jiff::civil::Weekday::Saturday | jiff::civil::Weekday::Sunday
    ));

    let minimal = put(
        &app,
        q,
        "a-first",
        json!({"cron": "@hourly", "task": "sync"}),
    )
    .await;
    assert_eq!(minimal.status, StatusCode::CREATED);
    assert_eq!(
        (
            &minimal.body["timezone"],
            &minimal.body["priority"],
            &minimal.body["args"],
            &minimal.body["retain_ms"]
        ),
        (&json!("UTC"), &json!(1), &json!({}), &json!(0))
    );
    let list = app.get(app.queue_url(q, "/schedules")).await.body;
    let names: Vec<&str> = list["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["a-first", "weekdays"]);

    let replaced = put(
        &app,
        q,
        "weekdays",
        json!({"cron": "30 7 * * *", "task": "report"}),
    )
    .await;
    assert_eq!(replaced.status, StatusCode::OK, "{replaced:?}");
    assert_eq!(replaced.body["cron"], "30 7 * * *");
    assert_eq!(replaced.body["group"], Value::Null);
    assert_eq!(schedule(&app, q, "weekdays").await.body, replaced.body);
    assert_eq!(
        schedule(&app, q, "nope").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedules_are_refused_naming_the_field_and_change_nothing() {
    let app = spawn_app_with(test_config()).await;
    let q = "refused";
    assert_eq!(
        put(&app, q, "kept", every_second()).await.status,
        StatusCode::CREATED
    );
    let mut paused = every_second();
    paused["paused"] = json!(true);
    put(&app, q, "kept", paused).await;
    let before = app.snapshot().await;
    let base = json!({"cron": "0 * * * *", "task": "t"});
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    let cases = [
        (with("cron", json!("61 * * * *")), "cron"),
        (with("cron", json!("* * * *")), "cron"),
        (with("cron", json!("@often")), "cron"),
        (with("cron", json!("0 0 31 2 *")), "cron"),
        (with("cron", json!("0 0 * * * * 2030")), "cron"),
        (with("timezone", json!("Mars/Olympus")), "timezone"),
        (with("task", json!("")), "task"),
        (with("priority", json!(256)), "priority"),
        (with("max_attempts", json!(0)), "max_attempts"),
        (with("group", json!("a b")), "group"),
        (with("retain_ms", json!(2_592_000_001_u64)), "retain_ms"),
        (with("priorty", json!(0)), "priorty"),
    ];
    for (body, field) in cases {
        for name in ["kept", "new-one"] {
            let answer = put(&app, q, name, body.clone()).await;
            assert_eq!(
                answer.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{body}: {answer:?}"
            );
            assert_eq!(answer.problem_code(), "validation_failed");
            assert!(
                answer.body["field"]
                    .as_str()
                    .is_some_and(|f| f.contains(field)),
                "{body}: {answer:?}"
            );
        }
    }
    let bad_name = put(&app, q, "a:b", base.clone()).await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST, "{bad_name:?}");
    let long_name = put(&app, q, &"n".repeat(101), base.clone()).await;
    assert_eq!(long_name.status, StatusCode::BAD_REQUEST, "{long_name:?}");
    let malformed = app
        .send(
            app.http
                .put(app.queue_url(q, "/schedules/kept"))
                .header("content-type", "application/json")
                .body("{\"cron\": "),
        )
        .await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    let unknown = app
        .post(app.queue_url(q, "/schedules/nope/pause"), json!(null))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused request changed Redis"
    );
    let names: BTreeSet<String> = app.get(app.queue_url(q, "/schedules")).await.body["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_owned())
        .collect();
    assert_eq!(names, BTreeSet::from(["kept".to_owned()]));
}

/// A replacement that read the schedule before a fire and writes after it
/// changes nothing: it would make that fire time due again. Played here by
/// calling the function with the last fire time from before the fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_raced_a_fire_changes_nothing() {
    let app = spawn_app_with(test_config()).await;
    let q = "raced";
    let created = put(&app, q, "tick", every_second()).await;
    let first = ms(&created.body, "next_run_at").expect("next run");
    until_fired_after(&app, q, "tick", first, 1).await;
    // Paused, it fires no more, so its last fire time stays put.
    let paused = app
        .post(app.queue_url(q, "/schedules/tick/pause"), json!(null))
        .await;
    let last = ms(&paused.body, "last_run_at").expect("fired");

    let keys = QueueKeys::new(&app.config.key_prefix, q);
    let mut con = redis_connection(&app.config.redis_url).await;
    let stored: String = redis::cmd("HGET")
        .arg(keys.key(Key::Schedules))
        .arg("tick")
        .query_async(&mut con)
        .await
        .expect("the definition");
    let mut other: Value = serde_json::from_str(&stored).expect("JSON");
    other["task"] = json!("other");
    let replace = |read_last: String| {
        let mut cmd = LIBRARY.call(Function::PutSchedule, &keys);
        cmd.arg("tick")
            .arg(other.to_string())
            .arg(last + 1000)
            .arg(read_last);
        cmd
    };
    for stale in [String::new(), (last - 1000).to_string()] {
        let answer: i64 = replace(stale)
            .query_async(&mut con)
            .await
            .expect("put_schedule");
        assert_eq!(
            answer, -1,
            "a replacement that read an older last fire time"
        );
        assert_eq!(schedule(&app, q, "tick").await.body, paused.body);
    }
    let answer: i64 = replace(last.to_string())
        .query_async(&mut con)
        .await
        .expect("put_schedule");
    assert_eq!(
        answer, 0,
        "a replacement that read the last fire time goes ahead"
    );
    assert_eq!(schedule(&app, q, "tick").await.body["task"], "other");
}
