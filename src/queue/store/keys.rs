//! Every Redis key and channel name prioq uses, built in one place.
//!
//! All keys of queue `q` are `PREFIX:{q}:NAME`: the hash tag `{q}` puts
//! them in one slot, so each function call touches one slot and queues
//! spread over a Redis Cluster's shards. The registry of queue names is the
//! one key outside any queue's slot, and no function touches it.
//!
//! A queue split over K shards (its `shards` setting) has a full set of
//! keys per shard: shard 0, the queue's home, keeps `{q}`; shard s > 0 is
//! `{q#n}`, n the first number at or after s whose slot falls in the s-th
//! of K equal ranges of slots counted from the home's, so that K shards
//! land on K different primaries of a cluster whose primaries hold equal
//! ranges. A queue name cannot hold `#`, so no two queues share a key.

/// The member of a queue's `processing` set (scored +inf) and `groups` set
/// (scored 0) and the field of its `leases` hash that keep them skiplists
/// and a hash table: longer than Redis's 64-byte bound on listpack
/// entries, and no job id nor group name (they have no spaces). A small
/// set or hash is otherwise kept as a listpack, which Redis searches entry
/// by entry on every write: with a few dozen jobs in flight, or groups
/// listed, that costs a claim and an ack more than their own work (see
/// `lua/lib/keys.lua`). Written when the queue is listed.
pub const MARK: &str =
    "mark: longer than 64 bytes, it keeps this set a skiplist, this hash a hash table";

/// Every key of a queue, one row each: its variant, its name after the
/// queue's hash tag (as `lua/` headers list it), the field a function's
/// code names it by (`q.pending`, `q.due`...), and the sets it is in. What
/// each holds is in `lua/lib/keys.lua`.
macro_rules! keys {
    ($($key:ident $name:literal $field:ident [$($set:ident),*],)*) => {
        /// One key of a queue.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Key {
            $($key,)*
        }

        impl Key {
            pub const ALL: [Self; [$($name),*].len()] = [$(Self::$key),*];

            /// The key's name after the queue's hash tag.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$key => $name,)*
                }
            }

            /// The key's field in the table of keys a function's code
            /// names them by.
            pub fn field(self) -> &'static str {
                match self {
                    $(Self::$key => stringify!($field),)*
                }
            }

            /// Whether the key is in `set`.
            pub fn is_in(self, set: KeySet) -> bool {
                match self {
                    $(Self::$key => [$(KeySet::$set),*].contains(&set),)*
                }
            }
        }
    };
}

keys! {
    Pending      "pending"        pending       [Life],
    Scheduled    "scheduled"      scheduled     [View, Life],
    Processing   "processing"     processing    [View, Life],
    Dead         "dead"           dead          [View, Life],
    Jobs         "jobs"           jobs          [View, Life],
    Leases       "leases"         leases        [View, Life],
    Meta         "meta"           meta          [Life],
    Weights      "weights"        weights       [Life],
    Groups       "groups"         groups        [Life],
    Completed    "completed"      completed     [View, Life],
    Results      "results"        results       [View, Life],
    Progress     "progress"       progress      [View, Life],
    Schedules    "schedules"      schedules     [Schedules],
    ScheduleDue  "schedules:due"  due           [Schedules],
    ScheduleRuns "schedules:runs" runs          [Schedules],
    ScheduleOwed "schedules:owed" owed          [Schedules],
    SchedulePaid "schedules:paid" paid          [Schedules],
    Claims       "claims"         claims        [Claims],
    ClaimsUntil  "claims:until"   claims_until  [Claims],
    Expiry       "expiry"         expiry        [View, Life],
    ExpiryDue    "expiry:due"     expiry_due    [Life],
    Backoff      "backoff"        backoff       [View, Life],
    Dedup        "dedup"          dedup         [Life],
    DedupOf      "dedup:of"       dedup_of      [View, Life],
    DedupUntil   "dedup:until"    dedup_until   [Life],
    Cancels      "cancels"        cancels       [View, Life],
    Waiting      "waiting"        waiting       [View, Life],
    After        "after"          after         [View, Life],
    AfterLeft    "after:left"     after_left    [View, Life],
    AfterDone    "after:done"     after_done    [View, Life],
    AfterEarly   "after:early"    after_early   [View, Life],
    Outbox       "outbox"         outbox        [View, Life],
    OutboxDue    "outbox:due"     outbox_due    [View, Life],
    Depended     "depended"       depended      [View, Life],
    Aging        "aging"          aging         [Life],
    Sizes        "sizes"          sizes         [Life],
    Push         "push"           push          [],
    PushSlots    "push:slots"     push_slots    [],
    // The list of queues: the one key of no queue's slot.
    Queues       "queues"         queues        [],
}

/// Keys that go together, named once: a function of the library takes
/// whole sets (see `store::library`), so a key every job needs is one row
/// above, and every function that runs a job's life takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySet {
    /// What a job's view reads: the sets of its states, its record and
    /// lease, its result and progress, its expiry, dedup key and cancel,
    /// its dependencies and its dependants.
    View,
    /// What a job's life reads and writes: its view's keys, and the
    /// queue's fair order (`pending`, `meta`, `weights`, `groups`), the
    /// expiry's and dedup keys' order.
    Life,
    /// The answers of claims kept under their request ids.
    Claims,
    /// The schedules, their fire times and the fires owed and paid.
    Schedules,
}

impl KeySet {
    /// The set's name as `lua/` headers list it, in capitals.
    pub fn name(self) -> &'static str {
        match self {
            Self::View => "VIEW",
            Self::Life => "LIFE",
            Self::Claims => "CLAIMS",
            Self::Schedules => "SCHEDULES",
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
    /// The keys of a queue's home, shard 0: all of an unsharded queue's.
    pub fn new(prefix: &str, queue: &str) -> Self {
        Self::with_tag(prefix, queue)
    }

    /// The keys of shard `shard` of a queue split over `shards`.
    pub fn shard(prefix: &str, queue: &str, shard: u32, shards: u32) -> Self {
        Self::with_tag(prefix, &shard_tag(queue, shard, shards))
    }

    fn with_tag(prefix: &str, tag: &str) -> Self {
        let key = |name: &str| format!("{prefix}:{{{tag}}}:{name}");
        Self {
            keys: Key::ALL.map(|k| match k {
                Key::Queues => registry(prefix),
                k => key(k.name()),
            }),
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

/// Hash slots of a Redis Cluster.
const SLOTS: u32 = 16_384;

/// The cluster slot of a hash tag.
fn slot(tag: &str) -> u32 {
    u32::from(crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes())) % SLOTS
}

/// The hash tag of shard `shard` of a queue split over `shards` (see the
/// module's header).
fn shard_tag(queue: &str, shard: u32, shards: u32) -> String {
    if shard == 0 {
        return queue.to_owned();
    }
    let range = |tag: &str| slot(tag) * shards / SLOTS;
    let wanted = (range(queue) + shard) % shards;
    (shard..shard.saturating_add(1_000_000))
        .map(|n| format!("{queue}#{n}"))
        .find(|tag| range(tag) == wanted)
        .unwrap_or_else(|| format!("{queue}#{shard}"))
}

/// The shard, of `shards`, that job `id` lives in: a fixed hash of the id
/// (XXH3, 64 bits), so the same id maps to the same shard everywhere.
pub fn shard_of(id: &str, shards: u32) -> u32 {
    if shards <= 1 {
        return 0;
    }
    (xxhash_rust::xxh3::xxh3_64(id.as_bytes()) % u64::from(shards)) as u32
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

/// The queue a channel belongs to (whichever of its shards the channel
/// is), and which of its channels it is.
pub(crate) fn queue_of_channel<'a>(prefix: &str, channel: &'a str) -> Option<(&'a str, Channel)> {
    let rest = channel.strip_prefix(prefix)?.strip_prefix(":{")?;
    Channel::ALL.into_iter().find_map(|kind| {
        rest.strip_suffix(kind.name())?
            .strip_suffix("}:")
            .map(|tag| (tag.split_once('#').map_or(tag, |(queue, _)| queue), kind))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::settings::table::MAX_SHARDS;

    #[test]
    fn every_key_of_a_queue_carries_its_hash_tag() {
        let keys = QueueKeys::new("prioq", "emails");
        let mut of_the_queue = Key::ALL.iter().filter(|k| **k != Key::Queues);
        assert!(of_the_queue.all(|k| keys.key(*k).contains("{emails}")));
        assert!(keys.wake_channel().contains("{emails}"));
        assert!(!registry("prioq").contains('{'));
        assert_eq!(keys.key(Key::Queues), registry("prioq"));
        assert_eq!(keys.key(Key::Meta), "prioq:{emails}:meta");
        assert_eq!(keys.group("tenant:7"), "prioq:{emails}:group:tenant:7");
    }

    #[test]
    fn shards_fall_in_distinct_slot_ranges_counted_from_the_home() {
        for shards in [2, 3, 8, MAX_SHARDS] {
            let ranges: Vec<u32> = (0..shards)
                .map(|s| {
                    let keys = QueueKeys::shard("p", "emails", s, shards);
                    let meta = keys.key(Key::Meta);
                    let tag = &meta[meta.find('{').unwrap() + 1..meta.find('}').unwrap()];
                    slot(tag) * shards / SLOTS
                })
                .collect();
            let mut distinct = ranges.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), shards as usize, "{ranges:?}");
        }
        assert_eq!(
            QueueKeys::shard("p", "emails", 0, 3).key(Key::Meta),
            "p:{emails}:meta"
        );
    }

    #[test]
    fn a_job_id_maps_to_one_shard_spread_evenly() {
        // Fixed: XXH3 of the id's bytes, as the reference implementation
        // computes it, modulo the shards.
        assert_eq!(shard_of("invoice-7", 1), 0);
        assert_eq!(
            [
                shard_of("invoice-7", 8),
                shard_of("a", 3),
                shard_of("b", 64)
            ],
            [6, 1, 63]
        );
        let mut counts = [0u32; 8];
        for n in 0..8000 {
            counts[shard_of(&format!("job-{n}"), 8) as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| (900..=1100).contains(c)),
            "{counts:?}"
        );
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
        let shard = QueueKeys::shard("p:x", "a.b-c", 2, 3);
        assert_eq!(
            queue_of_channel("p:x", shard.wake_channel()),
            Some(("a.b-c", Channel::Wake))
        );
        assert_eq!(queue_of_channel("other", keys.wake_channel()), None);
    }
}
