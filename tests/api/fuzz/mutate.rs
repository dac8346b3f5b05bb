//! What the fuzzer sends instead of a valid request: junk path segments
//! and ids, values of the wrong type or at the edge of a range, JSON no
//! `Value` holds, structural and byte-level changes, junk bodies and
//! content types.

use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use crate::support::rng::Rng;

/// Path segments and bodies no request is ever allowed to use unharmed.
pub(super) fn junk_segment(rng: &mut Rng) -> String {
    let fixed = [
        "",
        "_x",
        "-x",
        ".x",
        "a%20b",
        "%FF",
        "%00",
        "%2F",
        "a%2Fb",
        "%C3%A9",
        "%ZZ",
        "%",
        "x%0Ay",
        "x%0D%0Ay",
        "%7Bfz%7D",
        "fz:x",
        "a*",
        "%2e%2e",
        "..",
        "%E2%80%AE",
        "%F0%9F%A6%80",
        "%C0%AF",
        "%ED%A0%80",
    ];
    match rng.below(5) {
        0 => "a".repeat(129),
        1 => "a".repeat(1000 + rng.below(9000)),
        2 => {
            let len = 1 + rng.below(40);
            (0..len).map(|_| format!("%{:02X}", rng.byte())).collect()
        }
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

/// Ids that are valid but belong to no job, and junk.
pub(super) fn junk_id(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => format!("nope-{}", rng.next()),
        1 => "x".repeat(129),
        _ => junk_segment(rng),
    }
}

/// A value of some type, often the wrong one, often at the edge of a range.
pub(super) fn weird_value(rng: &mut Rng) -> Value {
    match rng.below(24) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(0),
        4 => json!(-1),
        5 => json!(i64::MIN),
        6 => json!(u64::MAX),
        7 => json!(1.5),
        8 => json!(255.0),
        9 => json!(256),
        10 => json!(1e308),
        11 => json!(-0.0),
        12 => json!(""),
        13 => json!("x"),
        14 => json!("é".repeat(201)),
        15 => json!("a\u{0}b"),
        16 => json!("日本語 🦀 \u{202E}"),
        17 => json!([]),
        18 => json!({}),
        19 => json!([1, "two", null]),
        20 => json!({"a": {"b": [1]}}),
        21 => json!(if rng.one_in(2) {
            "z".repeat(5000)
        } else {
            "é".repeat(200)
        }),
        22 => json!(43_200_001),
        _ => json!(2_592_000_001_u64),
    }
}

/// JSON text no `Value` can hold (or hold as written): it goes into the
/// serialized body in place of a marker string.
pub(super) fn raw_json(rng: &mut Rng) -> String {
    let fixed = [
        "1e400",
        "-1e400",
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "18446744073709551616",
        "-9223372036854775809",
        "1E2",
        "1.0e-400",
        "-0",
        "01",
        "NaN",
        "Infinity",
        "+1",
        ".5",
        "0x10",
        r#""\ud800""#,
        r#""\udfff\ud800""#,
        r#""\u0000""#,
        r#""\uZZZZ""#,
        r#""\x""#,
        "tru",
        "nul",
    ];
    match rng.below(6) {
        0 => {
            let depth = *rng.pick(&[129, 1000, 10_000]);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth))
        }
        1 => {
            let depth = *rng.pick(&[129, 1000, 5000]);
            format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
        }
        _ => (*rng.pick(&fixed)).to_owned(),
    }
}

pub(super) const RAW_MARKER: &str = "\u{1}raw\u{1}";

/// One structural change somewhere in `value`.
pub(super) fn mutate_value(rng: &mut Rng, value: &mut Value, raws: &mut Vec<String>) {
    // Pick a random path down the value, sometimes stopping early, as a
    // JSON pointer.
    let mut pointer = String::new();
    let mut at = &*value;
    loop {
        let step = match at {
            Value::Object(map) if !map.is_empty() && !rng.one_in(3) => map
                .iter()
                .nth(rng.below(map.len()))
                .map(|(key, child)| (key.replace('~', "~0").replace('/', "~1"), child)),
            Value::Array(items) if !items.is_empty() && !rng.one_in(3) => {
                let i = rng.below(items.len());
                Some((i.to_string(), &items[i]))
            }
            _ => None,
        };
        let Some((segment, child)) = step else { break };
        pointer.push('/');
        pointer.push_str(&segment);
        at = child;
    }
    let node = value
        .pointer_mut(&pointer)
        .expect("the pointer was just walked");
    let fields = [
        "task",
        "args",
        "priority",
        "id",
        "delay_ms",
        "max_attempts",
        "jobs",
        "worker",
        "lease_ms",
        "max_jobs",
        "wait_ms",
        "lease_token",
        "error",
        "dead",
        "group",
        "paused",
        "max_in_flight",
        "rate_limit",
        "per_second",
        "burst",
        "group_weights",
        "group_max_in_flight",
        "retain_ms",
        "expires_in_ms",
        "on_expiry",
        "dedup",
        "key",
        "ttl_ms",
        "mode",
        "result",
        "progress",
        "extra",
        "",
        "TASK",
    ];
    match rng.below(6) {
        0 | 1 => *node = weird_value(rng),
        2 => {
            raws.push(raw_json(rng));
            *node = json!(RAW_MARKER);
        }
        3 => {
            if let Value::Object(map) = node
                && !map.is_empty()
            {
                let key = map.keys().nth(rng.below(map.len())).cloned();
                if let Some(key) = key {
                    map.remove(&key);
                }
            } else {
                *node = Value::Null;
            }
        }
        4 => {
            if let Value::Object(map) = node {
                map.insert((*rng.pick(&fields)).to_owned(), weird_value(rng));
            } else {
                *node = json!([node.take()]);
            }
        }
        _ => *node = json!({ *rng.pick(&fields): node.take() }),
    }
}

pub(super) fn serialize(value: &Value, raws: &[String]) -> Vec<u8> {
    let mut text = serde_json::to_string(value).expect("a Value serializes");
    let marker = serde_json::to_string(RAW_MARKER).expect("a string serializes");
    for raw in raws {
        text = text.replacen(&marker, raw, 1);
    }
    text.into_bytes()
}

/// One to three byte-level changes.
pub(super) fn mutate_bytes(rng: &mut Rng, body: &mut Vec<u8>) {
    let special = [
        0x00, 0xFF, 0xFE, 0xC3, 0x80, 0xC0, 0xED, b'"', b'\\', b'{', b'}', b'[', b']', b',', b':',
        b'0', b'-', b'e', b'.', b' ', b'\n',
    ];
    for _ in 0..=rng.below(3) {
        let len = body.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                body[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                body[i] = *rng.pick(&special);
            }
            2 => {
                let i = rng.below(len + 1);
                body.insert(i, *rng.pick(&special));
            }
            3 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(8)).min(len);
                body.drain(start..end);
            }
            4 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(16)).min(len);
                let chunk = body[start..end].to_vec();
                let at = rng.below(len + 1);
                body.splice(at..at, chunk);
            }
            5 if len > 0 => body.truncate(rng.below(len)),
            6 => {
                // Invalid UTF-8 inside a string.
                if let Some(at) = body.iter().position(|b| *b == b'"') {
                    let junk: &[u8] =
                        rng.choose(&[&[0xFF, 0xFE][..], &[0xC3][..], &[0xED, 0xA0, 0x80][..]]);
                    body.splice(at + 1..at + 1, junk.iter().copied());
                }
            }
            7 => {
                // A duplicate key right after the first brace.
                if let Some(at) = body.iter().position(|b| *b == b'{') {
                    let dup: &str = rng.choose(&[
                        r#""task":"dup","#,
                        r#""lease_token":"dup","#,
                        r#""jobs":[],"#,
                        r#""priority":1,"#,
                    ]);
                    body.splice(at + 1..at + 1, dup.bytes());
                }
            }
            _ => {
                // A raw NUL byte (a control character JSON forbids unescaped).
                let i = rng.below(len + 1);
                body.insert(i, 0);
            }
        }
    }
}

/// A whole body that is no request of any endpoint.
pub(super) fn junk_body(rng: &mut Rng, valid: &[u8]) -> Vec<u8> {
    match rng.below(12) {
        0 => Vec::new(),
        1 => b"null".to_vec(),
        2 => b"[]".to_vec(),
        3 => b"\"\"".to_vec(),
        4 => b"0".to_vec(),
        5 => b"{".to_vec(),
        6 => (0..1 + rng.below(64)).map(|_| rng.byte()).collect(),
        7 => {
            let depth = *rng.pick(&[200, 10_000]);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
        }
        8 => {
            let mut body = b"\xEF\xBB\xBF".to_vec();
            body.extend_from_slice(valid);
            body
        }
        9 => {
            // Above the default 1 MiB limit.
            let mut body = valid.to_vec();
            body.splice(1..1, std::iter::repeat_n(b' ', (1 << 20) + 10));
            body
        }
        10 => {
            let mut body = valid.to_vec();
            body.extend_from_slice(b" {}");
            body
        }
        _ => "{\"task\":\"\u{0}\u{7f}\u{FFFF}\"}".as_bytes().to_vec(),
    }
}

pub(super) fn junk_content_type(rng: &mut Rng) -> Option<HeaderValue> {
    let fixed: [&[u8]; 16] = [
        b"",
        b"text/plain",
        b"application/x-www-form-urlencoded",
        b"application/json; charset=utf-8",
        b"APPLICATION/JSON",
        b"application/problem+json",
        b"application/vnd.prioq+json",
        b"application/jsonp",
        b"application/json-patch+json",
        b"multipart/form-data; boundary=x",
        b"application/json;;;",
        b"json",
        b"application/\xff",
        b"*/*",
        b"text/json",
        b"application/xml",
    ];
    if rng.one_in(8) {
        return None;
    }
    HeaderValue::from_bytes(rng.choose(&fixed)).ok()
}
