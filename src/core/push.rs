//! Push delivery commands (`lua/push.lua`, extension): a queue's endpoint settings
//! and signing secrets, leases for delivery within the queue's concurrency and rate
//! (shared by every qlessd on the namespace), and the end of a delivery.

use std::collections::BTreeMap;
use std::fmt;

use redis::Value;
use serde::Deserialize;

use super::command::{Args, Command, Recorder, Subject};
use super::{Error, leased, reply};
use crate::model::Job;

/// Where and how a queue's jobs are delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct PushConfig {
    /// The endpoint, `http` or `https` (checked by the gateway before it gets here).
    pub url: String,
    /// Seconds a delivery may take (1 to 900).
    pub timeout: u32,
    /// Deliveries in flight for the queue, across every qlessd.
    pub concurrency: u32,
    /// At most `jobs` deliveries started per `seconds`, when set.
    pub rate: Option<PushRate>,
    /// Static headers sent with every delivery.
    pub headers: BTreeMap<String, String>,
}

/// A rate limit: at most `jobs` deliveries started in any `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct PushRate {
    pub jobs: u64,
    pub seconds: f64,
}

/// A signing secret (`whsec_<base64>`). Its `Debug` shows nothing of it, so a secret
/// never reaches a log through a struct that holds it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret's text.
    pub fn new(text: String) -> Self {
        Secret(text)
    }

    /// The secret's text, for signing (and for the one answer that shows it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A pushed queue as the script keeps it: its settings, its secrets (the current one
/// first, then the rotated-out one while its grace lasts) and its counts.
#[derive(Debug, Clone, Deserialize)]
pub struct PushState {
    pub queue: String,
    pub url: String,
    pub timeout: u32,
    pub concurrency: u32,
    pub rate: Option<PushRate>,
    pub headers: BTreeMap<String, String>,
    pub secrets: Vec<Secret>,
    /// When the rotated-out secret stops signing (Unix seconds), while it does.
    pub old_until: Option<f64>,
    pub delivered: u64,
    pub retried: u64,
    pub failed: u64,
    pub in_flight: u64,
    /// The latest deliveries, newest first (at most 50).
    #[serde(default, deserialize_with = "crate::model::wire::list")]
    pub recent: Vec<crate::model::PushDelivery>,
}

/// When a retried job is delivered again, and whether that uses up one of its
/// retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RetryDelay {
    /// After the job's own backoff for this attempt (none: at once), using one of its
    /// retries: the endpoint failed.
    Backoff,
    /// After this many seconds, using none of its retries: the endpoint asked for it
    /// later (`Retry-After`), or qlessd stopped during the delivery.
    Postponed(f64),
}

/// How a delivery ended, as the receiver's answer decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome<'a> {
    /// Completed, with the answer's JSON body as the job's result when there was one.
    Complete { result: Option<&'a str> },
    /// Retried (failed into `group` when its retries are used up).
    Retry {
        delay: RetryDelay,
        group: &'a str,
        message: &'a str,
    },
    /// Failed at once into `group`.
    Fail { group: &'a str, message: &'a str },
}

/// What the end of a delivery did to its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    Delivered,
    Retried,
    Failed,
    /// The job could no longer be ended by this delivery (canceled meanwhile, or its
    /// lease expired and went to another worker); the script's error text says which.
    Gone(String),
}

/// `push.set`: subscribes a queue to an endpoint, or changes its settings.
struct PushSet<'a> {
    queue: &'a str,
    config: &'a PushConfig,
    headers: String,
    secret: &'a Secret,
}

impl Command for PushSet<'_> {
    /// True when the queue was not pushed before (and `secret` is now its secret).
    type Output = bool;

    fn name(&self) -> &'static str {
        "push.set"
    }

    fn encode(&self, args: &mut Args) {
        let (jobs, seconds) = self.config.rate.map_or((0, 0.0), |r| (r.jobs, r.seconds));
        args.push(self.queue)
            .push(self.config.url.as_str())
            .push(self.config.timeout)
            .push(self.config.concurrency)
            .push(jobs)
            .push(seconds)
            .push(self.headers.as_str())
            .push(self.secret.expose());
    }

    fn decode(&self, reply: Value) -> Result<bool, Error> {
        Ok(reply::integer(reply)? == 1)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `push.get`: a pushed queue's settings, secrets and counts, or `None`.
struct PushGet<'a> {
    queue: &'a str,
}

impl Command for PushGet<'_> {
    type Output = Option<PushState>;

    fn name(&self) -> &'static str {
        "push.get"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue);
    }

    fn decode(&self, reply: Value) -> Result<Option<PushState>, Error> {
        reply::optional_json(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `push.list`: the pushed queues, by name.
struct PushList;

impl Command for PushList {
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "push.list"
    }

    fn encode(&self, _args: &mut Args) {}

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `push.forget`: stops pushing a queue; true when it was pushed.
struct PushForget<'a> {
    queue: &'a str,
}

impl Command for PushForget<'_> {
    type Output = bool;

    fn name(&self) -> &'static str {
        "push.forget"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue);
    }

    fn decode(&self, reply: Value) -> Result<bool, Error> {
        Ok(reply::integer(reply)? == 1)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `push.rotate`: a new signing secret; the old one signs beside it for `grace`
/// seconds. False when the queue is not pushed.
struct PushRotate<'a> {
    queue: &'a str,
    secret: &'a Secret,
    grace: u64,
}

impl Command for PushRotate<'_> {
    type Output = bool;

    fn name(&self) -> &'static str {
        "push.rotate"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue)
            .push(self.secret.expose())
            .push(self.grace);
    }

    fn decode(&self, reply: Value) -> Result<bool, Error> {
        Ok(reply::integer(reply)? == 1)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `push.pop`: up to `max` jobs of `queue` leased to `worker` for delivery, fewer
/// when the queue's concurrency or rate has less room.
struct PushPop<'a> {
    queue: &'a str,
    worker: &'a str,
    max: u32,
}

impl Command for PushPop<'_> {
    type Output = Vec<Pushed>;

    fn name(&self) -> &'static str {
        "push.pop"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.worker).push(self.max);
    }

    fn decode(&self, reply: Value) -> Result<Vec<Pushed>, Error> {
        Ok(leased::pushed_jobs(reply)?
            .into_iter()
            .map(|(job, attempt)| Pushed { job, attempt })
            .collect())
    }

    fn weight(&self) -> usize {
        self.max as usize
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }

    fn record(&self, recorder: &Recorder<'_>, pushed: &Vec<Pushed>) {
        for leased in pushed {
            recorder.popped(std::slice::from_ref(&leased.job));
        }
    }
}

/// A job leased for push delivery, and which delivery of it this is (the script's
/// count of its push leases, for `qlessd-attempt`).
#[derive(Debug)]
pub struct Pushed {
    pub job: Job,
    pub attempt: u64,
}

/// A delivery as it is recorded among a queue's recent ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attempted {
    /// The answer's HTTP status; none when no answer came.
    pub status: Option<u16>,
    /// How long the delivery took, in milliseconds.
    pub ms: u64,
    /// Which delivery of the job this was (1 for the first).
    pub attempt: u64,
}

/// `push.finish`: ends a delivery of `jid` as `outcome` says, freeing its slot.
struct PushFinish<'a> {
    queue: &'a str,
    jid: &'a str,
    worker: &'a str,
    attempted: Attempted,
    outcome: Outcome<'a>,
}

impl Command for PushFinish<'_> {
    type Output = Finished;

    fn name(&self) -> &'static str {
        "push.finish"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.jid).push(self.worker);
        match self.attempted.status {
            Some(status) => args.push(u32::from(status)),
            None => args.push(""),
        };
        args.push(self.attempted.ms).push(self.attempted.attempt);
        match self.outcome {
            Outcome::Complete { result } => {
                args.push("complete");
                if let Some(result) = result {
                    args.push(result);
                }
            }
            Outcome::Retry {
                delay,
                group,
                message,
            } => {
                match delay {
                    RetryDelay::Backoff => args.push("retry").push("backoff"),
                    RetryDelay::Postponed(seconds) => args.push("postpone").push(seconds),
                };
                args.push(group).push(message);
            }
            Outcome::Fail { group, message } => {
                args.push("fail").push(group).push(message);
            }
        }
    }

    fn decode(&self, reply: Value) -> Result<Finished, Error> {
        let mut parts = reply::strings(reply)?.into_iter();
        let what = parts.next().unwrap_or_default();
        Ok(match what.as_str() {
            "delivered" => Finished::Delivered,
            "retried" => Finished::Retried,
            "failed" => Finished::Failed,
            "gone" => Finished::Gone(parts.next().unwrap_or_default()),
            other => return Err(Error::Reply(format!("push.finish answered {other:?}"))),
        })
    }

    fn subject(&self) -> Subject<'_> {
        Subject::job(self.queue, self.jid)
    }

    fn record(&self, recorder: &Recorder<'_>, finished: &Finished) {
        let event = match finished {
            Finished::Delivered => "completed",
            Finished::Retried => "retried",
            Finished::Failed => "failed",
            Finished::Gone(_) => return,
        };
        recorder.finished(self.queue, event, self.jid);
    }
}

impl super::Qless {
    /// `push.set`: subscribes `queue` to an endpoint (true, with `secret` as its
    /// signing secret) or changes its settings (false, its secrets kept).
    pub async fn push_set(
        &self,
        now: f64,
        queue: &str,
        config: &PushConfig,
        secret: &Secret,
    ) -> Result<bool, Error> {
        // (A map of strings always serializes.)
        let headers = serde_json::to_string(&config.headers).unwrap_or_default();
        let command = PushSet {
            queue,
            config,
            headers,
            secret,
        };
        self.run(now, &command).await
    }

    /// `push.get`: a pushed queue's settings, secrets and counts, or `None`.
    pub async fn push_get(&self, now: f64, queue: &str) -> Result<Option<PushState>, Error> {
        self.run(now, &PushGet { queue }).await
    }

    /// `push.list`: the pushed queues, by name.
    pub async fn push_list(&self, now: f64) -> Result<Vec<String>, Error> {
        self.run(now, &PushList).await
    }

    /// `push.forget`: stops pushing `queue`; true when it was pushed.
    pub async fn push_forget(&self, now: f64, queue: &str) -> Result<bool, Error> {
        self.run(now, &PushForget { queue }).await
    }

    /// `push.rotate`: `secret` signs from now on, the old one beside it for `grace`
    /// seconds; false when the queue is not pushed.
    pub async fn push_rotate(
        &self,
        now: f64,
        queue: &str,
        secret: &Secret,
        grace: u64,
    ) -> Result<bool, Error> {
        self.run(
            now,
            &PushRotate {
                queue,
                secret,
                grace,
            },
        )
        .await
    }

    /// `push.pop`: up to `max` jobs of `queue` leased to `worker` for delivery.
    pub async fn push_pop(
        &self,
        now: f64,
        queue: &str,
        worker: &str,
        max: u32,
    ) -> Result<Vec<Pushed>, Error> {
        self.run(now, &PushPop { queue, worker, max }).await
    }

    /// `push.finish`: ends a delivery of `jid` by `worker` as `outcome` says.
    pub async fn push_finish(
        &self,
        now: f64,
        queue: &str,
        jid: &str,
        worker: &str,
        attempted: Attempted,
        outcome: Outcome<'_>,
    ) -> Result<Finished, Error> {
        let command = PushFinish {
            queue,
            jid,
            worker,
            attempted,
            outcome,
        };
        self.run(now, &command).await
    }
}
