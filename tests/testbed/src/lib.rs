//! The Redis processes prioq's integration tests (`tests/api`) and benches
//! (`benches/`) run against, written once for both:
//!
//! - [`RedisServer`]: one `redis-server` on a free port.
//! - [`RedisCluster`]: three cluster-enabled `redis-server`s (with
//!   replicas, if asked) joined into one Redis Cluster.
//! - [`Wrapper`]: the shell that holds such processes, so that they die with
//!   the process that started them, even on a crash.
//! - [`free_port`]: a port nothing listens on now.
//!
//! Every failure panics with what went wrong: a test or a bench that cannot
//! start its Redis has nothing else to do.

mod cluster;
mod server;
mod wrapper;

use std::net::TcpListener;
use std::time::Duration;

pub use cluster::RedisCluster;
pub use server::{AOF_ALWAYS, RedisServer};
pub use wrapper::Wrapper;

/// A port free now. Another process may take it before it is used: callers
/// that bind it late try again on another.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits until a server answers at `url`; returns its `dbfilename`, which
/// tells whose server it is.
fn dbfilename_when_up(url: &str) -> String {
    let client = redis::Client::open(url).expect("valid URL");
    for _ in 0..500 {
        if let Ok(mut conn) = client.get_connection()
            && let Ok((_, name)) = redis::cmd("CONFIG")
                .arg("GET")
                .arg("dbfilename")
                .query::<(String, String)>(&mut conn)
        {
            return name;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{url} did not come up (is redis-server installed? See docs/development.md)");
}
