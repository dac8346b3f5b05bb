//! What the two benches share, included by each (`#[path]`). The Redis
//! processes they start come from the testbed crate, which the tests use
//! too; here are the rest:
//!
//! - `app.rs` (declared by the benches that start prioq in their process,
//!   `deps` and `push`): prioq on a Redis of its own.
//! - `redis_info`: connections that wait for Redis, `INFO`, a server's CPU.
//! - `table`: Markdown tables.
//! - [`results_dir`]: where results go.

pub mod redis_info;
pub mod table;

use std::path::PathBuf;

/// `bench-results/` at the package's root, where the benches write their
/// results.
pub fn results_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench-results")
}
