//! What the clients of one queue saw, filed as it happened: each enqueue
//! answer, each lease handed out, each ack, nack and extend, and counts of
//! what the run did. `audit` checks it against what Redis holds at the end.
//!
//! The load clients (`support::load`) file into it, and so do tests that
//! make requests of their own (the claim of a worker process killed
//! holding its job).

mod audit;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

pub(crate) use audit::Report;

use super::clock::{ms_of, now_ms};

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
    pub(crate) fn said_no_effect(&self) -> bool {
        self.status == 503
            && self.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("had no effect"))
    }

    pub(crate) fn outcome(&self) -> Outcome {
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
pub(crate) enum EndKind {
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
    pub(crate) abandoned: bool,
}

impl Delivery {
    fn ended(&self, kind: impl Fn(&EndKind) -> bool, outcome: Outcome) -> bool {
        self.ends
            .iter()
            .any(|end| kind(&end.kind) && end.outcome == outcome)
    }

    pub(crate) fn acked(&self) -> bool {
        self.ended(|k| *k == EndKind::Ack, Outcome::Done)
    }

    pub(crate) fn maybe_acked(&self) -> bool {
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

    pub(crate) fn enqueue_answered(&self, id: &str, reply: &Reply) {
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

    pub(crate) fn ended(&self, delivery: usize, kind: EndKind, sent_ms: i64, reply: &Reply) {
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

    pub(crate) fn extended(&self, delivery: usize, reply: &Reply) {
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
}
