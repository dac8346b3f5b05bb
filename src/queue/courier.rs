//! The courier's notices: a shard's lane, after a call that ended jobs
//! whose dependants live in other slots, tells the courier task (see
//! `Broker::deliver_outboxes`) that the shard's outbox holds them, so that
//! those dependants hear of the end at once rather than at the next sweep.

use tokio::sync::mpsc;

/// Calls that left ended jobs in a shard's outbox, waiting for the
/// courier; beyond them a notice is dropped, and the sweeper tells those
/// dependants instead.
const NOTICES: usize = 1024;

/// A shard whose outbox holds ended jobs: its queue and its number.
pub(crate) type Notice = (String, u32);

/// What a shard's lane tells the courier: this shard's outbox holds ended
/// jobs, so that their dependants elsewhere hear of them at once rather
/// than at the next sweep.
#[derive(Debug, Clone)]
pub(crate) struct Courier {
    queue: String,
    shard: u32,
    notices: mpsc::Sender<Notice>,
}

impl Courier {
    pub(crate) fn new(queue: &str, shard: u32, notices: mpsc::Sender<Notice>) -> Self {
        Self {
            queue: queue.to_owned(),
            shard,
            notices,
        }
    }

    /// Asks for the shard's outbox to be sent.
    pub(crate) fn deliver(&self) {
        // Full: the courier is behind, and the sweeper catches up.
        let _ = self.notices.try_send((self.queue.clone(), self.shard));
    }
}

/// The courier's end of the notices.
pub(crate) fn notices() -> (mpsc::Sender<Notice>, mpsc::Receiver<Notice>) {
    mpsc::channel(NOTICES)
}
