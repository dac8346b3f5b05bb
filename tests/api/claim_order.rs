//! A claim of N jobs takes exactly the N jobs that N claims of one job
//! would have taken, one after the other: checked on random mixes of
//! priorities, groups, weights, caps, group rate limits, the bulk floor,
//! shards and `max_jobs`, each against a copy of the same queue claimed
//! one job at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use prioq::queue::store::keys::QueueKeys;
use prioq::queue::store::record::body;
use prioq::queue::{
    Ack, AckOutcome, Admission, ClaimEntry, Exchange, Exchanged, JobOptions, OutgoingJob, Route,
    exchange_answers, exchange_command,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::{configure, enqueue_many};
use crate::support::{TestApp, redis, redis_connection, spawn_app_with, test_config};

/// A random queue: its settings and its jobs, made from `seed`.
#[derive(Debug)]
struct Mix {
    settings: Value,
    /// Enqueue requests in order: (id, priority, group) per job.
    batches: Vec<Vec<(String, u8, Option<String>)>>,
}

impl Mix {
    fn new(rng: &mut StdRng, shards: u32) -> Self {
        let groups = ["g0", "g1", "g2", "g3"];
        let mut weights = serde_json::Map::new();
        for group in groups {
            if rng.random_bool(0.4) {
                weights.insert(group.into(), json!(rng.random_range(1..=4)));
            }
        }
        let cap = rng
            .random_bool(0.4)
            .then(|| rng.random_range(1..=3) * u64::from(shards));
        // A bucket that never refills within a case: its burst is all a
        // group gets.
        let group_rate = rng
            .random_bool(0.3)
            .then(|| json!({"per_second": 0.001, "burst": rng.random_range(1..=4) * shards}));
        let settings = json!({
            "shards": shards,
            "group_weights": weights,
            "group_max_in_flight": cap,
            "group_rate_limit": group_rate,
        });
        let mut batches = Vec::new();
        let mut n = 0;
        for _ in 0..rng.random_range(3..=8) {
            let batch = (0..rng.random_range(1..=12))
                .map(|_| {
                    n += 1;
                    let group = rng
                        .random_bool(0.75)
                        .then(|| groups[rng.random_range(0..groups.len())].to_owned());
                    (format!("j{n}"), rng.random_range(0..=3), group)
                })
                .collect();
            batches.push(batch);
        }
        Self { settings, batches }
    }

    async fn make(&self, app: &TestApp, queue: &str) {
        configure(app, queue, self.settings.clone()).await;
        for batch in &self.batches {
            let jobs: Vec<Value> = batch
                .iter()
                .map(|(id, priority, group)| {
                    json!({"task": "t", "id": id, "priority": priority, "group": group})
                })
                .collect();
            let answer = app
                .post(app.queue_url(queue, "/jobs/batch"), json!({"jobs": jobs}))
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        }
    }
}

/// The leases a queue has handed out and not yet acked: id → token.
type Leases = BTreeMap<String, String>;

fn take_leases(jobs: &[Value], leases: &mut Leases) -> Vec<String> {
    jobs.iter()
        .map(|job| {
            let id = job["id"].as_str().expect("id").to_owned();
            leases.insert(
                id.clone(),
                job["lease_token"].as_str().expect("token").into(),
            );
            id
        })
        .collect()
}

async fn ack(app: &TestApp, queue: &str, leases: &mut Leases, ids: &[String]) {
    let jobs = ack_entries(leases, ids);
    let answer = app
        .post(app.queue_url(queue, "/ack"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    for result in answer.body["results"].as_array().expect("results") {
        assert_eq!(result["status"], 204, "{answer:?}");
    }
}

/// The ack entries of `ids`, with their tokens taken out of `leases`.
fn ack_entries(leases: &mut Leases, ids: &[String]) -> Vec<Value> {
    ids.iter()
        .map(|id| json!({"id": id, "lease_token": leases.remove(id).expect("leased")}))
        .collect()
}

/// Claims with `body` and the acks `ids` in it; answers the jobs leased.
async fn claim_acking(
    app: &TestApp,
    queue: &str,
    mut body: Value,
    leases: &mut Leases,
    ids: &[String],
) -> Vec<Value> {
    body["ack"] = json!(ack_entries(leases, ids));
    let answer = app.post(app.queue_url(queue, "/claim"), body).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    for acked in answer.body["acked"].as_array().expect("acked") {
        assert_eq!(acked["status"], 204, "{answer:?}");
    }
    answer.body["jobs"].as_array().expect("jobs").clone()
}

/// Runs one random case: the same queue twice, claimed in claims of
/// random sizes on one copy and one job at a time on the other, with the
/// same acks between the claims (alone, or in the next claim); the two
/// must hand out the same jobs in the same order.
async fn check_case(app: &TestApp, seed: u64, shards: u32) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mix = Mix::new(&mut rng, shards);
    let (many, ones) = (format!("many-{seed}"), format!("ones-{seed}"));
    mix.make(app, &many).await;
    mix.make(app, &ones).await;
    let (mut many_leases, mut ones_leases) = (Leases::new(), Leases::new());
    // Acks to send with the next claim.
    let mut acks: Vec<String> = Vec::new();
    let mut stalls = 0;
    for step in 0.. {
        let max_jobs = rng.random_range(1..=7);
        let body = json!({"max_jobs": max_jobs, "lease_ms": 60_000});
        let jobs = claim_acking(app, &many, body, &mut many_leases, &acks).await;
        let taken = take_leases(&jobs, &mut many_leases);
        let mut one_by_one = Vec::new();
        for n in 0..max_jobs {
            let body = json!({"max_jobs": 1, "lease_ms": 60_000});
            let with = if n == 0 { acks.as_slice() } else { &[] };
            let jobs = claim_acking(app, &ones, body, &mut ones_leases, with).await;
            if jobs.is_empty() {
                break;
            }
            one_by_one.extend(take_leases(&jobs, &mut ones_leases));
        }
        acks.clear();
        assert_eq!(
            taken, one_by_one,
            "seed {seed}, {shards} shards, step {step}: a claim of {max_jobs} against claims of one; {mix:?}"
        );
        // Some of the jobs in flight end, freeing their groups' caps:
        // acked alone now, or with the next claim.
        let done: Vec<String> = many_leases
            .keys()
            .filter(|_| rng.random_bool(0.5))
            .cloned()
            .collect();
        if rng.random_bool(0.5) {
            acks = done;
        } else if !done.is_empty() {
            ack(app, &many, &mut many_leases, &done).await;
            ack(app, &ones, &mut ones_leases, &done).await;
        }
        if taken.is_empty() && acks.is_empty() {
            if many_leases.is_empty() {
                break;
            }
            stalls += 1;
            assert!(stalls < 100, "seed {seed}: the queue never drained");
        }
    }
}

/// Seeds of the cases a test runs; a failing one is named in its message.
const CASES: std::ops::Range<u64> = 0..24;

async fn check_cases(bulk_floor: f64, shards: u32) {
    let mut config = test_config();
    config.bulk_floor = bulk_floor;
    let app = spawn_app_with(config).await;
    for seed in CASES {
        check_case(&app, seed, shards).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_n_takes_what_n_claims_of_one_take_with_groups_weights_and_caps() {
    check_cases(0.0, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_n_takes_what_n_claims_of_one_take_with_the_bulk_floor() {
    check_cases(0.25, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_n_takes_what_n_claims_of_one_take_on_a_sharded_queue() {
    check_cases(0.0, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_n_takes_what_n_claims_of_one_take_on_a_sharded_queue_with_the_floor() {
    check_cases(0.25, 2).await;
}

fn classes_of(jobs: &[Value]) -> Vec<(u64, Option<String>)> {
    jobs.iter()
        .map(|job| {
            (
                job["priority"].as_u64().expect("priority"),
                job["group"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn priority_comes_first_in_a_claim_of_many_whatever_the_groups() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    enqueue_many(&app, "q", Some("A"), 5, "a5-", 20).await;
    enqueue_many(&app, "q", Some("B"), 1, "b1-", 3).await;
    enqueue_many(&app, "q", None, 3, "n3-", 2).await;
    enqueue_many(&app, "q", Some("A"), 0, "a0-", 2).await;
    let mut handed = Vec::new();
    for _ in 0..3 {
        handed.extend(classes_of(&app.claim("q", json!({"max_jobs": 3})).await));
    }
    let a = |p| (p, Some("A".to_owned()));
    let b = (1, Some("B".to_owned()));
    assert_eq!(
        handed,
        [
            a(0),
            a(0),
            b.clone(),
            b.clone(),
            b,
            (3, None),
            (3, None),
            a(5),
            a(5)
        ]
    );
}

#[tokio::test]
async fn weights_hold_in_claims_of_several_jobs() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(&app, "q", json!({"group_weights": {"heavy": 3}})).await;
    enqueue_many(&app, "q", Some("heavy"), 1, "h-", 300).await;
    enqueue_many(&app, "q", Some("light"), 1, "l-", 300).await;
    let mut heavy = 0;
    let mut handed = 0;
    for max_jobs in [1, 2, 3].into_iter().cycle() {
        let jobs = app.claim("q", json!({"max_jobs": max_jobs})).await;
        for job in jobs.iter().take(200 - handed) {
            heavy += usize::from(job["group"] == "heavy");
        }
        handed = (handed + jobs.len()).min(200);
        if handed == 200 {
            break;
        }
    }
    // A weight of 3 against 1 is three jobs in four.
    assert!((142..=158).contains(&heavy), "heavy got {heavy} of 200");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_sent_together_take_the_jobs_claims_of_one_take() {
    let mut config = test_config();
    config.bulk_floor = 0.2;
    let app = spawn_app_with(config).await;
    for seed in 100..110 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mix = Mix::new(&mut rng, 1);
        let (many, ones) = (format!("many-{seed}"), format!("ones-{seed}"));
        mix.make(&app, &many).await;
        mix.make(&app, &ones).await;
        let sizes: Vec<u32> = (0..8).map(|_| rng.random_range(1..=4)).collect();
        let claims = sizes
            .iter()
            .map(|max_jobs| app.claim(&many, json!({"max_jobs": max_jobs, "lease_ms": 60_000})));
        let answers = futures_util::future::join_all(claims).await;
        let together: BTreeSet<String> = answers
            .iter()
            .flatten()
            .map(|job| job["id"].as_str().expect("id").to_owned())
            .collect();
        let mut one_by_one = BTreeSet::new();
        for _ in 0..together.len() {
            let jobs = app
                .claim(&ones, json!({"max_jobs": 1, "lease_ms": 60_000}))
                .await;
            one_by_one.extend(
                jobs.iter()
                    .map(|job| job["id"].as_str().expect("id").to_owned()),
            );
        }
        assert_eq!(together, one_by_one, "seed {seed}: {mix:?}");
    }
}

/// A claim of one job under a 60 s lease, acking `acks` first, as a
/// lane puts it in a call of the `exchange` function.
fn claim_of_one(acks: Vec<Ack>) -> Exchange {
    Exchange::Claim(Arc::new(ClaimEntry {
        picked: Vec::new(),
        lease_ms: 60_000,
        max_jobs: 1,
        worker: String::new(),
        request_id: None,
        acks,
    }))
}

/// Sends `entries` to `queue` in one call of the `exchange` function, as
/// a lane sends the requests that arrived together: each one's answer.
async fn exchange_in_one_call(
    app: &TestApp,
    queue: &str,
    entries: &[Exchange],
) -> Vec<prioq::queue::Result<Exchanged>> {
    let keys = QueueKeys::new(&app.config.key_prefix, queue);
    let reply: redis::Value = exchange_command(&keys, 0, Route::SINGLE, entries)
        .query_async(&mut redis_connection(&app.config.redis_url).await)
        .await
        .expect("exchange");
    exchange_answers(entries, reply).expect("answers").0
}

/// Two claims in one call of the `exchange` function, as a lane sends
/// them: the second's ack frees its group's cap. Each request's ack comes
/// right before its own claim, so the first claim, made while the group
/// was at its cap, takes the other group's job, as it would have alone.
#[tokio::test]
async fn an_ack_in_a_claim_frees_a_cap_for_that_claim_not_for_the_others_in_its_call() {
    let mut config = test_config();
    config.bulk_floor = 0.0;
    let app = spawn_app_with(config).await;
    configure(&app, "q", json!({"group_max_in_flight": 1})).await;
    enqueue_many(&app, "q", Some("G"), 0, "g", 2).await;
    enqueue_many(&app, "q", Some("H"), 5, "h", 1).await;
    let held = app.claim_one("q").await.expect("g0");
    assert_eq!(held["id"], "g0");

    let entries = [
        claim_of_one(Vec::new()),
        claim_of_one(vec![Ack {
            id: "g0".into(),
            lease_token: held["lease_token"].as_str().expect("token").into(),
            result: None,
        }]),
    ];
    let answers = exchange_in_one_call(&app, "q", &entries).await;
    let taken: Vec<(Vec<AckOutcome>, Vec<String>)> = answers
        .into_iter()
        .map(|answer| match answer {
            Ok(Exchanged::Claimed(claimed)) => (
                claimed.acked,
                claimed.jobs.into_iter().map(|job| job.id).collect(),
            ),
            other => panic!("not a claim's answer: {other:?}"),
        })
        .collect();
    assert_eq!(
        taken,
        [
            (vec![], vec!["h0".to_owned()]),
            (vec![AckOutcome::Acked], vec!["g1".to_owned()]),
        ]
    );
}

/// A job enqueued and claimed in one call of the `exchange` function, as
/// a lane may send them: its group's jobs waiting are as before the call
/// (none), and the group is listed with the job in flight.
#[tokio::test]
async fn a_group_whose_job_is_enqueued_and_claimed_in_one_call_is_listed_in_flight() {
    let app = spawn_app_with(test_config()).await;
    // The queue is made, and the library loaded, by a call of its own.
    configure(&app, "q", json!({"max_wait_ms": null})).await;
    let entries = [
        Exchange::Enqueue(
            vec![OutgoingJob {
                id: "g0".into(),
                body: body(None, "t", "{}"),
                options: JobOptions {
                    group: Some("G".into()),
                    ..JobOptions::default()
                },
                arrival: None,
                after: None,
            }],
            Admission::Bounded,
        ),
        claim_of_one(Vec::new()),
    ];
    let answers = exchange_in_one_call(&app, "q", &entries).await;
    match &answers[1] {
        Ok(Exchanged::Claimed(claimed)) if claimed.jobs.len() == 1 => {
            assert_eq!(claimed.jobs[0].id, "g0")
        }
        other => panic!("not a claim of g0: {other:?}"),
    }
    let groups = app.get(app.queue_url("q", "/groups")).await.body;
    assert_eq!(
        groups["groups"],
        json!([{"group": "G", "pending": 0, "processing": 1, "weight": 1}])
    );
}
