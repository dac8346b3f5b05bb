//! The reads of a sharded queue's shards' lines by its claims (the `line`
//! function), shared by the claims that wait together.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::lane::Batch;
use super::wire::{CLAIM_PROMOTE_BATCH, malformed};
use crate::queue::error::Result;
use crate::queue::store::Redis;
use crate::queue::store::keys::QueueKeys;
use crate::queue::store::library::{Function, LIBRARY};

/// The reads of one shard's line (the `line` function) by the claims of
/// a sharded queue: the claims waiting together share one read.
#[derive(Debug)]
pub(crate) struct LineBatch {
    pub(crate) redis: Arc<Redis>,
    pub(crate) keys: Arc<QueueKeys>,
    /// The bulk floor's share, in parts per million of jobs handed out.
    pub(crate) floor_ppm: u64,
    /// The number of shards of the queue this lane was routed for.
    pub(crate) shards: u32,
}

/// What a shard offers claims (see `line`).
#[derive(Debug)]
pub(crate) struct Line {
    /// A group cap or max_in_flight is set: an ack could change the line.
    pub(crate) capped: bool,
    /// The score first in line for each claim of one job, in turn.
    pub(crate) scores: Vec<f64>,
    /// The job each claim of one job would take, in turn: the one of its
    /// score, or on a bulk floor's turn the least urgent class's first.
    pub(crate) ids: Vec<String>,
    /// How many claims of one job the read was for: a line with fewer
    /// scores ran out (the shard had no more to hand out).
    pub(crate) asked: usize,
    /// How many of `scores` the claims sharing this read have picked: each
    /// picks after those before it, as claims one after the other would.
    pub(crate) taken: AtomicUsize,
    /// Per claim that picked from this line, whether its part in the
    /// shard went through, once known (`None` until then; its sender
    /// dropped unsent when the claim was given up). A claim picking after
    /// them passes over their picks, which still wait where a part failed.
    pub(crate) parts: Mutex<Vec<watch::Receiver<Option<bool>>>>,
}

/// One claim's read of a shard: how many claims of one job it stands for
/// (a read shared by several claims reads for all of them),
/// and its request id's field of `claims` when it has one.
#[derive(Debug)]
pub(crate) struct LineEntry {
    pub(crate) claims: u32,
    pub(crate) field: Option<String>,
}

/// What a shard says to one claim: its line, and whether it answered the
/// claim's request id jobs before (the claim is a repeat).
#[derive(Debug)]
pub(crate) struct LineRead {
    pub(crate) line: Arc<Line>,
    pub(crate) answered: bool,
}

impl Batch for LineBatch {
    type Entry = LineEntry;
    type Reply = LineRead;

    fn size(entry: &LineEntry) -> (usize, usize) {
        (entry.claims as usize, 0)
    }

    fn answered(_: &LineEntry) -> usize {
        0
    }

    async fn call(&self, entries: &[LineEntry]) -> Result<Vec<Result<Self::Reply>>> {
        let asked = entries.iter().map(|entry| entry.claims).sum::<u32>().max(1);
        let mut cmd = LIBRARY.call(Function::Line, &self.keys);
        cmd.arg(CLAIM_PROMOTE_BATCH)
            .arg(asked)
            .arg(self.floor_ppm)
            .arg(self.shards);
        for field in entries.iter().filter_map(|entry| entry.field.as_ref()) {
            cmd.arg(field);
        }
        let reply: Vec<String> = self.redis.query(&cmd).await?;
        let (capped, rest) = reply.split_first().ok_or_else(malformed)?;
        let fields = entries.iter().filter(|entry| entry.field.is_some()).count();
        if rest.len() < fields {
            return Err(malformed());
        }
        let (flags, picks) = rest.split_at(fields);
        if picks.len() % 2 != 0 {
            return Err(malformed());
        }
        let line = Arc::new(Line {
            capped: capped == "1",
            scores: picks
                .iter()
                .skip(1)
                .step_by(2)
                .map(|score| score.parse::<f64>().map_err(|_| malformed()))
                .collect::<Result<_>>()?,
            ids: picks.iter().step_by(2).cloned().collect(),
            asked: asked as usize,
            taken: AtomicUsize::new(0),
            parts: Mutex::default(),
        });
        let mut flags = flags.iter();
        Ok(entries
            .iter()
            .map(|entry| {
                let answered =
                    entry.field.is_some() && flags.next().is_some_and(|flag| flag == "1");
                Ok(LineRead {
                    line: Arc::clone(&line),
                    answered,
                })
            })
            .collect())
    }
}
