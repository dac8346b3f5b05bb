//! The integration suite: real `redis-server` processes, real HTTP over
//! loopback. One binary, so it compiles once.
//!
//! The fault tests under load (`faults`, `soak`, `sharded::failover`)
//! record their load as a history and judge it with the chaos crate's
//! checker (`prioq_chaos::scenario`, `prioq_chaos::checker`), whose
//! planted-violation tests are `history_checker`; `support` holds the
//! other harnesses.

mod support;

mod aging;
mod backoff;
mod batching;
mod bounded;
mod cancel;
mod claim_acks;
mod claim_order;
mod cluster;
mod completion;
mod dedup;
mod dependencies;
mod edges;
mod endpoints;
mod expiry;
mod fairness;
mod faults;
mod fuzz;
mod group_rate;
mod guide;
mod history;
mod history_checker;
mod layers;
mod leases;
mod library;
mod ops;
mod proxy;
mod push;
mod schedules;
mod score;
mod search;
mod sharded;
mod soak;
mod spec;
mod traces;
