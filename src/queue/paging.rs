//! Pages of the lists prioq answers in pages: dead jobs and named groups,
//! and the cursor where a page starts.

use super::Job;

/// One page of a queue's named groups.
#[derive(Debug)]
pub struct GroupPage {
    pub groups: Vec<GroupStats>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
}

/// A named group with jobs waiting or processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    pub group: String,
    pub pending: u64,
    pub processing: u64,
    pub weight: u32,
}

/// One page of dead jobs.
#[derive(Debug)]
pub struct DeadPage {
    pub jobs: Vec<Job>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<String>,
    pub total: u64,
}

/// Where a page of a list sorted by a number, highest first (the DLQ by
/// time of death, groups by jobs waiting), starts: just after this member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    pub score: i64,
    pub member: String,
}

impl std::fmt::Display for PageCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.score, self.member)
    }
}

impl std::str::FromStr for PageCursor {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (score, member) = s.split_once('.').ok_or(())?;
        Ok(Self {
            score: score.parse().map_err(|_| ())?,
            member: member.to_owned(),
        })
    }
}
