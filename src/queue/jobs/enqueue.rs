//! Enqueue: jobs added in order, each idempotent by its id (or answered
//! with the job that holds its dedup key), their dependencies in other
//! slots registered first, split over a sharded queue's shards.

use std::collections::HashSet;

use crate::queue::broker::Broker;
use crate::queue::error::{QueueError, Result};
use crate::queue::exchange::{Admission, Known, OutgoingJob, reserve_arrivals};
use crate::queue::job::{Job, NewJob};
use crate::queue::shards::{REROUTES, scatter};
use crate::queue::store::bounded_by;
use crate::queue::store::keys::{self, Key};
use crate::queue::store::record;

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

impl NewJob {
    /// The job on its way to Redis under `id`, with its arrival number in
    /// a sharded queue when its request took one per job, and its
    /// dependencies as the function takes them.
    /// The job as the enqueue part takes it, its arrival number not
    /// taken yet.
    fn outgoing(&self, id: &str, after: Option<String>) -> OutgoingJob {
        OutgoingJob {
            id: id.to_owned(),
            body: record::body(
                self.trace
                    .as_ref()
                    .map(|t| (t.traceparent.as_str(), t.tracestate.as_str())),
                &self.task,
                self.args.get(),
            ),
            options: self.options.clone(),
            arrival: None,
            after,
        }
    }
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
                job.id.clone().unwrap_or_else(|| match &job.options.dedup {
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
                let mut outgoing: Vec<OutgoingJob> = todo
                    .iter()
                    .map(|i| jobs[*i].outgoing(&ids[*i], registration.after[*i].clone()))
                    .collect();
                // Checked against every shard's bounds before any part is
                // written, and then admitted whole.
                let admission = match spanned.len() > 1 {
                    true => {
                        let room = shards.check_room(&self.redis, &outgoing);
                        bounded_by(self.config.redis_timeout, room).await?;
                        let meta = shards.home().keys.key(Key::Meta);
                        let reserve = reserve_arrivals(&self.redis, meta, todo.len());
                        let first = bounded_by(self.config.redis_timeout, reserve).await?;
                        for (n, job) in outgoing.iter_mut().enumerate() {
                            job.arrival = Some(first + n as u64);
                        }
                        Admission::Admitted
                    }
                    false => Admission::Bounded,
                };
                let outcomes = scatter(
                    &shards,
                    outgoing,
                    |job| &job.id,
                    |lane, part| async move {
                        let ids: Vec<String> = part.iter().map(|job| job.id.clone()).collect();
                        let reply = lane.enqueue(part, admission).await?;
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
}
