//! Claim: the acks a worker brings, then up to `max_jobs` jobs leased,
//! waiting for one (a long poll) when none is claimable.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{RECHECK_INTERVAL, Waiting};
use crate::queue::broker::Broker;
use crate::queue::counters::QueueCounters;
use crate::queue::error::Result;
use crate::queue::exchange::{Ack, AckOutcome, ClaimEntry, Claimed, Held};
use crate::telemetry;

/// How to claim.
#[derive(Debug, Clone)]
pub struct ClaimOptions {
    pub worker: Option<String>,
    pub lease_ms: u64,
    pub max_jobs: u32,
    /// Makes the claim safe to repeat (see `ClaimEntry`).
    pub request_id: Option<String>,
    /// How long to wait for a job when none is claimable.
    pub wait: Duration,
    /// Jobs to acknowledge before claiming.
    pub acks: Vec<Ack>,
}

impl Broker {
    /// Acknowledges the jobs `options.acks` names, then leases up to
    /// `max_jobs` jobs; with a wait, answers as soon as one is claimable,
    /// when the wait is over, or at `shutdown` (with what it has). The acks
    /// are applied before any wait begins.
    pub async fn claim(
        &self,
        queue: &str,
        mut options: ClaimOptions,
        shutdown: &CancellationToken,
    ) -> Result<Claimed> {
        let mut acks = std::mem::take(&mut options.acks);
        let entry = |acks| ClaimEntry {
            picked: Vec::new(),
            lease_ms: options.lease_ms,
            max_jobs: options.max_jobs,
            worker: options.worker.clone().unwrap_or_default(),
            request_id: options.request_id.clone(),
            acks,
        };
        // With a request id every look brings the acks, applied once and
        // answered again after (so the answer kept under the id has them);
        // without, only the first.
        let again = |acks: &mut Vec<Ack>| match options.request_id {
            Some(_) => acks.clone(),
            None => std::mem::take(acks),
        };
        if options.wait.is_zero() {
            return self.claim_once(queue, entry(acks)).await;
        }
        let deadline = Instant::now() + options.wait;
        let signal = self.waiters.signal(queue);
        let mut acked: Option<Vec<AckOutcome>> = None;
        let mut waiting = None;
        loop {
            // Listen before looking, so a job arriving in between still wakes us.
            let woken = signal.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let claimed = match self.claim_once(queue, entry(again(&mut acks))).await {
                Ok(claimed) => claimed,
                // A later look that surely did nothing: the acks went
                // through on an earlier look, so say so, with no jobs,
                // rather than hide them behind the error. A look that may
                // have leased jobs answers its error, so the client
                // retries (with its request id, to be given them).
                Err(error) => match acked.take() {
                    Some(acked) if !acked.is_empty() && !error.may_have_run() => {
                        tracing::warn!(error = %anyhow::Error::from(error), "a waiting claim could not look again");
                        return Ok(Claimed {
                            acked,
                            ..Claimed::default()
                        });
                    }
                    _ => return Err(error),
                },
            };
            let acked_now = acked.get_or_insert(claimed.acked);
            if !claimed.jobs.is_empty() || Instant::now() >= deadline || shutdown.is_cancelled() {
                return Ok(Claimed {
                    acked: std::mem::take(acked_now),
                    ..claimed
                });
            }
            if waiting.is_none() {
                waiting = Waiting::start(self, telemetry::LONG_POLLS_WAITING);
                // Beyond the waiters an instance keeps, the wait ends now.
                if waiting.is_none() {
                    return Ok(Claimed {
                        acked: std::mem::take(acked_now),
                        ..claimed
                    });
                }
            }
            // A rate limit says when the next token comes: look again then.
            // Otherwise wait to be told (a job, a resume, a freed slot).
            let next_look = match claimed.held {
                Some(Held::RateLimit(wait)) => wait.max(Duration::from_millis(1)),
                _ => RECHECK_INTERVAL,
            };
            let recheck = deadline.min(Instant::now() + next_look);
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep_until(recheck) => {}
                () = shutdown.cancelled() => {}
            }
        }
    }

    /// One look for jobs: the acks, then up to `max_jobs` jobs, from the
    /// queue's one shard in one call, or from a sharded queue's shards
    /// that hold the most urgent ones (see `claim_shards`).
    async fn claim_once(&self, queue: &str, entry: ClaimEntry) -> Result<Claimed> {
        let entry = &Arc::new(entry);
        let (shards, claimed) = self
            .shards
            .routed(queue, |shards| async move {
                let claimed = shards.claim(entry).await?;
                Ok((shards, claimed))
            })
            .await?;
        count_claim(&shards.counters, &claimed);
        Ok(claimed)
    }
}

/// Counts what a claim did: the jobs it leased, the acks it applied, the
/// jobs it found expired and the shards it could not reach.
fn count_claim(counters: &QueueCounters, claimed: &Claimed) {
    counters.claimed.increment(claimed.jobs.len() as u64);
    counters.expired.increment(claimed.expired);
    counters
        .shards_skipped
        .increment(claimed.skipped.len() as u64);
    let acked = claimed.acked.iter().filter(|o| **o == AckOutcome::Acked);
    counters.acked.increment(acked.count() as u64);
}
