//! The seeded producers and workers. Each draws its every decision from
//! its own generator, seeded from the run's seed and its number: the same
//! seed makes the same sequence of requests per client (what the service
//! answers, and so the interleaving, depends on real timing).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{Value, json};

use super::client::{Answer, Recorder, now_ms, parse_time, send};
use crate::history::{AckEntry, Backoff, Call, Lease, Outcome};

/// The uncapped queue, the capped one, one split over `SHARDS` shards,
/// and one whose number of shards the faults change while it runs (its
/// jobs are not kept once acked, so that it empties now and then, when
/// the change is taken).
pub const MAIN: &str = "main";
pub const CAPPED: &str = "capped";
pub const SHARDED: &str = "sharded";
pub const RESHARDED: &str = "resharded";
pub const SHARDS: u32 = 3;
/// The capped queue's caps.
pub const MAX_IN_FLIGHT: u64 = 4;
pub const GROUP_MAX_IN_FLIGHT: u64 = 2;
/// The capped queue's `max_pending`: its producers meet 429 `queue_full`
/// when its workers fall behind.
pub const MAX_PENDING: u64 = 40;
/// Its `max_pending_bytes`: about 40 of its jobs (19 to 23 bytes each, as
/// their ids grow), so that one bound or the other is met first as the
/// run goes on.
pub const MAX_PENDING_BYTES: u64 = 840;
/// Acked jobs are kept this long, so the final read finds their results
/// and a retried enqueue of an acked job answers it instead of making it
/// again.
pub const RETAIN_MS: u64 = 3_600_000;
/// How long the sharded queue keeps job histories: past the run.
pub const HISTORY_MS: u64 = 3_600_000;

/// What every client shares.
#[derive(Debug)]
pub struct Ctx {
    pub http: reqwest::Client,
    pub bases: Vec<String>,
    pub recorder: Arc<Recorder>,
    /// Producers stop when set.
    pub produce: AtomicBool,
    /// Workers stop when set.
    pub work: AtomicBool,
    /// Set while a change of the resharded queue's shards waits for it to
    /// drain: its producers hold off meanwhile (the change is taken only
    /// while the queue holds no job), and start again as soon as it is
    /// taken, racing the instances that still know the old count.
    pub resharding: AtomicBool,
}

impl Ctx {
    /// An instance's base URL, picked by `rng`.
    fn base(&self, rng: &mut StdRng) -> &str {
        &self.bases[rng.random_range(0..self.bases.len())]
    }

    fn url(&self, rng: &mut StdRng, path: &str) -> String {
        format!("{}{path}", self.base(rng))
    }

    /// Sends and records one call, to an instance `rng` picks.
    pub async fn call(
        &self,
        rng: &mut StdRng,
        process: &str,
        queue: &str,
        request: (Method, &str, Option<&Value>),
        describe: impl FnOnce(&Answer) -> Call,
    ) -> Answer {
        self.call_at(self.base(rng), process, queue, request, describe)
            .await
    }

    /// Sends and records one call to the instance at `base`.
    pub async fn call_at(
        &self,
        base: &str,
        process: &str,
        queue: &str,
        (method, path, body): (Method, &str, Option<&Value>),
        describe: impl FnOnce(&Answer) -> Call,
    ) -> Answer {
        let url = format!("{base}/v1/queues/{queue}{path}");
        let start = now_ms();
        let answer = send(&self.http, method, &url, body).await;
        self.recorder
            .record(process, queue, start, &answer, describe(&answer));
        answer
    }
}

/// A generator of its own for client `n` of the run seeded `seed`.
pub fn rng_for(seed: u64, n: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Jobs a producer remembers, to cancel one of them now and then.
const RECENT: usize = 20;

/// Dedup keys per queue: few, so that jobs meet a key held.
const DEDUP_KEYS: u32 = 4;

/// Another queue, for dependencies across queues.
fn other(queue: &str) -> &'static str {
    if queue == MAIN { CAPPED } else { MAIN }
}

/// Enqueues jobs with ids of its own until told to stop; an enqueue not
/// answered ok is sent again, same body, a few times. Some jobs wait for
/// the producer's last job made on their queue or on the other one
/// (`after`, `queue/id`); some carry a dedup key (mode `drop`), and may
/// be answered with another job that holds it; now and then it cancels
/// one of its recent jobs, in whatever state it is.
pub async fn producer(ctx: Arc<Ctx>, seed: u64, n: u64) {
    let mut rng = rng_for(seed, n);
    let process = format!("p{n}");
    let mut count = 0u64;
    let mut last_ok: HashMap<&str, String> = HashMap::new();
    let mut recent: Vec<(&str, String)> = Vec::new();
    while !ctx.produce.load(Ordering::Relaxed) {
        if !recent.is_empty() && rng.random_bool(0.05) {
            let (queue, id) = recent[rng.random_range(0..recent.len())].clone();
            let path = format!("/jobs/{id}/cancel");
            ctx.call(
                &mut rng,
                &process,
                queue,
                (Method::POST, &path, Some(&json!({"reason": "chaos"}))),
                |a| Call::Cancel {
                    id: id.clone(),
                    state: a.body["state"].as_str().map(str::to_owned),
                },
            )
            .await;
        }
        count += 1;
        let id = format!("{process}-{count}");
        // The resharded queue gets few jobs, so that it empties now and then.
        let queue = match rng.random_range(0..12) {
            0 => RESHARDED,
            n => [MAIN, MAIN, MAIN, CAPPED, SHARDED][n % 5],
        };
        if queue == RESHARDED {
            if !ctx.resharding.load(Ordering::Relaxed) {
                plain_enqueue(&ctx, &mut rng, &process, &id).await;
            }
            continue;
        }
        let priority: u8 = rng.random_range(0..4);
        // The sharded queue's jobs have no group: order across shards is
        // judged for those (docs/operations.md, "Sharded queues").
        let group = (queue != SHARDED).then(|| format!("g{}", rng.random_range(0..4)));
        let delay_ms: u64 = if rng.random_bool(0.1) {
            rng.random_range(100..2000)
        } else {
            0
        };
        let after: Vec<String> = match (last_ok.get(queue), last_ok.get(other(queue))) {
            (Some(previous), _) if rng.random_bool(0.12) => vec![previous.clone()],
            (_, Some(previous)) if rng.random_bool(0.05) => {
                vec![format!("{}/{previous}", other(queue))]
            }
            _ => Vec::new(),
        };
        let expires_in_ms: Option<u64> = rng.random_bool(0.1).then(|| rng.random_range(300..4000));
        // Keys only on jobs that end by an operation of the history (not
        // through a dependency or an expiry), so that the checker knows
        // how long they hold them.
        let dedup: Option<(String, u64, bool)> =
            (after.is_empty() && expires_in_ms.is_none() && rng.random_bool(0.1)).then(|| {
                let key = format!("k{}", rng.random_range(0..DEDUP_KEYS));
                // Replace (debounce) a third of the time; a replaced job
                // is handed out with the replacing enqueue's args.
                (
                    key,
                    [0, 0, 1000][rng.random_range(0..3)],
                    rng.random_bool(0.33),
                )
            });
        // A backoff on a fifth of the jobs without a key (a replace would
        // set its delay again).
        let backoff = (dedup.is_none() && rng.random_bool(0.2)).then(|| Backoff {
            delay_ms: rng.random_range(50..400),
            exponential: rng.random_bool(0.5),
        });
        // A start by the clock on a twentieth of the jobs that wait for
        // nothing else (not with a key: a replace would set it again).
        let run_at =
            (delay_ms == 0 && after.is_empty() && dedup.is_none() && rng.random_bool(0.05))
                .then(|| now_ms() + rng.random_range(100..1500));
        let mut body = json!({
            "task": "chaos", "id": id, "priority": priority, "group": group,
            "delay_ms": delay_ms, "max_attempts": 4, "retain_ms": RETAIN_MS,
            "args": {"by": id},
        });
        if let Some(at) = run_at.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()) {
            body["run_at"] = json!(at.to_string());
        }
        if let Some(backoff) = backoff {
            let kind = if backoff.exponential {
                "exponential"
            } else {
                "fixed"
            };
            body["backoff"] = json!({"type": kind, "delay_ms": backoff.delay_ms});
        }
        if !after.is_empty() {
            body["after"] = json!(after);
        }
        if let Some(ms) = expires_in_ms {
            body["expires_in_ms"] = json!(ms);
        }
        if let Some((key, ttl_ms, replace)) = &dedup {
            let mode = if *replace { "replace" } else { "drop" };
            body["dedup"] = json!({"key": key, "ttl_ms": ttl_ms, "mode": mode});
        }
        for _ in 0..4 {
            let answer = ctx
                .call(
                    &mut rng,
                    &process,
                    queue,
                    (Method::POST, "/jobs", Some(&body)),
                    |a| Call::Enqueue {
                        id: id.clone(),
                        priority,
                        group: group.clone(),
                        delay_ms,
                        after: after.clone(),
                        dedup: dedup.as_ref().map(|(key, ..)| key.clone()),
                        replace: dedup.as_ref().is_some_and(|(.., replace)| *replace),
                        expires_in_ms,
                        expires_at: parse_time(&a.body["expires_at"]),
                        created: a.body["created"].as_bool(),
                        answered: a.body["id"].as_str().map(str::to_owned),
                        replaced: a.body["replaced"].as_bool() == Some(true),
                        backoff,
                        run_at,
                        bytes: Some(job_bytes(&body)),
                    },
                )
                .await;
            if answer.outcome == Outcome::Ok && answer.body["id"] != json!(id) {
                // Answered with the job holding the dedup key: nothing
                // made, nothing to wait for or cancel.
                break;
            }
            if answer.outcome == Outcome::Ok {
                last_ok.insert(queue, id.clone());
                if recent.len() == RECENT {
                    recent.remove(0);
                }
                recent.push((queue, id.clone()));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..80))).await;
    }
}

/// Jobs in each of a bulk producer's batches.
const BULK_BATCH: usize = 200;

/// Jobs each of a bulk producer's three claims at once asks for: the
/// first goes alone, the other two queue behind its call and, asking for
/// 200 jobs together (`SECOND_CALL_ITEMS` of the exchange's lane), go in a
/// second call beside it.
const BULK_CLAIM: u32 = 100;

/// Now and then sends two batch enqueues of `BULK_BATCH` jobs on the main
/// queue at once to one instance, then three claims at once to it,
/// and acks what they leased. A batch not answered ok is sent again, same
/// body, a few times (its jobs have ids of their own), and so is a claim
/// (under its request id). Each job of a batch is recorded as an enqueue
/// of its own, with the batch's times: jobs of one batch are not ordered
/// against each other by the history (they are by the service: request
/// order).
pub async fn bulk_producer(ctx: Arc<Ctx>, seed: u64, n: u64) {
    let mut rng = rng_for(seed, n);
    let process = format!("b{n}");
    let mut round = 0u64;
    loop {
        tokio::time::sleep(Duration::from_millis(rng.random_range(6000..12000))).await;
        if ctx.produce.load(Ordering::Relaxed) {
            break;
        }
        round += 1;
        let base = ctx.base(&mut rng).to_owned();
        let [first, second] = [0, 1].map(|half| {
            (0..BULK_BATCH)
                .map(|k| {
                    let id = format!("{process}-{round}-{half}-{k}");
                    let priority: u8 = rng.random_range(0..4);
                    let group = format!("g{}", rng.random_range(0..4));
                    let body = json!({
                        "task": "chaos", "id": id, "priority": priority, "group": group,
                        "max_attempts": 4, "retain_ms": RETAIN_MS, "args": {"by": id},
                    });
                    (body, priority, Some(group))
                })
                .collect::<Vec<_>>()
        });
        tokio::join!(
            bulk_enqueue(&ctx, &process, &base, &first),
            bulk_enqueue(&ctx, &process, &base, &second),
        );
        let [w0, w1, w2] = [0, 1, 2].map(|k| format!("{process}.{round}.{k}"));
        let (a, b, c) = tokio::join!(
            bulk_claim(&ctx, &process, &base, &w0),
            bulk_claim(&ctx, &process, &base, &w1),
            bulk_claim(&ctx, &process, &base, &w2),
        );
        for job in [a, b, c].into_iter().flatten() {
            let result = json!({"token": job.token});
            ack(&ctx, &mut rng, &process, MAIN, &job, &result).await;
        }
    }
}

/// Claims `BULK_CLAIM` jobs of the main queue at `base` for `worker`, under
/// a request id, sent again while unanswered (four times at most); answers
/// the jobs leased.
async fn bulk_claim(ctx: &Ctx, process: &str, base: &str, worker: &str) -> Vec<Lease> {
    // Long enough for the producer to ack them all one by one.
    let lease_ms = 10_000;
    let body = json!({
        "worker": worker, "request_id": worker, "lease_ms": lease_ms, "max_jobs": BULK_CLAIM,
    });
    for _ in 0..4 {
        let answer = ctx
            .call_at(
                base,
                process,
                MAIN,
                (Method::POST, "/claim", Some(&body)),
                |a| Call::Claim {
                    worker: worker.to_owned(),
                    request_id: worker.to_owned(),
                    lease_ms,
                    max_jobs: BULK_CLAIM,
                    acks: Vec::new(),
                    jobs: leases(&a.body),
                    acked: Vec::new(),
                    skipped: skipped_shards(&a.body),
                },
            )
            .await;
        if answer.outcome == Outcome::Ok {
            return leases(&answer.body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Vec::new()
}

/// Sends one batch of `jobs` (body, priority, group) to the main queue at
/// `base` until answered ok, four times at most; records each job's
/// enqueue.
async fn bulk_enqueue(ctx: &Ctx, process: &str, base: &str, jobs: &[(Value, u8, Option<String>)]) {
    let url = format!("{base}/v1/queues/{MAIN}/jobs/batch");
    let body = json!({"jobs": jobs.iter().map(|(body, ..)| body).collect::<Vec<_>>()});
    for _ in 0..4 {
        let start = now_ms();
        let answer = send(&ctx.http, Method::POST, &url, Some(&body)).await;
        for (i, (job, priority, group)) in jobs.iter().enumerate() {
            let id = job["id"].as_str().unwrap_or_default();
            let view = &answer.body["jobs"][i];
            let call =
                Call::plain_enqueue(id, *priority, group.clone(), view, Some(job_bytes(job)));
            ctx.recorder.record(process, MAIN, start, &answer, call);
        }
        if answer.outcome == Outcome::Ok {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bytes the job of enqueue `body` counts against
/// `max_pending_bytes`: its task's length (one byte), the task, the args
/// as sent.
fn job_bytes(body: &Value) -> u64 {
    let task = body["task"].as_str().unwrap_or_default();
    (1 + task.len() + body["args"].to_string().len()) as u64
}

/// Enqueues one job on the resharded queue: no group, delay, key,
/// dependency or retention; sent again, same body, while not answered.
async fn plain_enqueue(ctx: &Ctx, rng: &mut StdRng, process: &str, id: &str) {
    let priority: u8 = rng.random_range(0..4);
    let body = json!({"task": "chaos", "id": id, "priority": priority, "args": {"by": id}});
    for _ in 0..4 {
        let answer = ctx
            .call(
                rng,
                process,
                RESHARDED,
                (Method::POST, "/jobs", Some(&body)),
                |a| Call::plain_enqueue(id, priority, None, &a.body, Some(job_bytes(&body))),
            )
            .await;
        if answer.outcome == Outcome::Ok {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(rng.random_range(0..80))).await;
}

/// What a worker does with a job it leased.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// Ack on its own request.
    Ack,
    /// Ack inside the next claim.
    AckInClaim,
    ExtendThenAck,
    Nack,
    /// Ack after its lease ran out.
    Overrun,
    /// The worker dies holding it (and the rest of its claim).
    Killed,
}

fn fate(rng: &mut StdRng) -> Fate {
    match rng.random_range(0..100) {
        0..35 => Fate::Ack,
        35..65 => Fate::AckInClaim,
        65..77 => Fate::ExtendThenAck,
        77..89 => Fate::Nack,
        89..95 => Fate::Overrun,
        _ => Fate::Killed,
    }
}

/// Claims (with a request id, retried under it while unanswered) on one
/// queue and does with each job what its [`Fate`] says, until told to
/// stop. A "killed" worker starts again under a new name, its leases
/// left to run out.
pub async fn worker(ctx: Arc<Ctx>, seed: u64, n: u64, queue: &'static str) {
    let mut rng = rng_for(seed, 1_000 + n);
    let process = format!("w{n}");
    let mut life = 0u32;
    let mut claims = 0u64;
    let mut acks: Vec<AckEntry> = Vec::new();
    'lives: while !ctx.work.load(Ordering::Relaxed) {
        let worker = format!("{process}.{life}");
        claims += 1;
        let request_id = format!("{worker}-{claims}");
        let lease_ms: u64 = [1500, 2500, 4000][rng.random_range(0..3)];
        let max_jobs: u32 = rng.random_range(1..=5);
        let body = json!({
            "worker": worker, "request_id": request_id, "lease_ms": lease_ms,
            "max_jobs": max_jobs, "wait_ms": rng.random_range(0..300),
            "ack": acks.iter().map(|a| json!({"id": a.id, "lease_token": a.token, "result": a.result})).collect::<Vec<_>>(),
        });
        let sent_acks = std::mem::take(&mut acks);
        let describe = |a: &Answer| Call::Claim {
            worker: worker.clone(),
            request_id: request_id.clone(),
            lease_ms,
            max_jobs,
            acks: sent_acks.clone(),
            jobs: leases(&a.body),
            acked: a.body["acked"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(|e| e["status"].as_u64())
                        .map(|s| s as u16)
                        .collect()
                })
                .unwrap_or_default(),
            skipped: skipped_shards(&a.body),
        };
        // Killed while claiming: the request is dropped mid-flight. Rare:
        // such a claim may have leased any pending job, which the order
        // rules then no longer count as pending.
        if rng.random_bool(0.002) {
            let start = now_ms();
            let url = ctx.url(&mut rng, &format!("/v1/queues/{queue}/claim"));
            let cut = Duration::from_millis(rng.random_range(0..30));
            let _ =
                tokio::time::timeout(cut, send(&ctx.http, Method::POST, &url, Some(&body))).await;
            let answer = Answer::abandoned();
            ctx.recorder
                .record(&process, queue, start, &answer, describe(&answer));
            life += 1;
            continue;
        }
        // Repeated under its request id until answered, while the leases
        // it may have made still run: then the answer names them all, and
        // the checker knows which jobs the claim took.
        let first = now_ms();
        let mut answer = Answer::abandoned();
        while now_ms() - first < lease_ms as i64 - 300 {
            answer = ctx
                .call(
                    &mut rng,
                    &process,
                    queue,
                    (Method::POST, "/claim", Some(&body)),
                    &describe,
                )
                .await;
            if answer.outcome == Outcome::Ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let jobs = leases(&answer.body);
        if jobs.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for job in jobs {
            let result = json!({"token": job.token});
            match fate(&mut rng) {
                Fate::Ack => ack(&ctx, &mut rng, &process, queue, &job, &result).await,
                Fate::AckInClaim => acks.push(AckEntry {
                    id: job.id.clone(),
                    token: job.token.clone(),
                    result,
                }),
                Fate::ExtendThenAck => {
                    extend(&ctx, &mut rng, &process, queue, &job, lease_ms).await;
                    ack(&ctx, &mut rng, &process, queue, &job, &result).await;
                }
                Fate::Nack => {
                    // Without a delay a third of the time: the job's backoff.
                    let delay_ms = [None, Some(0), Some(300)][rng.random_range(0..3)];
                    let mut body = json!({"lease_token": job.token, "error": "chaos"});
                    if let Some(ms) = delay_ms {
                        body["delay_ms"] = json!(ms);
                    }
                    let path = format!("/jobs/{}/nack", job.id);
                    ctx.call(
                        &mut rng,
                        &process,
                        queue,
                        (Method::POST, &path, Some(&body)),
                        |a| nack_call(&job.id, &job.token, delay_ms, a),
                    )
                    .await;
                }
                Fate::Overrun => {
                    let over = lease_ms + rng.random_range(100..800);
                    tokio::time::sleep(Duration::from_millis(over)).await;
                    ack(&ctx, &mut rng, &process, queue, &job, &result).await;
                }
                Fate::Killed => {
                    acks.clear();
                    life += 1;
                    continue 'lives;
                }
            }
        }
    }
}

async fn ack(ctx: &Ctx, rng: &mut StdRng, process: &str, queue: &str, job: &Lease, result: &Value) {
    let body = json!({"lease_token": job.token, "result": result});
    let path = format!("/jobs/{}/ack", job.id);
    // Repeated while unanswered: the token that completed a retained job
    // answers 204 again.
    for _ in 0..3 {
        let answer = ctx
            .call(
                rng,
                process,
                queue,
                (Method::POST, &path, Some(&body)),
                |_| {
                    Call::Ack(AckEntry {
                        id: job.id.clone(),
                        token: job.token.clone(),
                        result: result.clone(),
                    })
                },
            )
            .await;
        if answer.outcome != Outcome::Unknown {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn extend(
    ctx: &Ctx,
    rng: &mut StdRng,
    process: &str,
    queue: &str,
    job: &Lease,
    lease_ms: u64,
) {
    let body = json!({"lease_token": job.token, "lease_ms": lease_ms});
    let path = format!("/jobs/{}/extend", job.id);
    ctx.call(
        rng,
        process,
        queue,
        (Method::POST, &path, Some(&body)),
        |a| Call::Extend {
            id: job.id.clone(),
            token: job.token.clone(),
            lease_ms,
            expires_at: parse_time(&a.body["lease_expires_at"]),
        },
    )
    .await;
}

/// The shards a claim's answer says it skipped.
/// A nack of `id`'s lease `token` with `delay_ms` (`None`: not sent), and
/// what its answer said of the job.
pub fn nack_call(id: &str, token: &str, delay_ms: Option<u64>, answer: &Answer) -> Call {
    let ok = answer.outcome == Outcome::Ok;
    let body = &answer.body;
    Call::Nack {
        id: id.to_owned(),
        token: token.to_owned(),
        delay_ms,
        attempts: body["attempts"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|_| ok),
        state: body["state"].as_str().map(str::to_owned).filter(|_| ok),
        run_at: parse_time(&body["run_at"]).filter(|_| ok),
    }
}

pub fn skipped_shards(body: &Value) -> Vec<u32> {
    body["skipped_shards"]
        .as_array()
        .map_or_else(Vec::new, |shards| {
            shards
                .iter()
                .filter_map(|shard| u32::try_from(shard.as_u64()?).ok())
                .collect()
        })
}

/// The leases a claim's answer holds.
pub fn leases(body: &Value) -> Vec<Lease> {
    let Some(jobs) = body["jobs"].as_array() else {
        return Vec::new();
    };
    jobs.iter()
        .filter_map(|job| {
            Some(Lease {
                id: job["id"].as_str()?.to_owned(),
                token: job["lease_token"].as_str()?.to_owned(),
                priority: job["priority"].as_u64()? as u8,
                group: job["group"].as_str().map(str::to_owned),
                attempts: job["attempts"].as_u64()? as u32,
                enqueued_at: parse_time(&job["enqueued_at"])?,
                expires_at: parse_time(&job["lease_expires_at"])?,
                by: job["args"]["by"].as_str().map(str::to_owned),
                fence: job["fence"].as_u64(),
            })
        })
        .collect()
}
