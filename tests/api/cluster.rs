//! The queue checks again, on a local three-master Redis Cluster: every
//! script lands on the shard owning its queue's slot, no CROSSSLOT error is
//! reachable, and wake-ups cross shards.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys};
use serde_json::json;

use crate::completion::{check_retention, check_wait_woken_across_instances};
use crate::fairness::{
    check_fair_share, check_group_cap, check_pause, check_rate_limit, check_weights,
};
use crate::guide::{check_fifty_workers, check_priority_order, check_sigkill_recovery};
use crate::leases::{check_cross_instance_wake_up, check_fencing};
use crate::schedules::{
    check_deleted_schedule, check_fires_once_per_fire_time, check_paused_schedule,
};
use crate::support::{redis, spawn_app_with, test_config};

/// Three cluster-enabled `redis-server`s joined into one cluster. Like the
/// single servers of the harness, they die with the test process.
#[derive(Debug)]
pub struct RedisCluster {
    pub ports: Vec<u16>,
    wrapper: Child,
}

impl RedisCluster {
    pub fn start() -> Self {
        Self::start_with(0, "--appendonly no")
    }

    /// Three primaries with `replicas` replicas each, every node run with
    /// the persistence `flags`.
    pub fn start_with(replicas: usize, flags: &str) -> Self {
        // A port found free can be taken by a parallel test before our node
        // binds it: then start over on other ports.
        (0..5)
            .find_map(|_| Self::try_start(replicas, flags))
            .expect("a cluster on free ports")
    }

    /// `None` when another server answers on one of the ports.
    fn try_start(replicas: usize, flags: &str) -> Option<Self> {
        let ports = cluster_ports(3 * (1 + replicas));
        // Told to our nodes only, so that we know whose node answers.
        let marker = |port: u16| format!("prioq-{}-{port}.rdb", std::process::id());
        let servers: String = ports
            .iter()
            .map(|&port| {
                format!(
                    "redis-server --port {port} --bind 127.0.0.1 --cluster-enabled yes \
                     --cluster-config-file nodes-{port}.conf --cluster-node-timeout 2000 \
                     --dir \"$dir\" --save '' --appendfilename aof-{port} \
                     --appenddirname aof-{port} --dbfilename {} {flags} >/dev/null 2>&1 & \
                     pids=\"$pids $!\"; ",
                    marker(port)
                )
            })
            .collect();
        let script =
            format!("dir=$(mktemp -d); pids=; {servers} echo started; read _; kill -9 $pids");
        let mut wrapper = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-server must be installed (see README)");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(wrapper.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("wrapper starts");
        let cluster = Self { ports, wrapper };
        for (url, &port) in cluster.urls().iter().zip(&cluster.ports) {
            if wait_for_ping(url) != marker(port) {
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
            .expect("redis-cli must be installed (see README)");
        assert!(created.success(), "redis-cli --cluster create failed");
        cluster.wait_until_ok();
        Some(cluster)
    }

    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// prioq settings for this cluster, seeded with two of its nodes.
    pub fn config(&self) -> Config {
        let mut config = test_config();
        config.redis_cluster = true;
        config.redis_url = self.urls()[..2].join(",");
        config
    }

    fn wait_until_ok(&self) {
        for url in self.urls() {
            let mut conn = redis::Client::open(url)
                .expect("URL")
                .get_connection()
                .expect("node");
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut conn)
                    .expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "cluster never became ok"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        drop(self.wrapper.stdin.take());
        let _ = self.wrapper.wait();
    }
}

/// Ports whose cluster-bus port (+10000) is free too.
fn cluster_ports(count: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
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

/// Waits for a server at `url`; returns its dbfilename.
fn wait_for_ping(url: &str) -> String {
    let client = redis::Client::open(url).expect("URL");
    for _ in 0..500 {
        if let Ok(mut conn) = client.get_connection()
            && let Ok((_, name)) = redis::cmd("CONFIG")
                .arg("GET")
                .arg("dbfilename")
                .query::<(String, String)>(&mut conn)
        {
            return name;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{url} did not come up");
}

/// The cluster most cluster tests share, each under its own key prefix.
pub(crate) fn shared_cluster() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(RedisCluster::start)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_retention_keeps_completed_jobs_for_their_window() {
    check_retention(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_wait_on_one_instance_is_answered_when_another_acks() {
    check_wait_woken_across_instances(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_three_instances_fire_each_fire_time_exactly_once() {
    check_fires_once_per_fire_time(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_paused_schedule_fires_nothing_and_resumes_from_now() {
    check_paused_schedule(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_deleted_schedule_stops_firing() {
    check_deleted_schedule(shared_cluster().config()).await;
}

#[tokio::test]
async fn cluster_claims_most_urgent_first_and_fifo_within() {
    check_priority_order(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_fifty_workers_process_ten_thousand_jobs_exactly_once() {
    check_fifty_workers(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_worker_killed_with_sigkill_loses_nothing() {
    check_sigkill_recovery(shared_cluster().config()).await;
}

#[tokio::test]
async fn cluster_stale_lease_ack_is_rejected() {
    check_fencing(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_long_poll_wakes_for_a_job_enqueued_on_another_instance() {
    // Its own cluster, so script counts tell when the poll has looked.
    let cluster = RedisCluster::start();
    check_cross_instance_wake_up(cluster.config(), &cluster.urls()).await;
}

#[tokio::test]
async fn cluster_dead_letter_queue_lists_requeues_and_deletes() {
    let app = spawn_app_with(shared_cluster().config()).await;
    for n in 0..3 {
        app.enqueue("dlq", json!({"task": "t", "id": format!("d{n}")}))
            .await;
        let job = app.claim_one("dlq").await.expect("claimed");
        let nack = app
            .post(
                app.queue_url("dlq", &format!("/jobs/d{n}/nack")),
                json!({"lease_token": job["lease_token"], "dead": true, "error": "boom"}),
            )
            .await;
        assert_eq!(nack.body["state"], "dead");
    }
    let page = app.get(app.queue_url("dlq", "/dlq?limit=2")).await.body;
    assert_eq!(page["total"], 3);
    let cursor = page["next_cursor"].as_str().expect("a second page");
    let rest = app
        .get(app.queue_url("dlq", &format!("/dlq?limit=2&cursor={cursor}")))
        .await
        .body;
    let ids: Vec<&str> = page["jobs"]
        .as_array()
        .into_iter()
        .chain(rest["jobs"].as_array())
        .flatten()
        .map(|job| job["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["d2", "d1", "d0"]);
    let requeued = app
        .post(app.queue_url("dlq", "/dlq/d1/requeue"), json!({}))
        .await;
    assert_eq!(requeued.body["state"], "pending");
    let deleted = app
        .send(app.http.delete(app.queue_url("dlq", "/dlq/d0")))
        .await;
    assert_eq!(deleted.status, reqwest::StatusCode::NO_CONTENT);
    assert_eq!(
        app.claim_one("dlq").await.expect("requeued job")["id"],
        "d1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_flooding_group_delays_another_by_about_one_job_each() {
    check_fair_share(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_weights_share_a_class_in_proportion() {
    check_weights(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_a_group_cap_holds_under_concurrent_claimers_on_two_instances() {
    check_group_cap(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_pause_on_one_instance_holds_claims_on_another() {
    check_pause(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_a_rate_limit_bounds_what_the_fleet_hands_out() {
    check_rate_limit(shared_cluster().config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queues_spread_over_every_shard() {
    let cluster = shared_cluster();
    let app = spawn_app_with(cluster.config()).await;
    let queues: Vec<String> = (0..24).map(|n| format!("spread-{n}")).collect();
    for queue in &queues {
        app.enqueue(queue, json!({"task": "t"})).await;
    }
    let pending_keys: HashSet<String> = queues
        .iter()
        .map(|queue| {
            QueueKeys::new(&app.config.key_prefix, queue)
                .key(Key::Pending)
                .to_owned()
        })
        .collect();
    let mut shards_used = HashSet::new();
    for url in cluster.urls() {
        let mut conn = redis::Client::open(url.clone())
            .expect("URL")
            .get_connection()
            .expect("node");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", app.config.key_prefix))
            .query(&mut conn)
            .expect("KEYS");
        if keys.iter().any(|key| pending_keys.contains(key)) {
            shards_used.insert(url);
        }
    }
    assert_eq!(
        shards_used.len(),
        3,
        "24 queues land on every one of 3 shards"
    );
    let listed = app.get(app.url("/v1/queues")).await.body;
    let names: HashSet<&str> = listed["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["queue"].as_str().expect("name"))
        .collect();
    assert!(queues.iter().all(|q| names.contains(q.as_str())));
    for queue in &queues {
        let job = app
            .claim_one(queue)
            .await
            .expect("each queue serves its job");
        assert_eq!(
            app.ack(queue, &job).await.status,
            reqwest::StatusCode::NO_CONTENT
        );
    }
}
