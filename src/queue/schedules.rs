//! Recurring schedules: a cron pattern in a time zone, and the job to
//! enqueue at each of its fire times. Fire times are worked out here, with
//! `croner` for the pattern and `jiff` for the time zone's rules; Redis
//! decides which instance fires each one (the `fire` function compares and
//! sets the schedule's next fire time), so each fires once fleet-wide.

use redis::Value;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::batches::{OutgoingJob, known_job, push_jobs};
use super::keys::Key;
use super::library::{Function, LIBRARY};
use super::record::body;
use super::{Broker, QueueError, Result};

/// A cron pattern in a time zone.
#[derive(Debug, Clone)]
pub struct Cron {
    pattern: croner::Cron,
    zone: jiff::tz::TimeZone,
}

/// Why a pattern or a time zone was refused.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error("{0}")]
    Pattern(String),
    #[error("not an IANA time zone name: {0}")]
    TimeZone(String),
}

impl Cron {
    /// Five fields (minute, hour, day of month, month, day of week) or six
    /// with seconds first, or a nickname (`@daily`); `timezone` an IANA
    /// name.
    pub fn parse(pattern: &str, timezone: &str) -> std::result::Result<Self, CronError> {
        let pattern = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(pattern)
            .map_err(|error| CronError::Pattern(error.to_string()))?;
        let zone = jiff::tz::TimeZone::get(timezone)
            .map_err(|_| CronError::TimeZone(timezone.to_owned()))?;
        // A pattern no date matches (30 February): refused, rather than a
        // schedule that never fires.
        let cron = Self { pattern, zone };
        let now = jiff::Timestamp::now().as_millisecond();
        if cron.next_after(now).is_none() {
            return Err(CronError::Pattern("no date matches it".into()));
        }
        Ok(cron)
    }

    fn zoned(&self, ms: i64) -> Option<jiff::Zoned> {
        // Whole seconds: fire times are.
        let ts = jiff::Timestamp::from_second(ms.div_euclid(1000)).ok()?;
        Some(ts.to_zoned(self.zone.clone()))
    }

    /// The first fire time after `ms` (Unix ms), if there is one.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let next = self
            .pattern
            .find_next_occurrence(&self.zoned(ms)?, false)
            .ok()?;
        Some(next.timestamp().as_millisecond())
    }

    /// The latest fire time at or before `ms`, if there is one.
    pub fn latest_until(&self, ms: i64) -> Option<i64> {
        let latest = self
            .pattern
            .find_previous_occurrence(&self.zoned(ms)?, true)
            .ok()?;
        Some(latest.timestamp().as_millisecond())
    }
}

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
        let mut cmd = LIBRARY.call(Function::Schedules, &self.lanes(queue).await?.home().keys);
        cmd.arg(name);
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

    /// The queue's schedules, by name.
    pub async fn schedules(&self, queue: &str) -> Result<Vec<Schedule>> {
        Ok(self.read_schedules(queue, "").await?.1)
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
        self.register(queue).await?;
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
            let mut cmd =
                LIBRARY.call(Function::PutSchedule, &self.lanes(queue).await?.home().keys);
            cmd.arg(name)
                .arg(&definition)
                .arg(next_run_ms.map(|ms| ms.to_string()).unwrap_or_default())
                .arg(last_run_ms.map(|ms| ms.to_string()).unwrap_or_default());
            let created: i64 = self.call(&cmd).await?;
            if created >= 0 {
                let schedule = Schedule {
                    name: name.to_owned(),
                    spec,
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
            &self.lanes(queue).await?.home().keys,
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
            .routed(queue, |lanes| async move {
                let mut cmd = LIBRARY.call(Function::Fire, &lanes.home().keys);
                cmd.arg(&due.name)
                    .arg(due.due_ms)
                    .arg(fire_ms)
                    .arg(next_ms.map(|ms| ms.to_string()).unwrap_or_default())
                    .arg(lanes.count())
                    .arg(&due.spec)
                    .arg(1);
                push_jobs(&mut cmd, std::slice::from_ref(job), None);
                let answer: Vec<Value> = self.call(&cmd).await?;
                // `None`: owed, its job still to be made.
                let fired = match answer.as_slice() {
                    [status] if is(status, "STALE") => Some(Fired::Stale),
                    [status] if is(status, "OWED") => None,
                    [status] if is(status, "SEQUENCE_EXHAUSTED") => {
                        return Err(QueueError::SequenceExhausted);
                    }
                    [status, item] if is(status, "OK") => {
                        if known_job(item.clone())?.is_none() {
                            lanes.counters.enqueued.increment(1);
                        }
                        Some(Fired::Enqueued {
                            job_id: job.id.clone(),
                        })
                    }
                    _ => return Err(malformed()),
                };
                Ok(fired)
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
        let lanes = self
            .routed(queue, |lanes| async move {
                let mut cmd = LIBRARY.call(Function::Pay, &lanes.of(&job.id).keys);
                cmd.arg(name).arg(lanes.count()).arg(1);
                push_jobs(&mut cmd, std::slice::from_ref(job), None);
                let answer: Vec<Value> = self.call(&cmd).await?;
                match answer.as_slice() {
                    [status] if is(status, "PAID") => {}
                    [status] if is(status, "SEQUENCE_EXHAUSTED") => {
                        return Err(QueueError::SequenceExhausted);
                    }
                    [status, item] if is(status, "OK") => {
                        if known_job(item.clone())?.is_none() {
                            lanes.counters.enqueued.increment(1);
                        }
                    }
                    _ => return Err(malformed()),
                }
                Ok(lanes)
            })
            .await?;
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(lanes.home().keys.key(Key::ScheduleOwed))
            .arg(&debt.job_id);
        self.call::<()>(&cmd).await
    }
}

impl ScheduleSpec {
    /// The job of one of the schedule's fires, under `id`.
    fn job(&self, id: &str) -> OutgoingJob {
        OutgoingJob {
            id: id.to_owned(),
            priority: self.priority,
            delay_ms: 0,
            max_attempts: self.max_attempts,
            group: self.group.clone(),
            retain_ms: Some(self.retain_ms),
            body: body(&self.task, self.args.get()),
            arrival: None,
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

fn malformed() -> QueueError {
    QueueError::Unknown(anyhow::anyhow!(
        "a schedule function answered something unexpected"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of an RFC 3339 instant.
    fn at(instant: &str) -> i64 {
        instant
            .parse::<jiff::Timestamp>()
            .expect("an instant")
            .as_millisecond()
    }

    fn instant(ms: i64) -> String {
        jiff::Timestamp::from_millisecond(ms)
            .expect("in range")
            .to_string()
    }

    fn next(cron: &str, zone: &str, after: &str) -> String {
        let cron = Cron::parse(cron, zone).expect("valid");
        instant(cron.next_after(at(after)).expect("a next fire time"))
    }

    #[test]
    fn next_fire_times_follow_the_time_zone() {
        // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
        assert_eq!(
            next("0 9 * * *", "Europe/Berlin", "2026-01-10T12:00:00Z"),
            "2026-01-11T08:00:00Z"
        );
        assert_eq!(
            next("0 9 * * *", "Europe/Berlin", "2026-07-10T12:00:00Z"),
            "2026-07-11T07:00:00Z"
        );
        assert_eq!(
            next("30 18 * * FRI", "America/New_York", "2026-11-30T00:00:00Z"),
            "2026-12-04T23:30:00Z"
        );
        assert_eq!(
            next("@daily", "Asia/Kolkata", "2026-11-30T00:00:00Z"),
            "2026-11-30T18:30:00Z"
        );
        assert_eq!(
            next("*/15 * * * *", "UTC", "2026-11-30T10:07:59.999Z"),
            "2026-11-30T10:15:00Z"
        );
    }

    #[test]
    fn the_next_fire_time_is_strictly_after() {
        assert_eq!(
            next("0 * * * *", "UTC", "2026-11-30T10:00:00Z"),
            "2026-11-30T11:00:00Z"
        );
        // Seconds, when a sixth field gives them.
        assert_eq!(
            next("*/10 * * * * *", "UTC", "2026-11-30T10:00:00.500Z"),
            "2026-11-30T10:00:10Z"
        );
    }

    #[test]
    fn a_time_skipped_by_spring_forward_fires_just_after_the_gap() {
        // Berlin, 29 March 2026: 02:00 jumps to 03:00 (01:00 UTC).
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z"),
            "2026-03-29T01:00:00Z"
        );
        // And the day after, at 02:30 summer time again.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2026-03-29T12:00:00Z"),
            "2026-03-30T00:30:00Z"
        );
        // An interval pattern skips the times that do not exist.
        assert_eq!(
            next("*/30 * * * *", "Europe/Berlin", "2026-03-29T00:45:00Z"),
            "2026-03-29T01:00:00Z"
        );
    }

    #[test]
    fn a_time_repeated_by_fall_back_fires_once_for_a_fixed_time() {
        // New York, 1 November 2026: 02:00 goes back to 01:00, so 01:30
        // happens at 05:30 and at 06:30 UTC.
        let cron = Cron::parse("30 1 * * *", "America/New_York").expect("valid");
        let first = cron
            .next_after(at("2026-11-01T00:00:00Z"))
            .expect("a fire time");
        assert_eq!(instant(first), "2026-11-01T05:30:00Z");
        assert_eq!(
            instant(cron.next_after(first).expect("a fire time")),
            "2026-11-02T06:30:00Z"
        );
        // An interval pattern runs in both halves of the repeated hour.
        let hourly = Cron::parse("0 * * * *", "America/New_York").expect("valid");
        let fires: Vec<String> =
            std::iter::successors(Some(at("2026-11-01T04:30:00Z")), |t| hourly.next_after(*t))
                .skip(1)
                .take(3)
                .map(instant)
                .collect();
        assert_eq!(
            fires,
            [
                "2026-11-01T05:00:00Z",
                "2026-11-01T06:00:00Z",
                "2026-11-01T07:00:00Z"
            ]
        );
    }

    #[test]
    fn the_latest_fire_time_covers_every_missed_one() {
        let cron = Cron::parse("*/5 * * * *", "UTC").expect("valid");
        assert_eq!(
            instant(
                cron.latest_until(at("2026-11-30T10:23:10Z"))
                    .expect("a fire time")
            ),
            "2026-11-30T10:20:00Z"
        );
        assert_eq!(
            instant(
                cron.latest_until(at("2026-11-30T10:20:00Z"))
                    .expect("a fire time")
            ),
            "2026-11-30T10:20:00Z"
        );
    }

    #[test]
    fn bad_patterns_and_zones_are_refused() {
        for pattern in [
            "",
            "* * * *",
            "61 * * * *",
            "* * * * * * 2026",
            "@often",
            "0 0 30 2 *",
        ] {
            assert!(
                matches!(Cron::parse(pattern, "UTC"), Err(CronError::Pattern(_))),
                "{pattern:?}"
            );
        }
        assert!(matches!(
            Cron::parse("* * * * *", "Mars/Olympus"),
            Err(CronError::TimeZone(_))
        ));
        assert!(Cron::parse("0 0 * JAN MON", "Europe/Berlin").is_ok());
    }
}
