//! prioq: a priority job queue over Redis, spoken to in HTTP/JSON.
//!
//! Module map, in the order a request flows through it:
//!
//! - [`http`]: the routes of the public contract by resource (`jobs`,
//!   `claims`, `dlq`, `queues`, `settings`, `schedules`, `ops`), their JSON
//!   types, and `error`: one [`http::error::ApiError`] rendered as RFC 9457
//!   problems, plus the extractors whose rejections take that shape;
//!   `openapi`: the generated document; `exposition`: `/metrics`, the
//!   recorded metrics and the queue gauges read at scrape time; `ui`: the
//!   dashboard at `/ui`, static files from `ui/` that call the `/v1` API
//!   from the browser.
//! - [`queue`]: the queue's semantics over Redis, one method per operation
//!   on [`queue::Broker`], each one call of a Redis function; the job
//!   operations are in the module itself, the others in the module of
//!   their subject. [`queue::library`]
//!   puts `lua/` together as a versioned Redis Functions library and loads
//!   it where it is missing; `lane` sends the concurrent enqueues, claims
//!   and acks of a queue together (group commit), and `batches` turns them
//!   into one call of the `exchange` function and its reply back into
//!   answers;
//!   [`queue::keys`] names every key, the shards of a sharded queue
//!   included, and maps a job's id to its shard (the `Broker` routes every
//!   operation to its shards and merges their answers);
//!   [`queue::record`] is a job's stored
//!   form, `job` the decoded job; `error` what can go wrong; `paging` the
//!   pages of dead jobs and groups and their reads; `settings` a queue's
//!   settings, read and changed; `stats` a queue's counts; `sweep` one
//!   sweep of a queue; `schedules` cron patterns, fire times and the
//!   schedules' operations;
//!   `backend` holds the shared connections to one Redis or a cluster;
//!   `wake` carries long-poll and job-end wake-ups between instances.
//! - [`sweeper`]: the task every instance runs to take back expired leases,
//!   promote due scheduled jobs, delete expired completed jobs and fire due
//!   schedules.
//! - [`config`]: flags and `PRIOQ_*` variables; [`telemetry`]: logs and
//!   the metrics' names and recorder; [`startup`]: builds and runs the
//!   application. None of the three depends on [`queue`] or [`http`] but
//!   `startup`, which puts them together.
//!
//! Data flows one way: request → handler → queue operation → lane → one
//! Redis function call.

pub mod config;
pub mod http;
pub mod queue;
pub mod startup;
pub mod sweeper;
pub mod telemetry;
