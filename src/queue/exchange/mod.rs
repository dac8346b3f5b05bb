//! The operations whose requests are sent in batches (see `lane`):
//! enqueue, claim (with the acks a worker sends along) and ack. The
//! requests of all three that arrive together on one queue go in one call
//! of the `exchange` function, acks first, then enqueues, then claims; the
//! call's reply becomes one answer per request (`wire`). The claims of a
//! sharded queue read each shard's line first (`line`).
//!
//! `request`: the requests and their answers; `wire`: the call's wire format,
//! written and read; `batch`: a lane's batch as one call; `lane`: group
//! commit.

mod batch;
pub(crate) mod lane;
mod line;
mod request;
mod wire;

pub(crate) use batch::{ExchangeBatch, reserve_arrivals};
pub(crate) use line::{Line, LineBatch, LineEntry};
pub use request::{
    Ack, AckOutcome, Admission, ClaimEntry, Claimed, EnqueueReply, Exchange, Exchanged, Held,
    Known, OutgoingJob,
};
pub use wire::{Route, exchange_answers, exchange_command};
pub(crate) use wire::{known_job, push_jobs};
