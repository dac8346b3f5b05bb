//! Processes: prioq started by the bench (redis-server comes from the
//! testbed crate, started through [`Pinning::launcher`]), which cores they
//! run on, their CPU time from `/proc`, and the machine they run on.

use std::ffi::OsStr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use prioq_testbed::RedisServer;
use serde_json::json;

use crate::args::Args;

/// A child process, killed when dropped.
#[derive(Debug)]
pub struct Proc {
    child: Child,
}

impl Proc {
    pub fn spawn(command: &mut Command, what: &str) -> Result<Self> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        Ok(Self { child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which processes share a core: Redis gets one to itself, everything
/// that talks to it (load generator, prioq, Node) the other, so the
/// processes under test do not take Redis's core turn by turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Redis,
    Load,
}

impl Role {
    fn core(self) -> usize {
        match self {
            Self::Redis => 1,
            Self::Load => 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Pinning {
    on: bool,
    /// Why pinning is off, or what it does.
    pub note: String,
}

impl Pinning {
    /// Decided before the bench starts any thread: `available_parallelism`
    /// answers 1 once the bench is pinned.
    pub fn new(wanted: bool) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let off = |note: String| Self { on: false, note };
        if !wanted {
            return off("off (--no-pin)".into());
        }
        if cores < 2 {
            return off(format!("off: {cores} core"));
        }
        if Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            return off("off: no taskset".into());
        }
        Self {
            on: true,
            note: format!(
                "redis-servers on core {}; bench, prioq and Node on core {} (taskset)",
                Role::Redis.core(),
                Role::Load.core()
            ),
        }
    }

    pub fn on(&self) -> bool {
        self.on
    }

    /// Pins every thread of the bench (only the main one exists yet).
    pub fn pin_self(&self) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        let status = Command::new("taskset")
            .args(["-a", "-cp", &Role::Load.core().to_string()])
            .arg(std::process::id().to_string())
            .stdout(Stdio::null())
            .status()
            .context("cannot run taskset")?;
        if !status.success() {
            bail!("taskset could not pin the bench: {status}");
        }
        Ok(())
    }

    /// `program`, started on the core of `role` when pinning is on.
    pub fn command(&self, program: impl AsRef<OsStr>, role: Role) -> Command {
        if self.on {
            let mut command = Command::new("taskset");
            command.args(["-c", &role.core().to_string()]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    /// What [`Pinning::command`] puts before a program, as shell words.
    pub fn launcher(&self, role: Role) -> String {
        if self.on {
            format!("taskset -c {}", role.core())
        } else {
            String::new()
        }
    }
}

/// The cores a process may run on, as `/proc/<pid>/status` lists them.
pub fn cores_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|cores| cores.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

/// A redis-server without persistence on a free port, pinned like the
/// other processes of its role.
pub fn start_redis(pinning: &Pinning) -> RedisServer {
    RedisServer::start_under(&pinning.launcher(Role::Redis))
}

pub fn start_prioq(
    args: &Args,
    pinning: &Pinning,
    port: u16,
    redis_url: &str,
    prefix: &str,
) -> Result<Proc> {
    let mut command = pinning.command(&args.prioq_bin, Role::Load);
    for (key, _) in std::env::vars() {
        if key.starts_with("PRIOQ_") {
            command.env_remove(key);
        }
    }
    command
        .env("PRIOQ_LISTEN", format!("127.0.0.1:{port}"))
        .env("PRIOQ_REDIS_URL", redis_url)
        .env("PRIOQ_KEY_PREFIX", prefix)
        .envs(args.prioq_env.iter().map(|(k, v)| (k, v)));
    Proc::spawn(
        &mut command,
        &format!(
            "{} (run `cargo build --release` first)",
            args.prioq_bin.display()
        ),
    )
}

pub async fn wait_ready(client: &reqwest::Client, base: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(response) = client.get(format!("{base}/readyz")).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("prioq at {base} did not become ready");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // After the command name: field 3 (state) is index 0; utime is field 14.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

pub fn machine() -> serde_json::Value {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_default();
    let mem_kb: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    json!({
        "nproc": cpuinfo.lines().filter(|l| l.starts_with("processor")).count(),
        "cpu_model": model,
        "memory_gib": (mem_kb as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "loadavg_at_start": read("/proc/loadavg").trim(),
    })
}

pub fn git_revision() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR")])
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let rev = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--", "src", "lua"]).is_empty();
    if dirty {
        format!("{rev}+uncommitted changes in src/ or lua/")
    } else {
        rev
    }
}

pub fn time_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
