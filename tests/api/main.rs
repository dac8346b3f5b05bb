//! The integration suite: real `redis-server` processes, real HTTP over
//! loopback. One binary, so it compiles once.

mod helpers;

mod endpoints;
mod guide;
mod leases;
mod score;
mod spec;
