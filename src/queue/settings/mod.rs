//! A queue's settings as Redis keeps them: fields of its `meta` hash and
//! its `weights` hash, read and changed by the functions `settings` and
//! `configure`. `table` describes every setting once; the checks of a
//! change and their messages (`SettingsChange::from_patch`), the API's
//! view (`Settings::view`), the OpenAPI schemas (`http::settings`) and the
//! fields the functions read (`table::lua_table`, written into the
//! library) are derived from it. A sharded queue keeps a copy in every
//! shard, each shard enforcing its share of the caps and the rate; its
//! number of shards is changed by `reshard`, step by step.

use std::collections::BTreeMap;

use futures_util::future::try_join_all;
use serde_json::{Map, Value, json};

use super::broker::Broker;
use super::error::{QueueError, Result};
use super::store::keys::QueueKeys;
use super::store::library::{Function, LIBRARY};

pub mod change;
pub mod table;

use change::SettingsChange;
use table::{Kind, SETTINGS, SHARDS, Setting};

/// A queue's settings as its home keeps them: the fields of `meta` that
/// are set, and the weights set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    fields: BTreeMap<String, String>,
    weights: BTreeMap<String, u32>,
}

/// What `configure` does with a change in one shard.
#[derive(Debug, Clone, Copy)]
enum Write {
    /// Checks it and writes nothing.
    Check,
    /// Writes it.
    Quiet,
    /// Writes it and wakes the claims waiting on the queue.
    Wake,
}

/// The settings `configure` writes: all but the weights and the shards.
fn configured() -> impl Iterator<Item = &'static Setting> {
    SETTINGS
        .iter()
        .filter(|s| s.path != SHARDS && !matches!(s.kind, Kind::Weights { .. }))
}

impl Kind {
    /// The API's value for what `meta` holds (`None`: nothing).
    fn decode(self, stored: Option<&str>) -> Value {
        match self {
            Self::Flag => json!(stored == Some("1")),
            // A queue mid-change of its shards holds -k.
            Self::Count { default, .. } => stored
                .and_then(|v| v.parse::<i64>().ok())
                .map(i64::unsigned_abs)
                .or(default)
                .map_or(Value::Null, |n| json!(n)),
            Self::Rate { .. } => stored
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(Value::Null, |n| json!(n)),
            Self::Weights { .. } => Value::Null,
        }
    }
}

/// The functions' reply: the settings in `meta` and the weights hash,
/// each as field, value pairs.
type RawSettings = (Vec<(String, String)>, Vec<(String, u32)>);

impl Settings {
    fn from_raw((fields, weights): RawSettings) -> Self {
        Self {
            fields: fields.into_iter().collect(),
            weights: weights.into_iter().collect(),
        }
    }

    /// The settings as the API shows them, in the table's order: every
    /// setting, its default when not set; an object `null` when none of
    /// its fields is set.
    pub fn view(&self) -> Vec<(&'static str, Value)> {
        let mut view: Vec<(&'static str, Value)> = Vec::new();
        for setting in SETTINGS {
            let value = match setting.kind {
                Kind::Weights { .. } => json!(self.weights),
                kind => kind.decode(self.fields.get(setting.field).map(String::as_str)),
            };
            match setting.member() {
                None => view.push((setting.path, value)),
                Some((object, name)) => {
                    if view.last().is_none_or(|(last, _)| *last != object) {
                        view.push((object, Value::Null));
                    }
                    let Some((_, entry)) = view.last_mut() else {
                        continue;
                    };
                    if !value.is_null() {
                        if entry.is_null() {
                            *entry = Value::Object(Map::new());
                        }
                        if let Value::Object(members) = entry {
                            members.insert(name.to_owned(), value);
                        }
                    }
                }
            }
        }
        view
    }

    /// The change that makes a shard's settings these, whatever they
    /// were.
    fn replacement(&self) -> SettingsChange {
        SettingsChange {
            fields: configured()
                .map(|setting| {
                    let value = self.fields.get(setting.field).cloned();
                    (setting.field, value.unwrap_or_default())
                })
                .collect(),
            clear_weights: true,
            group_weights: self
                .weights
                .iter()
                .map(|(group, weight)| (group.clone(), Some(*weight)))
                .collect(),
            shards: None,
        }
    }

    /// Whether claims hand out nothing.
    pub fn paused(&self) -> bool {
        self.fields.get("paused").is_some_and(|v| v == "1")
    }
}

impl Broker {
    /// The queue's settings; defaults for a queue never configured.
    pub async fn settings(&self, queue: &str) -> Result<Settings> {
        self.settings_in(&self.shards.of(queue).await?.home().keys)
            .await
    }

    async fn settings_in(&self, keys: &QueueKeys) -> Result<Settings> {
        let cmd = LIBRARY.call(Function::Settings, keys);
        Ok(Settings::from_raw(self.call::<RawSettings>(&cmd).await?))
    }

    /// Changes the queue's settings at once on every instance, and wakes
    /// the claims waiting on it; answers the settings after the change.
    /// A sharded queue's other shards take the change first, all at once,
    /// then the home, whose call wakes the waiting claims: they look again
    /// with every shard changed. Every shard holds the same settings, so a
    /// change one refuses (INVALID) all refuse. A change of the number of
    /// shards comes first; when it is refused (the queue holds jobs)
    /// nothing changes. A queue this instance has not listed yet is
    /// listed only once its home accepts the change, so a refused change
    /// lists nothing either.
    pub async fn configure(&self, queue: &str, change: &SettingsChange) -> Result<Settings> {
        if change.changes_fields() && !self.is_registered(queue) {
            let shards = self.shards.of(queue).await?;
            self.configure_in(&shards.home().keys, change, Write::Check)
                .await?;
        }
        self.register(queue, false).await?;
        if let Some(shards) = change.shards {
            self.reshard(queue, shards).await?;
        }
        let shards = self.shards.of(queue).await?;
        if !change.changes_fields() {
            return self.settings_in(&shards.home().keys).await;
        }
        try_join_all(
            shards.shards[1..]
                .iter()
                .map(|shard| self.configure_in(&shard.keys, change, Write::Quiet)),
        )
        .await?;
        self.configure_in(&shards.home().keys, change, Write::Wake)
            .await
    }

    async fn configure_in(
        &self,
        keys: &QueueKeys,
        change: &SettingsChange,
        write: Write,
    ) -> Result<Settings> {
        let mut cmd = LIBRARY.call(Function::Configure, keys);
        cmd.arg(change.fields.len());
        for (field, value) in &change.fields {
            cmd.arg(*field).arg(value);
        }
        cmd.arg(if change.clear_weights { "1" } else { "0" })
            .arg(change.group_weights.len());
        for (group, weight) in &change.group_weights {
            cmd.arg(group)
                .arg(weight.map(|w| w.to_string()).unwrap_or_default());
        }
        cmd.arg(match write {
            Write::Check => "check",
            Write::Quiet => "write",
            Write::Wake => "wake",
        });
        Ok(Settings::from_raw(self.call::<RawSettings>(&cmd).await?))
    }

    /// Splits the queue over `shards` shards: freezes every current shard
    /// (their enqueues wait), and when none holds a job, gives the shards
    /// of the new count the home's settings and the new count, the home
    /// last; else unfreezes them and answers `NotEmpty`. A change cut
    /// short leaves the queue frozen until it is asked again.
    async fn reshard(&self, queue: &str, shards: u32) -> Result<()> {
        let prefix = &self.config.key_prefix;
        let keys = |shard: u32, of: u32| QueueKeys::shard(prefix, queue, shard, of);
        let recorded = self.shards.home_count(queue).await?;
        let old = u32::try_from(recorded.unsigned_abs()).unwrap_or(1);
        if old == shards && recorded > 0 {
            return Ok(());
        }
        let step = |keys: QueueKeys, mode: &'static str, value: u32| async move {
            let mut cmd = LIBRARY.call(Function::Reshard, &keys);
            cmd.arg(mode).arg(value);
            self.call::<u64>(&cmd).await
        };
        let held = try_join_all((0..old).map(|s| step(keys(s, old), "freeze", old))).await?;
        if held.iter().any(|jobs| *jobs > 0) {
            try_join_all((0..old).map(|s| step(keys(s, old), "set", old))).await?;
            return Err(QueueError::NotEmpty);
        }
        // Old shards beyond the new count forget it: a stale
        // router's call there is refused.
        try_join_all((1..old).map(|s| step(keys(s, old), "set", 1))).await?;
        let settings = self.settings_in(&keys(0, old)).await?;
        let copy = settings.replacement();
        for shard in 1..shards {
            self.configure_in(&keys(shard, shards), &copy, Write::Quiet)
                .await?;
            step(keys(shard, shards), "set", shards).await?;
        }
        step(keys(0, shards), "set", shards).await?;
        self.shards.reroute(queue).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_back_as_the_api_shows_them() {
        let raw = (
            vec![
                ("paused".into(), "1".into()),
                ("rate_per_second".into(), "2.5".into()),
                ("rate_burst".into(), "5".into()),
                ("shards".into(), "-3".into()),
            ],
            vec![("a".into(), 3)],
        );
        let view = Settings::from_raw(raw).view();
        let names: Vec<&str> = view.iter().map(|(name, _)| *name).collect();
        let view: Map<String, Value> = view
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        // In the table's order, each once.
        assert_eq!(names.first(), Some(&"paused"));
        assert_eq!(names.len(), view.len());
        assert_eq!(view["paused"], json!(true));
        assert_eq!(view["max_in_flight"], Value::Null);
        assert_eq!(view["rate_limit"], json!({"per_second": 2.5, "burst": 5}));
        assert_eq!(view["group_weights"], json!({"a": 3}));
        assert_eq!(view["retain_ms"], json!(0));
        assert_eq!(view["shards"], json!(3));
    }
}
