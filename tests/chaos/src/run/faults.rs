//! The seeded fault schedule and how each fault is applied and healed.
//! Faults come one at a time: each is applied, held for its duration,
//! healed, and the next one waits its gap.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use super::system::{System, faketime_installed};

/// One fault, with what the seed drew for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL to an instance, started again after `down_ms`.
    InstanceKill { instance: usize, down_ms: u64 },
    /// SIGSTOP to an instance, SIGCONT after `ms`.
    InstancePause { instance: usize, ms: u64 },
    /// The primary killed, started again after `down_ms` from its
    /// append-only file.
    RedisRestart { down_ms: u64 },
    /// `CLIENT KILL TYPE normal`: every instance's connections dropped.
    ClientKill,
    /// `CLIENT PAUSE ms ALL`.
    ClientPause { ms: u64 },
    /// `maxmemory` set to what Redis uses, for `ms`.
    RedisFull { ms: u64 },
    /// The replica promoted by a coordinated `FAILOVER` (the primary
    /// pauses writers, waits for the replica to catch up, and the two swap
    /// roles); the proxies turn to the new primary.
    Failover,
    /// An instance restarted with its wall clock `skew_s` seconds off
    /// (libfaketime), then after `ms` restarted on the true clock.
    /// Skipped where libfaketime is not installed.
    ClockSkew {
        instance: usize,
        skew_s: i64,
        ms: u64,
    },
    /// Every connection through an instance's proxy dropped.
    ProxyDrop { instance: usize },
    /// An instance's proxy holds each chunk `delay_ms`, for `ms`.
    ProxyDelay {
        instance: usize,
        delay_ms: u64,
        ms: u64,
    },
}

impl Fault {
    pub fn kind(self) -> &'static str {
        match self {
            Fault::InstanceKill { .. } => "instance_kill",
            Fault::InstancePause { .. } => "instance_pause",
            Fault::RedisRestart { .. } => "redis_restart",
            Fault::ClientKill => "client_kill",
            Fault::ClientPause { .. } => "client_pause",
            Fault::RedisFull { .. } => "redis_full",
            Fault::Failover => "failover",
            Fault::ClockSkew { .. } => "clock_skew",
            Fault::ProxyDrop { .. } => "proxy_drop",
            Fault::ProxyDelay { .. } => "proxy_delay",
        }
    }

    fn draw(rng: &mut StdRng, instances: usize) -> Self {
        let instance = rng.random_range(0..instances);
        match rng.random_range(0..10) {
            0 => Fault::InstanceKill {
                instance,
                down_ms: rng.random_range(100..1500),
            },
            1 => Fault::InstancePause {
                instance,
                ms: rng.random_range(200..3000),
            },
            2 => Fault::RedisRestart {
                down_ms: rng.random_range(100..2000),
            },
            3 => Fault::ClientKill,
            4 => Fault::ClientPause {
                ms: rng.random_range(100..2000),
            },
            5 => Fault::RedisFull {
                ms: rng.random_range(500..3000),
            },
            6 => Fault::ProxyDrop { instance },
            7 => Fault::Failover,
            8 => Fault::ClockSkew {
                instance,
                skew_s: rng.random_range(30..=300) * if rng.random() { 1 } else { -1 },
                ms: rng.random_range(1000..5000),
            },
            _ => Fault::ProxyDelay {
                instance,
                delay_ms: rng.random_range(10..500),
                ms: rng.random_range(500..3000),
            },
        }
    }
}

/// The gap before each fault and the fault, drawn from `rng` until the
/// gaps add up to `duration_ms`; gaps are uniform in [0, 2 × `every_ms`].
pub fn schedule(
    rng: &mut StdRng,
    duration_ms: u64,
    every_ms: u64,
    instances: usize,
) -> Vec<(u64, Fault)> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let gap = rng.random_range(0..=2 * every_ms);
        at += gap;
        if at >= duration_ms {
            return out;
        }
        out.push((gap, Fault::draw(rng, instances)));
    }
}

/// Applies `fault`, holds it, heals it; answers whether it was applied
/// (a Redis command is refused while Redis is away).
pub async fn apply(system: &mut System, fault: Fault) -> anyhow::Result<bool> {
    let sleep = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
    match fault {
        Fault::InstanceKill { instance, down_ms } => {
            system.kill(instance).await;
            sleep(down_ms).await;
            system.launch(instance).await?;
        }
        Fault::InstancePause { instance, ms } => {
            system.signal(instance, true);
            sleep(ms).await;
            system.signal(instance, false);
        }
        Fault::RedisRestart { down_ms } => {
            system.kill_redis();
            sleep(down_ms).await;
            system.start_redis();
        }
        Fault::ClientKill => {
            return redis_command(system, &["CLIENT", "KILL", "TYPE", "normal"]).await;
        }
        Fault::ClientPause { ms } => {
            return redis_command(system, &["CLIENT", "PAUSE", &ms.to_string(), "ALL"]).await;
        }
        Fault::RedisFull { ms } => {
            let Some(used) = used_memory(system).await else {
                return Ok(false);
            };
            let applied =
                redis_command(system, &["CONFIG", "SET", "maxmemory", &used.to_string()]).await?;
            sleep(ms).await;
            redis_command(system, &["CONFIG", "SET", "maxmemory", "0"]).await?;
            return Ok(applied);
        }
        Fault::Failover => return failover(system).await,
        Fault::ClockSkew {
            instance,
            skew_s,
            ms,
        } => {
            if !faketime_installed() {
                return Ok(false);
            }
            system.kill(instance).await;
            system.launch_with_clock(instance, Some(skew_s)).await?;
            sleep(ms).await;
            system.kill(instance).await;
            system.launch(instance).await?;
        }
        Fault::ProxyDrop { instance } => system.instances[instance].proxy.drop_connections(),
        Fault::ProxyDelay {
            instance,
            delay_ms,
            ms,
        } => {
            system.instances[instance].proxy.set_delay(delay_ms);
            sleep(ms).await;
            system.instances[instance].proxy.set_delay(0);
        }
    }
    Ok(true)
}

/// How long a failover may take before the primary gives it up.
const FAILOVER_TIMEOUT_MS: u64 = 5000;

/// `FAILOVER` on the primary, then waits until the replica answers as the
/// primary and turns the proxies to it. Not applied when the primary
/// refuses (no replica in sync, after a restart) or gives up.
async fn failover(system: &mut System) -> anyhow::Result<bool> {
    let timeout = FAILOVER_TIMEOUT_MS.to_string();
    if !redis_command(system, &["FAILOVER", "TIMEOUT", &timeout]).await? {
        return Ok(false);
    }
    let Some(mut replica) = connection(&system.replica_url()).await else {
        return Ok(false);
    };
    // The primary aborts after its timeout: past it and a margin, the roles
    // stay as they were.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(FAILOVER_TIMEOUT_MS + 2000);
    while tokio::time::Instant::now() < deadline {
        let role: Option<Vec<redis::Value>> =
            redis::cmd("ROLE").query_async(&mut replica).await.ok();
        if let Some(redis::Value::BulkString(role)) = role.as_ref().and_then(|r| r.first())
            && role == b"master"
        {
            system.promoted();
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(false)
}

async fn connection(url: &str) -> Option<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url).ok()?;
    tokio::time::timeout(
        Duration::from_secs(2),
        client.get_multiplexed_async_connection(),
    )
    .await
    .ok()?
    .ok()
}

async fn redis_command(system: &System, words: &[&str]) -> anyhow::Result<bool> {
    let Some(mut conn) = connection(&system.redis_url()).await else {
        return Ok(false);
    };
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    Ok(cmd.query_async::<redis::Value>(&mut conn).await.is_ok())
}

async fn used_memory(system: &System) -> Option<u64> {
    let mut conn = connection(&system.redis_url()).await?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Faults applied, by kind.
pub type Tally = BTreeMap<&'static str, u64>;
