//! Random and mutated requests against every write endpoint (enqueue,
//! batch enqueue, claim, ack, ack many, extend, nack, requeue) and the DLQ
//! list: byte flips, type swaps, huge and negative numbers, deep nesting,
//! invalid UTF-8, duplicate keys, NUL bytes, odd content types, junk path
//! segments and query strings.
//!
//! Whatever is sent, the answer is a 2xx, or a 4xx problem
//! (`application/problem+json`) with a `code` of the contract's table; never
//! a 5xx. A rejected request leaves every Redis key of the instance's prefix
//! exactly as it was: the keys are read before and after each request, and
//! a request that was accepted only moves the baseline.
//!
//! The generator is a xorshift64* seeded from `PRIOQ_FUZZ_SEED`, or from the
//! clock when that is unset; the seed is printed, and a failure replays with
//! `PRIOQ_FUZZ_SEED=<seed> cargo nextest run --test api -E 'test(/fuzz::/)'`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use prioq::config::Config;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{TestApp, spawn_app_with, test_config};

/// Rounds of mutated requests against the write endpoints.
const ROUNDS: usize = 360;
/// Random query strings against the DLQ list.
const DLQ_ROUNDS: usize = 40;
/// Requests with wrong credentials against an instance with a token.
const AUTH_ROUNDS: usize = 60;
/// Failures described in full in the final message.
const SHOWN_FAILURES: usize = 12;

/// The 4xx codes of the contract's table, by status.
const CODES: [(u16, &str); 9] = [
    (400, "invalid_request"),
    (401, "unauthorized"),
    (404, "not_found"),
    (409, "lease_lost"),
    (409, "conflict"),
    (405, "method_not_allowed"),
    (413, "payload_too_large"),
    (415, "unsupported_media_type"),
    (422, "validation_failed"),
];

// ---------------------------------------------------------------------------
// The generator.
// ---------------------------------------------------------------------------

/// xorshift64*: small, fast, and the same sequence for the same seed.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        // splitmix64 spreads small seeds over the state; the state is never 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self(z.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn choose<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn byte(&mut self) -> u8 {
        self.next().to_be_bytes()[0]
    }
}

/// `PRIOQ_FUZZ_SEED`, or the clock's nanoseconds.
fn seed() -> u64 {
    std::env::var("PRIOQ_FUZZ_SEED")
        .ok()
        .and_then(|seed| seed.trim().parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

// ---------------------------------------------------------------------------
// Requests and answers, as bytes.
// ---------------------------------------------------------------------------

/// One request, kept whole so a failure can show it.
#[derive(Debug, Clone)]
struct Probe {
    method: Method,
    /// Path and query, after the base URL.
    path: String,
    content_type: Option<HeaderValue>,
    authorization: Option<HeaderValue>,
    body: Option<Vec<u8>>,
}

impl Probe {
    fn post(path: String, body: Vec<u8>) -> Self {
        Self {
            method: Method::POST,
            path,
            content_type: Some(HeaderValue::from_static("application/json")),
            authorization: None,
            body: Some(body),
        }
    }

    fn get(path: String) -> Self {
        Self {
            method: Method::GET,
            path,
            content_type: None,
            authorization: None,
            body: None,
        }
    }

    fn describe(&self) -> String {
        let mut out = format!("{} {}", self.method, clip(&self.path, 300));
        if let Some(content_type) = &self.content_type {
            let _ = write!(out, "\n    Content-Type: {content_type:?}");
        }
        if let Some(authorization) = &self.authorization {
            let _ = write!(out, "\n    Authorization: {authorization:?}");
        }
        if let Some(body) = &self.body {
            let _ = write!(
                out,
                "\n    body ({} bytes): {}",
                body.len(),
                clip(&String::from_utf8_lossy(body), 400)
            );
        }
        out
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… ({} chars)", text.chars().count())
}

/// An answer whose body need not be JSON.
#[derive(Debug)]
struct Raw {
    status: StatusCode,
    content_type: Option<String>,
    www_authenticate: Option<String>,
    body: Vec<u8>,
}

impl Raw {
    fn describe(&self) -> String {
        format!(
            "{} {:?}: {}",
            self.status,
            self.content_type,
            clip(&String::from_utf8_lossy(&self.body), 400)
        )
    }
}

async fn send(app: &TestApp, probe: &Probe) -> Raw {
    let mut request = app
        .http
        .request(probe.method.clone(), app.url(&probe.path))
        .timeout(Duration::from_secs(30));
    if let Some(content_type) = &probe.content_type {
        request = request.header(CONTENT_TYPE, content_type.clone());
    }
    if let Some(authorization) = &probe.authorization {
        request = request.header(AUTHORIZATION, authorization.clone());
    }
    if let Some(body) = &probe.body {
        request = request.body(body.clone());
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|error| panic!("no answer to {}: {error}", probe.describe()));
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let status = response.status();
    let content_type = header(CONTENT_TYPE);
    let www_authenticate = header(WWW_AUTHENTICATE);
    let body = response
        .bytes()
        .await
        .unwrap_or_else(|error| panic!("answer to {} cut short: {error}", probe.describe()))
        .to_vec();
    Raw {
        status,
        content_type,
        www_authenticate,
        body,
    }
}

/// What the contract asks of every answer: no 5xx, no 1xx/3xx, and every
/// 4xx a problem with a known code that matches its status and leaks
/// nothing of the server's insides.
fn contract_violation(raw: &Raw, key_prefix: &str) -> Option<String> {
    let status = raw.status.as_u16();
    if raw.status.is_success() {
        return None;
    }
    if !raw.status.is_client_error() {
        return Some(format!("status {status} is not a 2xx or a 4xx"));
    }
    if raw.content_type.as_deref() != Some("application/problem+json") {
        return Some(format!(
            "a {status} answer with content type {:?}, not application/problem+json",
            raw.content_type
        ));
    }
    let problem: Value = match serde_json::from_slice(&raw.body) {
        Ok(problem) => problem,
        Err(error) => return Some(format!("the problem is not JSON: {error}")),
    };
    let Some(code) = problem["code"].as_str() else {
        return Some("the problem has no string `code`".into());
    };
    if !CODES.iter().any(|(s, c)| *s == status && *c == code) {
        return Some(format!(
            "status {status} with code `{code}`: not a pair of the contract's table"
        ));
    }
    if problem["status"] != json!(status) {
        return Some(format!("`status` member {} ≠ {status}", problem["status"]));
    }
    for member in ["type", "title", "detail"] {
        if !problem[member].is_string() {
            return Some(format!("the problem has no string `{member}`"));
        }
    }
    let detail = problem["detail"].as_str().unwrap_or_default();
    for leak in [key_prefix, "panicked", "ERR ", "stack backtrace", "src/"] {
        if detail.contains(leak) {
            return Some(format!("`detail` leaks {leak:?}: {detail}"));
        }
    }
    if status == 401 && raw.www_authenticate.as_deref() != Some("Bearer") {
        return Some(format!(
            "401 without `WWW-Authenticate: Bearer` (got {:?})",
            raw.www_authenticate
        ));
    }
    None
}

// ---------------------------------------------------------------------------
// What to mutate.
// ---------------------------------------------------------------------------

/// Queue names the fixture keeps its jobs in; the fuzzed enqueues go to
/// `fz`, so a job they store never reaches the fixture's claims.
const ENQUEUE_QUEUE: &str = "fz";
const LEASE_QUEUE: &str = "fx";
const DEAD_QUEUE: &str = "fd";
const SETTINGS_QUEUE: &str = "fs";
/// Its schedules never fire during the test: the sweeper does not run.
const SCHEDULE_QUEUE: &str = "fc";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
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

const TARGETS: [Target; 10] = [
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
struct Fixture {
    leased: String,
    token: String,
    dead: String,
}

/// Path segments and bodies no request is ever allowed to use unharmed.
fn junk_segment(rng: &mut Rng) -> String {
    let fixed = [
        "",
        "_x",
        "-x",
        ".x",
        "a%20b",
        "%FF",
        "%00",
        "%2F",
        "a%2Fb",
        "%C3%A9",
        "%ZZ",
        "%",
        "x%0Ay",
        "x%0D%0Ay",
        "%7Bfz%7D",
        "fz:x",
        "a*",
        "%2e%2e",
        "..",
        "%E2%80%AE",
        "%F0%9F%A6%80",
        "%C0%AF",
        "%ED%A0%80",
    ];
    match rng.below(5) {
        0 => "a".repeat(129),
        1 => "a".repeat(1000 + rng.below(9000)),
        2 => {
            let len = 1 + rng.below(40);
            (0..len).map(|_| format!("%{:02X}", rng.byte())).collect()
        }
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

/// Ids that are valid but belong to no job, and junk.
fn junk_id(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => format!("nope-{}", rng.next()),
        1 => "x".repeat(129),
        _ => junk_segment(rng),
    }
}

/// A value of some type, often the wrong one, often at the edge of a range.
fn weird_value(rng: &mut Rng) -> Value {
    match rng.below(24) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(0),
        4 => json!(-1),
        5 => json!(i64::MIN),
        6 => json!(u64::MAX),
        7 => json!(1.5),
        8 => json!(255.0),
        9 => json!(256),
        10 => json!(1e308),
        11 => json!(-0.0),
        12 => json!(""),
        13 => json!("x"),
        14 => json!("é".repeat(201)),
        15 => json!("a\u{0}b"),
        16 => json!("日本語 🦀 \u{202E}"),
        17 => json!([]),
        18 => json!({}),
        19 => json!([1, "two", null]),
        20 => json!({"a": {"b": [1]}}),
        21 => json!(if rng.one_in(2) {
            "z".repeat(5000)
        } else {
            "é".repeat(200)
        }),
        22 => json!(43_200_001),
        _ => json!(2_592_000_001_u64),
    }
}

/// JSON text no `Value` can hold (or hold as written): it goes into the
/// serialized body in place of a marker string.
fn raw_json(rng: &mut Rng) -> String {
    let fixed = [
        "1e400",
        "-1e400",
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "18446744073709551616",
        "-9223372036854775809",
        "1E2",
        "1.0e-400",
        "-0",
        "01",
        "NaN",
        "Infinity",
        "+1",
        ".5",
        "0x10",
        r#""\ud800""#,
        r#""\udfff\ud800""#,
        r#""\u0000""#,
        r#""\uZZZZ""#,
        r#""\x""#,
        "tru",
        "nul",
    ];
    match rng.below(6) {
        0 => {
            let depth = *rng.pick(&[129, 1000, 10_000]);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth))
        }
        1 => {
            let depth = *rng.pick(&[129, 1000, 5000]);
            format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
        }
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

const RAW_MARKER: &str = "\u{1}raw\u{1}";

/// One structural change somewhere in `value`.
fn mutate_value(rng: &mut Rng, value: &mut Value, raws: &mut Vec<String>) {
    // Pick a random path down the value, sometimes stopping early, as a
    // JSON pointer.
    let mut pointer = String::new();
    let mut at = &*value;
    loop {
        let step = match at {
            Value::Object(map) if !map.is_empty() && !rng.one_in(3) => map
                .iter()
                .nth(rng.below(map.len()))
                .map(|(key, child)| (key.replace('~', "~0").replace('/', "~1"), child)),
            Value::Array(items) if !items.is_empty() && !rng.one_in(3) => {
                let i = rng.below(items.len());
                Some((i.to_string(), &items[i]))
            }
            _ => None,
        };
        let Some((segment, child)) = step else { break };
        pointer.push('/');
        pointer.push_str(&segment);
        at = child;
    }
    let node = value
        .pointer_mut(&pointer)
        .expect("the pointer was just walked");
    let fields = [
        "task",
        "args",
        "priority",
        "id",
        "delay_ms",
        "max_attempts",
        "jobs",
        "worker",
        "lease_ms",
        "max_jobs",
        "wait_ms",
        "lease_token",
        "error",
        "dead",
        "group",
        "paused",
        "max_in_flight",
        "rate_limit",
        "per_second",
        "burst",
        "group_weights",
        "group_max_in_flight",
        "retain_ms",
        "result",
        "progress",
        "extra",
        "",
        "TASK",
    ];
    match rng.below(6) {
        0 | 1 => *node = weird_value(rng),
        2 => {
            raws.push(raw_json(rng));
            *node = json!(RAW_MARKER);
        }
        3 => {
            if let Value::Object(map) = node
                && !map.is_empty()
            {
                let key = map.keys().nth(rng.below(map.len())).cloned();
                if let Some(key) = key {
                    map.remove(&key);
                }
            } else {
                *node = Value::Null;
            }
        }
        4 => {
            if let Value::Object(map) = node {
                map.insert((*rng.pick(&fields)).to_owned(), weird_value(rng));
            } else {
                *node = json!([node.take()]);
            }
        }
        _ => *node = json!({ *rng.pick(&fields): node.take() }),
    }
}

fn serialize(value: &Value, raws: &[String]) -> Vec<u8> {
    let mut text = serde_json::to_string(value).expect("a Value serializes");
    let marker = serde_json::to_string(RAW_MARKER).expect("a string serializes");
    for raw in raws {
        text = text.replacen(&marker, raw, 1);
    }
    text.into_bytes()
}

/// One to three byte-level changes.
fn mutate_bytes(rng: &mut Rng, body: &mut Vec<u8>) {
    let special = [
        0x00, 0xFF, 0xFE, 0xC3, 0x80, 0xC0, 0xED, b'"', b'\\', b'{', b'}', b'[', b']', b',', b':',
        b'0', b'-', b'e', b'.', b' ', b'\n',
    ];
    for _ in 0..=rng.below(3) {
        let len = body.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                body[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                body[i] = *rng.pick(&special);
            }
            2 => {
                let i = rng.below(len + 1);
                body.insert(i, *rng.pick(&special));
            }
            3 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(8)).min(len);
                body.drain(start..end);
            }
            4 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(16)).min(len);
                let chunk = body[start..end].to_vec();
                let at = rng.below(len + 1);
                body.splice(at..at, chunk);
            }
            5 if len > 0 => body.truncate(rng.below(len)),
            6 => {
                // Invalid UTF-8 inside a string.
                if let Some(at) = body.iter().position(|b| *b == b'"') {
                    let junk: &[u8] =
                        rng.choose(&[&[0xFF, 0xFE][..], &[0xC3][..], &[0xED, 0xA0, 0x80][..]]);
                    body.splice(at + 1..at + 1, junk.iter().copied());
                }
            }
            7 => {
                // A duplicate key right after the first brace.
                if let Some(at) = body.iter().position(|b| *b == b'{') {
                    let dup: &str = rng.choose(&[
                        r#""task":"dup","#,
                        r#""lease_token":"dup","#,
                        r#""jobs":[],"#,
                        r#""priority":1,"#,
                    ]);
                    body.splice(at + 1..at + 1, dup.bytes());
                }
            }
            _ => {
                // A raw NUL byte (a control character JSON forbids unescaped).
                let i = rng.below(len + 1);
                body.insert(i, 0);
            }
        }
    }
}

/// A whole body that is no request of any endpoint.
fn junk_body(rng: &mut Rng, valid: &[u8]) -> Vec<u8> {
    match rng.below(12) {
        0 => Vec::new(),
        1 => b"null".to_vec(),
        2 => b"[]".to_vec(),
        3 => b"\"\"".to_vec(),
        4 => b"0".to_vec(),
        5 => b"{".to_vec(),
        6 => (0..1 + rng.below(64)).map(|_| rng.byte()).collect(),
        7 => {
            let depth = *rng.pick(&[200, 10_000]);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
        }
        8 => {
            let mut body = b"\xEF\xBB\xBF".to_vec();
            body.extend_from_slice(valid);
            body
        }
        9 => {
            // Above the default 1 MiB limit.
            let mut body = valid.to_vec();
            body.splice(1..1, std::iter::repeat_n(b' ', (1 << 20) + 10));
            body
        }
        10 => {
            let mut body = valid.to_vec();
            body.extend_from_slice(b" {}");
            body
        }
        _ => "{\"task\":\"\u{0}\u{7f}\u{FFFF}\"}".as_bytes().to_vec(),
    }
}

fn junk_content_type(rng: &mut Rng) -> Option<HeaderValue> {
    let fixed: [&[u8]; 16] = [
        b"",
        b"text/plain",
        b"application/x-www-form-urlencoded",
        b"application/json; charset=utf-8",
        b"APPLICATION/JSON",
        b"application/problem+json",
        b"application/vnd.prioq+json",
        b"application/jsonp",
        b"application/json-patch+json",
        b"multipart/form-data; boundary=x",
        b"application/json;;;",
        b"json",
        b"application/\xff",
        b"*/*",
        b"text/json",
        b"application/xml",
    ];
    if rng.one_in(8) {
        return None;
    }
    HeaderValue::from_bytes(rng.choose(&fixed)).ok()
}

// ---------------------------------------------------------------------------
// The fuzzer.
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct Fuzzer {
    app: TestApp,
    rng: Rng,
    seed: u64,
    fixture: Fixture,
    /// The prefix's keys as they were after the last accepted request.
    baseline: BTreeMap<String, String>,
    sent: usize,
    /// Answers by target and status, printed at the end.
    tally: BTreeMap<(String, u16), usize>,
    failures: Vec<String>,
}

impl Fuzzer {
    async fn start(config: Config, seed: u64) -> Self {
        let app = spawn_app_with(config).await;
        Self::with_app(app, seed).await
    }

    async fn with_app(app: TestApp, seed: u64) -> Self {
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
    async fn refresh_fixture(&mut self) {
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

    fn path(&self, target: Target) -> String {
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

    fn valid_job(&mut self) -> Value {
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
        })
    }

    fn valid_body(&mut self, target: Target) -> Value {
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
    fn probe(&mut self, target: Target) -> Probe {
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
    fn mangle_path(&mut self, target: Target) -> String {
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

    fn random_query(&mut self) -> String {
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
    async fn send(&mut self, label: &str, probe: &Probe) -> Raw {
        let raw = send(&self.app, probe).await;
        self.sent += 1;
        *self
            .tally
            .entry((label.to_owned(), raw.status.as_u16()))
            .or_default() += 1;
        raw
    }

    /// Sends `probe`, checks the answer against the contract, and checks
    /// that a rejected request (or any GET) changed nothing.
    async fn run(&mut self, label: &str, probe: Probe) {
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
        let accepted = raw.status.is_success();
        if accepted && probe.method != Method::GET {
            self.refresh_fixture().await;
            return;
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
    }

    fn fail(&mut self, probe: &Probe, raw: &Raw, why: &str) {
        self.failures.push(format!(
            "#{}: {why}\n  request: {}\n  answer:  {}",
            self.sent,
            probe.describe(),
            raw.describe()
        ));
    }

    fn finish(self, what: &str) {
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
fn keep_claim_short(probe: &mut Probe) {
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

fn describe_diff(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> String {
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
fn quiet_config() -> Config {
    let mut config = test_config();
    config.sweep_interval_ms = 3_600_000;
    config
}

// ---------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn mutated_requests_get_problems_and_change_nothing() {
    let seed = seed();
    println!("fuzz seed {seed} (set PRIOQ_FUZZ_SEED to replay)");
    let mut fuzzer = Fuzzer::start(quiet_config(), seed).await;

    for _ in 0..ROUNDS {
        let target = *fuzzer.rng.pick(&TARGETS);
        let probe = fuzzer.probe(target);
        fuzzer.run(&format!("{target:?}"), probe).await;
    }
    for _ in 0..DLQ_ROUNDS {
        let queue = if fuzzer.rng.one_in(5) {
            junk_segment(&mut fuzzer.rng)
        } else {
            DEAD_QUEUE.to_owned()
        };
        let query = fuzzer.random_query();
        let probe = Probe::get(format!("/v1/queues/{queue}/dlq?{query}"));
        fuzzer.run("DeadJobs", probe).await;
    }

    // Every target once more with a body that is surely refused, so each
    // has its rejection checked whatever the seed.
    for target in TARGETS {
        let mut probe = Probe::post(fuzzer.path(target), b"{\"x\":".to_vec());
        fuzzer.run(&format!("{target:?}"), probe.clone()).await;
        probe.body =
            Some(format!("{{\"args\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes());
        probe.content_type = Some(HeaderValue::from_static("text/plain"));
        fuzzer.run(&format!("{target:?}"), probe).await;
    }

    for path in ["/healthz", "/readyz"] {
        let answer = fuzzer.app.get(fuzzer.app.url(path)).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{path} after the fuzz: {answer:?}"
        );
    }
    fuzzer.finish("mutated requests");
}

#[tokio::test]
async fn wrong_credentials_get_401_and_change_nothing() {
    let seed = seed();
    println!("fuzz seed {seed} (set PRIOQ_FUZZ_SEED to replay)");
    let mut config = quiet_config();
    config.api_tokens = Config::parse_from(["prioq", "--api-tokens", "fuzz-token"]).api_tokens;
    let mut fuzzer = Fuzzer::start_with_token(config, seed).await;
    let wrong: [&[u8]; 14] = [
        b"",
        b"Bearer",
        b"Bearer ",
        b"Bearer fuzz-toke",
        b"Bearer fuzz-token2",
        b"Bearer FUZZ-TOKEN",
        b"Basic ZnV6ei10b2tlbjo=",
        b"Token fuzz-token",
        b"Bearerfuzz-token",
        b"fuzz-token",
        b"Bearer fuzz\xfftoken",
        b"Bearer \xff\xfe",
        b"Bearer fuzz-token\tx",
        b"Bearer ,fuzz-token",
    ];
    for _ in 0..AUTH_ROUNDS {
        let target = *fuzzer.rng.pick(&TARGETS);
        let mut probe = fuzzer.probe(target);
        probe.authorization = match fuzzer.rng.below(4) {
            0 => None,
            1 => {
                let len = 1 + fuzzer.rng.below(60);
                let bytes: Vec<u8> = (0..len).map(|_| 0x20 + fuzzer.rng.byte() % 0x5F).collect();
                HeaderValue::from_bytes(&bytes).ok()
            }
            _ => HeaderValue::from_bytes(fuzzer.rng.choose(&wrong)).ok(),
        };
        let raw = fuzzer.send(&format!("{target:?}"), &probe).await;
        // Auth comes first: whatever the body, path or content type, a /v1
        // route answers 401 (a path outside every route may answer 404).
        let routed =
            raw.status != StatusCode::NOT_FOUND && raw.status != StatusCode::METHOD_NOT_ALLOWED;
        if routed && raw.status != StatusCode::UNAUTHORIZED {
            fuzzer.fail(
                &probe,
                &raw,
                "a request without the right token was not refused with 401",
            );
        }
        if let Some(violation) = contract_violation(&raw, &fuzzer.app.config.key_prefix) {
            fuzzer.fail(&probe, &raw, &violation);
        }
        let now = fuzzer.app.snapshot().await;
        if now != fuzzer.baseline {
            let diff = describe_diff(&fuzzer.baseline, &now);
            fuzzer.fail(
                &probe,
                &raw,
                &format!("a refused request changed Redis: {diff}"),
            );
            fuzzer.baseline = now;
        }
    }
    fuzzer.finish("wrong credentials");
}

impl Fuzzer {
    /// Like `start`, for an instance that wants `Bearer fuzz-token`: the
    /// fixture is set up through a client that sends it.
    async fn start_with_token(config: Config, seed: u64) -> Self {
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

/// `args` is kept as sent, but a job nested 10,000 deep is one no worker
/// can read back: serde_json stops at 128 levels, Python's json at about
/// 1,000, so every claim answer that carries it fails to parse and the job
/// can be neither acked nor nacked. It must be refused up front, as a
/// 10,000-deep `task` is (the contract allows 400, 413 or 422), and nothing
/// may be stored.
#[tokio::test]
async fn deeply_nested_args_are_refused() {
    let app = spawn_app_with(quiet_config()).await;
    let before = app.snapshot().await;
    let deep_arrays = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_objects = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    let mut failures = Vec::new();
    for (what, args) in [
        ("10,000 nested arrays", &deep_arrays),
        ("10,000 nested objects", &deep_objects),
    ] {
        for (path, body) in [
            (
                format!("/v1/queues/{ENQUEUE_QUEUE}/jobs"),
                format!(r#"{{"task":"deep","args":{args}}}"#),
            ),
            (
                format!("/v1/queues/{ENQUEUE_QUEUE}/jobs/batch"),
                format!(r#"{{"jobs":[{{"task":"deep","args":{args}}}]}}"#),
            ),
        ] {
            let probe = Probe::post(path, body.into_bytes());
            let raw = send(&app, &probe).await;
            let refused = matches!(raw.status.as_u16(), 400 | 413 | 422);
            if !refused {
                failures.push(format!(
                    "{what} in args: expected 400/413/422, got {}\n  request: {}",
                    raw.describe(),
                    probe.describe()
                ));
            } else if let Some(violation) = contract_violation(&raw, &app.config.key_prefix) {
                failures.push(format!("{what} in args: {violation}"));
            }
        }
    }
    let after = app.snapshot().await;
    if after != before {
        failures.push(format!(
            "Redis changed: {}",
            clip(&describe_diff(&before, &after), 600)
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whatever `args` the service accepts, it must be able to hand back as
/// JSON that its own JSON library (serde_json, what a Rust worker uses)
/// reads: otherwise the job is a poison pill for every claim that carries
/// it. `task` already refuses a lone surrogate (400); `args` must refuse it
/// too, and numbers out of every float's range, and nesting deeper than a
/// reader takes; or accept only what reads back.
#[tokio::test]
async fn accepted_args_read_back_as_json() {
    let app = spawn_app_with(quiet_config()).await;
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let cases = [
        ("a lone leading surrogate", r#""\ud800""#.to_owned()),
        ("a lone trailing surrogate", r#"{"k":"\udc00"}"#.to_owned()),
        ("a number above f64's range", "1e400".to_owned()),
        ("a number below f64's range", "[-1e400]".to_owned()),
        ("arrays nested 200 deep", deep),
    ];
    let mut failures = Vec::new();
    for (what, args) in cases {
        let body = format!(r#"{{"task":"poison","args":{args}}}"#);
        let probe = Probe::post(
            format!("/v1/queues/{ENQUEUE_QUEUE}/jobs"),
            body.into_bytes(),
        );
        let raw = send(&app, &probe).await;
        if raw.status.is_client_error() {
            if let Some(violation) = contract_violation(&raw, &app.config.key_prefix) {
                failures.push(format!("{what}: {violation}"));
            }
            continue;
        }
        let enqueued = serde_json::from_slice::<Value>(&raw.body);
        let read_back = match &enqueued {
            Ok(job) => {
                let id = job["id"].as_str().unwrap_or_default().to_owned();
                let get = send(
                    &app,
                    &Probe::get(format!("/v1/queues/{ENQUEUE_QUEUE}/jobs/{id}")),
                )
                .await;
                serde_json::from_slice::<Value>(&get.body).map(|_| ())
            }
            Err(_) => Ok(()),
        };
        let readable = match (&enqueued, read_back) {
            (Err(error), _) => Err(error.to_string()),
            (Ok(_), Err(error)) => Err(error.to_string()),
            (Ok(_), Ok(())) => Ok(()),
        };
        if let Err(error) = readable {
            failures.push(format!(
                "{what}: accepted ({}), but the job it answers with is not JSON serde_json reads: {error}\n  request: {}\n  answer:  {}",
                raw.status,
                probe.describe(),
                raw.describe()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
