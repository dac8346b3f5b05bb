//! The queue's side in Redis: the connections (`connection`), the
//! function library they call (`library`), the names of the keys
//! (`keys`) and a job's stored form (`record`).

mod call;
mod connection;
pub mod keys;
pub mod library;
pub mod record;

use std::time::Duration;

use redis::{Cmd, FromRedisValue};

pub use call::{Call, Repeat};
use connection::RedisConnection;
pub use connection::{RedisPool, RedisSettings};
use library::LIBRARY;

use super::error::{QueueError, Result, is_function_missing};

/// How many times a call Redis surely did not run is sent again: a
/// connection that broke while idle (its replacement is made by the next
/// call), a cluster's redirect or a primary changing.
const UNSENT_TRIES: u32 = 3;
/// The pause before sending again a call a cluster refused (its map of
/// slots is being read again).
const REDIRECT_PAUSE: Duration = Duration::from_millis(20);

/// What a failed call says of its effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// It did not run: nothing was sent, or Redis refused it first.
    NotRun { pause: bool },
    /// The connection dropped or the answer did not come: it may have run.
    Dropped,
    /// Any other answer: the call's own.
    Answered,
}

impl Failure {
    fn of(error: &redis::RedisError) -> Self {
        use redis::{ErrorKind, ServerErrorKind};
        match error.kind() {
            _ if error.is_connection_refusal() => Self::NotRun { pause: false },
            ErrorKind::ClusterConnectionNotFound => Self::NotRun { pause: true },
            ErrorKind::Server(
                ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ReadOnly,
            ) => Self::NotRun { pause: true },
            _ if error.is_connection_dropped() || error.is_timeout() || error.is_io_error() => {
                Self::Dropped
            }
            _ => Self::Answered,
        }
    }
}

/// The Redis connections, calling the library's functions.
#[derive(Debug)]
pub(crate) struct Redis {
    pool: RedisPool,
}

impl Redis {
    pub(crate) fn new(pool: RedisPool) -> Self {
        Self { pool }
    }

    /// Sends `call`. A call Redis surely did not run goes again (a few
    /// times), and a call safe to repeat goes once more when its connection
    /// dropped; the connections replace a broken connection by themselves.
    pub(crate) async fn query<T: FromRedisValue>(&self, call: &Call) -> Result<T> {
        Ok(self.query_told(call).await?.0)
    }

    /// `query`, telling also whether the answer is the resend's after a
    /// dropped connection, and then how long ago the first send began: the
    /// first send may have run, and what the answer finds may be its
    /// doing.
    pub(crate) async fn query_told<T: FromRedisValue>(
        &self,
        call: &Call,
    ) -> Result<(T, Option<Duration>)> {
        let first_sent = tokio::time::Instant::now();
        let (mut unsent, mut resent) = (0, false);
        // Every try goes by the same connection: one found broken (Redis
        // was away) is being made again, and the next try waits for that
        // rather than find the next connection broken too.
        let mut conn = None;
        loop {
            let error = match self.send(&mut conn, &call.cmd).await {
                Ok(value) => {
                    let resent = resent.then(|| first_sent.elapsed());
                    return Ok((T::from_redis_value(resp2(value))?, resent));
                }
                Err(error) => error,
            };
            match Failure::of(&error) {
                Failure::NotRun { pause } if unsent < UNSENT_TRIES => {
                    unsent += 1;
                    if pause {
                        tokio::time::sleep(REDIRECT_PAUSE).await;
                    }
                }
                Failure::Dropped if call.repeat == Repeat::Safe && !resent => resent = true,
                _ => return Err(after_resend(error.into(), resent)),
            }
        }
    }

    /// Sends `cmd` (an `FCALL`); when the function is missing there (a
    /// fresh Redis, a failover), loads the library and sends it once more.
    /// `conn` is the connection to send by, taken from the pool when none.
    async fn send(
        &self,
        conn: &mut Option<RedisConnection>,
        cmd: &Cmd,
    ) -> redis::RedisResult<redis::Value> {
        let conn = match conn {
            Some(conn) => conn,
            None => conn.insert(self.pool.get().await?),
        };
        match cmd.query_async(conn).await {
            Err(error) if is_function_missing(&error) => {
                LIBRARY.load_command().query_async::<()>(conn).await?;
                tracing::info!(library = LIBRARY.name(), "loaded the Redis functions");
                cmd.query_async(conn).await
            }
            other => other,
        }
    }
}

/// The error of a call: once it was resent after a dropped connection, a
/// later refusal before running (Redis down, out of memory) does not tell
/// that the first send did not run, so its effect is unknown.
fn after_resend(error: QueueError, resent: bool) -> QueueError {
    match error {
        QueueError::Unavailable(_) | QueueError::Full(_) if resent => QueueError::Unknown(
            anyhow::Error::new(error)
                .context("resent after a dropped connection, which may have run it first"),
        ),
        error => error,
    }
}

/// A reply read in RESP3 as prioq reads replies, in RESP2's terms: Lua's
/// `false` is nil again, `true` 1, maps and sets flat arrays, doubles and
/// verbatim text plain strings. prioq speaks RESP3 for one thing: a
/// connection that breaks while idle is noticed and replaced at once.
fn resp2(value: redis::Value) -> redis::Value {
    use redis::Value;
    match value {
        Value::Boolean(false) => Value::Nil,
        Value::Boolean(true) => Value::Int(1),
        Value::Array(items) | Value::Set(items) => {
            Value::Array(items.into_iter().map(resp2).collect())
        }
        Value::Map(pairs) => Value::Array(
            pairs
                .into_iter()
                .flat_map(|(key, value)| [resp2(key), resp2(value)])
                .collect(),
        ),
        Value::Attribute { data, .. } => resp2(*data),
        Value::Double(n) => Value::BulkString(n.to_string().into_bytes()),
        Value::VerbatimString { text, .. } => Value::BulkString(text.into_bytes()),
        Value::BigNumber(digits) => Value::BulkString(digits),
        other => other,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_after_a_resend_leaves_the_effect_unknown() {
        let down = || QueueError::Unavailable(anyhow::anyhow!("connection refused"));
        assert!(after_resend(down(), true).may_have_run());
        assert!(!after_resend(down(), false).may_have_run());
        let full = QueueError::Full(anyhow::anyhow!("OOM"));
        assert!(after_resend(full, true).may_have_run());
        // What the function answered on the resend is the state now.
        assert!(matches!(
            after_resend(QueueError::NotFound, true),
            QueueError::NotFound
        ));
    }
}
