//! The seeded fault schedule and how each fault is applied and healed.
//! Faults come one at a time, or now and then two at once: each is
//! applied, held for its duration, healed, and the next one waits its gap.
//! Two at once: the first applied, then the second, both held for the
//! longer duration, the second healed, then the first (a Redis restart
//! while an instance is down, a failover while Redis is full...).

use std::collections::BTreeMap;
use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

use reqwest::Method;

use super::load::{self, Ctx, RESHARDED, SHARDED};
use super::system::{System, connection, faketime_installed, role};
use crate::history::{Call, Outcome};
use crate::slots;

/// One fault, with what the seed drew for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL to an instance, started again after `down_ms`.
    InstanceKill { instance: usize, down_ms: u64 },
    /// SIGSTOP to an instance, SIGCONT after `ms`.
    InstancePause { instance: usize, ms: u64 },
    /// A primary killed (on a cluster, the `primary`-th one now, modulo
    /// their number) once its append-only file holds every write it took
    /// (see `aof_settled`), started again after `down_ms` from that file.
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
    /// The resharded queue split over `shards` shards while producers and
    /// workers run on it: the change is taken only while the queue holds
    /// no job, so it is asked again until then, for `ms` at most.
    Reshard { shards: u32, ms: u64 },
    /// On a cluster: a slot holding one of the sharded queue's shards
    /// moved to another primary, key by key (`CLUSTER SETSLOT` IMPORTING
    /// and MIGRATING, `MIGRATE` of a few keys at a time with `pause_ms`
    /// between, then `SETSLOT NODE`), while claims run on it: calls meet
    /// ASK redirects and TRYAGAIN. `shard` picks the shard, modulo their
    /// number.
    SlotMove { shard: usize, pause_ms: u64 },
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
            Fault::Reshard { .. } => "reshard",
            Fault::SlotMove { .. } => "slot_move",
        }
    }

    /// Whether it keeps a Redis from taking writes for a while.
    fn stops_redis(self) -> bool {
        matches!(
            self,
            Fault::RedisRestart { .. }
                | Fault::RedisFull { .. }
                | Fault::ClientPause { .. }
                | Fault::Failover { .. }
        )
    }

    /// How long it is held once applied.
    fn hold_ms(self) -> u64 {
        match self {
            Fault::InstanceKill { down_ms, .. } | Fault::RedisRestart { down_ms, .. } => down_ms,
            Fault::InstancePause { ms, .. }
            | Fault::ClientPause { ms }
            | Fault::RedisFull { ms }
            | Fault::ClockSkew { ms, .. }
            | Fault::ProxyDelay { ms, .. } => ms,
            Fault::ClientKill
            | Fault::Failover { .. }
            | Fault::ProxyDrop { .. }
            | Fault::Reshard { .. }
            | Fault::SlotMove { .. } => 0,
        }
    }

    /// A fault drawn from those that make sense on the system: proxies
    /// are not in front of a cluster, slots move only on one.
    fn draw(rng: &mut StdRng, instances: usize, cluster: bool) -> Self {
        let instance = rng.random_range(0..instances);
        let kind = rng.random_range(0..12);
        let kind = match kind {
            8 | 9 if cluster => 12,
            kind => kind,
        };
        match kind {
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
            9 => Fault::ProxyDelay {
                instance,
                delay_ms: rng.random_range(10..500),
                ms: rng.random_range(500..3000),
            },
            10 | 11 => Fault::Reshard {
                shards: rng.random_range(1..=4),
                ms: 8000,
            },
            _ => Fault::SlotMove {
                shard: rng.random_range(0..8),
                pause_ms: rng.random_range(20..200),
            },
        }
    }
}

/// The gap before each fault and the fault (one, or two at once a fifth
/// of the time), drawn from `rng` until the gaps add up to `duration_ms`;
/// gaps are uniform in [0, 2 × `every_ms`].
pub fn schedule(
    rng: &mut StdRng,
    duration_ms: u64,
    every_ms: u64,
    instances: usize,
    cluster: bool,
) -> Vec<(u64, Vec<Fault>)> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let gap = rng.random_range(0..=2 * every_ms);
        at += gap;
        if at >= duration_ms {
            return out;
        }
        let mut faults = vec![Fault::draw(rng, instances, cluster)];
        if rng.random_bool(0.2) {
            let second = Fault::draw(rng, instances, cluster);
            // Two at once on one instance, or two changes of one queue's
            // layout, would only undo each other; a slot moves only while
            // every primary takes keys (one full, paused, restarting or
            // failing over would leave it half moved until that heals,
            // which comes only after the move).
            let clash = match (faults[0], second) {
                (a, b) if a.instance().is_some() && a.instance() == b.instance() => true,
                (
                    Fault::Reshard { .. } | Fault::SlotMove { .. },
                    Fault::Reshard { .. } | Fault::SlotMove { .. },
                ) => true,
                (Fault::SlotMove { .. }, other) | (other, Fault::SlotMove { .. }) => {
                    other.stops_redis()
                }
                _ => false,
            };
            if !clash {
                faults.push(second);
            }
        }
        out.push((gap, faults));
    }
}

impl Fault {
    /// The instance it acts on, when it acts on one.
    fn instance(self) -> Option<usize> {
        match self {
            Fault::InstanceKill { instance, .. }
            | Fault::InstancePause { instance, .. }
            | Fault::ClockSkew { instance, .. }
            | Fault::ProxyDrop { instance }
            | Fault::ProxyDelay { instance, .. } => Some(instance),
            _ => None,
        }
    }
}

/// What is left to undo of a fault applied.
#[derive(Debug)]
enum Undo {
    Nothing,
    Relaunch(usize),
    Resume(usize),
    StartRedis,
    Memory(Vec<String>),
    TrueClock(usize),
    NoDelay(usize),
}

/// Applies `faults` (one, or two at once), holds them, heals them in the
/// reverse order; answers the kinds of those applied (a Redis command is
/// refused while Redis is away).
pub async fn apply_all(
    system: &mut System,
    ctx: &Ctx,
    faults: &[Fault],
) -> anyhow::Result<Vec<&'static str>> {
    let mut undo = Vec::new();
    let mut applied = Vec::new();
    for fault in faults {
        if let Some(left) = start(system, ctx, *fault).await? {
            applied.push(fault.kind());
            undo.push(left);
        }
    }
    let hold = faults.iter().map(|f| f.hold_ms()).max().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(hold)).await;
    for left in undo.into_iter().rev() {
        heal(system, left).await?;
    }
    Ok(applied)
}

/// Applies `fault`; answers what is left to undo once it is held, or
/// `None` when it could not be applied.
async fn start(system: &mut System, ctx: &Ctx, fault: Fault) -> anyhow::Result<Option<Undo>> {
    let undo = match fault {
        Fault::InstanceKill { instance, .. } => {
            system.kill(instance).await;
            Undo::Relaunch(instance)
        }
        Fault::InstancePause { instance, .. } => {
            system.signal(instance, true);
            Undo::Resume(instance)
        }
        Fault::RedisRestart { primary, .. } => {
            let primaries = system.primaries().await;
            if primaries.is_empty() {
                return Ok(None);
            }
            let target = &primaries[primary % primaries.len()];
            if !aof_settled(target).await {
                return Ok(None);
            }
            system.kill_redis(target).await;
            Undo::StartRedis
        }
        Fault::ClientKill => {
            return Ok(on_primaries(system, &["CLIENT", "KILL", "TYPE", "normal"])
                .await?
                .then_some(Undo::Nothing));
        }
        Fault::ClientPause { ms } => {
            return Ok(
                on_primaries(system, &["CLIENT", "PAUSE", &ms.to_string(), "ALL"])
                    .await?
                    .then_some(Undo::Nothing),
            );
        }
        Fault::RedisFull { .. } => {
            let mut full = Vec::new();
            for url in system.primaries().await {
                if let Some(used) = used_memory(&url).await
                    && command(&url, &["CONFIG", "SET", "maxmemory", &used.to_string()]).await
                {
                    full.push(url);
                }
            }
            if full.is_empty() {
                return Ok(None);
            }
            Undo::Memory(full)
        }
        Fault::Failover { replica } => {
            return Ok(failover(system, replica).await?.then_some(Undo::Nothing));
        }
        Fault::ClockSkew {
            instance, skew_s, ..
        } => {
            if !faketime_installed() {
                return Ok(None);
            }
            system.kill(instance).await;
            system.launch_with_clock(instance, Some(skew_s)).await?;
            Undo::TrueClock(instance)
        }
        Fault::ProxyDrop { instance } => {
            let Some(proxy) = &system.instances[instance].proxy else {
                return Ok(None);
            };
            proxy.drop_connections();
            Undo::Nothing
        }
        Fault::ProxyDelay {
            instance, delay_ms, ..
        } => {
            let Some(proxy) = &system.instances[instance].proxy else {
                return Ok(None);
            };
            proxy.set_delay(delay_ms);
            Undo::NoDelay(instance)
        }
        Fault::Reshard { shards, ms } => {
            return Ok(reshard(ctx, shards, ms).await.then_some(Undo::Nothing));
        }
        Fault::SlotMove { shard, pause_ms } => {
            return Ok(move_slot(system, shard, pause_ms)
                .await
                .then_some(Undo::Nothing));
        }
    };
    Ok(Some(undo))
}

/// Undoes what a fault left.
async fn heal(system: &mut System, undo: Undo) -> anyhow::Result<()> {
    match undo {
        Undo::Nothing => {}
        Undo::Relaunch(instance) => system.launch(instance).await?,
        Undo::Resume(instance) => system.signal(instance, false),
        Undo::StartRedis => system.start_redis(),
        Undo::Memory(full) => {
            for url in &full {
                command(url, &["CONFIG", "SET", "maxmemory", "0"]).await;
            }
        }
        Undo::TrueClock(instance) => {
            system.kill(instance).await;
            system.launch(instance).await?;
        }
        Undo::NoDelay(instance) => {
            if let Some(proxy) = &system.instances[instance].proxy {
                proxy.set_delay(0);
            }
        }
    }
    Ok(())
}

/// Asks for the resharded queue to be split over `shards` shards, again
/// every 50 ms while it holds jobs (409), for `ms` at most, its producers
/// holding off meanwhile (see `Ctx::resharding`); whether it was taken.
async fn reshard(ctx: &Ctx, shards: u32, ms: u64) -> bool {
    ctx.resharding
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let taken = reshard_when_drained(ctx, shards, ms).await;
    ctx.resharding
        .store(false, std::sync::atomic::Ordering::Relaxed);
    taken
}

async fn reshard_when_drained(ctx: &Ctx, shards: u32, ms: u64) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    let body = serde_json::json!({"shards": shards});
    let mut rng = load::rng_for(u64::from(shards), ms);
    loop {
        let answer = ctx
            .call(
                &mut rng,
                "faults",
                RESHARDED,
                (Method::PATCH, "/settings", Some(&body)),
                |_| Call::Configure {
                    max_in_flight: None,
                    group_max_in_flight: None,
                    shards: Some(shards),
                    max_pending: None,
                    max_pending_bytes: None,
                    history_ms: None,
                },
            )
            .await;
        if answer.outcome == Outcome::Ok {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Moves the slot of one of the sharded queue's shards (its hash tags
/// found by scanning the primaries) to another primary (see
/// [`slots::move_slot`]); whether it was moved.
async fn move_slot(system: &System, shard: usize, pause_ms: u64) -> bool {
    let primaries = system.primaries().await;
    if !system.is_cluster() || primaries.len() < 2 {
        return false;
    }
    // The sharded queue's hash tags, and the primary holding each.
    let mut tags: Vec<(String, String)> = Vec::new();
    for url in &primaries {
        let Some(mut conn) = connection(url).await else {
            return false;
        };
        let pattern = format!("*{{{SHARDED}*}}:meta");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        tags.extend(keys.into_iter().map(|key| (key, url.clone())));
    }
    tags.sort();
    if tags.is_empty() {
        return false;
    }
    let (key, source) = tags[shard % tags.len()].clone();
    let target = primaries
        .iter()
        .find(|url| **url != source)
        .cloned()
        .unwrap_or_default();
    let Some(mut from) = connection(&source).await else {
        return false;
    };
    let Ok(slot) = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&key)
        .query_async::<u16>(&mut from)
        .await
    else {
        return false;
    };
    let how = slots::Migration {
        pause: Duration::from_millis(pause_ms),
        ..slots::Migration::default()
    };
    // A move left open (its keys took longer than the timeout) goes on:
    // the slot must not stay half moved past the fault.
    for _ in 0..3 {
        match slots::move_slot(&source, &target, slot, how).await {
            Ok(slots::Moved::There) => return true,
            Ok(slots::Moved::Open) => {}
            Err(error) => eprintln!("slot {slot}: a step of the move failed: {error}"),
        }
    }
    eprintln!("slot {slot}: not moved after three tries; left as it is");
    false
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

/// How long a restart waits for its Redis's AOF to hold what it was sent.
const AOF_SETTLE: Duration = Duration::from_secs(15);

/// Whether the Redis at `url` has its AOF holding every write it took (no
/// rewrite running or waiting), waiting up to [`AOF_SETTLE`] for it. A
/// replica that synced in full (after its primary restarted) turns its
/// AOF on again through a rewrite, and writes until that rewrite ends are
/// in memory only: killed then (promoted meanwhile by a failover), it
/// comes back from its older AOF without them. That is Redis's own limit,
/// which no client can work around; a restart waits it out, or is not
/// applied.
async fn aof_settled(url: &str) -> bool {
    let deadline = tokio::time::Instant::now() + AOF_SETTLE;
    loop {
        if let Some(mut conn) = connection(url).await
            && let Ok(info) = redis::cmd("INFO")
                .arg("persistence")
                .query_async::<String>(&mut conn)
                .await
        {
            let settled = [
                "aof_rewrite_in_progress",
                "aof_rewrite_scheduled",
                "loading",
            ]
            .iter()
            .all(|field| info.lines().any(|line| line.trim() == format!("{field}:0")));
            if settled {
                return true;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
