//! Sharded queues (the `shards` setting) on the local three-master Redis
//! Cluster, with 3 and 8 shards: jobs spread evenly over the shards, and
//! over the primaries; priority order and FIFO across shards; fifty
//! workers on two instances; SIGKILLed workers' jobs taken back on every
//! shard; a primary's failover under load; the features of an unsharded
//! queue (the checks the other modules run) on a sharded one; and the
//! number of shards changed only while the queue is empty.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prioq::config::Config;
use prioq::queue::store::keys::{Key, QueueKeys, shard_of};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::cluster::{RedisCluster, shared_cluster};
use crate::completion::{check_retention, check_wait_woken_across_instances};
use crate::fairness::{check_group_cap, check_pause, check_rate_limit, configure, enqueue_many};
use crate::faults::{Load, inventory_of_shards, two_instances};
use crate::guide::{check_fifty_workers, check_priority_order, claim_in_process_and_kill_answer};
use crate::leases::{check_cross_instance_wake_up, check_fencing};
use crate::schedules::{check_deleted_schedule, check_fires_once_per_fire_time};
use crate::support::{Answer, TestApp, redis, spawn_app, spawn_app_with, until};

/// Splits `queues` over `shards` shards in the Redis of `config`, before a
/// check runs there.
async fn preshard(config: &Config, queues: &[&str], shards: u32) {
    let app = spawn_app_with(config.clone()).await;
    for queue in queues {
        let settings = configure(&app, queue, json!({"shards": shards})).await;
        assert_eq!(settings["shards"], json!(shards), "{settings}");
    }
    app.stop().await;
}

/// A fresh prefix on the shared cluster, with `queues` split over `shards`.
async fn sharded_cluster(queues: &[&str], shards: u32) -> Config {
    let config = shared_cluster().config();
    preshard(&config, queues, shards).await;
    config
}

async fn cluster_connection(urls: &[String]) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(urls.to_vec())
        .expect("cluster URLs")
        .get_async_connection()
        .await
        .expect("the cluster answers")
}

/// The port of the primary serving each slot, from `CLUSTER SLOTS`.
async fn primary_of_slot(url: &str) -> BTreeMap<u16, u16> {
    let mut conn = crate::support::redis_connection(url).await;
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async::<redis::Value>(&mut conn)
        .await
        .map(|value| redis_json(&value))
        .expect("CLUSTER SLOTS")
        .as_array()
        .cloned()
        .expect("ranges");
    let mut owner = BTreeMap::new();
    for range in ranges {
        let (from, to) = (
            range[0].as_u64().expect("from"),
            range[1].as_u64().expect("to"),
        );
        let port = range[2][1].as_u64().expect("port") as u16;
        for slot in from..=to {
            owner.insert(slot as u16, port);
        }
    }
    owner
}

/// A Redis reply as JSON, to pick through.
fn redis_json(value: &redis::Value) -> Value {
    match value {
        redis::Value::Array(items) => Value::Array(items.iter().map(redis_json).collect()),
        redis::Value::Int(n) => json!(n),
        redis::Value::BulkString(bytes) => json!(String::from_utf8_lossy(bytes)),
        redis::Value::SimpleString(text) => json!(text),
        _ => Value::Null,
    }
}

/// How many jobs each shard's `key` holds.
async fn per_shard(config: &Config, queue: &str, shards: u32, key: Key) -> Vec<u64> {
    let urls: Vec<String> = config.redis_url.split(',').map(str::to_owned).collect();
    let mut conn = cluster_connection(&urls).await;
    let mut counts = Vec::new();
    for shard in 0..shards {
        let keys = QueueKeys::shard(&config.key_prefix, queue, shard, shards);
        let count: u64 = redis::cmd("ZCARD")
            .arg(keys.key(key))
            .query_async(&mut conn)
            .await
            .expect("ZCARD");
        counts.push(count);
    }
    counts
}

fn assert_even(counts: &[u64], total: u64, what: &str) {
    let share = total as f64 / counts.len() as f64;
    assert_eq!(counts.iter().sum::<u64>(), total, "{what}: {counts:?}");
    assert!(
        counts
            .iter()
            .all(|n| (*n as f64 - share).abs() <= share * 0.1),
        "{what}: each shard within ±10% of {share}: {counts:?}"
    );
}

// ---------------------------------------------------------------------------
// Spread.
// ---------------------------------------------------------------------------

async fn check_spread(shards: u32) {
    let config = sharded_cluster(&["made", "named"], shards).await;
    let app = spawn_app_with(config.clone()).await;
    for batch in 0..100 {
        let jobs: Vec<Value> = (0..100).map(|_| json!({"task": "t"})).collect();
        let made = app
            .post(app.queue_url("made", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(made.status, StatusCode::OK, "{made:?}");
        let jobs: Vec<Value> = (0..100)
            .map(|n| json!({"task": "t", "id": format!("order-{}", batch * 100 + n)}))
            .collect();
        let named = app
            .post(app.queue_url("named", "/jobs/batch"), json!({"jobs": jobs}))
            .await;
        assert_eq!(named.status, StatusCode::OK, "{named:?}");
    }
    let made = per_shard(&config, "made", shards, Key::Pending).await;
    assert_even(&made, 10_000, "ids made by prioq");
    let named = per_shard(&config, "named", shards, Key::Pending).await;
    assert_even(&named, 10_000, "the client's ids");
    let stats = app.stats("made").await;
    assert_eq!(
        (stats["pending"].clone(), stats["shards"].clone()),
        (json!(10_000), json!(shards))
    );

    // The shards land on every primary, in as even a share as K allows.
    let owner = primary_of_slot(&shared_cluster().urls()[0]).await;
    let mut conn = cluster_connection(&shared_cluster().urls()).await;
    let mut on_primary: BTreeMap<u16, u32> = BTreeMap::new();
    for shard in 0..shards {
        let keys = QueueKeys::shard(&config.key_prefix, "made", shard, shards);
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(keys.key(Key::Pending))
            .query_async(&mut conn)
            .await
            .expect("KEYSLOT");
        *on_primary.entry(owner[&slot]).or_default() += 1;
    }
    let most = on_primary.values().max().copied().unwrap_or_default();
    let least = on_primary.values().min().copied().unwrap_or_default();
    assert_eq!(on_primary.len(), 3.min(shards as usize), "{on_primary:?}");
    assert!(
        most - least <= shards.div_ceil(3) - shards / 3,
        "{on_primary:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_spread_jobs_evenly_over_the_shards_and_the_primaries() {
    check_spread(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_shards_spread_jobs_evenly_over_the_shards_and_the_primaries() {
    check_spread(8).await;
}

// ---------------------------------------------------------------------------
// Order.
// ---------------------------------------------------------------------------

/// Jobs enqueued one after the other come out most urgent first and, in a
/// priority, in the order they went in, whichever shards they are in.
async fn check_order(shards: u32) {
    let mut config = sharded_cluster(&["q", "order"], shards).await;
    config.bulk_floor = 0.0;
    check_priority_order(config.clone()).await;
    let app = spawn_app_with(config).await;
    let mut expected: Vec<(u64, usize, String)> = Vec::new();
    for n in 0..240 {
        let priority = [5, 1, 9, 1, 0, 5][n % 6];
        let job = app
            .enqueue("order", json!({"task": "t", "priority": priority}))
            .await;
        expected.push((priority, n, job["id"].as_str().expect("id").to_owned()));
    }
    expected.sort();
    let spread: BTreeSet<u32> = expected
        .iter()
        .map(|(_, _, id)| shard_of(id, shards))
        .collect();
    assert_eq!(spread.len(), shards as usize, "jobs in every shard");
    let mut claimed = Vec::new();
    loop {
        let jobs = app.claim("order", json!({"max_jobs": 7})).await;
        if jobs.is_empty() {
            break;
        }
        claimed.extend(
            jobs.iter()
                .map(|job| job["id"].as_str().expect("id").to_owned()),
        );
    }
    let expected: Vec<String> = expected.into_iter().map(|(_, _, id)| id).collect();
    assert_eq!(claimed, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_hand_out_the_most_urgent_first_and_fifo_within() {
    check_order(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_shards_hand_out_the_most_urgent_first_and_fifo_within() {
    check_order(8).await;
}

/// Producers and consumers at once, on two instances: no job comes out
/// ahead of one that was enqueued before it was by more than the claims
/// in flight when the older job arrived can take (`CLAIMERS` × `MAX_JOBS`),
/// as the README states.
async fn check_fifo_bound(shards: u32) -> usize {
    const PRODUCERS: usize = 4;
    const CLAIMERS: usize = 6;
    const MAX_JOBS: usize = 2;
    const PER_PRODUCER: usize = 300;
    let config = sharded_cluster(&["fifo"], shards).await;
    let apps = [
        Arc::new(spawn_app_with(config.clone()).await),
        Arc::new(spawn_app_with(config).await),
    ];
    // One clock of events: enqueue and claim starts and ends.
    let clock = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (app, clock) = (Arc::clone(&apps[p % 2]), Arc::clone(&clock));
            tokio::spawn(async move {
                let mut spans = Vec::new();
                for n in 0..PER_PRODUCER {
                    let id = format!("p{p}-{n}");
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let job = app.enqueue("fifo", json!({"task": "t", "id": id})).await;
                    assert_eq!(job["id"], json!(id));
                    spans.push((id, start, clock.fetch_add(1, Ordering::SeqCst)));
                }
                spans
            })
        })
        .collect();
    let total = PRODUCERS * PER_PRODUCER;
    let taken = Arc::new(AtomicU64::new(0));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|c| {
            let (app, clock, taken) = (
                Arc::clone(&apps[c % 2]),
                Arc::clone(&clock),
                Arc::clone(&taken),
            );
            tokio::spawn(async move {
                let mut spans = Vec::new();
                while taken.load(Ordering::SeqCst) < total as u64 {
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let jobs = app
                        .claim("fifo", json!({"max_jobs": MAX_JOBS, "wait_ms": 200}))
                        .await;
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    taken.fetch_add(jobs.len() as u64, Ordering::SeqCst);
                    for job in jobs {
                        assert_eq!(app.ack("fifo", &job).await.status, StatusCode::NO_CONTENT);
                        spans.push((job["id"].as_str().expect("id").to_owned(), start, end));
                    }
                }
                spans
            })
        })
        .collect();
    let mut enqueued = HashMap::new();
    for producer in producers {
        for (id, start, end) in producer.await.expect("producer") {
            enqueued.insert(id, (start, end));
        }
    }
    let mut claimed = HashMap::new();
    for claimer in claimers {
        for (id, start, end) in claimer.await.expect("claimer") {
            assert!(claimed.insert(id, (start, end)).is_none(), "claimed twice");
        }
    }
    assert_eq!(claimed.len(), total);
    // For each job: the jobs enqueued wholly after it that were claimed
    // wholly before it.
    let mut worst = 0;
    for (id, (_, enqueued_end)) in &enqueued {
        let (claim_start, _) = claimed[id];
        let overtaken = enqueued
            .iter()
            .filter(|(other, (start, _))| *start > *enqueued_end && claimed[*other].1 < claim_start)
            .count();
        worst = worst.max(overtaken);
    }
    assert!(
        worst <= CLAIMERS * MAX_JOBS,
        "a job was overtaken by {worst} jobs enqueued after it"
    );
    worst
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_keep_fifo_within_the_claims_in_flight() {
    let worst = check_fifo_bound(3).await;
    eprintln!("3 shards: a job was overtaken by {worst} newer jobs at most");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_shards_keep_fifo_within_the_claims_in_flight() {
    let worst = check_fifo_bound(8).await;
    eprintln!("8 shards: a job was overtaken by {worst} newer jobs at most");
}

// ---------------------------------------------------------------------------
// Workers.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_fifty_workers_on_two_instances_process_every_job_once() {
    check_fifty_workers(sharded_cluster(&["load"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_shards_fifty_workers_on_two_instances_process_every_job_once() {
    check_fifty_workers(sharded_cluster(&["load"], 8).await).await;
}

/// Two jobs in each shard, each claimed by a worker process killed with
/// SIGKILL: every one is back in pending, one attempt spent, after its
/// lease.
async fn check_sigkill_on_every_shard(shards: u32) {
    let config = sharded_cluster(&["crash"], shards).await;
    let app = spawn_app_with(config.clone()).await;
    let mut ids = Vec::new();
    for shard in 0..shards {
        let mut n = 0;
        while ids
            .iter()
            .filter(|id: &&String| shard_of(id, shards) == shard)
            .count()
            < 2
        {
            let id = format!("crash-{shard}-{n}");
            if shard_of(&id, shards) == shard {
                app.enqueue("crash", json!({"task": "t", "id": id})).await;
                ids.push(id);
            }
            n += 1;
        }
    }
    let url = app.queue_url("crash", "/claim");
    let mut held = BTreeSet::new();
    for _ in &ids {
        // Long enough a lease for every worker to claim before the first
        // one's ends.
        let claimed = claim_in_process_and_kill_answer(&url, 4000).await;
        let job = claimed.job.expect("a job for each doomed worker");
        held.insert(job["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(held, ids.iter().cloned().collect::<BTreeSet<_>>());
    for id in &ids {
        let back = app
            .wait_for_job("crash", id, Duration::from_secs(10), |j| {
                j["state"] == "pending"
            })
            .await;
        assert_eq!(back["attempts"], json!(1), "{back}");
        assert_eq!(back["last_error"], json!("lease expired"));
    }
    assert_eq!(
        per_shard(&config, "crash", shards, Key::Pending).await,
        vec![2; shards as usize]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_take_back_sigkilled_workers_jobs_on_every_shard() {
    check_sigkill_on_every_shard(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_shards_take_back_sigkilled_workers_jobs_on_every_shard() {
    check_sigkill_on_every_shard(8).await;
}

// ---------------------------------------------------------------------------
// The other features, on a sharded queue.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn sharded_stale_lease_ack_is_rejected() {
    check_fencing(sharded_cluster(&["fence"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_long_poll_wakes_for_a_job_enqueued_on_another_instance() {
    let cluster = RedisCluster::start();
    let config = cluster.config();
    preshard(&config, &["wake"], 3).await;
    check_cross_instance_wake_up(config, &cluster.urls()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_retention_keeps_completed_jobs_for_their_window() {
    check_retention(sharded_cluster(&["kept"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_wait_on_one_instance_is_answered_when_another_acks() {
    check_wait_woken_across_instances(sharded_cluster(&["waited"], 8).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_three_instances_fire_each_fire_time_exactly_once() {
    check_fires_once_per_fire_time(sharded_cluster(&["ticks"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_deleted_schedule_stops_firing() {
    check_deleted_schedule(sharded_cluster(&["ticks"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_pause_on_one_instance_holds_claims_on_another() {
    check_pause(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_group_cap_holds_fleet_wide_when_it_divides_evenly() {
    // A cap of 3 over 3 shards: 1 in each, 3 fleet-wide, as unsharded.
    check_group_cap(sharded_cluster(&["q"], 3).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_rate_limit_bounds_what_the_fleet_hands_out() {
    // A burst of 10 over 2 shards: 5 in each, the bound as unsharded.
    check_rate_limit(sharded_cluster(&["q"], 2).await).await;
}

/// A fire recorded as owed whose job was never made (its instance died
/// between the two calls) is paid by a sweeper, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_left_owed_is_paid_by_a_sweeper_once() {
    let config = sharded_cluster(&["owed"], 3).await;
    let mut conn = cluster_connection(&shared_cluster().urls()).await;
    let home = QueueKeys::new(&config.key_prefix, "owed");
    let spec = json!({"cron": "0 0 1 1 *", "timezone": "UTC", "task": "report",
                      "args": {"n": 1}, "priority": 3, "max_attempts": 2, "group": null,
                      "retain_ms": 0, "paused": false});
    let owed = home.key(Key::ScheduleOwed);
    owe(&mut conn, owed, &spec).await;
    let app = spawn_app_with(config.clone()).await;
    let job = app
        .wait_for_job("owed", "nightly:1000", Duration::from_secs(5), |j| {
            j["state"] == "pending"
        })
        .await;
    assert_eq!(
        (
            job["task"].clone(),
            job["args"].clone(),
            job["priority"].clone(),
            job["schedule"].clone()
        ),
        (json!("report"), json!({"n": 1}), json!(3), json!("nightly"))
    );
    until_paid(&conn, owed, "the debt is cleared").await;
    // Paid again (a second sweeper saw the debt too): nothing new.
    let claimed = app.claim("owed", json!({})).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        app.ack("owed", &claimed[0]).await.status,
        StatusCode::NO_CONTENT
    );
    owe(&mut conn, owed, &spec).await;
    until_paid(&conn, owed, "the repeated debt is cleared").await;
    assert_eq!(
        app.job("owed", "nightly:1000").await.status,
        StatusCode::NOT_FOUND
    );
}

/// Records the fire `nightly:1000` of a schedule of definition `spec` as
/// owed in hash `owed`, since long ago.
async fn owe(conn: &mut redis::cluster_async::ClusterConnection, owed: &str, spec: &Value) {
    redis::cmd("HSET")
        .arg(owed)
        .arg("nightly:1000")
        .arg(format!("1000:{spec}"))
        .query_async::<()>(conn)
        .await
        .expect("HSET");
}

/// Waits until no fire is owed in hash `owed`.
async fn until_paid(conn: &redis::cluster_async::ClusterConnection, owed: &str, what: &str) {
    until(Duration::from_secs(5), what, || {
        let mut conn = conn.clone();
        let owed = owed.to_owned();
        async move {
            let left: u64 = redis::cmd("HLEN")
                .arg(owed)
                .query_async(&mut conn)
                .await
                .expect("HLEN");
            left == 0
        }
    })
    .await;
}

/// Every endpoint that names one job, the DLQ's pages, the groups' page
/// and the stats, on a queue of 3 shards in one Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_in_one_redis_answers_as_one_queue() {
    let app = spawn_app().await;
    configure(&app, "q", json!({"shards": 3})).await;
    enqueue_many(&app, "q", Some("g"), 4, "j-", 30).await;
    let stats = app.stats("q").await;
    assert_eq!(
        (
            stats["pending"].clone(),
            stats["groups"].clone(),
            stats["shards"].clone()
        ),
        (json!(30), json!(1), json!(3))
    );
    // Thirty jobs bury themselves (max_attempts 1).
    for _ in 0..30 {
        let job = app.claim("q", json!({})).await.pop().expect("a job");
        let nack = app
            .post(
                app.queue_url(
                    "q",
                    &format!("/jobs/{}/nack", job["id"].as_str().expect("id")),
                ),
                json!({"lease_token": job["lease_token"], "dead": true}),
            )
            .await;
        assert_eq!(nack.status, StatusCode::OK, "{nack:?}");
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .get(app.queue_url("q", &format!("/dlq?limit=7{cursor}")))
            .await;
        assert_eq!(page.body["total"], json!(30));
        let jobs = page.body["jobs"].as_array().expect("jobs").clone();
        seen.extend(jobs.iter().map(|job| {
            (
                job["dead_at"].as_str().expect("dead_at").to_owned(),
                job["id"].as_str().expect("id").to_owned(),
            )
        }));
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    let mut newest_first = seen.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen.len(), 30);
    assert_eq!(seen, newest_first, "one order across shards, no repeats");
    let requeued = app
        .post(app.queue_url("q", "/dlq/j-7/requeue"), json!({}))
        .await;
    assert_eq!(requeued.status, StatusCode::OK, "{requeued:?}");
    let deleted = app
        .send(app.http.delete(app.queue_url("q", "/dlq/j-8")))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    assert_eq!(app.job("q", "j-8").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.job("q", "j-7").await.body["state"], json!("pending"));
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["pending"].clone(), stats["dead"].clone()),
        (json!(1), json!(28))
    );
}

// ---------------------------------------------------------------------------
// Changing the number of shards.
// ---------------------------------------------------------------------------

/// A job in any state holds the number of shards where it is; once the
/// queue is empty it changes, and every job then lands where the new
/// number says.
async fn check_reshard_refused_while_jobs_exist(config: Config) {
    let app = spawn_app_with(config).await;
    configure(&app, "q", json!({"shards": 3, "retain_ms": 60_000})).await;
    let states: [(&str, Value); 4] = [
        ("pending", json!({"task": "t", "id": "a"})),
        (
            "scheduled",
            json!({"task": "t", "id": "b", "delay_ms": 600_000}),
        ),
        ("processing", json!({"task": "t", "id": "c"})),
        ("completed", json!({"task": "t", "id": "d"})),
    ];
    for (state, body) in states {
        app.enqueue("q", body.clone()).await;
        let id = body["id"].as_str().expect("id");
        match state {
            "processing" => assert_eq!(app.claim("q", json!({})).await.len(), 1),
            "completed" => {
                let job = app.claim("q", json!({})).await.pop().expect("job");
                assert_eq!(app.ack("q", &job).await.status, StatusCode::NO_CONTENT);
            }
            _ => {}
        }
        assert_eq!(app.job("q", id).await.body["state"], json!(state));
        let before = snapshot(&app).await;
        let answer = reshard_and_pause(&app, 8).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{state}: {answer:?}");
        assert_eq!(answer.problem_code(), "conflict");
        assert_eq!(snapshot(&app).await, before, "{state}: nothing changed");
        let settings = app.get(app.queue_url("q", "/settings")).await.body;
        assert_eq!(
            (settings["shards"].clone(), settings["paused"].clone()),
            (json!(3), json!(false))
        );
        // The queue still takes jobs.
        let more = app.enqueue("q", json!({"task": "t"})).await;
        let more = more["id"].as_str().expect("id");
        let delete = app
            .send(
                app.http
                    .delete(app.queue_url("q", &format!("/jobs/{more}"))),
            )
            .await;
        assert_eq!(delete.status, StatusCode::NO_CONTENT);
        // Empty the queue for the next state.
        match state {
            "processing" | "completed" => {}
            _ => {
                let delete = app
                    .send(app.http.delete(app.queue_url("q", &format!("/jobs/{id}"))))
                    .await;
                assert_eq!(delete.status, StatusCode::NO_CONTENT);
            }
        }
    }
    // Still held: c (processing) and d (completed, kept 60 s).
    let stats = app.stats("q").await;
    assert_eq!(
        (stats["processing"].clone(), stats["completed"].clone()),
        (json!(1), json!(1))
    );
    let answer = reshard_and_pause(&app, 1).await;
    assert_eq!(answer.status, StatusCode::CONFLICT);
    // An empty queue changes: its jobs land where the new number says.
    configure(&app, "r", json!({"shards": 8, "max_in_flight": 16})).await;
    for n in 0..40 {
        app.enqueue("r", json!({"task": "t", "id": format!("r-{n}")}))
            .await;
    }
    for n in 0..40 {
        let id = format!("r-{n}");
        assert_eq!(
            app.job("r", &id).await.body["state"],
            json!("pending"),
            "{id}"
        );
    }
    let stats = app.stats("r").await;
    assert_eq!(
        (stats["pending"].clone(), stats["shards"].clone()),
        (json!(40), json!(8))
    );
    let settings = app.get(app.queue_url("r", "/settings")).await.body;
    assert_eq!(
        (
            settings["max_in_flight"].clone(),
            settings["shards"].clone()
        ),
        (json!(16), json!(8))
    );
}

/// Asks queue `q` for `shards` shards and a pause, in one patch.
async fn reshard_and_pause(app: &TestApp, shards: u32) -> Answer {
    let request = app
        .http
        .patch(app.queue_url("q", "/settings"))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"shards": shards, "paused": true}).to_string());
    app.send(request).await
}

/// Every key of the app's prefix and its contents, on one Redis; nothing
/// on a cluster (whose nodes' keys a `KEYS` on one node cannot list).
async fn snapshot(app: &TestApp) -> BTreeMap<String, String> {
    if app.config.redis_cluster {
        return BTreeMap::new();
    }
    app.snapshot().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_shards_is_refused_while_jobs_exist() {
    check_reshard_refused_while_jobs_exist(crate::support::test_config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_changing_the_shards_is_refused_while_jobs_exist() {
    check_reshard_refused_while_jobs_exist(shared_cluster().config()).await;
}

/// An instance that routed a queue for 1 shard learns of a change made
/// through another instance at its next call: the job it enqueues lands
/// where the new number says, and the other instance finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_routing_for_an_old_number_of_shards_routes_anew() {
    let config = shared_cluster().config();
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    let job = a.enqueue("q", json!({"task": "t", "id": "first"})).await;
    let claimed = a.claim("q", json!({})).await.pop().expect("job");
    assert_eq!(a.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    assert_eq!(job["id"], json!("first"));
    configure(&b, "q", json!({"shards": 8})).await;
    for n in 0..20 {
        a.enqueue("q", json!({"task": "t", "id": format!("later-{n}")}))
            .await;
    }
    for n in 0..20 {
        let found = b.job("q", &format!("later-{n}")).await;
        assert_eq!(found.status, StatusCode::OK, "{found:?}");
    }
    assert_eq!(b.stats("q").await["pending"], json!(20));
    assert_eq!(a.stats("q").await["shards"], json!(8));
}

/// The queue view of an instance that routed for the old number of shards
/// shows the number its settings show, and counts every shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_view_and_the_settings_of_another_instance_agree_on_the_shards() {
    let config = crate::support::test_config();
    let a = spawn_app_with(config.clone()).await;
    let b = spawn_app_with(config).await;
    assert_eq!(a.stats("q").await["shards"], json!(1));
    configure(&b, "q", json!({"shards": 4})).await;
    for n in 0..40 {
        b.enqueue("q", json!({"task": "t", "id": format!("j-{n}")}))
            .await;
    }
    let settings = a.get(a.queue_url("q", "/settings")).await.body;
    let view = a.stats("q").await;
    assert_eq!(settings["shards"], json!(4));
    assert_eq!(view["shards"], settings["shards"], "{view}");
    assert_eq!(view["pending"], json!(40), "{view}");
}

// ---------------------------------------------------------------------------
// Failover.
// ---------------------------------------------------------------------------

/// Two instances under load (two producers, three consumers) on a queue of
/// 3 shards, on a cluster of three primaries with a replica each, every
/// node with AOF `appendfsync always`. A replica takes over from its
/// primary (`CLUSTER FAILOVER`, which waits for the replica to catch up)
/// mid-load; then the load goes on and the queue drains. Every job
/// acknowledged to a producer is processed; none is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_primary_failover_under_load_loses_nothing_acknowledged() {
    let cluster = RedisCluster::start_with(1, "--appendonly yes --appendfsync always");
    let mut config = cluster.config();
    config.redis_timeout_ms = 1000;
    preshard(&config, &["failover"], 3).await;
    let (_a, _b, ledger, client) = two_instances(&config, "failover").await;
    let load = Load::start(&client, 2, 3, 2000);
    let created = |n: u64| {
        let ledger = Arc::clone(&ledger);
        move || {
            let done = ledger.created() >= n;
            async move { done }
        }
    };
    until(
        Duration::from_secs(15),
        "200 jobs before the failover",
        created(200),
    )
    .await;

    // The replica of the primary that serves shard 1 takes over.
    let shard = QueueKeys::shard(&config.key_prefix, "failover", 1, 3);
    let replica = replica_serving(&cluster, shard.key(Key::Pending)).await;
    let mut conn = crate::support::redis_connection(&format!("redis://127.0.0.1:{replica}")).await;
    let () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query_async(&mut conn)
        .await
        .expect("CLUSTER FAILOVER");
    until(Duration::from_secs(20), "the replica is a primary", || {
        let mut conn = conn.clone();
        async move {
            let role: Vec<redis::Value> = redis::cmd("ROLE")
                .query_async(&mut conn)
                .await
                .expect("ROLE");
            redis_json(&role[0]) == json!("master")
        }
    })
    .await;
    let after = ledger.created() + 200;
    until(
        Duration::from_secs(20),
        "200 more jobs after the failover",
        created(after),
    )
    .await;
    load.drain(&client, Duration::from_secs(30)).await;
    let mut conn = cluster_connection(&cluster.urls()).await;
    let stored = inventory_of_shards(&mut conn, &config.key_prefix, "failover", 3).await;
    let report = ledger.audit(&stored);
    report.assert_clean("a primary failed over under load (appendfsync always)");
    assert_eq!(stored.jobs.len(), 0, "every job acked: {:?}", stored.jobs);
}

/// The port of a replica of the primary that serves `key`.
async fn replica_serving(cluster: &RedisCluster, key: &str) -> u16 {
    let mut conn = cluster_connection(&cluster.urls()).await;
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("KEYSLOT");
    let mut node = crate::support::redis_connection(&cluster.urls()[0]).await;
    // Replicas show in `CLUSTER SLOTS` once the nodes have heard of them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ranges = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async::<redis::Value>(&mut node)
            .await
            .map(|value| redis_json(&value))
            .expect("CLUSTER SLOTS");
        let replica = ranges.as_array().expect("ranges").iter().find_map(|range| {
            let (from, to) = (range[0].as_u64()?, range[1].as_u64()?);
            (from..=to)
                .contains(&u64::from(slot))
                .then(|| range[3][1].as_u64())?
        });
        if let Some(port) = replica {
            return port as u16;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no replica serves slot {slot}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
