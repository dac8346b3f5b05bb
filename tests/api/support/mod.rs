//! Test support, a module per subject. The helpers most tests use are
//! re-exported here; the harnesses of the fault tests are used by their
//! module's path. The load of the fault scenarios, its recorded history
//! and the checker that judges it are the chaos crate's
//! (`prioq_chaos::scenario`, `prioq_chaos::checker`).
//!
//! - `redis_server`: the `redis-server` processes (from the testbed crate
//!   the benches share), the server most tests share, connections, a
//!   prefix's keys, command counts, `CLIENT PAUSE`.
//! - `cluster`: the local Redis Cluster most cluster tests share, its
//!   slots and replicas.
//! - `app`: prioq instances served on port 0 in this process, requests to
//!   them, queue settings.
//! - `service`: the built `prioq` binary as a child process.
//! - `process`: signals, descriptors and memory of processes; temporary
//!   directories.
//! - `clock`: waiting until something holds, bounding a wait, timestamps.
//! - `worker`: a worker process killed with SIGKILL holding its job.
//! - `nginx`: a real nginx in front of prioq instances.
//! - `inventory`: what Redis holds of a queue, read through prioq's key
//!   layout and record format, and what is inconsistent between its keys.
//! - `rng`: a small seeded generator, and seeds a run prints to replay.
//! - `recorded`: two instances under a recorded load, for the checker.
//! - `receiver`: an HTTP endpoint for push delivery, answering by a plan.

pub(crate) mod app;
pub(crate) mod clock;
pub(crate) mod cluster;
pub(crate) mod inventory;
pub(crate) mod nginx;
pub(crate) mod process;
pub(crate) mod receiver;
pub(crate) mod recorded;
pub(crate) mod redis_server;
pub(crate) mod rng;
pub(crate) mod service;
pub(crate) mod worker;

pub use redis;

pub(crate) use app::{Answer, TestApp, spawn_app, spawn_app_with, test_config, unique_prefix};
pub(crate) use clock::until;
pub(crate) use process::{TempDir, send_signal};
pub(crate) use redis_server::{
    AOF_ALWAYS, RedisServer, free_port, function_calls, redis_connection, script_calls, snapshot,
    until_script_calls_exceed,
};
pub(crate) use service::Service;
