//! A claim on a sharded queue: the shards' lines merged, claim of one job
//! after claim of one job, into what each shard is asked for, each part
//! held to the jobs it picked there, so that no shard hands out a job that
//! ranks after one another reachable shard holds.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError};

use futures_util::future::join_all;

use super::QueueShards;
use super::plan::{Plan, failed_before, in_pick_order, plan};
use crate::queue::error::{QueueError, Result};
use crate::queue::exchange::{Ack, AckOutcome, ClaimEntry, Claimed, Line, LineEntry};
use crate::queue::store::keys;

/// Reads of the shards' lines a claim makes at most. A read after the
/// first follows parts that gave fewer jobs than they were asked for:
/// another claim took the jobs read.
const ROUNDS: usize = 8;

/// What the parts of one round answered: the jobs and acks of those that
/// went through, and per shard whose part failed, the error, whether it
/// carried acks and whether it may have leased jobs.
#[derive(Debug, Default)]
struct Parts {
    claimed: Claimed,
    applied: bool,
    failed: Vec<(usize, QueueError, bool, bool)>,
}

impl QueueShards {
    /// A claim on a sharded queue. Every shard says, at once, the score
    /// first in line for each of `max_jobs` claims of one job there (see
    /// the `line` function); claim after claim, the shard whose next score
    /// is the lowest is picked, so the claim takes what as many claims of
    /// one job would; picks stop at the last score read of a line that may
    /// hold more than was read, once every score of it read is picked.
    /// Each shard picked, or holding jobs the claim acks, is then sent its
    /// part at once: the jobs it picked there, and its acks. A part takes
    /// the jobs it picked that still wait and no other: a job that landed
    /// since the read, even ranked among them, is not the part's (it
    /// landed after the claim began); so the jobs the claims sharing a
    /// read picked are the jobs they take, whoever else takes from the
    /// shard meanwhile, and no claim hands out a job ranked after one
    /// another shard held for it. When the parts give fewer (another claim
    /// took jobs read), the lines are read again, up to `ROUNDS` reads.
    ///
    /// A shard whose read or part fails is skipped: the claim goes on with
    /// the others and names it in `skipped`, as its jobs may have been
    /// passed over. So is a shard where the part of a claim sharing a read
    /// failed, when this claim picked after it: the jobs that claim picked
    /// there, passed over here, may still wait (the claim waits to hear
    /// how those parts went). With a request id, a read that fails fails
    /// the claim (the shard may hold its answer), and a part that may have
    /// leased jobs whose answer is lost asks for the claim's repeat.
    ///
    /// A claim with a request id carries it in every part, so each shard
    /// keeps what its part answered; when a shard says it answered the id
    /// jobs before, the claim is a repeat: every shard that answered it or
    /// holds its acks answers its part again, and nothing new is leased.
    pub(super) async fn claim_shards(&self, entry: &ClaimEntry) -> Result<Claimed> {
        let field = entry.field();
        let (lines, answered, mut skipped) = self.read_lines(entry.max_jobs, field).await?;
        let repeat = answered.iter().any(|answered| *answered);
        if repeat {
            let parts = self
                .send_parts_where(entry, &Plan::none(self.shards.len()), |shard| {
                    answered[shard]
                })
                .await;
            return parts.into_claim(entry);
        }
        // Where an ack can change what a shard offers (a cap), the acks
        // go first and the shards are read again, as a claim of one
        // shard would see them.
        let capped = lines.iter().flatten().any(|line| line.capped);
        if !entry.acks.is_empty() && capped {
            let acked = self
                .send_parts(entry, &Plan::none(self.shards.len()))
                .await
                .into_claim(entry)?;
            let mut claimed = Box::pin(self.claim_shards(&entry.without_acks()))
                .await
                .map_err(|error| match error {
                    // The acks went through: a claim routed anew would apply
                    // them twice.
                    QueueError::ShardsChanged => QueueError::Unknown(anyhow::anyhow!(
                        "the shards changed under a claim after its acks were applied"
                    )),
                    error => error,
                })?;
            claimed.acked = acked.acked;
            return Ok(claimed);
        }
        let want = entry.max_jobs as usize;
        let mut lines = lines;
        let mut claimed = Claimed::default();
        // With a request id, a shard that leased jobs or applied acks
        // keeps its answer, and asked again would answer the same: it is
        // asked once.
        let mut answered_id = vec![false; self.shards.len()];
        let mut passed = Vec::new();
        for round in 0..ROUNDS {
            let missing = want - claimed.jobs.len().min(want);
            // With a request id, a shard that answered an earlier round is
            // not asked again: the picks stop at its next job, as nothing
            // ranked after that job may be taken while it waits.
            let closed: Vec<bool> = match entry.request_id {
                Some(_) => answered_id.clone(),
                None => vec![false; self.shards.len()],
            };
            let mut plan = {
                let _merging = self.merging.lock().unwrap_or_else(PoisonError::into_inner);
                plan(&lines, missing, &closed)
            };
            let part = if round == 0 {
                self.send_parts(entry, &plan).await
            } else {
                self.send_parts(&entry.without_acks(), &plan).await
            };
            passed.append(&mut plan.passed);
            let first = round == 0;
            let part = match part.settle(entry, first) {
                Ok(part) => part,
                // A later round's failure keeps what the earlier ones
                // leased: with a request id they are answered again.
                Err(error) if first || entry.request_id.is_some() => return Err(error),
                Err(error) => {
                    tracing::debug!(error = %error, "a later round of a sharded claim failed");
                    break;
                }
            };
            for shard in &part.skipped {
                skipped.insert(*shard);
            }
            for job in &part.jobs {
                answered_id[keys::shard_of(&job.id, self.count()) as usize] = true;
            }
            if first {
                claimed.acked = part.acked;
                for ack in &entry.acks {
                    answered_id[keys::shard_of(&ack.id, self.count()) as usize] = true;
                }
            }
            claimed.held = claimed.held.or(part.held);
            claimed.expired += part.expired;
            // Fewer than asked: another claim took jobs read; the lines are
            // read again.
            let short = part.jobs.len() < plan.asks.iter().sum::<u32>() as usize;
            claimed
                .jobs
                .extend(in_pick_order(part.jobs, &plan.picks, self.count()));
            if claimed.jobs.len() >= want || !short {
                break;
            }
            let (again, _, unread) = self
                .read_lines(
                    u32::try_from(want - claimed.jobs.len()).unwrap_or(u32::MAX),
                    None,
                )
                .await?;
            skipped.extend(unread);
            lines = again;
        }
        skipped.extend(failed_before(passed).await);
        claimed.skipped = skipped.into_iter().collect();
        Ok(claimed)
    }

    /// Every shard's line for `claims` claims of one job, read at once,
    /// and whether it answered the request id behind `field` before; a
    /// shard whose read failed has none and is in the set returned. With
    /// a request id (`field`), a failed read fails the claim; so does one
    /// that says the shards changed, and a claim none of whose reads went
    /// through.
    async fn read_lines(
        &self,
        claims: u32,
        field: Option<String>,
    ) -> Result<(Vec<Option<Arc<Line>>>, Vec<bool>, BTreeSet<u32>)> {
        let with_id = field.is_some();
        let reads = join_all(self.shards.iter().map(|shard| {
            shard.line.submit(LineEntry {
                claims,
                field: field.clone(),
            })
        }))
        .await;
        let (mut lines, mut answered, mut unread) = (Vec::new(), Vec::new(), BTreeSet::new());
        let mut failure = None;
        for (shard, read) in reads.into_iter().enumerate() {
            match read {
                Ok(read) => {
                    answered.push(read.answered);
                    lines.push(Some(read.line));
                }
                Err(error @ (QueueError::ShardsChanged | QueueError::Unregistered)) => {
                    return Err(error);
                }
                Err(error) if with_id => return Err(error),
                Err(error) => {
                    tracing::debug!(shard, error = %error, "a shard's line could not be read");
                    answered.push(false);
                    lines.push(None);
                    unread.insert(shard as u32);
                    failure.get_or_insert(error);
                }
            }
        }
        match failure {
            Some(error) if lines.iter().all(Option::is_none) => Err(error),
            _ => Ok((lines, answered, unread)),
        }
    }

    /// Sends each shard its part of `entry`: the jobs `plan` picked there,
    /// and the acks of its jobs, to every shard asked for jobs or holding
    /// acks.
    async fn send_parts(&self, entry: &ClaimEntry, plan: &Plan) -> Parts {
        self.send_parts_where(entry, plan, |_| false).await
    }

    /// As `send_parts`, and to every shard `also` names even when it is
    /// asked for nothing and holds no ack (a repeat's shards that answered
    /// it before).
    async fn send_parts_where(
        &self,
        entry: &ClaimEntry,
        plan: &Plan,
        also: impl Fn(usize) -> bool,
    ) -> Parts {
        // The acks by shard: where each stood in the request, and the ack.
        let mut acks: Vec<(Vec<usize>, Vec<Ack>)> = vec![Default::default(); self.shards.len()];
        for (i, ack) in entry.acks.iter().enumerate() {
            let part = &mut acks[keys::shard_of(&ack.id, self.count()) as usize];
            part.0.push(i);
            part.1.push(ack.clone());
        }
        let sent: Vec<usize> = (0..self.shards.len())
            .filter(|s| plan.asks[*s] > 0 || !acks[*s].1.is_empty() || also(*s))
            .collect();
        let outcomes = join_all(sent.iter().map(|shard| {
            let part = Arc::new(ClaimEntry {
                max_jobs: plan.asks[*shard],
                acks: std::mem::take(&mut acks[*shard].1),
                picked: plan.picked[*shard].clone(),
                ..entry.without_acks()
            });
            self.shards[*shard].lane.claim(part)
        }))
        .await;
        let mut parts = Parts {
            claimed: Claimed {
                acked: vec![AckOutcome::NotFound; entry.acks.len()],
                ..Claimed::default()
            },
            ..Parts::default()
        };
        for (shard, outcome) in sent.iter().zip(outcomes) {
            if let Some(tell) = plan.tells.get(*shard).and_then(Option::as_ref) {
                tell.send_replace(Some(outcome.is_ok()));
            }
            match outcome {
                Ok(part) => {
                    parts.applied = true;
                    for (i, outcome) in acks[*shard].0.iter().zip(&part.acked) {
                        parts.claimed.acked[*i] = *outcome;
                    }
                    let claimed = &mut parts.claimed;
                    claimed.held = claimed.held.or(part.held);
                    claimed.expired += part.expired;
                    claimed.jobs.extend(part.jobs);
                }
                Err(error) => {
                    tracing::debug!(shard, error = %error, "a shard's claim failed");
                    let carried_acks = !acks[*shard].0.is_empty();
                    let may_have_leased = plan.asks[*shard] > 0 && error.may_have_run();
                    parts
                        .failed
                        .push((*shard, error, carried_acks, may_have_leased));
                }
            }
        }
        parts
    }
}

impl Parts {
    /// The claim's answer from its parts: a part with acks that failed
    /// makes the claim's effect unknown (the jobs the others leased go back
    /// when their leases end, or a repeat with the request id answers
    /// them); a part of jobs alone that failed leaves the claim with the
    /// others' jobs, its shard skipped.
    fn settle(self, entry: &ClaimEntry, first: bool) -> Result<Claimed> {
        let Self {
            mut claimed,
            applied,
            failed,
        } = self;
        let acks_failed = failed.iter().any(|(_, _, acks, _)| *acks);
        let may_have_leased = failed.iter().any(|(_, _, _, leased)| *leased);
        claimed.skipped = failed.iter().map(|(shard, ..)| *shard as u32).collect();
        let Some((_, error, ..)) = failed.into_iter().next() else {
            return Ok(claimed);
        };
        match error {
            // Nothing went through: the claim's own error.
            error if !applied && first => Err(error),
            error if acks_failed => Err(QueueError::Unknown(
                anyhow::Error::new(error)
                    .context("some shards' parts of the claim went through, others failed"),
            )),
            // A part that may have leased jobs whose answer is lost: with a
            // request id, the claim's repeat answers them, so it must be
            // repeated; without, they come back when their leases end.
            error if may_have_leased && entry.request_id.is_some() => Err(unanswered_part(error)),
            _ => Ok(claimed),
        }
    }

    /// As `settle` for a claim's only round.
    fn into_claim(self, entry: &ClaimEntry) -> Result<Claimed> {
        self.settle(entry, true)
    }
}

/// The error of a claim with a request id one of whose parts may have
/// leased jobs without an answer: its repeat answers every part.
fn unanswered_part(error: QueueError) -> QueueError {
    QueueError::Unknown(anyhow::Error::new(error).context(
        "a shard's part of the claim may have leased jobs whose answer was lost; repeat the claim with its request id",
    ))
}

impl ClaimEntry {
    /// The same claim with no ack: its part for another shard, or its
    /// look again once its acks went.
    fn without_acks(&self) -> Self {
        Self {
            lease_ms: self.lease_ms,
            max_jobs: self.max_jobs,
            worker: self.worker.clone(),
            request_id: self.request_id.clone(),
            acks: Vec::new(),
            picked: Vec::new(),
        }
    }
}
