//! A claim on a sharded queue: the shards' lines merged, claim of one job
//! after claim of one job, into what each shard is asked for.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use futures_util::future::{join_all, try_join_all};

use super::QueueShards;
use crate::queue::error::{QueueError, Result};
use crate::queue::exchange::{Ack, AckOutcome, ClaimEntry, Claimed, Line, LineEntry, LineRead};
use crate::queue::job::Job;
use crate::queue::store::keys;

impl QueueShards {
    /// A claim on a sharded queue. Every shard says, at once, the score
    /// first in line for each of `max_jobs` claims of one job there (see
    /// the `line` function); claim after claim, the shard whose next
    /// score is the lowest is picked, so the claim takes what as many
    /// claims of one job would. Each shard picked, or holding jobs the
    /// claim acks, is then sent its part at once: its share of the jobs
    /// and its acks. When the shards give fewer (a race with another
    /// claim), the other shards are asked in turn for the rest.
    ///
    /// A claim with a request id carries it in every part, so each shard
    /// keeps what its part answered; when a shard says it answered the id
    /// jobs before, the claim is a repeat: every shard that answered it or
    /// holds its acks answers its part again, and nothing new is leased.
    pub(super) async fn claim_shards(&self, entry: &ClaimEntry) -> Result<Claimed> {
        let field = entry.field();
        let reads: Vec<LineRead> = try_join_all(self.shards.iter().map(|shard| {
            shard.line.submit(LineEntry {
                claims: entry.max_jobs,
                field: field.clone(),
            })
        }))
        .await?;
        let repeat = reads.iter().any(|read| read.answered);
        let lines: Vec<Arc<Line>> = reads.iter().map(|read| Arc::clone(&read.line)).collect();
        // Where an ack can change what a shard offers (a cap), the acks
        // go first and the shards are read again, as a claim of one
        // shard would see them.
        if !repeat && !entry.acks.is_empty() && lines.iter().any(|line| line.capped) {
            let acked = self.send_parts(entry, &vec![0; self.shards.len()]).await?;
            let mut claimed = Box::pin(self.claim_shards(&ClaimEntry {
                acks: Vec::new(),
                ..entry.without_acks()
            }))
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
        let picks = match repeat {
            true => Vec::new(),
            false => {
                let _merging = self.merging.lock().unwrap_or_else(PoisonError::into_inner);
                merge_lines(&lines, want)
            }
        };
        let mut asks = vec![0u32; self.shards.len()];
        for shard in &picks {
            asks[*shard] += 1;
        }
        let mut claimed = self
            .send_parts_where(entry, &asks, |shard| reads[shard].answered)
            .await?;
        // The rest, when a race left a first claim short: the shards with
        // jobs in line that were not picked, then those that gave all
        // they were asked. Not those, with a request id: a shard keeps one
        // answer per request id, and asked again it answers the same jobs.
        let mut got = claimed.jobs.len();
        if !repeat && got < want {
            let asked_again = |shard: usize| asks[shard] == 0 || entry.request_id.is_none();
            let mut rest: Vec<usize> = (0..lines.len())
                .filter(|shard| {
                    lines[*shard].scores.len() > lines[*shard].taken.load(Ordering::Relaxed)
                })
                .filter(|shard| asked_again(*shard))
                .collect();
            for shard in (0..asks.len()).filter(|s| asks[*s] > 0 && asked_again(*s)) {
                if !rest.contains(&shard) {
                    rest.push(shard);
                }
            }
            for shard in rest {
                let missing = want - got.min(want);
                if missing == 0 {
                    break;
                }
                let part = Arc::new(ClaimEntry {
                    max_jobs: missing as u32,
                    ..entry.without_acks()
                });
                match self.shards[shard].lane.claim(part).await {
                    Ok(part) => {
                        got += part.jobs.len();
                        claimed.held = claimed.held.or(part.held);
                        claimed.expired += part.expired;
                        claimed.jobs.extend(part.jobs);
                    }
                    Err(error) if error.may_have_run() && entry.request_id.is_some() => {
                        return Err(unanswered_part(error));
                    }
                    Err(error) => tracing::debug!(shard, error = %error, "a shard's claim failed"),
                }
            }
        }
        // In the order the claims of one job would have taken them.
        let mut by_shard: Vec<VecDeque<Job>> = vec![VecDeque::new(); self.shards.len()];
        for job in std::mem::take(&mut claimed.jobs) {
            by_shard[keys::shard_of(&job.id, self.count()) as usize].push_back(job);
        }
        for shard in &picks {
            if let Some(job) = by_shard[*shard].pop_front() {
                claimed.jobs.push(job);
            }
        }
        claimed.jobs.extend(by_shard.into_iter().flatten());
        Ok(claimed)
    }

    /// Sends each shard its part of `entry`: `asks[shard]` jobs and the
    /// acks of its jobs, to every shard asked for jobs or holding acks.
    async fn send_parts(&self, entry: &ClaimEntry, asks: &[u32]) -> Result<Claimed> {
        self.send_parts_where(entry, asks, |_| false).await
    }

    /// As `send_parts`, and to every shard `also` names even when it is
    /// asked for nothing and holds no ack (a repeat's shards that answered
    /// it before). A part with acks that failed makes the claim's effect
    /// unknown (the jobs the others leased go back when their leases end,
    /// or a repeat with the request id answers them); a part of jobs alone
    /// that failed leaves the claim with the others' jobs.
    async fn send_parts_where(
        &self,
        entry: &ClaimEntry,
        asks: &[u32],
        also: impl Fn(usize) -> bool,
    ) -> Result<Claimed> {
        // The acks by shard: where each stood in the request, and the ack.
        let mut acks: Vec<(Vec<usize>, Vec<Ack>)> = vec![Default::default(); self.shards.len()];
        for (i, ack) in entry.acks.iter().enumerate() {
            let part = &mut acks[keys::shard_of(&ack.id, self.count()) as usize];
            part.0.push(i);
            part.1.push(ack.clone());
        }
        let sent: Vec<usize> = (0..self.shards.len())
            .filter(|s| asks[*s] > 0 || !acks[*s].1.is_empty() || also(*s))
            .collect();
        let outcomes = join_all(sent.iter().map(|shard| {
            let part = Arc::new(ClaimEntry {
                max_jobs: asks[*shard],
                acks: std::mem::take(&mut acks[*shard].1),
                ..entry.without_acks()
            });
            self.shards[*shard].lane.claim(part)
        }))
        .await;
        let mut claimed = Claimed {
            acked: vec![AckOutcome::NotFound; entry.acks.len()],
            ..Claimed::default()
        };
        let (mut applied, mut failure, mut acks_failed) = (false, None, false);
        let mut may_have_leased = false;
        for (shard, outcome) in sent.iter().zip(outcomes) {
            match outcome {
                Ok(part) => {
                    applied = true;
                    for (i, outcome) in acks[*shard].0.iter().zip(&part.acked) {
                        claimed.acked[*i] = *outcome;
                    }
                    claimed.held = claimed.held.or(part.held);
                    claimed.expired += part.expired;
                    claimed.jobs.extend(part.jobs);
                }
                Err(error) => {
                    tracing::debug!(shard, error = %error, "a shard's claim failed");
                    acks_failed |= !acks[*shard].0.is_empty();
                    may_have_leased |= asks[*shard] > 0 && error.may_have_run();
                    failure.get_or_insert(error);
                }
            }
        }
        match failure {
            None => Ok(claimed),
            // Nothing went through: the claim's own error.
            Some(error) if !applied => Err(error),
            Some(error) if acks_failed || claimed.jobs.is_empty() => Err(QueueError::Unknown(
                anyhow::Error::new(error)
                    .context("some shards' parts of the claim went through, others failed"),
            )),
            // A part that may have leased jobs whose answer is lost: with a
            // request id, the claim's repeat answers them, so it must be
            // repeated; without, they come back when their leases end.
            Some(error) if may_have_leased && entry.request_id.is_some() => {
                Err(unanswered_part(error))
            }
            Some(_) => Ok(claimed),
        }
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
        }
    }
}

/// The shard each of up to `want` claims of one job would take from, in
/// turn: the one whose next score in line (`lines[shard]`) is the lowest,
/// the lower shard on a tie. A line's scores that claims sharing its read
/// picked before are passed over, and the picks are marked taken, so
/// claims sharing reads pick as claims one after the other would; the
/// caller holds `merging` meanwhile.
fn merge_lines(lines: &[Arc<Line>], want: usize) -> Vec<usize> {
    let mut next: Vec<usize> = lines
        .iter()
        .map(|line| line.taken.load(Ordering::Relaxed))
        .collect();
    let mut picks = Vec::with_capacity(want);
    while picks.len() < want {
        let best = (0..lines.len())
            .filter_map(|shard| Some((*lines[shard].scores.get(next[shard])?, shard)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, shard)) = best else { break };
        next[shard] += 1;
        picks.push(shard);
    }
    for (line, taken) in lines.iter().zip(next) {
        line.taken.store(taken, Ordering::Relaxed);
    }
    picks
}
