//! Every Redis key and channel name prioq uses, built in one place.
//!
//! All keys of queue `q` are `PREFIX:{q}:NAME`: the hash tag `{q}` puts
//! them in one slot, so each function call touches one slot and queues
//! spread over a Redis Cluster's shards. The registry of queue names is the
//! one key outside any queue's slot, and no function touches it.

/// One key of a queue; what each holds is in `lua/library.lua`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Pending,
    Scheduled,
    Processing,
    Dead,
    Jobs,
    Leases,
    Meta,
    Weights,
    Groups,
    Completed,
    Results,
    Progress,
    Schedules,
    ScheduleDue,
    ScheduleRuns,
}

impl Key {
    pub const ALL: [Self; 15] = [
        Self::Pending,
        Self::Scheduled,
        Self::Processing,
        Self::Dead,
        Self::Jobs,
        Self::Leases,
        Self::Meta,
        Self::Weights,
        Self::Groups,
        Self::Completed,
        Self::Results,
        Self::Progress,
        Self::Schedules,
        Self::ScheduleDue,
        Self::ScheduleRuns,
    ];

    /// The key's name after the queue's hash tag, as `lua/` headers list it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Scheduled => "scheduled",
            Self::Processing => "processing",
            Self::Dead => "dead",
            Self::Jobs => "jobs",
            Self::Leases => "leases",
            Self::Meta => "meta",
            Self::Weights => "weights",
            Self::Groups => "groups",
            Self::Completed => "completed",
            Self::Results => "results",
            Self::Progress => "progress",
            Self::Schedules => "schedules",
            Self::ScheduleDue => "schedules:due",
            Self::ScheduleRuns => "schedules:runs",
        }
    }
}

/// A field of a queue's `meta` hash that holds the finish tag of a
/// group's jobs in a priority class (`""` for jobs without a group).
pub fn tag_field(priority: u8, group: &str) -> String {
    format!("t:{priority}:{group}")
}

/// The key names of one queue, built once.
#[derive(Debug, Clone)]
pub struct QueueKeys {
    keys: [String; Key::ALL.len()],
    wake: String,
    group_prefix: String,
}

impl QueueKeys {
    pub fn new(prefix: &str, queue: &str) -> Self {
        let key = |name: &str| format!("{prefix}:{{{queue}}}:{name}");
        Self {
            keys: Key::ALL.map(|k| key(k.name())),
            wake: key("wake"),
            group_prefix: key("group:"),
        }
    }

    pub fn key(&self, key: Key) -> &str {
        &self.keys[key as usize]
    }

    /// The pub/sub channel told when claims waiting on the queue should
    /// look again.
    pub fn wake_channel(&self) -> &str {
        &self.wake
    }

    /// What a named group's key starts with: the group's waiting jobs
    /// other than its heads are in `group_prefix() + group`.
    pub fn group_prefix(&self) -> &str {
        &self.group_prefix
    }

    /// The key of a named group's waiting jobs.
    pub fn group(&self, group: &str) -> String {
        format!("{}{group}", self.group_prefix)
    }
}

/// The set of every queue name that has ever had a job.
pub fn registry(prefix: &str) -> String {
    format!("{prefix}:queues")
}

/// A queue's pub/sub channels, `PREFIX:{q}:wake` and `PREFIX:{q}:done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Channel {
    /// Claims waiting on the queue should look again.
    Wake,
    /// Jobs ended; the message holds their ids, space-separated.
    Done,
}

impl Channel {
    const ALL: [Self; 2] = [Self::Wake, Self::Done];

    fn name(self) -> &'static str {
        match self {
            Self::Wake => "wake",
            Self::Done => "done",
        }
    }
}

/// The patterns matching every queue's channels.
pub(crate) fn channel_patterns(prefix: &str) -> Vec<String> {
    Channel::ALL
        .iter()
        .map(|channel| format!("{prefix}:{{*}}:{}", channel.name()))
        .collect()
}

/// The queue a channel belongs to, and which of its channels it is.
pub(crate) fn queue_of_channel<'a>(prefix: &str, channel: &'a str) -> Option<(&'a str, Channel)> {
    let rest = channel.strip_prefix(prefix)?.strip_prefix(":{")?;
    Channel::ALL.into_iter().find_map(|kind| {
        rest.strip_suffix(kind.name())?
            .strip_suffix("}:")
            .map(|queue| (queue, kind))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_queue_carries_its_hash_tag() {
        let keys = QueueKeys::new("prioq", "emails");
        assert!(Key::ALL.iter().all(|k| keys.key(*k).contains("{emails}")));
        assert!(keys.wake_channel().contains("{emails}"));
        assert!(!registry("prioq").contains('{'));
        assert_eq!(keys.key(Key::Meta), "prioq:{emails}:meta");
        assert_eq!(keys.group("tenant:7"), "prioq:{emails}:group:tenant:7");
    }

    #[test]
    fn channels_name_their_queue() {
        let keys = QueueKeys::new("p:x", "a.b-c");
        assert_eq!(
            queue_of_channel("p:x", keys.wake_channel()),
            Some(("a.b-c", Channel::Wake))
        );
        assert_eq!(
            queue_of_channel("p:x", "p:x:{a.b-c}:done"),
            Some(("a.b-c", Channel::Done))
        );
        assert_eq!(queue_of_channel("p:x", "p:x:{a}:pending"), None);
        assert_eq!(queue_of_channel("other", keys.wake_channel()), None);
    }
}
