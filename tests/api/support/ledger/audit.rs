//! The audit: what the clients saw against what Redis holds at the end.
//! Every job created is acked exactly once or still pending, scheduled,
//! processing or dead; none is missing or doubled; no ack from a stale
//! lease is accepted; two leases of one job never overlap; attempts count
//! exactly the deliveries that ended without an ack.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Delivery, EndKind, EnqueueTally, Ledger, Outcome};
use crate::support::inventory::{Inventory, Stored};

/// Both sides read the same clock in whole milliseconds.
const CLOCK_SLACK_MS: i64 = 2;

impl Ledger {
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
