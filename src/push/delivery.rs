//! One delivery: the signed POST of a leased job to its queue's endpoint, the
//! heartbeats that keep its lease while the endpoint works, and the end of the job
//! as the answer decides (`answer.rs`), with its log line.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};

use super::answer::{self, Failure, Verdict};
use super::endpoint::{self, AddressPolicy};
use super::signature;
use crate::clock::Clock;
use crate::core::Qless;
use crate::core::push::{Attempted, Finished, Outcome, PushState, RetryDelay};
use crate::metrics::METRICS;
use crate::model::Job;
use crate::telemetry;

/// A delivery about to be made: what it needs of its deliverer and its queue.
pub(super) struct Delivery {
    pub client: reqwest::Client,
    pub policy: AddressPolicy,
    pub qless: Qless,
    pub clock: Clock,
    pub worker: String,
    pub max_result: usize,
    pub state: Arc<PushState>,
    pub url: reqwest::Url,
}

/// What came back: an answer (status, `Retry-After`, the start of its body), or why
/// none did.
enum Reply {
    Answer {
        status: u16,
        retry_after: Option<String>,
        body: Vec<u8>,
    },
    None(Failure, String),
}

impl Delivery {
    /// Delivers `job`, its delivery number `attempt` (`qlessd-attempt`), and ends it
    /// as the answer decides.
    pub async fn deliver(self, job: Job, attempt: u64) {
        let started = Instant::now();
        let _counted = InFlight::start();
        let span =
            telemetry::delivery_span(job.traceparent.as_deref(), &self.state.queue, &job.jid);
        // With tracing on, the receiver's work is a child of this delivery's span;
        // otherwise it continues the job's trace as the job carries it.
        let traceparent = if telemetry::tracing_on() {
            Some(span.context().to_header())
        } else {
            job.traceparent.clone()
        };
        let reply = if endpoint::may_connect(&self.url, self.policy) {
            let post = self.post(&job, attempt, traceparent.as_deref());
            self.keeping_the_lease(&job, post).await
        } else {
            Reply::None(
                Failure::Connect,
                "the endpoint's address is not public (see --push-allow-private)".to_owned(),
            )
        };
        let (status, verdict) = match reply {
            Reply::Answer {
                status,
                retry_after,
                body,
            } => (
                Some(status),
                answer::on_answer(
                    status,
                    retry_after.as_deref(),
                    &body,
                    self.max_result,
                    SystemTime::now(),
                ),
            ),
            Reply::None(failure, detail) => (None, answer::on_failure(failure, &detail)),
        };
        telemetry::end_delivery(span, status);
        let outcome = match &verdict {
            Verdict::Complete { result } => Outcome::Complete {
                result: result.as_deref(),
            },
            Verdict::Retry {
                after,
                group,
                message,
            } => Outcome::Retry {
                delay: after.map_or(RetryDelay::Backoff, RetryDelay::Postponed),
                group,
                message,
            },
            Verdict::Fail { group, message } => Outcome::Fail { group, message },
        };
        let took = started.elapsed();
        let took_ms = took.as_millis() as u64;
        let attempted = Attempted {
            status,
            ms: took_ms,
            attempt,
        };
        let finished = self
            .qless
            .push_finish(
                self.clock.now(),
                &self.state.queue,
                &job.jid,
                &self.worker,
                attempted,
                outcome,
            )
            .await;
        let word = match &finished {
            Ok(finished) => outcome_word(finished),
            Err(_) => "unrecorded",
        };
        METRICS.push_delivered(self.qless.namespace(), &self.state.queue, word, took);
        let status = status.map_or_else(|| "none".to_owned(), |s| s.to_string());
        match finished {
            Ok(Finished::Gone(why)) => tracing::info!(
                target: "qlessd::push",
                queue = %self.state.queue, jid = %job.jid, %status, took_ms, attempt,
                outcome = "gone", %why,
                "push delivery"
            ),
            Ok(finished) => tracing::info!(
                target: "qlessd::push",
                queue = %self.state.queue, jid = %job.jid, %status, took_ms, attempt,
                outcome = outcome_word(&finished),
                "push delivery"
            ),
            Err(err) => tracing::warn!(
                target: "qlessd::push",
                queue = %self.state.queue, jid = %job.jid, %status, took_ms, attempt, %err,
                "push delivery made, but the job could not be ended; its lease will expire and it is delivered again"
            ),
        }
    }

    /// The POST itself, read up to `max_result` bytes of its answer and one more.
    async fn post(&self, job: &Job, attempt: u64, traceparent: Option<&str>) -> Reply {
        // The job as `GET /v1/jobs/{jid}` shows it: `push.pop` read every member `get`
        // gives, into the same model, written by the same serializer.
        let body = match serde_json::to_vec(job) {
            Ok(body) => body,
            Err(err) => {
                return Reply::None(Failure::Connect, format!("job not serializable: {err}"));
            }
        };
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let signatures = signature::signatures(&self.state.secrets, &job.jid, timestamp, &body);
        let mut request = self
            .client
            .post(self.url.clone())
            .timeout(Duration::from_secs(u64::from(self.state.timeout)));
        // The queue's own headers first, so that none of them can replace the ones
        // the receiver verifies.
        for (name, value) in &self.state.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                request = request.header(name, value);
            }
        }
        request = request
            .header(CONTENT_TYPE, "application/json")
            .header("webhook-id", job.jid.as_str())
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signatures)
            .header("qlessd-attempt", attempt.to_string());
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let mut response = match request.body(body).send().await {
            Ok(response) => response,
            Err(err) => return failure(&err),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = (self.max_result + 1).saturating_sub(body.len());
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if body.len() > self.max_result {
                        break;
                    }
                }
                Ok(None) => break,
                // The status is known: a body cut short is judged as far as it came.
                Err(_) => break,
            }
        }
        Reply::Answer {
            status,
            retry_after,
            body,
        }
    }

    /// Runs `post`, heartbeating the job at half its lease while it runs, so that a
    /// delivery longer than the lease keeps it.
    async fn keeping_the_lease(&self, job: &Job, post: impl Future<Output = Reply>) -> Reply {
        let lease = (job.expires - self.clock.now()).max(1.0);
        let every = Duration::from_secs_f64(lease / 2.0);
        tokio::pin!(post);
        loop {
            tokio::select! {
                reply = &mut post => return reply,
                _ = tokio::time::sleep(every) => {
                    if let Err(err) = self.qless.heartbeat(self.clock.now(), &job.jid, &self.worker, None).await {
                        tracing::debug!(jid = %job.jid, %err, "heartbeat of a push delivery failed");
                    }
                }
            }
        }
    }
}

/// Why a request got no answer, in words that hold no URL (a query string may carry
/// a credential).
fn failure(err: &reqwest::Error) -> Reply {
    let kind = if err.is_timeout() {
        Failure::Timeout
    } else if caused_by_tls(err) {
        Failure::Tls
    } else {
        Failure::Connect
    };
    let mut detail = String::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(err);
    while let Some(cause) = source {
        if !detail.is_empty() {
            detail.push_str(": ");
        }
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    if detail.is_empty() {
        detail = if kind == Failure::Timeout {
            "no answer within the queue's timeout".to_owned()
        } else {
            "the request failed".to_owned()
        };
    }
    Reply::None(kind, detail)
}

/// Whether a TLS error is among the causes of `err`.
fn caused_by_tls(err: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(cause) = source {
        if is_tls(cause) {
            return true;
        }
        source = cause.source();
    }
    false
}

/// Whether `err` is a rustls error, or one inside I/O errors: the connector hands a
/// handshake's failure on wrapped in I/O errors, whose `source` skips what they wrap.
fn is_tls(err: &(dyn std::error::Error + 'static)) -> bool {
    if err.downcast_ref::<rustls::Error>().is_some() {
        return true;
    }
    match err
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
    {
        Some(inner) => is_tls(inner),
        None => false,
    }
}

/// Counts a delivery in flight for as long as it lives (also when its task is
/// stopped by shutdown).
struct InFlight;

impl InFlight {
    fn start() -> Self {
        METRICS.push_in_flight(1);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        METRICS.push_in_flight(-1);
    }
}

/// The word of the log line for how the job ended.
fn outcome_word(finished: &Finished) -> &'static str {
    match finished {
        Finished::Delivered => "delivered",
        Finished::Retried => "retried",
        Finished::Failed => "failed",
        Finished::Gone(_) => "gone",
    }
}
