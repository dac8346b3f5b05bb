//! The seeded fault schedule and how each fault is applied and healed.
//! Faults come one at a time: each is applied, held for its duration,
//! healed, and the next one waits its gap.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use super::system::{System, connection, faketime_installed, role};

/// One fault, with what the seed drew for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL to an instance, started again after `down_ms`.
    InstanceKill { instance: usize, down_ms: u64 },
    /// SIGSTOP to an instance, SIGCONT after `ms`.
    InstancePause { instance: usize, ms: u64 },
    /// A primary killed (on a cluster, the `primary`-th one now, modulo
    /// their number), started again after `down_ms` from its append-only
    /// file.
    RedisRestart { primary: usize, down_ms: u64 },
    /// `CLIENT KILL TYPE normal` on every primary: every instance's
    /// connections dropped.
    ClientKill,
    /// `CLIENT PAUSE ms ALL` on every primary.
    ClientPause { ms: u64 },
    /// `maxmemory` set to what each primary uses, for `ms`.
    RedisFull { ms: u64 },
    /// A replica promoted by a coordinated failover (the primary pauses
    /// writers, waits for the replica to catch up, and the two swap
    /// roles): `FAILOVER` on the primary, the proxies then turning to the
    /// new one; on a cluster, `CLUSTER FAILOVER` on the `replica`-th
    /// replica now, modulo their number.
    Failover { replica: usize },
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
            Fault::Failover { .. } => "failover",
            Fault::ClockSkew { .. } => "clock_skew",
            Fault::ProxyDrop { .. } => "proxy_drop",
            Fault::ProxyDelay { .. } => "proxy_delay",
        }
    }

    /// A fault drawn from those that make sense on the system: proxies
    /// are not in front of a cluster.
    fn draw(rng: &mut StdRng, instances: usize, cluster: bool) -> Self {
        let instance = rng.random_range(0..instances);
        let kinds = if cluster { 8 } else { 10 };
        match rng.random_range(0..kinds) {
            0 => Fault::InstanceKill {
                instance,
                down_ms: rng.random_range(100..1500),
            },
            1 => Fault::InstancePause {
                instance,
                ms: rng.random_range(200..3000),
            },
            2 => Fault::RedisRestart {
                primary: rng.random_range(0..3),
                down_ms: rng.random_range(100..2000),
            },
            3 => Fault::ClientKill,
            4 => Fault::ClientPause {
                ms: rng.random_range(100..2000),
            },
            5 => Fault::RedisFull {
                ms: rng.random_range(500..3000),
            },
            6 => Fault::Failover {
                replica: rng.random_range(0..3),
            },
            7 => Fault::ClockSkew {
                instance,
                skew_s: rng.random_range(30..=300) * if rng.random() { 1 } else { -1 },
                ms: rng.random_range(1000..5000),
            },
            8 => Fault::ProxyDrop { instance },
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
    cluster: bool,
) -> Vec<(u64, Fault)> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let gap = rng.random_range(0..=2 * every_ms);
        at += gap;
        if at >= duration_ms {
            return out;
        }
        out.push((gap, Fault::draw(rng, instances, cluster)));
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
        Fault::RedisRestart { primary, down_ms } => {
            let primaries = system.primaries().await;
            if primaries.is_empty() {
                return Ok(false);
            }
            system
                .kill_redis(&primaries[primary % primaries.len()])
                .await;
            sleep(down_ms).await;
            system.start_redis();
        }
        Fault::ClientKill => {
            return on_primaries(system, &["CLIENT", "KILL", "TYPE", "normal"]).await;
        }
        Fault::ClientPause { ms } => {
            return on_primaries(system, &["CLIENT", "PAUSE", &ms.to_string(), "ALL"]).await;
        }
        Fault::RedisFull { ms } => {
            let mut full = Vec::new();
            for url in system.primaries().await {
                if let Some(used) = used_memory(&url).await
                    && command(&url, &["CONFIG", "SET", "maxmemory", &used.to_string()]).await
                {
                    full.push(url);
                }
            }
            sleep(ms).await;
            for url in &full {
                command(url, &["CONFIG", "SET", "maxmemory", "0"]).await;
            }
            return Ok(!full.is_empty());
        }
        Fault::Failover { replica } => return failover(system, replica).await,
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
        Fault::ProxyDrop { instance } => {
            let Some(proxy) = &system.instances[instance].proxy else {
                return Ok(false);
            };
            proxy.drop_connections();
        }
        Fault::ProxyDelay {
            instance,
            delay_ms,
            ms,
        } => {
            let Some(proxy) = &system.instances[instance].proxy else {
                return Ok(false);
            };
            proxy.set_delay(delay_ms);
            sleep(ms).await;
            proxy.set_delay(0);
        }
    }
    Ok(true)
}

/// How long a failover may take before the primary gives it up.
const FAILOVER_TIMEOUT_MS: u64 = 5000;

/// A coordinated failover, then waits until the replica answers as a
/// primary: `FAILOVER` on the pair's primary (the proxies then turn to
/// the new one), `CLUSTER FAILOVER` on a cluster's replica. Not applied
/// when refused (no replica in sync, after a restart) or given up.
async fn failover(system: &mut System, replica: usize) -> anyhow::Result<bool> {
    let replicas = system.replicas().await;
    if replicas.is_empty() {
        return Ok(false);
    }
    let target = replicas[replica % replicas.len()].clone();
    let timeout = FAILOVER_TIMEOUT_MS.to_string();
    let asked = if system.is_cluster() {
        command(&target, &["CLUSTER", "FAILOVER"]).await
    } else {
        on_primaries(system, &["FAILOVER", "TIMEOUT", &timeout]).await?
    };
    if !asked {
        return Ok(false);
    }
    // A primary aborts after its timeout: past it and a margin, the roles
    // stay as they were.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(FAILOVER_TIMEOUT_MS + 2000);
    while tokio::time::Instant::now() < deadline {
        if role(&target).await.as_deref() == Some("master") {
            if !system.is_cluster() {
                system.promoted();
            }
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(false)
}

/// `words` sent to every primary; applied if any took it.
async fn on_primaries(system: &System, words: &[&str]) -> anyhow::Result<bool> {
    let mut applied = false;
    for url in system.primaries().await {
        applied |= command(&url, words).await;
    }
    Ok(applied)
}

/// `words` sent to the server at `url`; whether it answered without error.
async fn command(url: &str, words: &[&str]) -> bool {
    let Some(mut conn) = connection(url).await else {
        return false;
    };
    let mut cmd = redis::cmd(words[0]);
    for word in &words[1..] {
        cmd.arg(*word);
    }
    cmd.query_async::<redis::Value>(&mut conn).await.is_ok()
}

async fn used_memory(url: &str) -> Option<u64> {
    let mut conn = connection(url).await?;
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
