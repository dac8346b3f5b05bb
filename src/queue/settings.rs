//! A queue's settings as Redis keeps them: fields of its `meta` hash and
//! its `weights` hash, read and changed by the functions `settings` and
//! `configure`. A sharded queue keeps a copy in every shard, each shard
//! enforcing its share of the caps and the rate; its number of shards is
//! changed by `reshard`, step by step.

use std::collections::BTreeMap;

use futures_util::future::try_join_all;

use super::store::keys::QueueKeys;
use super::store::library::{Function, LIBRARY};
use super::{Broker, QueueError, Result};

/// How a queue hands out its jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Claims hand out nothing.
    pub paused: bool,
    /// Jobs processing at once at most, fleet-wide.
    pub max_in_flight: Option<u64>,
    pub rate_limit: Option<RateLimit>,
    /// The weights set, by group; a group not named weighs 1.
    pub group_weights: BTreeMap<String, u32>,
    /// Jobs processing at once at most per named group, fleet-wide.
    pub group_max_in_flight: Option<u64>,
    /// How long jobs enqueued without a `retain_ms` of their own are kept
    /// once acked, in ms (0: not at all).
    pub retain_ms: u64,
    /// The number of hash slots the queue's jobs are spread over.
    pub shards: u32,
}

/// At most `burst` + `per_second` × t jobs handed out over any t seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u64,
}

/// A change to the settings: `None` leaves a field as it is,
/// `Some(None)` resets it to its default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsChange {
    pub paused: Option<bool>,
    pub max_in_flight: Option<Option<u64>>,
    pub rate_per_second: Option<Option<f64>>,
    pub rate_burst: Option<Option<u64>>,
    /// Drop every weight before `group_weights` applies.
    pub clear_weights: bool,
    /// A weight per group; `None` drops the group's weight.
    pub group_weights: Vec<(String, Option<u32>)>,
    pub group_max_in_flight: Option<Option<u64>>,
    /// `Some(None)` (or 0) resets it: not kept.
    pub retain_ms: Option<Option<u64>>,
    /// Split the queue over this many shards; only while it holds no job.
    pub shards: Option<u32>,
}

impl SettingsChange {
    /// The change that makes a shard's settings `settings`, whatever they
    /// were.
    fn replacing(settings: &Settings) -> Self {
        Self {
            paused: Some(settings.paused),
            max_in_flight: Some(settings.max_in_flight),
            rate_per_second: Some(settings.rate_limit.map(|rate| rate.per_second)),
            rate_burst: Some(settings.rate_limit.map(|rate| rate.burst)),
            clear_weights: true,
            group_weights: settings
                .group_weights
                .iter()
                .map(|(group, weight)| (group.clone(), Some(*weight)))
                .collect(),
            group_max_in_flight: Some(settings.group_max_in_flight),
            retain_ms: Some(Some(settings.retain_ms)),
            shards: None,
        }
    }

    /// Whether it changes anything but the number of shards.
    fn changes_fields(&self) -> bool {
        self.clear_weights || !self.group_weights.is_empty() || !self.fields().is_empty()
    }

    /// The `settings` hash fields to set (or, with an empty value, to
    /// drop), as the `configure` function takes them.
    pub(crate) fn fields(&self) -> Vec<(&'static str, String)> {
        fn value<T: ToString>(value: Option<T>) -> String {
            value.map(|v| v.to_string()).unwrap_or_default()
        }
        let mut fields = Vec::new();
        if let Some(paused) = self.paused {
            fields.push(("paused", if paused { "1".into() } else { String::new() }));
        }
        let optional = [
            ("max_in_flight", self.max_in_flight.map(value)),
            ("rate_per_second", self.rate_per_second.map(value)),
            ("rate_burst", self.rate_burst.map(value)),
            ("group_max_in_flight", self.group_max_in_flight.map(value)),
            (
                "retain_ms",
                self.retain_ms.map(|ms| value(ms.filter(|ms| *ms > 0))),
            ),
        ];
        fields.extend(
            optional
                .into_iter()
                .filter_map(|(field, change)| Some((field, change?))),
        );
        fields
    }
}

/// The functions' reply: the settings hash and the weights hash, each as
/// field, value pairs.
type RawSettings = (Vec<(String, String)>, Vec<(String, u32)>);

impl Settings {
    fn from_raw((fields, weights): RawSettings) -> Self {
        let fields: BTreeMap<String, String> = fields.into_iter().collect();
        let number = |name: &str| fields.get(name).and_then(|v| v.parse::<u64>().ok());
        let rate_limit = match (
            fields.get("rate_per_second").and_then(|v| v.parse().ok()),
            number("rate_burst"),
        ) {
            (Some(per_second), Some(burst)) => Some(RateLimit { per_second, burst }),
            _ => None,
        };
        Self {
            paused: fields.get("paused").is_some_and(|v| v == "1"),
            max_in_flight: number("max_in_flight"),
            rate_limit,
            group_weights: weights.into_iter().collect(),
            group_max_in_flight: number("group_max_in_flight"),
            retain_ms: number("retain_ms").unwrap_or(0),
            // -k while a change from k is under way.
            shards: fields
                .get("shards")
                .and_then(|v| v.parse::<i64>().ok())
                .map_or(1, |k| u32::try_from(k.unsigned_abs()).unwrap_or(1)),
        }
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
    /// nothing changes.
    pub async fn configure(&self, queue: &str, change: &SettingsChange) -> Result<Settings> {
        self.register(queue).await?;
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
                .map(|shard| self.configure_in(&shard.keys, change, false)),
        )
        .await?;
        self.configure_in(&shards.home().keys, change, true).await
    }

    async fn configure_in(
        &self,
        keys: &QueueKeys,
        change: &SettingsChange,
        wakes: bool,
    ) -> Result<Settings> {
        let mut cmd = LIBRARY.call(Function::Configure, keys);
        let fields = change.fields();
        cmd.arg(fields.len());
        for (field, value) in &fields {
            cmd.arg(*field).arg(value);
        }
        cmd.arg(if change.clear_weights { "1" } else { "0" })
            .arg(change.group_weights.len());
        for (group, weight) in &change.group_weights {
            cmd.arg(group)
                .arg(weight.map(|w| w.to_string()).unwrap_or_default());
        }
        cmd.arg(if wakes { "1" } else { "0" });
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
        // Old shards out of the new layout forget the count: a stale
        // router's call there is refused.
        try_join_all((1..old).map(|s| step(keys(s, old), "set", 1))).await?;
        let settings = self.settings_in(&keys(0, old)).await?;
        let copy = SettingsChange::replacing(&settings);
        for shard in 1..shards {
            self.configure_in(&keys(shard, shards), &copy, false)
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
    fn a_change_names_the_fields_it_sets_and_resets() {
        let change = SettingsChange {
            paused: Some(false),
            max_in_flight: Some(Some(10)),
            rate_per_second: Some(None),
            ..SettingsChange::default()
        };
        assert_eq!(
            change.fields(),
            [
                ("paused", String::new()),
                ("max_in_flight", "10".into()),
                ("rate_per_second", String::new()),
            ]
        );
    }

    #[test]
    fn settings_read_back_from_the_hashes() {
        let raw = (
            vec![
                ("paused".into(), "1".into()),
                ("rate_per_second".into(), "2.5".into()),
                ("rate_burst".into(), "5".into()),
                ("max_weight".into(), "3".into()),
            ],
            vec![("a".into(), 3)],
        );
        let settings = Settings::from_raw(raw);
        assert!(settings.paused);
        assert_eq!(
            settings.rate_limit,
            Some(RateLimit {
                per_second: 2.5,
                burst: 5
            })
        );
        assert_eq!(settings.group_weights.get("a"), Some(&3));
        assert_eq!(settings.max_in_flight, None);
    }
}
