//! The queue's side in Redis: the connections (`connection`), the
//! function library they call (`library`), the names of the keys
//! (`keys`) and a job's stored form (`record`).

mod connection;
pub mod keys;
pub mod library;
pub mod record;

use std::time::Duration;

use redis::{Cmd, FromRedisValue};

pub use connection::{RedisPool, RedisSettings};
use library::LIBRARY;

use super::error::{QueueError, Result};

/// The Redis connections, calling the library's functions.
#[derive(Debug)]
pub(crate) struct Redis {
    pool: RedisPool,
}

impl Redis {
    pub(crate) fn new(pool: RedisPool) -> Self {
        Self { pool }
    }

    /// Sends `cmd` (an `FCALL`); when the function is missing there (a
    /// fresh Redis, a failover), loads the library and sends it once more.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let mut conn = self.pool.get().await.map_err(QueueError::Unavailable)?;
        let value = match cmd.query_async(&mut conn).await {
            Err(error) if library::is_function_missing(&error) => {
                LIBRARY
                    .load_command()
                    .query_async::<()>(&mut conn)
                    .await
                    .map_err(|error| {
                        QueueError::Unknown(
                            anyhow::Error::new(error)
                                .context("cannot load prioq's Redis functions"),
                        )
                    })?;
                tracing::info!(library = LIBRARY.name(), "loaded the Redis functions");
                cmd.query_async(&mut conn).await?
            }
            other => other?,
        };
        Ok(T::from_redis_value(value)?)
    }
}

/// Runs a Redis operation, giving up after `limit`: then its effect is
/// unknown.
pub(crate) async fn bounded_by<T>(
    limit: Duration,
    operation: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(limit, operation)
        .await
        .unwrap_or_else(|_| {
            Err(QueueError::Unknown(anyhow::anyhow!(
                "Redis did not answer within {limit:?}"
            )))
        })
}
