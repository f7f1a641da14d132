//! Job commands (`lua/job.lua`): one typed function per script command, same names.

use serde::Deserialize;

use super::leased;
use super::reply::{self, Args, json_list};
use super::{Error, Qless};
use crate::model::Job;

/// Arguments of `put` and `requeue`.
#[derive(Debug, Clone, Default)]
pub struct PutArgs {
    /// Recorded by the script only to notify a previous owner that lost the job.
    pub worker: String,
    pub queue: String,
    pub jid: String,
    pub klass: String,
    /// JSON text, stored byte for byte.
    pub data: String,
    /// Seconds before the job becomes waiting.
    pub delay: f64,
    /// Unset: inherited from an existing job, else 0.
    pub priority: Option<f64>,
    /// Unset: inherited, else none.
    pub tags: Option<Vec<String>>,
    /// Unset: inherited, else 5.
    pub retries: Option<i64>,
    /// Jobs to wait for. Unset or empty: existing dependencies are kept.
    pub depends: Option<Vec<String>>,
    /// Throttles the job holds while it runs (extension). Unset: kept; empty: none.
    pub throttles: Option<Vec<String>>,
    /// Retry backoff policy as JSON text (extension). Unset: kept.
    pub backoff: Option<String>,
    /// The W3C `traceparent` of the job's trace (extension), handed back with it.
    pub traceparent: Option<String>,
}

impl PutArgs {
    fn into_args(self) -> Vec<String> {
        Args::new()
            .arg(self.worker)
            .arg(self.queue)
            .arg(self.jid)
            .arg(self.klass)
            .arg(self.data)
            .arg(self.delay)
            .option("priority", self.priority)
            .option("tags", self.tags.as_deref().map(json_list))
            .option("retries", self.retries)
            .option("depends", self.depends.as_deref().map(json_list))
            .option(
                "throttles",
                self.throttles
                    .as_deref()
                    .map(|names| serde_json::to_string(names).unwrap_or_else(|_| "[]".to_owned())),
            )
            .option("backoff", self.backoff)
            .option("traceparent", self.traceparent)
            .into_vec()
    }
}

/// An idempotency key for a put (extension `put.idem`): a repeated put with the same
/// key within `ttl` seconds answers the first put's jid and writes nothing.
#[derive(Debug, Clone)]
pub struct Idempotency {
    pub key: String,
    pub ttl: f64,
}

/// What a put answered: the job's jid, and whether this call created (or reset) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutOutcome {
    pub jid: String,
    pub created: bool,
}

/// What a requeue keeps from the job rather than taking from its arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequeueKeep {
    /// Keep the job's klass.
    pub klass: bool,
    /// Keep the job's data.
    pub data: bool,
}

/// Arguments of `complete`.
#[derive(Debug, Clone, Default)]
pub struct CompleteArgs {
    pub jid: String,
    pub worker: String,
    pub queue: String,
    /// JSON text, stored byte for byte.
    pub data: String,
    /// Move the job on to this queue instead of finishing it.
    pub next: Option<String>,
    /// With `next`: delay before it is waiting there.
    pub delay: Option<f64>,
    /// With `next`: jobs it waits for there.
    pub depends: Option<Vec<String>>,
    /// Leave the stored data as it is (`data` is then ignored): the `keep-data`
    /// extension option, which other qless clients never send.
    pub keep_data: bool,
    /// The job's result (JSON text), stored beside its data (extension).
    pub result: Option<String>,
}

impl CompleteArgs {
    fn into_args(self) -> Vec<String> {
        Args::new()
            .arg(self.jid)
            .arg(self.worker)
            .arg(self.queue)
            .arg(self.data)
            .option("next", self.next)
            .option("delay", self.delay)
            .option("depends", self.depends.as_deref().map(json_list))
            .option("keep-data", self.keep_data.then_some(1))
            .option("result", self.result)
            .into_vec()
    }
}

/// Arguments of `retry`.
#[derive(Debug, Clone, Default)]
pub struct RetryArgs {
    pub jid: String,
    pub queue: String,
    pub worker: String,
    /// `None`: the job's backoff for this attempt (0 when it has none).
    pub delay: Option<f64>,
    /// With `message`: the failure recorded (and used if retries are exhausted).
    pub group: Option<String>,
    pub message: Option<String>,
}

impl RetryArgs {
    fn into_args(self) -> Vec<String> {
        let argv = Args::new().arg(self.jid).arg(self.queue).arg(self.worker);
        let mut argv = match self.delay {
            Some(delay) => argv.arg(delay),
            // Extension: the script takes the job's backoff for this attempt.
            None => argv.arg("backoff"),
        };
        if let (Some(group), Some(message)) = (self.group, self.message) {
            argv = argv.arg(group).arg(message);
        }
        argv.into_vec()
    }
}

/// Arguments of `fail`.
#[derive(Debug, Clone, Default)]
pub struct FailArgs {
    pub jid: String,
    pub worker: String,
    pub group: String,
    pub message: String,
    /// Replaces the job's data when present (JSON text).
    pub data: Option<String>,
}

impl FailArgs {
    fn into_args(self) -> Vec<String> {
        Args::new()
            .arg(self.jid)
            .arg(self.worker)
            .arg(self.group)
            .arg(self.message)
            .args(self.data)
            .into_vec()
    }
}

/// Jobs leased by `pop.after` once the jobs it ended were ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Leased {
    /// The queue they came from: the one the (first) ended job ran in.
    pub queue: String,
    /// The leased jobs (up to the count asked; none when the queue was empty).
    pub jobs: Vec<Job>,
}

/// What `pop.after` answers: each call's result, then what was leased (`None` when a
/// call failed, and then nothing was).
struct AfterPop {
    results: Vec<Result<redis::Value, Error>>,
    leased: Option<Leased>,
}

impl AfterPop {
    fn from_reply(value: redis::Value, calls: usize) -> Result<Self, Error> {
        let redis::Value::Array(mut items) = value else {
            return Err(Error::reply(format!("pop.after answered {value:?}")));
        };
        if items.len() != calls + 2 {
            return Err(Error::reply(format!(
                "pop.after answered {} items for {calls} calls",
                items.len()
            )));
        }
        let popped = items.pop().expect("checked length");
        let queue = items.pop().expect("checked length");
        let results: Vec<_> = items.into_iter().map(super::value_to_result).collect();
        let leased = match reply::optional_string(queue)? {
            Some(queue) if results.iter().all(Result::is_ok) => Some(Leased {
                queue,
                jobs: leased::jobs(popped)?,
            }),
            _ => None,
        };
        Ok(AfterPop { results, leased })
    }

    /// The one call's result and the lease; the call's error when it failed.
    fn single<T>(
        mut self,
        parse: impl FnOnce(redis::Value) -> Result<T, Error>,
    ) -> Result<(T, Leased), Error> {
        let value = self.results.pop().expect("one call")?;
        let done = parse(value)?;
        let leased = self
            .leased
            .ok_or_else(|| Error::reply("pop.after leased nothing after a success"))?;
        Ok((done, leased))
    }
}

/// What `track` without arguments reports.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Tracked {
    #[serde(deserialize_with = "crate::model::wire::list")]
    pub jobs: Vec<Job>,
    /// Tracked jids whose job no longer exists.
    #[serde(deserialize_with = "crate::model::wire::list")]
    pub expired: Vec<String>,
}

impl Qless {
    /// `get.ext`: one job with its progress, result and throttles, or `None`.
    pub async fn get(&self, now: f64, jid: &str) -> Result<Option<Job>, Error> {
        reply::optional_json(self.call("get.ext", now, &[jid.to_owned()]).await?)
    }

    /// `multiget`: the jobs that exist, in the order asked.
    pub async fn multiget(&self, now: f64, jids: &[String]) -> Result<Vec<Job>, Error> {
        reply::json_vec(self.call("multiget", now, jids).await?)
    }

    /// `put`: creates or moves a job; returns its jid.
    pub async fn put(&self, now: f64, args: PutArgs) -> Result<String, Error> {
        reply::string(self.call("put", now, args.into_args()).await?)
    }

    /// `requeue`: like `put`, but the job must exist.
    pub async fn requeue(&self, now: f64, args: PutArgs) -> Result<String, Error> {
        self.requeue_keeping(now, args, RequeueKeep::default())
            .await
    }

    /// `requeue` with the extension options `keep-klass 1` / `keep-data 1`: the job
    /// keeps its own klass / data, and the ones in `args` are ignored.
    pub async fn requeue_keeping(
        &self,
        now: f64,
        args: PutArgs,
        keep: RequeueKeep,
    ) -> Result<String, Error> {
        let mut argv = args.into_args();
        for (option, wanted) in [("keep-klass", keep.klass), ("keep-data", keep.data)] {
            if wanted {
                argv.extend([option.to_owned(), "1".to_owned()]);
            }
        }
        reply::string(self.call("requeue", now, argv).await?)
    }

    /// `put.idem`: `put` (or `put.ifabsent`) unless the idempotency key answered a
    /// put less than its ttl ago: then that put's jid, `created: false`, nothing
    /// written.
    pub async fn put_idempotent(
        &self,
        now: f64,
        args: PutArgs,
        if_absent: bool,
        idem: Idempotency,
    ) -> Result<PutOutcome, Error> {
        let (command, argv) = idem_call(args, if_absent, idem);
        PutOutcome::from_reply(self.call(command, now, argv).await?)
    }

    /// `put.ifabsent`: `put`, unless a job with this jid already exists (checked and
    /// written atomically). Returns the jid when it was created, `None` when it existed.
    pub async fn put_if_absent(&self, now: f64, args: PutArgs) -> Result<Option<String>, Error> {
        reply::optional_string(self.call("put.ifabsent", now, args.into_args()).await?)
    }

    /// `put` (or `put.ifabsent` for jobs flagged `true`) for many jobs in one
    /// pipelined round trip; one result per job, `None` for jobs that already existed.
    pub async fn put_many(
        &self,
        now: f64,
        jobs: Vec<(PutArgs, bool)>,
    ) -> Result<Vec<Result<Option<String>, Error>>, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(job, if_absent)| (job, if_absent, None));
        Ok(self
            .put_batch(now, jobs.collect())
            .await?
            .into_iter()
            .map(|r| r.map(|outcome| outcome.created.then_some(outcome.jid)))
            .collect())
    }

    /// `put` (or `put.ifabsent` for jobs flagged `true`, `put.idem` for jobs with an
    /// idempotency key) for many jobs in one pipelined round trip; one result per job.
    pub async fn put_batch(
        &self,
        now: f64,
        jobs: Vec<(PutArgs, bool, Option<Idempotency>)>,
    ) -> Result<Vec<Result<PutOutcome, Error>>, Error> {
        let mut jids = Vec::with_capacity(jobs.len());
        let calls: Vec<(&str, Vec<String>)> = jobs
            .into_iter()
            .map(|(job, if_absent, idem)| {
                jids.push(job.jid.clone());
                match idem {
                    Some(idem) => idem_call(job, if_absent, idem),
                    None if if_absent => ("put.ifabsent", job.into_args()),
                    None => ("put", job.into_args()),
                }
            })
            .collect();
        let idem: Vec<bool> = calls.iter().map(|(c, _)| *c == "put.idem").collect();
        let results = self.call_many(now, &calls).await?;
        Ok(results
            .into_iter()
            .zip(jids)
            .zip(idem)
            .map(|((r, jid), idem)| {
                r.and_then(|value| {
                    if idem {
                        PutOutcome::from_reply(value)
                    } else {
                        Ok(PutOutcome {
                            created: reply::optional_string(value)?.is_some(),
                            jid,
                        })
                    }
                })
            })
            .collect())
    }

    /// `pop`: leases up to `count` jobs of `queue` to `worker`.
    pub async fn pop(
        &self,
        now: f64,
        queue: &str,
        worker: &str,
        count: u32,
    ) -> Result<Vec<Job>, Error> {
        // (`fields`: the jobs' stored fields rather than JSON; see `leased`.)
        let args = Args::new()
            .arg(queue)
            .arg(worker)
            .arg(count)
            .arg("fields")
            .into_vec();
        leased::jobs(self.call("pop", now, args).await?)
    }

    /// `pop.multi`: leases up to `count` jobs by trying `(queue, max)` pairs in order.
    pub async fn pop_multi(
        &self,
        now: f64,
        worker: &str,
        count: u32,
        plan: &[(String, u32)],
    ) -> Result<Vec<Job>, Error> {
        let mut args = Args::new().arg(worker).arg(count);
        for (queue, max) in plan {
            args = args.arg(queue).arg(*max);
        }
        leased::jobs(self.call("pop.multi", now, args.into_vec()).await?)
    }

    /// `peek`: the next `count` jobs of `queue`, without leasing them.
    pub async fn peek(&self, now: f64, queue: &str, count: u32) -> Result<Vec<Job>, Error> {
        let args = Args::new().arg(queue).arg(count).into_vec();
        reply::json_vec(self.call("peek", now, args).await?)
    }

    /// `heartbeat`: renews `worker`'s lock; returns the new expiry (whole seconds).
    pub async fn heartbeat(
        &self,
        now: f64,
        jid: &str,
        worker: &str,
        data: Option<&str>,
    ) -> Result<i64, Error> {
        self.heartbeat_progress(now, jid, worker, data, None).await
    }

    /// `heartbeat` with the extension option `progress` (JSON text), stored beside
    /// the job's data.
    pub async fn heartbeat_progress(
        &self,
        now: f64,
        jid: &str,
        worker: &str,
        data: Option<&str>,
        progress: Option<&str>,
    ) -> Result<i64, Error> {
        let args = Args::new()
            .arg(jid)
            .arg(worker)
            .args(data)
            .option("progress", progress)
            .into_vec();
        reply::integer(self.call("heartbeat", now, args).await?)
    }

    /// `complete`: finishes the job, or moves it to `next`; returns its new state.
    pub async fn complete(&self, now: f64, args: CompleteArgs) -> Result<String, Error> {
        reply::string(self.call("complete", now, args.into_args()).await?)
    }

    /// `complete` for many jobs in one round trip; one result (the new state) per job.
    pub async fn complete_many(
        &self,
        now: f64,
        jobs: Vec<CompleteArgs>,
    ) -> Result<Vec<Result<String, Error>>, Error> {
        let calls: Vec<(&str, Vec<String>)> = jobs
            .into_iter()
            .map(|job| ("complete", job.into_args()))
            .collect();
        let results = self.call_many(now, &calls).await?;
        Ok(results
            .into_iter()
            .map(|r| r.and_then(reply::string))
            .collect())
    }

    /// `heartbeat` for many `(jid, worker, data, progress)` in one pipelined round
    /// trip; one result (the new expiry) per job.
    pub async fn heartbeat_many(
        &self,
        now: f64,
        jobs: Vec<(String, String, Option<String>, Option<String>)>,
    ) -> Result<Vec<Result<i64, Error>>, Error> {
        let calls: Vec<(&str, Vec<String>)> = jobs
            .into_iter()
            .map(|(jid, worker, data, progress)| {
                (
                    "heartbeat",
                    Args::new()
                        .arg(jid)
                        .arg(worker)
                        .args(data)
                        .option("progress", progress)
                        .into_vec(),
                )
            })
            .collect();
        let results = self.call_many(now, &calls).await?;
        Ok(results
            .into_iter()
            .map(|r| r.and_then(reply::integer))
            .collect())
    }

    /// `fail`: marks the job failed in `group`; returns its jid.
    pub async fn fail(
        &self,
        now: f64,
        jid: &str,
        worker: &str,
        group: &str,
        message: &str,
        data: Option<&str>,
    ) -> Result<String, Error> {
        let args = Args::new()
            .arg(jid)
            .arg(worker)
            .arg(group)
            .arg(message)
            .args(data)
            .into_vec();
        reply::string(self.call("fail", now, args).await?)
    }

    /// `retry`: gives the job back, using one retry; returns the retries left
    /// (negative: it ran out and failed).
    pub async fn retry(&self, now: f64, args: RetryArgs) -> Result<i64, Error> {
        reply::integer(self.call("retry", now, args.into_args()).await?)
    }

    /// `pop.after`: runs `calls` (each ending a job of one worker in one queue), then,
    /// if all of them succeeded, leases up to `count` jobs of that queue to the worker,
    /// all in one script invocation.
    async fn pop_after(
        &self,
        now: f64,
        count: u32,
        calls: Vec<(&str, Vec<String>)>,
    ) -> Result<AfterPop, Error> {
        let n = calls.len();
        let mut args = Args::new().arg(count);
        // What each call does to the job metrics, taken before its arguments move (a
        // job's data is not copied for it); counted for the calls that succeed.
        let mut events = Vec::with_capacity(n);
        for (command, call_args) in calls {
            events.push(super::group::job_event(command, &call_args));
            args = args.arg(command).arg(call_args.len()).args(call_args);
        }
        let after = AfterPop::from_reply(self.call("pop.after", now, args.into_vec()).await?, n)?;
        for (event, result) in events.into_iter().zip(&after.results) {
            if let (Some(event), Ok(_)) = (event, result) {
                super::group::count(self.namespace(), event, now);
            }
        }
        if let Some(leased) = &after.leased {
            crate::metrics::METRICS.popped(self.namespace(), &leased.jobs);
        }
        Ok(after)
    }

    /// `complete`, then a lease of up to `count` jobs of the job's queue to the same
    /// worker, in one invocation; the job's new state and the lease. A refused
    /// completion leases nothing (its error).
    pub async fn complete_and_pop(
        &self,
        now: f64,
        args: CompleteArgs,
        count: u32,
    ) -> Result<(String, Leased), Error> {
        self.pop_after(now, count, vec![("complete", args.into_args())])
            .await?
            .single(reply::string)
    }

    /// `complete` for each job, then, only if every one was completed, a lease
    /// of up to `count` jobs of the first job's queue to its worker. Up to
    /// [`super::BATCH_CALLS`] jobs go in one invocation; more are completed in batches
    /// first and the lease follows in an invocation of its own.
    pub async fn complete_many_and_pop(
        &self,
        now: f64,
        jobs: Vec<CompleteArgs>,
        count: u32,
    ) -> Result<(Vec<Result<String, Error>>, Option<Leased>), Error> {
        let Some(first) = jobs.first() else {
            return Ok((Vec::new(), None));
        };
        let (queue, worker) = (first.queue.clone(), first.worker.clone());
        if jobs.len() > super::BATCH_CALLS {
            let results = self.complete_many(now, jobs).await?;
            let leased = if results.iter().all(Result::is_ok) {
                let jobs = self.pop(now, &queue, &worker, count).await?;
                Some(Leased { queue, jobs })
            } else {
                None
            };
            return Ok((results, leased));
        }
        let calls = jobs
            .into_iter()
            .map(|job| ("complete", job.into_args()))
            .collect();
        let after = self.pop_after(now, count, calls).await?;
        let results = after
            .results
            .into_iter()
            .map(|r| r.and_then(reply::string))
            .collect();
        Ok((results, after.leased))
    }

    /// `fail`, then a lease of up to `count` jobs of the queue the job ran in to the
    /// same worker, in one invocation. A refused failure leases nothing (its error).
    pub async fn fail_and_pop(
        &self,
        now: f64,
        args: FailArgs,
        count: u32,
    ) -> Result<(String, Leased), Error> {
        self.pop_after(now, count, vec![("fail", args.into_args())])
            .await?
            .single(reply::string)
    }

    /// `retry`, then a lease of up to `count` jobs of the queue the job ran in to the
    /// same worker, in one invocation. A refused retry leases nothing (its error).
    pub async fn retry_and_pop(
        &self,
        now: f64,
        args: RetryArgs,
        count: u32,
    ) -> Result<(i64, Leased), Error> {
        self.pop_after(now, count, vec![("retry", args.into_args())])
            .await?
            .single(reply::integer)
    }

    /// `cancel`: deletes the jobs (refused if that would break a dependency).
    pub async fn cancel(&self, now: f64, jids: &[String]) -> Result<Vec<String>, Error> {
        reply::strings(self.call("cancel", now, jids).await?)
    }

    /// `timeout`: expires the jobs' locks now.
    pub async fn timeout(&self, now: f64, jids: &[String]) -> Result<(), Error> {
        reply::nothing(self.call("timeout", now, jids).await?)
    }

    /// `depends … on`: adds dependencies to a job in the `depends` state.
    pub async fn depends_on(&self, now: f64, jid: &str, on: &[String]) -> Result<(), Error> {
        let args = Args::new().arg(jid).arg("on").args(on).into_vec();
        reply::nothing(self.call("depends", now, args).await?)
    }

    /// `depends … off`: removes dependencies (`None`: all of them).
    pub async fn depends_off(
        &self,
        now: f64,
        jid: &str,
        off: Option<&[String]>,
    ) -> Result<(), Error> {
        let args = match off {
            Some(jids) => Args::new().arg(jid).arg("off").args(jids),
            None => Args::new().arg(jid).arg("off").arg("all"),
        };
        reply::nothing(self.call("depends", now, args.into_vec()).await?)
    }

    /// `priority`: sets a job's priority.
    pub async fn priority(&self, now: f64, jid: &str, priority: f64) -> Result<i64, Error> {
        let args = Args::new().arg(jid).arg(priority).into_vec();
        reply::integer(self.call("priority", now, args).await?)
    }

    /// `log`: appends an entry to the job's history.
    pub async fn log(
        &self,
        now: f64,
        jid: &str,
        message: &str,
        data: Option<&str>,
    ) -> Result<(), Error> {
        let args = Args::new().arg(jid).arg(message).args(data).into_vec();
        reply::nothing(self.call("log", now, args).await?)
    }

    /// `tag add`: returns the job's tags.
    pub async fn tag_add(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        let args = Args::new().arg("add").arg(jid).args(tags).into_vec();
        reply::json_vec(self.call("tag", now, args).await?)
    }

    /// `tag remove`: returns the job's tags.
    pub async fn tag_remove(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        let args = Args::new().arg("remove").arg(jid).args(tags).into_vec();
        reply::json_vec(self.call("tag", now, args).await?)
    }

    /// `tag get`: jobs carrying `tag`, oldest tagging first.
    pub async fn tag_get(
        &self,
        now: f64,
        tag: &str,
        offset: u32,
        count: u32,
    ) -> Result<crate::model::JidPage, Error> {
        let args = Args::new()
            .arg("get")
            .arg(tag)
            .arg(offset)
            .arg(count)
            .into_vec();
        reply::json(self.call("tag", now, args).await?)
    }

    /// `tag top`: tags used at least twice, most used first.
    pub async fn tag_top(&self, now: f64, offset: u32, count: u32) -> Result<Vec<String>, Error> {
        let args = Args::new().arg("top").arg(offset).arg(count).into_vec();
        reply::json_vec(self.call("tag", now, args).await?)
    }

    /// `track track`: starts tracking; true when it was not tracked before.
    pub async fn track(&self, now: f64, jid: &str) -> Result<bool, Error> {
        let args = Args::new().arg("track").arg(jid).into_vec();
        Ok(reply::json::<i64>(self.call("track", now, args).await?)? == 1)
    }

    /// `track untrack`: stops tracking; true when it was tracked.
    pub async fn untrack(&self, now: f64, jid: &str) -> Result<bool, Error> {
        let args = Args::new().arg("untrack").arg(jid).into_vec();
        Ok(reply::json::<i64>(self.call("track", now, args).await?)? == 1)
    }

    /// `track` without arguments: tracked jobs, and tracked jids that are gone.
    pub async fn tracked(&self, now: f64) -> Result<Tracked, Error> {
        reply::json(self.call("track", now, &[]).await?)
    }
}

impl PutOutcome {
    /// `put.idem`'s reply: `[jid, 1|0]`.
    fn from_reply(value: redis::Value) -> Result<Self, Error> {
        let words = reply::strings(value)?;
        match words.as_slice() {
            [jid, created] => Ok(PutOutcome {
                jid: jid.clone(),
                created: created == "1",
            }),
            _ => Err(Error::reply(
                "put.idem answered something else than [jid, created]",
            )),
        }
    }
}

/// The `put.idem` call wrapping a put.
fn idem_call(args: PutArgs, if_absent: bool, idem: Idempotency) -> (&'static str, Vec<String>) {
    let mode = if if_absent { "put.ifabsent" } else { "put" };
    let mut argv = Args::new().arg(idem.key).arg(idem.ttl).arg(mode).into_vec();
    argv.extend(args.into_args());
    ("put.idem", argv)
}
