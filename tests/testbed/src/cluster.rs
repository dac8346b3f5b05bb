//! A local Redis Cluster of three primaries.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{Wrapper, dbfilename_when_up};

/// Three cluster-enabled `redis-server`s joined into one cluster, each
/// with the replicas asked for. Like a [`crate::RedisServer`], they die
/// with the process that started them.
#[derive(Debug)]
pub struct RedisCluster {
    pub ports: Vec<u16>,
    /// Where every node keeps its files (each under names of its own).
    pub dir: PathBuf,
    flags: String,
    _wrapper: Wrapper,
}

impl RedisCluster {
    /// Three primaries without replicas or persistence.
    pub fn start() -> Self {
        Self::start_with(0, "--appendonly no")
    }

    /// Three primaries with `replicas` replicas each, every node run with
    /// the persistence `flags`.
    pub fn start_with(replicas: usize, flags: &str) -> Self {
        // A port found free can be taken by a parallel test before a node
        // binds it: then start over on other ports.
        (0..5)
            .find_map(|_| Self::try_start(replicas, flags))
            .expect("a cluster on free ports")
    }

    /// `None` when another server answers on one of the ports.
    fn try_start(replicas: usize, flags: &str) -> Option<Self> {
        let ports = cluster_ports(3 * (1 + replicas));
        // Told to these nodes only, so that it is known whose node answers.
        let marker = |port: u16| format!("prioq-{}-{port}.rdb", std::process::id());
        let dir = crate::server::fresh_dir();
        let flags = flags.to_owned();
        let servers: String = ports
            .iter()
            .map(|&port| {
                format!(
                    "redis-server --port {port} --bind 127.0.0.1 --dir \"$0\" --save '' \
                     --dbfilename {} {} >/dev/null 2>&1 & pids=\"$pids $!\"; ",
                    marker(port),
                    node_flags(port, &flags)
                )
            })
            .collect();
        // A node the caller killed (and started again itself) is dead by
        // now: no complaint.
        let script = format!("pids=; {servers} echo started; read _; kill -9 $pids 2>/dev/null");
        let cluster = Self {
            ports,
            _wrapper: Wrapper::start(&script, &[&dir]),
            dir,
            flags,
        };
        for (url, &port) in cluster.urls().iter().zip(&cluster.ports) {
            if dbfilename_when_up(url) != marker(port) {
                return None;
            }
        }
        let nodes: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&nodes)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .status()
            .expect("redis-cli must be installed (see docs/development.md)");
        assert!(created.success(), "redis-cli --cluster create failed");
        cluster.wait_until_ok();
        Some(cluster)
    }

    /// The flags node `port` runs with besides its port and `dir`: killed,
    /// it starts again on its files and its place in the cluster with
    /// `RedisServer::spawn(port, &cluster.dir, &cluster.node_flags(port))`.
    pub fn node_flags(&self, port: u16) -> String {
        node_flags(port, &self.flags)
    }

    /// Every node's URL, primaries and replicas.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    fn wait_until_ok(&self) {
        for url in self.urls() {
            let mut conn = redis::Client::open(url)
                .expect("URL")
                .get_connection()
                .expect("node");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut conn)
                    .expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn node_flags(port: u16, flags: &str) -> String {
    format!(
        "--cluster-enabled yes --cluster-config-file nodes-{port}.conf \
         --cluster-node-timeout 2000 --appendfilename aof-{port} \
         --appenddirname aof-{port} {flags}"
    )
}

/// Ports whose cluster-bus port (+10000) is free too.
fn cluster_ports(count: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    let mut candidate = 20_000 + ((std::process::id() ^ nanos) % 4_990) as u16 * 2;
    while ports.len() < count {
        candidate = if candidate >= 29_990 {
            20_000
        } else {
            candidate + 7
        };
        let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(candidate) && free(candidate + 10_000) {
            ports.push(candidate);
        }
    }
    ports
}
