//! The shell that holds the processes a test or bench starts.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A `sh -c` script holding the processes it started. It reads its
/// standard input, a pipe from this process, and stops them when that
/// pipe closes: on drop, or when this process dies, however it dies.
#[derive(Debug)]
pub struct Wrapper {
    child: Child,
}

impl Wrapper {
    /// Runs `script` with `args` (`$0`, `$1`...) and waits for its first
    /// line, which it prints once its processes are started. The script
    /// must then `read` its standard input and stop them.
    pub fn start<S: AsRef<OsStr>>(script: &str, args: &[S]) -> Self {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh starts");
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut String::new())
            .expect("the wrapper starts");
        Self { child }
    }
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        // Closing stdin makes the script stop its processes and return.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
