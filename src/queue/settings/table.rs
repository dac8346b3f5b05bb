//! The table of a queue's settings: one row each, from which everything
//! else is derived.

/// The longest a job is kept once acked: 30 days, in ms (the bound of
/// `retain_ms`, the setting and the job option).
pub const MAX_RETAIN_MS: u64 = 2_592_000_000;

/// Shards a queue can be split over at most.
pub const MAX_SHARDS: u32 = 64;

/// One queue setting.
#[derive(Debug)]
pub struct Setting {
    /// Its name in the API: a field of the settings object, or
    /// `object.field` for a field of one of its objects (see `OBJECTS`).
    pub path: &'static str,
    /// Where Redis keeps it: a field of the queue's `meta` hash (the
    /// weights: a hash of their own).
    pub field: &'static str,
    pub kind: Kind,
    /// How each shard of a queue split over K enforces it.
    pub share: Share,
    /// What it does, for the API's reference.
    pub doc: &'static str,
}

/// The values a setting takes, and its default (a queue never configured
/// has it; Redis keeps no field for it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `true` or `false`, default `false`; kept as `1`.
    Flag,
    /// A whole number from `min` to `max`; its default `default`, or
    /// `null` (none) when that is `None`.
    Count {
        min: u64,
        max: u64,
        default: Option<u64>,
    },
    /// A number from `min` to `max`, default `null`.
    Rate { min: f64, max: f64 },
    /// Weights from 1 to `max` by group, at most `groups` of them; a group
    /// not named weighs 1.
    Weights { max: u64, groups: usize },
}

/// How a shard of a queue split over K enforces a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// As it is.
    Whole,
    /// ⌈value / K⌉.
    Ceil,
    /// value / K.
    Divide,
}

impl Share {
    fn name(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Ceil => "ceil",
            Self::Divide => "divide",
        }
    }
}

/// An object of the settings: its members are the settings whose path
/// starts with its name and a dot; they are set together or not at all.
#[derive(Debug)]
pub struct Object {
    pub name: &'static str,
    /// The name of its schema in the OpenAPI document (suffixed `View` and
    /// `Patch`), shared by objects of the same shape.
    pub schema: &'static str,
    pub doc: &'static str,
}

/// Every queue setting.
pub const SETTINGS: &[Setting] = &[
    Setting {
        path: "paused",
        field: "paused",
        kind: Kind::Flag,
        share: Share::Whole,
        doc: "While true, claims hand out nothing; enqueue, ack, extend, nack and the sweeper go on.",
    },
    Setting {
        path: "max_in_flight",
        field: "max_in_flight",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000,
            default: None,
        },
        share: Share::Ceil,
        doc: "Jobs of the queue processing at once at most, fleet-wide.",
    },
    Setting {
        path: "rate_limit.per_second",
        field: "rate_per_second",
        kind: Kind::Rate {
            min: 0.001,
            max: 1_000_000.0,
        },
        share: Share::Divide,
        doc: "Tokens the bucket gains per second.",
    },
    Setting {
        path: "rate_limit.burst",
        field: "rate_burst",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000,
            default: None,
        },
        share: Share::Ceil,
        doc: "Tokens the bucket holds at most.",
    },
    Setting {
        path: "group_weights",
        field: "weights",
        kind: Kind::Weights {
            max: 100,
            groups: 10_000,
        },
        share: Share::Whole,
        doc: "Groups' weights in their fair share inside a priority; they apply to jobs enqueued after the change.",
    },
    Setting {
        path: "group_max_in_flight",
        field: "group_max_in_flight",
        kind: Kind::Count {
            min: 1,
            max: 100_000,
            default: None,
        },
        share: Share::Ceil,
        doc: "Jobs of one named group processing at once at most, fleet-wide.",
    },
    Setting {
        path: "group_rate_limit.per_second",
        field: "group_rate_per_second",
        kind: Kind::Rate {
            min: 0.001,
            max: 1_000_000.0,
        },
        share: Share::Divide,
        doc: "Tokens each named group's bucket gains per second.",
    },
    Setting {
        path: "group_rate_limit.burst",
        field: "group_rate_burst",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000,
            default: None,
        },
        share: Share::Ceil,
        doc: "Tokens each named group's bucket holds at most.",
    },
    Setting {
        path: "max_wait_ms",
        field: "max_wait_ms",
        kind: Kind::Count {
            min: 1,
            max: 2_592_000_000,
            default: None,
        },
        share: Share::Whole,
        doc: "Priority aging: a job without a group that waits this long (ms) in its priority is claimed as if it had the next more urgent one, at its front (after the jobs that aged into it before), and so on: a job of priority p is claimed as priority 0 after p × max_wait_ms at most. Applies to jobs that enter pending once it is set.",
    },
    Setting {
        path: "max_pending",
        field: "max_pending",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000_000,
            default: None,
        },
        share: Share::Ceil,
        doc: "Jobs waiting to be handed out (pending, scheduled, or waiting for their dependencies) at most: an enqueue whose new jobs would go past it answers 429 `queue_full` and changes nothing. A queue split over K shards bounds each shard at ⌈max_pending / K⌉.",
    },
    Setting {
        path: "max_pending_bytes",
        field: "max_pending_bytes",
        kind: Kind::Count {
            min: 1,
            max: 1_000_000_000_000,
            default: None,
        },
        share: Share::Ceil,
        doc: "Bytes of waiting jobs at most, counted as stored: each job's task, args as sent and trace context (pending, scheduled, or waiting for their dependencies). An enqueue whose new jobs would go past it answers 429 `queue_full` and changes nothing. Counts the jobs that enter waiting once it is set (enqueued, or back from a lease's end or the DLQ); a replace by dedup key is admitted whatever it. A queue split over K shards bounds each shard at ⌈max_pending_bytes / K⌉.",
    },
    Setting {
        path: "retain_ms",
        field: "retain_ms",
        kind: Kind::Count {
            min: 0,
            max: MAX_RETAIN_MS,
            default: Some(0),
        },
        share: Share::Whole,
        doc: "How long jobs enqueued without a `retain_ms` of their own are kept once acked (ms; 0: deleted on ack).",
    },
    Setting {
        path: "history_ms",
        field: "history_ms",
        kind: Kind::Count {
            min: 0,
            max: MAX_RETAIN_MS,
            default: Some(0),
        },
        share: Share::Whole,
        doc: "How long a job's history is kept after its last event (ms; 0: none is kept): its enqueue, each claim with its worker and fence, each nack and lease expiry with its error, and its end, up to its last 100 events, read with `GET …/jobs/{id}/history`. Applies to events after it is set; each event costs one write to Redis.",
    },
    Setting {
        path: "shards",
        field: "shards",
        kind: Kind::Count {
            min: 1,
            max: MAX_SHARDS as u64,
            default: Some(1),
        },
        share: Share::Whole,
        doc: "The number of Redis hash slots the queue's jobs are spread over. Changes only while the queue holds no job in any state, else 409 and nothing changes.",
    },
];

/// The objects of the settings.
pub const OBJECTS: &[Object] = &[
    Object {
        name: "rate_limit",
        schema: "RateLimit",
        doc: "Over any t seconds the fleet hands out at most burst + per_second × t jobs.",
    },
    Object {
        name: "group_rate_limit",
        schema: "RateLimit",
        doc: "Over any t seconds the fleet hands out at most burst + per_second × t jobs of each named group; a group at its limit waits without holding back the others.",
    },
];

/// The setting the queue's shards are counted by: applied by resharding,
/// not by `configure`.
pub const SHARDS: &str = "shards";

impl Setting {
    /// The object it belongs to and its name there, or `None` for a field
    /// of the settings object itself.
    pub fn member(&self) -> Option<(&'static str, &'static str)> {
        self.path.split_once('.')
    }

    /// Its name as a field of its object, or of the settings object.
    pub fn name(&self) -> &'static str {
        self.member().map_or(self.path, |(_, name)| name)
    }
}

impl Object {
    pub fn members(&self) -> impl Iterator<Item = &'static Setting> + '_ {
        SETTINGS.iter().filter(|setting| {
            setting
                .member()
                .is_some_and(|(object, _)| object == self.name)
        })
    }
}

/// The settings in `meta`, for the functions (see `lua/lib/meta.lua`'s
/// `context`): per setting its field, kind and share, and per object the
/// fields set together with their paths.
pub fn lua_table() -> String {
    let mut out = String::from("local SETTINGS = {\n");
    for setting in SETTINGS {
        let (kind, default) = match setting.kind {
            Kind::Flag => ("flag", None),
            Kind::Count { default, .. } => ("count", default),
            Kind::Rate { .. } => ("rate", None),
            // Not in `meta`: read on their own, when needed.
            Kind::Weights { .. } => continue,
        };
        let default = default.map_or_else(|| "nil".to_owned(), |d| d.to_string());
        out.push_str(&format!(
            "  {{field = '{}', kind = '{kind}', default = {default}, share = '{}'}},\n",
            setting.field,
            setting.share.name()
        ));
    }
    out.push_str("}\nlocal TOGETHER = {\n");
    for object in OBJECTS {
        let members: Vec<String> = object
            .members()
            .map(|m| format!("{{'{}', '{}'}}", m.field, m.path))
            .collect();
        out.push_str(&format!("  {{{}}},\n", members.join(", ")));
    }
    out.push_str("}\n");
    for setting in SETTINGS {
        if let Kind::Weights { groups, .. } = setting.kind {
            out.push_str(&format!("local MAX_WEIGHTS = {groups}\n"));
        }
    }
    out
}
