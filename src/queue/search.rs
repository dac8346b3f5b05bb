//! Searching a queue's jobs in any state by their id, task, group, dedup
//! key, a field of their args and their state: a scan of each shard's
//! records in turn (the `find` function), in pages that go on from a
//! cursor.

use super::broker::Broker;
use super::error::Result;
use super::job::Job;
use super::store::library::{Function, LIBRARY};

/// Records one page looks at, at most, over all the calls it makes: a
/// page of a large queue with few matches ends after this many, with a
/// cursor to go on from.
const PAGE_BUDGET: u64 = 10_000;
/// Records one call looks at, at most: a call holds Redis for that long.
const CALL_BUDGET: u64 = 1_000;

/// What a search looks for; an empty field matches every job.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// A part of the id.
    pub id_part: String,
    pub task: String,
    pub group: String,
    pub dedup_key: String,
    /// A top-level field of the args, and its value as text.
    pub field: String,
    pub value: String,
    /// `pending`, `scheduled`, `processing`, `dead`, `completed`,
    /// `cancelled` or `waiting`.
    pub state: String,
}

/// Where a search goes on: the shard, and the scan's cursor in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchCursor {
    pub shard: u32,
    pub scan: u64,
}

impl std::fmt::Display for SearchCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.shard, self.scan)
    }
}

impl std::str::FromStr for SearchCursor {
    type Err = ();

    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        let (shard, scan) = s.split_once('.').ok_or(())?;
        Ok(Self {
            shard: shard.parse().map_err(|_| ())?,
            scan: scan.parse().map_err(|_| ())?,
        })
    }
}

/// One page of a search.
#[derive(Debug)]
pub struct SearchPage {
    pub jobs: Vec<Job>,
    /// Where the next page starts; `None` once every shard was scanned.
    pub next_cursor: Option<SearchCursor>,
    /// Records this page looked at.
    pub scanned: u64,
}

impl Broker {
    /// The jobs matching `search` from `cursor` on, about `limit` of them
    /// (a step of the scan may bring a few more), in Redis's order.
    pub async fn search(
        &self,
        queue: &str,
        search: &Search,
        limit: u32,
        cursor: SearchCursor,
    ) -> Result<SearchPage> {
        let shards = self.shards.of(queue).await?;
        let (mut at, mut jobs, mut scanned) = (cursor, Vec::new(), 0);
        while let Some(shard) = shards.shards.get(at.shard as usize) {
            if jobs.len() >= limit as usize || scanned >= PAGE_BUDGET {
                return Ok(SearchPage {
                    jobs,
                    next_cursor: Some(at),
                    scanned,
                });
            }
            let mut cmd = LIBRARY.call(Function::Find, &shard.keys);
            cmd.arg(at.scan)
                .arg(CALL_BUDGET.min(PAGE_BUDGET - scanned))
                .arg(limit as usize - jobs.len())
                .arg(&search.id_part)
                .arg(&search.task)
                .arg(&search.group)
                .arg(&search.dedup_key)
                .arg(&search.field)
                .arg(&search.value)
                .arg(&search.state);
            let (next, looked, found): (u64, u64, Vec<Job>) = self.call(&cmd).await?;
            jobs.extend(found);
            scanned += looked;
            at = match next {
                0 => SearchCursor {
                    shard: at.shard + 1,
                    scan: 0,
                },
                scan => SearchCursor { scan, ..at },
            };
        }
        Ok(SearchPage {
            jobs,
            next_cursor: None,
            scanned,
        })
    }
}
