//! A claim on a sharded queue: the shards' lines merged, claim of one job
//! after claim of one job, into what each shard is asked for.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::future::{join_all, try_join_all};

use super::QueueShards;
use crate::queue::error::{QueueError, Result};
use crate::queue::exchange::{Ack, AckOutcome, ClaimEntry, Claimed, Held, Line};
use crate::queue::job::Job;
use crate::queue::store::keys;

impl QueueShards {
    /// A claim on a sharded queue. Every shard says, at once, the score
    /// first in line for each of `max_jobs` claims of one job there (see
    /// the `heads` function); claim after claim, the shard whose next
    /// score is the lowest is picked, so the claim takes what as many
    /// claims of one job would. The shards picked are then asked for
    /// their share, at once, each with the acks of its jobs (the other
    /// shards' acks go alone, at the same time); when they give fewer (a
    /// race with another claim), the other shards are asked in turn for
    /// the rest.
    pub(super) async fn claim_shards(&self, entry: &ClaimEntry) -> Result<Claimed> {
        let heads = try_join_all(
            self.shards
                .iter()
                .map(|shard| shard.heads.submit(entry.max_jobs)),
        )
        .await?;
        // Where an ack can change what a shard offers (a cap), the acks
        // go first and the shards are read again, as a claim of one
        // shard would see them.
        if !entry.acks.is_empty() && heads.iter().any(|line| line.capped) {
            let acked = self.ack(&Arc::new(entry.acks.clone())).await?;
            let mut claimed = Box::pin(self.claim_shards(&ClaimEntry {
                lease_ms: entry.lease_ms,
                max_jobs: entry.max_jobs,
                worker: entry.worker.clone(),
                acks: Vec::new(),
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
            claimed.acked = acked;
            return Ok(claimed);
        }
        let want = entry.max_jobs as usize;
        let picks = merge_lines(&heads, want);
        let mut asks = vec![0u32; self.shards.len()];
        for shard in &picks {
            asks[*shard] += 1;
        }
        let ask = |max_jobs, acks| {
            Arc::new(ClaimEntry {
                lease_ms: entry.lease_ms,
                max_jobs,
                worker: entry.worker.clone(),
                acks,
            })
        };
        // The acks by shard: where each stood in the request, and the ack.
        let mut acks: Vec<(Vec<usize>, Vec<Ack>)> = vec![Default::default(); self.shards.len()];
        for (i, ack) in entry.acks.iter().enumerate() {
            let part = &mut acks[keys::shard_of(&ack.id, self.count()) as usize];
            part.0.push(i);
            part.1.push(ack.clone());
        }
        let first: Vec<usize> = (0..asks.len()).filter(|s| asks[*s] > 0).collect();
        let alone: Vec<usize> = (0..asks.len())
            .filter(|s| asks[*s] == 0 && !acks[*s].1.is_empty())
            .collect();
        let claims = first.iter().map(|shard| {
            let entry = ask(asks[*shard], std::mem::take(&mut acks[*shard].1));
            self.shards[*shard].lane.claim(entry)
        });
        let (claims, acked_alone) = tokio::join!(
            join_all(claims.collect::<Vec<_>>()),
            join_all(alone.iter().map(|shard| {
                let part = std::mem::take(&mut acks[*shard].1);
                self.shards[*shard].lane.ack(Arc::new(part))
            }))
        );
        let mut claimed = Claimed {
            acked: vec![AckOutcome::NotFound; entry.acks.len()],
            ..Claimed::default()
        };
        // An ack whose call failed may or may not have been applied: the
        // claim fails (the jobs it took go back when their leases end).
        let mut ack_failure = None;
        let file_acks = |shard: usize, outcomes: &[AckOutcome], acked: &mut Vec<AckOutcome>| {
            for (i, outcome) in acks[shard].0.iter().zip(outcomes) {
                acked[*i] = *outcome;
            }
        };
        // Whether some shard's part went through: then the claim must not
        // be routed anew, which would apply that part twice.
        let mut applied = false;
        for (shard, outcome) in alone.iter().zip(acked_alone) {
            match outcome {
                Ok(outcomes) => {
                    applied = true;
                    file_acks(*shard, &outcomes, &mut claimed.acked);
                }
                Err(error) => {
                    ack_failure.get_or_insert(error);
                }
            }
        }
        // What each shard handed out, in its order.
        let mut parts: Vec<VecDeque<Job>> = vec![VecDeque::new(); self.shards.len()];
        let mut failure = None;
        // Files a shard's answer; answers how many jobs it gave.
        let mut take =
            |shard: usize, outcome: Result<Claimed>, held: &mut Option<Held>| match outcome {
                Ok(part) => {
                    let given = part.jobs.len();
                    parts[shard].extend(part.jobs);
                    *held = held.or(part.held);
                    given
                }
                Err(error) => {
                    tracing::debug!(shard, error = %error, "a shard's claim failed");
                    failure.get_or_insert(error);
                    0
                }
            };
        let mut more: Vec<usize> = Vec::new();
        let mut got = 0;
        for (shard, outcome) in first.iter().zip(claims) {
            let outcome = match outcome {
                Ok(part) => {
                    applied = true;
                    file_acks(*shard, &part.acked, &mut claimed.acked);
                    Ok(part)
                }
                Err(error) if !acks[*shard].0.is_empty() => {
                    ack_failure.get_or_insert(error.duplicate());
                    Err(error)
                }
                Err(error) => Err(error),
            };
            let given = take(*shard, outcome, &mut claimed.held);
            got += given;
            if given == asks[*shard] as usize {
                more.push(*shard);
            }
        }
        // The rest, when a race left the claim short: the shards with
        // jobs in line that were not picked, then those that gave all
        // they were asked.
        if got < want {
            let mut rest: Vec<usize> = (0..heads.len())
                .filter(|shard| heads[*shard].scores.len() > asks[*shard] as usize)
                .collect();
            for shard in more {
                if !rest.contains(&shard) {
                    rest.push(shard);
                }
            }
            for shard in rest {
                let missing = want - got.min(want);
                if missing == 0 {
                    break;
                }
                let outcome = self.shards[shard]
                    .lane
                    .claim(ask(missing as u32, Vec::new()))
                    .await;
                got += take(shard, outcome, &mut claimed.held);
            }
        }
        // In the order the claims of one job would have taken them.
        for shard in &picks {
            if let Some(job) = parts[*shard].pop_front() {
                claimed.jobs.push(job);
            }
        }
        claimed.jobs.extend(parts.into_iter().flatten());
        let error = match (ack_failure, failure) {
            (Some(error), _) => error,
            (None, Some(error)) if claimed.jobs.is_empty() => error,
            _ => return Ok(claimed),
        };
        match error {
            QueueError::ShardsChanged if applied => Err(QueueError::Unknown(anyhow::anyhow!(
                "the shards changed under a claim after some of its parts were applied"
            ))),
            error => Err(error),
        }
    }
}

/// The shard each of up to `want` claims of one job would take from, in
/// turn: the one whose next score in line (`lines[shard]`) is the lowest,
/// the lower shard on a tie.
fn merge_lines(lines: &[Arc<Line>], want: usize) -> Vec<usize> {
    let mut next = vec![0; lines.len()];
    let mut picks = Vec::with_capacity(want);
    while picks.len() < want {
        let best = (0..lines.len())
            .filter_map(|shard| Some((*lines[shard].scores.get(next[shard])?, shard)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, shard)) = best else { break };
        next[shard] += 1;
        picks.push(shard);
    }
    picks
}
