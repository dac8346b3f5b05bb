//! What a history establishes, indexed for the rules: each job's
//! enqueues, leases, acks and final read, each lease's interval of
//! certain validity, and the bound on the offset between the runner's
//! clock and Redis's.
//!
//! "Certain" is the word throughout: an operation whose outcome is
//! unknown may have had its effect, so a fact built on it is one that
//! holds whether or not it did. Rules built on these facts can miss a
//! violation; they cannot report one that did not happen.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::history::{Backoff, Call, Lease, Op, Outcome};

/// A job: its queue and id.
pub type JobKey<'h> = (&'h str, &'h str);

/// Bounds on Redis's clock minus the runner's, in ms: every lease
/// granted in an answered claim was granted between the claim's start
/// and end, so the offset lies in `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    pub lo: i64,
    pub hi: i64,
}

/// One lease, as answered by a claim (a claim repeated with its request
/// id answers the same token: one fact).
#[derive(Debug)]
pub struct LeaseFact<'h> {
    pub claim: &'h Op,
    pub lease: &'h Lease,
    pub lease_ms: u64,
    /// When Redis granted it, by its clock: the deadline minus the lease.
    pub granted_at: i64,
    /// Until when it certainly held, by Redis's clock: its latest known
    /// deadline, cut at the start of the first release (ack or nack) that
    /// may have been applied.
    pub held_until: i64,
}

/// An ack that may have been applied (its outcome was not "failed").
#[derive(Debug)]
pub struct AckFact<'h> {
    pub op: &'h Op,
    pub token: &'h str,
    pub result: &'h Value,
    /// Answered 204: the ack was accepted.
    pub accepted: bool,
}

/// Everything the history says of one job.
#[derive(Debug, Default)]
pub struct JobFacts<'h> {
    pub enqueues: Vec<&'h Op>,
    /// Indexes into [`Facts::leases`].
    pub leases: Vec<usize>,
    pub acks: Vec<AckFact<'h>>,
    /// Cancels that may have been applied (not failed).
    pub cancels: Vec<&'h Op>,
    /// Final reads answered (200 or 404).
    pub reads: Vec<&'h Op>,
}

/// Whether `op` is an enqueue answered ok with its own job: not with
/// another job holding its dedup key, which made nothing.
pub fn made_its_job(op: &Op) -> bool {
    match &op.call {
        Call::Enqueue { id, answered, .. } => {
            op.outcome == Outcome::Ok && answered.as_ref().is_none_or(|a| a == id)
        }
        _ => false,
    }
}

impl<'h> JobFacts<'h> {
    /// Its enqueues answered ok with the job itself.
    pub fn made(&self) -> impl Iterator<Item = &'h Op> + '_ {
        self.enqueues.iter().copied().filter(|op| made_its_job(op))
    }

    /// The end of the first enqueue answered ok with the job itself: the
    /// job certainly existed from then on.
    pub fn created_by(&self) -> Option<i64> {
        self.made().map(|op| op.end_ms).min()
    }

    /// The start of the first enqueue that may have been applied: the job
    /// did not exist before.
    pub fn created_after(&self) -> Option<i64> {
        self.enqueues
            .iter()
            .filter(|op| op.outcome != Outcome::Failed)
            .map(|op| op.start_ms)
            .min()
    }

    /// The jobs it waits for, as sent: ids of its queue's, `queue/id` of
    /// another's (its enqueues all send the same body).
    pub fn after(&self) -> &'h [String] {
        self.enqueues
            .iter()
            .find_map(|&op: &&'h Op| match &op.call {
                Call::Enqueue { after, .. } => Some(after.as_slice()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The dedup key its enqueues sent.
    pub fn dedup(&self) -> Option<&'h str> {
        self.enqueues
            .iter()
            .find_map(|&op: &&'h Op| match &op.call {
                Call::Enqueue { dedup, .. } => dedup.as_deref(),
                _ => None,
            })
    }

    /// Whether its enqueues asked for an expiry.
    pub fn expires(&self) -> bool {
        self.enqueues.iter().any(|op| {
            matches!(
                &op.call,
                Call::Enqueue {
                    expires_in_ms: Some(_),
                    ..
                }
            )
        })
    }

    /// Its deadline, by Redis's clock, as an enqueue answered ok says.
    pub fn expires_at(&self) -> Option<i64> {
        self.made().find_map(|op| match &op.call {
            Call::Enqueue { expires_at, .. } => *expires_at,
            _ => None,
        })
    }

    /// The backoff its enqueues asked for (they all send the same body).
    pub fn backoff(&self) -> Option<Backoff> {
        self.enqueues.iter().find_map(|op| match &op.call {
            Call::Enqueue { backoff, .. } => *backoff,
            _ => None,
        })
    }

    /// The delay its enqueues asked for (they all send the same body);
    /// none for a job that asked for a `run_at` (it waits as a delayed one
    /// does, for a time no delay names).
    pub fn delay_ms(&self) -> Option<u64> {
        self.enqueues.iter().find_map(|op| match &op.call {
            Call::Enqueue {
                run_at: Some(_), ..
            } => None,
            Call::Enqueue { delay_ms, .. } => Some(*delay_ms),
            _ => None,
        })
    }

    /// The `run_at` its enqueues asked for (ms by Redis's clock).
    pub fn run_at(&self) -> Option<i64> {
        self.enqueues.iter().find_map(|op| match &op.call {
            Call::Enqueue { run_at, .. } => *run_at,
            _ => None,
        })
    }
}

/// A queue's caps, as configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    pub max_in_flight: Option<u64>,
    pub group_max_in_flight: Option<u64>,
}

impl Caps {
    pub fn any(self) -> bool {
        self.max_in_flight.is_some() || self.group_max_in_flight.is_some()
    }
}

/// The facts of a whole history.
#[derive(Debug)]
pub struct Facts<'h> {
    pub ops: &'h [Op],
    /// `None` when the answers contradict each other (no offset fits):
    /// the rules that need it say nothing.
    pub offset: Option<Offset>,
    pub jobs: BTreeMap<JobKey<'h>, JobFacts<'h>>,
    pub leases: Vec<LeaseFact<'h>>,
    /// Caps of each queue whose settings were ever patched (any outcome:
    /// a queue whose patch is unknown counts as capped).
    pub caps: BTreeMap<&'h str, Caps>,
    /// Schedule names of each queue.
    pub schedules: BTreeMap<&'h str, Vec<&'h str>>,
    /// The most shards each queue whose `shards` was patched may have had
    /// (any outcome but failed: one whose patch is unknown counts), or
    /// that a claim named a shard of (split before the history began).
    pub shards: BTreeMap<&'h str, u32>,
    /// The `max_pending` of each queue whose patch of it was answered ok.
    pub max_pending: BTreeMap<&'h str, u64>,
    /// The `max_pending_bytes` of each queue whose patch of it was
    /// answered ok.
    pub max_pending_bytes: BTreeMap<&'h str, u64>,
    /// The queues whose patch of `history_ms` was answered ok: they keep
    /// their jobs' histories from then on.
    pub histories: BTreeMap<&'h str, i64>,
}

impl<'h> Facts<'h> {
    pub fn new(ops: &'h [Op]) -> Self {
        let mut facts = Facts {
            ops,
            offset: None,
            jobs: BTreeMap::new(),
            leases: Vec::new(),
            caps: BTreeMap::new(),
            schedules: BTreeMap::new(),
            shards: BTreeMap::new(),
            max_pending: BTreeMap::new(),
            max_pending_bytes: BTreeMap::new(),
            histories: BTreeMap::new(),
        };
        let mut tokens: BTreeSet<&str> = BTreeSet::new();
        for op in ops {
            facts.file(op, &mut tokens);
        }
        facts.offset = offset(&facts.leases, &first_attempts(ops));
        facts.bound_leases();
        facts
    }

    /// Whether `queue` may be split over shards.
    pub fn sharded(&self, queue: &str) -> bool {
        self.shards.get(queue).is_some_and(|&k| k > 1)
    }

    fn job(&mut self, queue: &'h str, id: &'h str) -> &mut JobFacts<'h> {
        self.jobs.entry((queue, id)).or_default()
    }

    fn file(&mut self, op: &'h Op, tokens: &mut BTreeSet<&'h str>) {
        let queue = op.queue.as_str();
        match &op.call {
            Call::Configure {
                max_in_flight,
                group_max_in_flight,
                shards,
                max_pending,
                max_pending_bytes,
                history_ms,
            } => {
                if history_ms.is_some_and(|ms| ms > 0) && op.outcome == Outcome::Ok {
                    self.histories.entry(queue).or_insert(op.end_ms);
                }
                if let Some(bound) = max_pending
                    && op.outcome == Outcome::Ok
                {
                    self.max_pending.insert(queue, *bound);
                }
                if let Some(bound) = max_pending_bytes
                    && op.outcome == Outcome::Ok
                {
                    self.max_pending_bytes.insert(queue, *bound);
                }
                if let Some(shards) = shards
                    && op.outcome != Outcome::Failed
                {
                    let most = self.shards.entry(queue).or_insert(*shards);
                    *most = (*most).max(*shards);
                }
                if op.outcome != Outcome::Failed
                    && (max_in_flight.is_some() || group_max_in_flight.is_some())
                {
                    self.caps.insert(
                        queue,
                        Caps {
                            max_in_flight: *max_in_flight,
                            group_max_in_flight: *group_max_in_flight,
                        },
                    );
                }
            }
            Call::Schedule { name, .. } => {
                self.schedules.entry(queue).or_default().push(name);
            }
            Call::Enqueue { id, .. } => self.job(queue, id).enqueues.push(op),
            Call::Claim {
                lease_ms,
                acks,
                jobs,
                acked,
                skipped,
                ..
            } => {
                if op.outcome == Outcome::Failed {
                    return;
                }
                // A claim that could not reach shard k: the queue has more
                // than k shards, whether or not the history split it.
                if let Some(&last) = skipped.iter().max() {
                    let most = self.shards.entry(queue).or_insert(0);
                    *most = (*most).max(last + 1).max(2);
                }
                for (i, ack) in acks.iter().enumerate() {
                    // Answered: its own status says; unanswered: it may
                    // have been applied.
                    let status = acked.get(i).copied();
                    if op.outcome == Outcome::Ok && status != Some(204) {
                        continue;
                    }
                    self.job(queue, &ack.id).acks.push(AckFact {
                        op,
                        token: &ack.token,
                        result: &ack.result,
                        accepted: status == Some(204),
                    });
                }
                for lease in jobs {
                    if !tokens.insert(&lease.token) {
                        continue;
                    }
                    let index = self.leases.len();
                    self.job(queue, &lease.id).leases.push(index);
                    self.leases.push(LeaseFact {
                        claim: op,
                        lease,
                        lease_ms: *lease_ms,
                        granted_at: lease.expires_at - *lease_ms as i64,
                        held_until: lease.expires_at,
                    });
                }
            }
            Call::Ack(ack) => {
                if op.outcome != Outcome::Failed {
                    self.job(queue, &ack.id).acks.push(AckFact {
                        op,
                        token: &ack.token,
                        result: &ack.result,
                        accepted: op.outcome == Outcome::Ok,
                    });
                }
            }
            Call::Read { id, .. } => {
                if op.outcome == Outcome::Ok {
                    self.job(queue, id).reads.push(op);
                }
            }
            Call::Cancel { id, .. } => {
                if op.outcome != Outcome::Failed {
                    self.job(queue, id).cancels.push(op);
                }
            }
            Call::Extend { .. } | Call::Nack { .. } => {}
        }
    }

    /// Each lease's `held_until`: raised by the extends answered ok, when
    /// every extend that may have been applied asked the same lease (then
    /// a later one only moves the deadline later), and cut at the first
    /// release that may have been applied.
    fn bound_leases(&mut self) {
        let mut extends: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
        let mut releases: BTreeMap<&str, i64> = BTreeMap::new();
        for op in self.ops.iter().filter(|op| op.outcome != Outcome::Failed) {
            match &op.call {
                Call::Extend { token, .. } => extends.entry(token).or_default().push(op),
                Call::Nack { token, .. } | Call::Ack(crate::history::AckEntry { token, .. }) => {
                    release(&mut releases, token, op.start_ms);
                }
                Call::Claim {
                    acks, acked: ok, ..
                } => {
                    for (i, ack) in acks.iter().enumerate() {
                        if op.outcome == Outcome::Unknown || ok.get(i) == Some(&204) {
                            release(&mut releases, &ack.token, op.start_ms);
                        }
                    }
                }
                _ => {}
            }
        }
        let offset = self.offset;
        for fact in &mut self.leases {
            let token = fact.lease.token.as_str();
            let ext = extends.get(token).map(Vec::as_slice).unwrap_or_default();
            let same_lease = ext.iter().all(
                |op| matches!(op.call, Call::Extend { lease_ms, .. } if lease_ms == fact.lease_ms),
            );
            if !same_lease {
                // A shorter extend may have been applied last: nothing
                // certain beyond the grant.
                fact.held_until = fact.granted_at;
                continue;
            }
            for op in ext {
                if let Call::Extend {
                    expires_at: Some(at),
                    ..
                } = op.call
                    && op.outcome == Outcome::Ok
                {
                    fact.held_until = fact.held_until.max(at);
                }
            }
            if let Some(&start) = releases.get(token) {
                // Without a bound on the clocks, a release cuts the lease
                // to nothing.
                let cut = offset.map_or(fact.granted_at, |o| start + o.lo);
                fact.held_until = fact.held_until.min(cut);
            }
        }
    }
}

fn release<'h>(releases: &mut BTreeMap<&'h str, i64>, token: &'h str, start: i64) {
    let first = releases.entry(token).or_insert(start);
    *first = (*first).min(start);
}

/// The claims sent first under their request id: a repeat answers leases
/// granted during an earlier attempt, so only these bound when a lease
/// was granted.
pub fn first_attempts(ops: &[Op]) -> BTreeSet<u64> {
    let mut first: BTreeMap<(&str, &str), &Op> = BTreeMap::new();
    for op in ops {
        if let Call::Claim {
            worker, request_id, ..
        } = &op.call
        {
            let seen = first.entry((worker, request_id)).or_insert(op);
            if op.start_ms < seen.start_ms {
                *seen = op;
            }
        }
    }
    first.values().map(|op| op.op).collect()
}

fn offset(leases: &[LeaseFact<'_>], first: &BTreeSet<u64>) -> Option<Offset> {
    let mut bound = Offset {
        lo: i64::MIN,
        hi: i64::MAX,
    };
    let answered_first =
        |f: &&LeaseFact<'_>| f.claim.outcome == Outcome::Ok && first.contains(&f.claim.op);
    for fact in leases.iter().filter(answered_first) {
        bound.lo = bound.lo.max(fact.granted_at - fact.claim.end_ms);
        bound.hi = bound.hi.min(fact.granted_at - fact.claim.start_ms);
    }
    (bound.lo <= bound.hi && bound.lo > i64::MIN).then_some(bound)
}
