//! The built `prioq` binary as a child process, for the tests that need a
//! real process: signals, descriptors, memory.

use std::fs::File;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{TempDir, free_port, unique_prefix};

/// The built `prioq` binary running as a child process; killed on drop.
#[derive(Debug)]
pub(crate) struct Service {
    child: Child,
    pub(crate) port: u16,
    pub(crate) base: String,
    pub(crate) prefix: String,
    log: PathBuf,
    _dir: TempDir,
}

impl Service {
    /// Starts the binary against `redis_url` and waits until `/healthz`
    /// answers.
    pub(crate) async fn start(redis_url: &str) -> Self {
        Self::start_with(redis_url, &unique_prefix(), &[]).await
    }

    /// Starts the binary against `redis_url` with key prefix `prefix` (two
    /// services with the same one share their queues) and the extra
    /// environment `env` (`PRIOQ_*` settings), and waits until `/healthz`
    /// answers.
    pub(crate) async fn start_with(redis_url: &str, prefix: &str, env: &[(&str, &str)]) -> Self {
        Self::start_on("127.0.0.1", redis_url, prefix, env).await
    }

    /// Like [`Service::start_with`], listening on `ip` (`0.0.0.0`: every
    /// address, loopback included, where the tests reach it).
    pub(crate) async fn start_on(
        ip: &str,
        redis_url: &str,
        prefix: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let dir = TempDir::new("service");
        let log = dir.path.join("prioq.log");
        let port = free_port();
        let prefix = prefix.to_owned();
        let output = File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_prioq"))
            .env("PRIOQ_LISTEN", format!("{ip}:{port}"))
            .env("PRIOQ_REDIS_URL", redis_url)
            .env("PRIOQ_KEY_PREFIX", &prefix)
            .env("RUST_LOG", "info")
            // Spans are exported only where a test asks for it.
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("log file"))
            .stderr(output)
            .spawn()
            .expect("the prioq binary starts");
        let mut service = Self {
            child,
            port,
            base: format!("http://127.0.0.1:{port}"),
            prefix,
            log,
            _dir: dir,
        };
        service.until_healthy().await;
        service
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) async fn until_healthy(&mut self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prioq exited at start with {status}:\n{}", self.log());
            }
            let answer = http.get(self.url("/healthz")).send().await;
            if answer.is_ok_and(|a| a.status() == StatusCode::OK) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prioq never answered /healthz:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How the process ended, if it did within `within`.
    pub(crate) async fn exit_within(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "prioq still runs {within:?} after the signal:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) fn still_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Whether a new TCP connection to the service is refused.
    pub(crate) async fn refuses_connections(&self) -> bool {
        match TcpStream::connect(("127.0.0.1", self.port)).await {
            Ok(_) => false,
            Err(error) => error.kind() == ErrorKind::ConnectionRefused,
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
