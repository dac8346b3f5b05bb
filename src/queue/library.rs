//! prioq's Redis Functions library: the files of `lua/` put together under
//! a versioned name, loaded once per Redis primary, and called with
//! `FCALL`.
//!
//! The library is `prioq_<version>` and its functions `<name>_<version>`,
//! `<version>` being a hash of the code: function names are global in a
//! Redis, and during a rolling upgrade two versions of prioq run side by
//! side, each calling its own. A fresh Redis, a new cluster primary or a
//! failover to a replica that never got the library answers "Function not
//! found"; the caller then loads the library and tries once more.

use std::sync::LazyLock;

use redis::{self, Cmd, RedisError};

use super::keys::{Key, QueueKeys};

/// The helpers first, then the parts of `exchange`, then one file per
/// function.
const FILES: [&str; 25] = [
    include_str!("../../lua/library.lua"),
    include_str!("../../lua/ack.lua"),
    include_str!("../../lua/enqueue.lua"),
    include_str!("../../lua/claim.lua"),
    include_str!("../../lua/exchange.lua"),
    include_str!("../../lua/extend.lua"),
    include_str!("../../lua/nack.lua"),
    include_str!("../../lua/sweep.lua"),
    include_str!("../../lua/job.lua"),
    include_str!("../../lua/watch.lua"),
    include_str!("../../lua/delete.lua"),
    include_str!("../../lua/requeue.lua"),
    include_str!("../../lua/dead_jobs.lua"),
    include_str!("../../lua/stats.lua"),
    include_str!("../../lua/ready.lua"),
    include_str!("../../lua/groups.lua"),
    include_str!("../../lua/settings.lua"),
    include_str!("../../lua/configure.lua"),
    include_str!("../../lua/fire.lua"),
    include_str!("../../lua/schedules.lua"),
    include_str!("../../lua/put_schedule.lua"),
    include_str!("../../lua/delete_schedule.lua"),
    include_str!("../../lua/pay.lua"),
    include_str!("../../lua/heads.lua"),
    include_str!("../../lua/reshard.lua"),
];

/// A function of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Exchange,
    Extend,
    Nack,
    Sweep,
    Job,
    Watch,
    Delete,
    Requeue,
    DeadJobs,
    Stats,
    Ready,
    Groups,
    Settings,
    Configure,
    Fire,
    Schedules,
    PutSchedule,
    DeleteSchedule,
    Pay,
    Heads,
    Reshard,
}

impl Function {
    const ALL: [Self; 21] = [
        Self::Exchange,
        Self::Extend,
        Self::Nack,
        Self::Sweep,
        Self::Job,
        Self::Watch,
        Self::Delete,
        Self::Requeue,
        Self::DeadJobs,
        Self::Stats,
        Self::Ready,
        Self::Groups,
        Self::Settings,
        Self::Configure,
        Self::Fire,
        Self::Schedules,
        Self::PutSchedule,
        Self::DeleteSchedule,
        Self::Pay,
        Self::Heads,
        Self::Reshard,
    ];

    fn stem(self) -> &'static str {
        match self {
            Self::Exchange => "exchange",
            Self::Extend => "extend",
            Self::Nack => "nack",
            Self::Sweep => "sweep",
            Self::Job => "job",
            Self::Watch => "watch",
            Self::Delete => "delete",
            Self::Requeue => "requeue",
            Self::DeadJobs => "dead_jobs",
            Self::Stats => "stats",
            Self::Ready => "ready",
            Self::Groups => "groups",
            Self::Settings => "settings",
            Self::Configure => "configure",
            Self::Fire => "fire",
            Self::Schedules => "schedules",
            Self::PutSchedule => "put_schedule",
            Self::DeleteSchedule => "delete_schedule",
            Self::Pay => "pay",
            Self::Heads => "heads",
            Self::Reshard => "reshard",
        }
    }

    /// The keys the function takes, in the order of its file's header.
    fn keys(self) -> &'static [Key] {
        use Key::*;
        match self {
            Self::Exchange | Self::Nack | Self::Heads => &[
                Pending, Scheduled, Processing, Dead, Jobs, Leases, Meta, Weights, Groups,
                Completed, Results, Progress,
            ],
            Self::Sweep => &[
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
                ScheduleOwed,
            ],
            Self::Fire => &[
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
                ScheduleDue,
                ScheduleRuns,
                ScheduleOwed,
            ],
            Self::Pay => &[
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
                SchedulePaid,
            ],
            Self::Reshard => &[Meta, Jobs],
            Self::Schedules | Self::DeleteSchedule => &[Schedules, ScheduleDue, ScheduleRuns],
            Self::PutSchedule => &[Schedules, ScheduleDue, ScheduleRuns],
            Self::Job => &[
                Scheduled, Processing, Dead, Jobs, Leases, Completed, Results, Progress,
            ],
            Self::Extend | Self::Watch => &[
                Scheduled, Processing, Dead, Jobs, Leases, Completed, Results, Progress, Meta,
            ],
            Self::Delete => &[
                Pending, Scheduled, Processing, Dead, Jobs, Meta, Groups, Leases, Completed,
                Results, Progress,
            ],
            Self::Requeue => &[Pending, Dead, Jobs, Meta, Weights, Groups],
            Self::DeadJobs => &[Dead, Jobs],
            Self::Stats => &[
                Pending, Scheduled, Processing, Dead, Jobs, Meta, Groups, Completed,
            ],
            Self::Ready => &[],
            Self::Groups => &[Groups, Meta, Weights],
            Self::Settings | Self::Configure => &[Meta, Weights],
        }
    }

    /// Whether the function only reads (flag `no-writes`): it is called
    /// with `FCALL_RO`, which a write pause lets through.
    fn reads_only(self) -> bool {
        matches!(
            self,
            Self::Job
                | Self::DeadJobs
                | Self::Stats
                | Self::Groups
                | Self::Settings
                | Self::Schedules
        )
    }

    /// The arguments every call of the function starts with: the queue's
    /// wake-up channel and the prefix of its group keys, when it takes
    /// them.
    fn leading_args(self) -> (bool, bool) {
        match self {
            Self::Exchange
            | Self::Nack
            | Self::Sweep
            | Self::Requeue
            | Self::Delete
            | Self::Fire
            | Self::Pay
            | Self::Heads => (true, true),
            Self::Configure => (true, false),
            Self::Extend
            | Self::Job
            | Self::Watch
            | Self::DeadJobs
            | Self::Stats
            | Self::Ready
            | Self::Groups
            | Self::Settings
            | Self::Schedules
            | Self::PutSchedule
            | Self::DeleteSchedule
            | Self::Reshard => (false, false),
        }
    }
}

/// The library's code and names.
#[derive(Debug)]
pub struct Library {
    version: String,
    source: String,
    /// By `Function as usize`.
    names: Vec<String>,
}

/// The library this build of prioq calls.
pub static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let code = FILES.concat();
    // SHA-1 of the code, as Redis names scripts; 12 hex digits tell
    // versions apart.
    let version = redis::Script::new(&code).get_hash()[..12].to_owned();
    Library {
        source: format!("#!lua name=prioq_{version}\nlocal VERSION = '{version}'\n{code}"),
        names: Function::ALL
            .iter()
            .map(|f| format!("{}_{version}", f.stem()))
            .collect(),
        version,
    }
});

impl Library {
    /// The library's name in Redis, `prioq_<version>`.
    pub fn name(&self) -> String {
        format!("prioq_{}", self.version)
    }

    /// `FUNCTION LOAD REPLACE`: loading the same version again is harmless,
    /// and a cluster client sends it to every primary.
    pub fn load_command(&self) -> Cmd {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("LOAD").arg("REPLACE").arg(&self.source);
        cmd
    }

    /// `FCALL` (`FCALL_RO` for a reading function) of `function` with the
    /// keys of `queue` it takes, then the queue's wake-up channel and
    /// group key prefix when it takes them; the caller adds the rest of
    /// its arguments.
    pub fn call(&self, function: Function, queue: &QueueKeys) -> Cmd {
        let keys = function.keys();
        let mut cmd = redis::cmd(if function.reads_only() {
            "FCALL_RO"
        } else {
            "FCALL"
        });
        cmd.arg(&self.names[function as usize]).arg(keys.len());
        for key in keys {
            cmd.arg(queue.key(*key));
        }
        let (wake, group_prefix) = function.leading_args();
        if wake {
            cmd.arg(queue.wake_channel());
        }
        if group_prefix {
            cmd.arg(queue.group_prefix());
        }
        cmd
    }

    /// `FCALL` of a function that takes no key.
    pub fn call_keyless(&self, function: Function) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&self.names[function as usize]).arg(0);
        cmd
    }
}

/// Whether Redis answered that the function is not loaded there.
pub fn is_function_missing(error: &RedisError) -> bool {
    error.code() == Some("ERR") && error.detail() == Some("Function not found")
}

/// Whether Redis does not know Functions at all: it is older than 7.0.
pub fn is_too_old(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|detail| detail.starts_with("unknown command"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_is_registered_under_its_versioned_name() {
        for function in Function::ALL {
            let registration = format!("'{}_' .. VERSION", function.stem());
            assert!(
                LIBRARY.source.contains(&registration),
                "{function:?} is not registered as {registration}"
            );
        }
        assert!(
            LIBRARY
                .source
                .starts_with(&format!("#!lua name={}\n", LIBRARY.name()))
        );
    }

    #[test]
    fn reading_functions_are_declared_no_writes() {
        for function in Function::ALL {
            let file = file_of(function);
            assert_eq!(
                file.contains("flags = {'no-writes'}"),
                function.reads_only(),
                "{function:?}"
            );
        }
    }

    fn file_of(function: Function) -> &'static str {
        FILES
            .iter()
            .find(|file| file.starts_with(&format!("-- {}:", function.stem())))
            .unwrap_or_else(|| panic!("no file for {function:?}"))
    }

    #[test]
    fn every_key_a_function_takes_is_in_its_header() {
        // The header's `-- KEYS:` line lists the keys by name, in order.
        for function in Function::ALL {
            // The list may go on over lines that start with `--   `.
            let mut lines = file_of(function).lines();
            let mut text = lines
                .find_map(|line| line.strip_prefix("-- KEYS: "))
                .unwrap_or_default()
                .to_owned();
            for line in lines {
                match line.strip_prefix("--   ") {
                    Some(more) if text.ends_with(',') => text = format!("{text} {more}"),
                    _ => break,
                }
            }
            let listed: Vec<String> = text
                .split(", ")
                .filter(|key| !key.is_empty())
                .map(str::to_owned)
                .collect();
            let taken: Vec<String> = function
                .keys()
                .iter()
                .map(|key| {
                    QueueKeys::new("p", "q")
                        .key(*key)
                        .trim_start_matches("p:{q}:")
                        .to_owned()
                })
                .collect();
            assert_eq!(listed, taken, "{function:?}");
        }
    }
}
