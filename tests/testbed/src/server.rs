//! One `redis-server` on a free port.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Wrapper, dbfilename_when_up, free_port};

/// Persistence that keeps every acknowledged write across a restart.
pub const AOF_ALWAYS: &str = "--appendonly yes --appendfsync always";

/// A `redis-server` owned by this process, killed (SIGKILL) on drop.
#[derive(Debug)]
pub struct RedisServer {
    pub port: u16,
    _wrapper: Wrapper,
}

impl RedisServer {
    /// A server on a free port without persistence, its files in a fresh
    /// directory.
    pub fn start() -> Self {
        Self::start_under("")
    }

    /// Like [`RedisServer::start`], run by `launcher`: the words put before
    /// `redis-server` on its command line, such as `taskset -c 1` to pin it
    /// to a core ("" for none).
    pub fn start_under(launcher: &str) -> Self {
        Self::launch(launcher, &fresh_dir(), "--appendonly no")
    }

    /// A server on a free port with its data in `dir` and the `flags`
    /// (persistence, replication...), shell words.
    pub fn start_in(dir: &Path, flags: &str) -> Self {
        Self::launch("", dir, flags)
    }

    /// A server on `port` that keeps its data in `dir`, in an append-only
    /// file synced on every write. Dropped (killed) and started again on
    /// the same port and dir, it is back at the same address with
    /// everything it had acknowledged: a Redis outage under a running
    /// service.
    pub fn start_on(port: u16, dir: &Path) -> Self {
        Self::spawn(port, dir, AOF_ALWAYS)
    }

    /// A server on `port` with its data in `dir` and the `flags`.
    pub fn spawn(port: u16, dir: &Path, flags: &str) -> Self {
        Self::try_spawn("", port, dir, flags)
            .unwrap_or_else(|| panic!("port {port} is taken by another redis-server"))
    }

    fn launch(launcher: &str, dir: &Path, flags: &str) -> Self {
        // A port found free can be taken by a parallel test before this
        // server binds it: then try another.
        (0..5)
            .find_map(|_| Self::try_spawn(launcher, free_port(), dir, flags))
            .expect("a redis-server on a free port")
    }

    /// `None` when another server answers on `port`: this one could not
    /// bind it.
    fn try_spawn(launcher: &str, port: u16, dir: &Path, flags: &str) -> Option<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Told to this server only, so that it is known whose server answers.
        let marker = format!(
            "prioq-{}-{}.rdb",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // Quiet: the shell reports the kill it waits for.
        let script = format!(
            "exec 2>/dev/null; {launcher} redis-server --port {port} --bind 127.0.0.1 --save '' \
             {flags} --dbfilename {marker} --dir \"$0\" --loglevel warning >/dev/null & pid=$!; \
             echo started; read _ ; kill -9 $pid; wait $pid"
        );
        let server = Self {
            port,
            _wrapper: Wrapper::start(&script, &[dir]),
        };
        (dbfilename_when_up(&server.url()) == marker).then_some(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid URL")
    }

    /// The pid of the `redis-server` process itself (not of its wrapper
    /// shell), to signal it (`kill -STOP`, `kill -CONT`) or read its CPU.
    pub fn pid(&self) -> u32 {
        let mut conn = self.client().get_connection().expect("Redis answers");
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut conn)
            .expect("INFO server");
        info.lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
            .expect("INFO server tells the process id")
    }
}

/// A directory of its own for a server's files, under the system's
/// temporary one.
pub(crate) fn fresh_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "prioq-test-redis-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).expect("a data dir");
    dir
}
