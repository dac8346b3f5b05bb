//! The `exchange` function's wire format (its arguments and its reply),
//! in one place for prioq and for tools that call the function directly
//! (the load benchmark's raw-Redis baseline): `exchange_command` lays out the
//! requests of one call, `exchange_answers` turns its reply into one
//! answer per request. The other functions that enqueue (`fire`, `pay`)
//! take the same enqueue section (`push_jobs`).

use std::collections::HashMap;

use redis::{self, Cmd, FromRedisValue, Value};

use super::request::{
    Ack, AckOutcome, Admission, ClaimEntry, Claimed, EnqueueReply, Exchange, Exchanged, Held,
    Known, OutgoingJob,
};
use crate::queue::error::{Bound, QueueError, Result};
use crate::queue::job::{self, Backoff, Dependencies, Job, JobState, Lease};
use crate::queue::store::keys::QueueKeys;
use crate::queue::store::library::{Function, LIBRARY};
use crate::queue::store::record::new_token;

/// Due scheduled jobs a claim promotes before it takes its own.
pub(crate) const CLAIM_PROMOTE_BATCH: u32 = 100;

/// `1` for a created job, else the view of the one already known,
/// `{'replaced', view}` for a waiting job its dedup key replaced, or
/// `{'made', view}` for a job created with dependencies.
pub(crate) fn known_job(item: Value) -> Result<Option<Known>> {
    let (view, kind) = match item {
        Value::Int(1) => return Ok(None),
        Value::Array(items) if items.len() == 2 => {
            let [kind, view]: [Value; 2] = items.try_into().map_err(|_| malformed())?;
            (
                view,
                String::from_redis_value(kind).map_err(|_| malformed())?,
            )
        }
        view => (view, String::new()),
    };
    let job = Job::from_redis_value(view).map_err(|_| malformed())?;
    Ok(Some(Known {
        job,
        replaced: kind == "replaced",
        made: kind == "made",
    }))
}

/// The function's reply: Redis's time; every ack's status, the claims'
/// acks after the others; the enqueues' answers, one request after the
/// other (a status, then an item per job when it is `OK`); the claims'
/// (the number of jobs leased, then id, record, token and deadline per
/// job); why the claims got fewer jobs than asked, the wait for the next
/// rate limit token, the jobs it found expired, the `expiry` entries of
/// the jobs leased that have one (id, entry pairs), the dependencies of
/// those that have some (id, dependencies pairs), and the jobs it ended
/// whose dependants elsewhere are to be told from their outbox. Each list
/// is nil when empty (the function answers so: an empty table costs Redis
/// about 3,000 instructions to reply), which reads as an empty `Vec`; the
/// values at the end that hold their defaults are left out (see `padded`).
type RawExchange = (
    i64,
    Vec<String>,
    Vec<Value>,
    Vec<Value>,
    String,
    u64,
    u64,
    Vec<String>,
    Vec<Value>,
    u64,
);

/// Adds one enqueue request's jobs to a call (the enqueue part's section
/// wire format): their number (marked `!` when `admission` admits it
/// whatever the queue's `max_pending`), then twelve arguments per job. `sharded` holds,
/// in a sharded queue's call, the next arrival number of the call for the
/// jobs that have none of their own; outside one, jobs have none.
pub(crate) fn push_jobs(
    cmd: &mut Cmd,
    jobs: &[OutgoingJob],
    admission: Admission,
    mut sharded: Option<&mut Option<u64>>,
) {
    match admission {
        Admission::Bounded => cmd.arg(jobs.len()),
        Admission::Admitted => cmd.arg(format!("{}!", jobs.len())),
    };
    for job in jobs {
        let arrival = sharded.as_deref_mut().and_then(|next| {
            job.arrival.or_else(|| {
                let n = next.as_mut()?;
                *n += 1;
                Some(*n - 1)
            })
        });
        let options = &job.options;
        cmd.arg(&job.id).arg(options.priority);
        match options.run_at_ms {
            // A start by the clock: `@` and the time, a delay once in Lua.
            Some(at) => cmd.arg(format!("@{at}")),
            None => cmd.arg(options.delay_ms),
        };
        cmd.arg(options.max_attempts)
            .arg(options.group.as_deref().unwrap_or(""))
            .arg(
                options
                    .retain_ms
                    .map(|ms| ms.to_string())
                    .unwrap_or_default(),
            )
            .arg(&job.body)
            .arg(arrival.map(|n| n.to_string()).unwrap_or_default())
            .arg(options.expiry.map_or_else(String::new, |expiry| {
                format!("{}{}", expiry.in_ms, if expiry.drop { ":drop" } else { "" })
            }))
            .arg(options.dedup.as_ref().map_or_else(String::new, |dedup| {
                let mode = if dedup.replace { 'r' } else { 'd' };
                format!("{mode}{}:{}", dedup.ttl_ms, dedup.key)
            }))
            .arg(job.after.as_deref().unwrap_or(""))
            .arg(options.backoff.map_or_else(String::new, Backoff::entry));
    }
}

/// Where an `exchange` call goes: the number of shards its queue was
/// routed for, and in a sharded queue the arrival number of its first
/// enqueued job that has none of its own.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub shards: u32,
    pub arrival: Option<u64>,
}

impl Route {
    /// An unsharded queue's.
    pub const SINGLE: Self = Self {
        shards: 1,
        arrival: None,
    };
}

/// One call of the `exchange` function carrying `entries`: their acks
/// first, then their enqueues, then their claims (each with its own acks),
/// with the bulk floor's share `floor_ppm` in parts per million.
pub fn exchange_command(
    keys: &QueueKeys,
    floor_ppm: u64,
    route: Route,
    entries: &[Exchange],
) -> Cmd {
    let mut acks = Vec::new();
    let mut enqueues = Vec::new();
    let mut claims = Vec::new();
    for entry in entries {
        match entry {
            Exchange::Ack(leases) => acks.extend(leases.iter()),
            Exchange::Enqueue(jobs, admission) => enqueues.push((jobs, *admission)),
            Exchange::Claim(claim) => claims.push(claim),
        }
    }
    // A call that enqueues nothing can run while Redis is out of memory.
    let function = match enqueues.is_empty() {
        true => Function::Drain,
        false => Function::Exchange,
    };
    let mut cmd = LIBRARY.call(function, keys).cmd;
    cmd.arg(CLAIM_PROMOTE_BATCH)
        .arg(floor_ppm)
        .arg(new_token())
        .arg(route.shards);
    cmd.arg(acks.len());
    for ack in acks {
        push_ack(&mut cmd, ack);
    }
    cmd.arg(enqueues.len());
    let mut arrivals = route.arrival;
    for (jobs, admission) in enqueues {
        push_jobs(
            &mut cmd,
            jobs,
            admission,
            (route.shards > 1).then_some(&mut arrivals),
        );
    }
    cmd.arg(claims.len());
    for claim in &claims {
        cmd.arg(claim.lease_ms)
            .arg(claim.max_jobs)
            .arg(&claim.worker)
            .arg(claim.request_id.as_deref().unwrap_or(""))
            .arg(claim.picked.join(" "))
            .arg(claim.acks.len());
        for ack in &claim.acks {
            push_ack(&mut cmd, ack);
        }
    }
    cmd
}

/// The answer to each of `entries`, in order, from the reply of the
/// `exchange_command` call that carried them, and the number of jobs the
/// call ended whose dependants elsewhere are to be told; an error when the
/// reply does not fit them.
pub fn exchange_answers(
    entries: &[Exchange],
    reply: Value,
) -> Result<(Vec<Result<Exchanged>>, u64)> {
    let (now_ms, statuses, enqueued, claimed, held, wait_ms, expired, expiry, after, outboxed) =
        RawExchange::from_redis_value(padded(reply)?).map_err(|_| malformed())?;
    let mut dependencies = HashMap::new();
    let mut after = after.into_iter();
    while let Some(id) = after.next() {
        let id = String::from_redis_value(id).map_err(|_| malformed())?;
        let items = after.next().ok_or_else(malformed)?;
        let items = Vec::<Option<String>>::from_redis_value(items).map_err(|_| malformed())?;
        dependencies.insert(id, Dependencies::parse(items).ok_or_else(malformed)?);
    }
    let mut expired = Some(expired);
    let expires_at: HashMap<&str, i64> = expiry
        .chunks_exact(2)
        .filter_map(|pair| Some((pair[0].as_str(), job::decode::expires_at(&pair[1])?)))
        .collect();
    let held = match held.as_str() {
        "paused" => Some(Held::Paused),
        "max_in_flight" => Some(Held::MaxInFlight),
        "rate_limit" => Some(Held::RateLimit(std::time::Duration::from_millis(wait_ms))),
        "" => None,
        _ => return Err(malformed()),
    };
    // The claims' acks come after the others'.
    let ack_requests: usize = entries
        .iter()
        .map(|entry| match entry {
            Exchange::Ack(leases) => leases.len(),
            _ => 0,
        })
        .sum();
    let (ack_statuses, claim_statuses) = statuses.split_at(ack_requests.min(statuses.len()));
    let mut ack_statuses = ack_statuses.iter();
    let mut claim_statuses = claim_statuses.iter();
    let mut enqueued = enqueued.into_iter();
    let mut claimed = claimed.into_iter();
    let answers = entries
        .iter()
        .map(|entry| match entry {
            Exchange::Ack(leases) => {
                outcomes(&mut ack_statuses, leases.len()).map(Exchanged::Acked)
            }
            Exchange::Enqueue(jobs, _) => {
                enqueue_outcome(now_ms, &mut enqueued, jobs.len()).map(Exchanged::Enqueued)
            }
            Exchange::Claim(claim) => {
                let acked = outcomes(&mut claim_statuses, claim.acks.len())?;
                let expired = expired.take().unwrap_or(0);
                let mut outcome = claim_outcome(claim, &mut claimed, acked, held, expired)?;
                for job in &mut outcome.jobs {
                    job.expires_at_ms = expires_at.get(job.id.as_str()).copied();
                    job.dependencies = dependencies.get(job.id.as_str()).cloned();
                }
                Ok(Exchanged::Claimed(outcome))
            }
        })
        .collect();
    if ack_statuses.next().is_some()
        || claim_statuses.next().is_some()
        || enqueued.next().is_some()
        || claimed.next().is_some()
    {
        return Err(malformed());
    }
    Ok((answers, outboxed))
}

/// An ack's arguments: id, lease token, result ('' for none).
fn push_ack(cmd: &mut redis::Cmd, ack: &Ack) {
    cmd.arg(&ack.id)
        .arg(&ack.lease_token)
        .arg(ack.result.as_ref().map_or("", |result| result.get()));
}

/// The next `n` ack statuses.
fn outcomes<'a>(
    statuses: &mut impl Iterator<Item = &'a String>,
    n: usize,
) -> Result<Vec<AckOutcome>> {
    (0..n)
        .map(|_| AckOutcome::parse(statuses.next().ok_or_else(malformed)?))
        .collect()
}

/// The next enqueue request's answer: a status, then, when it is `OK`, an
/// item per job (`jobs` of them).
fn enqueue_outcome(
    now_ms: i64,
    items: &mut impl Iterator<Item = Value>,
    jobs: usize,
) -> Result<EnqueueReply> {
    let status = items.next().map(String::from_redis_value);
    match status {
        Some(Ok(status)) if status == "OK" => {
            let known = (0..jobs)
                .map(|_| known_job(items.next().ok_or_else(malformed)?))
                .collect::<Result<_>>()?;
            Ok(EnqueueReply {
                now_ms,
                known,
                resent_within_ms: None,
            })
        }
        Some(Ok(status)) if status == "QUEUE_FULL" || status == "QUEUE_FULL_BYTES" => {
            let mut count = || {
                items
                    .next()
                    .and_then(|item| u64::from_redis_value(item).ok())
                    .ok_or_else(malformed)
            };
            let (waiting, limit) = (count()?, count()?);
            let bound = match status.as_str() {
                "QUEUE_FULL" => Bound::Jobs,
                _ => Bound::Bytes,
            };
            Err(QueueError::QueueFull {
                waiting,
                limit,
                bound,
            })
        }
        Some(Ok(status)) if status == "SEQUENCE_EXHAUSTED" => Err(QueueError::SequenceExhausted),
        Some(Ok(status)) if status == "UNREGISTERED" => Err(QueueError::Unregistered),
        Some(Ok(status)) if status == "DELETING" => Err(QueueError::Deleting),
        _ => Err(malformed()),
    }
}

/// The next claim request's answer: the number of jobs leased to it, then
/// id, record, lease token and lease deadline per job.
fn claim_outcome(
    claim: &ClaimEntry,
    items: &mut impl Iterator<Item = Value>,
    acked: Vec<AckOutcome>,
    held: Option<Held>,
    expired: u64,
) -> Result<Claimed> {
    let mut next = || items.next().ok_or_else(malformed);
    let count = usize::from_redis_value(next()?).map_err(|_| malformed())?;
    let jobs = (0..count)
        .map(|_| {
            let id = String::from_redis_value(next()?).map_err(|_| malformed())?;
            let record = Vec::<u8>::from_redis_value(next()?).map_err(|_| malformed())?;
            let token = String::from_redis_value(next()?).map_err(|_| malformed())?;
            let deadline = String::from_redis_value(next()?).map_err(|_| malformed())?;
            let lease = Lease {
                token,
                worker: (!claim.worker.is_empty()).then(|| claim.worker.clone()),
                expires_at_ms: deadline.parse::<f64>().map_err(|_| malformed())? as i64,
            };
            Job::from_record(id, &record, JobState::Processing, None, Some(lease))
                .ok_or_else(malformed)
        })
        .collect::<Result<_>>()?;
    Ok(Claimed {
        acked,
        jobs,
        held,
        expired,
        skipped: Vec::new(),
    })
}

impl AckOutcome {
    fn parse(status: &str) -> Result<Self> {
        match status {
            "OK" => Ok(Self::Acked),
            "LEASE_LOST" => Ok(Self::LeaseLost),
            "NOT_FOUND" => Ok(Self::NotFound),
            other => Err(QueueError::Unknown(anyhow::anyhow!(
                "unexpected ack status {other:?}"
            ))),
        }
    }
}

/// The function's reply with the values it left out at the end put back
/// at their defaults: nil for a list, '' for why fewer jobs were handed
/// out, 0 for a count. (Most calls end in defaults, and the Redis client
/// parses each value of a reply at about 1,000 instructions.)
fn padded(reply: Value) -> Result<Value> {
    const LEN: usize = 10;
    let Value::Array(mut values) = reply else {
        return Err(malformed());
    };
    if values.is_empty() || values.len() > LEN {
        return Err(malformed());
    }
    for at in values.len()..LEN {
        values.push(match at {
            4 => Value::BulkString(Vec::new()),
            5 | 6 | 9 => Value::Int(0),
            _ => Value::Nil,
        });
    }
    Ok(Value::Array(values))
}

pub(crate) fn malformed() -> QueueError {
    QueueError::Unknown(anyhow::anyhow!(
        "the exchange function answered something unexpected"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_cut_short_reads_as_its_defaults_and_one_too_long_is_refused() {
        let cut = Value::Array(vec![Value::Int(7), Value::Nil]);
        let full: RawExchange = FromRedisValue::from_redis_value(padded(cut).expect("pads"))
            .expect("reads as the whole reply");
        assert_eq!(full.0, 7);
        assert!(full.1.is_empty() && full.2.is_empty() && full.3.is_empty());
        assert_eq!((full.4.as_str(), full.5, full.6, full.9), ("", 0, 0, 0));
        assert!(full.7.is_empty() && full.8.is_empty());
        assert!(padded(Value::Array(vec![Value::Int(0); 11])).is_err());
        assert!(padded(Value::Array(Vec::new())).is_err());
    }
}
