//! prioq: a priority job queue over Redis, spoken to in HTTP/JSON.
//!
//! Module map, in the order a request flows through it:
//!
//! - [`http`]: the routes of the public contract by resource (`jobs`,
//!   `claims`, `dlq`, `queues`, `settings`, `schedules`, `ops`), their JSON
//!   types; `error`: one [`http::error::ApiError`] rendered as RFC 9457
//!   problems; `extract`: the extractors whose rejections take that shape;
//!   the module itself builds the router with its layers (auth, the guard
//!   that refuses cross-site and form requests, request ids); `params`:
//!   the path segments, checked as parsed; `openapi`: the generated
//!   document; `exposition`: `/metrics`, the recorded metrics and the
//!   queue gauges read at scrape time; `ui`: the dashboard at `/ui`,
//!   static files from `ui/` that call the `/v1` API from the browser.
//! - [`queue`]: the queue's semantics over Redis, one method per operation
//!   on [`queue::Broker`], each one call of a Redis function. `jobs` holds
//!   the job operations; `settings`, `stats`, `paging` (the DLQ's and the
//!   groups' pages), `sweep` (one sweep of a queue) and `schedules` (cron
//!   patterns, fire times and the schedules' operations) the others, by
//!   subject; `registry` the list of queues (listing one before its first
//!   write, the limit on queues, deleting a queue); `deps` the
//!   dependencies' steps across slots (registering a dependant with its
//!   dependencies before it is made, telling dependants from an ended
//!   job's outbox, the courier that does it after an ack); the module
//!   itself keeps the `Broker`. `shards` knows which shards each queue has and
//!   routes every operation to its shards, merging their answers (a
//!   sharded claim in `shards::claims`). `exchange` sends the concurrent
//!   enqueues, claims and acks of a queue together (`lane`: group commit)
//!   as one call of the `exchange` function, whose layout `wire` writes
//!   and reads. [`queue::store`] is the Redis side: `connection` (one
//!   Redis or a cluster), `library` (`lua/` put together as a versioned
//!   Redis Functions library, one table of its functions, loaded where it
//!   is missing; its Lua in `lua/`, one file per function, and
//!   `lua/lib/`, the parts they share by subject), `keys` (every key, the
//!   shards of a sharded queue included, and a job's shard) and `record`
//!   (a job's stored form). `job` is the
//!   decoded job, `error` what can go wrong, `wake` the long-poll and
//!   job-end wake-ups between instances, `counters` this instance's
//!   counters per queue.
//! - [`serve`]: the HTTP server under the router: at most so many
//!   connections, each closed when its head is slow or it stays idle.
//! - [`sweeper`]: the task every instance runs to take back expired leases,
//!   promote due scheduled jobs, delete expired completed jobs and fire due
//!   schedules.
//! - [`config`]: flags and `PRIOQ_*` variables; [`telemetry`]: logs and
//!   the metrics' names and recorder; [`otel`]: the W3C trace headers a
//!   job keeps and the messaging spans exported over OTLP; [`startup`]:
//!   builds and runs the application. None of them depends on [`queue`]
//!   or [`http`] but `startup`, which puts them together.
//!
//! Data flows one way: request → handler → queue operation → lane → one
//! Redis function call.
//!
//! Outside this crate, dev-only: `tests/chaos/` (`prioq-chaos`), the
//! seeded fault schedule and its history checker (`history`, the recorded
//! operations; `checker`, pure, one rule per promise; `run`, the runner).

pub mod config;
pub mod http;
pub mod otel;
pub mod queue;
pub mod serve;
pub mod startup;
pub mod sweeper;
pub mod telemetry;
