//! What can go wrong with a queue operation, and how Redis's errors map to
//! it.

use redis;

pub type Result<T, E = QueueError> = std::result::Result<T, E>;

/// What went wrong with a queue operation.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("no such job")]
    NotFound,
    #[error("the lease token is not the job's current lease")]
    LeaseLost,
    #[error("the job's state does not allow this operation")]
    Conflict,
    /// The queue holds jobs, so its number of shards cannot change.
    #[error("the queue holds jobs")]
    NotEmpty,
    /// A priority class used up its 2^44 tags while jobs wait in it:
    /// nothing was written.
    #[error("the priority class has used up its arrival tags; they restart once it is drained")]
    SequenceExhausted,
    /// A settings change that would leave the settings invalid, named by
    /// the field to fix.
    #[error("invalid setting `{0}`")]
    Invalid(String),
    /// The queue is not on the list of queues yet (a new queue, or one
    /// deleted meanwhile): nothing was written; prioq lists it and calls
    /// again.
    #[error("the queue is not on the list of queues")]
    Unregistered,
    /// Ref `at` of the `after` of the request's job `job` names no job:
    /// nothing was made.
    #[error("a dependency names no job")]
    UnknownDependency { job: usize, at: usize },
    /// The queue is being deleted: nothing was written.
    #[error("the queue is being deleted")]
    Deleting,
    /// The queue holds jobs, so it cannot be deleted without a purge.
    #[error("the queue holds jobs")]
    HoldsJobs,
    /// The queue's number of shards is not the one the call was routed
    /// for (it changed, or is changing): nothing was written.
    #[error("the queue's shards changed")]
    ShardsChanged,
    /// Redis could not be reached, or refused the operation before running
    /// it: it did not run.
    #[error("Redis is unavailable")]
    Unavailable(#[source] anyhow::Error),
    /// Redis is out of memory and refused a write that would grow it,
    /// before running it: it did not run.
    #[error("Redis is out of memory")]
    Full(#[source] anyhow::Error),
    /// The request's new jobs would take what waits in a shard
    /// (`waiting`, jobs or bytes) past its share of one of the queue's
    /// bounds (`limit`): nothing was written.
    #[error("the queue is full: {waiting} {} wait, {} {limit}", bound.unit(), bound.setting())]
    QueueFull {
        waiting: u64,
        limit: u64,
        bound: Bound,
    },
    /// A configured count would be exceeded (named): nothing was written.
    #[error("the limit on {0} is reached")]
    LimitReached(&'static str),
    /// Redis failed or did not answer in time after the operation was sent:
    /// it may or may not have taken effect.
    #[error("Redis did not complete the operation")]
    Unknown(#[source] anyhow::Error),
}

impl QueueError {
    /// Whether the failed call may have taken effect (Redis failed or did
    /// not answer after it was sent).
    pub fn may_have_run(&self) -> bool {
        matches!(self, Self::Unknown(_))
    }

    /// The same error for another request of the same failed call.
    pub(super) fn duplicate(&self) -> Self {
        match self {
            Self::NotFound => Self::NotFound,
            Self::LeaseLost => Self::LeaseLost,
            Self::Conflict => Self::Conflict,
            Self::NotEmpty => Self::NotEmpty,
            Self::SequenceExhausted => Self::SequenceExhausted,
            &Self::QueueFull {
                waiting,
                limit,
                bound,
            } => Self::QueueFull {
                waiting,
                limit,
                bound,
            },
            &Self::UnknownDependency { job, at } => Self::UnknownDependency { job, at },
            Self::Invalid(field) => Self::Invalid(field.clone()),
            Self::ShardsChanged => Self::ShardsChanged,
            Self::Unregistered => Self::Unregistered,
            Self::Deleting => Self::Deleting,
            Self::HoldsJobs => Self::HoldsJobs,
            Self::Unavailable(error) => Self::Unavailable(anyhow::anyhow!("{error:#}")),
            Self::Full(error) => Self::Full(anyhow::anyhow!("{error:#}")),
            Self::LimitReached(limit) => Self::LimitReached(limit),
            Self::Unknown(error) => Self::Unknown(anyhow::anyhow!("{error:#}")),
        }
    }
}

/// Which of a queue's bounds an enqueue met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `max_pending`: jobs waiting.
    Jobs,
    /// `max_pending_bytes`: the bytes of the jobs waiting.
    Bytes,
}

impl Bound {
    /// The setting that holds the bound.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Jobs => "max_pending",
            Self::Bytes => "max_pending_bytes",
        }
    }

    /// What it counts.
    pub fn unit(self) -> &'static str {
        match self {
            Self::Jobs => "jobs",
            Self::Bytes => "bytes",
        }
    }
}

impl From<redis::RedisError> for QueueError {
    fn from(error: redis::RedisError) -> Self {
        match error.code() {
            Some("NOT_FOUND") => Self::NotFound,
            Some("LEASE_LOST") => Self::LeaseLost,
            Some("CONFLICT") => Self::Conflict,
            Some("SEQUENCE_EXHAUSTED") => Self::SequenceExhausted,
            Some("SHARDS_CHANGED") => Self::ShardsChanged,
            Some("UNREGISTERED") => Self::Unregistered,
            Some("DELETING") => Self::Deleting,
            Some("LIMIT_REACHED") => Self::LimitReached("the limit"),
            // Redis adds where the error was raised after the field.
            Some("INVALID") => Self::Invalid(
                error
                    .detail()
                    .and_then(|detail| detail.split(' ').next())
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ if is_too_old(&error) => Self::Unavailable(
                anyhow::Error::new(error).context("prioq needs Redis 7.0 or later (Functions)"),
            ),
            Some("OOM") => Self::Full(error.into()),
            _ if ran(&error) => Self::Unknown(error.into()),
            _ => Self::Unavailable(error.into()),
        }
    }
}

/// Whether Redis answered that the function is not loaded there.
pub fn is_function_missing(error: &redis::RedisError) -> bool {
    error.code() == Some("ERR") && error.detail() == Some("Function not found")
}

/// Whether Redis does not know Functions at all: it is older than 7.0.
fn is_too_old(error: &redis::RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|detail| detail.starts_with("unknown command"))
}

/// Whether an operation that failed with `error` may have run: the
/// connection dropped, the answer did not come in time, or the error came
/// from the operation itself. Nothing runs on a connection that could not
/// be made, and Redis runs nothing it refuses to run (loading its data, a
/// busy script, a cluster's redirect or a primary being down, a replica
/// refusing writes).
fn ran(error: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    if error.is_connection_refusal() {
        return false;
    }
    !matches!(
        error.kind(),
        ErrorKind::ClusterConnectionNotFound
            | ErrorKind::AuthenticationFailed
            | ErrorKind::InvalidClientConfig
            | ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::CrossSlot
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::NoPerm
            )
    ) && !matches!(
        error.code(),
        Some("BUSY" | "NOSCRIPT" | "NOREPLICAS" | "MISCONF")
    )
}

impl From<redis::ParsingError> for QueueError {
    fn from(error: redis::ParsingError) -> Self {
        Self::Unknown(anyhow::Error::new(error).context("unexpected reply from Redis"))
    }
}
