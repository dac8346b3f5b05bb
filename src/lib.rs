//! prioq: a priority job queue over Redis, spoken to in HTTP/JSON.
//!
//! Module map, in the order a request flows through it:
//!
//! - [`http`]: the routes of the public contract by resource (`jobs`,
//!   `claims`, `leases`, `dlq`, `queues`, `settings`, `schedules`, `push`,
//!   `ops`),
//!   their JSON types (`jobs::request`, the enqueue request and its checks;
//!   `jobs::view`, the job view every answer shows); `error`: one
//!   [`http::error::ApiError`] rendered as RFC 9457 problems; `extract`:
//!   the extractors whose rejections take that shape; the module itself
//!   builds the router with its layers (auth, the guard that refuses
//!   cross-site and form requests, request ids); `params`: the path
//!   segments, checked as parsed; `openapi`: the generated document;
//!   `exposition`: `/metrics`, the recorded metrics and the queue gauges
//!   read at scrape time; `ui`: the dashboard at `/ui`, static files from
//!   `ui/` that call the `/v1` API from the browser.
//! - [`queue`]: the queue's semantics over Redis. Its facade re-exports
//!   what the layers above use. The operations are methods of the
//!   `Broker` (`broker`), by subject: `jobs` (`enqueue`, `claim` the long
//!   poll, `lease` ack, extend and nack, `read`, `end` delete, cancel and
//!   requeue), `deps` (dependencies' steps across slots), `registry` (the
//!   list of queues), `settings` (`table`, every setting once; `change`, a
//!   patch checked), `schedules` (cron patterns, fire times), `stats`,
//!   `paging` (the DLQ's and the groups' pages), `sweep` (one sweep of a
//!   queue), `push` (a queue's push target, its health and its slots),
//!   `search` (a queue's jobs found by their fields, in pages).
//!   Below them: `shards` routes every operation to a queue's
//!   shards and merges their answers; `exchange` sends the concurrent
//!   enqueues, claims and acks of a shard together (`lane`: group commit)
//!   as one call of the `exchange` function (`request`, what a call
//!   carries; `wire`, how it is written and read; `line`, a sharded
//!   claim's reads of the shards' lines); `courier` the notices of outboxes to
//!   send; `wake` the long-poll and job-end wake-ups between instances;
//!   `job` a job (`Job`, `NewJob` and its `JobOptions`; `decode`, from the
//!   functions' view). [`queue::store`] is the Redis side: `connection`
//!   (one Redis or a cluster), `call` (a command and whether it may be
//!   sent twice), `library` (`lua/` put together as a versioned Redis
//!   Functions library, one table of its functions and the key sets each
//!   takes; its Lua in `lua/`, one file per function, and `lua/lib/`, the
//!   parts they share by subject), `keys` (every key once, with its sets;
//!   the shards of a sharded queue) and `record` (a job's stored form).
//!   `error` is what can go wrong, `counters` this instance's counters per
//!   queue.
//! - [`serve`]: the HTTP server under the router: at most so many
//!   connections, each closed when its head is slow or it stays idle.
//! - [`sweeper`]: the task every instance runs to take back expired leases,
//!   promote due scheduled jobs, delete expired completed jobs and fire due
//!   schedules.
//! - [`pusher`]: the task every instance runs to deliver the jobs of
//!   queues with a push target: it claims them and POSTs each, signed, to
//!   the target, and acks or nacks by the answer (`delivery`, one POST
//!   under its lease; `wire`, the signature and the answer read).
//! - [`config`]: flags and `PRIOQ_*` variables; [`telemetry`]: logs and
//!   the metrics' names and recorder; [`otel`]: the W3C trace headers a
//!   job keeps and the messaging spans exported over OTLP; [`startup`]:
//!   builds and runs the application.
//!
//! Data flows one way: request → handler → queue operation → lane → one
//! Redis function call. The modules form layers, from the top; a module
//! imports only from its own layer or a lower one, and the modules of
//! `queue` import each other in no circle (`tests/api/layers.rs` holds the
//! code to both):
//!
//! 1. `startup`
//! 2. `http`, `sweeper`, `pusher`, `serve`
//! 3. `queue` (the facade)
//! 4. `queue::jobs`, `queue::deps`, `queue::registry`, `queue::settings`,
//!    `queue::schedules`, `queue::stats`, `queue::paging`, `queue::sweep`,
//!    `queue::push`, `queue::search` (the operations)
//! 5. `queue::broker`
//! 6. `queue::shards`, `queue::exchange`, `queue::courier`, `queue::wake`
//! 7. `queue::job`
//! 8. `queue::store`
//! 9. `queue::error`, `queue::counters`, `queue::settings::table`,
//!    `telemetry`, `otel`, `config`
//!
//! Outside this crate, dev-only: `tests/chaos/` (`prioq-chaos`), the
//! seeded fault schedule and its history checker (`history`, the recorded
//! operations; `checker`, pure, one rule per promise; `run`, the runner).

pub mod config;
pub mod http;
pub mod otel;
pub mod pusher;
pub mod queue;
pub mod serve;
pub mod startup;
pub mod sweeper;
pub mod telemetry;
