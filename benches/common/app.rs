//! prioq in the bench's process against a `redis-server` of its own (no
//! persistence), and the calls the benches make to it.

use anyhow::{Result, ensure};
use prioq::config::Config;
use prioq::startup::Application;
use prioq_testbed::RedisServer;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::redis_info::{self, connect, info};

/// A running prioq, its Redis, and a connection to read Redis's CPU.
pub struct App {
    pub http: reqwest::Client,
    pub base: String,
    redis: MultiplexedConnection,
    stop: CancellationToken,
    running: tokio::task::JoinHandle<Result<()>>,
    _server: RedisServer,
}

impl App {
    /// Starts Redis and prioq (key prefix `bench-<name>-<pid>`, a sweep
    /// every 50 ms).
    pub async fn start(name: &str) -> Result<Self> {
        let server = RedisServer::start();
        let mut config = Config::with_defaults();
        config.listen = "127.0.0.1:0".parse()?;
        config.redis_url = server.url();
        config.key_prefix = format!("bench-{name}-{}", std::process::id());
        config.sweep_interval_ms = 50;
        let app = Application::build(config).await?;
        let base = format!("http://{}", app.local_addr());
        let stop = app.shutdown_token();
        let running = tokio::spawn(app.run_until_stopped());
        let client = redis::Client::open(server.url())?;
        Ok(Self {
            http: reqwest::Client::new(),
            base,
            redis: connect(&client).await?,
            stop,
            running,
            _server: server,
        })
    }

    pub fn url(&self, queue: &str, rest: &str) -> String {
        format!("{}/v1/queues/{queue}{rest}", self.base)
    }

    /// Redis's CPU so far (user + system), µs.
    pub async fn cpu(&mut self) -> Result<u64> {
        redis_info::cpu_us(&info(&mut self.redis, &["cpu"]).await?)
    }

    /// POSTs `body`, requiring a 2xx; answers the JSON body (null when none).
    pub async fn post(&self, url: String, body: Value) -> Result<Value> {
        let answer = self.http.post(url).json(&body).send().await?;
        ensure!(answer.status().is_success(), "{}", answer.status());
        Ok(answer.json().await.unwrap_or(Value::Null))
    }

    /// Enqueues `jobs` in batches of `batch`.
    pub async fn enqueue(&self, queue: &str, jobs: Vec<Value>, batch: usize) -> Result<()> {
        for chunk in jobs.chunks(batch) {
            self.post(self.url(queue, "/jobs/batch"), json!({ "jobs": chunk }))
                .await?;
        }
        Ok(())
    }

    /// Stops prioq, then Redis.
    pub async fn stop(self) -> Result<()> {
        self.stop.cancel();
        self.running.await?
    }
}

/// A GET's JSON answer.
pub async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value> {
    Ok(http.get(url).send().await?.json().await?)
}
