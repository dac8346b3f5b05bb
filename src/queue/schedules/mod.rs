//! Recurring schedules: a cron pattern in a time zone, and the job to
//! enqueue at each of its fire times. Fire times are worked out here, with
//! `croner` for the pattern and `jiff` for the time zone's rules; Redis
//! decides which instance fires each one (the `fire` function compares and
//! sets the schedule's next fire time), so each fires once fleet-wide.

use redis::Value;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::queue::broker::Broker;
use crate::queue::error::{QueueError, Result};
use crate::queue::exchange::{Admission, OutgoingJob, known_job, push_jobs};
use crate::queue::job::JobOptions;
use crate::queue::store::Call;
use crate::queue::store::keys::Key;
use crate::queue::store::library::{Function, LIBRARY};
use crate::queue::store::record::body;

mod cron;
pub use cron::{Cron, CronError};

/// What a schedule enqueues, and when: its definition, kept in Redis as
/// this JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleSpec {
    pub cron: String,
    pub timezone: String,
    pub task: String,
    pub args: Box<RawValue>,
    pub priority: u8,
    pub max_attempts: u32,
    pub group: Option<String>,
    pub retain_ms: u64,
    pub paused: bool,
}

/// A schedule as it stands.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub name: String,
    pub spec: ScheduleSpec,
    /// When it fires next (Unix ms); `None` while paused.
    pub next_run_ms: Option<i64>,
    /// Its last fire time that made a job.
    pub last_run_ms: Option<i64>,
}

impl Schedule {
    /// The id of the job its last fire time made.
    pub fn last_job_id(&self) -> Option<String> {
        self.last_run_ms.map(|ms| job_id(&self.name, ms))
    }
}

/// The id of the job a schedule's fire time makes.
pub fn job_id(name: &str, fire_ms: i64) -> String {
    format!("{name}:{fire_ms}")
}

/// A schedule found due by the sweeper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueSchedule {
    pub name: String,
    /// The fire time it is due at (Unix ms).
    pub due_ms: i64,
    /// Its definition, as stored.
    pub spec: String,
}

/// What firing a due schedule did.
#[derive(Debug, PartialEq, Eq)]
pub enum Fired {
    /// The job of this fire time was enqueued (or already known).
    Enqueued { job_id: String },
    /// Another instance fired it first, or it changed meanwhile.
    Stale,
}

/// A fire of a sharded queue's schedule whose job is still to be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debt {
    /// `<schedule name>:<fire time>`.
    pub job_id: String,
    /// The schedule's definition when it fired.
    pub spec: String,
}

/// Tries of a schedule's replacement racing its fires.
const PUT_TRIES: usize = 5;

/// `{now, then name, definition, next, last per schedule}`.
type RawSchedules = (i64, Vec<Value>);

impl Broker {
    /// Redis's time and the queue's schedules (or only `name`), by name.
    async fn read_schedules(&self, queue: &str, name: &str) -> Result<(i64, Vec<Schedule>)> {
        self.read_schedule_page(queue, name, 0, "").await
    }

    /// The schedule named `name`, or with no name a page of up to `limit`
    /// + 1 schedules after the name `after` ('' for the first), by name.
    async fn read_schedule_page(
        &self,
        queue: &str,
        name: &str,
        limit: u32,
        after: &str,
    ) -> Result<(i64, Vec<Schedule>)> {
        let mut cmd = LIBRARY.call(
            Function::Schedules,
            &self.shards.of(queue).await?.home().keys,
        );
        cmd.arg(name).arg(limit).arg(after);
        let (now, items): RawSchedules = self.call(&cmd).await?;
        let mut schedules = Vec::with_capacity(items.len() / 4);
        for item in items.chunks(4) {
            let [name, spec, next, last] = item else {
                return Err(malformed());
            };
            let text = |value: &Value| -> Result<Option<String>> {
                match value {
                    Value::Nil => Ok(None),
                    Value::BulkString(bytes) => String::from_utf8(bytes.clone())
                        .map(Some)
                        .map_err(|_| malformed()),
                    _ => Err(malformed()),
                }
            };
            let number = |value: &Value| -> Result<Option<i64>> {
                text(value)?
                    .map(|t| t.parse::<f64>().map(|n| n as i64).map_err(|_| malformed()))
                    .transpose()
            };
            schedules.push(Schedule {
                name: text(name)?.ok_or_else(malformed)?,
                spec: serde_json::from_str(&text(spec)?.ok_or_else(malformed)?)
                    .map_err(|_| malformed())?,
                next_run_ms: number(next)?,
                last_run_ms: number(last)?,
            });
        }
        schedules.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((now, schedules))
    }

    /// A page of up to `limit` of the queue's schedules, by name, after
    /// the name `after` (none for the first page); and the name the next
    /// page starts after, when there is one.
    pub async fn schedules(
        &self,
        queue: &str,
        limit: u32,
        after: Option<&str>,
    ) -> Result<(Vec<Schedule>, Option<String>)> {
        let (_, mut schedules) = self
            .read_schedule_page(queue, "", limit, after.unwrap_or_default())
            .await?;
        let more = schedules.len() > limit as usize;
        schedules.truncate(limit as usize);
        let next = more
            .then(|| schedules.last().map(|schedule| schedule.name.clone()))
            .flatten();
        Ok((schedules, next))
    }

    /// One schedule.
    pub async fn schedule(&self, queue: &str, name: &str) -> Result<Schedule> {
        self.read_schedules(queue, name)
            .await?
            .1
            .pop()
            .ok_or(QueueError::NotFound)
    }

    /// Creates or replaces a schedule: it fires next at the first fire time
    /// after now and after its last one (none while paused). Answers it,
    /// and whether it is new.
    pub async fn put_schedule(
        &self,
        queue: &str,
        name: &str,
        spec: ScheduleSpec,
        cron: &Cron,
    ) -> Result<(Schedule, bool)> {
        self.listed(queue, || self.replace_schedule(queue, name, &spec, cron))
            .await
    }

    /// One try of `put_schedule`: refused when the queue is not listed.
    async fn replace_schedule(
        &self,
        queue: &str,
        name: &str,
        spec: &ScheduleSpec,
        cron: &Cron,
    ) -> Result<(Schedule, bool)> {
        let definition = serde_json::to_string(&spec).map_err(|e| QueueError::Unknown(e.into()))?;
        // A fire between the read and the write moves the last fire time
        // on: then read again. Each retry needs another fire, at most one
        // per second and schedule.
        for _ in 0..PUT_TRIES {
            let (now, existing) = self.read_schedules(queue, name).await?;
            let last_run_ms = existing.first().and_then(|s| s.last_run_ms);
            let next_run_ms = if spec.paused {
                None
            } else {
                cron.next_after(now.max(last_run_ms.unwrap_or(now)))
            };
            let mut cmd = LIBRARY.call(
                Function::PutSchedule,
                &self.shards.of(queue).await?.home().keys,
            );
            cmd.arg(name)
                .arg(&definition)
                .arg(next_run_ms.map(|ms| ms.to_string()).unwrap_or_default())
                .arg(last_run_ms.map(|ms| ms.to_string()).unwrap_or_default())
                .arg(self.config.max_schedules);
            let created: i64 = self.call(&cmd).await.map_err(|error| match error {
                QueueError::LimitReached(_) => {
                    QueueError::LimitReached("schedules of a queue (PRIOQ_MAX_SCHEDULES)")
                }
                error => error,
            })?;
            if created >= 0 {
                let schedule = Schedule {
                    name: name.to_owned(),
                    spec: spec.clone(),
                    next_run_ms,
                    last_run_ms,
                };
                return Ok((schedule, created == 1));
            }
        }
        // Every try was refused whole: nothing changed.
        Err(QueueError::Unavailable(anyhow::anyhow!(
            "schedule {name} kept firing while it was being replaced"
        )))
    }

    /// Deletes a schedule; the jobs it made stay.
    pub async fn delete_schedule(&self, queue: &str, name: &str) -> Result<()> {
        let mut cmd = LIBRARY.call(
            Function::DeleteSchedule,
            &self.shards.of(queue).await?.home().keys,
        );
        cmd.arg(name);
        match self.call::<i64>(&cmd).await? {
            1 => Ok(()),
            _ => Err(QueueError::NotFound),
        }
    }

    /// Enqueues the job of a due schedule's fire time, unless another
    /// instance did first: the latest fire time not after `now_ms` (one
    /// job for all the times missed), and the schedule moves on to the
    /// first one after it. In a sharded queue the fire is recorded as owed
    /// in the home, then paid in the job's shard (see `pay`).
    pub async fn fire(&self, queue: &str, due: &DueSchedule, now_ms: i64) -> Result<Fired> {
        let spec: ScheduleSpec = serde_json::from_str(&due.spec).map_err(|_| malformed())?;
        let cron = Cron::parse(&spec.cron, &spec.timezone)
            .map_err(|error| QueueError::Unknown(error.into()))?;
        let fire_ms = cron
            .latest_until(now_ms)
            .unwrap_or(due.due_ms)
            .max(due.due_ms);
        let next_ms = cron.next_after(fire_ms.max(now_ms));
        let job = spec.job(&job_id(&due.name, fire_ms));
        let job = &job;
        let fired = self
            .listed(queue, || {
                self.shards.routed(queue, |shards| async move {
                    let mut cmd = LIBRARY.call(Function::Fire, &shards.home().keys);
                    cmd.arg(&due.name)
                        .arg(due.due_ms)
                        .arg(fire_ms)
                        .arg(next_ms.map(|ms| ms.to_string()).unwrap_or_default())
                        .arg(shards.count())
                        .arg(&due.spec)
                        .arg(1);
                    push_jobs(
                        &mut cmd,
                        std::slice::from_ref(job),
                        Admission::Admitted,
                        None,
                    );
                    let answer: Vec<Value> = self.call(&cmd).await?;
                    // `None`: owed, its job still to be made.
                    let fired = match answer.as_slice() {
                        [status] if is(status, "STALE") => Some(Fired::Stale),
                        [status] if is(status, "OWED") => None,
                        [status] if refusal(status).is_some() => {
                            return Err(refusal(status).unwrap_or_else(malformed));
                        }
                        [status, item] if is(status, "OK") => {
                            if known_job(item.clone())?.is_none() {
                                shards.counters.enqueued.increment(1);
                            }
                            Some(Fired::Enqueued {
                                job_id: job.id.clone(),
                            })
                        }
                        _ => return Err(malformed()),
                    };
                    Ok(fired)
                })
            })
            .await?;
        if let Some(fired) = fired {
            return Ok(fired);
        }
        let debt = Debt {
            job_id: job.id.clone(),
            spec: due.spec.clone(),
        };
        // A debt left unpaid here is paid by a sweeper.
        self.pay(queue, &debt).await?;
        Ok(Fired::Enqueued {
            job_id: debt.job_id,
        })
    }

    /// Makes the job of a sharded queue's owed fire in the job's shard,
    /// once, then clears the debt in the home.
    pub async fn pay(&self, queue: &str, debt: &Debt) -> Result<()> {
        let spec: ScheduleSpec = serde_json::from_str(&debt.spec).map_err(|_| malformed())?;
        let name = debt
            .job_id
            .split_once(':')
            .map_or(debt.job_id.as_str(), |(name, _)| name);
        let job = spec.job(&debt.job_id);
        let job = &job;
        let shards = self
            .listed(queue, || {
                self.shards.routed(queue, |shards| async move {
                    let mut cmd = LIBRARY.call(Function::Pay, &shards.of(&job.id).keys);
                    cmd.arg(name).arg(shards.count()).arg(1);
                    push_jobs(
                        &mut cmd,
                        std::slice::from_ref(job),
                        Admission::Admitted,
                        None,
                    );
                    let answer: Vec<Value> = self.call(&cmd).await?;
                    match answer.as_slice() {
                        [status] if is(status, "PAID") => {}
                        [status] if refusal(status).is_some() => {
                            return Err(refusal(status).unwrap_or_else(malformed));
                        }
                        [status, item] if is(status, "OK") => {
                            if known_job(item.clone())?.is_none() {
                                shards.counters.enqueued.increment(1);
                            }
                        }
                        _ => return Err(malformed()),
                    }
                    Ok(shards)
                })
            })
            .await?;
        let mut cmd = Call::safe(redis::cmd("HDEL"));
        cmd.arg(shards.home().keys.key(Key::ScheduleOwed))
            .arg(&debt.job_id);
        self.call::<()>(&cmd).await
    }
}

impl ScheduleSpec {
    /// The job of one of the schedule's fires, under `id`.
    fn job(&self, id: &str) -> OutgoingJob {
        OutgoingJob {
            id: id.to_owned(),
            body: body(None, &self.task, self.args.get()),
            options: JobOptions {
                priority: self.priority,
                max_attempts: self.max_attempts,
                group: self.group.clone(),
                retain_ms: Some(self.retain_ms),
                ..JobOptions::default()
            },
            arrival: None,
            after: None,
        }
    }
}

fn is(value: &Value, text: &str) -> bool {
    match value {
        Value::SimpleString(s) => s == text,
        Value::BulkString(bytes) => bytes == text.as_bytes(),
        _ => false,
    }
}

/// The error of a status that refused an enqueue before it wrote.
fn refusal(status: &Value) -> Option<QueueError> {
    match () {
        () if is(status, "SEQUENCE_EXHAUSTED") => Some(QueueError::SequenceExhausted),
        () if is(status, "UNREGISTERED") => Some(QueueError::Unregistered),
        () if is(status, "DELETING") => Some(QueueError::Deleting),
        () => None,
    }
}

fn malformed() -> QueueError {
    QueueError::Unknown(anyhow::anyhow!(
        "a schedule function answered something unexpected"
    ))
}
