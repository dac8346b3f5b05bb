//! Path segments, checked as they are parsed: a bad queue name or job id
//! answers 400 before anything else happens.

use serde::Deserialize;
use utoipa::IntoParams;

use super::error::ApiError;
use crate::queue::PageCursor;

/// A queue name: `^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct QueueName(String);

impl TryFrom<String> for QueueName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        let mut bytes = name.bytes();
        let valid = name.len() <= 128
            && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if valid {
            Ok(Self(name))
        } else {
            Err(
                "a queue name is 1 to 128 of A-Z a-z 0-9 _ . - and starts with a letter or digit"
                    .into(),
            )
        }
    }
}

impl QueueName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A job id, server- or client-chosen: `^[A-Za-z0-9_.:-]{1,128}$`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct JobId(String);

impl TryFrom<String> for JobId {
    type Error = String;

    fn try_from(id: String) -> Result<Self, String> {
        if is_job_id(&id) {
            Ok(Self(id))
        } else {
            Err("a job id is 1 to 128 of A-Z a-z 0-9 _ . : -".into())
        }
    }
}

impl JobId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub use crate::queue::is_job_id;

/// A schedule's name: `^[A-Za-z0-9_.-]{1,100}$`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct ScheduleName(String);

impl TryFrom<String> for ScheduleName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        let valid = (1..=100).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if valid {
            Ok(Self(name))
        } else {
            Err("a schedule name is 1 to 100 of A-Z a-z 0-9 _ . -".into())
        }
    }
}

impl ScheduleName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A page cursor from the query string, as a previous page gave it.
pub fn parse_cursor(cursor: Option<String>) -> Result<Option<PageCursor>, ApiError> {
    cursor
        .map(|cursor| {
            cursor.parse().map_err(|()| {
                ApiError::InvalidRequest("`cursor` is not a cursor this API gave".into())
            })
        })
        .transpose()
}

/// The path of a queue's routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct QueuePath {
    /// Queue name
    #[param(value_type = String)]
    pub queue: QueueName,
}

/// The path of a job's routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct JobPath {
    /// Queue name
    #[param(value_type = String)]
    pub queue: QueueName,
    /// Job id
    #[param(value_type = String)]
    pub id: JobId,
}

/// The path of a schedule's routes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SchedulePath {
    /// Queue name
    #[param(value_type = String)]
    pub queue: QueueName,
    /// Schedule name, 1 to 100 of A-Z a-z 0-9 _ . -
    #[param(value_type = String)]
    pub name: ScheduleName,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_the_contract() {
        for good in ["a", "emails", "Q1_x.y-z", &"a".repeat(128)] {
            assert!(QueueName::try_from(good.to_owned()).is_ok(), "{good}");
        }
        for bad in ["", "_a", ".a", "a b", "a:b", "a{b}", "é", &"a".repeat(129)] {
            assert!(QueueName::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn schedule_names_follow_the_contract() {
        for good in ["nightly", "a", "Report_1.v-2", &"a".repeat(100)] {
            assert!(ScheduleName::try_from(good.to_owned()).is_ok(), "{good}");
        }
        for bad in ["", "a:b", "a b", "é", &"a".repeat(101)] {
            assert!(ScheduleName::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn job_ids_follow_the_contract() {
        assert!(is_job_id("order-1234:a_b.c"));
        assert!(is_job_id(&"x".repeat(128)));
        assert!(!is_job_id(""));
        assert!(!is_job_id("a/b"));
        assert!(!is_job_id(&"x".repeat(129)));
    }
}
