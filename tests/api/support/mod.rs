//! Test support: real `redis-server` processes on free ports, and prioq
//! instances served on port 0 against them.

mod service;
pub(crate) use service::Service;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use prioq::config::Config;
use prioq::startup::Application;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use redis;

/// A `redis-server` owned by the test process. It dies with the test
/// process even on a crash: its wrapper shell holds our stdin pipe and kills
/// it when the pipe closes.
#[derive(Debug)]
pub struct RedisServer {
    pub port: u16,
    child: Child,
}

impl RedisServer {
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "prioq-test-redis-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a data dir");
        Self::start_in(&dir, "--appendonly no")
    }

    /// A `redis-server` on a free port with its data in `dir` and `flags`.
    pub(crate) fn start_in(dir: &std::path::Path, flags: &str) -> Self {
        // A port found free can be taken by a parallel test before our
        // server binds it: then try another.
        (0..5)
            .find_map(|_| Self::try_spawn(free_port(), dir, flags))
            .expect("a redis-server on a free port")
    }

    /// Runs `redis-server` on `port` with its data in `dir`, inside a shell
    /// that kills it (and waits for it to be gone) when our stdin closes.
    pub(crate) fn spawn(port: u16, dir: &std::path::Path, persistence: &str) -> Self {
        Self::try_spawn(port, dir, persistence)
            .unwrap_or_else(|| panic!("port {port} is taken by another redis-server"))
    }

    /// `None` when another server answers on `port`: ours could not bind.
    fn try_spawn(port: u16, dir: &std::path::Path, persistence: &str) -> Option<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Told to our server only, so that we know whose server answers.
        let marker = format!(
            "prioq-{}-{}.rdb",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let script = format!(
            "redis-server --port {port} --bind 127.0.0.1 --save '' {persistence} \
             --dbfilename {marker} --dir \"$0\" --loglevel warning >/dev/null 2>&1 & pid=$!; \
             echo started; read _ ; kill -9 $pid; wait $pid"
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Quiet: the shell reports the kill it waits for.
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (see README)");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("redis-server wrapper starts");
        let server = Self { port, child };
        (server.wait_until_ready() == marker).then_some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid URL")
    }

    /// Waits for a server to answer on the port; returns its dbfilename.
    fn wait_until_ready(&self) -> String {
        let client = self.client();
        for _ in 0..500 {
            if let Ok(mut conn) = client.get_connection()
                && let Ok((_, name)) =
                    redis::cmd("CONFIG")
                        .arg("GET")
                        .arg("dbfilename")
                        .query::<(String, String)>(&mut conn)
            {
                return name;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not come up", self.port);
    }
}

/// Persistence that keeps every acknowledged write across a restart.
pub const AOF_ALWAYS: &str = "--appendonly yes --appendfsync always";

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Closing stdin makes the wrapper kill the server.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The server most tests share; each test keeps to its own key prefix.
pub fn shared_redis() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub fn unique_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Settings tests start from: the shared Redis, a fresh prefix, a quick
/// sweeper.
pub fn test_config() -> Config {
    let mut config = Config::with_defaults();
    config.listen = "127.0.0.1:0".parse().expect("address");
    config.redis_url = shared_redis().url();
    config.key_prefix = unique_prefix();
    config.sweep_interval_ms = 50;
    config
}

/// A running prioq instance.
#[derive(Debug)]
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub config: Config,
    shutdown: CancellationToken,
    stopped: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(test_config()).await
}

pub async fn spawn_app_with(config: Config) -> TestApp {
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
pub struct Answer {
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

    /// This instance's gauge `name` (one without labels).
    async fn gauge(&self, name: &str) -> f64 {
        let prefix = format!("{name} ");
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
            self.gauge(name).await >= count as f64
        })
        .await;
    }

    /// Waits until this instance's gauge `name` is below `count`.
    pub async fn until_gauge_below(&self, name: &str, count: usize) {
        until(Duration::from_secs(10), name, || async {
            self.gauge(name).await < count as f64
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

pub async fn redis_connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers")
}

/// Every key under `prefix` and its contents, for "nothing changed" checks.
/// Hash fields and set members come back in no fixed order (it can change
/// between two reads with no write in between), so they are sorted here;
/// a sorted set's order is its own and kept.
pub async fn snapshot(url: &str, prefix: &str) -> BTreeMap<String, String> {
    let mut conn = redis_connection(url).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    let mut out = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("TYPE");
        let contents = match kind.as_str() {
            "zset" => {
                let members: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await
                    .expect("ZRANGE");
                let members: Vec<(String, String)> = members
                    .iter()
                    .map(|(member, score)| (printable(member), score.clone()))
                    .collect();
                format!("{members:?}")
            }
            "hash" => {
                let fields: BTreeMap<Vec<u8>, Vec<u8>> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("HGETALL");
                let fields: Vec<(String, String)> = fields
                    .iter()
                    .map(|(field, value)| (printable(field), printable(value)))
                    .collect();
                format!("{fields:?}")
            }
            "set" => {
                let members: std::collections::BTreeSet<Vec<u8>> = redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("SMEMBERS");
                let members: Vec<String> = members.iter().map(|m| printable(m)).collect();
                format!("{members:?}")
            }
            _ => {
                let value: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("GET");
                value.as_deref().map(printable).unwrap_or_default()
            }
        };
        out.insert(key, format!("{kind} {contents}"));
    }
    out
}

/// Bytes as text, non-printable ones escaped: one text per byte string, so
/// equal texts mean equal bytes, and an id shows as itself.
fn printable(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

impl RedisServer {
    /// A `redis-server` on `port` that keeps its data in `dir`, in an
    /// append-only file synced on every write. Dropped (killed) and started
    /// again on the same port and dir, it is back at the same address with
    /// everything it had acknowledged: a Redis outage under a running
    /// service.
    pub fn start_on(port: u16, dir: &std::path::Path) -> Self {
        Self::spawn(port, dir, AOF_ALWAYS)
    }

    /// The pid of the `redis-server` process itself (not of its wrapper
    /// shell), to stop and resume it with `kill -STOP` / `kill -CONT`.
    pub fn pid(&self) -> u32 {
        let mut conn = self.client().get_connection().expect("Redis answers");
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut conn)
            .expect("INFO server");
        info.lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
            .expect("INFO server tells the process id")
    }
}

/// Sends `signal` (`TERM`, `INT`, `STOP`, `CONT`...) to process `pid`
/// with kill(1).
pub fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill -{signal} {pid} failed: {status}");
}

/// A fresh directory under the system's temporary one, removed on drop.
#[derive(Debug)]
pub struct TempDir {
    pub path: std::path::PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!("prioq-{label}-{}", unique_prefix()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temporary directory");
        Self { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Function calls (FCALL) the Redis behind `conn` has run so far.
pub async fn script_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(conn, &["fcall"]).await
}

/// Function calls of either kind (FCALL, and FCALL_RO for reads) the Redis
/// behind `conn` has run so far.
pub async fn function_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(conn, &["fcall", "fcall_ro"]).await
}

/// Calls of `commands` the Redis behind `conn` has run so far, summed.
async fn command_calls(conn: &mut redis::aio::MultiplexedConnection, commands: &[&str]) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    commands
        .iter()
        .filter_map(|command| {
            let prefix = format!("cmdstat_{command}:calls=");
            info.lines()
                .find_map(|line| line.strip_prefix(prefix.as_str()))
                .and_then(|rest| rest.split(',').next())
                .and_then(|calls| calls.parse::<u64>().ok())
        })
        .sum()
}

/// Waits until the Redis behind `conn` has run more script calls than
/// `before`: a long poll sent after `before` was read has looked for a job
/// once (and, on an empty queue, now waits).
pub async fn until_script_calls_exceed(conn: &mut redis::aio::MultiplexedConnection, before: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while script_calls(conn).await <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the long poll never looked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls `check` every 20 ms until it holds, failing with `what` after
/// `within`. For conditions only observable by looking again.
pub async fn until<F, Fut>(within: Duration, what: &str, mut check: F)
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
