//! What the jobs look like, over HTTP and as prioq stores them.

use prioq::queue::store::record::{self, Record};

/// Bytes of `args` in every job: `{"blob":"xxx…"}`.
pub const PAYLOAD_BYTES: usize = 200;
/// Jobs per batch request (enqueue batch, claim `max_jobs`, ack many).
pub const BATCH: usize = 100;
pub const TASK: &str = "bench";
pub const PRIORITY: u8 = 1;
pub const LEASE_MS: u64 = 60_000;
pub const MAX_ATTEMPTS: u32 = 5;

pub fn args_json() -> String {
    let blob = "x".repeat(PAYLOAD_BYTES - r#"{"blob":""}"#.len());
    let args = format!(r#"{{"blob":"{blob}"}}"#);
    assert_eq!(args.len(), PAYLOAD_BYTES);
    args
}

/// The body prioq puts after the record's header.
pub fn stored_body() -> Vec<u8> {
    record::body(None, TASK, &args_json())
}

/// A pending job's record as prioq's enqueues write it at `now_ms`.
pub fn stored_record(args: &str, now_ms: i64) -> Vec<u8> {
    Record {
        priority: PRIORITY,
        attempts: 0,
        max_attempts: MAX_ATTEMPTS,
        enqueued_at_ms: now_ms,
        ready_at_ms: now_ms,
        last_error: None,
        group: None,
        retain_ms: 0,
        schedule: None,
        trace: None,
        task: TASK,
        args,
    }
    .encode()
}

/// Request bodies that never change, built once.
#[derive(Debug, Clone)]
pub struct Bodies {
    pub single: String,
    pub batch: String,
    pub claim: String,
    pub claim_batch: String,
}

impl Bodies {
    pub fn new() -> Self {
        let job = format!(
            r#"{{"task":"{TASK}","args":{},"priority":{PRIORITY}}}"#,
            args_json()
        );
        let batch = format!(r#"{{"jobs":[{}]}}"#, vec![job.as_str(); BATCH].join(","));
        Self {
            single: job,
            batch,
            claim: format!(r#"{{"max_jobs":1,"lease_ms":{LEASE_MS}}}"#),
            claim_batch: format!(r#"{{"max_jobs":{BATCH},"lease_ms":{LEASE_MS}}}"#),
        }
    }
}

// Ids and lease tokens are base62 and '-': nothing in them needs escaping.

/// A single-job claim that first acknowledges `(id, lease token)`.
pub fn claim_acking(id: &str, token: &str) -> String {
    format!(
        r#"{{"max_jobs":1,"lease_ms":{LEASE_MS},"ack":[{{"id":"{id}","lease_token":"{token}"}}]}}"#
    )
}

pub fn ack_single(token: &str) -> String {
    format!(r#"{{"lease_token":"{token}"}}"#)
}

/// An ack many of `(id, lease token)` pairs.
pub fn ack_many<'a>(leases: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let entries: Vec<String> = leases
        .map(|(id, token)| format!(r#"{{"id":"{id}","lease_token":"{token}"}}"#))
        .collect();
    format!(r#"{{"jobs":[{}]}}"#, entries.join(","))
}
