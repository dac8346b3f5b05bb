//! The rules, one function each, listed in [`RULES`]. A new feature adds
//! its rule there (and its facts in `facts.rs`).

use std::collections::{BTreeMap, BTreeSet};

use super::Violation;
use super::facts::{Facts, JobFacts, JobKey, LeaseFact, made_its_job};
use crate::history::{Call, Op, Outcome};

/// A rule: its name (printed with each violation), what it promises, and
/// its check.
#[derive(Debug)]
pub struct Rule {
    pub name: &'static str,
    pub promise: &'static str,
    pub check: fn(&Facts<'_>) -> Vec<Violation>,
}

pub const RULES: &[Rule] = &[
    Rule {
        name: "acked_delivered_again",
        promise: "a job acked ok is never delivered again",
        check: acked_delivered_again,
    },
    Rule {
        name: "lost_job",
        promise: "a job enqueued ok ends acked, dead or still present",
        check: lost_job,
    },
    Rule {
        name: "failed_enqueue_applied",
        promise: "an enqueue that failed (effect none) created nothing",
        check: failed_enqueue_applied,
    },
    Rule {
        name: "enqueued_twice",
        promise: "an enqueue, however often retried, exists at most once",
        check: enqueued_twice,
    },
    Rule {
        name: "schedule_fired_twice",
        promise: "each fire time of a schedule is enqueued once",
        check: schedule_fired_twice,
    },
    Rule {
        name: "two_valid_leases",
        promise: "no two leases of a job are valid at once",
        check: two_valid_leases,
    },
    Rule {
        name: "stale_ack_accepted",
        promise: "no ack is accepted from a lease that a newer one replaced",
        check: stale_ack_accepted,
    },
    Rule {
        name: "priority_order",
        promise: "a claim never returns a less urgent job while a more urgent one \
                  of an uncapped queue was pending throughout the claim",
        check: priority_order,
    },
    Rule {
        name: "fifo_order",
        promise: "inside one priority and group, jobs are claimed in enqueue order",
        check: fifo_order,
    },
    Rule {
        name: "cap_exceeded",
        promise: "max_in_flight and group_max_in_flight are never exceeded",
        check: cap_exceeded,
    },
    Rule {
        name: "expired_delivered",
        promise: "no claim hands out a job at or after its expiry",
        check: expired_delivered,
    },
    Rule {
        name: "delivered_before_run_at",
        promise: "a job enqueued with run_at is not handed out before that time \
                  (by Redis's clock)",
        check: delivered_before_run_at,
    },
    Rule {
        name: "retried_early",
        promise: "a job a nack scheduled (its delay_ms, or without one the job's backoff \
                  for the attempts it answered) is not handed out again before that wait \
                  has passed since the nacked lease's grant",
        check: retried_early,
    },
    Rule {
        name: "cancelled_delivered_again",
        promise: "a job whose cancel was answered ok is never handed out again",
        check: cancelled_delivered_again,
    },
    Rule {
        name: "released_early",
        promise: "a job waiting for others is handed out only after each of them \
                  may have completed (an ack of it began)",
        check: released_early,
    },
    Rule {
        name: "dedup_key_held_twice",
        promise: "no job is made with a dedup key while another job of its queue \
                  certainly holds it",
        check: dedup_key_held_twice,
    },
    Rule {
        name: "replaced_delivered",
        promise: "a job whose dedup key replaced it (mode replace) is never handed \
                  out, once the replace was answered, as it was before it",
        check: replaced_delivered,
    },
    Rule {
        name: "queue_overfilled",
        promise: "an enqueue makes no job in a queue where max_pending jobs \
                  certainly waited throughout it",
        check: queue_overfilled,
    },
    Rule {
        name: "queue_overfilled_bytes",
        promise: "an enqueue makes no job in a queue where its job's bytes and \
                  those of the jobs certainly waiting throughout it exceed \
                  max_pending_bytes",
        check: queue_overfilled_bytes,
    },
    Rule {
        name: "history_missing_claim",
        promise: "a job's history (history_ms) holds every lease a claim answered ok \
                  with, its fence and its worker, in the order of their fences",
        check: history_missing_claim,
    },
    Rule {
        name: "result_mismatch",
        promise: "a completed job's result is the one its ack sent",
        check: result_mismatch,
    },
    Rule {
        name: "fence_not_growing",
        promise: "a claim that began after another was answered hands out larger \
                  fences than that one did: for the same job on every queue, for \
                  every job of an unsharded queue",
        check: fence_not_growing,
    },
];

fn acked_delivered_again(facts: &Facts<'_>) -> Vec<Violation> {
    let Some(offset) = facts.offset else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        for ack in job.acks.iter().filter(|a| a.accepted) {
            // Granted after the ack's answer, by either clock's bound.
            let after = ack.op.end_ms + offset.hi;
            for lease in leases_of(facts, job) {
                if lease.lease.token != ack.token && lease.granted_at > after {
                    out.push(Violation::new(
                        format!(
                            "{queue}/{id} acked (op {}) and leased again (op {}, token {})",
                            ack.op.op, lease.claim.op, lease.lease.token
                        ),
                        [ack.op.op, lease.claim.op],
                    ));
                }
            }
        }
    }
    out
}

fn lost_job(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        let Some(enqueue) = job.made().next() else {
            continue;
        };
        for read in job.reads.iter().filter(|r| state(r).is_none()) {
            if job.acks.is_empty() {
                out.push(Violation::new(
                    format!("{queue}/{id} enqueued ok, never acked, gone at the end"),
                    [enqueue.op, read.op],
                ));
            }
        }
    }
    out
}

fn failed_enqueue_applied(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        if job.enqueues.is_empty() || job.enqueues.iter().any(|op| op.outcome != Outcome::Failed) {
            continue;
        }
        let mut seen: Vec<u64> = leases_of(facts, job).map(|l| l.claim.op).collect();
        seen.extend(
            job.reads
                .iter()
                .filter(|r| state(r).is_some())
                .map(|r| r.op),
        );
        if !seen.is_empty() {
            let mut ops: Vec<u64> = job.enqueues.iter().map(|op| op.op).collect();
            ops.extend(seen);
            out.push(Violation::new(
                format!("{queue}/{id}: every enqueue failed, yet the job exists"),
                ops,
            ));
        }
    }
    out
}

fn enqueued_twice(facts: &Facts<'_>) -> Vec<Violation> {
    incarnations(facts, false)
}

fn schedule_fired_twice(facts: &Facts<'_>) -> Vec<Violation> {
    incarnations(facts, true)
}

/// A job seen with two enqueue times was created twice: for a schedule's
/// job (`{name}:{fire time}`), the time fired twice.
fn incarnations(facts: &Facts<'_>, of_schedules: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&(queue, id), job) in &facts.jobs {
        if is_fired(facts, (queue, id)) != of_schedules {
            continue;
        }
        let mut seen: BTreeMap<i64, u64> = BTreeMap::new();
        for lease in leases_of(facts, job) {
            seen.entry(lease.lease.enqueued_at)
                .or_insert(lease.claim.op);
        }
        for read in &job.reads {
            if let Call::Read {
                enqueued_at: Some(at),
                ..
            } = read.call
            {
                seen.entry(at).or_insert(read.op);
            }
        }
        if seen.len() > 1 {
            out.push(Violation::new(
                format!(
                    "{queue}/{id} seen with {} enqueue times: {:?}",
                    seen.len(),
                    seen.keys().collect::<Vec<_>>()
                ),
                seen.into_values(),
            ));
        }
    }
    out
}

fn two_valid_leases(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        for a in leases_of(facts, job) {
            for b in leases_of(facts, job) {
                if a.lease.token != b.lease.token
                    && a.granted_at <= b.granted_at
                    && b.granted_at < a.held_until
                    && (a.granted_at, &a.lease.token) < (b.granted_at, &b.lease.token)
                {
                    out.push(Violation::new(
                        format!(
                            "{queue}/{id}: lease {} (op {}) held until {} when lease {} \
                             (op {}) was granted at {}",
                            a.lease.token,
                            a.claim.op,
                            a.held_until,
                            b.lease.token,
                            b.claim.op,
                            b.granted_at
                        ),
                        [a.claim.op, b.claim.op],
                    ));
                }
            }
        }
    }
    out
}

fn stale_ack_accepted(facts: &Facts<'_>) -> Vec<Violation> {
    let Some(offset) = facts.offset else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        for ack in job.acks.iter().filter(|a| a.accepted) {
            let Some(own) = leases_of(facts, job).find(|l| l.lease.token == ack.token) else {
                continue;
            };
            // Granted after the acked lease and before the ack was sent.
            let before = ack.op.start_ms + offset.lo;
            for newer in leases_of(facts, job) {
                if newer.granted_at > own.granted_at && newer.granted_at < before {
                    out.push(Violation::new(
                        format!(
                            "{queue}/{id}: ack with lease {} accepted (op {}) after lease {} \
                             replaced it (op {})",
                            ack.token, ack.op.op, newer.lease.token, newer.claim.op
                        ),
                        [own.claim.op, newer.claim.op, ack.op.op],
                    ));
                }
            }
        }
    }
    out
}

fn priority_order(facts: &Facts<'_>) -> Vec<Violation> {
    order(
        facts,
        |x, (priority, _), _| priority < x.priority,
        |_, _| true,
        |x, w| {
            format!(
                "claimed {} at priority {} while {} at priority {} was pending",
                x.id, x.priority, w.id, w.priority
            )
        },
    )
}

/// On a sharded queue, FIFO is judged for the jobs without a group: a
/// named group's jobs are tagged by each shard's fair order, so two of
/// them in different shards come out in the order of their tags, not of
/// their enqueues (docs/operations.md, "Sharded queues").
fn fifo_order(facts: &Facts<'_>) -> Vec<Violation> {
    order(
        facts,
        |x, (priority, group), sharded| {
            x.first_delivery
                && priority == x.priority
                && group == x.group
                && !(sharded && group.is_some())
        },
        |x, w| x.created_after.is_some_and(|after| w.created_by < after),
        |x, w| {
            format!(
                "claimed {} (group {:?}, priority {}) before {}, enqueued before it",
                x.id, x.group, x.priority, w.id
            )
        },
    )
}

/// A job as the order rules compare it.
#[derive(Debug)]
struct Ranked<'h> {
    id: &'h str,
    priority: u8,
    group: Option<&'h str>,
    /// Claimed before: a nacked or expired job's place is its own matter
    /// (and so is a dependant's on a sharded queue).
    first_delivery: bool,
    created_by: i64,
    created_after: Option<i64>,
}

/// A job that may be pending when a claim runs: from when it certainly
/// existed until it was possibly taken by a claim (one answered, or one
/// whose answer was lost).
#[derive(Debug)]
struct Witness<'h> {
    job: Ranked<'h>,
    taken_from: i64,
    enqueue: u64,
}

type ClassKey<'h> = (u8, Option<&'h str>);

/// Every job a claim answered on a queue without caps, against the jobs
/// of the queue certainly pending throughout the claim (created before it
/// started, enqueued without delay, not possibly taken by a claim that
/// started before it ended) in the classes `class` picks for it (told
/// whether the queue is sharded); `ahead` says whether such a job should
/// have come first. On a sharded queue a claim is not judged when it ran
/// while another said it could not reach a shard (that shard's jobs may
/// be passed over then, and the claims that said so name it:
/// docs/operations.md, "Sharded queues").
fn order(
    facts: &Facts<'_>,
    class: impl Fn(&Ranked<'_>, ClassKey<'_>, bool) -> bool,
    ahead: impl Fn(&Ranked<'_>, &Ranked<'_>) -> bool,
    describe: impl Fn(&Ranked<'_>, &Ranked<'_>) -> String,
) -> Vec<Violation> {
    let witnesses = witnesses(facts);
    // A claim sent again under its request id answers what its first send
    // took, when that one ran: it is judged from the first send's start.
    let first = first_sends(facts);
    let start_of = |op: &Op| first_send(&first, op);
    // A job a replace with a delay may have hit becomes a delayed job,
    // which on a sharded queue takes its place when due by its shard's
    // line (as a dependant does).
    let delayed_by_replace = replace_keys(facts, true);
    let mut claims: Vec<&Op> = facts
        .ops
        .iter()
        .filter(|op| op.outcome == Outcome::Ok && matches!(op.call, Call::Claim { .. }))
        .collect();
    claims.sort_by_key(|op| start_of(op));
    let skipping: Vec<&Op> = claims
        .iter()
        .copied()
        .filter(|op| matches!(&op.call, Call::Claim { skipped, .. } if !skipped.is_empty()))
        .collect();
    let unjudged = |claim: &Op, start_ms: i64| {
        skipping.iter().any(|other| {
            other.queue == claim.queue
                && start_of(other) <= claim.end_ms
                && start_ms <= other.end_ms
        })
    };
    // Per class, the first witness not yet taken by the time of the
    // claims seen so far: claims come by start, so what was taken before
    // one started was taken before every later one ended.
    let mut fronts: BTreeMap<(&str, ClassKey<'_>), usize> = BTreeMap::new();
    let mut out = Vec::new();
    for claim in claims {
        let Call::Claim { jobs, .. } = &claim.call else {
            continue;
        };
        let Some(classes) = witnesses.get(claim.queue.as_str()) else {
            continue;
        };
        let start_ms = start_of(claim);
        let sharded = facts.sharded(claim.queue.as_str());
        if sharded && unjudged(claim, start_ms) {
            continue;
        }
        for (&key, list) in classes {
            let front = fronts.entry((claim.queue.as_str(), key)).or_insert(0);
            while list.get(*front).is_some_and(|w| w.taken_from < start_ms) {
                *front += 1;
            }
        }
        let answered: BTreeSet<&str> = jobs.iter().map(|l| l.id.as_str()).collect();
        for lease in jobs {
            let job = facts.jobs.get(&(claim.queue.as_str(), lease.id.as_str()));
            let x = Ranked {
                id: &lease.id,
                priority: lease.priority,
                group: lease.group.as_deref(),
                // On a sharded queue, a dependant takes its place when it is
                // released, and a job a replace delayed when it is due, by
                // its shard's line, which another shard's jobs enqueued
                // earlier do not hold it behind.
                first_delivery: lease.attempts == 0
                    && job.and_then(JobFacts::delay_ms) == Some(0)
                    && !(sharded
                        && job.is_some_and(|job| {
                            !job.after().is_empty()
                                || job.dedup().is_some_and(|key| {
                                    delayed_by_replace.contains(&(claim.queue.as_str(), key))
                                })
                        })),
                created_by: i64::MAX,
                created_after: job.and_then(JobFacts::created_after),
            };
            let found = classes
                .iter()
                .filter(|(key, _)| class(&x, **key, sharded))
                .find_map(|(key, list)| {
                    let front = fronts[&(claim.queue.as_str(), *key)];
                    list[front..]
                        .iter()
                        .take_while(|w| w.job.created_by < start_ms)
                        .find(|w| {
                            w.taken_from >= claim.end_ms
                                && !answered.contains(w.job.id)
                                && ahead(&x, &w.job)
                        })
                });
            if let Some(w) = found {
                out.push(Violation::new(
                    format!(
                        "{}: {} (op {})",
                        claim.queue,
                        describe(&x, &w.job),
                        claim.op
                    ),
                    [claim.op, w.enqueue],
                ));
            }
        }
    }
    out
}

/// The (queue, dedup key) pairs an enqueue in mode replace (with a delay,
/// when `delayed`) may have used: it did not fail.
fn replace_keys<'h>(facts: &Facts<'h>, delayed: bool) -> BTreeSet<(&'h str, &'h str)> {
    facts
        .ops
        .iter()
        .filter_map(|op| match &op.call {
            Call::Enqueue {
                dedup: Some(key),
                replace: true,
                delay_ms,
                ..
            } if op.outcome != Outcome::Failed && (!delayed || *delay_ms != 0) => {
                Some((op.queue.as_str(), key.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// The jobs of each uncapped queue enqueued ok without delay, by class
/// (priority and group), in the order they certainly existed; not those
/// whose dedup key an enqueue in mode replace may have used (a replace
/// gives the job its priority and a new place in line).
fn witnesses<'h>(facts: &Facts<'h>) -> BTreeMap<&'h str, BTreeMap<ClassKey<'h>, Vec<Witness<'h>>>> {
    let pending = Pending::new(facts);
    // A job a replace may have hit may have taken another priority and
    // another place in line.
    let replaced = replace_keys(facts, false);
    let mut out: BTreeMap<&str, BTreeMap<ClassKey<'_>, Vec<Witness<'_>>>> = BTreeMap::new();
    for (&(queue, id), job) in &facts.jobs {
        // A job waiting for others becomes pending when the last of them
        // completes, and one that expires leaves pending when its deadline
        // comes, which no operation marks: neither is a witness.
        if facts.caps.get(queue).is_some_and(|c| c.any())
            || job.delay_ms() != Some(0)
            || !job.after().is_empty()
            || job.expires()
            || job
                .dedup()
                .is_some_and(|key| replaced.contains(&(queue, key)))
        {
            continue;
        }
        let (
            Some(created_by),
            Some(Call::Enqueue {
                priority, group, ..
            }),
        ) = (job.created_by(), job.enqueues.first().map(|op| &op.call))
        else {
            continue;
        };
        let witness = Witness {
            job: Ranked {
                id,
                priority: *priority,
                group: group.as_deref(),
                first_delivery: false,
                created_by,
                created_after: job.created_after(),
            },
            taken_from: pending.until((queue, id), job),
            enqueue: job.made().next().map_or(0, |op| op.op),
        };
        out.entry(queue)
            .or_default()
            .entry((*priority, group.as_deref()))
            .or_default()
            .push(witness);
    }
    for list in out.values_mut().flat_map(BTreeMap::values_mut) {
        list.sort_by_key(|w| w.job.created_by);
    }
    out
}

/// Until when each job certainly stayed pending (or scheduled): before
/// any claim that answered it could have taken it, or any claim whose
/// answer was lost that ran after it may have been created, or any
/// cancel of it.
struct Pending<'h> {
    taken: BTreeMap<JobKey<'h>, i64>,
    lost: Vec<&'h Op>,
}

impl<'h> Pending<'h> {
    fn new(facts: &Facts<'h>) -> Self {
        Self {
            taken: taken_from(facts),
            lost: unresolved_claims(facts),
        }
    }

    fn until(&self, (queue, id): JobKey<'h>, job: &JobFacts<'h>) -> i64 {
        let created_after = job.created_after();
        let lost_from = self
            .lost
            .iter()
            .filter(|u| u.queue == queue && created_after.is_none_or(|after| after < u.end_ms))
            .map(|u| u.start_ms)
            .min()
            .unwrap_or(i64::MAX);
        self.taken
            .get(&(queue, id))
            .copied()
            .unwrap_or(i64::MAX)
            .min(lost_from)
    }
}

/// When each job was first possibly taken out of pending: the start of
/// the first attempt under the request id of the first claim that
/// answered it, or of its first cancel that may have been applied.
fn taken_from<'h>(facts: &Facts<'h>) -> BTreeMap<JobKey<'h>, i64> {
    let first = first_sends(facts);
    let mut taken = BTreeMap::new();
    for lease in &facts.leases {
        let at = first_send(&first, lease.claim);
        let key = (lease.claim.queue.as_str(), lease.lease.id.as_str());
        let entry = taken.entry(key).or_insert(at);
        *entry = (*entry).min(at);
    }
    for (&key, job) in &facts.jobs {
        if let Some(at) = job.cancels.iter().map(|op| op.start_ms).min() {
            let entry = taken.entry(key).or_insert(at);
            *entry = (*entry).min(at);
        }
    }
    taken
}

/// Claims whose answer was lost and never recovered by a repeat under
/// their request id answered while their leases still ran: they may have
/// leased any job that was pending.
fn unresolved_claims<'h>(facts: &Facts<'h>) -> Vec<&'h Op> {
    let answered: Vec<&Op> = facts
        .ops
        .iter()
        .filter(|op| op.outcome == Outcome::Ok && matches!(op.call, Call::Claim { .. }))
        .collect();
    facts
        .ops
        .iter()
        .filter(|op| op.outcome == Outcome::Unknown)
        .filter(|lost| {
            let Call::Claim {
                worker,
                request_id,
                lease_ms,
                ..
            } = &lost.call
            else {
                return false;
            };
            !answered.iter().any(|op| {
                matches!(&op.call, Call::Claim { worker: w, request_id: r, .. }
                    if w == worker && r == request_id)
                    && op.end_ms < lost.start_ms + *lease_ms as i64
            })
        })
        .collect()
}

/// Every lease of a job enqueued with an expiry, against its deadline:
/// both by Redis's clock, so no offset comes in.
fn expired_delivered(facts: &Facts<'_>) -> Vec<Violation> {
    granted_outside(facts, |job| {
        let deadline = job.expires_at()?;
        Some((
            move |at| at >= deadline,
            format!("its expiry at {deadline}"),
        ))
    })
}

/// Every lease of a job enqueued with a `run_at`, granted before it (both
/// by Redis's clock). Jobs with a dedup key are left out: a replace sets
/// their start again.
fn delivered_before_run_at(facts: &Facts<'_>) -> Vec<Violation> {
    granted_outside(facts, |job| {
        let run_at = job.run_at().filter(|_| job.dedup().is_none())?;
        Some((move |at| at < run_at, format!("before its run_at {run_at}")))
    })
}

/// Every lease granted when its job's `bound` (none: the job is not
/// judged) says it may not be: a test of the grant's time by Redis's
/// clock, and what the report says of it.
fn granted_outside<F: Fn(i64) -> bool>(
    facts: &Facts<'_>,
    bound: impl Fn(&JobFacts<'_>) -> Option<(F, String)>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&(queue, id), job) in &facts.jobs {
        let Some((outside, what)) = bound(job) else {
            continue;
        };
        for lease in leases_of(facts, job).filter(|lease| outside(lease.granted_at)) {
            out.push(Violation::new(
                format!(
                    "{queue}: {id} handed out at {} (op {}), {what}",
                    lease.granted_at, lease.claim.op
                ),
                [lease.claim.op],
            ));
        }
    }
    out
}

/// Each nack answered ok against the wait it owed: its `delay_ms`, or
/// without one the job's backoff for the attempts it answered. The nack
/// came after the nacked lease's grant, so its `run_at` is no earlier than
/// that grant plus the wait, and no later lease of the job was granted
/// before that `run_at` (all by Redis's clock); a nack that owed a wait
/// and answered `pending` broke it. Jobs with a dedup key are left out: a
/// replace sets their delay again.
fn retried_early(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for op in facts.ops.iter().filter(|op| op.outcome == Outcome::Ok) {
        let Call::Nack {
            id,
            token,
            delay_ms,
            attempts,
            state,
            run_at,
        } = &op.call
        else {
            continue;
        };
        let Some(job) = facts.jobs.get(&(op.queue.as_str(), id.as_str())) else {
            continue;
        };
        let wait = match (delay_ms, job.backoff(), attempts) {
            (Some(ms), ..) => *ms,
            (None, Some(backoff), Some(n)) => backoff.wait_ms(*n),
            _ => 0,
        };
        let Some(nacked) = leases_of(facts, job).find(|lease| lease.lease.token == *token) else {
            continue;
        };
        if wait == 0 || job.dedup().is_some() {
            continue;
        }
        let due = nacked.granted_at + i64::try_from(wait).unwrap_or(i64::MAX);
        match (state.as_deref(), *run_at) {
            (Some("scheduled"), Some(run_at)) => {
                if run_at < due {
                    out.push(Violation::new(
                        format!(
                            "{}: {id} nacked (op {}) due at {run_at}, before its lease's grant \
                             at {} plus its wait of {wait} ms",
                            op.queue, op.op, nacked.granted_at
                        ),
                        [nacked.claim.op, op.op],
                    ));
                }
                for lease in leases_of(facts, job) {
                    if lease.granted_at > nacked.granted_at && lease.granted_at < run_at {
                        out.push(Violation::new(
                            format!(
                                "{}: {id} handed out at {} (op {}), before the {run_at} its \
                                 nack (op {}) answered",
                                op.queue, lease.granted_at, lease.claim.op, op.op
                            ),
                            [op.op, lease.claim.op],
                        ));
                    }
                }
            }
            (Some("pending"), _) => out.push(Violation::new(
                format!(
                    "{}: {id} nacked (op {}) back to pending, owing a wait of {wait} ms",
                    op.queue, op.op
                ),
                [op.op],
            )),
            _ => {}
        }
    }
    out
}

/// Every lease of a job granted by a claim whose first send began after a
/// cancel of the job was answered ok.
fn cancelled_delivered_again(facts: &Facts<'_>) -> Vec<Violation> {
    let first = first_sends(facts);
    let mut out = Vec::new();
    for (&(queue, id), job) in &facts.jobs {
        let Some(cancel) = job
            .cancels
            .iter()
            .filter(|op| op.outcome == Outcome::Ok)
            .min_by_key(|op| op.end_ms)
        else {
            continue;
        };
        for lease in leases_of(facts, job) {
            if first_send(&first, lease.claim) > cancel.end_ms {
                out.push(Violation::new(
                    format!(
                        "{queue}: {id} handed out (op {}) after its cancel (op {})",
                        lease.claim.op, cancel.op
                    ),
                    [cancel.op, lease.claim.op],
                ));
            }
        }
    }
    out
}

/// The start of the first send of each claim's request id, by worker and
/// request id: a claim sent again answers what its first send took.
fn first_sends<'h>(facts: &Facts<'h>) -> BTreeMap<(&'h str, &'h str), i64> {
    let mut first: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for op in facts.ops {
        if let Call::Claim {
            worker, request_id, ..
        } = &op.call
        {
            let at = first.entry((worker, request_id)).or_insert(op.start_ms);
            *at = (*at).min(op.start_ms);
        }
    }
    first
}

/// When the first send of `claim`'s request id began.
fn first_send(first: &BTreeMap<(&str, &str), i64>, claim: &Op) -> i64 {
    match &claim.call {
        Call::Claim {
            worker, request_id, ..
        } => first[&(worker.as_str(), request_id.as_str())],
        _ => claim.start_ms,
    }
}

/// Every lease of a job enqueued with `after`, against the acks of the
/// jobs it waits for (in its queue, or `queue/id` in another): one of
/// each that may have been applied must have begun by the end of the
/// claim that handed it out (the claim itself may carry it).
fn released_early(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&(queue, id), job) in &facts.jobs {
        for dependency in job.after() {
            let key = dependency
                .split_once('/')
                .unwrap_or((queue, dependency.as_str()));
            let acked_from = facts
                .jobs
                .get(&key)
                .and_then(|d| d.acks.iter().map(|ack| ack.op.start_ms).min());
            for lease in leases_of(facts, job) {
                // At or before: an ack carried by the claim that hands out
                // its dependant can begin and end in the claim's millisecond.
                if acked_from.is_none_or(|from| from > lease.claim.end_ms) {
                    out.push(Violation::new(
                        format!(
                            "{queue}: {id} handed out (op {}) before its dependency {dependency} was acked",
                            lease.claim.op
                        ),
                        [lease.claim.op],
                    ));
                }
            }
        }
    }
    out
}

/// Jobs of a queue enqueued with one dedup key, each answered with
/// itself: none made while another certainly held the key, from when
/// that one certainly existed until a claim or a cancel may have touched
/// it (before that nothing ends it; after, it may end at once). A job
/// waiting for others or expiring may end with no operation marking it:
/// it is no holder. On a queue of K shards a job with a client id lives
/// in its id's shard and is checked against that shard's keys only, so a
/// key has up to K holders at once: none is made while K others held it.
fn dedup_key_held_twice(facts: &Facts<'_>) -> Vec<Violation> {
    let pending = Pending::new(facts);
    let mut by_key: BTreeMap<(&str, &str), Vec<(JobKey<'_>, &JobFacts<'_>)>> = BTreeMap::new();
    for (&key, job) in &facts.jobs {
        if let Some(dedup) = job.dedup()
            && job.created_by().is_some()
        {
            by_key.entry((key.0, dedup)).or_default().push((key, job));
        }
    }
    let made = |j: &JobFacts<'_>| j.made().next().map_or(0, |op| op.op);
    let mut out = Vec::new();
    for ((queue, dedup), jobs) in &by_key {
        let holders = facts.shards.get(queue).copied().unwrap_or(1).max(1) as usize;
        for &((_, id), job) in jobs {
            let (Some(after), Some(by)) = (job.created_after(), job.created_by()) else {
                continue;
            };
            let held: Vec<(&str, &JobFacts<'_>)> = jobs
                .iter()
                .filter(|&&(holder_key, holder)| {
                    holder_key.1 != id
                        && holder.after().is_empty()
                        && !holder.expires()
                        && holder.created_by().is_some_and(|from| {
                            from < after && by < pending.until(holder_key, holder)
                        })
                })
                .map(|&((_, holder_id), holder)| (holder_id, holder))
                .collect();
            if held.len() >= holders {
                let names: Vec<&str> = held.iter().map(|(name, _)| *name).collect();
                out.push(Violation::new(
                    format!(
                        "{queue}: {id} made with dedup key {dedup} while {} held it (at most {} at once)",
                        names.join(", "),
                        holders - 1
                    ),
                    held.iter().map(|(_, holder)| made(holder)).chain([made(job)]),
                ));
            }
        }
    }
    out
}

/// Every job handed out by a claim that began after an enqueue was
/// answered `replaced: true` with it: the task, args and priority it came
/// with (its `args.by`, the client id of the enqueue that sent them) are
/// not those of an enqueue whose every send ended before the replace
/// began (the replace certainly came later).
fn replaced_delivered(facts: &Facts<'_>) -> Vec<Violation> {
    // Each enqueue's client id: when its last send that may have applied
    // ended.
    let mut written: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    let mut replaces: BTreeMap<(&str, &str), Vec<&Op>> = BTreeMap::new();
    for op in facts.ops {
        let Call::Enqueue {
            id,
            answered,
            replaced,
            ..
        } = &op.call
        else {
            continue;
        };
        if op.outcome != Outcome::Failed {
            let end = written
                .entry((op.queue.as_str(), id.as_str()))
                .or_insert(op.end_ms);
            *end = (*end).max(op.end_ms);
        }
        if let (Outcome::Ok, true, Some(answered)) = (op.outcome, replaced, answered) {
            replaces
                .entry((op.queue.as_str(), answered.as_str()))
                .or_default()
                .push(op);
        }
    }
    let first = first_sends(facts);
    let mut out = Vec::new();
    for claim in facts.ops.iter().filter(|op| op.outcome == Outcome::Ok) {
        let Call::Claim { jobs, .. } = &claim.call else {
            continue;
        };
        let start_ms = first_send(&first, claim);
        for lease in jobs {
            let Some(by) = lease.by.as_deref() else {
                continue;
            };
            let key = (claim.queue.as_str(), lease.id.as_str());
            let Some(&version_end) = written.get(&(claim.queue.as_str(), by)) else {
                continue;
            };
            let replace = replaces
                .get(&key)
                .into_iter()
                .flatten()
                .find(|replace| replace.end_ms < start_ms && version_end < replace.start_ms);
            if let Some(replace) = replace {
                out.push(Violation::new(
                    format!(
                        "{}: {} handed out with the args of {by} after {} replaced them",
                        claim.queue,
                        lease.id,
                        match &replace.call {
                            Call::Enqueue { id, .. } => id.as_str(),
                            _ => "",
                        }
                    ),
                    [replace.op, claim.op],
                ));
            }
        }
    }
    out
}

/// Every enqueue that made its job on a queue bounded by `max_pending`
/// (and not sharded: a shard holds its own share), against the jobs of
/// the queue certainly waiting throughout it: made by an enqueue answered
/// before it began, not possibly taken by a claim or a cancel before it
/// ended, and neither waiting for others nor expiring (those can leave
/// without an operation marking it).
fn queue_overfilled(facts: &Facts<'_>) -> Vec<Violation> {
    overfilled(facts, &facts.max_pending, "max_pending", |_| Some(1))
}

/// The same for `max_pending_bytes`, each job weighing the bytes its
/// enqueue recorded; a job with a dedup key is left out of those waiting
/// (a replace may have given it another body): the bytes certainly
/// waiting are at least those counted.
fn queue_overfilled_bytes(facts: &Facts<'_>) -> Vec<Violation> {
    overfilled(
        facts,
        &facts.max_pending_bytes,
        "max_pending_bytes",
        |op| match &op.call {
            Call::Enqueue { bytes, dedup, .. } if dedup.is_none() => *bytes,
            _ => None,
        },
    )
}

/// An enqueue that made its job while the jobs certainly waiting weighed
/// (by `weight` of the enqueue that made each; None: not counted) so much
/// that its own job's weight took them past the queue's `bound`.
fn overfilled(
    facts: &Facts<'_>,
    bounds: &BTreeMap<&str, u64>,
    setting: &str,
    weight: impl Fn(&Op) -> Option<u64>,
) -> Vec<Violation> {
    let pending = Pending::new(facts);
    let mut out = Vec::new();
    for (&queue, &bound) in bounds {
        if facts.sharded(queue) {
            continue;
        }
        // From when until when each such job certainly waited, its
        // weight, and the enqueue that made it.
        let waiting: Vec<(i64, i64, u64, u64)> = facts
            .jobs
            .iter()
            .filter(|((q, _), job)| *q == queue && job.after().is_empty() && !job.expires())
            .filter_map(|(&key, job)| {
                let made = job.made().next()?;
                let until = pending.until(key, job);
                Some((job.created_by()?, until, weight(made)?, made.op))
            })
            .collect();
        let makers = facts.ops.iter().filter(|op| {
            op.queue == queue
                && made_its_job(op)
                && matches!(op.call, Call::Enqueue { created, .. } if created != Some(false))
        });
        for enqueue in makers {
            // Its own weight unknown (a keyed job's bytes): the least.
            let own = weight(enqueue).unwrap_or(1);
            let held: Vec<(u64, u64)> = waiting
                .iter()
                .filter(|(from, until, ..)| *from < enqueue.start_ms && *until > enqueue.end_ms)
                .map(|&(_, _, weight, op)| (weight, op))
                .collect();
            let total: u64 = held.iter().map(|(weight, _)| weight).sum();
            if total + own > bound {
                let mut ops = vec![enqueue.op];
                ops.extend(held.iter().map(|(_, op)| op));
                out.push(Violation::new(
                    format!(
                        "{queue}: op {} made a job of {own} while {} jobs of {total} waited ({setting} {bound})",
                        enqueue.op,
                        held.len()
                    ),
                    ops,
                ));
            }
        }
    }
    out
}

fn cap_exceeded(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&queue, caps) in &facts.caps {
        let leases: Vec<&LeaseFact<'_>> = facts
            .leases
            .iter()
            .filter(|l| l.claim.queue == queue && l.held_until > l.granted_at)
            .collect();
        if let Some(cap) = caps.max_in_flight {
            out.extend(over_cap(queue, "the queue", cap, &leases));
        }
        if let Some(cap) = caps.group_max_in_flight {
            let mut groups: BTreeMap<Option<&str>, Vec<&LeaseFact<'_>>> = BTreeMap::new();
            for lease in &leases {
                groups
                    .entry(lease.lease.group.as_deref())
                    .or_default()
                    .push(lease);
            }
            for (group, leases) in groups {
                let label = format!("group {group:?}");
                out.extend(over_cap(queue, &label, cap, &leases));
            }
        }
    }
    out
}

/// The first instant more than `cap` of `leases` certainly held at once.
fn over_cap(queue: &str, what: &str, cap: u64, leases: &[&LeaseFact<'_>]) -> Option<Violation> {
    // Ends sort before starts at the same instant: [granted, held) intervals.
    let mut events: Vec<(i64, bool, usize)> = leases
        .iter()
        .enumerate()
        .flat_map(|(i, l)| [(l.granted_at, true, i), (l.held_until, false, i)])
        .collect();
    events.sort();
    let mut held = BTreeSet::new();
    for (at, start, i) in events {
        if !start {
            held.remove(&i);
            continue;
        }
        held.insert(i);
        if held.len() as u64 > cap {
            return Some(Violation::new(
                format!(
                    "{queue}: {} leases of {what} held at {at}, cap {cap}",
                    held.len()
                ),
                held.iter().map(|&i| leases[i].claim.op),
            ));
        }
    }
    None
}

fn result_mismatch(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        for read in &job.reads {
            let Call::Read {
                state: Some(state),
                result,
                ..
            } = &read.call
            else {
                continue;
            };
            if state != "completed" {
                continue;
            }
            let accepted: Vec<_> = job.acks.iter().filter(|a| a.accepted).collect();
            let candidates: Vec<_> = if accepted.is_empty() {
                job.acks.iter().collect()
            } else {
                accepted
            };
            let result = result.clone().unwrap_or_default();
            if !candidates.iter().any(|a| *a.result == result) {
                let mut ops: Vec<u64> = candidates.iter().map(|a| a.op.op).collect();
                ops.push(read.op);
                out.push(Violation::new(
                    format!("{queue}/{id} completed with result {result}, not one its acks sent"),
                    ops,
                ));
            }
        }
    }
    out
}

/// The most events a job's history keeps: a longer life's first ones are
/// gone, and the rule does not judge it.
const HISTORY_KEPT: usize = 100;

fn history_missing_claim(facts: &Facts<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for ((queue, id), job) in &facts.jobs {
        let Some(&since) = facts.histories.get(queue) else {
            continue;
        };
        for read in &job.reads {
            let Call::Read {
                events: Some(events),
                ..
            } = &read.call
            else {
                continue;
            };
            if events.len() >= HISTORY_KEPT {
                continue;
            }
            let claimed: Vec<(u64, Option<&str>)> = events
                .iter()
                .filter(|e| e.event == "claimed")
                .filter_map(|e| Some((e.fence?, e.worker.as_deref())))
                .collect();
            if claimed.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
                out.push(Violation::new(
                    format!(
                        "{queue}/{id}: its history's claims are not in the order of their fences"
                    ),
                    [read.op],
                ));
            }
            for lease in leases_of(facts, job).filter(|l| l.claim.start_ms > since) {
                let Call::Claim { worker, .. } = &lease.claim.call else {
                    continue;
                };
                let fence = lease.lease.fence();
                let found = claimed
                    .iter()
                    .any(|&(f, w)| Some(f) == fence && w == Some(worker.as_str()));
                if !found {
                    out.push(Violation::new(
                        format!(
                            "{queue}/{id}: lease {} of {worker} (op {}) is not in the job's history",
                            lease.lease.token, lease.claim.op
                        ),
                        [lease.claim.op, read.op],
                    ));
                }
            }
        }
    }
    out
}

fn leases_of<'f, 'h>(
    facts: &'f Facts<'h>,
    job: &'f JobFacts<'h>,
) -> impl Iterator<Item = &'f LeaseFact<'h>> {
    job.leases.iter().map(|&i| &facts.leases[i])
}

fn state(read: &Op) -> Option<&str> {
    match &read.call {
        Call::Read { state, .. } => state.as_deref(),
        _ => None,
    }
}

/// Whether the job is one a schedule of its queue fired: `{name}:{digits}`.
fn is_fired(facts: &Facts<'_>, (queue, id): JobKey<'_>) -> bool {
    let Some((name, at)) = id.rsplit_once(':') else {
        return false;
    };
    !at.is_empty()
        && at.bytes().all(|b| b.is_ascii_digit())
        && facts
            .schedules
            .get(queue)
            .is_some_and(|names| names.contains(&name))
}

/// A claim answered ok, as the fence rule sees it: when it certainly
/// began (its first send) and ended, and the fences it handed out.
struct Granted<'h> {
    op: u64,
    start_ms: i64,
    end_ms: i64,
    fences: Vec<(&'h str, u64)>,
}

/// Fences grow with every grant of a job and, on an unsharded queue, of
/// the queue (docs/guarantees.md, "Fences downstream"): judged between
/// claims one of which was answered before the other's first send began.
fn fence_not_growing(facts: &Facts<'_>) -> Vec<Violation> {
    let first = first_sends(facts);
    let mut by_queue: BTreeMap<&str, Vec<Granted<'_>>> = BTreeMap::new();
    for op in facts.ops.iter().filter(|op| op.outcome == Outcome::Ok) {
        let Call::Claim { jobs, .. } = &op.call else {
            continue;
        };
        let fences: Vec<(&str, u64)> = jobs
            .iter()
            .filter_map(|lease| Some((lease.id.as_str(), lease.fence()?)))
            .collect();
        if !fences.is_empty() {
            by_queue
                .entry(op.queue.as_str())
                .or_default()
                .push(Granted {
                    op: op.op,
                    start_ms: first_send(&first, op),
                    end_ms: op.end_ms,
                    fences,
                });
        }
    }
    let mut out = Vec::new();
    for (queue, mut claims) in by_queue {
        claims.sort_by_key(|c| c.start_ms);
        let whole_queue = !facts.sharded(queue);
        // Claims by their end: those answered before a claim began are
        // the ones it is judged against.
        let mut by_end: Vec<&Granted<'_>> = claims.iter().collect();
        by_end.sort_by_key(|c| c.end_ms);
        let (mut ended, mut highest) = (0, None::<(u64, u64)>);
        let mut per_job: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for claim in &claims {
            while by_end
                .get(ended)
                .is_some_and(|earlier| earlier.end_ms < claim.start_ms)
            {
                let earlier = by_end[ended];
                for &(id, fence) in &earlier.fences {
                    if highest.is_none_or(|(f, _)| fence > f) {
                        highest = Some((fence, earlier.op));
                    }
                    let job = per_job.entry(id).or_insert((fence, earlier.op));
                    if fence > job.0 {
                        *job = (fence, earlier.op);
                    }
                }
                ended += 1;
            }
            for &(id, fence) in &claim.fences {
                let before = per_job
                    .get(id)
                    .map(|&(f, op)| (f, op, "the same job"))
                    .filter(|&(f, ..)| fence <= f)
                    .or_else(|| {
                        highest
                            .filter(|&(f, _)| whole_queue && fence <= f)
                            .map(|(f, op)| (f, op, "the queue"))
                    });
                if let Some((f, op, of)) = before {
                    out.push(Violation::new(
                        format!(
                            "{queue}: {id} granted fence {fence} (op {}) after a claim of \
                             {of} answered fence {f} (op {op})",
                            claim.op
                        ),
                        [op, claim.op],
                    ));
                }
            }
        }
    }
    out
}
