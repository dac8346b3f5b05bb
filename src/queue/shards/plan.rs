//! A sharded claim's plan for one round: from the shards' lines, the
//! shard each of its claims of one job would take from, and what it asks
//! of each; and what it hears of the claims that planned before it on the
//! same reads (see `Line::parts`).

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use futures_util::future::join_all;
use tokio::sync::watch;

use crate::queue::exchange::Line;
use crate::queue::job::Job;
use crate::queue::store::keys;

/// What a claim asks of the shards in one round: the shard of each claim
/// of one job in turn, how many jobs each shard is asked for, and the
/// jobs picked there, in order; where it tells the claims sharing its
/// reads whether its part in a shard went through, and where it hears
/// that of the claims whose picks it passed over (see `Line::parts`).
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) picks: Vec<usize>,
    pub(super) asks: Vec<u32>,
    pub(super) picked: Vec<Vec<String>>,
    pub(super) tells: Vec<Option<watch::Sender<Option<bool>>>>,
    pub(super) passed: Vec<(u32, watch::Receiver<Option<bool>>)>,
}

impl Plan {
    /// Nothing asked of any of `shards` shards.
    pub(super) fn none(shards: usize) -> Self {
        Self {
            asks: vec![0; shards],
            picked: vec![Vec::new(); shards],
            ..Self::default()
        }
    }
}

/// The shard each of up to `want` claims of one job would take from, in
/// turn: the one whose next score in line is the lowest, the lower shard
/// on a tie; and the jobs picked in each shard. A line's scores that
/// claims sharing its read picked before are passed over, and the picks
/// are marked taken, so claims sharing reads pick as claims one after the
/// other would; the caller holds `merging` meanwhile. The plan tells, per
/// shard it asks, whether its part there went through, and hears the
/// same of every part before it on the lines it read, when it picks any
/// job (see `failed_before`). A line read in full (as many scores as
/// asked) may hold more than was read: once all of it read is picked, no
/// pick goes past its last score. A shard with no line (its read failed) is not
/// picked. A `closed` shard (it answered the claim's request id in an
/// earlier round) cannot be asked: the picks stop at its next score.
pub(super) fn plan(lines: &[Option<Arc<Line>>], want: usize, closed: &[bool]) -> Plan {
    let mut next: Vec<usize> = lines
        .iter()
        .map(|line| line.as_ref().map_or(0, |l| l.taken.load(Ordering::Relaxed)))
        .collect();
    let score = |shard: usize, at: usize| lines[shard].as_ref()?.scores.get(at).copied();
    let mut picks = Vec::with_capacity(want);
    let mut picked: Vec<Vec<String>> = vec![Vec::new(); lines.len()];
    while picks.len() < want {
        let best = (0..lines.len())
            .filter_map(|shard| Some((score(shard, next[shard])?, shard)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((best, shard)) = best else { break };
        if closed[shard] {
            break;
        }
        // The unread rest of a line read in full and picked to its end.
        let unread = (0..lines.len())
            .filter_map(|other| {
                let line = lines[other].as_ref()?;
                let read_to_end =
                    next[other] >= line.scores.len() && line.scores.len() >= line.asked;
                read_to_end.then(|| line.scores.last().copied()).flatten()
            })
            .min_by(f64::total_cmp);
        if unread.is_some_and(|last| best > last) {
            break;
        }
        if let Some(id) = lines[shard].as_ref().and_then(|l| l.ids.get(next[shard])) {
            picked[shard].push(id.clone());
        }
        next[shard] += 1;
        picks.push(shard);
    }
    for (line, taken) in lines.iter().zip(&next) {
        if let Some(line) = line {
            line.taken.store(*taken, Ordering::Relaxed);
        }
    }
    let mut asks = vec![0u32; lines.len()];
    for shard in &picks {
        asks[*shard] += 1;
    }
    // Every pick of a claim before ranks ahead of this claim's: a part of
    // theirs that fails leaves jobs ranked ahead waiting.
    let mut passed = Vec::new();
    let mut tells = Vec::with_capacity(lines.len());
    for (shard, line) in lines.iter().enumerate() {
        let Some(line) = line else {
            tells.push(None);
            continue;
        };
        let mut parts = line.parts.lock().unwrap_or_else(PoisonError::into_inner);
        if !picks.is_empty() {
            passed.extend(parts.iter().map(|part| (shard as u32, part.clone())));
        }
        tells.push((asks[shard] > 0).then(|| {
            let (tell, hear) = watch::channel(None);
            parts.push(hear);
            tell
        }));
    }
    Plan {
        picks,
        asks,
        picked,
        tells,
        passed,
    }
}

/// The shards where a part of a claim whose picks this one passed over
/// failed, or was given up: the jobs it picked there may still wait,
/// ranked ahead of this claim's. Waits for those parts' outcomes.
pub(super) async fn failed_before(
    passed: Vec<(u32, watch::Receiver<Option<bool>>)>,
) -> BTreeSet<u32> {
    let heard = join_all(passed.into_iter().map(|(shard, mut part)| async move {
        let went_through = part
            .wait_for(Option::is_some)
            .await
            .is_ok_and(|outcome| *outcome == Some(true));
        (!went_through).then_some(shard)
    }))
    .await;
    heard.into_iter().flatten().collect()
}

/// A round's jobs in the order the claims of one job would have taken
/// them: shard by shard as `picks` names them, then any others.
pub(super) fn in_pick_order(jobs: Vec<Job>, picks: &[usize], shards: u32) -> Vec<Job> {
    let mut by_shard: Vec<VecDeque<Job>> = vec![VecDeque::new(); shards as usize];
    for job in jobs {
        by_shard[keys::shard_of(&job.id, shards) as usize].push_back(job);
    }
    let mut ordered = Vec::new();
    for shard in picks {
        if let Some(job) = by_shard[*shard].pop_front() {
            ordered.push(job);
        }
    }
    ordered.extend(by_shard.into_iter().flatten());
    ordered
}
