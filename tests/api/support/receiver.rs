//! An HTTP endpoint on loopback for push delivery to POST to: it records
//! each request as it arrives and answers by a plan (a status, a delay, a
//! `Retry-After`, or no answer at all), counting the requests it holds at
//! once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One planned answer.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    status: u16,
    delay: Duration,
    retry_after: Option<&'static str>,
    body: &'static str,
}

impl Reply {
    pub fn status(status: u16, body: &'static str) -> Self {
        Self {
            status,
            delay: Duration::ZERO,
            retry_after: None,
            body,
        }
    }

    /// 200 with a JSON body.
    pub fn ok(body: &'static str) -> Self {
        Self::status(200, body)
    }

    /// No answer for an hour: the client gives up first.
    pub fn hang() -> Self {
        Self::ok("{}").after(Duration::from_secs(3600))
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn retry_after(mut self, value: &'static str) -> Self {
        self.retry_after = Some(value);
        self
    }
}

/// A request as it arrived.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub json: Value,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("no {name} header: {self:?}"))
    }
}

#[derive(Debug)]
struct Shared {
    plan: Mutex<VecDeque<Reply>>,
    default: Reply,
    received: Mutex<Vec<Received>>,
    arrived: Notify,
    holding: AtomicUsize,
    most_held: AtomicUsize,
}

/// The endpoint; stops on drop.
#[derive(Debug)]
pub(crate) struct Receiver {
    pub url: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Receiver {
    /// Answers `plan` in order, then `default` to every request after.
    pub async fn start(plan: impl IntoIterator<Item = Reply>, default: Reply) -> Self {
        let shared = Arc::new(Shared {
            plan: Mutex::new(plan.into_iter().collect()),
            default,
            received: Mutex::default(),
            arrived: Notify::new(),
            holding: AtomicUsize::new(0),
            most_held: AtomicUsize::new(0),
        });
        let router = axum::Router::new()
            .route("/jobs", axum::routing::post(receive))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let url = format!("http://{}/jobs", listener.local_addr().expect("address"));
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("serves");
        });
        Self {
            url,
            shared,
            server,
        }
    }

    /// Every request so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }

    /// Waits until `count` requests arrived, failing after `within`.
    pub async fn until_received(&self, count: usize, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let arrived = self.shared.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            assert!(
                tokio::time::timeout_at(deadline, arrived).await.is_ok(),
                "{count} requests not received within {within:?}: {} came",
                received.len()
            );
        }
    }

    /// The most requests it held unanswered at once.
    pub fn most_held(&self) -> usize {
        self.shared.most_held.load(Ordering::SeqCst)
    }
}

/// Counts a request held until it is answered or its client goes away.
struct Held(Arc<Shared>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.holding.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let now = shared.holding.fetch_add(1, Ordering::SeqCst) + 1;
    shared.most_held.fetch_max(now, Ordering::SeqCst);
    let held = Held(Arc::clone(&shared));
    shared.received.lock().expect("lock").push(Received {
        headers,
        body,
        json,
        at: Instant::now(),
    });
    shared.arrived.notify_waiters();
    let reply = (shared.plan.lock().expect("lock").pop_front()).unwrap_or(shared.default.clone());
    tokio::time::sleep(reply.delay).await;
    drop(held);
    let status = StatusCode::from_u16(reply.status).expect("status");
    let mut response = (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        reply.body,
    )
        .into_response();
    if let Some(value) = reply.retry_after {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static(value),
        );
    }
    response
}
