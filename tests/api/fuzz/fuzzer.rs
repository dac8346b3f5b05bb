//! The fuzzer: a fixture of jobs to aim at, valid bodies for every target,
//! mutated probes, and the checks of each answer and of Redis after it.

use std::collections::BTreeMap;

use prioq::config::Config;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::mutate::{
    junk_body, junk_content_type, junk_id, junk_segment, mutate_bytes, mutate_value, serialize,
};
use super::probe::{Probe, Raw, clip, contract_violation, send};
use crate::support::rng::Rng;
use crate::support::{TestApp, spawn_app_with, test_config};

/// Failures described in full in the final message.
pub(super) const SHOWN_FAILURES: usize = 12;

/// Queue names the fixture keeps its jobs in; the fuzzed enqueues go to
/// `fz`, so a job they store never reaches the fixture's claims.
pub(super) const ENQUEUE_QUEUE: &str = "fz";
pub(super) const LEASE_QUEUE: &str = "fx";
pub(super) const DEAD_QUEUE: &str = "fd";
pub(super) const SETTINGS_QUEUE: &str = "fs";
/// Its schedules never fire during the test: the sweeper does not run.
pub(super) const SCHEDULE_QUEUE: &str = "fc";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    Enqueue,
    Batch,
    Claim,
    Ack,
    AckMany,
    Extend,
    Nack,
    Requeue,
    Settings,
    Schedule,
}

pub(super) const TARGETS: [Target; 10] = [
    Target::Enqueue,
    Target::Batch,
    Target::Claim,
    Target::Ack,
    Target::AckMany,
    Target::Extend,
    Target::Nack,
    Target::Requeue,
    Target::Settings,
    Target::Schedule,
];

/// A processing job with its lease, and a dead job.
#[derive(Debug, Clone)]
pub(super) struct Fixture {
    pub(super) leased: String,
    pub(super) token: String,
    pub(super) dead: String,
}

#[derive(Debug)]
pub(super) struct Fuzzer {
    pub(super) app: TestApp,
    pub(super) rng: Rng,
    pub(super) seed: u64,
    pub(super) fixture: Fixture,
    /// The prefix's keys as they were after the last accepted request.
    pub(super) baseline: BTreeMap<String, String>,
    pub(super) sent: usize,
    /// Answers by target and status, printed at the end.
    pub(super) tally: BTreeMap<(String, u16), usize>,
    pub(super) failures: Vec<String>,
}

impl Fuzzer {
    pub(super) async fn start(config: Config, seed: u64) -> Self {
        let app = spawn_app_with(config).await;
        Self::with_app(app, seed).await
    }

    pub(super) async fn with_app(app: TestApp, seed: u64) -> Self {
        let mut fuzzer = Self {
            app,
            rng: Rng::new(seed),
            seed,
            fixture: Fixture {
                leased: String::new(),
                token: String::new(),
                dead: String::new(),
            },
            baseline: BTreeMap::new(),
            sent: 0,
            tally: BTreeMap::new(),
            failures: Vec::new(),
        };
        fuzzer.refresh_fixture().await;
        fuzzer
    }

    /// Makes sure there is a job leased to us and a dead job, then takes
    /// the baseline.
    pub(super) async fn refresh_fixture(&mut self) {
        let app = &self.app;
        let still_leased = !self.fixture.leased.is_empty() && {
            let leased = app.job(LEASE_QUEUE, &self.fixture.leased).await.body;
            leased["state"] == "processing"
                && leased["lease_token"].as_str() == Some(self.fixture.token.as_str())
        };
        if !still_leased {
            app.enqueue(LEASE_QUEUE, json!({"task": "fixture", "args": {"n": 1}}))
                .await;
            let job = app
                .claim(
                    LEASE_QUEUE,
                    json!({"lease_ms": 600_000, "worker": "fixture"}),
                )
                .await
                .into_iter()
                .next()
                .expect("a job to lease");
            self.fixture.leased = job["id"].as_str().expect("id").to_owned();
            self.fixture.token = job["lease_token"].as_str().expect("token").to_owned();
        }
        let still_dead = !self.fixture.dead.is_empty()
            && app.job(DEAD_QUEUE, &self.fixture.dead).await.body["state"] == "dead";
        if !still_dead {
            app.enqueue(DEAD_QUEUE, json!({"task": "fixture-dead"}))
                .await;
            let job = app
                .claim(DEAD_QUEUE, json!({"lease_ms": 600_000}))
                .await
                .into_iter()
                .next()
                .expect("a job to kill");
            let id = job["id"].as_str().expect("id").to_owned();
            let answer = app
                .post(
                    app.queue_url(DEAD_QUEUE, &format!("/jobs/{id}/nack")),
                    json!({"lease_token": job["lease_token"], "dead": true, "error": "fixture"}),
                )
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            self.fixture.dead = id;
        }
        self.baseline = self.app.snapshot().await;
    }

    pub(super) fn path(&self, target: Target) -> String {
        let Fixture { leased, dead, .. } = &self.fixture;
        match target {
            Target::Enqueue => format!("/v1/queues/{ENQUEUE_QUEUE}/jobs"),
            Target::Batch => format!("/v1/queues/{ENQUEUE_QUEUE}/jobs/batch"),
            Target::Claim => format!("/v1/queues/{LEASE_QUEUE}/claim"),
            Target::Ack => format!("/v1/queues/{LEASE_QUEUE}/jobs/{leased}/ack"),
            Target::AckMany => format!("/v1/queues/{LEASE_QUEUE}/ack"),
            Target::Extend => format!("/v1/queues/{LEASE_QUEUE}/jobs/{leased}/extend"),
            Target::Nack => format!("/v1/queues/{LEASE_QUEUE}/jobs/{leased}/nack"),
            Target::Requeue => format!("/v1/queues/{DEAD_QUEUE}/dlq/{dead}/requeue"),
            Target::Settings => format!("/v1/queues/{SETTINGS_QUEUE}/settings"),
            Target::Schedule => format!("/v1/queues/{SCHEDULE_QUEUE}/schedules/nightly"),
        }
    }

    pub(super) fn valid_job(&mut self) -> Value {
        let n = self.rng.next() % 1000;
        json!({
            "task": "send_email",
            "args": {"to": "a@example.com", "list": [1, 2.5, null, true, "é"]},
            "priority": self.rng.below(256),
            "id": format!("fz-{n}"),
            "delay_ms": 0,
            "max_attempts": 5,
            "group": "tenant-1",
            "retain_ms": 600_000,
            "expires_in_ms": 600_000,
            "on_expiry": "drop",
            "dedup": {
                "key": format!("key-{}", n % 7),
                "ttl_ms": 1000,
                "mode": if n.is_multiple_of(2) { "drop" } else { "replace" },
            },
        })
    }

    pub(super) fn valid_body(&mut self, target: Target) -> Value {
        let Fixture { leased, token, .. } = self.fixture.clone();
        match target {
            Target::Enqueue => self.valid_job(),
            Target::Batch => json!({"jobs": [self.valid_job(), self.valid_job()]}),
            Target::Claim => {
                json!({"worker": "fuzz", "lease_ms": 600_000, "max_jobs": 1, "wait_ms": 0})
            }
            Target::Ack => json!({"lease_token": token, "result": {"sent": [1, "é"]}}),
            Target::AckMany => {
                json!({"jobs": [{"id": leased, "lease_token": token, "result": null}]})
            }
            Target::Extend => {
                json!({"lease_token": token, "lease_ms": 600_000, "progress": {"done": 0.5}})
            }
            Target::Nack => json!({
                "lease_token": token, "delay_ms": 0, "error": "boom", "dead": false, "priority": 4,
            }),
            Target::Requeue => json!({"priority": 3}),
            Target::Settings => json!({
                "paused": false, "max_in_flight": 10, "rate_limit": {"per_second": 5.5, "burst": 5},
                "group_weights": {"a": 2, "b": null}, "group_max_in_flight": 3,
                "retain_ms": 86_400_000,
            }),
            Target::Schedule => json!({
                "cron": "0 3 * * MON-FRI", "timezone": "Europe/Berlin", "task": "report",
                "args": {"kind": ["daily", 1, null]}, "priority": self.rng.below(256),
                "max_attempts": 5, "group": "ops", "retain_ms": 60_000, "paused": false,
            }),
        }
    }

    /// A mutated request for `target`.
    pub(super) fn probe(&mut self, target: Target) -> Probe {
        let valid = self.valid_body(target);
        let valid_bytes = serialize(&valid, &[]);
        let rng = &mut self.rng;
        let body = match rng.below(10) {
            0..=4 => {
                let mut value = valid;
                let mut raws = Vec::new();
                for _ in 0..=rng.below(2) {
                    mutate_value(rng, &mut value, &mut raws);
                }
                let mut body = serialize(&value, &raws);
                if rng.one_in(4) {
                    mutate_bytes(rng, &mut body);
                }
                body
            }
            5..=7 => {
                let mut body = valid_bytes;
                mutate_bytes(rng, &mut body);
                body
            }
            8 => junk_body(rng, &valid_bytes),
            // Sent as is: only the path, content type or method is off.
            _ => valid_bytes,
        };
        let mut probe = Probe::post(self.path(target), body);
        match target {
            Target::Settings => probe.method = Method::PATCH,
            Target::Schedule => probe.method = Method::PUT,
            _ => {}
        }
        if self.rng.one_in(6) {
            probe.content_type = junk_content_type(&mut self.rng);
        }
        if self.rng.one_in(6) {
            probe.path = self.mangle_path(target);
        }
        if self.rng.one_in(25) {
            probe.method = self
                .rng
                .pick(&[Method::PUT, Method::PATCH, Method::GET, Method::DELETE])
                .clone();
        }
        if target == Target::Claim {
            keep_claim_short(&mut probe);
        }
        probe
    }

    /// The target's path with its queue or id replaced by junk.
    pub(super) fn mangle_path(&mut self, target: Target) -> String {
        let path = self.path(target);
        let rng = &mut self.rng;
        let queue = match target {
            Target::Enqueue | Target::Batch => ENQUEUE_QUEUE,
            Target::Requeue => DEAD_QUEUE,
            Target::Settings => SETTINGS_QUEUE,
            Target::Schedule => SCHEDULE_QUEUE,
            _ => LEASE_QUEUE,
        };
        let id = match target {
            Target::Ack | Target::Extend | Target::Nack => Some(self.fixture.leased.as_str()),
            Target::Requeue => Some(self.fixture.dead.as_str()),
            _ => None,
        };
        match id {
            Some(id) if rng.one_in(2) => {
                path.replacen(&format!("/{id}/"), &format!("/{}/", junk_id(rng)), 1)
            }
            _ => path.replacen(
                &format!("/queues/{queue}/"),
                &format!("/queues/{}/", junk_segment(rng)),
                1,
            ),
        }
    }

    pub(super) fn random_query(&mut self) -> String {
        let rng = &mut self.rng;
        let values = [
            "",
            "0",
            "1",
            "50",
            "1000",
            "1001",
            "-1",
            "4294967296",
            "1e3",
            "1.5",
            "%2B5",
            "abc",
            "%FF",
            "%00",
            "%",
            "1.x",
            "-9223372036854775808.",
            "9223372036854775808.x",
            "x.1",
            ".",
            "1.%F0%9F%A6%80",
            "null",
            "[]",
        ];
        let keys = [
            "limit", "cursor", "limit", "cursor", "x", "", "LIMIT", "limit[]",
        ];
        let mut query = String::new();
        for i in 0..rng.below(4) {
            if i > 0 {
                query.push(*rng.pick(&['&', '&', ';']));
            }
            query.push_str(rng.choose(&keys));
            if !rng.one_in(6) {
                query.push('=');
            }
            query.push_str(rng.choose(&values));
        }
        if rng.one_in(5) {
            query.push_str(&"a".repeat(1000 + rng.below(8000)));
        }
        query
    }

    /// Sends `probe` and counts its answer.
    pub(super) async fn send(&mut self, label: &str, probe: &Probe) -> Raw {
        let raw = send(&self.app, probe).await;
        self.sent += 1;
        *self
            .tally
            .entry((label.to_owned(), raw.status.as_u16()))
            .or_default() += 1;
        raw
    }

    /// Sends `probe`, checks the answer against the contract, and checks
    /// that a rejected request (or any GET) changed nothing; answers what
    /// was answered.
    pub(super) async fn run(&mut self, label: &str, probe: Probe) -> Raw {
        let raw = self.send(label, &probe).await;
        if let Some(violation) = contract_violation(&raw, &self.app.config.key_prefix) {
            self.fail(&probe, &raw, &violation);
        }
        // Malformed JSON is 400 whatever it holds: a 422 is for bodies that
        // parse.
        if raw.status == StatusCode::UNPROCESSABLE_ENTITY
            && let Some(body) = &probe.body
            && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err()
        {
            self.fail(
                &probe,
                &raw,
                "a body that is not JSON answered 422, not 400",
            );
        }
        // And well-formed JSON is never called malformed: a value of the
        // wrong type is a 422 naming its field.
        if raw.status == StatusCode::BAD_REQUEST
            && let Some(body) = &probe.body
            && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
            && serde_json::from_slice::<Value>(&raw.body).is_ok_and(|problem| {
                problem["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("malformed JSON"))
            })
        {
            self.fail(
                &probe,
                &raw,
                "a body that is JSON was called malformed (400), not 422 naming the field",
            );
        }
        let accepted = raw.status.is_success();
        if accepted && probe.method != Method::GET {
            self.refresh_fixture().await;
            return raw;
        }
        let now = self.app.snapshot().await;
        if now != self.baseline {
            let diff = describe_diff(&self.baseline, &now);
            let what = if accepted {
                "a read"
            } else {
                "a rejected request"
            };
            self.fail(&probe, &raw, &format!("{what} changed Redis: {diff}"));
            self.baseline = now;
        }
        raw
    }

    pub(super) fn fail(&mut self, probe: &Probe, raw: &Raw, why: &str) {
        self.failures.push(format!(
            "#{}: {why}\n  request: {}\n  answer:  {}",
            self.sent,
            probe.describe(),
            raw.describe()
        ));
    }

    pub(super) fn finish(self, what: &str) {
        let tally: Vec<String> = self
            .tally
            .iter()
            .map(|((label, status), n)| format!("{label} {status}: {n}"))
            .collect();
        println!(
            "{what}: {} requests, seed {}; answers: {}",
            self.sent,
            self.seed,
            tally.join(", ")
        );
        if !self.failures.is_empty() {
            let shown: Vec<&String> = self.failures.iter().take(SHOWN_FAILURES).collect();
            panic!(
                "{what}: {} of {} requests broke the contract (replay with PRIOQ_FUZZ_SEED={}):\n{}",
                self.failures.len(),
                self.sent,
                self.seed,
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

/// A claim that would be accepted waits at most briefly: any `wait_ms` the
/// mutations left valid becomes 0 (other values are for the server to
/// refuse).
pub(super) fn keep_claim_short(probe: &mut Probe) {
    let Some(body) = &probe.body else { return };
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    if let Some(wait) = value.get_mut("wait_ms")
        && wait.as_u64().is_some_and(|ms| (1..=20_000).contains(&ms))
    {
        *wait = json!(0);
        probe.body = Some(serde_json::to_vec(&value).expect("a Value serializes"));
    }
}

pub(super) fn describe_diff(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> String {
    let mut out = Vec::new();
    for (key, value) in after {
        match before.get(key) {
            None => out.push(format!("added {key} = {}", clip(value, 200))),
            Some(old) if old != value => out.push(format!(
                "changed {key}: {} → {}",
                clip(old, 200),
                clip(value, 200)
            )),
            Some(_) => {}
        }
    }
    for key in before.keys().filter(|key| !after.contains_key(*key)) {
        out.push(format!("removed {key}"));
    }
    out.join("; ")
}

/// An instance whose sweeper stays out of the way: nothing but the
/// requests themselves changes Redis while they are checked.
pub(super) fn quiet_config() -> Config {
    let mut config = test_config();
    config.sweep_interval_ms = 3_600_000;
    config
}

impl Fuzzer {
    /// Like `start`, for an instance that wants `Bearer fuzz-token`: the
    /// fixture is set up through a client that sends it.
    pub(super) async fn start_with_token(config: Config, seed: u64) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer fuzz-token"));
        let mut app = spawn_app_with(config).await;
        app.http = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("client");
        let mut fuzzer = Self::with_app(app, seed).await;
        // From here on, requests carry only the Authorization the probe sets.
        fuzzer.app.http = reqwest::Client::new();
        fuzzer
    }
}
