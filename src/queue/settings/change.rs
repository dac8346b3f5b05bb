//! A change to a queue's settings, from a JSON merge patch (RFC 7396):
//! checked against the table, each refusal naming its field.

use serde_json::{Map, Value};

use super::table::{Kind, OBJECTS, SETTINGS, SHARDS, Setting};
use crate::queue::job::is_job_id;

/// A change to the settings: the `meta` fields to set (an empty value
/// resets one), the weights to change (`None` drops one, back to 1) after
/// dropping every weight when `clear_weights`, and a new number of
/// shards.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsChange {
    pub fields: Vec<(&'static str, String)>,
    pub clear_weights: bool,
    pub group_weights: Vec<(String, Option<u32>)>,
    /// Split the queue over this many shards; only while it holds no job.
    pub shards: Option<u32>,
}

/// Why a patch was refused: the field, by its path, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub reason: String,
}

fn refuse(field: impl Into<String>, reason: impl Into<String>) -> Refusal {
    Refusal {
        field: field.into(),
        reason: reason.into(),
    }
}

impl Kind {
    /// What a value of this kind must be, as a refusal says it.
    fn rule(self) -> String {
        match self {
            Self::Flag => "must be true or false".into(),
            Self::Count { min, max, .. } => format!("must be {min} to {max}"),
            Self::Rate { min, max } => format!("must be {min} to {max}"),
            Self::Weights { max, .. } => format!("must be 1 to {max}"),
        }
    }

    /// The value of `meta` that sets `value`, '' for one Redis keeps no
    /// field for (the default, or `null`); `None` when out of bounds.
    fn encode(self, value: &Value) -> Option<String> {
        match (self, value) {
            (_, Value::Null) => Some(String::new()),
            (Self::Flag, Value::Bool(on)) => Some(if *on { "1".into() } else { String::new() }),
            (Self::Count { min, max, default }, Value::Number(n)) => {
                let n = n.as_u64().filter(|n| (min..=max).contains(n))?;
                Some(if Some(n) == default {
                    String::new()
                } else {
                    n.to_string()
                })
            }
            (Self::Rate { min, max }, Value::Number(n)) => {
                let n = n.as_f64().filter(|n| (min..=max).contains(n))?;
                Some(n.to_string())
            }
            _ => None,
        }
    }
}

impl SettingsChange {
    /// The change a JSON merge patch (RFC 7396) of the settings asks for:
    /// a field left out stays, `null` resets it. Refused, naming the
    /// field, when a field is unknown or a value is not one its setting
    /// takes.
    pub fn from_patch(patch: &Map<String, Value>) -> std::result::Result<Self, Refusal> {
        let mut change = Self::default();
        for (name, value) in patch {
            if let Some(object) = OBJECTS.iter().find(|object| object.name == name) {
                match value {
                    Value::Null => {
                        for member in object.members() {
                            change.fields.push((member.field, String::new()));
                        }
                    }
                    Value::Object(fields) => {
                        for (field, value) in fields {
                            let path = format!("{name}.{field}");
                            let setting = SETTINGS
                                .iter()
                                .find(|setting| setting.path == path)
                                .ok_or_else(|| refuse(&path, format!("unknown field `{field}`")))?;
                            change.set(setting, value)?;
                        }
                    }
                    _ => return Err(refuse(name, "must be an object or null")),
                }
                continue;
            }
            let setting = SETTINGS
                .iter()
                .find(|setting| setting.path == name)
                .ok_or_else(|| refuse(name, format!("unknown field `{name}`")))?;
            change.set(setting, value)?;
        }
        Ok(change)
    }

    fn set(
        &mut self,
        setting: &'static Setting,
        value: &Value,
    ) -> std::result::Result<(), Refusal> {
        let refused = || refuse(setting.path, setting.kind.rule());
        match setting.kind {
            Kind::Weights { max, groups } => match value {
                Value::Null => self.clear_weights = true,
                Value::Object(weights) => {
                    if weights.len() > groups {
                        return Err(refuse(
                            setting.path,
                            format!("must hold at most {groups} groups"),
                        ));
                    }
                    for (group, weight) in weights {
                        let field = format!("{}.{group}", setting.path);
                        if !is_job_id(group) {
                            return Err(refuse(
                                field,
                                "a group is 1 to 128 of A-Z a-z 0-9 _ . : -",
                            ));
                        }
                        let weight = match weight {
                            Value::Null => None,
                            weight => Some(
                                weight
                                    .as_u64()
                                    .filter(|w| (1..=max).contains(w))
                                    .and_then(|w| u32::try_from(w).ok())
                                    .ok_or_else(|| refuse(&field, setting.kind.rule()))?,
                            ),
                        };
                        self.group_weights.push((group.clone(), weight));
                    }
                }
                _ => return Err(refused()),
            },
            _ if setting.path == SHARDS => {
                let encoded = setting.kind.encode(value).ok_or_else(refused)?;
                self.shards = Some(encoded.parse().unwrap_or(1));
            }
            kind => {
                let encoded = kind.encode(value).ok_or_else(refused)?;
                self.fields.push((setting.field, encoded));
            }
        }
        Ok(())
    }

    /// Whether it changes anything but the number of shards.
    pub(super) fn changes_fields(&self) -> bool {
        self.clear_weights || !self.group_weights.is_empty() || !self.fields.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(value: &Value) -> std::result::Result<SettingsChange, Refusal> {
        SettingsChange::from_patch(value.as_object().expect("an object"))
    }

    #[test]
    fn a_patch_names_the_fields_it_sets_and_resets() {
        let change = patch(&json!({"paused": false, "max_in_flight": 10, "rate_limit": null}))
            .expect("valid");
        let mut fields = change.fields.clone();
        fields.sort();
        assert_eq!(
            fields,
            [
                ("max_in_flight", "10".to_owned()),
                ("paused", String::new()),
                ("rate_burst", String::new()),
                ("rate_per_second", String::new()),
            ]
        );
    }

    #[test]
    fn a_patch_is_refused_naming_the_field_and_its_bounds() {
        for (value, field, reason) in [
            (
                json!({"max_in_flight": 0}),
                "max_in_flight",
                "must be 1 to 1000000",
            ),
            (
                json!({"max_in_flight": "5"}),
                "max_in_flight",
                "must be 1 to 1000000",
            ),
            (
                json!({"rate_limit": {"per_second": 0.0001}}),
                "rate_limit.per_second",
                "must be 0.001 to 1000000",
            ),
            (
                json!({"rate_limit": {"every": 1}}),
                "rate_limit.every",
                "unknown field `every`",
            ),
            (
                json!({"rate_limit": 5}),
                "rate_limit",
                "must be an object or null",
            ),
            (
                json!({"group_weights": {"a": 101}}),
                "group_weights.a",
                "must be 1 to 100",
            ),
            (json!({"paused": 1}), "paused", "must be true or false"),
            (json!({"pasued": true}), "pasued", "unknown field `pasued`"),
        ] {
            assert_eq!(patch(&value), Err(refuse(field, reason)));
        }
    }
}
