//! Reliability under faults: Redis restarted under load, one of two
//! instances killed behind nginx, storms of crashing worker processes,
//! Redis stalls, clients that hang up during a long poll, a thousand long
//! polls at once. Real processes on loopback, every loop bounded.
//!
//! The load tests end with an accounting of every job ([`Ledger::audit`]):
//! what the clients saw (each enqueue answer, each lease handed out, each
//! ack, nack and extend) checked against what Redis holds at the end. Every
//! job created is acked exactly once or still pending, scheduled,
//! processing or dead; none is missing or doubled; no ack from a stale
//! lease is accepted; two leases of one job never overlap; attempts count
//! exactly the deliveries that ended without an ack.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys};
use prioq::queue::store::record::Record;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::endpoints::ms_of;
use crate::guide::claim_in_process_and_kill_answer;
use crate::ops::within;
use crate::proxy::Nginx;
use crate::support::{
    RedisServer, Service, TempDir, TestApp, function_calls, redis, redis_connection, script_calls,
    spawn_app_with, test_config, unique_prefix, until, until_script_calls_exceed,
};

// ---------------------------------------------------------------------------
// What the clients saw.
// ---------------------------------------------------------------------------

/// Milliseconds since the epoch by this machine's clock. Redis runs here
/// too, and the service's timestamps come from Redis `TIME`, so the two
/// compare directly.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

/// Both sides read the same clock in whole milliseconds.
const CLOCK_SLACK_MS: i64 = 2;

/// How a request ended, for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It took effect (2xx).
    Done,
    /// It certainly had no effect: a 404 or 409, or a 503 that says so.
    NoEffect,
    /// It may have taken effect: a 502, a 503 "effect unknown", no answer.
    Unknown,
}

/// An answer: status (0 when none came) and body (JSON, or the text of a
/// proxy's error page).
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

impl Reply {
    /// Answers a client retries: the proxy's 502/504, the service's 503,
    /// or none at all.
    pub(crate) fn retryable(&self) -> bool {
        matches!(self.status, 0 | 502 | 503 | 504)
    }

    /// A 503 whose `detail` says the request had no effect.
    fn said_no_effect(&self) -> bool {
        self.status == 503
            && self.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("had no effect"))
    }

    fn outcome(&self) -> Outcome {
        match self.status {
            200..=299 => Outcome::Done,
            _ if self.said_no_effect() => Outcome::NoEffect,
            0 | 502..=504 => Outcome::Unknown,
            _ => Outcome::NoEffect,
        }
    }

    /// What is wrong with a 503 (it must be a `backend_unavailable`
    /// problem), if anything.
    fn bad_503(&self) -> Option<String> {
        (self.status == 503 && self.body["code"] != "backend_unavailable")
            .then(|| format!("a 503 that is not a backend_unavailable problem: {self:?}"))
    }
}

/// The answers to one client id's enqueues.
#[derive(Debug, Default, Clone)]
struct EnqueueTally {
    /// 201: this request created the job.
    created: u64,
    /// 200 with `created: false`: the job was known already.
    existing: u64,
    /// Answers that leave open whether the request created the job.
    unknown: u64,
    /// When the answers of those that created the job, or may have, came
    /// back: each creation happened before.
    creations_answered_ms: Vec<i64>,
}

/// How a lease was ended, or tried to be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EndKind {
    Ack,
    Nack { error: Option<String>, dead: bool },
}

#[derive(Debug, Clone)]
struct End {
    kind: EndKind,
    /// When the request left, by this machine's clock.
    sent_ms: i64,
    outcome: Outcome,
}

/// One lease handed out to a client, as the claim's answer described it.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub(crate) id: String,
    pub(crate) token: String,
    pub(crate) holder: String,
    pub(crate) task: String,
    pub(crate) attempts: u64,
    pub(crate) last_error: Option<String>,
    /// The lease's start, Redis time: its deadline less `lease_ms`.
    pub(crate) start_ms: i64,
    /// Its deadline, as last confirmed by the claim or an extend.
    pub(crate) expires_ms: i64,
    ends: Vec<End>,
    abandoned: bool,
}

impl Delivery {
    fn ended(&self, kind: impl Fn(&EndKind) -> bool, outcome: Outcome) -> bool {
        self.ends
            .iter()
            .any(|end| kind(&end.kind) && end.outcome == outcome)
    }

    fn acked(&self) -> bool {
        self.ended(|k| *k == EndKind::Ack, Outcome::Done)
    }

    fn maybe_acked(&self) -> bool {
        !self.acked() && self.ended(|k| *k == EndKind::Ack, Outcome::Unknown)
    }

    fn nacked(&self) -> bool {
        self.ended(|k| matches!(k, EndKind::Nack { .. }), Outcome::Done)
    }

    fn maybe_nacked(&self) -> bool {
        !self.nacked() && self.ended(|k| matches!(k, EndKind::Nack { .. }), Outcome::Unknown)
    }

    /// The accepted nack, if there is one.
    fn nack(&self) -> Option<&EndKind> {
        self.ends
            .iter()
            .find(|end| matches!(end.kind, EndKind::Nack { .. }) && end.outcome == Outcome::Done)
            .map(|end| &end.kind)
    }

    /// The earliest moment the lease may have ended: its deadline, or a
    /// request of its holder (ack or nack) that was not refused.
    fn earliest_end_ms(&self) -> i64 {
        self.ends
            .iter()
            .filter(|end| end.outcome != Outcome::NoEffect)
            .map(|end| end.sent_ms)
            .fold(self.expires_ms, i64::min)
    }
}

#[derive(Debug, Default)]
struct Book {
    enqueues: BTreeMap<String, EnqueueTally>,
    deliveries: Vec<Delivery>,
    tokens: HashMap<String, usize>,
    /// Claims whose answer was lost: each may have leased jobs to nobody.
    unknown_claims: u64,
    counts: BTreeMap<String, u64>,
    violations: Vec<String>,
}

/// Everything the clients of one queue saw, for [`Ledger::audit`].
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    book: Mutex<Book>,
}

impl Ledger {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds one to the counter `what` of the report.
    pub(crate) fn count(&self, what: &str) {
        *self.book().counts.entry(what.to_owned()).or_default() += 1;
    }

    pub(crate) fn counted(&self, what: &str) -> u64 {
        self.book().counts.get(what).copied().unwrap_or(0)
    }

    /// Something a client saw that the contract does not allow.
    pub(crate) fn violation(&self, what: String) {
        self.book().violations.push(what);
    }

    /// Jobs created (201 answers) so far.
    pub(crate) fn created(&self) -> u64 {
        self.book().enqueues.values().map(|t| t.created).sum()
    }

    /// Acks answered 204 so far.
    pub(crate) fn acked(&self) -> u64 {
        self.counted("acks answered 204")
    }

    pub(crate) fn delivery(&self, index: usize) -> Delivery {
        self.book().deliveries[index].clone()
    }

    /// Every delivery so far, in the order the clients received them.
    pub(crate) fn deliveries(&self) -> Vec<Delivery> {
        self.book().deliveries.clone()
    }

    fn enqueue_answered(&self, id: &str, reply: &Reply) {
        let mut book = self.book();
        if let Some(problem) = reply.bad_503() {
            book.violations.push(problem);
        }
        let tally = book.enqueues.entry(id.to_owned()).or_default();
        match (reply.status, reply.outcome()) {
            (201, _) if reply.body["created"] == true => {
                tally.created += 1;
                tally.creations_answered_ms.push(now_ms());
            }
            (200, _) if reply.body["created"] == false => tally.existing += 1,
            (_, Outcome::Unknown) => {
                tally.unknown += 1;
                tally.creations_answered_ms.push(now_ms());
            }
            (503, Outcome::NoEffect) => {}
            _ => book
                .violations
                .push(format!("enqueue {id}: unexpected answer {reply:?}")),
        }
    }

    /// Files a job a claim answered with; returns its delivery number.
    fn delivered(&self, job: &Value, lease_ms: u64, holder: &str) -> Option<usize> {
        let mut book = self.book();
        let text = |field: &str| job[field].as_str().map(str::to_owned);
        let (Some(id), Some(token), Some(task)) = (text("id"), text("lease_token"), text("task"))
        else {
            book.violations
                .push(format!("a claimed job without id, task or token: {job}"));
            return None;
        };
        if job["state"] != "processing" || (!holder.is_empty() && job["worker"] != holder) {
            book.violations
                .push(format!("a claimed job not processing for {holder}: {job}"));
        }
        let expires_ms = ms_of(&job["lease_expires_at"]);
        let delivery = Delivery {
            id,
            token: token.clone(),
            holder: holder.to_owned(),
            task,
            attempts: job["attempts"].as_u64().expect("attempts"),
            last_error: text("last_error"),
            start_ms: expires_ms - i64::try_from(lease_ms).expect("fits"),
            expires_ms,
            ends: Vec::new(),
            abandoned: false,
        };
        let index = book.deliveries.len();
        if let Some(earlier) = book.tokens.insert(token, index) {
            let first = book.deliveries[earlier].clone();
            book.violations.push(format!(
                "one lease token handed out twice: {first:?} and {delivery:?}"
            ));
        }
        book.deliveries.push(delivery);
        *book.counts.entry("jobs delivered".into()).or_default() += 1;
        Some(index)
    }

    fn claim_failed(&self, reply: &Reply) {
        let mut book = self.book();
        if let Some(problem) = reply.bad_503() {
            book.violations.push(problem);
        }
        match reply.outcome() {
            Outcome::Unknown => book.unknown_claims += 1,
            Outcome::NoEffect if reply.status == 503 => {}
            _ => book
                .violations
                .push(format!("claim: unexpected answer {reply:?}")),
        }
    }

    fn ended(&self, delivery: usize, kind: EndKind, sent_ms: i64, reply: &Reply) {
        let mut book = self.book();
        if let Some(problem) = reply.bad_503() {
            book.violations.push(problem);
        }
        let expected = match kind {
            EndKind::Ack => matches!(reply.status, 204 | 404 | 409),
            EndKind::Nack { .. } => matches!(reply.status, 200 | 404 | 409),
        };
        if !expected && !reply.retryable() {
            let what = book.deliveries[delivery].clone();
            book.violations
                .push(format!("{kind:?} of {what:?}: unexpected answer {reply:?}"));
        }
        let outcome = reply.outcome();
        book.deliveries[delivery].ends.push(End {
            kind,
            sent_ms,
            outcome,
        });
    }

    fn extended(&self, delivery: usize, reply: &Reply) {
        let mut book = self.book();
        if reply.status == 200 {
            let expires = ms_of(&reply.body["lease_expires_at"]);
            let lease = &mut book.deliveries[delivery];
            if expires < lease.expires_ms {
                let text = format!("an extend moved a deadline back: {lease:?} to {expires}");
                book.violations.push(text);
            } else {
                lease.expires_ms = expires;
            }
        }
    }

    /// The holder of `delivery` went away without a word.
    pub(crate) fn abandoned(&self, delivery: usize) {
        let mut book = self.book();
        book.deliveries[delivery].abandoned = true;
        *book.counts.entry("leases abandoned".into()).or_default() += 1;
    }

    /// Files the answer of a claim made elsewhere (a worker process).
    pub(crate) fn claim_answered(&self, reply: &Reply, lease_ms: u64, holder: &str) -> Vec<usize> {
        if reply.status != 200 {
            self.claim_failed(reply);
            return Vec::new();
        }
        reply.body["jobs"]
            .as_array()
            .map(|jobs| {
                jobs.iter()
                    .filter_map(|job| self.delivered(job, lease_ms, holder))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Checks what the clients saw against `stored`, what Redis holds at
    /// the end. `now_ms` is when `stored` was read.
    pub(crate) fn audit(&self, stored: &Inventory) -> Report {
        let book = self.book();
        let mut report = Report {
            violations: book.violations.clone(),
            counts: book.counts.clone(),
        };
        report.violations.extend(stored.problems.iter().cloned());
        // Without lost claim answers every delivery is known, and the
        // attempt counts must match exactly.
        let exact = book.unknown_claims == 0;
        let mut by_id: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
        for delivery in &book.deliveries {
            by_id.entry(&delivery.id).or_default().push(delivery);
        }
        let mut ids: Vec<&str> = book.enqueues.keys().map(String::as_str).collect();
        ids.extend(by_id.keys().copied());
        ids.extend(stored.jobs.keys().map(String::as_str));
        ids.sort_unstable();
        ids.dedup();
        let mut tally_counts = EnqueueTally::default();
        let mut hidden = 0;
        let mut reclaimed = 0;
        let mut created_again = 0;
        let mut presumed_acks = 0;
        for id in ids {
            let tally = book.enqueues.get(id).cloned().unwrap_or_default();
            tally_counts.created += tally.created;
            tally_counts.existing += tally.existing;
            tally_counts.unknown += tally.unknown;
            let mut leases = by_id.remove(id).unwrap_or_default();
            leases.sort_by_key(|d| d.start_ms);
            let job = stored.jobs.get(id);
            let mut v = |text: String| report.violations.push(format!("job {id}: {text}"));
            if tally.created + tally.existing + tally.unknown == 0 {
                v(format!(
                    "nobody enqueued it, yet it was delivered {} times and is {:?} in Redis",
                    leases.len(),
                    job.map(|j| j.state)
                ));
                continue;
            }
            // Every creation is acked once or still in Redis; nothing
            // beyond the creations and the enqueues of unknown fate.
            let acked = leases.iter().filter(|d| d.acked()).count() as u64;
            let maybe_acked = leases.iter().filter(|d| d.maybe_acked()).count() as u64;
            presumed_acks += maybe_acked;
            let present = u64::from(job.is_some());
            if tally.created > acked + maybe_acked + present {
                v(format!(
                    "LOST: created {} times, acked {acked} (+{maybe_acked} perhaps), in Redis {present}",
                    tally.created
                ));
            }
            if acked + present > tally.created + tally.unknown {
                v(format!(
                    "DUPLICATED: created {} times (+{} perhaps), acked {acked}, in Redis {present}",
                    tally.created, tally.unknown
                ));
            }
            if tally.existing > 0 && tally.created + tally.unknown == 0 {
                v("answered 200 (already known) though no enqueue created it".into());
            }
            if let Some(first) = leases.first()
                && first.attempts != 0
            {
                if exact {
                    v(format!("first delivered with attempts {}", first.attempts));
                }
                hidden += first.attempts;
            }
            for pair in leases.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                if b.start_ms + CLOCK_SLACK_MS < a.earliest_end_ms() {
                    v(format!(
                        "TWO HOLDERS AT ONCE: lease {} ({}) held until {} at least, lease {} ({}) began at {}",
                        a.token,
                        a.holder,
                        a.earliest_end_ms(),
                        b.token,
                        b.holder,
                        b.start_ms
                    ));
                }
                for end in &a.ends {
                    if end.kind == EndKind::Ack
                        && end.outcome == Outcome::Done
                        && b.start_ms + CLOCK_SLACK_MS < end.sent_ms
                    {
                        v(format!(
                            "STALE ACK ACCEPTED: lease {} acked at {} after lease {} began at {}",
                            a.token, end.sent_ms, b.token, b.start_ms
                        ));
                    }
                }
                if a.acked() || (a.maybe_acked() && b.attempts == 0) {
                    // Acked: gone; `b` leases a job created again, by an
                    // enqueue that ended after the ack began.
                    created_again += 1;
                    if b.attempts != 0 {
                        v(format!(
                            "came back after the ack of lease {} with attempts {}",
                            a.token, b.attempts
                        ));
                    }
                    let acked_from = a
                        .ends
                        .iter()
                        .filter(|e| e.kind == EndKind::Ack && e.outcome != Outcome::NoEffect)
                        .map(|e| e.sent_ms)
                        .min()
                        .unwrap_or(i64::MAX);
                    if !tally
                        .creations_answered_ms
                        .iter()
                        .any(|t| *t + CLOCK_SLACK_MS >= acked_from)
                    {
                        v(format!(
                            "delivered again (lease {}) after the ack of lease {}, with no enqueue since",
                            b.token, a.token
                        ));
                    }
                    continue;
                }
                if b.attempts <= a.attempts || (exact && b.attempts != a.attempts + 1) {
                    v(format!(
                        "attempts {} after a delivery with attempts {} that ended without an ack",
                        b.attempts, a.attempts
                    ));
                }
                hidden += b.attempts.saturating_sub(a.attempts + 1);
                if b.attempts == a.attempts + 1 {
                    reclaimed += u64::from(!a.nacked() && !a.maybe_nacked());
                    check_last_error(a, b.last_error.as_deref(), &mut v);
                }
            }
            match (job, leases.last()) {
                (Some(job), Some(last)) if !last.acked() => {
                    check_final(job, last, exact, stored.read_at_ms, &mut v);
                }
                (Some(job), _) => {
                    if exact && job.attempts != 0 {
                        v(format!("never delivered since it was created, yet {job:?}"));
                    }
                }
                (None, _) => {}
            }
        }
        let deliveries = book.deliveries.len() as u64;
        let stats = [
            ("jobs created (201)", tally_counts.created),
            (
                "enqueues answered 200 (already there)",
                tally_counts.existing,
            ),
            (
                "enqueues of unknown outcome (then retried)",
                tally_counts.unknown,
            ),
            (
                "jobs created again by a retried enqueue after their ack",
                created_again,
            ),
            ("jobs delivered", deliveries),
            (
                "acks of unknown outcome then 404 (presumed done)",
                presumed_acks,
            ),
            (
                "leases taken back after expiry, then redelivered",
                reclaimed,
            ),
            ("claims of unknown outcome", book.unknown_claims),
            ("deliveries nobody heard of (attempt gaps)", hidden),
            ("left pending", stored.count("pending")),
            ("left scheduled", stored.count("scheduled")),
            ("left processing", stored.count("processing")),
            ("left dead", stored.count("dead")),
        ];
        for (what, n) in stats {
            report.counts.insert(what.to_owned(), n);
        }
        report
    }
}

/// The `last_error` a job shows after delivery `a` ended without an ack:
/// the nack's error, or "lease expired" when the lease ran out.
fn check_last_error(a: &Delivery, shown: Option<&str>, v: &mut impl FnMut(String)) {
    if a.maybe_nacked() || a.maybe_acked() {
        return;
    }
    match a.nack() {
        Some(EndKind::Nack {
            error: Some(error), ..
        }) => {
            if shown != Some(error.as_str()) {
                v(format!(
                    "last_error {shown:?} after a nack with error {error:?}"
                ));
            }
        }
        Some(_) => {}
        None => {
            if shown != Some("lease expired") {
                v(format!(
                    "last_error {shown:?} after lease {} expired",
                    a.token
                ));
            }
        }
    }
}

/// The job as Redis holds it at the end, after its last known delivery
/// `last` (not acked).
fn check_final(
    job: &Stored,
    last: &Delivery,
    exact: bool,
    read_at_ms: i64,
    v: &mut impl FnMut(String),
) {
    if job.state == "processing" {
        if job.lease_token.as_deref() == Some(last.token.as_str()) {
            if last.nacked() {
                v(format!(
                    "still processing after lease {} was nacked",
                    last.token
                ));
            }
            if last.abandoned && read_at_ms > last.expires_ms + 3000 {
                v(format!(
                    "abandoned lease {} never taken back ({} ms past its deadline)",
                    last.token,
                    read_at_ms - last.expires_ms
                ));
            }
        } else if exact {
            v(format!(
                "processing under lease {:?}, which no client got (last: {})",
                job.lease_token, last.token
            ));
        }
        return;
    }
    if last.maybe_acked() && job.attempts == 0 {
        return; // Acked, then created again.
    }
    let expected = last.attempts + 1;
    if job.attempts < expected || (exact && job.attempts != expected) {
        v(format!(
            "attempts {} at the end after a last delivery with attempts {} that was not acked",
            job.attempts, last.attempts
        ));
    }
    if job.attempts == expected {
        check_last_error(last, job.last_error.as_deref(), v);
    }
    if job.state == "dead" {
        let buried = matches!(last.nack(), Some(EndKind::Nack { dead: true, .. }));
        if !buried && job.attempts < job.max_attempts {
            v(format!(
                "dead with attempts {} of {}",
                job.attempts, job.max_attempts
            ));
        }
    } else if job.attempts >= job.max_attempts {
        v(format!(
            "{} with attempts {} of {}: should be dead",
            job.state, job.attempts, job.max_attempts
        ));
    }
}

/// The audit's findings and the run's counts.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) violations: Vec<String>,
    pub(crate) counts: BTreeMap<String, u64>,
}

impl Report {
    pub(crate) fn count(&self, what: &str) -> u64 {
        self.counts.get(what).copied().unwrap_or(0)
    }

    /// Prints the counts and fails on any violation (the first 30 shown).
    pub(crate) fn assert_clean(&self, title: &str) {
        let mut text = format!("{title}:\n");
        for (what, n) in &self.counts {
            let _ = writeln!(text, "  {n:>7}  {what}");
        }
        eprintln!("{text}");
        assert!(
            self.violations.is_empty(),
            "{title}: {} violations:\n{}",
            self.violations.len(),
            self.violations
                .iter()
                .take(30)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

// ---------------------------------------------------------------------------
// What Redis holds.
// ---------------------------------------------------------------------------

/// One job as Redis holds it.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) state: &'static str,
    pub(crate) attempts: u64,
    pub(crate) max_attempts: u64,
    pub(crate) lease_token: Option<String>,
    pub(crate) last_error: Option<String>,
}

/// Every job of one queue, read straight from Redis, and whatever is
/// inconsistent between its keys (a transition applied in part).
#[derive(Debug, Default)]
pub(crate) struct Inventory {
    pub(crate) jobs: BTreeMap<String, Stored>,
    pub(crate) problems: Vec<String>,
    pub(crate) read_at_ms: i64,
}

impl Inventory {
    pub(crate) fn count(&self, state: &str) -> u64 {
        self.jobs.values().filter(|j| j.state == state).count() as u64
    }
}

/// Reads queue `queue` of prefix `prefix` from the Redis at `url`, through
/// prioq's own key layout and record format.
pub(crate) async fn inventory(url: &str, prefix: &str, queue: &str) -> Inventory {
    let mut conn = redis_connection(url).await;
    inventory_of_shards(&mut conn, prefix, queue, 1).await
}

/// Reads every shard of a queue split over `shards` through `conn` (a
/// cluster's, for a queue on a cluster), as [`inventory`] does.
pub(crate) async fn inventory_of_shards(
    conn: &mut impl redis::aio::ConnectionLike,
    prefix: &str,
    queue: &str,
    shards: u32,
) -> Inventory {
    let mut sets: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut records: HashMap<String, Vec<u8>> = HashMap::new();
    let mut leases: HashMap<String, String> = HashMap::new();
    for shard in 0..shards {
        let keys = QueueKeys::shard(prefix, queue, shard, shards);
        for (state, key) in [
            ("pending", Key::Pending),
            ("scheduled", Key::Scheduled),
            ("processing", Key::Processing),
            ("dead", Key::Dead),
        ] {
            let members: Vec<String> = redis::cmd("ZRANGE")
                .arg(keys.key(key))
                .arg(0)
                .arg(-1)
                .query_async(conn)
                .await
                .expect("ZRANGE");
            sets.push((state, members));
        }
        let shard_records: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
            .arg(keys.key(Key::Jobs))
            .query_async(conn)
            .await
            .expect("HGETALL");
        records.extend(shard_records);
        let shard_leases: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(keys.key(Key::Leases))
            .query_async(conn)
            .await
            .expect("HGETALL");
        leases.extend(shard_leases);
    }
    let mut inventory = Inventory {
        read_at_ms: now_ms(),
        ..Inventory::default()
    };
    let mut state_of: HashMap<&str, &'static str> = HashMap::new();
    for (state, members) in &sets {
        for id in members {
            if let Some(other) = state_of.insert(id, state) {
                inventory
                    .problems
                    .push(format!("job {id} is both {other} and {state}"));
            }
        }
    }
    for (id, record) in &records {
        let Some(state) = state_of.get(id.as_str()).copied() else {
            inventory
                .problems
                .push(format!("job {id} has a record but no state: {record:?}"));
            continue;
        };
        let Some(Record {
            attempts,
            max_attempts,
            last_error,
            ..
        }) = Record::decode(record)
        else {
            inventory
                .problems
                .push(format!("job {id} has a malformed record: {record:?}"));
            continue;
        };
        let (attempts, max_attempts) = (u64::from(attempts), u64::from(max_attempts));
        let lease = leases.get(id);
        if (state == "processing") != lease.is_some() {
            inventory
                .problems
                .push(format!("job {id} is {state} with lease {lease:?}"));
        }
        inventory.jobs.insert(
            id.clone(),
            Stored {
                state,
                attempts,
                max_attempts,
                lease_token: lease
                    .and_then(|l| l.split_once(':'))
                    .map(|(t, _)| t.to_owned()),
                last_error: last_error.map(str::to_owned),
            },
        );
    }
    for (id, state) in state_of {
        if !records.contains_key(id) {
            inventory
                .problems
                .push(format!("job {id} is {state} without a record"));
        }
    }
    for id in leases.keys() {
        if !records.contains_key(id) {
            inventory
                .problems
                .push(format!("job {id} left a lease behind without a record"));
        }
    }
    inventory
}

// ---------------------------------------------------------------------------
// Clients that retry as README says and file everything in a ledger.
// ---------------------------------------------------------------------------

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
async fn until_ledger(
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

// ---------------------------------------------------------------------------
// 1. Redis restarted under load.
// ---------------------------------------------------------------------------

/// Jobs enqueued with a delay just before Redis goes down: they are
/// certainly in Redis (scheduled) when it dies.
const DELAYED_AT_RESTART: usize = 20;

/// Two instances under load (two producers, three consumers) while their
/// Redis, run with the persistence `flags`, is killed with SIGKILL and
/// started again on the same port and files. Returns the audit and what
/// Redis holds at the end, once the load has stopped and the queue drained.
async fn restart_under_load(flags: &str) -> (Report, Inventory) {
    let data = TempDir::new("faults-restart");
    let first = RedisServer::start_in(&data.path, flags);
    let port = first.port;
    let mut server = Some(first);
    let mut config = test_config();
    config.redis_url = format!("redis://127.0.0.1:{port}");
    config.redis_timeout_ms = 500;
    let (_a, _b, ledger, client) = two_instances(&config, "restart").await;
    let load = Load::start(&client, 2, 3, 1500);

    until_ledger(
        &ledger,
        Duration::from_secs(10),
        "200 jobs before the restart",
        |l| l.created() >= 200 && l.acked() >= 50,
    )
    .await;
    for n in 0..DELAYED_AT_RESTART {
        let body = json!({"task": "t", "delay_ms": 1500});
        assert!(client.enqueue(&format!("delayed-{n}"), body).await);
    }
    // Down (SIGKILL) until both sides have felt it, then up again on the
    // same port and files. A consumer feels it in its claim, or in the ack
    // it retries while Redis is away (then it claims nothing until the ack
    // went through: all three may be in acks).
    drop(server.take());
    until_ledger(
        &ledger,
        Duration::from_secs(10),
        "producers and consumers see the outage",
        |l| {
            l.counted("enqueue retried after 503") > 0
                && l.counted("claim retried after 503") + l.counted("ack retried after 503") > 0
        },
    )
    .await;
    let created_before = ledger.created();
    server = Some(RedisServer::spawn(port, &data.path, flags));
    until_ledger(
        &ledger,
        Duration::from_secs(15),
        "200 more jobs after the restart",
        |l| l.created() >= created_before + 200,
    )
    .await;
    load.drain(&client, Duration::from_secs(20)).await;

    let stored = inventory(&config.redis_url, &config.key_prefix, "restart").await;
    let report = ledger.audit(&stored);
    // Every request in the gap was answered (a 503 at once: nothing
    // listens on the port), none left hanging.
    let unanswered: Vec<_> = report
        .counts
        .keys()
        .filter(|what| what.ends_with("after no answer"))
        .collect();
    assert!(unanswered.is_empty(), "{unanswered:?}");
    assert!(report.count("enqueue retried after 503") > 0);
    drop(server);
    (report, stored)
}

/// AOF with `appendfsync always`: every write is on disk before Redis
/// answers, so a restart loses nothing that was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_under_load_with_appendfsync_always_loses_nothing() {
    let (report, stored) = restart_under_load("--appendonly yes --appendfsync always").await;
    report.assert_clean("Redis (appendfsync always) restarted under load");
    assert_eq!(stored.jobs.len(), 0, "every job acked: {:?}", stored.jobs);
}

/// AOF with `appendfsync everysec`: Redis writes the AOF to the operating
/// system before it answers and syncs it to disk once a second, so when
/// only the Redis process dies (SIGKILL) nothing answered is lost either.
/// (The second of writes everysec can lose goes with the machine: an OS
/// crash or a power cut, which a test on loopback cannot cause.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_process_killed_under_load_with_appendfsync_everysec_loses_nothing() {
    let (report, stored) = restart_under_load("--appendonly yes --appendfsync everysec").await;
    report.assert_clean("Redis (appendfsync everysec) killed and restarted under load");
    assert_eq!(stored.jobs.len(), 0, "every job acked: {:?}", stored.jobs);
}

/// No persistence: Redis comes back empty. Every job it held is gone,
/// enqueues answered 201 included (at least the delayed ones, scheduled
/// when it died), and the audit says so, naming nothing else. The service
/// itself carries on: the queue works again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_under_load_without_persistence_loses_the_jobs_it_held() {
    let (report, _) = restart_under_load("--appendonly no").await;
    let lost: Vec<&String> = report
        .violations
        .iter()
        .filter(|v| v.contains(": LOST: "))
        .collect();
    let others: Vec<&String> = report
        .violations
        .iter()
        .filter(|v| !v.contains(": LOST: "))
        .collect();
    eprintln!(
        "Redis without persistence restarted under load: {} jobs answered 201 lost; {:?}",
        lost.len(),
        report.counts
    );
    assert!(others.is_empty(), "{others:#?}");
    for n in 0..DELAYED_AT_RESTART {
        let id = format!("job delayed-{n}: LOST");
        assert!(lost.iter().any(|v| v.starts_with(&id)), "{id}: {lost:#?}");
    }
}

/// A field of `INFO replication` of the Redis at `url`, 0 when absent.
async fn replication_offset(url: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut redis_connection(url).await)
        .await
        .expect("INFO replication");
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|offset| offset.trim().parse().ok())
        .unwrap_or(0)
}

/// A replica promoted after its primary died has only what it had
/// received. Here the replica stops receiving (it is pointed at a master
/// that does not exist) before the primary answers an enqueue, an ack and
/// a claim; then the primary is killed and the replica promoted, and an
/// instance on it finds: the enqueue answered 201 gone, the acked job back
/// in pending (it will run again), the claimed job pending and unleased;
/// what was replicated before is intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replica_promoted_after_the_primary_died_lacks_the_writes_it_had_not_received() {
    let (primary_dir, replica_dir) = (TempDir::new("primary"), TempDir::new("replica"));
    // The replica syncs at once (not after the default 5 s delay).
    let primary = RedisServer::start_in(
        &primary_dir.path,
        "--appendonly no --repl-diskless-sync-delay 0",
    );
    let primary_port = primary.port;
    let replica = RedisServer::start_in(
        &replica_dir.path,
        &format!("--appendonly no --replicaof 127.0.0.1 {primary_port}"),
    );
    let mut config = test_config();
    config.redis_url = primary.url();
    let app = spawn_app_with(config.clone()).await;
    for n in 0..3 {
        app.enqueue("failover", json!({"task": "t", "id": format!("job-{n}")}))
            .await;
    }
    let first = app.claim_one("failover").await.expect("job-0");
    assert_eq!(
        app.ack("failover", &first).await.status,
        StatusCode::NO_CONTENT
    );
    // All of that reached the replica: its offset caught up with the
    // primary's. (WAIT on a fresh connection would not tell: it counts the
    // replicas that have that connection's writes, and it made none.)
    let primary_url = primary.url();
    until(Duration::from_secs(10), "the replica is online", || async {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut redis_connection(&primary_url).await)
            .await
            .expect("INFO replication");
        info.contains("state=online")
    })
    .await;
    let written = replication_offset(&primary_url, "master_repl_offset").await;
    let replica_url = replica.url();
    until(
        Duration::from_secs(10),
        "the replica has every write so far",
        || async { replication_offset(&replica_url, "slave_repl_offset").await >= written },
    )
    .await;

    // The replica falls behind: what the primary answers now never reaches it.
    let mut replica_conn = redis_connection(&replica.url()).await;
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        // Port 1: nothing listens there. (A free port could meanwhile be
        // taken by another test's Redis, which the replica would copy.)
        .arg(1)
        .query_async::<()>(&mut replica_conn)
        .await
        .expect("REPLICAOF");
    app.enqueue("failover", json!({"task": "t", "id": "job-3"}))
        .await;
    let second = app.claim_one("failover").await.expect("job-1");
    assert_eq!(second["id"], "job-1");
    assert_eq!(
        app.ack("failover", &second).await.status,
        StatusCode::NO_CONTENT
    );
    let third = app.claim_one("failover").await.expect("job-2");
    assert_eq!(third["id"], "job-2");

    // The primary dies; the replica is promoted; the service moves to it.
    drop(app);
    drop(primary);
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async::<()>(&mut replica_conn)
        .await
        .expect("REPLICAOF NO ONE");
    config.redis_url = replica.url();
    let promoted = spawn_app_with(config).await;
    let state = async |id: &str| {
        let answer = promoted.job("failover", id).await;
        match answer.status {
            StatusCode::OK => (
                answer.body["state"].as_str().unwrap_or_default().to_owned(),
                answer.body["attempts"].as_u64(),
            ),
            status => (status.to_string(), None),
        }
    };
    let lost_ack = state("job-1").await;
    let lost_claim = state("job-2").await;
    let lost_enqueue = state("job-3").await;
    let kept_ack = state("job-0").await;
    assert_eq!(
        kept_ack.0, "404 Not Found",
        "acked before the replica fell behind"
    );
    assert_eq!(
        lost_enqueue.0, "404 Not Found",
        "an enqueue answered 201 is gone"
    );
    assert_eq!(
        lost_ack,
        ("pending".to_owned(), Some(0)),
        "an acked job is back"
    );
    assert_eq!(
        lost_claim,
        ("pending".to_owned(), Some(0)),
        "a lease is gone"
    );
    let again = promoted.claim("failover", json!({"max_jobs": 10})).await;
    let ids: Vec<&str> = again.iter().filter_map(|j| j["id"].as_str()).collect();
    assert_eq!(ids, ["job-1", "job-2"]);
}

// ---------------------------------------------------------------------------
// 2. One of two instances behind nginx killed with SIGKILL mid-load.
// ---------------------------------------------------------------------------

const PROXIED_JOBS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instance_killed_behind_nginx_mid_load_loses_nothing_and_doubles_no_known_job() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    let env = [("PRIOQ_SWEEP_INTERVAL_MS", "100")];
    let mut doomed = Service::start_with(&server.url(), &prefix, &env).await;
    let survivor = Service::start_with(&server.url(), &prefix, &env).await;
    let nginx = Nginx::start(&[&doomed.base, &survivor.base]).await;
    let ledger = Arc::new(Ledger::default());
    let client = Client::new(Arc::clone(&ledger), vec![nginx.url("")], "proxied");

    let stop = CancellationToken::new();
    let producers: Vec<_> = (0..2)
        .map(|p| {
            tokio::spawn(produce(
                client.clone(),
                format!("p{p}"),
                PROXIED_JOBS / 2,
                Duration::from_millis(2),
                stop.clone(),
            ))
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|c| tokio::spawn(consume(client.clone(), format!("c{c}"), 1000, stop.clone())))
        .collect();

    until_ledger(
        &ledger,
        Duration::from_secs(15),
        "a third of the jobs acked",
        |l| l.acked() >= (PROXIED_JOBS / 3) as u64,
    )
    .await;
    crate::support::send_signal(doomed.pid(), "KILL");
    until(
        Duration::from_secs(5),
        "the killed instance is gone",
        || {
            let gone = !doomed.still_running();
            async move { gone }
        },
    )
    .await;
    for producer in producers {
        producer.await.expect("producer");
    }
    // Leases handed out by the dead instance whose answers died with it
    // come back after 1 s.
    client.until_drained(Duration::from_secs(20)).await;
    stop.cancel();
    for consumer in consumers {
        consumer.await.expect("consumer");
    }

    let stored = inventory(&server.url(), &prefix, "proxied").await;
    let report = ledger.audit(&stored);
    report.assert_clean("an instance killed behind nginx");
    // Every client id acked, nothing left. An id acked twice is a job
    // whose enqueue answer died with the instance and that was claimed and
    // acked before the producer's retry came: the id was free again and
    // the retry created it anew (the audit checked that order).
    let mut acks: BTreeMap<String, u64> = BTreeMap::new();
    for delivery in ledger.deliveries() {
        if delivery.acked() || delivery.maybe_acked() {
            *acks.entry(delivery.id).or_default() += 1;
        }
    }
    assert_eq!(acks.len(), PROXIED_JOBS, "every job acked");
    let twice: u64 = acks.values().map(|n| n - 1).sum();
    assert_eq!(
        twice,
        report.count("jobs created again by a retried enqueue after their ack")
    );
    assert!(
        twice <= report.count("enqueues of unknown outcome (then retried)"),
        "{acks:?}"
    );
    assert!(stored.jobs.is_empty(), "{:?}", stored.jobs);
    eprintln!("nginx logged:\n{}", nginx.error_log());
}

/// Where "no duplicate" ends, step by step. An enqueue's answer is lost
/// (here a 503 "effect unknown": Redis was paused for writes, so the
/// script waited there and ran afterwards) yet the job was created; a
/// worker claims and acks it; then the producer's retry with the same
/// client id, done as README says, finds the id free again and creates a
/// second job: the work is done twice. Only a retry that arrives while the
/// job is still known (pending, scheduled, processing or dead) is
/// recognised. In the load test above this happens when an enqueue's
/// answer dies with the killed instance and the job is consumed before the
/// retry lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_retried_after_its_lost_first_job_was_acked_creates_a_second_job() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config).await;
    warm_up_scripts(&app).await;
    let url = app.queue_url("again", "/jobs");
    let body = json!({"task": "charge", "id": "order-1"});
    // The queue is known (an enqueue puts its name in the registry first,
    // a write that a pause would hold back too).
    let first = app.enqueue("again", json!({"task": "warm"})).await;
    let leased = app.claim_one("again").await.expect("a job");
    assert_eq!(leased["id"], first["id"]);
    assert_eq!(
        app.ack("again", &leased).await.status,
        StatusCode::NO_CONTENT
    );

    let paused = Paused::start(&server, "WRITE", 30_000);
    let lost = within(
        Duration::from_millis(1500),
        app.post(url.clone(), body.clone()),
    )
    .await;
    assert_eq!(lost.status, StatusCode::SERVICE_UNAVAILABLE, "{lost:?}");
    assert!(
        lost.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("unknown")),
        "{lost:?}"
    );
    paused.end().await;
    let created = app
        .wait_for_job("again", "order-1", Duration::from_secs(5), |j| {
            j["state"] == "pending"
        })
        .await;
    assert_eq!(created["attempts"], 0);
    let job = app.claim_one("again").await.expect("the job");
    assert_eq!(job["id"], "order-1");
    assert_eq!(app.ack("again", &job).await.status, StatusCode::NO_CONTENT);

    let retried = app.post(url, body).await;
    assert_eq!(retried.status, StatusCode::CREATED, "{retried:?}");
    assert_eq!(retried.body["created"], true);
    let again = app.claim_one("again").await.expect("a second job");
    assert_eq!(
        (again["id"].as_str(), again["attempts"].as_u64()),
        (Some("order-1"), Some(0))
    );
}

// ---------------------------------------------------------------------------
// 3. Storms of worker processes killed with SIGKILL.
// ---------------------------------------------------------------------------

const STORM_JOBS: usize = 60;
const STORM_FAILING: usize = 10;
const STORM_LEASE_MS: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_crash_storm_reclaims_every_abandoned_job_with_exact_attempts() {
    let redis = RedisServer::start();
    let mut config = test_config();
    config.redis_url = redis.url();
    let app = spawn_app_with(config.clone()).await;
    let ledger = Arc::new(Ledger::default());
    let client = Client::new(Arc::clone(&ledger), vec![app.base.clone()], "storm");
    for n in 0..STORM_JOBS {
        assert!(
            client
                .enqueue(
                    &format!("ok-{n}"),
                    json!({"task": "ok", "max_attempts": 20})
                )
                .await
        );
    }
    for n in 0..STORM_FAILING {
        assert!(
            client
                .enqueue(
                    &format!("fail-{n}"),
                    json!({"task": "fail", "max_attempts": 3})
                )
                .await
        );
    }

    // Rounds of four claims by workers here and one by a worker process
    // that is killed holding its job: a fifth of the claims abandoned.
    let claim_url = app.queue_url("storm", "/claim");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut crashed = 0;
    let mut handled = 0;
    while client
        .stats()
        .await
        .is_some_and(|s| s["pending"] != 0 || s["processing"] != 0)
    {
        assert!(Instant::now() < deadline, "the storm never settled");
        // Workers here take their time: a lease of 10 s.
        let round: Vec<usize> = futures_util::future::join_all((0..4).map(|w| {
            let client = &client;
            async move {
                let deliveries = client.claim(&format!("w{w}"), 10_000, 1, 2000).await;
                for delivery in &deliveries {
                    if client.ledger.delivery(*delivery).task == "fail" {
                        let nacked = client.nack(*delivery, 0, "always fails", false).await;
                        assert_eq!(nacked.status, 200, "{nacked:?}");
                    } else {
                        assert_eq!(client.ack(*delivery).await, Acked::Yes);
                    }
                }
                deliveries
            }
        }))
        .await
        .into_iter()
        .flatten()
        .collect();
        handled += round.len();
        if round.len() < 4 {
            continue; // The rest is leased to killed workers: wait for it.
        }
        let killed = claim_in_process_and_kill_answer(&claim_url, STORM_LEASE_MS).await;
        let reply = Reply {
            status: killed.status,
            body: killed.answer,
        };
        for delivery in ledger.claim_answered(&reply, STORM_LEASE_MS, "doomed") {
            ledger.abandoned(delivery);
            crashed += 1;
        }
    }

    let stored = inventory(&config.redis_url, &config.key_prefix, "storm").await;
    let report = ledger.audit(&stored);
    report.assert_clean("worker crash storm");
    let total = crashed + handled;
    eprintln!("storm: {total} claims, {crashed} abandoned by killed processes");
    assert!(crashed >= 15, "{crashed} crashes");
    assert!(
        crashed * 5 <= total + 5 && crashed * 5 + 20 >= total,
        "{crashed} of {total}"
    );

    // Per job: one delivery per abandon plus the one that finished it, and
    // the attempts each delivery showed count the abandons and nacks
    // before it, exactly.
    let mut history: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    for delivery in ledger.deliveries() {
        history
            .entry(delivery.id.clone())
            .or_default()
            .push(delivery);
    }
    assert_eq!(
        history.len(),
        STORM_JOBS + STORM_FAILING,
        "every job delivered"
    );
    for (id, deliveries) in &history {
        // Every delivery before the last ended without an ack.
        for (ended_without_ack, delivery) in deliveries.iter().enumerate() {
            assert_eq!(
                delivery.attempts, ended_without_ack as u64,
                "{id}: {deliveries:#?}"
            );
        }
        let abandoned = deliveries.iter().filter(|d| d.abandoned).count();
        if id.starts_with("ok-") {
            assert!(
                deliveries.last().is_some_and(Delivery::acked),
                "{id}: {deliveries:#?}"
            );
            assert_eq!(deliveries.len(), abandoned + 1, "{id}");
            assert!(!stored.jobs.contains_key(id));
        } else {
            assert_eq!(deliveries.len(), 3, "{id}: three deliveries, then dead");
            let job = &stored.jobs[id];
            assert_eq!((job.state, job.attempts), ("dead", 3), "{id}: {job:?}");
            let last = deliveries.last().expect("delivered");
            let reason = if last.abandoned {
                "lease expired"
            } else {
                "always fails"
            };
            assert_eq!(job.last_error.as_deref(), Some(reason), "{id}");
        }
    }
    assert_eq!(stored.count("dead"), STORM_FAILING as u64);
    assert_eq!(stored.jobs.len(), STORM_FAILING);

    // The killed workers' tokens, presented now, change nothing.
    let before = crate::support::snapshot(&config.redis_url, &config.key_prefix).await;
    for delivery in ledger.deliveries().iter().filter(|d| d.abandoned) {
        let late = client
            .post(
                &format!("/jobs/{}/ack", delivery.id),
                &json!({"lease_token": delivery.token}),
            )
            .await;
        let expected = if delivery.id.starts_with("ok-") {
            404
        } else {
            409
        };
        assert_eq!(late.status, expected, "{delivery:?}: {late:?}");
    }
    assert_eq!(
        crate::support::snapshot(&config.redis_url, &config.key_prefix).await,
        before
    );
}

// ---------------------------------------------------------------------------
// 4. Redis stalled with CLIENT PAUSE.
// ---------------------------------------------------------------------------

/// Redis paused with `CLIENT PAUSE <ms> <mode>`. A `WRITE` pause holds
/// back every command that may write (every script among them) while PING
/// and plain reads run; an `ALL` pause holds back everything, CLIENT
/// UNPAUSE included, until its time is up. A `WRITE` pause ends on drop, so
/// a failing test does not leave Redis stalled.
struct Paused {
    conn: redis::Connection,
    url: String,
    mode: &'static str,
}

impl Paused {
    fn start(server: &RedisServer, mode: &'static str, ms: u64) -> Self {
        let mut conn = server.client().get_connection().expect("Redis answers");
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(ms)
            .arg(mode)
            .query::<()>(&mut conn)
            .expect("CLIENT PAUSE");
        Self {
            conn,
            url: server.url(),
            mode,
        }
    }

    /// Ends a `WRITE` pause; waits until an `ALL` pause is over (a PING
    /// goes through).
    async fn end(self) {
        if self.mode == "ALL" {
            // Each PING gives up after the client's response timeout.
            until(Duration::from_secs(10), "the pause is over", || {
                let url = self.url.clone();
                async move {
                    let mut conn = redis_connection(&url).await;
                    redis::cmd("PING")
                        .query_async::<()>(&mut conn)
                        .await
                        .is_ok()
                }
            })
            .await;
        }
    }
}

impl std::fmt::Debug for Paused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Paused({})", self.mode)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if self.mode == "WRITE" {
            let _ = redis::cmd("CLIENT")
                .arg("UNPAUSE")
                .query::<()>(&mut self.conn);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_pause_all_answers_503_in_time_and_applies_each_request_whole_or_not_at_all() {
    stalled_requests_apply_whole_or_not_at_all("ALL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_pause_write_answers_503_in_time_and_runs_every_held_script_afterwards() {
    let outcomes = stalled_requests_apply_whole_or_not_at_all("WRITE").await;
    // Each script that reached Redis waited there and ran once Redis
    // resumed, though the client had its 503 long before; a request queued
    // behind a held call of its queue was refused unsent, and said so.
    for (what, (applied, said_no_effect)) in &outcomes {
        assert!(applied ^ said_no_effect, "{what}: {outcomes:?}");
    }
    // The first of the queue's batched requests and the two unbatched ones
    // were sent.
    let applied = outcomes.values().filter(|(applied, _)| *applied).count();
    assert!(applied >= 3, "{outcomes:?}");
}

/// Redis paused in `mode` while an enqueue, a claim, an ack, a nack, an
/// extend and two reads are in flight: each write (and, in mode ALL, each
/// read) answers 503
/// `backend_unavailable` within the configured timeout (500 ms here) plus
/// a margin; once Redis resumes, each request has taken effect whole or
/// not at all, one whose 503 said "no effect" has none, and the client's
/// retries (same id, same token) settle everything. Returns, per write,
/// whether it took effect and whether its 503 said it had none.
async fn stalled_requests_apply_whole_or_not_at_all(
    mode: &'static str,
) -> BTreeMap<&'static str, (bool, bool)> {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    config.redis_timeout_ms = 500;
    let app = spawn_app_with(config.clone()).await;
    let bound = Duration::from_millis(1500);
    let queue = "paused";
    let ledger = Arc::new(Ledger::default());
    let client = Client::new(Arc::clone(&ledger), vec![app.base.clone()], queue);
    warm_up_scripts(&app).await;

    // Three leases to end during the stall, and a job left to claim.
    for n in 0..4 {
        assert!(
            client
                .enqueue(&format!("job-{n}"), json!({"task": "t"}))
                .await
        );
    }
    let leases = client.claim("holder", 60_000, 3, 0).await;
    assert_eq!(leases.len(), 3);
    let [acked, nacked, extended] = [0, 1, 2].map(|i| ledger.delivery(leases[i]));
    let spare = "job-3";
    let ack_path = format!("/jobs/{}/ack", acked.id);
    let ack_body = json!({"lease_token": acked.token});
    let nack_path = format!("/jobs/{}/nack", nacked.id);
    let nack_body = json!({"lease_token": nacked.token, "error": "stalled"});
    let enqueue_body = json!({"task": "t", "id": "new"});
    let claim_body = json!({"worker": "stalled", "lease_ms": 1000});
    let extend_path = format!("/jobs/{}/extend", extended.id);
    let extend_body = json!({"lease_token": extended.token, "lease_ms": 120_000});
    let spare_path = format!("/jobs/{spare}");
    let writes: [(&'static str, &str, &Value); 5] = [
        ("enqueue", "/jobs", &enqueue_body),
        ("claim", "/claim", &claim_body),
        ("ack", &ack_path, &ack_body),
        ("nack", &nack_path, &nack_body),
        ("extend", &extend_path, &extend_body),
    ];

    let paused = Paused::start(&server, mode, 3000);
    let started = Instant::now();
    let (answers, reads, ready) = tokio::join!(
        futures_util::future::join_all(writes.iter().map(|(what, path, body)| async {
            (*what, within(bound, client.post(path, body)).await)
        }),),
        futures_util::future::join_all([
            within(bound, client.get(&spare_path)),
            within(bound, client.get("")),
        ]),
        within(bound, app.get(app.url("/readyz"))),
    );
    let answered_within = started.elapsed();
    paused.end().await;

    for (what, answer) in answers.iter().map(|(w, a)| (*w, a)) {
        assert_eq!(answer.status, 503, "{mode} {what}: {answer:?}");
        assert_eq!(
            answer.body["code"], "backend_unavailable",
            "{mode} {what}: {answer:?}"
        );
    }
    // Reads call functions declared `no-writes` (FCALL_RO), which a WRITE
    // pause lets through; but one sent on a connection where a held write
    // waits ahead of it waits too, as Redis serves a connection in order.
    for answer in &reads {
        match (mode, answer.status) {
            ("WRITE", 200) => {}
            (_, 503) => assert_eq!(answer.body["code"], "backend_unavailable"),
            _ => panic!("{mode} read: {answer:?}"),
        }
    }
    // Readiness runs a script, which a WRITE pause holds back like every
    // queue script: the instance is not ready in either mode.
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{mode}: {ready:?}"
    );

    // Once Redis resumes: the claim first, before its 1 s lease runs out.
    let mut applied = BTreeMap::new();
    let spare_job = settled(&app, queue, spare).await.body;
    let claim_applied = spare_job["state"] == "processing";
    applied.insert("claim", claim_applied);
    if claim_applied {
        // Leased to nobody: back after its lease, with one more attempt.
        assert_eq!(spare_job["worker"], "stalled", "{spare_job}");
        let back = app
            .wait_for_job(queue, spare, Duration::from_secs(5), |j| {
                j["state"] == "pending"
            })
            .await;
        assert_eq!(
            (back["attempts"].as_u64(), back["last_error"].as_str()),
            (Some(1), Some("lease expired")),
            "{back}"
        );
    } else {
        assert_eq!(spare_job["state"], "pending", "{spare_job}");
    }

    let new = app.job(queue, "new").await;
    let enqueued = new.status == StatusCode::OK;
    if enqueued {
        assert_eq!(
            (new.body["state"].as_str(), new.body["task"].as_str()),
            (Some("pending"), Some("t")),
            "{new:?}"
        );
    } else {
        assert_eq!(new.status, StatusCode::NOT_FOUND, "{new:?}");
    }
    applied.insert("enqueue", enqueued);
    let retried = client.post("/jobs", &enqueue_body).await;
    assert_eq!(
        retried.status,
        if enqueued { 200 } else { 201 },
        "{retried:?}"
    );

    let after = app.job(queue, &acked.id).await;
    let ack_applied = after.status == StatusCode::NOT_FOUND;
    if !ack_applied {
        assert_eq!(after.body["lease_token"], json!(acked.token), "{after:?}");
    }
    applied.insert("ack", ack_applied);
    let retried = client.post(&ack_path, &ack_body).await;
    assert_eq!(
        retried.status,
        if ack_applied { 404 } else { 204 },
        "{retried:?}"
    );

    let after = app.job(queue, &nacked.id).await.body;
    let nack_applied = after["state"] == "pending";
    let fields = (
        after["state"].as_str(),
        after["attempts"].as_u64(),
        after["last_error"].as_str(),
        after["lease_token"].as_str(),
    );
    if nack_applied {
        assert_eq!(
            fields,
            (Some("pending"), Some(1), Some("stalled"), None),
            "{after}"
        );
    } else {
        let token = Some(nacked.token.as_str());
        assert_eq!(
            fields,
            (Some("processing"), Some(0), None, token),
            "{after}"
        );
    }
    applied.insert("nack", nack_applied);
    let retried = client.post(&nack_path, &nack_body).await;
    assert_eq!(
        retried.status,
        if nack_applied { 409 } else { 200 },
        "{retried:?}"
    );

    let after = app.job(queue, &extended.id).await.body;
    assert_eq!(after["lease_token"], json!(extended.token), "{after}");
    let extend_applied = ms_of(&after["lease_expires_at"]) > extended.expires_ms + 30_000;
    applied.insert("extend", extend_applied);

    for (what, answer) in &answers {
        if applied[what] {
            assert!(
                !answer.said_no_effect(),
                "{mode} {what} took effect though its 503 said it had none: {answer:?}"
            );
        }
    }
    eprintln!(
        "CLIENT PAUSE {mode}: every request answered 503 within {answered_within:?}; \
         took effect once Redis resumed: {applied:?}; answers: {:?}",
        answers
            .iter()
            .map(|(what, a)| (
                *what,
                a.body["detail"].as_str().unwrap_or_default().to_owned()
            ))
            .collect::<Vec<_>>()
    );
    let stored = inventory(&config.redis_url, &config.key_prefix, queue).await;
    assert!(stored.problems.is_empty(), "{:?}", stored.problems);
    // Two jobs acked, the rest there: job-1 and job-3 pending, job-2
    // processing, `new` pending.
    let states: BTreeMap<&str, &str> = stored
        .jobs
        .iter()
        .map(|(id, j)| (id.as_str(), j.state))
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            ("job-1", "pending"),
            ("job-2", "processing"),
            ("job-3", "pending"),
            ("new", "pending")
        ]),
    );
    answers
        .iter()
        .map(|(what, answer)| (*what, (applied[what], answer.said_no_effect())))
        .collect()
}

/// Runs every script the stall tests use once, on another queue, so that
/// Redis has them all cached as on any running service. (A script Redis
/// does not know yet answers NOSCRIPT once the pause is over, and the
/// service, which gave up on the request by then, does not send it again.)
async fn warm_up_scripts(app: &crate::support::TestApp) {
    let job = app.enqueue("warm-up", json!({"task": "t"})).await;
    let id = job["id"].as_str().expect("id");
    let leased = app.claim_one("warm-up").await.expect("a job");
    let token = json!({"lease_token": leased["lease_token"]});
    let extend = app
        .post(
            app.queue_url("warm-up", &format!("/jobs/{id}/extend")),
            token.clone(),
        )
        .await;
    assert_eq!(extend.status, StatusCode::OK, "{extend:?}");
    let nack = app
        .post(app.queue_url("warm-up", &format!("/jobs/{id}/nack")), token)
        .await;
    assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    let leased = app.claim_one("warm-up").await.expect("a job");
    assert_eq!(
        app.ack("warm-up", &leased).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.job("warm-up", id).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(app.queue_url("warm-up", "")).await.status,
        StatusCode::OK
    );
}

/// Job `id`, read once the service answers again after a stall.
async fn settled(app: &crate::support::TestApp, queue: &str, id: &str) -> crate::support::Answer {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = app.job(queue, id).await;
        if answer.status != StatusCode::SERVICE_UNAVAILABLE {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "the service never answered again: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------
// 5. Clients that hang up during a long poll.
// ---------------------------------------------------------------------------

/// Open file descriptors of process `pid`.
pub(crate) fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .unwrap_or(0)
}

/// Resident memory of process `pid`, in KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .expect("VmRSS in /proc/<pid>/status")
}

/// Sends a long poll on a raw connection, without reading the answer.
async fn raw_claim(port: u16, body: &Value) -> TcpStream {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connects");
    let request = format!(
        "POST /v1/queues/hangup/claim HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    stream
}

/// Whether process `pid` holds the socket of the loopback TCP connection
/// between its port `server_port` and the client port `client_port`
/// (found in /proc/net/tcp by ports, then among the process's
/// descriptors by inode).
fn holds_connection(pid: u32, server_port: u16, client_port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port_of = |address: &str| {
        address
            .rsplit_once(':')
            .and_then(|(_, port)| u16::from_str_radix(port, 16).ok())
    };
    let inode = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ours =
            port_of(fields.get(1)?)? == server_port && port_of(fields.get(2)?)? == client_port;
        ours.then(|| fields.get(9).map(|inode| (*inode).to_owned()))?
    });
    let Some(inode) = inode.filter(|inode| inode != "0") else {
        return false;
    };
    let socket = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(Result::ok).any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == socket.as_str())
            })
        })
        .unwrap_or(false)
}

/// Waits until process `pid` no longer holds the connection from client
/// port `client_port` to its port `server_port`: it closed it.
async fn until_connection_closed(pid: u32, server_port: u16, client_port: u16) {
    until(
        Duration::from_secs(2),
        "the service closes the connection",
        || {
            let held = holds_connection(pid, server_port, client_port);
            async move { !held }
        },
    )
    .await;
}

/// A client hangs up while its long poll waits: the service closes the
/// connection and drops the waiting claim at once, so the job enqueued
/// next is not leased to the vanished client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_hanging_up_during_a_long_poll_claims_nothing() {
    let server = RedisServer::start();
    let service = Service::start_with(&server.url(), &unique_prefix(), &[]).await;
    let mut conn = redis_connection(&server.url()).await;

    let calls = script_calls(&mut conn).await;
    let poll = raw_claim(
        service.port,
        &json!({"worker": "gone", "wait_ms": 15_000, "lease_ms": 500}),
    )
    .await;
    let client_port = poll.local_addr().expect("local address").port();
    until_script_calls_exceed(&mut conn, calls).await;
    assert!(
        holds_connection(service.pid(), service.port, client_port),
        "the waiting poll holds its connection"
    );
    let hung_up = Instant::now();
    drop(poll);
    until_connection_closed(service.pid(), service.port, client_port).await;
    eprintln!("hang-up noticed within {:?}", hung_up.elapsed());

    let http = reqwest::Client::new();
    let enqueued = http
        .post(service.url("/v1/queues/hangup/jobs"))
        .json(&json!({"task": "t", "id": "after-hangup"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(enqueued.status(), StatusCode::CREATED);
    let claimed: Value = http
        .post(service.url("/v1/queues/hangup/claim"))
        .json(&json!({"worker": "present"}))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    let job = &claimed["jobs"][0];
    assert_eq!(job["id"], "after-hangup", "{claimed}");
    assert_eq!(
        job["attempts"], 0,
        "never leased to the vanished client: {job}"
    );
}

/// A client hangs up after its claim reached Redis and before the answer
/// came back (Redis is paused for writes meanwhile): the claim runs once
/// Redis resumes, the job is leased to nobody, and it comes back after its
/// lease with attempts + 1 and last_error "lease expired".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_hanging_up_after_its_claim_ran_gets_the_job_back_after_the_lease() {
    let server = RedisServer::start();
    let prefix = unique_prefix();
    // No sweep during the test, so the only script Redis holds back is
    // the claim's; a second instance sweeps afterwards.
    let service = Service::start_with(
        &server.url(),
        &prefix,
        &[("PRIOQ_SWEEP_INTERVAL_MS", "600000")],
    )
    .await;
    let http = reqwest::Client::new();
    let enqueued = http
        .post(service.url("/v1/queues/hangup/jobs"))
        .json(&json!({"task": "t", "id": "held"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(enqueued.status(), StatusCode::CREATED);
    // The claim script is in Redis's script cache, as on any running
    // service: the EVALSHA held back by the pause is the claim itself.
    // (Were it not, Redis would answer NOSCRIPT once resumed, and the
    // service, which has dropped the request by then, would not send it
    // again: no claim at all.)
    let warm = http
        .post(service.url("/v1/queues/warm-up/claim"))
        .send()
        .await
        .expect("answered");
    assert_eq!(warm.status(), StatusCode::OK);

    let paused = Paused::start(&server, "WRITE", 30_000);
    let poll = raw_claim(
        service.port,
        &json!({"worker": "gone", "wait_ms": 15_000, "lease_ms": 500}),
    )
    .await;
    until(Duration::from_secs(5), "the claim waits in Redis", || {
        blocked_clients(server.url())
    })
    .await;
    let client_port = poll.local_addr().expect("local address").port();
    drop(poll);
    until_connection_closed(service.pid(), service.port, client_port).await;
    paused.end().await;

    let held = reqwest::Client::new()
        .get(service.url("/v1/queues/hangup/jobs/held"))
        .send()
        .await
        .expect("answered")
        .json::<Value>()
        .await
        .expect("JSON");
    assert_eq!(
        (held["state"].as_str(), held["worker"].as_str()),
        (Some("processing"), Some("gone")),
        "{held}"
    );
    let mut config = test_config();
    config.redis_url = server.url();
    config.key_prefix = prefix;
    let sweeper = spawn_app_with(config).await;
    let back = sweeper
        .wait_for_job("hangup", "held", Duration::from_secs(5), |j| {
            j["state"] == "pending"
        })
        .await;
    assert_eq!(
        (back["attempts"].as_u64(), back["last_error"].as_str()),
        (Some(1), Some("lease expired")),
        "{back}"
    );
}

/// Whether exactly one client of the Redis at `url` is blocked (here:
/// holding a command back until a pause ends).
async fn blocked_clients(url: String) -> bool {
    let mut conn = redis_connection(&url).await;
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .is_some_and(|n| n.trim() == "1")
}

// ---------------------------------------------------------------------------
// 6. A thousand long polls at once.
// ---------------------------------------------------------------------------

const POLLS: usize = 1000;
const POLL_JOBS: usize = 300;
/// How long each request of a crowd waits: long enough that the first of
/// them is still waiting when the last starts and the idle second after
/// it is over, on a slow machine too (all of them wait after about 1 s
/// here).
const CROWD_WAIT_MS: u64 = 8000;

/// The soft limit on open files of this process, raised to `wanted` (or
/// the hard limit) with prlimit(1) when it is lower; children started
/// afterwards inherit it.
fn raise_open_files_limit(wanted: u64) -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (soft, hard) = (numbers[0], numbers.get(1).copied().unwrap_or(u64::MAX));
    if soft >= wanted {
        return soft;
    }
    let target = wanted.min(hard);
    let status = std::process::Command::new("prlimit")
        .arg("--pid")
        .arg(std::process::id().to_string())
        .arg(format!("--nofile={target}:{hard}"))
        .status()
        .expect("prlimit(1) runs (util-linux)");
    assert!(status.success(), "prlimit failed: {status}");
    target
}

/// Waits until `count` waits of `service` have looked once and wait, as
/// its gauge for that kind of wait tells.
async fn until_crowd_waits(service: &Service, crowding: Crowding, count: usize) {
    let http = reqwest::Client::new();
    let prefix = format!("{} ", crowding.gauge());
    until(
        Duration::from_secs(30),
        "every request of the crowd has looked once and waits",
        || async {
            // A slow scrape on a busy machine: then look again.
            let Ok(response) = http.get(service.url("/metrics")).send().await else {
                return false;
            };
            let text = response.text().await.unwrap_or_default();
            text.lines()
                .find_map(|line| line.strip_prefix(prefix.as_str()))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .is_some_and(|waiting| waiting >= count as f64)
        },
    )
    .await;
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a crowd holds: long polls for a job to claim, or reads waiting
/// for a job to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crowding {
    Claims,
    JobWaits,
}

impl Crowding {
    /// The gauge counting this kind of wait.
    fn gauge(self) -> &'static str {
        match self {
            Self::Claims => "prioq_long_polls_waiting",
            Self::JobWaits => "prioq_job_waits",
        }
    }
}

/// What one round of [`crowd_round`] measured.
#[derive(Debug)]
struct Crowd {
    fds: usize,
    rss_kib: u64,
    all_waiting: Duration,
    all_answered: Duration,
    /// Function calls (reads included) Redis ran over one second while
    /// all of them waited.
    idle_calls: u64,
}

/// [`POLLS`] requests held at once against `service` on queue `queue`,
/// each waiting up to [`CROWD_WAIT_MS`], then [`POLL_JOBS`] of them given what they wait
/// for in one request. Claims: a batch of jobs is enqueued; each poll gets
/// at most one, every job goes to exactly one poll, the others answer an
/// empty list when their wait is over. Job waits: each reads a job of its
/// own, leased beforehand and kept once acked; one ack-many acks
/// `POLL_JOBS` of them with results; those reads answer `completed` with
/// the result, the others `processing` when their wait is over. Measures
/// the service's descriptors and memory while all of them wait, and the
/// function calls Redis ran meanwhile.
async fn crowd_round(
    service: &Service,
    redis: &mut redis::aio::MultiplexedConnection,
    crowding: Crowding,
    queue: &str,
) -> Crowd {
    let admin = reqwest::Client::new();
    let post = async |path: &str, body: Value| {
        let response = admin
            .post(service.url(&format!("/v1/queues/{queue}{path}")))
            .json(&body)
            .send()
            .await
            .expect("answered");
        assert!(response.status().is_success(), "{path}: {response:?}");
        response.json::<Value>().await.unwrap_or(Value::Null)
    };
    // The jobs to wait for, leased.
    let mut tokens = BTreeMap::new();
    if crowding == Crowding::JobWaits {
        let jobs: Vec<Value> = (0..POLLS)
            .map(|n| json!({"task": "t", "id": format!("w-{n}"), "retain_ms": 600_000}))
            .collect();
        post("/jobs/batch", json!({"jobs": jobs})).await;
        while tokens.len() < POLLS {
            let claimed = post("/claim", json!({"max_jobs": 100})).await;
            for job in claimed["jobs"].as_array().expect("jobs") {
                tokens.insert(
                    job["id"].as_str().expect("id").to_owned(),
                    job["lease_token"].clone(),
                );
            }
        }
    }
    // Each request on its own connection, closed once answered.
    let waiters = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let started = Instant::now();
    let mut polls = Vec::with_capacity(POLLS);
    // In waves of 100, each waiting before the next starts: a burst of a
    // thousand connects at once overflows the listen backlog (1024, and
    // the service is slow to accept on a loaded machine), and the kernel
    // drops some of them.
    for n in 0..POLLS {
        if n % 100 == 0 && n > 0 {
            until_crowd_waits(service, crowding, n).await;
        }
        let request = match crowding {
            Crowding::Claims => waiters
                .post(service.url(&format!("/v1/queues/{queue}/claim")))
                .json(&json!({"worker": format!("poller-{n}"), "wait_ms": CROWD_WAIT_MS})),
            Crowding::JobWaits => waiters.get(service.url(&format!(
                "/v1/queues/{queue}/jobs/w-{n}?wait_ms={CROWD_WAIT_MS}"
            ))),
        };
        polls.push(tokio::spawn(async move {
            let response = request
                .send()
                .await
                .map_err(|e| format!("request {n}: {e:?}"))?;
            let status = response.status();
            let body: Value = response
                .json()
                .await
                .map_err(|e| format!("request {n}: {e:?}"))?;
            Ok::<_, String>((status, body))
        }));
    }
    until_crowd_waits(service, crowding, POLLS).await;
    let all_waiting = started.elapsed();
    let (fds, rss_kib) = (open_fds(service.pid()), rss_kib(service.pid()));
    // A window in which nothing is supposed to happen, not a wait for
    // something to happen: what the idle crowd costs Redis.
    let calls_before = function_calls(redis).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_calls = function_calls(redis).await - calls_before;
    assert!(
        started.elapsed() < Duration::from_millis(CROWD_WAIT_MS),
        "the idle second ran into the end of the first waits"
    );

    match crowding {
        Crowding::Claims => {
            let jobs: Vec<Value> = (0..POLL_JOBS)
                .map(|n| json!({"task": "t", "args": {"n": n}}))
                .collect();
            post("/jobs/batch", json!({"jobs": jobs})).await;
        }
        Crowding::JobWaits => {
            let acks: Vec<Value> = (0..POLL_JOBS)
                .map(|n| {
                    let id = format!("w-{n}");
                    json!({"id": id, "lease_token": tokens[&id], "result": {"n": n}})
                })
                .collect();
            post("/ack", json!({"jobs": acks})).await;
        }
    }
    let mut served = Vec::new();
    let mut unserved = 0;
    for (n, poll) in polls.into_iter().enumerate() {
        let (status, body) = within(Duration::from_secs(20), poll)
            .await
            .expect("poll task")
            .unwrap_or_else(|e| panic!("{e}; the service logged:\n{}", tail(&service.log(), 30)));
        assert_eq!(status, StatusCode::OK, "{body}");
        match crowding {
            Crowding::Claims => {
                let jobs = body["jobs"].as_array().expect("jobs");
                assert!(jobs.len() <= 1, "a poll got {} jobs", jobs.len());
                match jobs.first() {
                    Some(job) => served.push(job["id"].as_str().expect("id").to_owned()),
                    None => unserved += 1,
                }
            }
            Crowding::JobWaits => {
                if n < POLL_JOBS {
                    assert_eq!(
                        (&body["state"], &body["result"]),
                        (&json!("completed"), &json!({"n": n})),
                        "{body}"
                    );
                    served.push(body["id"].as_str().expect("id").to_owned());
                } else {
                    assert_eq!(body["state"], "processing", "{body}");
                    unserved += 1;
                }
            }
        }
    }
    let all_answered = started.elapsed();
    served.sort();
    served.dedup();
    assert_eq!(
        served.len(),
        POLL_JOBS,
        "every job went to exactly one request"
    );
    assert_eq!(unserved, POLLS - POLL_JOBS);
    Crowd {
        fds,
        rss_kib,
        all_waiting,
        all_answered,
        idle_calls,
    }
}

/// A thousand long polls held at once by one real prioq process, twice:
/// they all answer, the descriptors follow the connections and come back
/// to the baseline, the memory they take is bounded and taken again (not
/// added to) by the second crowd, and while they wait they cost Redis
/// nothing (each looks once, and again when woken or when its wait is
/// over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_long_polls_at_once_keep_memory_and_descriptors_bounded() {
    a_thousand_at_once(Crowding::Claims).await;
}

/// The same with a thousand reads waiting for their jobs to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_job_waits_at_once_keep_memory_and_descriptors_bounded() {
    a_thousand_at_once(Crowding::JobWaits).await;
}

async fn a_thousand_at_once(crowding: Crowding) {
    let limit = raise_open_files_limit(4096);
    assert!(
        limit as usize > POLLS + 200,
        "open files limited to {limit}; {POLLS} polls need more"
    );
    let server = RedisServer::start();
    let mut redis = redis_connection(&server.url()).await;
    // No sweeper at work while the requests wait.
    let service = Service::start_with(
        &server.url(),
        &unique_prefix(),
        &[("PRIOQ_SWEEP_INTERVAL_MS", "600000")],
    )
    .await;
    let admin = reqwest::Client::new();
    for _ in 0..3 {
        let warm = admin
            .post(service.url("/v1/queues/crowd/claim"))
            .json(&json!({}))
            .send()
            .await
            .expect("answered");
        assert_eq!(warm.status(), StatusCode::OK);
    }
    let pid = service.pid();
    let (fds_before, rss_before) = (open_fds(pid), rss_kib(pid));
    // After a crowd: the service may have opened more of its Redis
    // connections (PRIOQ_REDIS_POOL_SIZE, 8) to serve it; nothing else
    // remains.
    let settle = async || {
        until(
            Duration::from_secs(10),
            "descriptors back near the baseline",
            || {
                let fds = open_fds(pid);
                async move { fds <= fds_before + 8 }
            },
        )
        .await;
        (open_fds(pid), rss_kib(pid))
    };

    // Job waits need jobs of their own each round; claims may share.
    let queues = match crowding {
        Crowding::Claims => ["crowd", "crowd"],
        Crowding::JobWaits => ["crowd-1", "crowd-2"],
    };
    let first = crowd_round(&service, &mut redis, crowding, queues[0]).await;
    let (fds_after_first, rss_after_first) = settle().await;
    let second = crowd_round(&service, &mut redis, crowding, queues[1]).await;
    let (fds_after, rss_after) = settle().await;
    eprintln!(
        "{POLLS} {crowding:?} held at once on one instance, twice:\n\
         first: all waiting after {:?}, all answered after {:?}, {} Redis calls in an idle second; \
         second: {:?}, {:?}, {} calls\n\
         fds: before {fds_before}, during {}, after {fds_after_first}; during {}, after {fds_after}\n\
         VmRSS KiB: before {rss_before}, during {}, after {rss_after_first}; during {}, after {rss_after}",
        first.all_waiting,
        first.all_answered,
        first.idle_calls,
        second.all_waiting,
        second.all_answered,
        second.idle_calls,
        first.fds,
        second.fds,
        first.rss_kib,
        second.rss_kib,
    );
    for crowd in [&first, &second] {
        assert!(
            crowd.fds >= fds_before + POLLS,
            "the requests were not all held at once: {crowd:?}"
        );
        assert!(crowd.fds <= fds_before + POLLS + 20, "{crowd:?}");
        // Under 128 KiB per waiting request.
        assert!(crowd.rss_kib <= rss_before + 128 * 1024, "{crowd:?}");
        assert_eq!(crowd.idle_calls, 0, "{crowd:?}");
    }
    // The second crowd mostly reuses the first one's memory. (The
    // allocator settles after a few crowds: over twelve, VmRSS went 77,
    // 89, 90, 92... and stayed at 94 MiB from the sixth on.) A leak of
    // 32 KiB or more per request would show here.
    assert!(
        rss_after <= rss_after_first + 32 * 1024,
        "memory grows from crowd to crowd: {rss_after_first} KiB, then {rss_after} KiB"
    );
}
