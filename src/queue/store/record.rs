//! A job's record in the queue's `jobs` hash, and server-made ids.
//!
//! A record is a header of unsigned varints (LEB128: 7 bits a byte, least
//! significant first): flags, priority, attempts, max_attempts,
//! enqueued_at ms, and ready_at − enqueued_at ms; then, when flags has bit
//! 1, the last error, and when it has bit 2, the group (each its length as
//! a varint, then the text); when it has bit 4, how long the job is kept
//! once acked (ms, a varint); when it has bit 8, the name of the schedule
//! that made it (length and text); then the body: when the job was enqueued
//! under a W3C trace, a 0 byte (where a task's length, never 0, would
//! be) and the `traceparent` and `tracestate` (each length and text);
//! then the task's length in bytes as a varint, the task, and the args as
//! the client sent them. The functions in `lua/` read and rewrite the
//! header, the error and the group, never the body, so the trace stays as
//! written through every transition. A job with 200 bytes of args and
//! a 5-byte task takes a record of 217 bytes, which jemalloc keeps in a
//! 224-byte allocation.

/// Flags bits: the header is followed by the last error, then the group,
/// then the retention, then the schedule.
const HAS_ERROR: u64 = 1;
const HAS_GROUP: u64 = 2;
const HAS_RETAIN: u64 = 4;
const HAS_SCHEDULE: u64 = 8;

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub priority: u8,
    pub attempts: u32,
    pub max_attempts: u32,
    pub enqueued_at_ms: i64,
    /// When the job last became pending, or its `run_at` while scheduled.
    pub ready_at_ms: i64,
    pub last_error: Option<&'a str>,
    pub group: Option<&'a str>,
    /// How long the job is kept once acked, in ms (0: not at all).
    pub retain_ms: u64,
    /// The schedule that made the job.
    pub schedule: Option<&'a str>,
    /// The `traceparent` and `tracestate` it was enqueued under.
    pub trace: Option<(&'a str, &'a str)>,
    pub task: &'a str,
    /// JSON, as the client sent it.
    pub args: &'a str,
}

impl<'a> Record<'a> {
    /// `None` when the bytes are not a record of this format.
    pub fn decode(bytes: &'a [u8]) -> Option<Self> {
        let mut rest = bytes;
        let mut field = || read_varint(&mut rest);
        let (flags, priority, attempts, max_attempts, enqueued, ready_delta) =
            (field()?, field()?, field()?, field()?, field()?, field()?);
        if flags & !(HAS_ERROR | HAS_GROUP | HAS_RETAIN | HAS_SCHEDULE) != 0 {
            return None;
        }
        let last_error = read_text(&mut rest, flags & HAS_ERROR != 0)?;
        let group = read_text(&mut rest, flags & HAS_GROUP != 0)?;
        let retain_ms = if flags & HAS_RETAIN != 0 {
            read_varint(&mut rest)?
        } else {
            0
        };
        let schedule = read_text(&mut rest, flags & HAS_SCHEDULE != 0)?;
        let trace = match rest.split_first() {
            Some((&TRACE_MARK, after)) => {
                rest = after;
                let traceparent = read_text(&mut rest, true)?;
                traceparent.zip(read_text(&mut rest, true)?)
            }
            _ => None,
        };
        let task_len = usize::try_from(read_varint(&mut rest)?).ok()?;
        let (task, args) = (rest.get(..task_len)?, rest.get(task_len..)?);
        let enqueued_at_ms = i64::try_from(enqueued).ok()?;
        Some(Self {
            priority: u8::try_from(priority).ok()?,
            attempts: u32::try_from(attempts).ok()?,
            max_attempts: u32::try_from(max_attempts).ok()?,
            enqueued_at_ms,
            ready_at_ms: enqueued_at_ms.checked_add(i64::try_from(ready_delta).ok()?)?,
            last_error,
            group,
            retain_ms,
            schedule,
            trace,
            task: std::str::from_utf8(task).ok()?,
            args: std::str::from_utf8(args).ok()?,
        })
    }

    /// The whole record, as the functions write it.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.task.len() + self.args.len());
        let flags = self.last_error.map_or(0, |_| HAS_ERROR)
            | self.group.map_or(0, |_| HAS_GROUP)
            | if self.retain_ms > 0 { HAS_RETAIN } else { 0 }
            | self.schedule.map_or(0, |_| HAS_SCHEDULE);
        for n in [
            flags,
            u64::from(self.priority),
            u64::from(self.attempts),
            u64::from(self.max_attempts),
            self.enqueued_at_ms.max(0).unsigned_abs(),
            (self.ready_at_ms - self.enqueued_at_ms)
                .max(0)
                .unsigned_abs(),
        ] {
            write_varint(&mut out, n);
        }
        for text in [self.last_error, self.group].into_iter().flatten() {
            write_varint(&mut out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
        if self.retain_ms > 0 {
            write_varint(&mut out, self.retain_ms);
        }
        if let Some(schedule) = self.schedule {
            write_varint(&mut out, schedule.len() as u64);
            out.extend_from_slice(schedule.as_bytes());
        }
        out.extend_from_slice(&body(self.trace, self.task, self.args));
        out
    }
}

/// A length-prefixed text at the start of `rest`, when `present`; moves
/// `rest` past it. `None` when the bytes do not hold one.
fn read_text<'a>(rest: &mut &'a [u8], present: bool) -> Option<Option<&'a str>> {
    if !present {
        return Some(None);
    }
    let len = usize::try_from(read_varint(rest)?).ok()?;
    let (text, after) = (rest.get(..len)?, rest.get(len..)?);
    *rest = after;
    Some(Some(std::str::from_utf8(text).ok()?))
}

/// Tag units in a score's fraction: 2^44, so that an 8-bit priority and a
/// 44-bit tag stay exact in a float64.
pub const TAG_SPAN: u64 = 1 << 44;

/// The score of a job of class `priority` with arrival tag `tag` in a
/// queue's `pending` set, as `score` in `lua/lib/record.lua` makes it.
pub fn score(priority: u8, tag: u64) -> f64 {
    f64::from(priority) + tag as f64 / TAG_SPAN as f64
}

/// The first byte of a body that holds a trace.
const TRACE_MARK: u8 = 0;

/// The part of a record prioq writes at enqueue, after the header the
/// `exchange` function puts in front.
pub fn body(trace: Option<(&str, &str)>, task: &str, args: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + task.len() + args.len());
    if let Some((traceparent, tracestate)) = trace {
        out.push(TRACE_MARK);
        for text in [traceparent, tracestate] {
            write_varint(&mut out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
    }
    write_varint(&mut out, task.len() as u64);
    out.extend_from_slice(task.as_bytes());
    out.extend_from_slice(args.as_bytes());
    out
}

fn write_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        n |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte < 0x80 {
            return Some(n);
        }
    }
    None
}

/// A fresh server-made job id: 14 base62 characters, about 83 random bits.
/// Redis keeps an id twice for each queued job (a field of `jobs`, a member
/// of `pending`), and up to 14 characters it takes jemalloc's 16-byte class
/// each time instead of the 32-byte one (32 B less a job, measured). Two
/// ids only clash while both jobs are known to the queue: with 10 million
/// known and a trillion made over the queue's life, the odds of any clash
/// are about one in a million.
pub fn new_id() -> String {
    random_text(14)
}

/// A fresh token nobody can guess: 22 base62 characters, at least 128
/// random bits, the stem of a claim's lease tokens and of other proofs.
pub fn new_token() -> String {
    random_text(22)
}

/// `len` base62 characters, each equally likely, from a random stream.
fn random_text(len: usize) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut text = String::with_capacity(len);
    let mut rng = rand::rng();
    while text.len() < len {
        let mut bytes = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rng, &mut bytes);
        // Six bits a character; 62 and 63 are dropped, so every digit is
        // equally likely.
        for byte in bytes.map(|b| usize::from(b & 63)) {
            if let (Some(&digit), true) = (DIGITS.get(byte), text.len() < len) {
                text.push(char::from(digit));
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_what_was_written() {
        let record = Record {
            priority: 255,
            attempts: 1000,
            max_attempts: 1000,
            enqueued_at_ms: 1_796_003_050_511,
            ready_at_ms: 1_796_003_050_511 + 2_592_000_000,
            last_error: Some("boom: é"),
            group: Some("tenant:42"),
            retain_ms: 86_400_000,
            schedule: Some("nightly"),
            trace: Some((
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "a=1",
            )),
            task: "t:é",
            args: r#"{"a":[1,2]}"#,
        };
        let bytes = record.encode();
        assert_eq!(Record::decode(&bytes), Some(record));
    }

    #[test]
    fn a_fresh_job_has_a_compact_header() {
        let record = Record {
            priority: 1,
            attempts: 0,
            max_attempts: 5,
            enqueued_at_ms: 1_796_003_050_511,
            ready_at_ms: 1_796_003_050_511,
            last_error: None,
            group: None,
            retain_ms: 0,
            schedule: None,
            trace: None,
            task: "bench",
            args: "{}",
        };
        // flags, priority, attempts, max: 1 byte each; the time 6; the delta
        // 1; the task's length 1.
        assert_eq!(record.encode().len(), 12 + "bench{}".len());
    }

    #[test]
    fn a_record_without_a_trace_reads_as_before_traces() {
        // flags, priority 1, attempts 0, max 5, enqueued 1, delta 0; the
        // task's length, the task, the args.
        let bytes = [0, 1, 0, 5, 1, 0, 4, b't', b'a', b's', b'k', b'{', b'}'];
        let record = Record::decode(&bytes).expect("decodes");
        assert_eq!(
            (record.trace, record.task, record.args),
            (None, "task", "{}")
        );
        assert_eq!(record.encode(), bytes);
    }

    #[test]
    fn truncated_or_foreign_bytes_are_not_a_record() {
        let bytes = Record {
            priority: 3,
            attempts: 0,
            max_attempts: 5,
            enqueued_at_ms: 1,
            ready_at_ms: 1,
            last_error: None,
            group: None,
            retain_ms: 0,
            schedule: None,
            trace: None,
            task: "task",
            args: "{}",
        }
        .encode();
        assert!(Record::decode(&bytes[..8]).is_none());
        assert!(Record::decode(b"3:0:5:1:1:{}").is_none());
        assert!(Record::decode(&[0x80; 20]).is_none());
    }

    #[test]
    fn new_ids_are_14_and_tokens_22_base62_characters_and_differ() {
        for (make, len) in [(new_id as fn() -> String, 14), (new_token, 22)] {
            let (a, b) = (make(), make());
            assert_eq!(a.len(), len);
            assert!(a.bytes().all(|c| c.is_ascii_alphanumeric()));
            assert_ne!(a, b);
        }
    }
}
