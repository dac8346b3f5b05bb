//! The request path, counted rather than timed: prioq served in this
//! process on a runtime of its own, sent one kind of request after another
//! over keep-alive HTTP/1.1 on loopback, and per request what prioq's
//! threads did: heap allocations (reallocations included) and their bytes,
//! how often a runtime worker went to sleep and had to be woken (a park),
//! the threads' context switches, and the commands Redis ran. Counts, not
//! times: they come out the same on a busy machine, so two versions of the
//! code compare exactly where timings move by tens of percent.
//!
//! The allocator of this bench wraps the system's and attributes each
//! allocation to the thread that made it; prioq's runtime threads are
//! entered in one group when they start, so the load generator's own
//! allocations (on the bench's main thread) are not counted.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result, bail, ensure};
use prioq::config::Config;
use prioq::startup::Application;
use prioq_testbed::RedisServer;
use tracking_allocator::{
    AllocationGroupId, AllocationGroupToken, AllocationRegistry, AllocationTracker,
};

use crate::args::Args;
use crate::common::redis_info;
use crate::common::table::{Align, Table};
use crate::http1::{Connection, post};
use crate::jobs::{Bodies, LEASE_MS, ack_single, claim_acking};
use crate::report;

/// Allocations and their bytes made by prioq's threads.
#[derive(Debug, Default)]
struct Counts {
    allocations: AtomicU64,
    bytes: AtomicU64,
}

static COUNTS: Counts = Counts {
    allocations: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
};

/// Counts the allocations of every group but the root one (the threads
/// that entered none: the bench's own).
#[derive(Debug)]
struct ServerThreads;

impl AllocationTracker for ServerThreads {
    fn allocated(&self, _addr: usize, size: usize, _wrapped: usize, group: AllocationGroupId) {
        if group != AllocationGroupId::ROOT {
            COUNTS.allocations.fetch_add(1, Ordering::Relaxed);
            COUNTS.bytes.fetch_add(size as u64, Ordering::Relaxed);
        }
    }

    fn deallocated(
        &self,
        _addr: usize,
        _size: usize,
        _wrapped: usize,
        _source: AllocationGroupId,
        _current: AllocationGroupId,
    ) {
    }
}

/// Requests sent per kind and concurrency, after as many unmeasured.
const REQUESTS: usize = 2000;
const CONCURRENCY: [usize; 2] = [1, 16];

/// One kind of request the path is counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Enqueue = 0,
    Claim = 1,
    Ack = 2,
    ClaimAcking = 3,
}

impl Kind {
    const ALL: [Self; 4] = [Self::Enqueue, Self::Claim, Self::Ack, Self::ClaimAcking];

    fn label(self) -> &'static str {
        match self {
            Self::Enqueue => "enqueue",
            Self::Claim => "claim (1 job)",
            Self::Ack => "ack",
            Self::ClaimAcking => "claim acking the previous job",
        }
    }
}

/// What prioq's threads did over one measured stretch, in all.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    allocations: u64,
    bytes: u64,
    parks: u64,
    switches: u64,
    commands: u64,
}

impl Sample {
    fn since(self, before: Self) -> Self {
        Self {
            allocations: self.allocations - before.allocations,
            bytes: self.bytes - before.bytes,
            parks: self.parks - before.parks,
            switches: self.switches - before.switches,
            commands: self.commands - before.commands,
        }
    }
}

/// The prioq instance under count: its runtime's handle and threads.
struct Served {
    addr: SocketAddr,
    handle: tokio::runtime::Handle,
    threads: Arc<Mutex<BTreeSet<String>>>,
    redis: redis::aio::MultiplexedConnection,
}

impl Served {
    async fn sample(&mut self) -> Result<Sample> {
        let metrics = self.handle.metrics();
        let parks = (0..metrics.num_workers())
            .map(|w| metrics.worker_park_count(w))
            .sum();
        let threads = self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let switches = threads.iter().map(|t| context_switches(t)).sum();
        let stats = redis_info::info(&mut self.redis, &["stats"]).await?;
        let commands = stats
            .get("total_commands_processed")
            .and_then(|n| n.parse().ok())
            .context("INFO stats without total_commands_processed")?;
        Ok(Sample {
            allocations: COUNTS.allocations.load(Ordering::Relaxed),
            bytes: COUNTS.bytes.load(Ordering::Relaxed),
            parks,
            switches,
            commands,
        })
    }
}

/// Voluntary and involuntary context switches of a thread so far (0 once
/// it ended).
fn context_switches(thread: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{thread}/status"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("ctxt_switches:"))
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Counts the request path and writes `request-path.md` (with the run's
/// tag) into the results folder.
pub fn count(args: &Args) -> Result<()> {
    AllocationRegistry::set_global_tracker(ServerThreads)
        .map_err(|_| anyhow::anyhow!("an allocation tracker was already set"))?;
    let redis = RedisServer::start();
    let threads = Arc::new(Mutex::new(BTreeSet::new()));
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start({
            let threads = Arc::clone(&threads);
            move || {
                if let Ok(path) = std::fs::read_link("/proc/thread-self") {
                    threads
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(path.to_string_lossy().into_owned());
                }
                // The guard lives as long as the thread: every allocation
                // the thread makes is prioq's.
                let token = Box::leak(Box::new(
                    AllocationGroupToken::register().expect("an allocation group"),
                ));
                std::mem::forget(token.enter());
            }
        })
        .build()?;
    let mut config = Config::with_defaults();
    config.listen = "127.0.0.1:0".parse()?;
    config.redis_url = redis.url();
    // No sweep while counting: its work is not a request's.
    config.sweep_interval_ms = 3_600_000;
    let app = server_runtime.block_on(Application::build(config))?;
    let addr = app.local_addr();
    let shutdown = app.shutdown_token();
    let stopped = server_runtime.spawn(app.run_until_stopped());

    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let rows = client_runtime.block_on(async {
        let con = redis_info::connect(&redis.client()).await?;
        let mut served = Served {
            addr,
            handle: server_runtime.handle().clone(),
            threads,
            redis: con,
        };
        AllocationRegistry::enable_tracking();
        let mut rows = Vec::new();
        for concurrency in CONCURRENCY {
            for kind in Kind::ALL {
                let per_request = measure(&mut served, kind, concurrency).await?;
                rows.push((kind, concurrency, per_request));
            }
        }
        AllocationRegistry::disable_tracking();
        anyhow::Ok(rows)
    })?;
    shutdown.cancel();
    server_runtime.block_on(stopped)??;

    let mut table = Table::new([
        ("request", Align::Left),
        ("clients", Align::Right),
        ("allocations", Align::Right),
        ("bytes allocated", Align::Right),
        ("worker parks", Align::Right),
        ("context switches", Align::Right),
        ("Redis commands", Align::Right),
    ]);
    for (kind, concurrency, [allocations, bytes, parks, switches, commands]) in &rows {
        table.row([
            kind.label().to_owned(),
            concurrency.to_string(),
            format!("{allocations:.1}"),
            format!("{bytes:.0}"),
            format!("{parks:.2}"),
            format!("{switches:.2}"),
            format!("{commands:.2}"),
        ]);
    }
    let mut text = String::new();
    writeln!(
        text,
        "# The request path, counted\n\nPer request, over {REQUESTS} requests of each kind \
         after as many unmeasured, on keep-alive HTTP/1.1 connections (one per client); \
         prioq in the bench's process on a runtime of its own; see \
         docs/performance.md.\n"
    )?;
    text.push_str(table.text());
    print!("{text}");
    report::write(&report::out_file(args, "request-path", "md"), &text)
}

/// Sends `kind` requests from `concurrency` clients, each on its own
/// connection; answers the counts per request of the measured half.
async fn measure(served: &mut Served, kind: Kind, concurrency: usize) -> Result<[f64; 5]> {
    let queue = format!("path-{}-{concurrency}", kind as u8);
    let per_client = REQUESTS / concurrency;
    let bodies = Bodies::new();
    let enqueue = post(
        &served.addr.to_string(),
        &format!("/v1/queues/{queue}/jobs"),
        &bodies.single,
    );
    // What each kind needs waiting in the queue: jobs to claim, or leases
    // to ack; both rounds (unmeasured, measured) at once.
    let mut setup = Connection::new(served.addr);
    let mut leases = Vec::new();
    if kind != Kind::Enqueue {
        for _ in 0..2 * (REQUESTS + concurrency) {
            expect_ok(setup.send(&enqueue).await?)?;
        }
    }
    if kind == Kind::Ack {
        for _ in 0..2 * REQUESTS {
            leases.push(claim(&mut setup, served.addr, &queue, &bodies.claim).await?);
        }
    }
    let leases = Arc::new(Mutex::new(leases));
    let mut measured = Sample::default();
    for round in 0..2 {
        let before = served.sample().await?;
        let clients = (0..concurrency).map(|_| {
            let (queue, leases, enqueue, claim_body) = (
                queue.clone(),
                Arc::clone(&leases),
                enqueue.clone(),
                bodies.claim.clone(),
            );
            let addr = served.addr;
            async move {
                let mut con = Connection::new(addr);
                let mut held = None;
                if kind == Kind::ClaimAcking {
                    held = Some(claim(&mut con, addr, &queue, &claim_body).await?);
                }
                for _ in 0..per_client {
                    match kind {
                        Kind::Enqueue => expect_ok(con.send(&enqueue).await?)?,
                        Kind::Claim => {
                            claim(&mut con, addr, &queue, &claim_body).await?;
                        }
                        Kind::Ack => {
                            let (id, token) = leases
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .pop()
                                .context("no lease left to ack")?;
                            let path = format!("/v1/queues/{queue}/jobs/{id}/ack");
                            let answer = con
                                .send(&post(&addr.to_string(), &path, &ack_single(&token)))
                                .await?;
                            ensure!(answer.0 == 204, "ack answered {}", answer.0);
                        }
                        Kind::ClaimAcking => {
                            let (id, token) = held.take().context("a job held")?;
                            held = Some(
                                claim(&mut con, addr, &queue, &claim_acking(&id, &token)).await?,
                            );
                        }
                    }
                }
                anyhow::Ok(())
            }
        });
        for outcome in futures_util::future::join_all(clients).await {
            outcome?;
        }
        if round == 1 {
            measured = served.sample().await?.since(before);
        }
    }
    // Each sample's own INFO is one command.
    let commands = measured.commands.saturating_sub(1);
    let n = (per_client * concurrency) as f64;
    Ok([
        measured.allocations as f64 / n,
        measured.bytes as f64 / n,
        measured.parks as f64 / n,
        measured.switches as f64 / n,
        commands as f64 / n,
    ])
}

fn expect_ok((status, body): (u16, bytes::Bytes)) -> Result<()> {
    if !(200..300).contains(&status) {
        bail!("answered {status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(())
}

/// Claims one job; its id and lease token.
async fn claim(
    con: &mut Connection,
    addr: SocketAddr,
    queue: &str,
    body: &str,
) -> Result<(String, String)> {
    let (status, answer) = con
        .send(&post(
            &addr.to_string(),
            &format!("/v1/queues/{queue}/claim"),
            body,
        ))
        .await?;
    ensure!(status == 200, "claim answered {status}");
    let answer: serde_json::Value = serde_json::from_slice(&answer)?;
    let job = &answer["jobs"][0];
    match (job["id"].as_str(), job["lease_token"].as_str()) {
        (Some(id), Some(token)) => Ok((id.to_owned(), token.to_owned())),
        _ => bail!("claim of {queue} answered no job (lease {LEASE_MS} ms): {answer}"),
    }
}
