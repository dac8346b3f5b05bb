//! The batch of a queue's lane: the acks, enqueues and claims waiting
//! together, sent as one call of the `exchange` function.

use std::sync::Arc;

use redis;

use super::lane::{Batch, Lane};
use super::request::{
    Ack, AckOutcome, Admission, ClaimEntry, Claimed, EnqueueReply, Exchange, Exchanged, OutgoingJob,
};
use super::wire::{Route, exchange_answers, exchange_command, malformed};
use crate::queue::courier::Courier;
use crate::queue::error::{QueueError, Result};
use crate::queue::store::keys::QueueKeys;
use crate::queue::store::{Call, Redis, Repeat};

/// The acks, enqueues and claims of one queue.
#[derive(Debug)]
pub(crate) struct ExchangeBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
    /// Share of handed-out jobs taken from the least urgent class, in
    /// parts per million.
    pub(crate) floor_ppm: u64,
    /// The number of shards of the queue this lane was routed for.
    pub(crate) shards: u32,
    /// In a sharded queue, the home's `meta`, whose `arrivals` counter
    /// numbers the jobs enqueued (see `take_tags` in the library).
    pub(crate) arrivals: Option<String>,
    /// Told of the calls that left ended jobs in the shard's outbox.
    pub(crate) courier: Courier,
}

impl Batch for ExchangeBatch {
    type Entry = Exchange;
    type Reply = Exchanged;
    /// Two claims of 100 jobs: a call of that many shares a call's fixed
    /// cost thinly, so a second one costs Redis no more per job and keeps
    /// it busy while prioq reads the first's jobs. One-job claims seldom
    /// reach it (256 clients claiming one job each do not send more calls
    /// than with one call in flight).
    const SECOND_CALL_ITEMS: usize = 200;

    fn answered(entry: &Exchange) -> usize {
        match entry {
            Exchange::Claim(claim) => claim.max_jobs as usize,
            Exchange::Enqueue(..) | Exchange::Ack(_) => 0,
        }
    }

    fn size(entry: &Exchange) -> (usize, usize) {
        let leases = |acks: &[Ack]| {
            acks.iter()
                .map(|ack| {
                    ack.id.len()
                        + ack.lease_token.len()
                        + ack.result.as_ref().map_or(0, |r| r.get().len())
                })
                .sum::<usize>()
        };
        match entry {
            Exchange::Enqueue(jobs, _) => (jobs.len(), jobs.iter().map(|job| job.body.len()).sum()),
            Exchange::Claim(claim) => (
                claim.max_jobs as usize + claim.acks.len(),
                claim.worker.len() + leases(&claim.acks),
            ),
            Exchange::Ack(acks) => (acks.len(), leases(acks)),
        }
    }

    async fn call(&self, entries: &[Exchange]) -> Result<Vec<Result<Exchanged>>> {
        match self.send(entries).await {
            // Out of memory, Redis refused the whole call for its enqueues:
            // the acks and claims go again without them (they run then),
            // and the enqueues are refused.
            Err(QueueError::Full(error)) if entries.iter().any(|e| !e.enqueues()) => {
                let others: Vec<Exchange> = entries.iter().filter_map(Exchange::draining).collect();
                let mut answered = self.send(&others).await?.into_iter();
                Ok(entries
                    .iter()
                    .map(|entry| match entry.enqueues() {
                        true => Err(QueueError::Full(anyhow::anyhow!("{error:#}"))),
                        false => answered.next().unwrap_or_else(|| Err(malformed())),
                    })
                    .collect())
            }
            other => other,
        }
    }
}

impl ExchangeBatch {
    /// One call of the function carrying `entries`.
    async fn send(&self, entries: &[Exchange]) -> Result<Vec<Result<Exchanged>>> {
        let route = Route {
            shards: self.shards,
            arrival: self.take_arrivals(entries).await?,
        };
        let cmd = exchange_command(&self.keys, self.floor_ppm, route, entries);
        // Enqueues of ids fixed before sending add nothing the second time.
        let repeat = match entries.iter().all(Exchange::enqueues) {
            true => Repeat::Safe,
            false => Repeat::Once,
        };
        let (reply, resent) = self.redis.query_told(&Call { cmd, repeat }).await?;
        let (mut answers, outboxed) = exchange_answers(entries, reply)?;
        if outboxed > 0 {
            self.courier.deliver();
        }
        if let Some(resent) = resent {
            // A millisecond more: Redis's times are whole milliseconds.
            let within = i64::try_from(resent.as_millis())
                .unwrap_or(i64::MAX)
                .saturating_add(1);
            for answer in &mut answers {
                if let Ok(Exchanged::Enqueued(reply)) = answer {
                    reply.resent_within_ms = Some(within);
                }
            }
        }
        Ok(answers)
    }

    /// In a sharded queue, reserves arrival numbers for the jobs `entries`
    /// enqueue from the home's counter: answers the first.
    async fn take_arrivals(&self, entries: &[Exchange]) -> Result<Option<u64>> {
        let Some(meta) = &self.arrivals else {
            return Ok(None);
        };
        let jobs: usize = entries
            .iter()
            .map(|entry| match entry {
                Exchange::Enqueue(jobs, _) => {
                    jobs.iter().filter(|job| job.arrival.is_none()).count()
                }
                _ => 0,
            })
            .sum();
        if jobs == 0 {
            return Ok(None);
        }
        reserve_arrivals(&self.redis, meta, jobs).await.map(Some)
    }
}

/// Reserves `count` arrival numbers from a sharded queue's counter in its
/// home's `meta`: answers the first.
pub(crate) async fn reserve_arrivals(redis: &Redis, meta: &str, count: usize) -> Result<u64> {
    let mut cmd = Call::safe(redis::cmd("HINCRBY"));
    cmd.arg(meta).arg("arrivals").arg(count);
    let last: u64 = redis.query(&cmd).await?;
    Ok(last - count as u64 + 1)
}

/// The typed way into a queue's lane.
impl Lane<ExchangeBatch> {
    pub(crate) async fn enqueue(
        self: &Arc<Self>,
        jobs: Vec<OutgoingJob>,
        admission: Admission,
    ) -> Result<EnqueueReply> {
        match self.submit(Exchange::Enqueue(jobs, admission)).await? {
            Exchanged::Enqueued(reply) => Ok(reply),
            _ => Err(malformed()),
        }
    }

    pub(crate) async fn claim(self: &Arc<Self>, claim: Arc<ClaimEntry>) -> Result<Claimed> {
        match self.submit(Exchange::Claim(claim)).await? {
            Exchanged::Claimed(claimed) => Ok(claimed),
            _ => Err(malformed()),
        }
    }

    pub(crate) async fn ack(self: &Arc<Self>, acks: Arc<Vec<Ack>>) -> Result<Vec<AckOutcome>> {
        match self.submit(Exchange::Ack(acks)).await? {
            Exchanged::Acked(outcomes) => Ok(outcomes),
            _ => Err(malformed()),
        }
    }
}
