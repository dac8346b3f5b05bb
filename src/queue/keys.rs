//! Every Redis key and channel name prioq uses, built in one place.
//!
//! All keys of queue `q` carry the hash tag `{q}`, so each queue script
//! touches one slot and queues spread over a Redis Cluster's shards. The
//! registry of queue names is the one key outside any queue's slot, and no
//! script touches it.

/// The keys of one queue, in the order every queue script expects them as
/// `KEYS` (see `lua/common.lua`).
#[derive(Debug, Clone)]
pub(crate) struct QueueKeys {
    keys: [String; 9],
    wake: String,
}

impl QueueKeys {
    pub(crate) fn new(prefix: &str, queue: &str) -> Self {
        let key = |name: &str| format!("{prefix}:{{{queue}}}:{name}");
        Self {
            keys: [
                key("pending"),
                key("scheduled"),
                key("processing"),
                key("dead"),
                key("jobs"),
                key("leases"),
                key("errors"),
                key("seq"),
                key("floor"),
            ],
            wake: key("wake"),
        }
    }

    pub(crate) fn all(&self) -> &[String; 9] {
        &self.keys
    }

    /// The pub/sub channel told when the queue's pending set stops being empty.
    pub(crate) fn wake_channel(&self) -> &str {
        &self.wake
    }
}

/// The set of every queue name that has ever had a job.
pub(crate) fn registry(prefix: &str) -> String {
    format!("{prefix}:queues")
}

/// The pattern matching every queue's wake-up channel.
pub(crate) fn wake_pattern(prefix: &str) -> String {
    format!("{prefix}:{{*}}:wake")
}

/// The queue a wake-up channel belongs to.
pub(crate) fn queue_of_wake_channel<'a>(prefix: &str, channel: &'a str) -> Option<&'a str> {
    channel
        .strip_prefix(prefix)?
        .strip_prefix(":{")?
        .strip_suffix("}:wake")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_queue_carries_its_hash_tag() {
        let keys = QueueKeys::new("prioq", "emails");
        assert!(keys.all().iter().all(|k| k.contains("{emails}")));
        assert!(keys.wake_channel().contains("{emails}"));
        assert!(!registry("prioq").contains('{'));
    }

    #[test]
    fn wake_channel_names_its_queue() {
        let keys = QueueKeys::new("p:x", "a.b-c");
        assert_eq!(
            queue_of_wake_channel("p:x", keys.wake_channel()),
            Some("a.b-c")
        );
        assert_eq!(queue_of_wake_channel("p:x", "p:x:{a}:pending"), None);
        assert_eq!(queue_of_wake_channel("other", keys.wake_channel()), None);
    }
}
