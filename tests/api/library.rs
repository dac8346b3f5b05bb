//! prioq's Redis Functions library: loaded where it is missing (a fresh
//! Redis, a new cluster primary, a failover to a replica that never got
//! it), and named by version so that two versions of prioq run side by
//! side.

use std::time::Duration;

use prioq::queue::store::keys::{Key, MARK, QueueKeys};
use prioq::queue::store::library::LIBRARY;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::cluster::{ClusterConfig, shared_cluster};
use crate::support::{RedisServer, redis, redis_connection, spawn_app_with, test_config, until};

/// The names of the libraries loaded in the Redis at `url`.
async fn libraries(url: &str) -> Vec<String> {
    let listed: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut redis_connection(url).await)
        .await
        .expect("FUNCTION LIST");
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|library| {
            match library {
            redis::Value::Array(fields) => fields
                .chunks(2)
                .find(|pair| {
                    matches!(&pair[0], redis::Value::BulkString(name) if name == b"library_name")
                })
                .and_then(|pair| match &pair[1] {
                    redis::Value::BulkString(name) => String::from_utf8(name.clone()).ok(),
                    _ => None,
                }),
            _ => None,
        }
        })
        .collect();
    names.sort();
    names
}

async fn flush_functions(url: &str) {
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut redis_connection(url).await)
        .await
        .expect("FUNCTION FLUSH");
}

#[tokio::test]
async fn functions_are_loaded_again_where_redis_lost_them() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    let job = app.enqueue("q", json!({"task": "t"})).await;
    assert_eq!(libraries(&server.url()).await, [LIBRARY.name()]);
    // As after a failover to a replica that never got the library.
    flush_functions(&server.url()).await;
    assert_eq!(
        app.job("q", job["id"].as_str().expect("id")).await.status,
        StatusCode::OK
    );
    assert_eq!(libraries(&server.url()).await, [LIBRARY.name()]);
    flush_functions(&server.url()).await;
    let claimed = app.claim_one("q").await.expect("the job");
    assert_eq!(claimed["id"], job["id"]);
    flush_functions(&server.url()).await;
    assert_eq!(app.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    flush_functions(&server.url()).await;
    let ready = app.get(app.url("/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK, "{ready:?}");
}

#[tokio::test]
async fn another_version_of_the_library_is_left_alone() {
    let server = RedisServer::start();
    let mut config = test_config();
    config.redis_url = server.url();
    let app = spawn_app_with(config).await;
    // An older prioq's library: the same function stems, another version,
    // answering something prioq would not understand.
    let mut other = String::from("#!lua name=prioq_000000000000\n");
    for stem in ["enqueue", "claim", "ack", "job", "stats", "ready"] {
        other.push_str(&format!(
            "redis.register_function('{stem}_000000000000', function() return 'other' end)\n"
        ));
    }
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&other)
        .query_async(&mut redis_connection(&server.url()).await)
        .await
        .expect("FUNCTION LOAD");
    let job = app.enqueue("q", json!({"task": "t"})).await;
    let claimed = app.claim_one("q").await.expect("the job");
    assert_eq!(claimed["id"], job["id"]);
    assert_eq!(app.ack("q", &claimed).await.status, StatusCode::NO_CONTENT);
    let mut expected = vec![LIBRARY.name(), "prioq_000000000000".to_owned()];
    expected.sort();
    assert_eq!(libraries(&server.url()).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_functions_are_loaded_again_on_every_primary() {
    let cluster = shared_cluster();
    let app = spawn_app_with(cluster.config()).await;
    // Queues on every shard (see cluster_queues_spread_over_every_shard).
    let queues: Vec<String> = (0..24).map(|n| format!("lib-{n}")).collect();
    for queue in &queues {
        app.enqueue(queue, json!({"task": "t"})).await;
    }
    for url in cluster.urls() {
        assert_eq!(libraries(&url).await, [LIBRARY.name()], "{url}");
        flush_functions(&url).await;
    }
    for queue in &queues {
        let job = app.claim_one(queue).await.expect("the queue's job");
        assert_eq!(app.ack(queue, &job).await.status, StatusCode::NO_CONTENT);
    }
    for url in cluster.urls() {
        assert_eq!(libraries(&url).await, [LIBRARY.name()], "{url}");
    }
}

/// Every call reads 20 to 40 fields of a queue's `meta`: Redis keeps a
/// small hash as a listpack and searches it field by field, so the
/// `layout` field, written when the queue is listed, keeps it a hash
/// table; `processing`, `leases` and `groups`, written by every claim and
/// ack, keep a mark for the same reason, which the counts of jobs in
/// flight and of groups, and the list of groups, leave out (see
/// lua/lib/keys.lua).
#[tokio::test]
async fn a_listed_queue_keeps_meta_processing_leases_and_groups_out_of_listpacks() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("small", json!({"task": "t", "group": "tenant-1"}))
        .await;
    app.claim_one("small").await.expect("the job");
    let keys = QueueKeys::new(&app.config.key_prefix, "small");
    let mut conn = redis_connection(&app.config.redis_url).await;
    let mut encodings = Vec::new();
    for key in [Key::Meta, Key::Processing, Key::Leases, Key::Groups] {
        let encoding: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(keys.key(key))
            .query_async(&mut conn)
            .await
            .expect("OBJECT ENCODING");
        encodings.push(encoding);
    }
    assert_eq!(
        encodings,
        ["hashtable", "skiplist", "hashtable", "skiplist"]
    );
    let stats = app.stats("small").await;
    assert_eq!(
        (&stats["processing"], &stats["groups"]),
        (&json!(1), &json!(1))
    );
    let groups = app.get(app.queue_url("small", "/groups")).await.body;
    assert_eq!(
        groups["groups"],
        json!([{"group": "tenant-1", "pending": 0, "processing": 1, "weight": 1}])
    );
}

/// A queue listed by an older version has neither the `layout` field nor
/// the marks: the sweeper gives them to it.
#[tokio::test]
async fn the_sweeper_gives_a_queue_listed_before_the_marks_it_lacks() {
    let app = spawn_app_with(test_config()).await;
    app.enqueue("older", json!({"task": "t"})).await;
    let keys = QueueKeys::new(&app.config.key_prefix, "older");
    let mut conn = redis_connection(&app.config.redis_url).await;
    let _: () = redis::pipe()
        .cmd("HDEL")
        .arg(keys.key(Key::Meta))
        .arg("layout")
        .cmd("ZREM")
        .arg(keys.key(Key::Processing))
        .arg(MARK)
        .cmd("HDEL")
        .arg(keys.key(Key::Leases))
        .arg(MARK)
        .cmd("ZREM")
        .arg(keys.key(Key::Groups))
        .arg(MARK)
        .query_async(&mut conn)
        .await
        .expect("marks taken away");
    until(Duration::from_secs(10), "the sweeper's marks", || {
        let mut conn = conn.clone();
        let keys = keys.clone();
        async move {
            let (layout, processing, leases, groups): (bool, Option<String>, bool, Option<String>) =
                redis::pipe()
                    .cmd("HEXISTS")
                    .arg(keys.key(Key::Meta))
                    .arg("layout")
                    .cmd("ZSCORE")
                    .arg(keys.key(Key::Processing))
                    .arg(MARK)
                    .cmd("HEXISTS")
                    .arg(keys.key(Key::Leases))
                    .arg(MARK)
                    .cmd("ZSCORE")
                    .arg(keys.key(Key::Groups))
                    .arg(MARK)
                    .query_async(&mut conn)
                    .await
                    .expect("marks read");
            layout
                && processing.as_deref() == Some("inf")
                && leases
                && groups.as_deref() == Some("0")
        }
    })
    .await;
    let job = app.claim_one("older").await.expect("the job");
    assert_eq!(app.ack("older", &job).await.status, StatusCode::NO_CONTENT);
    let stats = app.stats("older").await;
    assert_eq!(
        (&stats["processing"], &stats["groups"]),
        (&json!(0), &json!(0))
    );
}

/// Every call reads a queue's settings packed in one field of `meta`
/// (`paused` and `shards` in their own); an older version running beside
/// this one writes each setting in its own field only. `paused` so
/// written takes effect at once; the others once the sweeper packs them
/// anew; a queue without a pack (listed by an older version) is read
/// field by field.
#[tokio::test]
async fn settings_an_older_version_writes_take_effect() {
    let app = spawn_app_with(test_config()).await;
    for _ in 0..4 {
        app.enqueue("older", json!({"task": "t"})).await;
    }
    let meta = QueueKeys::new(&app.config.key_prefix, "older")
        .key(Key::Meta)
        .to_string();
    let mut conn = redis_connection(&app.config.redis_url).await;
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(&meta)
        .query_async(&mut conn)
        .await
        .expect("HKEYS");
    let field = fields
        .into_iter()
        .find(|field| field.starts_with("packed:"))
        .expect("a listed queue's pack");
    let packed_at = |setting: &str| {
        field["packed:".len()..]
            .split(',')
            .position(|name| name == setting)
            .expect("a packed setting")
    };

    write_alone(&mut conn, &meta, "paused", Some("1")).await;
    assert!(app.claim("older", json!({"max_jobs": 4})).await.is_empty());
    write_alone(&mut conn, &meta, "paused", None).await;

    write_alone(&mut conn, &meta, "max_in_flight", Some("1")).await;
    let at = packed_at("max_in_flight");
    until(Duration::from_secs(10), "the sweeper's pack", || {
        let mut conn = conn.clone();
        let (meta, field) = (meta.clone(), field.clone());
        async move {
            let packed: String = redis::cmd("HGET")
                .arg(&meta)
                .arg(&field)
                .query_async(&mut conn)
                .await
                .expect("the pack");
            packed.split(',').nth(at) == Some("1")
        }
    })
    .await;
    let claimed = app.claim("older", json!({"max_jobs": 4})).await;
    assert_eq!(claimed.len(), 1, "the cap of 1: {claimed:?}");

    // Without a pack, a cap of 2 written alone: one job more. (The cap
    // first: a sweep between the two writes packs it.)
    write_alone(&mut conn, &meta, "max_in_flight", Some("2")).await;
    write_alone(&mut conn, &meta, &field, None).await;
    let claimed = app.claim("older", json!({"max_jobs": 4})).await;
    assert_eq!(claimed.len(), 1, "the cap of 2, one in flight: {claimed:?}");
}

/// Writes `value` to `field` of the hash `meta` (None deletes it), as a
/// version of prioq that knows nothing of the pack does.
async fn write_alone(
    conn: &mut redis::aio::MultiplexedConnection,
    meta: &str,
    field: &str,
    value: Option<&str>,
) {
    let write = match value {
        Some(value) => redis::cmd("HSET").arg(meta).arg(field).arg(value).clone(),
        None => redis::cmd("HDEL").arg(meta).arg(field).clone(),
    };
    write
        .query_async::<()>(conn)
        .await
        .unwrap_or_else(|error| panic!("{field} written alone: {error}"));
}

/// A Lua chunk may have at most 200 locals at its top level, and the
/// library is one chunk: it keeps room for the bench's harness
/// (benches/lua/cycle.lua, appended to it) and for a few helpers more.
/// When this fails, put a subject's helpers in a table of their own before
/// adding more.
#[tokio::test]
async fn the_library_leaves_room_for_more_top_level_locals() {
    const ROOM: usize = 4;
    let server = RedisServer::start();
    let load = LIBRARY.load_command();
    let source = match load.args_iter().last() {
        Some(redis::Arg::Simple(source)) => String::from_utf8_lossy(source).into_owned(),
        other => panic!("the load command ends with the source, not {other:?}"),
    };
    let names: Vec<String> = (1..=ROOM).map(|i| format!("room_{i}")).collect();
    let harness = include_str!("../../benches/lua/cycle.lua");
    let roomier = format!("{source}\n{harness}\nlocal {} = nil\n", names.join(", "));
    let loaded: redis::RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(roomier)
        .query_async(&mut redis_connection(&server.url()).await)
        .await;
    assert_eq!(
        loaded.as_deref().ok(),
        Some(LIBRARY.name().as_str()),
        "the harness and {ROOM} more top-level locals: {loaded:?}"
    );
}
