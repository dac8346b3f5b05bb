//! Dependencies between jobs (design note 19), prioq's side of them: an
//! enqueue registers its jobs with their dependencies in other slots
//! before it makes them, and the dependants in other slots are told of
//! their dependencies' ends from the ended jobs' outboxes: at once by the
//! courier task after the call of an ack, a nack to the DLQ, a cancel or
//! a delete, else by the sweeper. The
//! counting is in the functions (`lua/lib/deps.lua`); every step here may
//! run twice, or on two instances at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, PoisonError};

use futures_util::future::try_join_all;
use redis::{FromRedisValue, Value};
use tokio_util::sync::CancellationToken;

use super::broker::Broker;
use super::error::{QueueError, Result};
use super::job::NewJob;
use super::shards::QueueShards;
use super::store::keys::{self, QueueKeys};
use super::store::library::{Function, LIBRARY};

/// Ended jobs read from an outbox at once, and dependants of each.
const OUTBOX_JOBS: usize = 100;
const OUTBOX_DEPENDANTS: usize = 1000;
/// Reads of one shard's outbox in one sweep, at most.
const OUTBOX_READS: usize = 100;

/// One ref of a job to register with its dependency.
#[derive(Debug, Clone)]
struct Ref {
    /// The dependant: its index in the request, and where in its `after`.
    job: usize,
    at: usize,
    queue: String,
    id: String,
    /// It names an earlier entry of the request, in another shard: made
    /// by this request, in an earlier step.
    earlier: bool,
}

/// An enqueue's dependencies, registered but for those on earlier entries
/// of the request in other shards: each job's `after` argument, and the
/// step of the enqueue each job goes in (a job whose dependency is an
/// earlier entry in another shard goes after it).
#[derive(Debug, Default)]
pub(crate) struct Registration {
    pub(crate) after: Vec<Option<String>>,
    pub(crate) steps: Vec<usize>,
    later: Vec<Ref>,
}

impl Registration {
    /// How many steps the enqueue takes.
    pub(crate) fn step_count(&self) -> usize {
        self.steps.iter().max().map_or(1, |last| last + 1)
    }
}

impl Broker {
    /// The courier: until `stopped`, sends the outboxes the lanes say
    /// hold ended jobs, each once however often it was named meanwhile.
    /// A failure leaves the outbox to the sweeper.
    pub async fn deliver_outboxes(&self, stopped: CancellationToken) {
        let Some(mut notices) = self
            .notices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        loop {
            let first = tokio::select! {
                notice = notices.recv() => notice,
                () = stopped.cancelled() => return,
            };
            let Some(first) = first else { return };
            let mut due = BTreeSet::from([first]);
            while let Ok(more) = notices.try_recv() {
                due.insert(more);
            }
            for (queue, shard) in due {
                if let Err(error) = self.send_outbox(&queue, shard).await {
                    tracing::debug!(queue, shard, error = %error, "the sweeper will tell the dependants");
                }
            }
        }
    }

    /// Registers the dependencies of `jobs` (to be made under `ids` in
    /// `queue`) that live in other slots, and checks that those in their
    /// own slot exist: `UnknownDependency` names the first ref to no job,
    /// before any job is made. An earlier entry of the request in another
    /// shard is registered with by `register_step`, once it is made.
    pub(crate) async fn register_dependencies(
        &self,
        queue: &str,
        shards: &QueueShards,
        jobs: &[NewJob],
        ids: &[String],
    ) -> Result<Registration> {
        let mut registration = Registration {
            after: vec![None; jobs.len()],
            steps: vec![0; jobs.len()],
            later: Vec::new(),
        };
        let mut now = Vec::new();
        let mut earlier: HashMap<&str, usize> = HashMap::new();
        let shard_of = |id: &str| keys::shard_of(id, shards.count());
        for (i, job) in jobs.iter().enumerate() {
            if let Some(deps) = &job.after {
                let mut words = vec![if deps.ignore_failure { "i" } else { "d" }.to_owned()];
                for (at, (other_queue, other)) in deps.refs.iter().enumerate() {
                    let here = other_queue == queue && shard_of(other) == shard_of(&ids[i]);
                    let made_before = (other_queue == queue)
                        .then(|| earlier.get(other.as_str()).copied())
                        .flatten();
                    words.push(format!(
                        "{}{other_queue}/{other}",
                        if here { "=" } else { "" }
                    ));
                    let one = Ref {
                        job: i,
                        at,
                        queue: other_queue.clone(),
                        id: other.clone(),
                        earlier: made_before.is_some(),
                    };
                    match (made_before, here) {
                        // Made in the same call, before it (so in the
                        // same step, or an earlier one): the function
                        // finds it.
                        (Some(j), true) => {
                            registration.steps[i] =
                                registration.steps[i].max(registration.steps[j]);
                        }
                        (Some(j), false) => {
                            registration.steps[i] =
                                registration.steps[i].max(registration.steps[j] + 1);
                            registration.later.push(one);
                        }
                        (None, _) => now.push(one),
                    }
                }
                registration.after[i] = Some(words.join(" "));
            }
            if let Some(id) = &job.id {
                earlier.insert(id, i);
            }
        }
        self.register_refs(queue, shards, ids, now).await?;
        Ok(registration)
    }

    /// Registers the refs of the jobs of enqueue step `step` to earlier
    /// entries of the request in other shards, made in earlier steps.
    pub(crate) async fn register_step(
        &self,
        queue: &str,
        shards: &QueueShards,
        ids: &[String],
        registration: &Registration,
        step: usize,
    ) -> Result<()> {
        let refs = (registration.later.iter())
            .filter(|one| registration.steps[one.job] == step)
            .cloned()
            .collect();
        self.register_refs(queue, shards, ids, refs).await
    }

    /// Registers each ref with its dependency when it lives in another
    /// slot than its job (checks only that it exists when in the same):
    /// one call per slot. A dependency that ended already is told to its
    /// dependant's slot before the dependant is made, which finds it there.
    async fn register_refs(
        &self,
        queue: &str,
        shards: &QueueShards,
        ids: &[String],
        refs: Vec<Ref>,
    ) -> Result<()> {
        if refs.is_empty() {
            return Ok(());
        }
        // A ref in its job's own slot is only checked; one elsewhere is
        // registered with.
        let own = |one: &Ref| {
            one.queue == queue
                && keys::shard_of(&one.id, shards.count())
                    == keys::shard_of(&ids[one.job], shards.count())
        };
        // The refs by the slot they name and what is done there: (queue,
        // shard, adding) → refs. Two jobs of a request may name one
        // dependency, one from its slot and one from another.
        let mut targets: BTreeMap<(String, usize, bool), Vec<Ref>> = BTreeMap::new();
        let mut known: HashMap<String, Arc<QueueShards>> = HashMap::new();
        for one in refs {
            let shard = keys::shard_of(
                &one.id,
                self.known_shards(&mut known, &one.queue).await?.count(),
            ) as usize;
            targets
                .entry((one.queue.clone(), shard, !own(&one)))
                .or_default()
                .push(one);
        }
        let calls = targets.iter().map(|((other_queue, shard, adding), refs)| {
            let keys = &known[other_queue].shards[*shard].keys;
            let adding = *adding;
            let mut call = LIBRARY.call(Function::Dependency, keys);
            call.arg(if adding { "add" } else { "check" });
            for one in refs {
                call.arg(&one.id);
                if adding {
                    call.arg(format!("{queue}/{}", ids[one.job]));
                }
            }
            async move {
                let outcomes: Vec<String> = self.call(&call).await?;
                Ok::<_, QueueError>((refs, adding, outcomes))
            }
        });
        let answers = try_join_all(calls).await?;
        // Ends to tell before the dependants are made, by their shard.
        let mut early: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (refs, adding, outcomes) in answers {
            if outcomes.len() != refs.len() {
                return Err(malformed());
            }
            for (one, outcome) in refs.iter().zip(outcomes) {
                let (state, result) = outcome.split_once(':').ok_or_else(malformed)?;
                if state == "g" && !one.earlier {
                    return Err(QueueError::UnknownDependency {
                        job: one.job,
                        at: one.at,
                    });
                }
                if adding && state != "l" {
                    let dependant = &ids[one.job];
                    early
                        .entry(keys::shard_of(dependant, shards.count()) as usize)
                        .or_default()
                        .extend([
                            dependant.clone(),
                            format!("{}/{}", one.queue, one.id),
                            state.to_owned(),
                            result.to_owned(),
                        ]);
                }
            }
        }
        let tells = early
            .iter()
            .map(|(shard, ends)| self.tell(&shards.shards[*shard].keys, ends));
        try_join_all(tells).await?;
        Ok(())
    }

    /// The shards of `queue`, read once for all the refs of one step.
    async fn known_shards<'k>(
        &self,
        known: &'k mut HashMap<String, Arc<QueueShards>>,
        queue: &str,
    ) -> Result<&'k Arc<QueueShards>> {
        if !known.contains_key(queue) {
            known.insert(queue.to_owned(), self.shards.of(queue).await?);
        }
        Ok(&known[queue])
    }

    /// Tells jobs of the slot of `keys` of ends of their dependencies:
    /// `ends` holds dependant, ref, outcome and result, each.
    async fn tell(&self, keys: &QueueKeys, ends: &[String]) -> Result<()> {
        let mut call = LIBRARY.call(Function::Tell, keys);
        call.arg(ends);
        self.call::<Value>(&call).await.map(drop)
    }

    /// Tells the dependants elsewhere of the jobs of shard `shard` of
    /// `queue` that ended (its outbox), and crosses each off once told.
    /// Answers how many were told.
    pub async fn send_outbox(&self, queue: &str, shard: u32) -> Result<u64> {
        let known = self.shards.of(queue).await?;
        let Some(source) = known.shards.get(shard as usize) else {
            return Ok(0);
        };
        let mut told = 0;
        for _ in 0..OUTBOX_READS {
            let mut call = LIBRARY.call(Function::Outbox, &source.keys);
            call.arg(OUTBOX_JOBS).arg(OUTBOX_DEPENDANTS);
            let ended = ended_jobs(self.call(&call).await?)?;
            let mut full = ended.len() == OUTBOX_JOBS;
            for (id, entry, members) in ended {
                full |= members.len() >= OUTBOX_DEPENDANTS;
                self.tell_dependants(queue, &id, &entry, &members).await?;
                let mut call = LIBRARY.call(Function::Sent, &source.keys);
                call.arg(&id).arg(&members);
                self.call::<u64>(&call).await?;
                told += members.len() as u64;
            }
            if !full {
                break;
            }
        }
        Ok(told)
    }

    /// Before a purge drops the shards of `queue` (`shards`): tells the
    /// dependants in other queues of its jobs that they were deleted, or
    /// how they ended where the outbox still held the end. A purge cut
    /// short tells again when repeated, which counts once.
    pub(crate) async fn tell_purged(&self, queue: &str, shards: &QueueShards) -> Result<()> {
        for shard in &shards.shards {
            let mut call = LIBRARY.call(Function::Drop, &shard.keys);
            call.arg("dependants");
            for (id, entry, members) in ended_jobs(self.call(&call).await?)? {
                self.tell_dependants(queue, &id, &entry, &members).await?;
            }
        }
        Ok(())
    }

    /// Tells `members` ("queue/id" each) that job `id` of `queue` ended as
    /// `entry` says ("<outcome>:<result>"): one call per slot.
    async fn tell_dependants(
        &self,
        queue: &str,
        id: &str,
        entry: &str,
        members: &[String],
    ) -> Result<()> {
        let (outcome, result) = entry.split_once(':').ok_or_else(malformed)?;
        let reference = format!("{queue}/{id}");
        let mut slots: BTreeMap<(String, usize), Vec<String>> = BTreeMap::new();
        let mut known: HashMap<String, Arc<QueueShards>> = HashMap::new();
        for member in members {
            let (other_queue, other) = member.split_once('/').ok_or_else(malformed)?;
            let shard = keys::shard_of(
                other,
                self.known_shards(&mut known, other_queue).await?.count(),
            ) as usize;
            slots
                .entry((other_queue.to_owned(), shard))
                .or_default()
                .extend([
                    other.to_owned(),
                    reference.clone(),
                    outcome.to_owned(),
                    result.to_owned(),
                ]);
        }
        let tells = slots.iter().map(|((other_queue, shard), ends)| {
            self.tell(&known[other_queue].shards[*shard].keys, ends)
        });
        try_join_all(tells).await?;
        Ok(())
    }
}

/// The jobs an `outbox` or a `drop` ('dependants') call answered: id, end
/// ("<outcome>:<result>") and dependants elsewhere, each.
fn ended_jobs(items: Vec<Value>) -> Result<Vec<(String, String, Vec<String>)>> {
    let text = |v| String::from_redis_value(v).map_err(|_| malformed());
    let mut items = items.into_iter();
    let mut ended = Vec::new();
    while let (Some(id), Some(entry), Some(members)) = (items.next(), items.next(), items.next()) {
        let members = Vec::<String>::from_redis_value(members).map_err(|_| malformed())?;
        ended.push((text(id)?, text(entry)?, members));
    }
    Ok(ended)
}

fn malformed() -> QueueError {
    QueueError::Unknown(anyhow::anyhow!(
        "a dependency function answered something unexpected"
    ))
}
