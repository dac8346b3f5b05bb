//! Load for the fault scenarios of prioq's integration suite, recorded
//! as a history for the checker: the tool's own requests and recording
//! (`run::client`), its final read of every job (`run::inventory`), and
//! clients that retry as docs/guarantees.md says. A scenario test makes its fault
//! (Redis restarted, a cluster primary failed over, an instance or
//! worker processes killed), asserts that the fault happened from what
//! the clients were answered, reads every job back and hands the history
//! to [`crate::checker::check`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::checker::{Violation, check};
use crate::history::{self, AckEntry, Call, Lease, Op, Outcome};
use crate::run;
use crate::run::client::{Answer, Recorder, now_ms, parse_time, send};
use crate::run::load::{Ctx, RETAIN_MS, leases, nack_call, skipped_shards};

/// How long a client retries one request.
const PATIENCE: Duration = Duration::from_secs(20);

/// Clients of prioq instances (or a proxy in front of them) whose every
/// request goes into one history.
#[derive(Debug)]
pub struct Scenario {
    ctx: Arc<Ctx>,
    history: PathBuf,
    /// The base the next request goes to: the bases in turn.
    next: AtomicUsize,
    /// Answers so far, by kind of call and status (`None`: no answer).
    answers: Mutex<BTreeMap<(&'static str, Option<u16>), u64>>,
}

impl Scenario {
    /// Clients of `bases`, recording into `dir/history.jsonl`.
    pub fn new(bases: Vec<String>, dir: &Path) -> anyhow::Result<Arc<Self>> {
        let history = dir.join("history.jsonl");
        let ctx = Ctx {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()?,
            bases,
            recorder: Arc::new(Recorder::create(&history)?),
            produce: AtomicBool::new(false),
            work: AtomicBool::new(false),
            resharding: AtomicBool::new(false),
        };
        Ok(Arc::new(Self {
            ctx: Arc::new(ctx),
            history,
            next: AtomicUsize::new(0),
            answers: Mutex::default(),
        }))
    }

    /// How many calls of `kind` (`enqueue`, `claim`, `ack`) were answered
    /// `status` (`None`: not answered) so far.
    pub fn answered(&self, kind: &str, status: Option<u16>) -> u64 {
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers
            .iter()
            .filter(|((k, s), _)| *k == kind && *s == status)
            .map(|(_, n)| n)
            .sum()
    }

    /// Jobs created so far (enqueues answered 201).
    pub fn created(&self) -> u64 {
        self.answered("enqueue", Some(201))
    }

    /// Acks answered 204 so far.
    pub fn acked(&self) -> u64 {
        self.answered("ack", Some(204))
    }

    /// Sends one request to the next base and records it.
    async fn call(
        &self,
        process: &str,
        queue: &str,
        (kind, path, body): (&'static str, &str, &Value),
        describe: impl FnOnce(&Answer) -> Call,
    ) -> Answer {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.ctx.bases.len();
        let url = format!("{}/v1/queues/{queue}{path}", self.ctx.bases[n]);
        let start = now_ms();
        let answer = send(&self.ctx.http, Method::POST, &url, Some(body)).await;
        self.ctx
            .recorder
            .record(process, queue, start, &answer, describe(&answer));
        *self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((kind, answer.status))
            .or_default() += 1;
        answer
    }

    /// Sends a call again while it is unanswered or answered 5xx (same
    /// body, same id or token), for at most [`PATIENCE`]; the last answer.
    async fn retrying(
        &self,
        process: &str,
        queue: &str,
        request: (&'static str, &str, &Value),
        describe: impl Fn(&Answer) -> Call,
    ) -> Answer {
        let deadline = Instant::now() + PATIENCE;
        let mut pause = Duration::from_millis(10);
        loop {
            let answer = self.call(process, queue, request, &describe).await;
            if answer.status.is_some_and(|s| s < 500) || Instant::now() > deadline {
                return answer;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }

    /// Enqueues job `id` (task `t`, unless `extra` says otherwise: its
    /// members are added to the body), retried with the same id until
    /// answered; true when it is known to exist. Kept once acked (as the
    /// runner's are), so that a retry whose first send was applied and
    /// acked meanwhile answers that job instead of making it again.
    pub async fn enqueue(
        &self,
        process: &str,
        queue: &str,
        id: &str,
        (priority, delay_ms): (u8, u64),
        extra: &Value,
    ) -> bool {
        let mut body = json!({
            "task": "t", "id": id, "priority": priority, "delay_ms": delay_ms,
            "retain_ms": RETAIN_MS,
        });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let answer = self
            .retrying(process, queue, ("enqueue", "/jobs", &body), |a| {
                Call::Enqueue {
                    id: id.to_owned(),
                    priority,
                    group: None,
                    delay_ms,
                    after: Vec::new(),
                    dedup: None,
                    replace: false,
                    expires_in_ms: None,
                    expires_at: None,
                    created: a.body["created"].as_bool(),
                    answered: a.body["id"].as_str().map(str::to_owned),
                    replaced: false,
                    backoff: None,
                    run_at: None,
                    bytes: None,
                }
            })
            .await;
        answer.outcome == Outcome::Ok
    }

    /// One claim under a request id of its own (not retried: a lost
    /// answer's leases run out and their jobs come back); its leases.
    pub async fn claim(
        &self,
        worker: &str,
        queue: &str,
        request_id: &str,
        (lease_ms, max_jobs, wait_ms): (u64, u32, u64),
    ) -> Vec<Lease> {
        let body = json!({
            "worker": worker, "request_id": request_id, "lease_ms": lease_ms,
            "max_jobs": max_jobs, "wait_ms": wait_ms,
        });
        let answer = self
            .call(worker, queue, ("claim", "/claim", &body), |a| Call::Claim {
                worker: worker.to_owned(),
                request_id: request_id.to_owned(),
                lease_ms,
                max_jobs,
                acks: Vec::new(),
                jobs: leases(&a.body),
                acked: Vec::new(),
                skipped: skipped_shards(&a.body),
            })
            .await;
        leases(&answer.body)
    }

    /// Records a claim sent by someone else (a worker process), started
    /// at `start_ms` and answered `status` (`None`: no answer) with
    /// `body`; its leases. Anything but a 200 counts as unknown.
    pub fn claimed_elsewhere(
        &self,
        (worker, queue, request_id): (&str, &str, &str),
        lease_ms: u64,
        start_ms: i64,
        (status, body): (Option<u16>, Value),
    ) -> Vec<Lease> {
        let jobs = leases(&body);
        let answer = Answer {
            outcome: if status == Some(200) {
                Outcome::Ok
            } else {
                Outcome::Unknown
            },
            status,
            body,
        };
        let call = Call::Claim {
            worker: worker.to_owned(),
            request_id: request_id.to_owned(),
            lease_ms,
            max_jobs: 1,
            acks: Vec::new(),
            jobs: jobs.clone(),
            acked: Vec::new(),
            skipped: skipped_shards(&answer.body),
        };
        self.ctx
            .recorder
            .record(worker, queue, start_ms, &answer, call);
        jobs
    }

    /// Acks `lease`, retried with the same token until answered; the last
    /// answer.
    pub async fn ack(&self, worker: &str, queue: &str, lease: &Lease) -> Answer {
        let result = json!({"token": lease.token});
        let body = json!({"lease_token": lease.token, "result": result});
        let path = format!("/jobs/{}/ack", lease.id);
        let entry = AckEntry {
            id: lease.id.clone(),
            token: lease.token.clone(),
            result,
        };
        self.retrying(worker, queue, ("ack", &path, &body), |_| {
            Call::Ack(entry.clone())
        })
        .await
    }

    /// Nacks `lease` (to the DLQ when `dead`), retried with the same token
    /// until answered; the last answer.
    pub async fn nack(
        &self,
        worker: &str,
        queue: &str,
        lease: &Lease,
        (delay_ms, error, dead): (u64, &str, bool),
    ) -> Answer {
        let body = json!({
            "lease_token": lease.token, "delay_ms": delay_ms, "error": error, "dead": dead,
        });
        let path = format!("/jobs/{}/nack", lease.id);
        self.retrying(worker, queue, ("nack", &path, &body), |a| {
            nack_call(&lease.id, &lease.token, Some(delay_ms), a)
        })
        .await
    }

    /// Extends `lease` by `lease_ms` from now (not retried); the answer.
    pub async fn extend(&self, worker: &str, queue: &str, lease: &Lease, lease_ms: u64) -> Answer {
        let body = json!({"lease_token": lease.token, "lease_ms": lease_ms});
        let path = format!("/jobs/{}/extend", lease.id);
        self.call(worker, queue, ("extend", &path, &body), |a| Call::Extend {
            id: lease.id.clone(),
            token: lease.token.clone(),
            lease_ms,
            expires_at: parse_time(&a.body["lease_expires_at"]),
        })
        .await
    }

    /// Whether `queue` holds no pending, scheduled or processing job.
    pub async fn drained(&self, queue: &str) -> bool {
        let url = format!("{}/v1/queues/{queue}", self.ctx.bases[0]);
        let answer = send(&self.ctx.http, Method::GET, &url, None).await;
        answer.status == Some(200)
            && ["pending", "scheduled", "processing"]
                .iter()
                .all(|state| answer.body[state] == 0)
    }

    /// Reads back every job the history names (the runner's final
    /// inventory) and answers the whole history.
    pub async fn finish(&self) -> anyhow::Result<Vec<Op>> {
        run::inventory(&self.ctx, &self.history).await?;
        self.ctx.recorder.flush()?;
        history::read(&self.history)
    }
}

/// Each job's state as the final reads found it (`None`: gone), by id.
pub fn final_states(ops: &[Op]) -> BTreeMap<&str, Option<&str>> {
    ops.iter()
        .filter_map(|op| match &op.call {
            Call::Read { id, state, .. } => Some((id.as_str(), state.as_deref())),
            _ => None,
        })
        .collect()
}

/// The ids of the jobs the final reads found in a state other than
/// `completed` (acked and kept), sorted.
pub fn unfinished(ops: &[Op]) -> Vec<&str> {
    final_states(ops)
        .into_iter()
        .filter(|(_, state)| state.is_some_and(|s| s != "completed"))
        .map(|(id, _)| id)
        .collect()
}

/// The checker's violations of `ops`, each printed with its operations.
pub fn violations(ops: &[Op]) -> Vec<Violation> {
    let violations = check(ops);
    let by_number: BTreeMap<u64, &Op> = ops.iter().map(|op| (op.op, op)).collect();
    for violation in &violations {
        eprintln!("{violation}");
        for op in violation.ops.iter().filter_map(|n| by_number.get(n)) {
            eprintln!("    {}", serde_json::to_string(op).unwrap_or_default());
        }
    }
    violations
}

/// Producers and consumers of one queue: each producer enqueues jobs
/// `{name}-0`, `{name}-1`... (priorities 0 to 2, every `pace`, up to
/// `count`), each consumer claims up to four jobs at a time and acks them.
#[derive(Debug)]
pub struct Load {
    scenario: Arc<Scenario>,
    queue: String,
    producers: Vec<JoinHandle<()>>,
    consumers: Vec<JoinHandle<()>>,
}

/// What a [`Load`] runs.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub producers: usize,
    pub consumers: usize,
    /// Jobs per producer, at most.
    pub count: usize,
    pub pace: Duration,
    pub lease_ms: u64,
}

impl Load {
    pub fn start(scenario: &Arc<Scenario>, queue: &str, shape: Shape) -> Self {
        let producers = (0..shape.producers)
            .map(|p| {
                let (scenario, queue) = (scenario.clone(), queue.to_owned());
                tokio::spawn(async move {
                    let process = format!("p{p}");
                    for n in 0..shape.count {
                        if scenario.ctx.produce.load(Ordering::Relaxed) {
                            return;
                        }
                        let id = format!("{process}-{n}");
                        let priority = (n % 3) as u8;
                        let job = (priority, 0);
                        scenario
                            .enqueue(&process, &queue, &id, job, &Value::Null)
                            .await;
                        tokio::time::sleep(shape.pace).await;
                    }
                })
            })
            .collect();
        let consumers = (0..shape.consumers)
            .map(|c| {
                let (scenario, queue) = (scenario.clone(), queue.to_owned());
                tokio::spawn(async move {
                    let worker = format!("c{c}");
                    let mut claims = 0u64;
                    while !scenario.ctx.work.load(Ordering::Relaxed) {
                        claims += 1;
                        let request_id = format!("{worker}-{claims}");
                        let shape = (shape.lease_ms, 4, 200);
                        let jobs = scenario.claim(&worker, &queue, &request_id, shape).await;
                        if jobs.is_empty() {
                            // A refused or lost claim: no spinning while
                            // Redis is away.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        for job in &jobs {
                            scenario.ack(&worker, &queue, job).await;
                        }
                    }
                })
            })
            .collect();
        Self {
            scenario: scenario.clone(),
            queue: queue.to_owned(),
            producers,
            consumers,
        }
    }

    /// Waits until every producer has enqueued its `count` jobs.
    pub async fn produced(&mut self) {
        for producer in self.producers.drain(..) {
            producer.await.expect("producer");
        }
    }

    /// Stops producing, waits until the queue is drained (at most
    /// `within`; panics past it), then stops consuming.
    pub async fn drain(self, within: Duration) {
        self.scenario.ctx.produce.store(true, Ordering::Relaxed);
        for producer in self.producers {
            producer.await.expect("producer");
        }
        let deadline = Instant::now() + within;
        while !self.scenario.drained(&self.queue).await {
            assert!(
                Instant::now() < deadline,
                "{} not drained within {within:?}",
                self.queue
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.scenario.ctx.work.store(true, Ordering::Relaxed);
        for consumer in self.consumers {
            consumer.await.expect("consumer");
        }
    }
}
