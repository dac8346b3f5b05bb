//! What Redis says about itself: `INFO commandstats`, `INFO cpu`, memory.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use redis::{self, aio::MultiplexedConnection};

pub async fn connect(client: &redis::Client) -> Result<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_secs(60)))
        .set_connection_timeout(Some(Duration::from_secs(2)));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(mut con) => {
                if redis::cmd("PING")
                    .query_async::<String>(&mut con)
                    .await
                    .is_ok()
                {
                    return Ok(con);
                }
            }
            Err(error) if Instant::now() > deadline => {
                return Err(error).context("cannot connect to Redis");
            }
            Err(_) => {}
        }
        if Instant::now() > deadline {
            bail!("Redis does not answer PING");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn info(
    con: &mut MultiplexedConnection,
    sections: &[&str],
) -> Result<BTreeMap<String, String>> {
    let mut cmd = redis::cmd("INFO");
    for section in sections {
        cmd.arg(*section);
    }
    let text: String = cmd.query_async(con).await?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

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
    let seconds = |key: &str| map.get(key).and_then(|v| v.parse::<f64>().ok());
    let cpu = seconds("used_cpu_sys")
        .zip(seconds("used_cpu_user"))
        .map(|(sys, user)| sys + user)
        .ok_or_else(|| anyhow!("no used_cpu_sys / used_cpu_user in INFO cpu"))?;
    Ok(RedisCounters {
        fcall: sum(cmdstat(&map, "fcall"), cmdstat(&map, "fcall_ro")),
        scripts: sum(cmdstat(&map, "evalsha"), cmdstat(&map, "eval")),
        total_commands: map
            .get("total_commands_processed")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        cpu_us: (cpu * 1e6).round() as u64,
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
