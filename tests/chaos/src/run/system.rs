//! The system under test: a Redis primary and its replica, both with an
//! append-only file synced on every write, and prioq instances (the built
//! binary) each reaching the primary through its own [`Proxy`]. A failover
//! swaps the two servers' roles and turns the proxies to the new primary.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use prioq_testbed::{AOF_ALWAYS, RedisServer, free_port};
use tokio::process::{Child, Command};

use super::proxy::Proxy;

/// One prioq instance: its process (`None` while killed) and its proxy.
#[derive(Debug)]
pub struct Instance {
    pub port: u16,
    pub proxy: Proxy,
    child: Option<Child>,
    stopped: bool,
    log: PathBuf,
}

/// One of the two Redis servers: where it listens and keeps its files,
/// and its process (`None` while killed).
#[derive(Debug)]
struct Node {
    port: u16,
    dir: PathBuf,
    server: Option<RedisServer>,
}

#[derive(Debug)]
pub struct System {
    nodes: [Node; 2],
    /// Which of `nodes` is the primary now.
    primary: usize,
    dir: PathBuf,
    prioq: PathBuf,
    pub instances: Vec<Instance>,
}

/// The key prefix of every instance: they share their queues.
const PREFIX: &str = "chaos";

/// libfaketime as Debian's package `libfaketime` installs it.
pub const FAKETIME_LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Checks that instance `i`'s wall clock, as the `Date` of its `answer`
/// tells (whole seconds), is `skew_s` seconds off this process's.
fn clock_moved(i: usize, answer: &reqwest::Response, skew_s: i64) -> anyhow::Result<()> {
    let date = answer
        .headers()
        .get(reqwest::header::DATE)
        .and_then(|d| d.to_str().ok())
        .context("an answer without a Date")?;
    let told = jiff::fmt::rfc2822::parse(date)
        .with_context(|| format!("Date {date:?}"))?
        .timestamp();
    let off = told.as_second() - jiff::Timestamp::now().as_second();
    anyhow::ensure!(
        (off - skew_s).abs() <= 2,
        "instance {i} was started {skew_s:+} s off but its clock is {off:+} s off (is libfaketime preloaded?)"
    );
    Ok(())
}

/// Whether instances can be started with a moved clock.
pub fn faketime_installed() -> bool {
    Path::new(FAKETIME_LIBRARY).exists()
}

impl System {
    /// Starts Redis, its replica and `instances` prioq instances of the
    /// binary `prioq`, their files under `dir`.
    pub async fn start(prioq: &Path, dir: &Path, instances: usize) -> anyhow::Result<Self> {
        let redis_port = free_port();
        let primary_dir = dir.join("redis-0");
        let replica_dir = dir.join("redis-1");
        std::fs::create_dir_all(&primary_dir)?;
        std::fs::create_dir_all(&replica_dir)?;
        let redis = RedisServer::spawn(redis_port, &primary_dir, AOF_ALWAYS);
        let replica = RedisServer::start_in(
            &replica_dir,
            &format!("{AOF_ALWAYS} --replicaof 127.0.0.1 {redis_port}"),
        );
        let mut system = Self {
            nodes: [
                Node {
                    port: redis_port,
                    dir: primary_dir,
                    server: Some(redis),
                },
                Node {
                    port: replica.port,
                    dir: replica_dir,
                    server: Some(replica),
                },
            ],
            primary: 0,
            dir: dir.to_owned(),
            prioq: prioq.to_owned(),
            instances: Vec::new(),
        };
        for i in 0..instances {
            let proxy = Proxy::start(redis_port).await?;
            system.instances.push(Instance {
                port: free_port(),
                proxy,
                child: None,
                stopped: false,
                log: dir.join(format!("instance-{i}.log")),
            });
            system.launch(i).await?;
        }
        Ok(system)
    }

    /// The primary's URL (the servers' roles swap on a failover).
    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[self.primary].port)
    }

    /// The replica's URL.
    pub fn replica_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[1 - self.primary].port)
    }

    /// The replica has become the primary (a failover completed): the
    /// proxies turn to it, dropping their connections to the old one.
    pub fn promoted(&mut self) {
        self.primary = 1 - self.primary;
        let port = self.nodes[self.primary].port;
        for instance in &self.instances {
            instance.proxy.set_target(port);
        }
    }

    pub fn base_urls(&self) -> Vec<String> {
        self.instances
            .iter()
            .map(|i| format!("http://127.0.0.1:{}", i.port))
            .collect()
    }

    /// Starts instance `i` and waits until it answers `/healthz`.
    pub async fn launch(&mut self, i: usize) -> anyhow::Result<()> {
        self.launch_with_clock(i, None).await
    }

    /// Starts instance `i` with its wall clock moved by `skew_s` seconds
    /// (libfaketime) when given, and sees the move in the `Date` of its
    /// answer; its monotonic clock, which tokio's timers read, is left
    /// alone.
    pub async fn launch_with_clock(&mut self, i: usize, skew_s: Option<i64>) -> anyhow::Result<()> {
        let instance = &mut self.instances[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&instance.log)?;
        let mut command = Command::new(&self.prioq);
        if let Some(skew_s) = skew_s {
            command
                .env("LD_PRELOAD", FAKETIME_LIBRARY)
                .env("FAKETIME", format!("{skew_s:+}s"))
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = command
            .env("PRIOQ_LISTEN", format!("127.0.0.1:{}", instance.port))
            .env(
                "PRIOQ_REDIS_URL",
                format!("redis://127.0.0.1:{}", instance.proxy.port),
            )
            .env("PRIOQ_KEY_PREFIX", PREFIX)
            // Every claim takes the most urgent job: the order rules hold
            // without the starvation guard's share.
            .env("PRIOQ_BULK_FLOOR", "0")
            .env("PRIOQ_SWEEP_INTERVAL_MS", "250")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.prioq.display()))?;
        instance.child = Some(child);
        instance.stopped = false;
        let url = format!("http://127.0.0.1:{}/healthz", instance.port);
        let http = reqwest::Client::new();
        for _ in 0..500 {
            if let Ok(answer) = http.get(&url).send().await
                && answer.status().is_success()
            {
                return match skew_s {
                    Some(skew_s) => clock_moved(i, &answer, skew_s),
                    None => Ok(()),
                };
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::bail!(
            "instance {i} never answered /healthz (see {})",
            self.dir.display()
        )
    }

    /// SIGKILL to instance `i`.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.instances[i].child.take() {
            let _ = child.kill().await;
        }
    }

    /// SIGSTOP (`stop`) or SIGCONT to instance `i`.
    pub fn signal(&mut self, i: usize, stop: bool) {
        let instance = &mut self.instances[i];
        let Some(pid) = instance.child.as_ref().and_then(Child::id) else {
            return;
        };
        let signal = if stop { "-STOP" } else { "-CONT" };
        let _ = std::process::Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status();
        instance.stopped = stop;
    }

    /// The primary killed (SIGKILL); started again by
    /// [`System::start_redis`].
    pub fn kill_redis(&mut self) {
        self.nodes[self.primary].server = None;
    }

    /// The primary started again from its append-only file, on its port,
    /// still the primary (the replica reconnects to it).
    pub fn start_redis(&mut self) {
        let node = &mut self.nodes[self.primary];
        if node.server.is_none() {
            node.server = Some(RedisServer::spawn(node.port, &node.dir, AOF_ALWAYS));
        }
    }

    /// Everything back to running: the primary up, every instance running and
    /// answering, no proxy delay.
    pub async fn heal(&mut self) -> anyhow::Result<()> {
        self.start_redis();
        for i in 0..self.instances.len() {
            self.instances[i].proxy.set_delay(0);
            if self.instances[i].stopped {
                self.signal(i, false);
            }
            if self.instances[i].child.is_none() {
                self.launch(i).await?;
            }
        }
        Ok(())
    }
}
