//! Processes as the tests see them from outside: signals, open
//! descriptors, resident memory; and temporary directories for their files.

use std::process::Command;

use super::app::unique_prefix;

/// Sends `signal` (`TERM`, `INT`, `STOP`, `CONT`...) to process `pid`
/// with kill(1).
pub(crate) fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "kill -{signal} {pid} failed: {status}");
}

/// A fresh directory under the system's temporary one, removed on drop,
/// unless its test is failing: then it is kept, for what it holds (a
/// recorded history, a Redis's files), and its path printed.
#[derive(Debug)]
pub(crate) struct TempDir {
    pub path: std::path::PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!("prioq-{label}-{}", unique_prefix()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temporary directory");
        Self { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} (the test failed)", self.path.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Open file descriptors of process `pid`.
pub(crate) fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .unwrap_or(0)
}

/// Resident memory of process `pid`, in KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .expect("VmRSS in /proc/<pid>/status")
}
