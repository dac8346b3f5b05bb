//! Test support, a module per subject. The helpers most tests use are
//! re-exported here; the harnesses of the load and fault tests are used by
//! their module's path.
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
//! - `ledger`: what the clients of a queue saw, and its audit against
//!   what Redis holds.
//! - `inventory`: what Redis holds of a queue, read through prioq's key
//!   layout and record format.
//! - `load`: clients that retry as README says and file every answer in a
//!   ledger; producers and consumers.
//! - `rng`: a small seeded generator, and seeds a run prints to replay.

pub(crate) mod app;
pub(crate) mod clock;
pub(crate) mod cluster;
pub(crate) mod inventory;
pub(crate) mod ledger;
pub(crate) mod load;
pub(crate) mod nginx;
pub(crate) mod process;
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
