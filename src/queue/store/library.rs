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

use redis::{self, Cmd};

use super::call::{Call, Repeat};
use super::keys::{Key, KeySet, QueueKeys};
use crate::queue::settings::table;

/// The files of `lua/lib/`, which define no function, loaded first in
/// this order: the helpers every function shares by subject, then the
/// parts of `exchange`. The library is one Lua chunk, which may have at
/// most 200 locals at its top level, and it is near that: a test keeps
/// room for a few more.
const PARTS: [&str; 12] = [
    include_str!("../../../lua/lib/keys.lua"),
    include_str!("../../../lua/lib/record.lua"),
    include_str!("../../../lua/lib/meta.lua"),
    include_str!("../../../lua/lib/history.lua"),
    include_str!("../../../lua/lib/fair.lua"),
    include_str!("../../../lua/lib/dedup.lua"),
    include_str!("../../../lua/lib/transitions.lua"),
    include_str!("../../../lua/lib/deps.lua"),
    include_str!("../../../lua/lib/pages.lua"),
    include_str!("../../../lua/lib/ack.lua"),
    include_str!("../../../lua/lib/enqueue.lua"),
    include_str!("../../../lua/lib/claim.lua"),
];

/// Whether a function writes, and whether it may run while Redis is out
/// of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Flag `no-writes`: called with `FCALL_RO`, which a write pause lets
    /// through.
    Reads,
    /// Writes that may grow memory: refused, before they run, while Redis
    /// is out of memory.
    Writes,
    /// Flag `allow-oom`: writes that free memory or keep it level (acks,
    /// claims, nacks, extends, deletes), so that a queue that filled Redis
    /// can be drained.
    Drains,
}

/// What the loader and the callers know of one function.
#[derive(Debug)]
struct Spec {
    /// Its file's name in `lua/`, and its name in Redis before the version.
    stem: &'static str,
    file: &'static str,
    /// The sets of keys it takes, and the keys it takes besides.
    sets: &'static [KeySet],
    keys: &'static [Key],
    access: Access,
    /// The arguments every call starts with: 0 none, 1 the queue's wake-up
    /// channel, 2 that and the prefix of its group keys.
    leading: usize,
    /// Whether a call may be sent twice (`exchange`'s depends on what it
    /// carries: see `ExchangeBatch`).
    repeat: Repeat,
}

impl Spec {
    /// The keys it takes, in the order its header names them: those of
    /// its sets, in the order of `Key::ALL`, then its own, in its row's
    /// order (tools that call a function directly, such as
    /// `scripts/lua-instructions`, pass them so).
    fn taken(&self) -> Vec<Key> {
        Key::ALL
            .into_iter()
            .filter(|key| self.sets.iter().any(|set| key.is_in(*set)))
            .chain(self.keys.iter().copied())
            .collect()
    }
}

/// A row's file: its own stem's, or the one it names with `in`.
macro_rules! file_of {
    ($file:literal, $stem:literal) => {
        $file
    };
    ($stem:literal) => {
        $stem
    };
}

/// The library's functions, each one row: its `Function`, its stem and
/// file, the sets of keys it takes (`{...}`, see `KeySet`) and its other
/// keys (`[...]`), whether it only reads, its leading arguments, and
/// whether a call may be sent twice.
macro_rules! functions {
    ($($function:ident $stem:literal $(in $file:literal)?:
        $({$($set:ident),*})? $([$($key:ident),*])?
        $access:ident $leading:literal $repeat:ident,)*) => {
        /// A function of the library.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Function {
            $($function,)*
        }

        /// By `Function as usize`.
        const FUNCTIONS: &[Spec] = &[$(Spec {
            stem: $stem,
            file: include_str!(concat!("../../../lua/", file_of!($($file,)? $stem), ".lua")),
            sets: &[$($(KeySet::$set),*)?],
            keys: &[$($(Key::$key),*)?],
            access: Access::$access,
            leading: $leading,
            repeat: Repeat::$repeat,
        },)*];
    };
}

functions! {
    Exchange "exchange": {Life, Claims} Writes 2 Once,
    Drain "drain" in "exchange": {Life, Claims} Drains 2 Once,
    Line "line": {Life, Claims} Drains 2 Safe,
    Extend "extend": {View} [Meta] Drains 0 Safe,
    Nack "nack": {Life} Drains 2 Once,
    Sweep "sweep": {Life, Claims, Schedules} [Push] Drains 2 Safe,
    Job "job": {View} Reads 0 Safe,
    Find "find": {View} Reads 0 Safe,
    Watch "watch": {View} [Meta] Drains 0 Safe,
    Cancel "cancel": {Life} Drains 2 Safe,
    Delete "delete": {Life} Drains 2 Once,
    Requeue "requeue": [Pending, Dead, Jobs, Meta, Weights, Groups, Aging, Sizes] Writes 2 Once,
    DeadJobs "dead_jobs": [Dead, Jobs] Reads 0 Safe,
    Stats "stats": [Pending, Scheduled, Processing, Dead, Jobs, Meta, Groups, Completed, Waiting] Reads 0 Safe,
    Fill "fill": [Processing, Dead, Jobs, Completed, Meta] Reads 0 Safe,
    Ready "ready": Drains 0 Safe,
    Groups "groups": [Groups, Meta, Weights] Reads 0 Safe,
    Settings "settings": [Meta, Weights] Reads 0 Safe,
    Configure "configure": [Meta, Weights, Aging, Sizes] Writes 1 Safe,
    Fire "fire": {Life} [ScheduleDue, ScheduleRuns, ScheduleOwed] Writes 2 Once,
    Schedules "schedules": [Schedules, ScheduleDue, ScheduleRuns] Reads 0 Safe,
    PutSchedule "put_schedule": [Schedules, ScheduleDue, ScheduleRuns, Meta] Writes 0 Safe,
    DeleteSchedule "delete_schedule": [Schedules, ScheduleDue, ScheduleRuns] Drains 0 Once,
    Pay "pay": {Life} [SchedulePaid] Writes 2 Safe,
    Reshard "reshard": [Meta, Jobs] Writes 0 Safe,
    Register "register": [Queues] Writes 0 Safe,
    Listing "listing": [Meta, Processing, Leases, Groups] Writes 0 Safe,
    Dependency "dependency": [Jobs, Dead, Completed, Results, Cancels, Meta, Depended] Writes 0 Safe,
    Tell "tell": {Life} Writes 2 Safe,
    Outbox "outbox": [Outbox, OutboxDue, Meta] Reads 0 Safe,
    Sent "sent": [Outbox, OutboxDue, Meta, Depended] Drains 0 Safe,
    Drop "drop": {Life, Claims, Schedules} [Push, PushSlots] Drains 2 Safe,
    Push "push": [Push, PushSlots] Drains 0 Once,
    PushView "push_view" in "push": [Push, PushSlots] Reads 0 Safe,
    History "history": [Jobs] Reads 0 Safe,
}

impl Function {
    fn spec(self) -> &'static Spec {
        &FUNCTIONS[self as usize]
    }
}

/// The functions' files, each once, in the table's order.
fn files() -> Vec<String> {
    let mut files: Vec<&str> = Vec::new();
    for spec in FUNCTIONS {
        if !files.contains(&spec.file) {
            files.push(spec.file);
        }
    }
    files.into_iter().map(str::to_owned).collect()
}

/// The table's keys and leading arguments, for the functions to name
/// their keys by (see `queue_of` in `lua/lib/keys.lua`): `QUEUE_OF[stem]`
/// builds a call's table of its keys by field, in the order the table
/// lists them, and of its leading arguments (the wake-up channel, then the
/// group key prefix), in one table constructor: no table grows key by key
/// on every call.
fn lua_table() -> String {
    const LEADING: [&str; 2] = ["wake", "group_prefix"];
    let mut out = String::from("local QUEUE_OF = {\n");
    for spec in FUNCTIONS {
        let fields: Vec<String> = spec
            .taken()
            .iter()
            .enumerate()
            .map(|(i, key)| format!("{} = keys[{}]", key.field(), i + 1))
            .chain(
                LEADING[..spec.leading]
                    .iter()
                    .enumerate()
                    .map(|(i, name)| format!("{name} = argv[{}]", i + 1)),
            )
            .collect();
        out.push_str(&format!(
            "  {} = function(keys, argv) return {{{}}} end,\n",
            spec.stem,
            fields.join(", ")
        ));
    }
    out.push_str("}\n");
    out
}

/// The library's code and names.
#[derive(Debug)]
pub struct Library {
    version: String,
    source: String,
    /// By `Function as usize`.
    names: Vec<String>,
    /// The keys each function takes, by `Function as usize`.
    keys: Vec<Vec<Key>>,
}

/// The library this build of prioq calls.
pub static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let code = [
        lua_table(),
        table::lua_table(),
        format!("local MARK = '{}'\n", super::keys::MARK),
    ]
    .into_iter()
    .chain(PARTS.iter().map(|part| (*part).to_owned()))
    .chain(files())
    .collect::<String>();
    // SHA-1 of the code, as Redis names scripts; 12 hex digits tell
    // versions apart.
    let version = redis::Script::new(&code).get_hash()[..12].to_owned();
    Library {
        source: format!("#!lua name=prioq_{version}\nlocal VERSION = '{version}'\n{code}"),
        names: FUNCTIONS
            .iter()
            .map(|spec| format!("{}_{version}", spec.stem))
            .collect(),
        keys: FUNCTIONS.iter().map(Spec::taken).collect(),
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
    pub fn call(&self, function: Function, queue: &QueueKeys) -> Call {
        /// Arguments besides the keys, and their bytes, that a call of one
        /// job (its record's body included) takes about.
        const CALL_ARGS: usize = 32;
        const CALL_ARG_BYTES: usize = 1024;
        /// A key's bytes, about: prefix, hash tag, name.
        const KEY_BYTES: usize = 48;
        let spec = function.spec();
        let keys = &self.keys[function as usize];
        // Room for the keys and a single job's arguments from the start:
        // the command's buffers otherwise grow by reallocation, several
        // times per call.
        let mut cmd = redis::Cmd::with_capacity(
            keys.len() + CALL_ARGS,
            KEY_BYTES * keys.len() + CALL_ARG_BYTES,
        );
        cmd.arg(if spec.access == Access::Reads {
            "FCALL_RO"
        } else {
            "FCALL"
        });
        cmd.arg(&self.names[function as usize]).arg(keys.len());
        for key in keys {
            cmd.arg(queue.key(*key));
        }
        if spec.leading >= 1 {
            cmd.arg(queue.wake_channel());
        }
        if spec.leading >= 2 {
            cmd.arg(queue.group_prefix());
        }
        Call {
            cmd,
            repeat: spec.repeat,
        }
    }

    /// `FCALL` of a function that takes no key.
    pub fn call_keyless(&self, function: Function) -> Call {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&self.names[function as usize]).arg(0);
        Call {
            cmd,
            repeat: function.spec().repeat,
        }
    }
}

#[cfg(test)]
mod tests;
