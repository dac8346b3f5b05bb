//! The Redis prioq talks to: one server, or a Redis Cluster reached through
//! its seed nodes. Connections are multiplexed and shared: every call takes
//! the next one round-robin, with no check-out round trip, and each one
//! reconnects by itself after Redis comes back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{self, Cmd, IntoConnectionInfo, Pipeline, ProtocolVersion, RedisFuture, Value};
use tokio::sync::OnceCell;

/// How to reach Redis and how many connections to keep.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// One URL, or a cluster's seed nodes.
    pub urls: Vec<String>,
    pub cluster: bool,
    pub pool_size: usize,
    /// Bound on connecting and on each reply.
    pub timeout: Duration,
}

/// Shared connections to one Redis or to a cluster.
pub enum RedisPool {
    Standalone {
        connections: Vec<ConnectionManager>,
        next: AtomicUsize,
    },
    Cluster {
        client: Box<ClusterClient>,
        /// Made on first use, so prioq may start before the cluster answers.
        connection: OnceCell<ClusterConnection>,
    },
}

impl std::fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Standalone { .. } => "RedisPool::Standalone",
            Self::Cluster { .. } => "RedisPool::Cluster",
        })
    }
}

impl RedisPool {
    /// Sets the connections up; none is made until it is needed.
    pub fn new(settings: &RedisSettings) -> anyhow::Result<Self> {
        if settings.cluster {
            // No call is sent twice by the cluster client on its own: one
            // that leases jobs must not be. prioq decides what to send
            // again (see `Redis::query`), redirects included.
            let client = ClusterClient::builder(settings.urls.clone())
                .connection_timeout(settings.timeout)
                .response_timeout(settings.timeout)
                .retries(0)
                .use_protocol(ProtocolVersion::RESP3)
                .build()
                .context("invalid Redis Cluster settings")?;
            return Ok(Self::Cluster {
                client: Box::new(client),
                connection: OnceCell::new(),
            });
        }
        let [url] = settings.urls.as_slice() else {
            anyhow::bail!("several Redis URLs need cluster mode (--redis-cluster)");
        };
        // RESP3: a connection that breaks while idle (Redis restarted) is
        // noticed when it breaks and replaced, not found broken by the next
        // call.
        let info = url
            .as_str()
            .into_connection_info()
            .context("invalid Redis URL")?;
        let redis = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client =
            redis::Client::open(info.set_redis_settings(redis)).context("invalid Redis URL")?;
        // One quick retry: while Redis is away, calls fail fast with 503
        // instead of waiting out a long back-off.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let connections = (0..settings.pool_size.max(1))
            .map(|_| ConnectionManager::new_lazy_with_config(client.clone(), config.clone()))
            .collect::<Result<_, _>>()
            .context("invalid Redis settings")?;
        Ok(Self::Standalone {
            connections,
            next: AtomicUsize::new(0),
        })
    }

    pub(crate) async fn get(&self) -> redis::RedisResult<RedisConnection> {
        Ok(match self {
            Self::Standalone { connections, next } => {
                let n = next.fetch_add(1, Ordering::Relaxed) % connections.len();
                RedisConnection::Standalone(connections[n].clone())
            }
            Self::Cluster { client, connection } => {
                let connection = connection
                    .get_or_try_init(|| client.get_async_connection())
                    .await?;
                RedisConnection::Cluster(connection.clone())
            }
        })
    }
}

/// A handle on a shared connection of either kind.
pub(crate) enum RedisConnection {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Standalone(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Standalone(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Standalone(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}
