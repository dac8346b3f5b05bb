//! A command to Redis, and whether it may be sent twice.

use redis::Cmd;

/// Whether a call may be sent again when its connection dropped and its
/// effect is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Sent twice, it has the effect and the answer of once: reads, an
    /// enqueue of ids fixed before sending, extend, settings.
    Safe,
    /// Sent again only when it surely did not run (the connection could not
    /// be made, or Redis refused it before running it).
    Once,
}

/// A command to Redis, and whether it may be sent twice.
#[derive(Debug, Clone)]
pub struct Call {
    pub cmd: Cmd,
    pub repeat: Repeat,
}

impl Call {
    pub fn safe(cmd: Cmd) -> Self {
        Self {
            cmd,
            repeat: Repeat::Safe,
        }
    }

    pub fn once(cmd: Cmd) -> Self {
        Self {
            cmd,
            repeat: Repeat::Once,
        }
    }
}

impl std::ops::Deref for Call {
    type Target = Cmd;

    fn deref(&self) -> &Cmd {
        &self.cmd
    }
}

impl std::ops::DerefMut for Call {
    fn deref_mut(&mut self) -> &mut Cmd {
        &mut self.cmd
    }
}
