//! Requests and answers as bytes, and what the contract asks of every
//! answer.

use std::fmt::Write as _;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::TestApp;

/// The 4xx codes of the contract's table, by status.
pub(super) const CODES: [(u16, &str); 10] = [
    (400, "invalid_request"),
    (401, "unauthorized"),
    (404, "not_found"),
    (409, "lease_lost"),
    (409, "conflict"),
    (405, "method_not_allowed"),
    (413, "payload_too_large"),
    (415, "unsupported_media_type"),
    (422, "validation_failed"),
    (429, "queue_full"),
];

/// One request, kept whole so a failure can show it.
#[derive(Debug, Clone)]
pub(super) struct Probe {
    pub(super) method: Method,
    /// Path and query, after the base URL.
    pub(super) path: String,
    pub(super) content_type: Option<HeaderValue>,
    pub(super) authorization: Option<HeaderValue>,
    pub(super) body: Option<Vec<u8>>,
}

impl Probe {
    pub(super) fn post(path: String, body: Vec<u8>) -> Self {
        Self {
            method: Method::POST,
            path,
            content_type: Some(HeaderValue::from_static("application/json")),
            authorization: None,
            body: Some(body),
        }
    }

    pub(super) fn get(path: String) -> Self {
        Self {
            method: Method::GET,
            path,
            content_type: None,
            authorization: None,
            body: None,
        }
    }

    pub(super) fn describe(&self) -> String {
        let mut out = format!("{} {}", self.method, clip(&self.path, 300));
        if let Some(content_type) = &self.content_type {
            let _ = write!(out, "\n    Content-Type: {content_type:?}");
        }
        if let Some(authorization) = &self.authorization {
            let _ = write!(out, "\n    Authorization: {authorization:?}");
        }
        if let Some(body) = &self.body {
            let _ = write!(
                out,
                "\n    body ({} bytes): {}",
                body.len(),
                clip(&String::from_utf8_lossy(body), 400)
            );
        }
        out
    }
}

pub(super) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… ({} chars)", text.chars().count())
}

/// An answer whose body need not be JSON.
#[derive(Debug)]
pub(super) struct Raw {
    pub(super) status: StatusCode,
    pub(super) content_type: Option<String>,
    pub(super) www_authenticate: Option<String>,
    pub(super) body: Vec<u8>,
}

impl Raw {
    pub(super) fn describe(&self) -> String {
        format!(
            "{} {:?}: {}",
            self.status,
            self.content_type,
            clip(&String::from_utf8_lossy(&self.body), 400)
        )
    }
}

pub(super) async fn send(app: &TestApp, probe: &Probe) -> Raw {
    let mut request = app
        .http
        .request(probe.method.clone(), app.url(&probe.path))
        .timeout(Duration::from_secs(30));
    if let Some(content_type) = &probe.content_type {
        request = request.header(CONTENT_TYPE, content_type.clone());
    }
    if let Some(authorization) = &probe.authorization {
        request = request.header(AUTHORIZATION, authorization.clone());
    }
    if let Some(body) = &probe.body {
        request = request.body(body.clone());
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|error| panic!("no answer to {}: {error}", probe.describe()));
    let header = |name| {
        response
            .headers()
            .get(name)
            .map(|v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let status = response.status();
    let content_type = header(CONTENT_TYPE);
    let www_authenticate = header(WWW_AUTHENTICATE);
    let body = response
        .bytes()
        .await
        .unwrap_or_else(|error| panic!("answer to {} cut short: {error}", probe.describe()))
        .to_vec();
    Raw {
        status,
        content_type,
        www_authenticate,
        body,
    }
}

/// What the contract asks of every answer: no 5xx, no 1xx/3xx, and every
/// 4xx a problem with a known code that matches its status and leaks
/// nothing of the server's insides.
pub(super) fn contract_violation(raw: &Raw, key_prefix: &str) -> Option<String> {
    let status = raw.status.as_u16();
    if raw.status.is_success() {
        return None;
    }
    if !raw.status.is_client_error() {
        return Some(format!("status {status} is not a 2xx or a 4xx"));
    }
    if raw.content_type.as_deref() != Some("application/problem+json") {
        return Some(format!(
            "a {status} answer with content type {:?}, not application/problem+json",
            raw.content_type
        ));
    }
    let problem: Value = match serde_json::from_slice(&raw.body) {
        Ok(problem) => problem,
        Err(error) => return Some(format!("the problem is not JSON: {error}")),
    };
    let Some(code) = problem["code"].as_str() else {
        return Some("the problem has no string `code`".into());
    };
    if !CODES.iter().any(|(s, c)| *s == status && *c == code) {
        return Some(format!(
            "status {status} with code `{code}`: not a pair of the contract's table"
        ));
    }
    if problem["status"] != json!(status) {
        return Some(format!("`status` member {} ≠ {status}", problem["status"]));
    }
    for member in ["type", "title", "detail"] {
        if !problem[member].is_string() {
            return Some(format!("the problem has no string `{member}`"));
        }
    }
    let detail = problem["detail"].as_str().unwrap_or_default();
    for leak in [key_prefix, "panicked", "ERR ", "stack backtrace", "src/"] {
        if detail.contains(leak) {
            return Some(format!("`detail` leaks {leak:?}: {detail}"));
        }
    }
    if status == 401 && raw.www_authenticate.as_deref() != Some("Bearer") {
        return Some(format!(
            "401 without `WWW-Authenticate: Bearer` (got {:?})",
            raw.www_authenticate
        ));
    }
    None
}
