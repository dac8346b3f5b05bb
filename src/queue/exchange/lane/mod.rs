//! Group commit. The requests of one operation on one queue wait in a lane;
//! while one call to Redis for the lane is in flight, requests that arrive
//! queue up, and when it returns they all go together as the next call.
//! There is no timer: a request that finds the lane idle goes at once, and
//! batches grow with the load by themselves. When what queued behind a call
//! in flight asks for a big reply (`Batch::SECOND_CALL_ITEMS` of
//! `Batch::answered`: jobs claimed), it goes at once as a second call
//! beside the first, so that Redis is not left idle while prioq reads a
//! big reply. Each request gets its own part of the reply; a call that
//! fails fails only the requests it carried, each with the error it would
//! have had alone.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use metrics::{Counter, Gauge};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::queue::counters::QueueMetric;
use crate::queue::error::{QueueError, Result};
use crate::queue::store::bounded_by;
use crate::telemetry;

/// Jobs (or acks) one call carries at most, whatever the requests bring;
/// a single request that brings more still goes, alone.
const MAX_CALL_ITEMS: usize = 1000;
/// Bytes of arguments one call carries at most, on the same terms.
const MAX_CALL_BYTES: usize = 4 << 20;

/// One operation's batched call to Redis.
pub(crate) trait Batch: Send + Sync + std::fmt::Debug + 'static {
    type Entry: Send + Sync + std::fmt::Debug + 'static;
    type Reply: Send + std::fmt::Debug + 'static;

    /// Jobs or acks the entry carries, and about how many bytes.
    fn size(entry: &Self::Entry) -> (usize, usize);

    /// Items of the entry's reply that prioq reads at length (jobs
    /// claimed): what makes a lane's turn between two calls long.
    fn answered(entry: &Self::Entry) -> usize;

    /// Such items waiting behind a call in flight from which they go at
    /// once, in a second call beside it, rather than after it: none by
    /// default (one call in flight at a time).
    const SECOND_CALL_ITEMS: usize = usize::MAX;

    /// Runs the entries as one call: an outcome per entry, in order, or an
    /// error of the whole call.
    fn call(
        &self,
        entries: &[Self::Entry],
    ) -> impl Future<Output = Result<Vec<Result<Self::Reply>>>> + Send;
}

/// What a lane tells the metrics.
#[derive(Debug)]
pub(crate) struct LaneMetrics {
    /// Requests queued for the next call.
    pub(crate) waiting: QueueMetric<Gauge>,
    /// Calls sent to Redis.
    pub(crate) calls: QueueMetric<Counter>,
}

impl LaneMetrics {
    pub(crate) fn new(queue: &str) -> Self {
        Self {
            waiting: QueueMetric::new(telemetry::REQUESTS_WAITING, queue),
            calls: QueueMetric::new(telemetry::BATCHED_CALLS, queue),
        }
    }
}

/// The requests of one operation on one queue.
#[derive(Debug)]
pub(crate) struct Lane<B: Batch> {
    batch: B,
    /// Bound on each call, and on each request's wait for its answer.
    timeout: Duration,
    metrics: LaneMetrics,
    state: Mutex<State<B>>,
}

#[derive(Debug)]
struct State<B: Batch> {
    /// A call of this lane is in flight, or about to be.
    busy: bool,
    /// A second call, sent while the first was in flight, is in flight.
    second: bool,
    next_ticket: u64,
    waiting: Waiting<B>,
}

/// The requests queued for the next call, oldest first, and the sum of
/// their `answered`, kept as they come and go.
#[derive(Debug)]
struct Waiting<B: Batch> {
    queue: VecDeque<Waiter<B>>,
    answered: usize,
}

#[derive(Debug)]
struct Waiter<B: Batch> {
    ticket: u64,
    /// The entry's `size` and `answered`, taken once.
    size: (usize, usize),
    answered: usize,
    entry: B::Entry,
    reply: oneshot::Sender<Result<B::Reply>>,
}

impl<B: Batch> Lane<B> {
    pub(crate) fn new(batch: B, timeout: Duration, metrics: LaneMetrics) -> Self {
        Self {
            batch,
            timeout,
            metrics,
            state: Mutex::new(State {
                busy: false,
                second: false,
                next_ticket: 0,
                waiting: Waiting {
                    queue: VecDeque::new(),
                    answered: 0,
                },
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `entry` with the next call and waits for its part of the
    /// reply, at most the timeout. Dropping the future before the entry
    /// was sent withdraws it.
    pub(crate) async fn submit(self: &Arc<Self>, entry: B::Entry) -> Result<B::Reply> {
        let deadline = Instant::now() + self.timeout;
        let (reply, answer) = oneshot::channel();
        let ticket = {
            let mut state = self.state();
            if state.busy {
                let ticket = state.next_ticket;
                state.next_ticket += 1;
                state.waiting.push(Waiter {
                    ticket,
                    size: B::size(&entry),
                    answered: B::answered(&entry),
                    entry,
                    reply,
                });
                self.metrics.waiting.increment(1.0);
                self.send_second(&mut state);
                Ok(ticket)
            } else {
                // Nothing waits (the lane goes idle only when nothing
                // does): this request's call goes at once, from its own
                // task, carrying it alone, so that going away cancels no
                // one else's call.
                state.busy = true;
                Err(entry)
            }
        };
        let ticket = match ticket {
            Ok(ticket) => ticket,
            Err(entry) => return self.lead(entry).await,
        };
        let mut answer = answer;
        match tokio::time::timeout_at(deadline, &mut answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(QueueError::Unknown(anyhow::anyhow!(
                "the call carrying the request ended without an answer"
            ))),
            Err(_) => {
                // Under the lock, which `drive` holds while it takes
                // entries and while it refuses them: the entry still waits
                // (never sent), or its answer came just now (a refusal or
                // the call's reply), or it is in a call still in flight.
                let mut state = self.state();
                if state.waiting.withdraw(ticket) {
                    self.metrics.waiting.decrement(1.0);
                    return Err(QueueError::Unavailable(anyhow::anyhow!(
                        "Redis did not answer within {:?}; the request was never sent",
                        self.timeout
                    )));
                }
                answer.try_recv().unwrap_or_else(|_| {
                    Err(QueueError::Unknown(anyhow::anyhow!(
                        "Redis did not answer within {:?}",
                        self.timeout
                    )))
                })
            }
        }
    }

    /// Sends the entry of a request that found the lane idle; whatever
    /// queued meanwhile goes on in a task of its own once this call ends
    /// or its request goes away.
    async fn lead(self: &Arc<Self>, entry: B::Entry) -> Result<B::Reply> {
        let _handoff = Handoff(self);
        let mut outcomes = self.send(std::slice::from_ref(&entry)).await;
        outcomes.pop().unwrap_or_else(|| {
            Err(QueueError::Unknown(anyhow::anyhow!(
                "the call carrying the request ended without an answer"
            )))
        })
    }

    /// Sends what waits, call after call, until nothing does.
    async fn drive(self: Arc<Self>) {
        loop {
            let (entries, replies) = {
                let mut state = self.state();
                let taken = self.take(&mut state);
                if taken.0.is_empty() {
                    state.busy = false;
                    return;
                }
                taken
            };
            self.answer(replies, &entries).await;
        }
    }

    /// Takes the waiting entries that fit one call, and their answers'
    /// senders.
    fn take(&self, state: &mut State<B>) -> Batched<B> {
        let before = state.waiting.queue.len();
        let taken = state.waiting.take_batch();
        self.metrics
            .waiting
            .decrement((before - state.waiting.queue.len()) as f64);
        taken.into_iter().map(|w| (w.entry, w.reply)).unzip()
    }

    /// Sends `entries` as one call and answers each.
    async fn answer(&self, replies: Vec<oneshot::Sender<Result<B::Reply>>>, entries: &[B::Entry]) {
        for (reply, outcome) in replies.into_iter().zip(self.send(entries).await) {
            let _ = reply.send(outcome);
        }
    }

    /// While a call is in flight, sends what waits behind it in a second
    /// call from a task of its own, when it asks for `SECOND_CALL_ITEMS`
    /// answered items or more and no second call is in flight: Redis runs
    /// the second while prioq reads the first's reply, rather than waiting
    /// idle for the next call. (Enqueues alone leave Redis little idle
    /// time, and two big calls of them in Redis at once cost it more per
    /// job, their arguments crowding its caches.) The requests of two
    /// calls in flight are concurrent (none was answered before another
    /// began): Redis may run either call first, as it may any two
    /// concurrent requests.
    fn send_second(self: &Arc<Self>, state: &mut State<B>) {
        if state.second || state.waiting.answered < B::SECOND_CALL_ITEMS {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (entries, replies) = self.take(state);
        if entries.is_empty() {
            return;
        }
        state.second = true;
        let lane = Arc::clone(self);
        runtime.spawn(async move {
            let second = SecondCall(&lane);
            second.0.answer(replies, &entries).await;
        });
    }

    /// One call: an outcome per entry, in order. When Redis did not serve
    /// it, what waited behind it is refused unsent rather than piled into
    /// a Redis that is down or stalled.
    async fn send(&self, entries: &[B::Entry]) -> Vec<Result<B::Reply>> {
        self.metrics.calls.increment(1);
        match bounded_by(self.timeout, self.batch.call(entries)).await {
            Ok(outcomes) if outcomes.len() == entries.len() => outcomes,
            Ok(outcomes) => {
                let error = QueueError::Unknown(anyhow::anyhow!(
                    "a call for {} requests answered {}",
                    entries.len(),
                    outcomes.len()
                ));
                entries.iter().map(|_| Err(error.duplicate())).collect()
            }
            Err(error) => {
                // Answered under the lock, so that a request whose own
                // deadline comes meanwhile finds its refusal.
                let mut state = self.state();
                let refused = state.waiting.take_all();
                self.metrics.waiting.decrement(refused.len() as f64);
                for waiter in refused {
                    let _ = waiter
                        .reply
                        .send(Err(QueueError::Unavailable(anyhow::anyhow!(
                            "not sent: the call before it failed ({error})"
                        ))));
                }
                entries.iter().map(|_| Err(error.duplicate())).collect()
            }
        }
    }
}

/// Hands a lane on when its leading call ends, or when the request that
/// made it goes away mid-call: to a task that sends what queued meanwhile
/// (the calls run apart from any request from then on), or to idle.
struct Handoff<'a, B: Batch>(&'a Arc<Lane<B>>);

impl<B: Batch> Drop for Handoff<'_, B> {
    fn drop(&mut self) {
        let lane = self.0;
        let mut state = lane.state();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !state.waiting.queue.is_empty() => {
                drop(state);
                runtime.spawn(Arc::clone(lane).drive());
            }
            _ => state.busy = false,
        }
    }
}

/// A lane's second call in flight: when it ends, or its task goes away
/// (a runtime shutting down), another may go.
struct SecondCall<'a, B: Batch>(&'a Arc<Lane<B>>);

impl<B: Batch> Drop for SecondCall<'_, B> {
    fn drop(&mut self) {
        self.0.state().second = false;
    }
}

/// A call's entries and their answers' senders.
type Batched<B> = (
    Vec<<B as Batch>::Entry>,
    Vec<oneshot::Sender<Result<<B as Batch>::Reply>>>,
);

impl<B: Batch> Waiting<B> {
    fn push(&mut self, waiter: Waiter<B>) {
        self.answered += waiter.answered;
        self.queue.push_back(waiter);
    }

    fn pop_front(&mut self) -> Option<Waiter<B>> {
        let waiter = self.queue.pop_front()?;
        self.answered -= waiter.answered;
        Some(waiter)
    }

    /// Takes out every request waiting.
    fn take_all(&mut self) -> VecDeque<Waiter<B>> {
        self.answered = 0;
        std::mem::take(&mut self.queue)
    }

    /// Takes out the request of `ticket` if it still waits.
    fn withdraw(&mut self, ticket: u64) -> bool {
        let at = self.queue.iter().position(|w| w.ticket == ticket);
        match at.and_then(|at| self.queue.remove(at)) {
            Some(waiter) => {
                self.answered -= waiter.answered;
                true
            }
            None => false,
        }
    }

    /// Takes the entries that fit one call, oldest first, dropping those
    /// whose request went away.
    fn take_batch(&mut self) -> Vec<Waiter<B>> {
        let (mut items, mut bytes) = (0, 0);
        let mut taken = Vec::new();
        while let Some(next) = self.queue.front() {
            if next.reply.is_closed() {
                self.pop_front();
                continue;
            }
            let (n, size) = next.size;
            let fits = items + n <= MAX_CALL_ITEMS && bytes + size <= MAX_CALL_BYTES;
            if !taken.is_empty() && !fits {
                break;
            }
            items += n;
            bytes += size;
            taken.extend(self.pop_front());
        }
        taken
    }
}

#[cfg(test)]
mod tests;
