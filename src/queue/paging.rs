//! Pages of the lists prioq answers in pages: dead jobs and named groups,
//! and the cursor where a page starts.

use std::collections::BTreeMap;

use futures_util::future::try_join_all;
use redis::FromRedisValue;

use super::broker::Broker;
use super::error::Result;
use super::job::Job;
use super::store::library::{Function, LIBRARY};

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

    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        let (score, member) = s.split_once('.').ok_or(())?;
        Ok(Self {
            score: score.parse().map_err(|_| ())?,
            member: member.to_owned(),
        })
    }
}

/// Named groups a page of a sharded queue's groups reads from each shard
/// at most: such a page merges every shard's groups to sort them by their
/// jobs waiting over all shards.
const SHARDED_GROUPS_READ: u32 = 100_000;

impl Broker {
    /// One page of the DLQ, most recently dead first. `cursor` is a previous
    /// page's `next_cursor`; `None` when it is not one. A sharded queue's
    /// page merges its shards' pages: (dead_at, id) orders them all.
    pub async fn dead_jobs(
        &self,
        queue: &str,
        limit: u32,
        cursor: Option<&PageCursor>,
    ) -> Result<DeadPage> {
        let pages: Vec<(u64, Vec<Job>)> =
            self.page(Function::DeadJobs, queue, limit, cursor).await?;
        let total = pages.iter().map(|(total, _)| total).sum();
        let merged = pages.len() > 1;
        let mut jobs: Vec<Job> = pages.into_iter().flat_map(|(_, jobs)| jobs).collect();
        if merged {
            jobs.sort_by(|a, b| (b.dead_at_ms, &b.id).cmp(&(a.dead_at_ms, &a.id)));
        }
        let next_cursor = cut(&mut jobs, limit, |job| {
            Some(PageCursor {
                score: job.dead_at_ms?,
                member: job.id.clone(),
            })
        });
        Ok(DeadPage {
            jobs,
            next_cursor,
            total,
        })
    }

    /// One page of the queue's named groups with jobs waiting or
    /// processing, most waiting first. `cursor` is a previous page's
    /// `next_cursor`. A sharded queue's groups are read whole from every
    /// shard (up to `SHARDED_GROUPS_READ` each) and added up per group.
    pub async fn groups(
        &self,
        queue: &str,
        limit: u32,
        cursor: Option<&PageCursor>,
    ) -> Result<GroupPage> {
        let shards = self.shards(queue).await?;
        let mut groups = if shards == 1 {
            let mut pages: Vec<(u64, Vec<RawGroup>)> =
                self.page(Function::Groups, queue, limit, cursor).await?;
            pages.pop().map(|(_, groups)| groups).unwrap_or_default()
        } else {
            let pages: Vec<(u64, Vec<RawGroup>)> = self
                .page(Function::Groups, queue, SHARDED_GROUPS_READ, None)
                .await?;
            let mut merged = BTreeMap::<String, RawGroup>::new();
            for group in pages.into_iter().flat_map(|(_, groups)| groups) {
                let sum = merged
                    .entry(group.0.clone())
                    .or_insert_with(|| (group.0.clone(), 0, 0, group.3));
                sum.1 += group.1;
                sum.2 += group.2;
            }
            let mut groups: Vec<RawGroup> = merged
                .into_values()
                .filter(|(group, waiting, ..)| {
                    cursor.is_none_or(|after| {
                        let waiting = i64::try_from(*waiting).unwrap_or(i64::MAX);
                        (waiting, group.as_str()) < (after.score, after.member.as_str())
                    })
                })
                .collect();
            groups.sort_by(|a, b| (b.1, &b.0).cmp(&(a.1, &a.0)));
            groups.truncate(limit as usize + 1);
            groups
        };
        let next_cursor = cut(&mut groups, limit, |last| {
            Some(PageCursor {
                score: i64::try_from(last.1).unwrap_or(i64::MAX),
                member: last.0.clone(),
            })
        });
        Ok(GroupPage {
            groups: groups
                .into_iter()
                .map(|(group, pending, processing, weight)| GroupStats {
                    group,
                    pending,
                    processing,
                    weight,
                })
                .collect(),
            next_cursor,
        })
    }

    /// Calls a paging function on every shard of the queue, at once, for
    /// up to `limit` + 1 items from `cursor` on (the extra one only tells
    /// that another page exists).
    async fn page<T: FromRedisValue>(
        &self,
        function: Function,
        queue: &str,
        limit: u32,
        cursor: Option<&PageCursor>,
    ) -> Result<Vec<T>> {
        let shards = self.shards.of(queue).await?;
        try_join_all(shards.shards.iter().map(|shard| async move {
            let mut cmd = LIBRARY.call(function, &shard.keys);
            cmd.arg(limit);
            match cursor {
                Some(cursor) => cmd.arg(cursor.score).arg(&cursor.member),
                None => cmd.arg("").arg(""),
            };
            self.call(&cmd).await
        }))
        .await
    }
}

/// A group as the `groups` function answers it: name, jobs waiting, jobs
/// processing, weight.
type RawGroup = (String, u64, u64, u32);

/// Cuts a page's items to `limit`; answers the cursor of the next page,
/// the last item's, when there were more.
fn cut<T>(
    items: &mut Vec<T>,
    limit: u32,
    cursor_of: impl Fn(&T) -> Option<PageCursor>,
) -> Option<String> {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    items
        .last()
        .filter(|_| more)
        .and_then(cursor_of)
        .map(|cursor| cursor.to_string())
}
