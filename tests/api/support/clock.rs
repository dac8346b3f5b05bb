//! Time in tests: waiting until a condition holds, bounding a wait, this
//! machine's clock and the service's timestamps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Polls `check` every 20 ms until it holds, failing with `what` after
/// `within`. For conditions only observable by looking again.
pub(crate) async fn until<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `answer`, failing if it takes `bound` or more: a hanging request fails
/// the test instead of hanging it.
pub(crate) async fn within<T>(bound: Duration, answer: impl Future<Output = T>) -> T {
    tokio::time::timeout(bound, answer)
        .await
        .unwrap_or_else(|_| panic!("no answer within {bound:?}"))
}

/// Milliseconds since the epoch by this machine's clock. Redis runs here
/// too, and the service's timestamps come from Redis `TIME`, so the two
/// compare directly.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

/// Milliseconds since the epoch of a contract timestamp
/// (`2026-11-29T23:58:12.345Z`), checking its exact shape.
pub(crate) fn ms_of(value: &Value) -> i64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is not a string: {value}"));
    let bytes = text.as_bytes();
    let shape_ok = bytes.len() == 24
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            10 => *b == b'T',
            13 | 16 => *b == b':',
            19 => *b == b'.',
            23 => *b == b'Z',
            _ => b.is_ascii_digit(),
        });
    assert!(
        shape_ok,
        "not an RFC 3339 UTC timestamp with milliseconds: {text}"
    );
    let num = |range: std::ops::Range<usize>| -> i64 { text[range].parse().expect("digits") };
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    assert!(
        (1..=12).contains(&month) && (1..=31).contains(&day),
        "{text}"
    );
    // Days from civil (H. Hinnant), proleptic Gregorian.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + num(11..13)) * 60 + num(14..16)) * 60_000 + num(17..19) * 1000 + num(20..23)
}
