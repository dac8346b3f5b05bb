//! prioq: a priority job queue over Redis, spoken to in HTTP/JSON.
//!
//! Module map, in the order a request flows through it:
//!
//! - [`http`]: the routes of the public contract by resource (`jobs`,
//!   `claims`, `dlq`, `queues`, `ops`), their JSON types, and `error`: one
//!   [`http::error::ApiError`] rendered as RFC 9457 problems, plus the
//!   extractors whose rejections take that shape; `openapi`: the generated
//!   document; `ui`: the dashboard at
//!   `/ui`, static files from `ui/` that call the `/v1` API from the browser.
//! - [`queue`]: the queue's semantics over Redis, one function per
//!   operation on [`queue::Broker`]; `backend` holds the shared connections
//!   to one Redis or a cluster, `keys` names every key, `scripts` loads
//!   `lua/`, one script per state transition; `wake` carries long-poll
//!   wake-ups between instances.
//! - [`sweeper`]: the task every instance runs to take back expired leases
//!   and promote due scheduled jobs.
//! - [`config`]: flags and `PRIOQ_*` variables; [`telemetry`]: logs and
//!   metrics; [`startup`]: builds and runs the application.
//!
//! Data flows one way: request → handler → queue operation → Lua script.

pub mod config;
pub mod http;
pub mod queue;
pub mod startup;
pub mod sweeper;
pub mod telemetry;
