//! The job operations: enqueue, claim (a long poll), ack, extend, nack,
//! read (and wait for) a job, delete, requeue. Each goes to the shard its
//! job lives in (see `shards`); enqueues, claims and acks go through the
//! shard's lane (see `exchange`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Broker;
use super::counters::QueueCounters;
use super::deps::After;
use super::error::{QueueError, Result};
use super::exchange::{
    Ack, AckOutcome, ClaimEntry, Claimed, Dedup, Expiry, Held, Known, OutgoingJob, reserve_arrivals,
};
use super::job::{Job, JobState};
use super::shards::{QueueShards, REROUTES, scatter};
use super::store::bounded_by;
use super::store::keys::{self, Key};
use super::store::library::{Function, LIBRARY};
use super::store::record;
use crate::otel::TraceHeaders;
use crate::telemetry;

/// How long a waiting claim sleeps at most before it looks again on its
/// own, in case a wake-up was lost with a dropped subscription.
const RECHECK_INTERVAL: Duration = Duration::from_secs(5);

/// The longest a job is kept once acked: 30 days, in ms.
pub const MAX_RETAIN_MS: u64 = 2_592_000_000;

/// A job to add.
#[derive(Debug)]
pub struct NewJob {
    /// The client's id, for an idempotent enqueue; a fresh one when `None`.
    pub id: Option<String>,
    pub task: String,
    pub args: Box<RawValue>,
    pub priority: u8,
    pub delay_ms: u64,
    pub max_attempts: u32,
    /// The group it shares its priority class with fairly; `None` joins
    /// the group of jobs without one.
    pub group: Option<String>,
    /// How long it is kept once acked, in ms; `None` for the queue's
    /// `retain_ms`.
    pub retain_ms: Option<u64>,
    pub expiry: Option<Expiry>,
    pub dedup: Option<Dedup>,
    /// The jobs it waits for.
    pub after: Option<After>,
    /// The W3C trace it was enqueued under.
    pub trace: Option<TraceHeaders>,
}

impl NewJob {
    /// The job on its way to Redis under `id`, with its arrival number in
    /// a sharded queue when its request took one per job, and its
    /// dependencies as the function takes them.
    fn outgoing(&self, id: &str, arrival: Option<u64>, after: Option<String>) -> OutgoingJob {
        OutgoingJob {
            id: id.to_owned(),
            priority: self.priority,
            delay_ms: self.delay_ms,
            max_attempts: self.max_attempts,
            group: self.group.clone(),
            retain_ms: self.retain_ms,
            body: record::body(
                self.trace
                    .as_ref()
                    .map(|t| (t.traceparent.as_str(), t.tracestate.as_str())),
                &self.task,
                self.args.get(),
            ),
            arrival,
            expiry: self.expiry,
            dedup: self.dedup.clone(),
            after,
        }
    }

    /// The job as it was created under `id` at `now` (ms).
    fn into_job(self, id: String, now: i64) -> Job {
        let delay = i64::try_from(self.delay_ms).unwrap_or(i64::MAX);
        Job {
            id,
            task: self.task,
            args: self.args,
            priority: self.priority,
            state: if delay > 0 {
                JobState::Scheduled
            } else {
                JobState::Pending
            },
            attempts: 0,
            max_attempts: self.max_attempts,
            enqueued_at_ms: now,
            run_at_ms: (delay > 0).then(|| now + delay),
            lease: None,
            last_error: None,
            dead_at_ms: None,
            completed_at_ms: None,
            result: None,
            progress: None,
            group: self.group,
            schedule: None,
            expires_at_ms: self
                .expiry
                .map(|expiry| now.saturating_add(i64::try_from(expiry.in_ms).unwrap_or(i64::MAX))),
            dedup_key: self.dedup.map(|dedup| dedup.key),
            cancel: None,
            dependencies: None,
            dependants: Vec::new(),
            trace: self.trace,
        }
    }
}

/// The answer to one enqueued job.
#[derive(Debug)]
pub struct Enqueued {
    pub job: Job,
    /// False when a job with the same id, or holding the same dedup key,
    /// was already known.
    pub created: bool,
    /// The job held the dedup key and took the enqueued task, args,
    /// priority and delay.
    pub replaced: bool,
}

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

/// How a worker gives a job back.
#[derive(Debug, Clone, Default)]
pub struct Nack {
    pub delay_ms: u64,
    pub error: Option<String>,
    pub dead: bool,
    pub priority: Option<u8>,
}

impl Broker {
    /// Adds jobs in order, each idempotent by its id.
    pub async fn enqueue(&self, queue: &str, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        self.register(queue, false).await?;
        let mut shards = self.shards.of(queue).await?;
        let turn = shards.next_turn();
        // A job made here with a dedup key lives in its key's shard, where
        // the key is kept.
        let ids: Vec<String> = jobs
            .iter()
            .map(|job| {
                job.id.clone().unwrap_or_else(|| match &job.dedup {
                    Some(dedup) => shards.new_id(keys::shard_of(&dedup.key, shards.count())),
                    None => shards.new_id(turn),
                })
            })
            .collect();
        // Registered with the dependencies in other slots before the jobs
        // are made: a dependency that ends meanwhile is told to its
        // dependant's slot, where the dependant finds it when made.
        let registration = self
            .register_dependencies(queue, &shards, &jobs, &ids)
            .await?;
        let mut answers: Vec<Option<(i64, Option<Known>, bool)>> =
            (0..jobs.len()).map(|_| None).collect();
        for step in 0..registration.step_count() {
            if step > 0 {
                // Earlier steps' jobs are in: a client that hears "no
                // effect" would send them again, under new ids where
                // prioq made theirs.
                let registered = self.register_step(queue, &shards, &ids, &registration, step);
                registered.await.map_err(|error| {
                    QueueError::Unknown(anyhow::Error::new(error).context(
                        "the jobs of the request's earlier steps were enqueued, the others' not",
                    ))
                })?;
            }
            let mut tries = 0;
            loop {
                let todo: Vec<usize> = (0..jobs.len())
                    .filter(|i| answers[*i].is_none() && registration.steps[*i] == step)
                    .collect();
                // A request split over shards numbers its jobs' arrivals in
                // its own order, before the parts go their ways.
                let spanned: HashSet<u32> = todo
                    .iter()
                    .map(|i| keys::shard_of(&ids[*i], shards.count()))
                    .collect();
                let first_arrival = match spanned.len() > 1 {
                    true => {
                        let meta = shards.home().keys.key(Key::Meta);
                        let reserve = reserve_arrivals(&self.redis, meta, todo.len());
                        Some(bounded_by(self.config.redis_timeout, reserve).await?)
                    }
                    false => None,
                };
                let outgoing = todo
                    .iter()
                    .enumerate()
                    .map(|(n, i)| {
                        jobs[*i].outgoing(
                            &ids[*i],
                            first_arrival.map(|first| first + n as u64),
                            registration.after[*i].clone(),
                        )
                    })
                    .collect();
                let outcomes = scatter(
                    &shards,
                    outgoing,
                    |job| &job.id,
                    |lane, part| async move {
                        let ids: Vec<String> = part.iter().map(|job| job.id.clone()).collect();
                        let reply = lane.enqueue(part).await?;
                        let made_here: Vec<bool> = (reply.known.iter().zip(&ids))
                            .map(|(known, id)| {
                                known
                                    .as_ref()
                                    .is_some_and(|known| reply.maybe_created_here(id, known))
                            })
                            .collect();
                        let now = reply.now_ms;
                        Ok((reply.known.into_iter().zip(made_here))
                            .map(|(known, made_here)| (now, known, made_here))
                            .collect())
                    },
                )
                .await;
                let mut failure = None;
                for (i, outcome) in todo.into_iter().zip(outcomes) {
                    match outcome {
                        Ok(answer) => answers[i] = Some(answer),
                        Err(error) => failure = Some(error),
                    }
                }
                match failure {
                    None => break,
                    Some(QueueError::ShardsChanged) if tries < REROUTES => {
                        tries += 1;
                        shards = self.shards.reroute(queue).await?;
                    }
                    // Not listed (new to this Redis, or deleted meanwhile).
                    Some(QueueError::Unregistered) if tries < REROUTES => {
                        tries += 1;
                        self.register(queue, true).await?;
                        shards = self.shards.of(queue).await?;
                    }
                    // Some jobs went in: the request's effect is partial.
                    Some(error) if answers.iter().any(Option::is_some) => {
                        return Err(QueueError::Unknown(anyhow::Error::new(error).context(
                            "the jobs of some shards were enqueued, the others' failed",
                        )));
                    }
                    Some(error) => return Err(error),
                }
            }
        }
        let mut deduplicated = 0;
        let enqueued: Vec<Enqueued> = jobs
            .into_iter()
            .zip(ids)
            .zip(answers.into_iter().flatten())
            .map(|((new, id), (now, known, made_here))| match known {
                // Answered with the job that holds its dedup key.
                Some(known) if known.job.id != id => {
                    deduplicated += u64::from(!known.replaced);
                    Enqueued {
                        job: known.job,
                        created: false,
                        replaced: known.replaced,
                    }
                }
                // A job this request's own first send may have made is
                // answered as made here, in its stored form.
                Some(known) => Enqueued {
                    created: made_here || known.made,
                    job: known.job,
                    replaced: known.replaced,
                },
                None => Enqueued {
                    job: new.into_job(id, now),
                    created: true,
                    replaced: false,
                },
            })
            .collect();
        let created = enqueued.iter().filter(|e| e.created).count();
        shards.counters.enqueued.increment(created as u64);
        let replaced = enqueued.iter().filter(|e| e.replaced).count();
        shards.counters.replaced.increment(replaced as u64);
        shards.counters.deduplicated.increment(deduplicated);
        Ok(enqueued)
    }

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

    /// Acknowledges finished jobs, each on its own terms.
    pub async fn ack(&self, queue: &str, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        let acks = &Arc::new(acks);
        let (shards, outcomes) = self
            // Acks go in `exchange` calls, which refuse a stale count of
            // shards: a job not found is not in another shard.
            .shards
            .routed(queue, |shards| async move {
                let outcomes = shards.ack(acks).await?;
                Ok((shards, outcomes))
            })
            .await?;
        let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count();
        shards.counters.acked.increment(acked as u64);
        Ok(outcomes)
    }

    /// Moves a lease's deadline to `lease_ms` from now, and records the
    /// worker's progress when it reports some.
    pub async fn extend(
        &self,
        queue: &str,
        id: &str,
        token: &str,
        lease_ms: u64,
        progress: Option<&RawValue>,
    ) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Extend, &shards.of(id).keys);
                cmd.arg(id)
                    .arg(token)
                    .arg(lease_ms)
                    .arg(progress.map_or("", RawValue::get));
                self.call(&cmd).await
            })
            .await
    }

    /// Ends a lease without success.
    pub async fn nack(&self, queue: &str, id: &str, token: &str, nack: &Nack) -> Result<Job> {
        let (shards, job) = self
            .shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Nack, &shards.of(id).keys);
                cmd.arg(id)
                    .arg(token)
                    .arg(nack.delay_ms)
                    .arg(if nack.dead { "1" } else { "0" })
                    .arg(nack.priority.map(|p| p.to_string()).unwrap_or_default())
                    .arg(if nack.error.is_some() { "1" } else { "0" })
                    .arg(nack.error.as_deref().unwrap_or(""));
                let job: Job = self.call(&cmd).await?;
                Ok((shards, job))
            })
            .await?;
        shards.counters.nacked.increment(1);
        if job.state == JobState::Dead {
            shards.counters.dead_lettered.increment(1);
        }
        tell_at_once(&shards, &job);
        Ok(job)
    }

    /// One job in any state.
    pub async fn job(&self, queue: &str, id: &str) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Job, &shards.of(id).keys);
                cmd.arg(id);
                let job: Option<Job> = self.call(&cmd).await?;
                job.ok_or(QueueError::NotFound)
            })
            .await
    }

    /// One job, once it has ended (completed or dead), or as it is when
    /// `wait` is over or at `shutdown`. The job's end is heard from whichever
    /// instance ended it (see `wake`), with a recheck now and then.
    pub async fn wait_for_job(
        &self,
        queue: &str,
        id: &str,
        wait: Duration,
        shutdown: &CancellationToken,
    ) -> Result<Job> {
        let deadline = Instant::now() + wait;
        let signal = self.waiters.job_signal(queue, id);
        // Listen before looking, so an end in between still wakes us.
        let mut woken = Box::pin(signal.notified());
        woken.as_mut().enable();
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let mut job: Job = self
            .shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Watch, &shards.of(id).keys);
                cmd.arg(id).arg(wait_ms);
                self.call::<Option<Job>>(&cmd)
                    .await?
                    .ok_or(QueueError::NotFound)
            })
            .await?;
        let Some(_waiting) = Waiting::start(self, telemetry::JOB_WAITS) else {
            // Beyond the waiters an instance keeps, the wait ends now.
            return Ok(job);
        };
        loop {
            let ended = matches!(
                job.state,
                JobState::Completed | JobState::Dead | JobState::Cancelled
            );
            if ended || Instant::now() >= deadline || shutdown.is_cancelled() {
                return Ok(job);
            }
            let recheck = deadline.min(Instant::now() + RECHECK_INTERVAL);
            tokio::select! {
                () = woken.as_mut() => {}
                () = tokio::time::sleep_until(recheck) => {}
                () = shutdown.cancelled() => {}
            }
            woken = Box::pin(signal.notified());
            woken.as_mut().enable();
            job = self.job(queue, id).await?;
        }
    }

    /// Deletes a pending, scheduled or dead job.
    pub async fn delete(&self, queue: &str, id: &str) -> Result<()> {
        self.delete_as(queue, id, "any").await
    }

    /// Deletes a dead job.
    pub async fn delete_dead(&self, queue: &str, id: &str) -> Result<()> {
        self.delete_as(queue, id, "dead").await
    }

    async fn delete_as(&self, queue: &str, id: &str, mode: &str) -> Result<()> {
        self.shards
            .routed(queue, |shards| async move {
                let shard = shards.of(id);
                let mut cmd = LIBRARY.call(Function::Delete, &shard.keys);
                cmd.arg(id).arg(mode);
                if self.call::<i64>(&cmd).await? == OUTBOXED {
                    shard.courier.deliver();
                }
                Ok(())
            })
            .await
    }

    /// Cancels a job: a waiting one ends `cancelled` at once, a processing
    /// one is told to stop (it ends `cancelled` with its lease); answers
    /// the job after.
    pub async fn cancel(&self, queue: &str, id: &str, reason: Option<&str>) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Cancel, &shards.of(id).keys);
                cmd.arg(id).arg(reason.unwrap_or(""));
                let job: Job = self.call(&cmd).await?;
                shards.counters.cancelled.increment(1);
                tell_at_once(&shards, &job);
                Ok(job)
            })
            .await
    }

    /// Returns a dead job to pending with its attempts reset.
    pub async fn requeue(&self, queue: &str, id: &str, priority: Option<u8>) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Requeue, &shards.of(id).keys);
                cmd.arg(id)
                    .arg(priority.map(|p| p.to_string()).unwrap_or_default());
                self.call(&cmd).await
            })
            .await
    }
}

/// What `delete` answers when the job's dependants elsewhere are still to
/// be told (its outbox holds its end).
const OUTBOXED: i64 = 2;

/// After a call that may have ended `job`: when it ended with dependants
/// left to tell (those elsewhere; the call told those in its own slot),
/// its shard's outbox is sent now rather than at the next sweep.
fn tell_at_once(shards: &QueueShards, job: &Job) {
    let ended = matches!(job.state, JobState::Dead | JobState::Cancelled);
    if ended && !job.dependants.is_empty() {
        shards.of(&job.id).courier.deliver();
    }
}

/// A wait (a claim that found nothing, a read waiting for a job to end),
/// counted in its gauge and in the instance's waiters while it lasts.
struct Waiting {
    gauge: &'static str,
    waiters: Arc<AtomicU64>,
}

impl Waiting {
    /// `None` when the instance has as many waiters as it keeps.
    fn start(broker: &Broker, gauge: &'static str) -> Option<Self> {
        let waiters = Arc::clone(&broker.waiting);
        let max = broker.config.max_waiters;
        waiters
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        metrics::gauge!(gauge).increment(1);
        Some(Self { gauge, waiters })
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!(self.gauge).decrement(1);
    }
}

/// Counts what a claim did: the jobs it leased, the acks it applied and
/// the jobs it found expired.
fn count_claim(counters: &QueueCounters, claimed: &Claimed) {
    counters.claimed.increment(claimed.jobs.len() as u64);
    counters.expired.increment(claimed.expired);
    let acked = claimed.acked.iter().filter(|o| **o == AckOutcome::Acked);
    counters.acked.increment(acked.count() as u64);
}
