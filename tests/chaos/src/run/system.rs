//! The system under test: a Redis primary and its replica, both with an
//! append-only file synced on every write, and prioq instances (the built
//! binary) each reaching the primary through its own [`Proxy`]. A failover
//! swaps the two servers' roles and turns the proxies to the new primary.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use prioq_testbed::{AOF_ALWAYS, RedisCluster, RedisServer, free_port};
use tokio::process::{Child, Command};

use super::proxy::Proxy;

/// One prioq instance: its process (`None` while killed) and its proxy
/// (none in front of a cluster, whose nodes name their own addresses in
/// their redirects).
#[derive(Debug)]
pub struct Instance {
    pub port: u16,
    pub proxy: Option<Proxy>,
    child: Option<Child>,
    stopped: bool,
    log: PathBuf,
}

/// One Redis server: where it listens and keeps its files, the flags it
/// starts again with, its process when this tool started it (a cluster's
/// first processes belong to the [`RedisCluster`]), and whether it is
/// killed.
#[derive(Debug)]
struct Node {
    port: u16,
    dir: PathBuf,
    flags: String,
    server: Option<RedisServer>,
    down: bool,
}

impl Node {
    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

#[derive(Debug)]
pub struct System {
    nodes: Vec<Node>,
    /// The cluster the nodes form, when run on one.
    cluster: Option<RedisCluster>,
    /// Without a cluster: which of the two `nodes` is the primary now.
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
    /// Starts Redis and its replica (or, with `cluster`, a three-primary
    /// Redis Cluster with a replica each, every node with an append-only
    /// file synced on every write) and `instances` prioq instances of the
    /// binary `prioq`, their files under `dir`.
    pub async fn start(
        prioq: &Path,
        dir: &Path,
        instances: usize,
        cluster: bool,
    ) -> anyhow::Result<Self> {
        let mut system = if cluster {
            let cluster = RedisCluster::start_with(1, AOF_ALWAYS);
            let nodes = cluster
                .ports
                .iter()
                .map(|&port| Node {
                    port,
                    dir: cluster.dir.clone(),
                    flags: cluster.node_flags(port),
                    server: None,
                    down: false,
                })
                .collect();
            Self {
                nodes,
                cluster: Some(cluster),
                primary: 0,
                dir: dir.to_owned(),
                prioq: prioq.to_owned(),
                instances: Vec::new(),
            }
        } else {
            Self::pair(prioq, dir)?
        };
        for i in 0..instances {
            let proxy = match system.cluster {
                Some(_) => None,
                None => Some(Proxy::start(system.nodes[0].port).await?),
            };
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

    /// A primary and its replica, both with an append-only file.
    fn pair(prioq: &Path, dir: &Path) -> anyhow::Result<Self> {
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
        let nodes = vec![
            Node {
                port: redis_port,
                dir: primary_dir,
                // Started again as the primary it was when killed.
                flags: AOF_ALWAYS.to_owned(),
                server: Some(redis),
                down: false,
            },
            Node {
                port: replica.port,
                dir: replica_dir,
                flags: AOF_ALWAYS.to_owned(),
                server: Some(replica),
                down: false,
            },
        ];
        Ok(Self {
            nodes,
            cluster: None,
            primary: 0,
            dir: dir.to_owned(),
            prioq: prioq.to_owned(),
            instances: Vec::new(),
        })
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// The URLs of the primaries now (a cluster's, by their `ROLE`; the
    /// servers' roles swap on a failover).
    pub async fn primaries(&self) -> Vec<String> {
        self.nodes_in_role("master").await
    }

    /// The URLs of the replicas now.
    pub async fn replicas(&self) -> Vec<String> {
        self.nodes_in_role("slave").await
    }

    async fn nodes_in_role(&self, wanted: &str) -> Vec<String> {
        if self.cluster.is_none() {
            let node = match wanted {
                "master" => self.primary,
                _ => 1 - self.primary,
            };
            return vec![self.nodes[node].url()];
        }
        let mut out = Vec::new();
        for node in self.nodes.iter().filter(|n| !n.down) {
            if role(&node.url()).await.as_deref() == Some(wanted) {
                out.push(node.url());
            }
        }
        out
    }

    /// The replica of the pair has become the primary (a failover
    /// completed): the proxies turn to it, dropping their connections to
    /// the old one.
    pub fn promoted(&mut self) {
        self.primary = 1 - self.primary;
        let port = self.nodes[self.primary].port;
        for proxy in self.instances.iter().filter_map(|i| i.proxy.as_ref()) {
            proxy.set_target(port);
        }
    }

    /// What instances are told to reach: their proxy, or the cluster's
    /// nodes as seeds.
    fn redis_url_of(&self, i: usize) -> String {
        match &self.instances[i].proxy {
            Some(proxy) => format!("redis://127.0.0.1:{}", proxy.port),
            None => self
                .nodes
                .iter()
                .map(Node::url)
                .collect::<Vec<_>>()
                .join(","),
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
        let redis_url = self.redis_url_of(i);
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
            .env("PRIOQ_REDIS_URL", redis_url)
            .env("PRIOQ_REDIS_CLUSTER", self.cluster.is_some().to_string())
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

    /// The Redis server at `url` killed (SIGKILL); started again by
    /// [`System::start_redis`].
    pub async fn kill_redis(&mut self, url: &str) {
        let Some(node) = self.nodes.iter_mut().find(|n| n.url() == url) else {
            return;
        };
        if node.server.take().is_none() {
            // One of the cluster's first processes: killed by its pid.
            if let Some(pid) = pid(url).await {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
        }
        node.down = true;
    }

    /// Every killed Redis server started again from its append-only file,
    /// on its port, in the role it had (a cluster's node from its nodes
    /// file).
    pub fn start_redis(&mut self) {
        for node in self.nodes.iter_mut().filter(|n| n.down) {
            node.server = Some(RedisServer::spawn(node.port, &node.dir, &node.flags));
            node.down = false;
        }
    }

    /// Each Redis server's address, role and, on a cluster, its state and
    /// its view of the nodes (slots, and slots being moved, as
    /// `[slot->-node]`): to see why a read failed at the end.
    pub async fn describe(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let url = node.url();
            let role = role(&url).await.unwrap_or_else(|| "no answer".into());
            out += &format!("{url} {role}\n");
            if self.cluster.is_none() {
                continue;
            }
            let Some(mut conn) = connection(&url).await else {
                continue;
            };
            for words in [["CLUSTER", "INFO"], ["CLUSTER", "NODES"]] {
                let text: String = redis::cmd(words[0])
                    .arg(words[1])
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_else(|e| e.to_string());
                for line in text.lines().filter(|l| {
                    words[1] == "NODES" || l.starts_with("cluster_state") || l.contains("epoch")
                }) {
                    out += &format!("    {line}\n");
                }
            }
        }
        out
    }

    /// Everything back to running: the primary up, every instance running and
    /// answering, no proxy delay.
    pub async fn heal(&mut self) -> anyhow::Result<()> {
        self.start_redis();
        for i in 0..self.instances.len() {
            if let Some(proxy) = &self.instances[i].proxy {
                proxy.set_delay(0);
            }
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

/// A connection to the Redis server at `url`, or `None` if it does not
/// answer within two seconds.
pub async fn connection(url: &str) -> Option<redis::aio::MultiplexedConnection> {
    crate::slots::connect(url).await.ok()
}

/// The role (`master`, `slave`) the server at `url` answers.
pub async fn role(url: &str) -> Option<String> {
    let mut conn = connection(url).await?;
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.ok()?;
    match role.first() {
        Some(redis::Value::BulkString(role)) => Some(String::from_utf8_lossy(role).into_owned()),
        _ => None,
    }
}

async fn pid(url: &str) -> Option<u32> {
    let mut conn = connection(url).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
}
