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

mod fuzzer;
mod mutate;
mod names;
mod probe;

use clap::Parser;
use prioq::config::Config;
use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde_json::Value;

use crate::support::rng;
use crate::support::spawn_app_with;
use fuzzer::{DEAD_QUEUE, ENQUEUE_QUEUE, Fuzzer, TARGETS, describe_diff, quiet_config};
use mutate::junk_segment;
use probe::{Probe, clip, contract_violation, send};

/// Rounds of mutated requests against the write endpoints.
const ROUNDS: usize = 360;
/// Random query strings against the DLQ list.
const DLQ_ROUNDS: usize = 40;
/// Requests with wrong credentials against an instance with a token.
const AUTH_ROUNDS: usize = 60;

#[tokio::test]
async fn mutated_requests_get_problems_and_change_nothing() {
    let seed = rng::seed("PRIOQ_FUZZ_SEED");
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
    let seed = rng::seed("PRIOQ_FUZZ_SEED");
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
