//! What Redis says about itself: `INFO commandstats`, `INFO cpu`, memory
//! (over `common::redis_info`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, anyhow};
use redis::aio::MultiplexedConnection;

use crate::common::redis_info::cpu_us;
pub use crate::common::redis_info::{connect, info};

/// `(calls, usec)` of one command.
pub type CallsUsec = (u64, u64);

/// Counters Redis keeps about itself.
#[derive(Debug, Clone, Default)]
pub struct RedisCounters {
    /// `FCALL` and `FCALL_RO` together: prioq's functions.
    pub fcall: CallsUsec,
    /// `EVALSHA` and `EVAL` together: BullMQ's scripts.
    pub scripts: CallsUsec,
    pub total_commands: u64,
    /// `used_cpu_sys` + `used_cpu_user`: the whole redis-server process.
    pub cpu_us: u64,
    /// Every command, those run inside functions and scripts included.
    pub commands: BTreeMap<String, CallsUsec>,
}

fn cmdstat(map: &BTreeMap<String, String>, command: &str) -> CallsUsec {
    let Some(line) = map.get(&format!("cmdstat_{command}")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

fn sum((a, b): CallsUsec, (c, d): CallsUsec) -> CallsUsec {
    (a + c, b + d)
}

pub async fn counters(con: &mut MultiplexedConnection) -> Result<RedisCounters> {
    let map = info(con, &["commandstats", "stats", "cpu"]).await?;
    Ok(RedisCounters {
        fcall: sum(cmdstat(&map, "fcall"), cmdstat(&map, "fcall_ro")),
        scripts: sum(cmdstat(&map, "evalsha"), cmdstat(&map, "eval")),
        total_commands: map
            .get("total_commands_processed")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        cpu_us: cpu_us(&map)?,
        commands: map
            .keys()
            .filter_map(|k| k.strip_prefix("cmdstat_"))
            .map(|command| (command.to_owned(), cmdstat(&map, command)))
            .collect(),
    })
}

pub async fn used_memory(con: &mut MultiplexedConnection) -> Result<u64> {
    // Let lazy frees and the allocator's stats settle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    info(con, &["memory"])
        .await?
        .get("used_memory")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no used_memory in INFO"))
}
