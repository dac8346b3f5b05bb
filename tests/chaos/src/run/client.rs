//! Requests to prioq and their recording: each call's outcome read from
//! its answer as the contract's error tables say, and written to the
//! history as one line.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::history::{Call, Op, Outcome, write_line};

/// The runner's clock: ms since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// An RFC 3339 time of an answer, in ms since the epoch.
pub fn parse_time(value: &Value) -> Option<i64> {
    let text = value.as_str()?;
    text.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

/// The history file being written.
#[derive(Debug)]
pub struct Recorder {
    next: AtomicU64,
    out: Mutex<BufWriter<File>>,
}

impl Recorder {
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            next: AtomicU64::new(1),
            out: Mutex::new(BufWriter::new(File::create(path)?)),
        })
    }

    /// Writes one operation.
    pub fn record(&self, process: &str, queue: &str, start_ms: i64, answer: &Answer, call: Call) {
        let op = Op {
            op: self.next.fetch_add(1, Ordering::Relaxed),
            process: process.to_owned(),
            queue: queue.to_owned(),
            start_ms,
            end_ms: now_ms(),
            outcome: answer.outcome,
            status: answer.status,
            call,
        };
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        write_line(&mut *out, &op).expect("the history file takes a line");
    }

    pub fn flush(&self) -> std::io::Result<()> {
        use std::io::Write;
        self.out.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// What a request was answered, reduced to what the history needs.
#[derive(Debug)]
pub struct Answer {
    pub outcome: Outcome,
    pub status: Option<u16>,
    pub body: Value,
}

impl Answer {
    /// A request given up before its answer: it may have been applied.
    pub fn abandoned() -> Self {
        Self {
            outcome: Outcome::Unknown,
            status: None,
            body: Value::Null,
        }
    }
}

/// How long a request may take before it counts as unknown.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Sends one request and reads its outcome: 2xx ok; 503 and 507 by
/// their `effect` member; any other 4xx failed (refused, no effect); a
/// refused connection failed (nothing was sent); a timeout, a dropped
/// connection or another 5xx unknown.
pub async fn send(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<&Value>,
) -> Answer {
    let mut request = http.request(method, url).timeout(TIMEOUT);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => {
            let outcome = if error.is_connect() {
                Outcome::Failed
            } else {
                Outcome::Unknown
            };
            return Answer {
                outcome,
                status: None,
                body: Value::Null,
            };
        }
    };
    let status = response.status();
    let body = response.json::<Value>().await;
    let outcome = if status.is_success() {
        // A success whose body was lost: applied, its answer unknown.
        if status == StatusCode::NO_CONTENT || body.is_ok() {
            Outcome::Ok
        } else {
            Outcome::Unknown
        }
    } else if matches!(
        status,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::INSUFFICIENT_STORAGE
    ) {
        match &body {
            Ok(problem) if problem["effect"] == "none" => Outcome::Failed,
            _ => Outcome::Unknown,
        }
    } else if status.is_client_error() {
        Outcome::Failed
    } else {
        Outcome::Unknown
    };
    Answer {
        outcome,
        status: Some(status.as_u16()),
        body: body.unwrap_or(Value::Null),
    }
}
