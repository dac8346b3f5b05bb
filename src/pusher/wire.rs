//! The HTTP side of a delivery: the request's signature, and the answer
//! read (its status, its body's start, its `Retry-After`).

use std::time::SystemTime;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The most of an answer's body read: a 2xx answer's JSON is the job's
/// result; another's first characters go in its error.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The longest `Retry-After` honoured: a day.
const MAX_RETRY_AFTER_MS: u64 = 86_400_000;
/// The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of
/// "<t>.<body>" under the target's secret>`.
pub(super) const SIGNATURE_HEADER: &str = "prioq-signature";

/// Sends a request and reads its answer: the status, the body's first
/// `MAX_ANSWER_BYTES`, and its `Retry-After` in ms.
pub(super) async fn send(
    request: reqwest::RequestBuilder,
) -> Result<(u16, Vec<u8>, Option<u64>), reqwest::Error> {
    let mut answer = request.send().await?;
    let status = answer.status().as_u16();
    let retry_after = answer
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(retry_after_ms);
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ANSWER_BYTES {
            body.truncate(MAX_ANSWER_BYTES);
            break;
        }
    }
    Ok((status, body, retry_after))
}

/// A `Retry-After` value in ms: seconds, or an HTTP date; at most a day.
fn retry_after_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    let ms = match value.parse::<u64>() {
        Ok(seconds) => seconds.saturating_mul(1000),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(SystemTime::now())
                .map_or(0, |d| d.as_millis() as u64)
        }
    };
    Some(ms.min(MAX_RETRY_AFTER_MS))
}

/// The signature header's value for a body sent at `unix_seconds`.
pub(super) fn signature(secret: &str, unix_seconds: u64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("{unix_seconds}.").as_bytes());
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={unix_seconds},v1={hex}")
}

/// An error and its causes, one line.
pub(super) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates_within_a_day() {
        assert_eq!(retry_after_ms("3"), Some(3000));
        assert_eq!(retry_after_ms(" 0 "), Some(0));
        assert_eq!(retry_after_ms("999999999"), Some(MAX_RETRY_AFTER_MS));
        assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), Some(0));
        assert_eq!(retry_after_ms("soon"), None);
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_time_and_body() {
        // HMAC-SHA256 under "Jefe" (RFC 4231's key) of "0.what do ya
        // want for nothing?", as Python's hmac module computes it.
        assert_eq!(
            signature("Jefe", 0, b"what do ya want for nothing?"),
            "t=0,v1=37f471929915ccd2cbbe79feb84ffcff4f2bb25e15fc41c2506687331ae179cc"
        );
    }
}
