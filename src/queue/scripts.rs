//! The Lua scripts, one per state transition, each with `lua/common.lua`
//! in front of it.

use std::sync::LazyLock;

use deadpool_redis::redis::Script;

macro_rules! queue_script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../../lua/common.lua"),
                include_str!(concat!("../../lua/", $file))
            ))
        });
    };
}

queue_script!(ENQUEUE, "enqueue.lua");
queue_script!(CLAIM, "claim.lua");
queue_script!(ACK, "ack.lua");
queue_script!(EXTEND, "extend.lua");
queue_script!(NACK, "nack.lua");
queue_script!(RECLAIM, "reclaim.lua");
queue_script!(PROMOTE, "promote.lua");
queue_script!(JOB, "job.lua");
queue_script!(DELETE, "delete.lua");
queue_script!(REQUEUE, "requeue.lua");
queue_script!(DEAD_JOBS, "dead_jobs.lua");
queue_script!(STATS, "stats.lua");

/// Readiness: answers only when Redis runs scripts, which it holds back
/// while writes are paused. Touches no key.
pub(crate) static READY: LazyLock<Script> = LazyLock::new(|| Script::new("return 1"));
