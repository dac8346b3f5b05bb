//! The HTTP load: what each client of a run does, over HTTP/1.1 (a
//! connection per client) or HTTP/2 (clients share a few connections).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::args::Op;
use crate::h2;
use crate::http1;
use crate::jobs::{self, BATCH, Bodies};
use crate::measure::{Load, TaskStats, Window};

/// Upper bound on loop iterations of one client in one run.
const MAX_ITERATIONS: u64 = 2_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

impl Protocol {
    pub fn path(self) -> &'static str {
        match self {
            Self::Http1 => "http1",
            Self::Http2 => "http2",
        }
    }
}

/// Where prioq listens, and the queue the clients use.
#[derive(Debug, Clone)]
pub struct Target {
    addr: SocketAddr,
    authority: String,
    /// `/v1/queues/{queue}`.
    queue_path: String,
}

impl Target {
    pub fn new(addr: SocketAddr, queue: &str) -> Self {
        Self {
            addr,
            authority: addr.to_string(),
            queue_path: format!("/v1/queues/{queue}"),
        }
    }
}

/// A request ready to go, in the form its protocol sends.
#[derive(Debug, Clone)]
enum Request {
    Http1(Bytes),
    Http2 { uri: http::Uri, body: Bytes },
}

impl Request {
    fn post(protocol: Protocol, target: &Target, path: &str, body: &str) -> Self {
        match protocol {
            Protocol::Http1 => Self::Http1(http1::post(&target.authority, path, body)),
            Protocol::Http2 => Self::Http2 {
                uri: format!("http://{}{path}", target.authority)
                    .parse()
                    .unwrap_or_else(|e| panic!("bad path {path}: {e}")),
                body: Bytes::copy_from_slice(body.as_bytes()),
            },
        }
    }
}

/// One client's way to prioq.
#[derive(Debug)]
enum Client {
    Http1(http1::Connection),
    Http2(h2::Client),
}

impl Client {
    /// Status and body, or what went wrong.
    async fn send(&mut self, request: &Request) -> Result<(u16, Bytes), String> {
        match (self, request) {
            (Self::Http1(con), Request::Http1(wire)) => {
                con.send(wire).await.map_err(|e| e.to_string())
            }
            (Self::Http2(client), Request::Http2 { uri, body }) => client
                .send(uri, body.clone())
                .await
                .map_err(|e| format!("{e:#}")),
            _ => Err("request built for the other protocol".into()),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Claimed {
    jobs: Vec<Leased>,
    #[serde(default)]
    acked: Vec<AckResult>,
}

#[derive(Debug, Deserialize)]
struct Leased {
    id: String,
    lease_token: String,
}

#[derive(Debug, Deserialize)]
struct AckResults {
    results: Vec<AckResult>,
}

#[derive(Debug, Deserialize)]
struct AckResult {
    status: u16,
}

/// How a worker-loop run splits its `c` clients: half enqueue, half
/// claim; at c = 1, one of each.
pub fn worker_split(c: usize) -> (usize, usize) {
    ((c / 2).max(1), (c - c / 2).max(1))
}

#[derive(Debug)]
pub struct HttpLoad {
    op: Op,
    protocol: Protocol,
    target: Target,
    /// HTTP/2: the shared connections.
    h2: Vec<h2::Client>,
    enqueue: Request,
    enqueue_batch: Request,
    claim: Request,
    claim_batch: Request,
    /// Worker loop: how many clients enqueue, and the jobs they may still
    /// enqueue: one more for each job claimed, so the depth holds.
    producers: usize,
    credits: Semaphore,
    clients: usize,
    workers: usize,
}

impl HttpLoad {
    pub async fn new(
        target: Target,
        op: Op,
        protocol: Protocol,
        clients: usize,
        h2_connections: usize,
    ) -> Result<Self> {
        let mut h2 = Vec::new();
        if protocol == Protocol::Http2 {
            for _ in 0..h2_connections.min(clients) {
                h2.push(h2::Client::connect(target.addr).await?);
            }
        }
        let bodies = Bodies::new();
        let queue = &target.queue_path;
        let post = |path: &str, body: &str| Request::post(protocol, &target, path, body);
        Ok(Self {
            enqueue: post(&format!("{queue}/jobs"), &bodies.single),
            enqueue_batch: post(&format!("{queue}/jobs/batch"), &bodies.batch),
            claim: post(&format!("{queue}/claim"), &bodies.claim),
            claim_batch: post(&format!("{queue}/claim"), &bodies.claim_batch),
            producers: worker_split(clients).0,
            workers: worker_split(clients).1,
            credits: Semaphore::new(clients),
            clients,
            op,
            protocol,
            target,
            h2,
        })
    }

    /// The number of tasks a run of `clients` clients has.
    pub fn tasks(op: Op, clients: usize) -> usize {
        if op == Op::WorkerLoop {
            let (producers, workers) = worker_split(clients);
            producers + workers
        } else {
            clients
        }
    }

    /// The connections the run opens.
    pub fn connections(&self) -> usize {
        match self.protocol {
            Protocol::Http1 => Self::tasks(self.op, self.clients),
            Protocol::Http2 => self.h2.len(),
        }
    }

    pub fn producers(&self) -> Option<usize> {
        (self.op == Op::WorkerLoop).then_some(self.producers)
    }

    fn client(&self, index: usize) -> Client {
        match self.protocol {
            Protocol::Http1 => Client::Http1(http1::Connection::new(self.target.addr)),
            Protocol::Http2 => Client::Http2(self.h2[index % self.h2.len()].clone()),
        }
    }

    fn post(&self, path: &str, body: &str) -> Request {
        Request::post(self.protocol, &self.target, path, body)
    }

    /// One call; the body when the status is `want`.
    async fn call(
        &self,
        client: &mut Client,
        request: &Request,
        name: &'static str,
        want: u16,
        st: &mut TaskStats,
        w: &Window,
    ) -> Option<(Bytes, Instant)> {
        let start = Instant::now();
        let result = client.send(request).await;
        let end = Instant::now();
        match result {
            Ok((status, body)) if status == want => {
                st.record(w, name, start, end);
                Some((body, end))
            }
            Ok((status, body)) => {
                st.error(format!(
                    "{name}: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
                None
            }
            Err(error) => {
                st.error(format!("{name}: {error}"));
                None
            }
        }
    }

    /// When the enqueue was answered, if it was.
    async fn enqueue(
        &self,
        client: &mut Client,
        st: &mut TaskStats,
        w: &Window,
    ) -> Option<Instant> {
        let (request, name, want) = if self.op.batched() {
            (&self.enqueue_batch, "enqueue_batch", 200)
        } else {
            (&self.enqueue, "enqueue", 201)
        };
        let (_, end) = self.call(client, request, name, want, st, w).await?;
        Some(end)
    }

    async fn claim(&self, client: &mut Client, st: &mut TaskStats, w: &Window) -> Vec<Leased> {
        let (request, name, max) = if self.op.batched() {
            (&self.claim_batch, "claim_batch", BATCH)
        } else {
            (&self.claim, "claim", 1)
        };
        let Some((body, end)) = self.call(client, request, name, 200, st, w).await else {
            return Vec::new();
        };
        match serde_json::from_slice::<Claimed>(&body) {
            Ok(claimed) => {
                if claimed.jobs.len() < max {
                    st.short_claim(w, end);
                }
                claimed.jobs
            }
            Err(error) => {
                st.error(format!("{name}: {error}"));
                Vec::new()
            }
        }
    }

    async fn ack(&self, client: &mut Client, leased: &[Leased], st: &mut TaskStats, w: &Window) {
        let queue = &self.target.queue_path;
        if self.op.batched() {
            if leased.is_empty() {
                return;
            }
            let body = jobs::ack_many(leased.iter().map(|l| (&*l.id, &*l.lease_token)));
            let request = self.post(&format!("{queue}/ack"), &body);
            let Some((body, end)) = self.call(client, &request, "ack_many", 200, st, w).await
            else {
                return;
            };
            match serde_json::from_slice::<AckResults>(&body) {
                Ok(results) => {
                    let acked = results.results.iter().filter(|r| r.status == 204).count();
                    st.finished(w, end, acked as u64);
                    if acked < leased.len() {
                        st.error(format!("ack_many: {acked} of {} acked", leased.len()));
                    }
                }
                Err(error) => st.error(format!("ack_many: {error}")),
            }
        } else {
            for job in leased {
                let path = format!("{queue}/jobs/{}/ack", job.id);
                let request = self.post(&path, &jobs::ack_single(&job.lease_token));
                if let Some((_, end)) = self.call(client, &request, "ack", 204, st, w).await {
                    st.finished(w, end, 1);
                }
            }
        }
    }

    /// Every other op: enqueue, or claim and ack, or all three, in turn.
    async fn cycle(&self, client: &mut Client, st: &mut TaskStats, w: &Window) {
        let per_enqueue = if self.op.batched() { BATCH } else { 1 } as u64;
        for _ in 0..MAX_ITERATIONS {
            if w.over() {
                break;
            }
            let errors = st.errors;
            let enqueued = if self.op.enqueues() {
                self.enqueue(client, st, w).await
            } else {
                Some(Instant::now())
            };
            match enqueued {
                Some(end) if !self.op.claims() => st.finished(w, end, per_enqueue),
                Some(_) => {
                    let leased = self.claim(client, st, w).await;
                    self.ack(client, &leased, st, w).await;
                }
                None => {}
            }
            if st.errors > errors {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// A worker-loop producer: enqueues while it has credit.
    async fn produce(&self, client: &mut Client, st: &mut TaskStats, w: &Window) {
        for _ in 0..MAX_ITERATIONS {
            let Ok(Ok(permit)) =
                tokio::time::timeout_at(w.end.into(), self.credits.acquire()).await
            else {
                return;
            };
            permit.forget();
            if self.enqueue(client, st, w).await.is_none() {
                self.credits.add_permits(1);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// A worker-loop worker: each claim acknowledges the job the one before
    /// leased.
    async fn work(&self, client: &mut Client, st: &mut TaskStats, w: &Window) {
        let claim_path = format!("{}/claim", self.target.queue_path);
        let mut held: Option<Leased> = None;
        for _ in 0..MAX_ITERATIONS {
            if w.over() {
                break;
            }
            let acking = held.take();
            let acking_request;
            let (request, name) = match &acking {
                Some(job) => {
                    acking_request =
                        self.post(&claim_path, &jobs::claim_acking(&job.id, &job.lease_token));
                    (&acking_request, "claim_ack")
                }
                None => (&self.claim, "claim"),
            };
            let answer = self.call(client, request, name, 200, st, w).await;
            let parsed = answer.map(|(body, end)| (serde_json::from_slice::<Claimed>(&body), end));
            match parsed {
                Some((Ok(claimed), end)) => {
                    let acked = claimed.acked.iter().filter(|a| a.status == 204).count();
                    st.finished(w, end, acked as u64);
                    if acking.is_some() && acked == 0 {
                        st.error(format!("{name}: the ack in the claim failed"));
                    }
                    self.credits.add_permits(claimed.jobs.len());
                    if claimed.jobs.is_empty() {
                        st.short_claim(w, end);
                    }
                    held = claimed.jobs.into_iter().next();
                }
                Some((Err(error), _)) => st.error(format!("{name}: {error}")),
                None => {
                    // The ack may not have happened: bring it again.
                    held = acking;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        // Leave nothing leased to the next run on this queue.
        if let Some(job) = held {
            let path = format!("{}/jobs/{}/ack", self.target.queue_path, job.id);
            let request = self.post(&path, &jobs::ack_single(&job.lease_token));
            let _ = client.send(&request).await;
        }
    }
}

impl Load for HttpLoad {
    fn claims_in_flight(&self) -> u64 {
        match self.op {
            Op::WorkerLoop => self.workers as u64,
            op if op.claims() => (self.clients * if op.batched() { BATCH } else { 1 }) as u64,
            _ => 0,
        }
    }

    async fn task(self: Arc<Self>, index: usize, w: Window) -> TaskStats {
        let mut st = TaskStats::default();
        let mut client = self.client(index);
        match self.op {
            Op::WorkerLoop if index < self.producers => {
                self.produce(&mut client, &mut st, &w).await;
            }
            Op::WorkerLoop => self.work(&mut client, &mut st, &w).await,
            _ => self.cycle(&mut client, &mut st, &w).await,
        }
        st
    }
}
