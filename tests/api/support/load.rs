//! Load through clients that retry as README says and file every answer
//! in a [`Ledger`]: a client of one queue over any number of instances or
//! a proxy, producers, consumers, and the producers-and-consumers load of
//! the restart and failover tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prioq::config::Config;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::app::{TestApp, spawn_app_with};
use super::clock::{now_ms, until};
use super::ledger::{EndKind, Ledger, Outcome, Reply};

/// How long a client keeps retrying one request.
const PATIENCE: Duration = Duration::from_secs(20);

/// How a lease's ack ended for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acked {
    /// 204.
    Yes,
    /// 404 after a retry: the first attempt went through.
    Presumably,
    /// 409 `lease_lost` (or 404 at once): the lease was stale.
    Refused,
    /// Gave up retrying.
    Unknown,
}

/// A client of one queue, through any of `bases` in turn (instances, or a
/// proxy), filing every answer in its ledger.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    bases: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    queue: String,
    pub(crate) ledger: Arc<Ledger>,
}

impl Client {
    pub(crate) fn new(ledger: Arc<Ledger>, bases: Vec<String>, queue: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                // Above the longest long poll: a hang fails as no answer.
                .timeout(Duration::from_secs(30))
                .build()
                .expect("HTTP client"),
            bases: Arc::new(bases),
            next: Arc::default(),
            queue: queue.to_owned(),
            ledger,
        }
    }

    fn url(&self, rest: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.bases.len();
        format!("{}/v1/queues/{}{rest}", self.bases[n], self.queue)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let Ok(response) = request.send().await else {
            return Reply {
                status: 0,
                body: Value::Null,
            };
        };
        let status = response.status().as_u16();
        let bytes = response.bytes().await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Reply { status, body }
    }

    pub(crate) async fn post(&self, rest: &str, body: &Value) -> Reply {
        self.send(self.http.post(self.url(rest)).json(body)).await
    }

    pub(crate) async fn get(&self, rest: &str) -> Reply {
        self.send(self.http.get(self.url(rest))).await
    }

    /// Counts a retried answer by route and status.
    fn retried(&self, route: &str, reply: &Reply) {
        let status = match reply.status {
            0 => "no answer".to_owned(),
            s => s.to_string(),
        };
        self.ledger
            .count(&format!("{route} retried after {status}"));
    }

    /// Posts `body` to `path` until the answer is not a retryable one, or
    /// [`PATIENCE`] runs out; `file` sees every answer and its send time.
    async fn retrying(
        &self,
        route: &str,
        path: &str,
        body: &Value,
        mut file: impl FnMut(i64, &Reply),
    ) -> Reply {
        let deadline = Instant::now() + PATIENCE;
        let mut pause = Duration::from_millis(10);
        loop {
            let sent_ms = now_ms();
            let reply = self.post(path, body).await;
            file(sent_ms, &reply);
            if !reply.retryable() {
                return reply;
            }
            if Instant::now() > deadline {
                self.ledger.violation(format!(
                    "{route}: still {reply:?} after {PATIENCE:?} of retries"
                ));
                return reply;
            }
            self.retried(route, &reply);
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }

    /// Enqueues job `id`, retrying with the same id until the answer is
    /// 201, or 200 "already there"; true when the job is known to exist.
    pub(crate) async fn enqueue(&self, id: &str, mut body: Value) -> bool {
        body["id"] = json!(id);
        let reply = self
            .retrying("enqueue", "/jobs", &body, |_, reply| {
                self.ledger.enqueue_answered(id, reply)
            })
            .await;
        matches!(reply.status, 200 | 201)
    }

    /// One claim (not retried: a lost answer may have leased jobs to
    /// nobody, and they come back after their lease); the deliveries.
    pub(crate) async fn claim(
        &self,
        holder: &str,
        lease_ms: u64,
        max_jobs: u32,
        wait_ms: u64,
    ) -> Vec<usize> {
        let reply = self
            .post(
                "/claim",
                &json!({"worker": holder, "lease_ms": lease_ms, "max_jobs": max_jobs, "wait_ms": wait_ms}),
            )
            .await;
        if reply.retryable() {
            self.retried("claim", &reply);
        }
        self.ledger.claim_answered(&reply, lease_ms, holder)
    }

    /// Acks a delivery, retrying with the same token.
    pub(crate) async fn ack(&self, delivery: usize) -> Acked {
        let lease = self.ledger.delivery(delivery);
        let path = format!("/jobs/{}/ack", lease.id);
        let body = json!({"lease_token": lease.token});
        let mut retried = false;
        let reply = self
            .retrying("ack", &path, &body, |sent_ms, reply| {
                self.ledger.ended(delivery, EndKind::Ack, sent_ms, reply);
                retried |= reply.outcome() == Outcome::Unknown;
            })
            .await;
        let acked = match reply.status {
            204 => Acked::Yes,
            404 if retried => Acked::Presumably,
            404 | 409 => Acked::Refused,
            _ => Acked::Unknown,
        };
        self.ledger.count(match acked {
            Acked::Yes => "acks answered 204",
            Acked::Presumably => "acks answered 404 after a retry (presumed done)",
            Acked::Refused => "acks refused (stale lease: 409 or 404)",
            Acked::Unknown => "acks given up",
        });
        acked
    }

    /// Nacks a delivery, retrying with the same token; the final answer.
    pub(crate) async fn nack(
        &self,
        delivery: usize,
        delay_ms: u64,
        error: &str,
        dead: bool,
    ) -> Reply {
        let lease = self.ledger.delivery(delivery);
        let path = format!("/jobs/{}/nack", lease.id);
        let body =
            json!({"lease_token": lease.token, "delay_ms": delay_ms, "error": error, "dead": dead});
        let kind = EndKind::Nack {
            error: Some(error.to_owned()),
            dead,
        };
        let reply = self
            .retrying("nack", &path, &body, |sent_ms, reply| {
                self.ledger.ended(delivery, kind.clone(), sent_ms, reply);
            })
            .await;
        self.ledger.count(match reply.status {
            200 => "nacks answered 200",
            409 => "nacks refused or answered 409 after a retry",
            _ => "nacks otherwise answered",
        });
        reply
    }

    /// Extends a delivery's lease by `lease_ms` from now (not retried).
    pub(crate) async fn extend(&self, delivery: usize, lease_ms: u64) -> Reply {
        let lease = self.ledger.delivery(delivery);
        let reply = self
            .post(
                &format!("/jobs/{}/extend", lease.id),
                &json!({"lease_token": lease.token, "lease_ms": lease_ms}),
            )
            .await;
        if reply.retryable() {
            self.retried("extend", &reply);
        }
        self.ledger.extended(delivery, &reply);
        self.ledger
            .count(&format!("extends answered {}", reply.status));
        reply
    }

    /// The queue's stats, if the service answers.
    pub(crate) async fn stats(&self) -> Option<Value> {
        let reply = self.get("").await;
        (reply.status == 200).then_some(reply.body)
    }

    /// Waits until the queue holds no pending, scheduled or processing job
    /// (every job acked or dead), failing after `within`.
    pub(crate) async fn until_drained(&self, within: Duration) {
        until(within, "the queue drains", || async {
            self.stats()
                .await
                .is_some_and(|s| s["pending"] == 0 && s["scheduled"] == 0 && s["processing"] == 0)
        })
        .await;
    }
}

/// Enqueues jobs `{name}-0`, `{name}-1`... until `stop` or `count` jobs,
/// one every `pace`, each retried until it is known to exist.
pub(crate) async fn produce(
    client: Client,
    name: String,
    count: usize,
    pace: Duration,
    stop: CancellationToken,
) {
    for n in 0..count {
        if stop.is_cancelled() {
            return;
        }
        let priority = n % 3;
        client
            .enqueue(
                &format!("{name}-{n}"),
                json!({"task": "t", "priority": priority}),
            )
            .await;
        tokio::time::sleep(pace).await;
    }
}

/// Claims and acks until `stop`.
pub(crate) async fn consume(client: Client, name: String, lease_ms: u64, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let deliveries = client.claim(&name, lease_ms, 4, 200).await;
        if deliveries.is_empty() {
            // A refused or lost claim: do not spin while Redis is away.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for delivery in deliveries {
            client.ack(delivery).await;
        }
    }
}

/// Two instances on `config`, and a client of queue `queue` that sends its
/// requests to both in turn, filing them in its ledger.
pub(crate) async fn two_instances(
    config: &Config,
    queue: &str,
) -> (TestApp, TestApp, Arc<Ledger>, Client) {
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config.clone()).await;
    let ledger = Arc::new(Ledger::default());
    let client = Client::new(
        Arc::clone(&ledger),
        vec![a.base.clone(), b.base.clone()],
        queue,
    );
    (a, b, ledger, client)
}

/// The load of the restart tests: producers (a job every 3 ms, up to 5,000
/// each) and consumers, through one client, until drained.
pub(crate) struct Load {
    stop_producing: CancellationToken,
    stop_consuming: CancellationToken,
    producers: Vec<tokio::task::JoinHandle<()>>,
    consumers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    pub(crate) fn start(
        client: &Client,
        producers: usize,
        consumers: usize,
        lease_ms: u64,
    ) -> Self {
        let stop_producing = CancellationToken::new();
        let stop_consuming = CancellationToken::new();
        let producers = (0..producers)
            .map(|p| {
                tokio::spawn(produce(
                    client.clone(),
                    format!("p{p}"),
                    5000,
                    Duration::from_millis(3),
                    stop_producing.clone(),
                ))
            })
            .collect();
        let consumers = (0..consumers)
            .map(|c| {
                tokio::spawn(consume(
                    client.clone(),
                    format!("c{c}"),
                    lease_ms,
                    stop_consuming.clone(),
                ))
            })
            .collect();
        Self {
            stop_producing,
            stop_consuming,
            producers,
            consumers,
        }
    }

    /// Stops producing, waits until every job the client created is acked
    /// (at most `within`), then stops consuming.
    pub(crate) async fn drain(self, client: &Client, within: Duration) {
        self.stop_producing.cancel();
        for producer in self.producers {
            producer.await.expect("producer");
        }
        client.until_drained(within).await;
        self.stop_consuming.cancel();
        for consumer in self.consumers {
            consumer.await.expect("consumer");
        }
    }
}

/// Waits until `condition` holds on the ledger, failing after `within`.
pub(crate) async fn until_ledger(
    ledger: &Ledger,
    within: Duration,
    what: &str,
    condition: impl Fn(&Ledger) -> bool,
) {
    until(within, what, || {
        let holds = condition(ledger);
        async move { holds }
    })
    .await;
}
