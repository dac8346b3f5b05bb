//! A seeded schedule of operations and faults against prioq, and the
//! checker that judges what it recorded (design note 20: Jepsen's queue
//! checkers, FoundationDB's simulation, TigerBeetle's VOPR).
//!
//! - `history`: the recorded operations, one JSON line each, and their
//!   outcome (ok, failed, unknown).
//! - `checker`: pure; a history in, the violations of prioq's promises
//!   out (`facts`: what the history certainly establishes; `rules`: one
//!   function per promise).
//! - `run`: the runner: Redis with AOF and a replica, prioq instances
//!   behind TCP proxies, seeded producers and workers, the seeded fault
//!   schedule, the final inventory and the report.
//! - `scenario`: the load of prioq's fault scenario tests
//!   (`tests/api/faults`, `tests/api/soak.rs`,
//!   `tests/api/sharded/failover.rs`), recorded
//!   through `run`'s client and read back through its final inventory,
//!   for the checker to judge.
//! - `slots`: a Redis Cluster slot moved between primaries under load
//!   (the fault schedule's slot move, and the tests of it).

pub mod checker;
pub mod history;
pub mod run;
pub mod scenario;
pub mod slots;
