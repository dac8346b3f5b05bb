//! A job as the queue scripts describe it, decoded.

use deadpool_redis::redis::{self, FromRedisValue, Value};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Scheduled,
    Processing,
    Dead,
}

/// A job's current lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub token: String,
    pub worker: Option<String>,
    pub expires_at_ms: i64,
}

/// One job, in any state.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub task: String,
    pub args: Box<RawValue>,
    pub priority: u8,
    pub state: JobState,
    pub attempts: u32,
    pub max_attempts: u32,
    pub enqueued_at_ms: i64,
    /// When a scheduled job becomes claimable.
    pub run_at_ms: Option<i64>,
    pub lease: Option<Lease>,
    pub last_error: Option<String>,
    pub dead_at_ms: Option<i64>,
}

/// The part of a job that never changes, stored as JSON after the record's
/// header; `args` is kept as the client sent it.
#[derive(Serialize, Deserialize)]
pub(crate) struct Body<'a> {
    #[serde(borrow)]
    pub(crate) task: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) args: &'a RawValue,
}

/// The scripts' job reply: `{id, record, state, state time, lease, last error}`
/// (see `view` in `lua/common.lua`).
type RawView = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl FromRedisValue for Job {
    fn from_redis_value(v: Value) -> Result<Self, redis::ParsingError> {
        let (id, record, state, at, lease, last_error) = RawView::from_redis_value(v)?;
        decode(id, &record, &state, at.as_deref(), lease, last_error)
            .ok_or_else(|| String::from("malformed job record").into())
    }
}

fn decode(
    id: String,
    record: &str,
    state: &str,
    at: Option<&str>,
    lease: Option<String>,
    last_error: Option<String>,
) -> Option<Job> {
    let mut header = record.splitn(6, ':');
    let mut field = || header.next()?.parse::<i64>().ok();
    let (priority, attempts, max_attempts, enqueued_at_ms, _ready) =
        (field()?, field()?, field()?, field()?, field()?);
    let body: Body<'_> = serde_json::from_str(header.next()?).ok()?;
    let at_ms = at.and_then(|s| s.parse::<f64>().ok()).map(|ms| ms as i64);
    let state = match state {
        "pending" => JobState::Pending,
        "scheduled" => JobState::Scheduled,
        "processing" => JobState::Processing,
        "dead" => JobState::Dead,
        _ => return None,
    };
    let lease = match (state, lease) {
        (JobState::Processing, Some(lease)) => {
            let (token, worker) = lease.split_once(':')?;
            Some(Lease {
                token: token.to_owned(),
                worker: (!worker.is_empty()).then(|| worker.to_owned()),
                expires_at_ms: at_ms?,
            })
        }
        _ => None,
    };
    Some(Job {
        id,
        task: body.task.into_owned(),
        args: body.args.to_owned(),
        priority: u8::try_from(priority).ok()?,
        state,
        attempts: u32::try_from(attempts).ok()?,
        max_attempts: u32::try_from(max_attempts).ok()?,
        enqueued_at_ms,
        run_at_ms: at_ms.filter(|_| state == JobState::Scheduled),
        lease,
        last_error,
        dead_at_ms: at_ms.filter(|_| state == JobState::Dead),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_processing_record() {
        let job = decode(
            "j1".into(),
            r#"3:1:5:1700000000000:1700000000500:{"task":"t:x","args":{"a":[1,2]}}"#,
            "processing",
            Some("1700000060000"),
            Some("tok-1:worker:7".into()),
            Some("boom".into()),
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
    }

    #[test]
    fn rejects_a_malformed_record() {
        assert!(decode("j".into(), "3:1:{}", "pending", None, None, None).is_none());
        assert!(
            decode(
                "j".into(),
                "300:0:5:1:1:{\"task\":\"t\",\"args\":1}",
                "pending",
                None,
                None,
                None
            )
            .is_none()
        );
    }
}
