//! The lane against a batch of its own: group commit, limits, failures.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// Doubles numbers; each call waits for a permit, so a test decides
/// when calls return. Counts calls. Sends a second call beside one in
/// flight from `SECOND` items waiting (by default never).
#[derive(Debug)]
struct Doubler<const SECOND: usize = { usize::MAX }> {
    gate: Arc<Semaphore>,
    calls: Arc<AtomicUsize>,
}

impl<const SECOND: usize> Batch for Doubler<SECOND> {
    type Entry = i64;
    type Reply = i64;
    const SECOND_CALL_ITEMS: usize = SECOND;

    fn size(_: &i64) -> (usize, usize) {
        (400, 8)
    }

    fn answered(_: &i64) -> usize {
        400
    }

    async fn call(&self, entries: &[i64]) -> Result<Vec<Result<i64>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.gate.acquire().await.expect("open").forget();
        if entries.contains(&0) {
            return Err(QueueError::Unknown(anyhow::anyhow!("the call failed")));
        }
        Ok(entries
            .iter()
            .map(|n| {
                if *n < 0 {
                    Err(QueueError::NotFound)
                } else {
                    Ok(n * 2)
                }
            })
            .collect())
    }
}

fn lane<const SECOND: usize>() -> (Arc<Lane<Doubler<SECOND>>>, Arc<Semaphore>, Arc<AtomicUsize>) {
    let gate = Arc::new(Semaphore::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let lane = Lane::new(
        Doubler {
            gate: Arc::clone(&gate),
            calls: Arc::clone(&calls),
        },
        Duration::from_secs(30),
        LaneMetrics::new("test"),
    );
    (Arc::new(lane), gate, calls)
}

/// Submits `n` from a task of its own.
fn spawn_submit<const SECOND: usize>(
    lane: &Arc<Lane<Doubler<SECOND>>>,
    n: i64,
) -> tokio::task::JoinHandle<Result<i64>> {
    let lane = Arc::clone(lane);
    tokio::spawn(async move { lane.submit(n).await })
}

async fn until_calls(calls: &AtomicUsize, n: usize) {
    while calls.load(Ordering::SeqCst) < n {
        tokio::task::yield_now().await;
    }
}

async fn until_waiting<const SECOND: usize>(lane: &Lane<Doubler<SECOND>>, n: usize) {
    while lane.state().waiting.queue.len() < n {
        tokio::task::yield_now().await;
    }
}

async fn until_idle<const SECOND: usize>(lane: &Lane<Doubler<SECOND>>) {
    while lane.state().busy {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn requests_arriving_during_a_call_go_together_in_the_next() {
    let (lane, gate, calls) = lane::<{ usize::MAX }>();
    let first = spawn_submit(&lane, 1);
    until_calls(&calls, 1).await;
    // Each entry is 400 items: two fit a call, the third waits.
    let rest: Vec<_> = [2, -3, 4]
        .into_iter()
        .map(|n| {
            let lane = Arc::clone(&lane);
            tokio::spawn(async move { lane.submit(n).await })
        })
        .collect();
    until_waiting(&lane, 3).await;
    gate.add_permits(3);
    assert_eq!(first.await.expect("joins").expect("doubled"), 2);
    let mut outcomes = Vec::new();
    for handle in rest {
        outcomes.push(handle.await.expect("joins"));
    }
    assert_eq!(outcomes[0].as_ref().ok(), Some(&4));
    assert!(matches!(outcomes[1], Err(QueueError::NotFound)));
    assert_eq!(outcomes[2].as_ref().ok(), Some(&8));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_request_dropped_before_its_call_is_not_sent() {
    let (lane, gate, calls) = lane::<{ usize::MAX }>();
    let first = spawn_submit(&lane, 1);
    until_calls(&calls, 1).await;
    let dropped = spawn_submit(&lane, 5);
    until_waiting(&lane, 1).await;
    dropped.abort();
    let _ = dropped.await;
    gate.add_permits(1);
    assert_eq!(first.await.expect("joins").expect("doubled"), 2);
    until_idle(&lane).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "no call for the dropped one"
    );
}

#[tokio::test]
async fn a_request_that_found_the_lane_idle_and_went_away_hands_the_lane_on() {
    let (lane, gate, calls) = lane::<{ usize::MAX }>();
    let leader = spawn_submit(&lane, 1);
    until_calls(&calls, 1).await;
    let behind = spawn_submit(&lane, 5);
    until_waiting(&lane, 1).await;
    // The leader's call carried it alone: dropping it cancels that
    // call only, and what queued behind it is sent all the same.
    leader.abort();
    let _ = leader.await;
    gate.add_permits(1);
    assert_eq!(behind.await.expect("joins").expect("doubled"), 10);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    until_idle(&lane).await;
    // Idle again: the next request leads its own call.
    gate.add_permits(1);
    assert_eq!(lane.submit(2).await.expect("doubled"), 4);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn requests_waiting_behind_a_failed_call_are_refused_unsent() {
    let (lane, gate, calls) = lane::<{ usize::MAX }>();
    let failing = spawn_submit(&lane, 0);
    until_calls(&calls, 1).await;
    let behind = spawn_submit(&lane, 5);
    until_waiting(&lane, 1).await;
    gate.add_permits(1);
    let failed = failing.await.expect("joins");
    assert!(matches!(failed, Err(QueueError::Unknown(_))), "{failed:?}");
    let refused = behind.await.expect("joins");
    assert!(
        matches!(refused, Err(QueueError::Unavailable(_))),
        "{refused:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The lane serves again afterwards.
    gate.add_permits(1);
    assert_eq!(lane.submit(3).await.expect("doubled"), 6);
}

#[tokio::test(start_paused = true)]
async fn a_request_that_times_out_unsent_reports_no_effect() {
    let (lane, _gate, calls) = lane::<{ usize::MAX }>();
    let first = spawn_submit(&lane, 1);
    until_calls(&calls, 1).await;
    // Two entries fill the next call; the third waits for the one after,
    // which cannot start before the third's own deadline.
    let queued: Vec<_> = [2, 3, 4]
        .into_iter()
        .map(|n| {
            let lane = Arc::clone(&lane);
            tokio::spawn(async move { lane.submit(n).await })
        })
        .collect();
    until_waiting(&lane, 3).await;
    let first = first.await.expect("joins");
    assert!(matches!(first, Err(QueueError::Unknown(_))), "{first:?}");
    let last = queued
        .into_iter()
        .last()
        .expect("three")
        .await
        .expect("joins");
    assert!(matches!(last, Err(QueueError::Unavailable(_))), "{last:?}");
}

#[tokio::test]
async fn a_second_call_goes_beside_the_first_once_a_batch_waits() {
    // Each entry is 400 items; a second call goes from 800 waiting.
    let (lane, gate, calls) = lane::<800>();
    let first = spawn_submit(&lane, 1);
    until_calls(&calls, 1).await;
    let second = spawn_submit(&lane, 2);
    until_waiting(&lane, 1).await;
    // 400 items wait: they wait for the call in flight (decided under the
    // lock that queued them).
    assert!(!lane.state().second, "no second call for 400 items");
    let third = spawn_submit(&lane, 3);
    // 800 wait: they go together in a second call while the first is
    // still held in Redis.
    tokio::time::timeout(Duration::from_secs(10), until_calls(&calls, 2))
        .await
        .expect("a second call goes while the first is held");
    assert!(lane.state().waiting.queue.is_empty());
    // Two calls are in flight: the next request waits for one of them.
    let fourth = spawn_submit(&lane, 4);
    until_waiting(&lane, 1).await;
    gate.add_permits(3);
    let outcomes = [first, second, third, fourth];
    let mut doubled = Vec::new();
    for handle in outcomes {
        doubled.push(handle.await.expect("joins").expect("doubled"));
    }
    assert_eq!(doubled, [2, 4, 6, 8]);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    until_idle(&lane).await;
    assert!(!lane.state().second);
}

#[test]
fn the_waiting_total_follows_requests_queued_withdrawn_gone_and_taken() {
    let mut waiting = Waiting::<Doubler> {
        queue: VecDeque::new(),
        answered: 0,
    };
    let mut answers = Vec::new();
    for ticket in 0..4 {
        let (reply, answer) = oneshot::channel();
        waiting.push(Waiter {
            ticket,
            size: (400, 8),
            answered: 400,
            entry: 1,
            reply,
        });
        answers.push(answer);
    }
    assert_eq!(waiting.answered, 1600);
    assert!(waiting.withdraw(2));
    assert!(!waiting.withdraw(2), "withdrawn once");
    assert_eq!(waiting.answered, 1200);
    // The first request went away: it is dropped, not taken, and two of
    // the rest fill a call.
    drop(answers.remove(0));
    let taken = waiting.take_batch();
    assert_eq!(taken.iter().map(|w| w.ticket).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(waiting.answered, 0);
    assert!(waiting.queue.is_empty());
    // Refused all at once (the call before them failed).
    let (reply, _answer) = oneshot::channel();
    waiting.push(Waiter {
        ticket: 4,
        size: (400, 8),
        answered: 400,
        entry: 1,
        reply,
    });
    assert_eq!(waiting.take_all().len(), 1);
    assert_eq!(waiting.answered, 0);
}
