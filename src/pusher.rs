//! The pusher every instance runs beside the sweeper: for each queue with
//! a push target, it claims the queue's jobs and POSTs each to the
//! target's URL, under the lease rules of a pulling worker. It takes one
//! of the target's slots (`queue::push`) before it claims a job, so the
//! target's concurrency holds across every instance; extends the lease
//! while the request runs; acks on a 2xx answer (its JSON body the job's
//! result), nacks with the answer's `Retry-After` on 429 and 503 and
//! with the error on any other failure; and records each delivery's end
//! in the target's health. A delivery whose lease ran out first is stale:
//! the job was taken back and is delivered again, with a larger fence.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::value::RawValue;
use sha2::Sha256;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::http::jobs::view::JobView;
use crate::queue::{
    Ack, AckOutcome, Broker, ClaimOptions, Job, Nack, PushEnd, PushTarget, QueueError,
};
use crate::telemetry;

/// How often a target's settings are read again (a change made through
/// another instance is picked up then).
const TARGET_REFRESH: Duration = Duration::from_secs(5);
/// How long a claim for a target waits for a job.
const CLAIM_WAIT: Duration = Duration::from_secs(1);
/// How long a slot outlives its delivery's lease: kept with the lease, a
/// slot of an instance that died lapses this long after its lease.
const SLOT_GRACE_MS: u64 = 1_000;
/// How long a target with no free slot waits before it asks again.
const SLOT_RETRY: Duration = Duration::from_millis(200);
/// How long a target whose calls fail waits before it tries again.
const FAILURE_PAUSE: Duration = Duration::from_secs(1);
/// The most of an answer's body read: a 2xx answer's JSON is the job's
/// result; another's first characters go in its error.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The longest `Retry-After` honoured: a day.
const MAX_RETRY_AFTER_MS: u64 = 86_400_000;
/// The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of
/// "<t>.<body>" under the target's secret>`.
pub const SIGNATURE_HEADER: &str = "prioq-signature";

/// What every delivery of this instance shares.
#[derive(Debug)]
struct Pusher {
    broker: Arc<Broker>,
    http: reqwest::Client,
    /// This instance's name in slots and as the worker of its leases.
    instance: String,
    takes: AtomicU64,
}

/// Delivers the jobs of every queue with a push target until `shutdown`:
/// the queues the broker knows to have one (set or deleted through this
/// instance, or seen by its sweeper in each queue's home; it costs Redis
/// nothing while no queue has one). Deliveries under way at shutdown get
/// `grace` to end; those that do not are dropped, and their leases run
/// out.
pub async fn run(broker: Arc<Broker>, grace: Duration, shutdown: CancellationToken) {
    let http = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(http) => http,
        Err(error) => {
            tracing::error!(%error, "cannot build the push client; push delivery is off");
            return;
        }
    };
    let changed = broker.push_changed();
    let pusher = Arc::new(Pusher {
        broker,
        http,
        instance: format!("push-{}", crate::queue::store::record::new_id()),
        takes: AtomicU64::new(0),
    });
    let mut serving: HashMap<String, CancellationToken> = HashMap::new();
    let mut tasks = JoinSet::new();
    loop {
        let queues = pusher.broker.push_queues();
        serving.retain(|queue, stop| {
            let keep = queues.contains(queue) && !stop.is_cancelled();
            if !keep {
                stop.cancel();
            }
            keep
        });
        for queue in queues {
            if serving.contains_key(&queue) {
                continue;
            }
            let stop = shutdown.child_token();
            serving.insert(queue.clone(), stop.clone());
            let pusher = Arc::clone(&pusher);
            tasks.spawn(async move { pusher.serve(queue, grace, stop).await });
        }
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            () = changed.notified() => {}
            Some(_) = tasks.join_next() => {}
            () = shutdown.cancelled() => break,
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// The outcome of one delivery, before it is recorded.
struct Delivery {
    end: PushEnd,
    /// The outcome label of the deliveries counter.
    label: &'static str,
}

impl Pusher {
    /// Delivers one queue's jobs while it has a target and until `stop`;
    /// reads the target again every `TARGET_REFRESH`. Once the target is
    /// gone, the broker hears of it.
    async fn serve(self: Arc<Self>, queue: String, grace: Duration, stop: CancellationToken) {
        let mut deliveries = JoinSet::new();
        let (mut settings, mut read_at) = (None::<PushTarget>, None::<Instant>);
        let mut failing = false;
        while !stop.is_cancelled() {
            while deliveries.try_join_next().is_some() {}
            if read_at.is_none_or(|at| at.elapsed() >= TARGET_REFRESH) {
                match self.broker.push(&queue).await {
                    Ok(Some(state)) => settings = Some(state.target),
                    Ok(None) => break,
                    // Redis away: the claims below fail too, and wait.
                    Err(_) => {}
                }
                read_at = Some(Instant::now());
            }
            let Some(target) = settings.clone() else {
                tokio::select! {
                    () = tokio::time::sleep(FAILURE_PAUSE) => {}
                    () = stop.cancelled() => {}
                }
                read_at = None;
                continue;
            };
            let running = u32::try_from(deliveries.len()).unwrap_or(u32::MAX);
            let free = target.concurrency.saturating_sub(running);
            let pause = match self.take_and_claim(&queue, &target, free, &stop).await {
                Ok(Some(jobs)) => {
                    failing = false;
                    let pause = jobs.is_empty().then_some(SLOT_RETRY);
                    for (job, slot) in jobs {
                        let pusher = Arc::clone(&self);
                        let (queue, target) = (queue.clone(), target.clone());
                        deliveries.spawn(async move {
                            pusher.deliver(&queue, &target, job, &slot).await;
                        });
                    }
                    pause
                }
                Ok(None) => break,
                Err(error) => {
                    if !failing {
                        failing = true;
                        tracing::warn!(
                            queue,
                            error = format!("{:#}", anyhow::Error::from(error)),
                            "cannot claim jobs to push; retrying"
                        );
                    }
                    Some(FAILURE_PAUSE)
                }
            };
            let Some(pause) = pause else { continue };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                Some(_) = deliveries.join_next() => {}
                () = stop.cancelled() => {}
            }
        }
        if !stop.is_cancelled() {
            // The target is gone.
            self.broker.note_push_target(&queue, false);
        }
        drain(deliveries, grace).await;
    }

    /// Takes up to `free` slots and claims a job for each; frees the slots
    /// no job came for. `None` when the queue has no target any more; an
    /// empty list when no slot was free or no job came.
    async fn take_and_claim(
        &self,
        queue: &str,
        target: &PushTarget,
        free: u32,
        shutdown: &CancellationToken,
    ) -> crate::queue::Result<Option<Vec<(Job, String)>>> {
        if free == 0 {
            return Ok(Some(Vec::new()));
        }
        let holder = format!(
            "{}:{}",
            self.instance,
            self.takes.fetch_add(1, Ordering::Relaxed)
        );
        let hold_ms = CLAIM_WAIT.as_millis() as u64 + target.lease_ms + SLOT_GRACE_MS;
        let Some(mut slots) = (self.broker)
            .take_push_slots(queue, free, &holder, hold_ms)
            .await?
        else {
            return Ok(None);
        };
        if slots.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let options = ClaimOptions {
            worker: Some(self.instance.clone()),
            lease_ms: target.lease_ms,
            max_jobs: u32::try_from(slots.len()).unwrap_or(u32::MAX),
            request_id: None,
            wait: CLAIM_WAIT,
            acks: Vec::new(),
        };
        let jobs = match self.broker.claim(queue, options, shutdown).await {
            Ok(claimed) => claimed.jobs,
            Err(error) => {
                self.free_slots(queue, &slots).await;
                return Err(error);
            }
        };
        let unused = slots.split_off(jobs.len().min(slots.len()));
        self.free_slots(queue, &unused).await;
        Ok(Some(jobs.into_iter().zip(slots).collect()))
    }

    async fn free_slots(&self, queue: &str, slots: &[String]) {
        for slot in slots {
            // A slot not freed lapses by itself.
            let _ = self
                .broker
                .free_push_slot(queue, slot, &PushEnd::Unused)
                .await;
        }
    }

    /// Delivers one job, ends its lease by the answer and records how the
    /// delivery went.
    async fn deliver(&self, queue: &str, target: &PushTarget, job: Job, slot: &str) {
        // Counted as under way from now; Redis away, it keeps its name.
        let hold_ms = target.lease_ms + SLOT_GRACE_MS;
        let slot = &(self.broker.busy_push_slot(queue, slot, hold_ms).await)
            .unwrap_or_else(|_| slot.to_owned());
        let in_flight = metrics::gauge!(telemetry::PUSH_IN_FLIGHT, "queue" => queue.to_owned());
        in_flight.increment(1.0);
        let delivery = self.attempt(queue, target, job, slot).await;
        in_flight.decrement(1.0);
        metrics::counter!(
            telemetry::PUSH_DELIVERIES,
            "queue" => queue.to_owned(),
            "outcome" => delivery.label
        )
        .increment(1);
        if let Err(error) = self.broker.free_push_slot(queue, slot, &delivery.end).await {
            tracing::debug!(queue, %error, "could not free a push slot; it lapses");
        }
    }

    async fn attempt(&self, queue: &str, target: &PushTarget, job: Job, slot: &str) -> Delivery {
        let Some(lease) = job.lease.clone() else {
            return Delivery {
                end: PushEnd::Unused,
                label: "unused",
            };
        };
        let id = job.id.clone();
        let request = self.request(queue, target, job, &lease.token);
        let answer = tokio::select! {
            answer = send(request) => answer,
            lost = self.keep_lease(queue, &id, &lease.token, target.lease_ms, slot) => {
                tracing::info!(queue, id, error = %lost, "a push's lease ran out before its answer came");
                return stale(0, "the lease ran out before the endpoint answered");
            }
        };
        let (status, body, retry_after) = match answer {
            Ok(answer) => answer,
            Err(error) => {
                let error = if error.is_timeout() {
                    format!("push: no answer within {} ms", target.timeout_ms)
                } else {
                    format!("push: {}", error_chain(&error))
                };
                return self.fail(queue, &id, &lease.token, 0, error, None).await;
            }
        };
        if (200..300).contains(&status) {
            let result = serde_json::from_slice::<Box<RawValue>>(&body).ok();
            let ack = Ack {
                id: id.clone(),
                lease_token: lease.token.clone(),
                result,
            };
            return match self.broker.ack(queue, vec![ack]).await.as_deref() {
                Ok([AckOutcome::Acked]) => Delivery {
                    end: PushEnd::Delivered(status),
                    label: "delivered",
                },
                Ok(_) => stale(status, "the lease ran out before the endpoint answered"),
                Err(error) => Delivery {
                    end: PushEnd::Failed(status, format!("push: the ack failed: {error}")),
                    label: "failed",
                },
            };
        }
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        let error = format!("push: HTTP {status}: {text}").trim_end().to_owned();
        let delay_ms = retry_after.filter(|_| matches!(status, 429 | 503));
        self.fail(queue, &id, &lease.token, status, error, delay_ms)
            .await
    }

    /// The POST of a job: the job's view, its lease token and fence, signed.
    fn request(
        &self,
        queue: &str,
        target: &PushTarget,
        job: Job,
        token: &str,
    ) -> reqwest::RequestBuilder {
        let fence = job.lease.as_ref().and_then(|lease| lease.fence());
        let attempt = job.attempts + 1;
        let trace = job.trace.clone();
        let id = job.id.clone();
        let body = serde_json::to_vec(&PushBody {
            queue,
            lease_token: token,
            fence,
            job: JobView::new(queue, job),
        })
        .unwrap_or_default();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut request = self
            .http
            .post(&target.url)
            .timeout(Duration::from_millis(target.timeout_ms))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature(&target.secret, now, &body))
            .header("prioq-queue", queue)
            .header("prioq-job-id", id)
            .header("prioq-attempt", attempt);
        if let Some(fence) = fence {
            request = request.header("prioq-fence", fence);
        }
        if let Some(trace) = trace {
            request = request.header("traceparent", trace.traceparent);
            if !trace.tracestate.is_empty() {
                request = request.header("tracestate", trace.tracestate);
            }
        }
        request.body(body)
    }

    /// Extends the lease, and keeps the slot with it, every third of it
    /// while the request runs; ends when the lease is lost (taken back, or
    /// the job ended otherwise).
    async fn keep_lease(
        &self,
        queue: &str,
        id: &str,
        token: &str,
        lease_ms: u64,
        slot: &str,
    ) -> QueueError {
        let every = Duration::from_millis((lease_ms / 3).max(1));
        loop {
            tokio::time::sleep(every).await;
            match self.broker.extend(queue, id, token, lease_ms, None).await {
                Ok(_) => {
                    // A slot that lapsed meanwhile is another delivery's
                    // now: the target gets one more for this one's rest.
                    let _ = (self.broker)
                        .keep_push_slot(queue, slot, lease_ms + SLOT_GRACE_MS)
                        .await;
                }
                Err(
                    error @ (QueueError::LeaseLost | QueueError::NotFound | QueueError::Conflict),
                ) => {
                    return error;
                }
                // Redis away: the lease may still hold; try again.
                Err(_) => {}
            }
        }
    }

    /// Nacks a failed delivery: the job is retried by the queue's rules
    /// (after `delay_ms`, the answer's `Retry-After`, when it gave one; else
    /// after the job's backoff).
    async fn fail(
        &self,
        queue: &str,
        id: &str,
        token: &str,
        status: u16,
        error: String,
        delay_ms: Option<u64>,
    ) -> Delivery {
        let nack = Nack {
            delay_ms,
            error: Some(error.clone()),
            ..Nack::default()
        };
        match self.broker.nack(queue, id, token, &nack).await {
            Err(QueueError::LeaseLost | QueueError::NotFound | QueueError::Conflict) => {
                stale(status, &error)
            }
            // Redis away: the lease runs out and the job is delivered again.
            Ok(_) | Err(_) => Delivery {
                end: PushEnd::Failed(status, error),
                label: "failed",
            },
        }
    }
}

/// What a delivery POSTs.
#[derive(Serialize)]
struct PushBody<'a> {
    queue: &'a str,
    lease_token: &'a str,
    fence: Option<u64>,
    job: JobView,
}

fn stale(status: u16, error: &str) -> Delivery {
    Delivery {
        end: PushEnd::Stale(status, error.to_owned()),
        label: "stale",
    }
}

/// Sends a request and reads its answer: the status, the body's first
/// `MAX_ANSWER_BYTES`, and its `Retry-After` in ms.
async fn send(
    request: reqwest::RequestBuilder,
) -> Result<(u16, Vec<u8>, Option<u64>), reqwest::Error> {
    let mut answer = request.send().await?;
    let status = answer.status().as_u16();
    let retry_after = answer
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(retry_after_ms);
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ANSWER_BYTES {
            body.truncate(MAX_ANSWER_BYTES);
            break;
        }
    }
    Ok((status, body, retry_after))
}

/// A `Retry-After` value in ms: seconds, or an HTTP date; at most a day.
fn retry_after_ms(value: &str) -> Option<u64> {
    let value = value.trim();
    let ms = match value.parse::<u64>() {
        Ok(seconds) => seconds.saturating_mul(1000),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(SystemTime::now())
                .map_or(0, |d| d.as_millis() as u64)
        }
    };
    Some(ms.min(MAX_RETRY_AFTER_MS))
}

/// The signature header's value for a body sent at `unix_seconds`.
pub fn signature(secret: &str, unix_seconds: u64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("{unix_seconds}.").as_bytes());
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={unix_seconds},v1={hex}")
}

/// An error and its causes, one line.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Lets the deliveries under way end within `grace`; drops the rest.
async fn drain(mut deliveries: JoinSet<()>, grace: Duration) {
    let ended = async { while deliveries.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, ended).await.is_err() {
        deliveries.abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates_within_a_day() {
        assert_eq!(retry_after_ms("3"), Some(3000));
        assert_eq!(retry_after_ms(" 0 "), Some(0));
        assert_eq!(retry_after_ms("999999999"), Some(MAX_RETRY_AFTER_MS));
        assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), Some(0));
        assert_eq!(retry_after_ms("soon"), None);
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_time_and_body() {
        // HMAC-SHA256 under "Jefe" (RFC 4231's key) of "0.what do ya
        // want for nothing?", as Python's hmac module computes it.
        assert_eq!(
            signature("Jefe", 0, b"what do ya want for nothing?"),
            "t=0,v1=37f471929915ccd2cbbe79feb84ffcff4f2bb25e15fc41c2506687331ae179cc"
        );
    }
}
