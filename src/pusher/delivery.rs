//! One delivery: the POST of a job under its lease, kept while the
//! request runs, and the lease ended by the answer.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::value::RawValue;

use super::wire::{SIGNATURE_HEADER, error_chain, send, signature};
use super::{Delivery, Pusher, SLOT_GRACE_MS};
use crate::http::jobs::view::JobView;
use crate::queue::{Ack, AckOutcome, Job, Nack, PushEnd, PushTarget, QueueError};
use crate::telemetry;

impl Pusher {
    /// Delivers one job, ends its lease by the answer and records how the
    /// delivery went.
    pub(super) async fn deliver(&self, queue: &str, target: &PushTarget, job: Job, slot: &str) {
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
