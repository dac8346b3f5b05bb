//! Reading a job: as it is, once it has ended (a wait), or its history.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{RECHECK_INTERVAL, Waiting};
use crate::queue::broker::Broker;
use crate::queue::error::{QueueError, Result};
use crate::queue::job::{Event, Job, JobState};
use crate::queue::store::library::{Function, LIBRARY};
use crate::telemetry;

impl Broker {
    /// One job in any state.
    pub async fn job(&self, queue: &str, id: &str) -> Result<Job> {
        self.shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Job, &shards.of(id).keys);
                cmd.arg(id);
                let job: Option<Job> = self.call(&cmd).await?;
                job.ok_or(QueueError::NotFound)
            })
            .await
    }

    /// A job's history, oldest event first: empty when its queue keeps
    /// none (`history_ms`) or it lapsed.
    pub async fn history(&self, queue: &str, id: &str) -> Result<Vec<Event>> {
        let entries: Vec<String> = self
            .shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::History, &shards.of(id).keys);
                cmd.arg(id);
                self.call(&cmd).await
            })
            .await?;
        Ok(entries
            .iter()
            .filter_map(|entry| Event::parse(entry))
            .collect())
    }

    /// One job, once it has ended (completed or dead), or as it is when
    /// `wait` is over or at `shutdown`. The job's end is heard from whichever
    /// instance ended it (see `wake`), with a recheck now and then.
    pub async fn wait_for_job(
        &self,
        queue: &str,
        id: &str,
        wait: Duration,
        shutdown: &CancellationToken,
    ) -> Result<Job> {
        let deadline = Instant::now() + wait;
        let signal = self.waiters.job_signal(queue, id);
        // Listen before looking, so an end in between still wakes us.
        let mut woken = Box::pin(signal.notified());
        woken.as_mut().enable();
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let mut job: Job = self
            .shards
            .routed(queue, |shards| async move {
                let mut cmd = LIBRARY.call(Function::Watch, &shards.of(id).keys);
                cmd.arg(id).arg(wait_ms);
                self.call::<Option<Job>>(&cmd)
                    .await?
                    .ok_or(QueueError::NotFound)
            })
            .await?;
        let Some(_waiting) = Waiting::start(self, telemetry::JOB_WAITS) else {
            // Beyond the waiters an instance keeps, the wait ends now.
            return Ok(job);
        };
        loop {
            let ended = matches!(
                job.state,
                JobState::Completed | JobState::Dead | JobState::Cancelled
            );
            if ended || Instant::now() >= deadline || shutdown.is_cancelled() {
                return Ok(job);
            }
            let recheck = deadline.min(Instant::now() + RECHECK_INTERVAL);
            tokio::select! {
                () = woken.as_mut() => {}
                () = tokio::time::sleep_until(recheck) => {}
                () = shutdown.cancelled() => {}
            }
            woken = Box::pin(signal.notified());
            woken.as_mut().enable();
            job = self.job(queue, id).await?;
        }
    }
}
