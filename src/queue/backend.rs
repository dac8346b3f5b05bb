//! The Redis prioq talks to: one server, or a Redis Cluster reached through
//! its seed nodes. Either way a connection is multiplexed, and every queue
//! script lands on the one node owning its queue's hash slot.

use anyhow::Context;
use deadpool_redis::redis::aio::ConnectionLike;
use deadpool_redis::redis::{Cmd, Pipeline, RedisFuture, Value};
use deadpool_redis::{PoolConfig, Runtime, Timeouts, cluster};

/// How to reach Redis and how many connections to keep.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// One URL, or a cluster's seed nodes.
    pub urls: Vec<String>,
    pub cluster: bool,
    pub pool_size: usize,
    pub timeout: std::time::Duration,
}

/// A pool of connections to one Redis or to a cluster.
#[derive(Clone)]
pub enum RedisPool {
    Standalone(deadpool_redis::Pool),
    Cluster(cluster::Pool),
}

impl std::fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Standalone(_) => "RedisPool::Standalone",
            Self::Cluster(_) => "RedisPool::Cluster",
        })
    }
}

impl RedisPool {
    /// Builds the pool; no connection is made until one is needed.
    pub fn new(settings: &RedisSettings) -> anyhow::Result<Self> {
        let mut pool = PoolConfig::new(settings.pool_size);
        pool.timeouts = Timeouts {
            wait: Some(settings.timeout),
            create: Some(settings.timeout),
            recycle: Some(settings.timeout),
        };
        if settings.cluster {
            let mut config = cluster::Config::from_urls(settings.urls.clone());
            config.pool = Some(pool);
            let pool = config
                .create_pool(Some(Runtime::Tokio1))
                .context("invalid Redis Cluster settings")?;
            return Ok(Self::Cluster(pool));
        }
        let [url] = settings.urls.as_slice() else {
            anyhow::bail!("several Redis URLs need cluster mode (--redis-cluster)");
        };
        let mut config = deadpool_redis::Config::from_url(url);
        config.pool = Some(pool);
        let pool = config
            .create_pool(Some(Runtime::Tokio1))
            .context("invalid Redis settings")?;
        Ok(Self::Standalone(pool))
    }

    pub(crate) async fn get(&self) -> anyhow::Result<RedisConnection> {
        Ok(match self {
            Self::Standalone(pool) => RedisConnection::Standalone(pool.get().await?),
            Self::Cluster(pool) => RedisConnection::Cluster(pool.get().await?),
        })
    }
}

/// A pooled connection of either kind.
pub(crate) enum RedisConnection {
    Standalone(deadpool_redis::Connection),
    Cluster(cluster::Connection),
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
