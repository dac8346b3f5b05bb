//! prioq instances served on port 0 in this process, against the shared
//! Redis or any other, and what tests send them: requests read whole,
//! the common calls, queue settings.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use prioq::config::Config;
use prioq::startup::Application;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::clock::until;
use super::redis_server::{shared_redis, snapshot};

/// A key prefix (and a name) no other test of this run uses.
pub(crate) fn unique_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Settings tests start from: the shared Redis, a fresh prefix, a quick
/// sweeper.
pub(crate) fn test_config() -> Config {
    let mut config = Config::with_defaults();
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.redis_url = shared_redis().url();
    config.key_prefix = unique_prefix();
    config.sweep_interval_ms = 50;
    config
}

/// A running prioq instance.
#[derive(Debug)]
pub(crate) struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub config: Config,
    shutdown: CancellationToken,
    stopped: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

pub(crate) async fn spawn_app() -> TestApp {
    spawn_app_with(test_config()).await
}

pub(crate) async fn spawn_app_with(config: Config) -> TestApp {
    let app = Application::build(config.clone())
        .await
        .expect("app builds");
    let base = format!("http://{}", app.local_addr());
    let shutdown = app.shutdown_token();
    let stopped = tokio::spawn(app.run_until_stopped());
    TestApp {
        base,
        http: reqwest::Client::new(),
        config,
        shutdown,
        stopped: Some(stopped),
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The `code` of a problem answer, checking its shape on the way.
    pub fn problem_code(&self) -> &str {
        let content_type = self
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        assert_eq!(content_type, Some("application/problem+json"), "{self:?}");
        assert_eq!(self.body["status"], json!(self.status.as_u16()), "{self:?}");
        for member in ["type", "title", "detail"] {
            assert!(
                self.body[member].is_string(),
                "problem without {member}: {self:?}"
            );
        }
        self.body["code"].as_str().expect("problem has a code")
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn queue_url(&self, queue: &str, rest: &str) -> String {
        format!("{}/v1/queues/{queue}{rest}", self.base)
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("request is answered");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body is read");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)))
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    pub async fn post(&self, url: String, body: Value) -> Answer {
        self.send(self.http.post(url).json(&body)).await
    }

    pub async fn get(&self, url: String) -> Answer {
        self.send(self.http.get(url)).await
    }

    /// Enqueues and returns the job view, asserting it was created.
    pub async fn enqueue(&self, queue: &str, body: Value) -> Value {
        let answer = self.post(self.queue_url(queue, "/jobs"), body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        answer.body
    }

    /// Claims with `body` and returns the leased jobs.
    pub async fn claim(&self, queue: &str, body: Value) -> Vec<Value> {
        let answer = self.post(self.queue_url(queue, "/claim"), body).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        answer.body["jobs"].as_array().expect("jobs").clone()
    }

    pub async fn claim_one(&self, queue: &str) -> Option<Value> {
        self.claim(queue, json!({})).await.into_iter().next()
    }

    pub async fn ack(&self, queue: &str, job: &Value) -> Answer {
        let id = job["id"].as_str().expect("id");
        self.post(
            self.queue_url(queue, &format!("/jobs/{id}/ack")),
            json!({"lease_token": job["lease_token"]}),
        )
        .await
    }

    pub async fn job(&self, queue: &str, id: &str) -> Answer {
        self.get(self.queue_url(queue, &format!("/jobs/{id}")))
            .await
    }

    pub async fn stats(&self, queue: &str) -> Value {
        let answer = self.get(self.queue_url(queue, "")).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        answer.body
    }

    /// Polls a job until `done` holds, failing after `within`. For states
    /// that only the passing of real time brings (an expired lease).
    pub async fn wait_for_job(
        &self,
        queue: &str,
        id: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let answer = self.job(queue, id).await;
            if done(&answer.body) {
                return answer.body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {id} did not reach the expected state within {within:?}: {answer:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The `/metrics` exposition text.
    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("scraped")
            .text()
            .await
            .expect("text")
    }

    /// This instance's series `series` on `/metrics` (a name, with its
    /// labels when it has some), 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let prefix = format!("{series} ");
        self.metrics()
            .await
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    }

    /// Waits until this instance's gauge `name` reaches `count`: so many
    /// long polls (`prioq_long_polls_waiting`) or waits on a job
    /// (`prioq_job_waits`) have looked once and wait.
    pub async fn until_gauge(&self, name: &str, count: usize) {
        until(Duration::from_secs(10), name, || async {
            self.metric(name).await >= count as f64
        })
        .await;
    }

    /// Waits until this instance's gauge `name` is below `count`.
    pub async fn until_gauge_below(&self, name: &str, count: usize) {
        until(Duration::from_secs(10), name, || async {
            self.metric(name).await < count as f64
        })
        .await;
    }

    /// Waits until `count` long polls of this instance have looked for a
    /// job and wait.
    pub async fn until_long_polls_wait(&self, count: usize) {
        self.until_gauge("prioq_long_polls_waiting", count).await;
    }

    /// Every key of this instance's prefix with its full contents.
    pub async fn snapshot(&self) -> BTreeMap<String, String> {
        snapshot(&self.config.redis_url, &self.config.key_prefix).await
    }

    /// Stops the instance as SIGTERM would, and waits for it.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(stopped) = self.stopped.take() {
            stopped.await.expect("joins").expect("stops cleanly");
        }
    }

    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// Sends the merge patch `patch` to the settings of `queue`.
pub(crate) async fn patch_settings(app: &TestApp, queue: &str, patch: Value) -> Answer {
    let request = app
        .http
        .patch(app.queue_url(queue, "/settings"))
        .header("content-type", "application/merge-patch+json")
        .body(patch.to_string());
    app.send(request).await
}

/// Changes the settings of `queue` with `patch`, asserting it was taken;
/// the settings after.
pub(crate) async fn configure(app: &TestApp, queue: &str, patch: Value) -> Value {
    let answer = patch_settings(app, queue, patch).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.body
}

/// Under a limit of 2 jobs a second with a burst of 1 (a queue's or a
/// group's), with jobs waiting: a claim takes the one token, and a long
/// poll after it is answered with a job when the next token comes, about
/// 500 ms later, neither at once nor at the end of its wait.
pub(crate) async fn a_long_poll_waits_for_the_next_token(app: &TestApp, queue: &str) {
    assert_eq!(app.claim(queue, json!({})).await.len(), 1);
    let started = tokio::time::Instant::now();
    let jobs = app.claim(queue, json!({"wait_ms": 5000})).await;
    let took = started.elapsed();
    assert_eq!(jobs.len(), 1, "a token came within the wait");
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(1500),
        "the next token comes after about 500 ms: {took:?}"
    );
}

/// Enqueues `count` jobs of `group` (none for `None`) at `priority`, in
/// batches, with ids `{prefix}{n}`.
pub(crate) async fn enqueue_many(
    app: &TestApp,
    queue: &str,
    group: Option<&str>,
    priority: u8,
    prefix: &str,
    count: usize,
) {
    for start in (0..count).step_by(1000) {
        let jobs: Vec<Value> = (start..count.min(start + 1000))
            .map(|n| {
                let mut job =
                    json!({"task": "t", "id": format!("{prefix}{n}"), "priority": priority});
                if let Some(group) = group {
                    job["group"] = json!(group);
                }
                job
            })
            .collect();
        let answer = app
            .post(app.queue_url(queue, "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    }
}
