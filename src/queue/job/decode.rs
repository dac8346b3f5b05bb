//! A job as the functions describe it (its record and what its state
//! adds; see `view` in `lua/lib/transitions.lua`), decoded.

use redis::{self, FromRedisValue, Value};
use serde_json::value::RawValue;

use super::{Backoff, Dependencies, Dependency, Job, JobState, Lease, Outcome};
use crate::otel::TraceHeaders;
use crate::queue::store::record::Record;

impl Dependencies {
    /// From `dependencies_of` in `lua/lib/transitions.lua`: the `after`
    /// entry ("<d|i> ref..."), the number left, then per ref its
    /// `after:done` entry ("<outcome>:<result>") or nil.
    pub(crate) fn parse(items: Vec<Option<String>>) -> Option<Self> {
        let mut items = items.into_iter();
        let entry = items.next()??;
        let left = items.next()??.parse().ok()?;
        let mut words = entry.split(' ');
        let ignore_failure = match words.next()? {
            "i" => true,
            "d" => false,
            _ => return None,
        };
        let list = words
            .zip(items)
            .map(|(reference, done)| {
                let (outcome, result) = match done {
                    None => (None, None),
                    Some(done) => {
                        let (outcome, result) = done.split_once(':')?;
                        let outcome = match outcome {
                            "c" => Outcome::Completed,
                            "d" => Outcome::Dead,
                            "x" => Outcome::Cancelled,
                            "g" => Outcome::Deleted,
                            _ => return None,
                        };
                        let result = (!result.is_empty())
                            .then(|| RawValue::from_string(result.to_owned()).ok())
                            .flatten();
                        (Some(outcome), result)
                    }
                };
                Some(Dependency {
                    reference: reference.to_owned(),
                    outcome,
                    result,
                })
            })
            .collect::<Option<_>>()?;
        Some(Self {
            ignore_failure,
            left,
            list,
        })
    }
}

impl Job {
    /// A job from its id, its record, and what its state adds.
    pub(crate) fn from_record(
        id: String,
        record: &[u8],
        state: JobState,
        at_ms: Option<i64>,
        lease: Option<Lease>,
    ) -> Option<Self> {
        let record = Record::decode(record)?;
        Some(Self {
            id,
            task: record.task.to_owned(),
            args: RawValue::from_string(record.args.to_owned()).ok()?,
            priority: record.priority,
            state,
            attempts: record.attempts,
            max_attempts: record.max_attempts,
            enqueued_at_ms: record.enqueued_at_ms,
            run_at_ms: at_ms.filter(|_| state == JobState::Scheduled),
            lease,
            last_error: record.last_error.map(str::to_owned),
            dead_at_ms: at_ms.filter(|_| state == JobState::Dead),
            completed_at_ms: at_ms
                .filter(|_| matches!(state, JobState::Completed | JobState::Cancelled)),
            result: None,
            progress: None,
            group: record.group.map(str::to_owned),
            schedule: record.schedule.map(str::to_owned),
            backoff: None,
            expires_at_ms: None,
            dedup_key: None,
            cancel: None,
            dependencies: None,
            dependants: Vec::new(),
            trace: record.trace.map(|(traceparent, tracestate)| TraceHeaders {
                traceparent: traceparent.to_owned(),
                tracestate: tracestate.to_owned(),
            }),
        })
    }
}

/// The deadline of an `expiry` entry, `<ms>` or `<ms>:drop` (see
/// `lua/lib/keys.lua`); `None` for `""`, no entry.
pub(crate) fn expires_at(entry: &str) -> Option<i64> {
    entry.split(':').next()?.parse().ok()
}

/// The functions' view of a job: `{id, record, state, state time, lease,
/// progress, result, expiry, dedup key, cancels entry, dependencies,
/// dependants}` (see `view` in `lua/lib/transitions.lua`), then its
/// `backoff` entry, read apart: a tuple has at most twelve.
type RawView = (
    String,
    Vec<u8>,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<Vec<Option<String>>>,
    Option<Vec<String>>,
);

impl FromRedisValue for Job {
    fn from_redis_value(v: Value) -> Result<Self, redis::ParsingError> {
        let Value::Array(mut items) = v else {
            return Err(String::from("a job's view is not an array").into());
        };
        let backoff = match items.len() {
            13 => Option::<String>::from_redis_value(items.pop().unwrap_or(Value::Nil))?,
            _ => None,
        };
        let (
            id,
            record,
            state,
            at,
            lease,
            progress,
            result,
            expiry,
            dedup_key,
            cancel,
            after,
            dependants,
        ) = RawView::from_redis_value(Value::Array(items))?;
        let mut job = decode_view(id, &record, &state, at.as_deref(), lease)
            .ok_or_else(|| String::from("malformed job record"))?;
        let json = |text: Option<String>| text.filter(|t| !t.is_empty()).map(RawValue::from_string);
        job.progress = json(progress).transpose().map_err(|e| e.to_string())?;
        job.result = json(result).transpose().map_err(|e| e.to_string())?;
        job.expires_at_ms = expiry.as_deref().and_then(expires_at);
        job.dedup_key = dedup_key;
        job.backoff = match backoff {
            Some(entry) => {
                Some(Backoff::from_entry(&entry).ok_or_else(|| String::from("malformed backoff"))?)
            }
            None => None,
        };
        // `:reason`, the reason empty when none was given.
        job.dependants = dependants.unwrap_or_default();
        job.cancel = cancel.map(|entry| entry.strip_prefix(':').unwrap_or(&entry).to_owned());
        job.dependencies = match after {
            Some(items) => Some(
                Dependencies::parse(items).ok_or_else(|| String::from("malformed dependencies"))?,
            ),
            None => None,
        };
        Ok(job)
    }
}

fn decode_view(
    id: String,
    record: &[u8],
    state: &str,
    at: Option<&str>,
    lease: Option<String>,
) -> Option<Job> {
    // Scores come back as Redis prints doubles.
    let at_ms = at.and_then(|s| s.parse::<f64>().ok()).map(|ms| ms as i64);
    let state = match state {
        "pending" => JobState::Pending,
        "scheduled" => JobState::Scheduled,
        "processing" => JobState::Processing,
        "dead" => JobState::Dead,
        "completed" => JobState::Completed,
        "cancelled" => JobState::Cancelled,
        "waiting" => JobState::Waiting,
        _ => return None,
    };
    let lease = match (state, lease) {
        (JobState::Processing, Some(lease)) => Some(parse_lease(&lease, at_ms?)?),
        _ => None,
    };
    Job::from_record(id, record, state, at_ms, lease)
}

/// A `leases` entry, `token:worker`, the token perhaps followed by `/` and
/// the job's retention or `done` (see `lua/lib/keys.lua`).
fn parse_lease(entry: &str, expires_at_ms: i64) -> Option<Lease> {
    let (token, worker) = entry.split_once(':')?;
    let token = token.split('/').next()?;
    Some(Lease {
        token: token.to_owned(),
        worker: (!worker.is_empty()).then(|| worker.to_owned()),
        expires_at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(priority: u8) -> Vec<u8> {
        Record {
            priority,
            attempts: 1,
            max_attempts: 5,
            enqueued_at_ms: 1_700_000_000_000,
            ready_at_ms: 1_700_000_000_500,
            last_error: Some("boom"),
            group: None,
            retain_ms: 0,
            schedule: None,
            trace: None,
            task: "t:x",
            args: r#"{"a":[1,2]}"#,
        }
        .encode()
    }

    #[test]
    fn decodes_a_processing_view() {
        let job = decode_view(
            "j1".into(),
            &record(3),
            "processing",
            Some("1700000060000"),
            Some("tok-1/60000:worker:7".into()),
        )
        .expect("decodes");
        assert_eq!(job.priority, 3);
        assert_eq!(job.attempts, 1);
        assert_eq!(job.max_attempts, 5);
        assert_eq!(job.task, "t:x");
        assert_eq!(job.args.get(), r#"{"a":[1,2]}"#);
        let lease = job.lease.expect("leased");
        assert_eq!(lease.token, "tok-1");
        assert_eq!(lease.worker.as_deref(), Some("worker:7"));
        assert_eq!(lease.expires_at_ms, 1_700_000_060_000);
        assert_eq!(job.run_at_ms, None);
        assert_eq!(job.last_error.as_deref(), Some("boom"));
    }

    #[test]
    fn rejects_a_malformed_view() {
        assert!(decode_view("j".into(), b"3:1:{}", "pending", None, None).is_none());
        assert!(decode_view("j".into(), &record(3), "lost", None, None).is_none());
    }
}
