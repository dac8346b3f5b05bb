//! The `redis-server` processes (the testbed crate starts them, for the
//! benches too), the one most tests share, and what tests read of a
//! server: a prefix's keys, its command counts, its blocked clients; and
//! `CLIENT PAUSE`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

pub(crate) use prioq_testbed::{AOF_ALWAYS, RedisServer, free_port};

use super::clock::until;

/// The server most tests share; each test keeps to its own key prefix.
pub(crate) fn shared_redis() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

pub(crate) async fn redis_connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers")
}

/// `CLIENT PAUSE ms mode` sent by `conn`: the server holds back its
/// clients' commands (`WRITE`: those that write; `ALL`: every one) for
/// `ms`.
pub(crate) async fn pause_clients(
    conn: &mut redis::aio::MultiplexedConnection,
    ms: u64,
    mode: &str,
) {
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg(mode)
        .query_async::<()>(conn)
        .await
        .expect("CLIENT PAUSE");
}

/// Every key under `prefix` and its contents, for "nothing changed" checks.
/// Hash fields and set members come back in no fixed order (it can change
/// between two reads with no write in between), so they are sorted here;
/// a sorted set's order is its own and kept.
pub(crate) async fn snapshot(url: &str, prefix: &str) -> BTreeMap<String, String> {
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
                let members: BTreeSet<Vec<u8>> = redis::cmd("SMEMBERS")
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

/// Function calls (FCALL) the Redis behind `conn` has run so far.
pub(crate) async fn script_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(conn, &["fcall"]).await
}

/// Function calls of either kind (FCALL, and FCALL_RO for reads) the Redis
/// behind `conn` has run so far.
pub(crate) async fn function_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    command_calls(conn, &["fcall", "fcall_ro"]).await
}

/// Calls of `commands` the Redis behind `conn` has run so far, summed.
pub(crate) async fn command_calls(
    conn: &mut redis::aio::MultiplexedConnection,
    commands: &[&str],
) -> u64 {
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
pub(crate) async fn until_script_calls_exceed(
    conn: &mut redis::aio::MultiplexedConnection,
    before: u64,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while script_calls(conn).await <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the long poll never looked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Clients of the Redis at `url` blocked now (holding a command back, in
/// a blocking command or behind a pause).
pub(crate) async fn blocked_clients(url: &str) -> u64 {
    let mut conn = redis_connection(url).await;
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(&mut conn)
        .await
        .expect("INFO clients");
    info.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Redis paused with `CLIENT PAUSE <ms> <mode>`. A `WRITE` pause holds
/// back every command that may write (every script among them) while PING
/// and plain reads run; an `ALL` pause holds back everything, CLIENT
/// UNPAUSE included, until its time is up. A `WRITE` pause ends on drop, so
/// a failing test does not leave Redis stalled.
pub(crate) struct Paused {
    conn: redis::Connection,
    url: String,
    mode: &'static str,
}

impl Paused {
    pub(crate) fn start(server: &RedisServer, mode: &'static str, ms: u64) -> Self {
        let mut conn = server.client().get_connection().expect("Redis answers");
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(ms)
            .arg(mode)
            .query::<()>(&mut conn)
            .expect("CLIENT PAUSE");
        Self {
            conn,
            url: server.url(),
            mode,
        }
    }

    /// Ends a `WRITE` pause; waits until an `ALL` pause is over (a PING
    /// goes through).
    pub(crate) async fn end(self) {
        if self.mode == "ALL" {
            // Each PING gives up after the client's response timeout.
            until(Duration::from_secs(10), "the pause is over", || {
                let url = self.url.clone();
                async move {
                    let mut conn = redis_connection(&url).await;
                    redis::cmd("PING")
                        .query_async::<()>(&mut conn)
                        .await
                        .is_ok()
                }
            })
            .await;
        }
    }
}

impl std::fmt::Debug for Paused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Paused({})", self.mode)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if self.mode == "WRITE" {
            let _ = redis::cmd("CLIENT")
                .arg("UNPAUSE")
                .query::<()>(&mut self.conn);
        }
    }
}
