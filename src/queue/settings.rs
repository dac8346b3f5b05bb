//! A queue's settings as Redis keeps them: fields of its `settings` hash
//! and its `weights` hash, read and changed by the functions `settings`
//! and `configure`.

use std::collections::BTreeMap;

use super::library::{Function, LIBRARY};
use super::{Broker, Result};

/// How a queue hands out its jobs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Claims hand out nothing.
    pub paused: bool,
    /// Jobs processing at once at most, fleet-wide.
    pub max_in_flight: Option<u64>,
    pub rate_limit: Option<RateLimit>,
    /// Weights of groups other than 1.
    pub group_weights: BTreeMap<String, u32>,
    /// Jobs processing at once at most per named group, fleet-wide.
    pub group_max_in_flight: Option<u64>,
    /// How long jobs enqueued without a `retain_ms` of their own are kept
    /// once acked, in ms (0: not at all).
    pub retain_ms: u64,
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
}

impl SettingsChange {
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
        }
    }
}

impl Broker {
    /// The queue's settings; defaults for a queue never configured.
    pub async fn settings(&self, queue: &str) -> Result<Settings> {
        let cmd = LIBRARY.call(Function::Settings, &self.lanes(queue).keys);
        Ok(Settings::from_raw(self.call::<RawSettings>(&cmd).await?))
    }

    /// Changes the queue's settings at once on every instance, and wakes
    /// the claims waiting on it; answers the settings after the change.
    pub async fn configure(&self, queue: &str, change: &SettingsChange) -> Result<Settings> {
        self.register(queue).await?;
        let mut cmd = LIBRARY.call(Function::Configure, &self.lanes(queue).keys);
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
        Ok(Settings::from_raw(self.call::<RawSettings>(&cmd).await?))
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
