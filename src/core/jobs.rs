//! Job commands (`lua/job.lua`): one typed function per script command, same names.

use serde::Deserialize;

use redis::Value;

use super::command::{Args, Command, Recorder, Subject, json_list};
use super::leased;
use super::reply;
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
    /// Unix time by which the job must have been popped, else it fails into the group
    /// `expired` (extension, `lua/deadlines.lua`). Unset: none (a re-put drops the old).
    pub start_by: Option<f64>,
    /// Seconds the job may run from its pop (extension). Unset: kept.
    pub max_run: Option<f64>,
    /// The job's partition in a fair queue (extension, `lua/partitions.lua`). Unset:
    /// none (a re-put drops the old).
    pub partition: Option<String>,
}

impl PutArgs {
    /// `put`'s arguments (and `requeue`'s, which has the same layout).
    pub(super) fn encode(&self, args: &mut Args) {
        args.push(&self.worker)
            .push(&self.queue)
            .push(&self.jid)
            .push(&self.klass)
            .push(&self.data)
            .push(self.delay)
            .option("priority", self.priority)
            .option("tags", self.tags.as_deref().map(json_list))
            .option("retries", self.retries)
            .option("depends", self.depends.as_deref().map(json_list))
            .option("throttles", self.throttles.as_deref().map(json_list))
            .option("backoff", self.backoff.as_ref())
            .option("traceparent", self.traceparent.as_ref())
            .option("start-by", self.start_by)
            .option("max-run", self.max_run)
            .option("partition", self.partition.as_ref());
    }

    /// Appends a plain put of this job as a whole call, as the commands that carry
    /// puts of their own take them (`batch.open`, `workflow.open`).
    pub(super) fn encode_call(&self, args: &mut Args) {
        let mut put = Args::new();
        self.encode(&mut put);
        args.call(PutForm::Plain.name(), &put);
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

impl Command for CompleteArgs {
    type Output = String;

    fn name(&self) -> &'static str {
        "complete"
    }

    fn encode(&self, args: &mut Args) {
        args.push(&self.jid)
            .push(&self.worker)
            .push(&self.queue)
            .push(&self.data)
            .option("next", self.next.as_ref())
            .option("delay", self.delay)
            .option("depends", self.depends.as_deref().map(json_list))
            .option("keep-data", self.keep_data.then_some(1u32))
            .option("result", self.result.as_ref());
    }

    /// The job's new state.
    fn decode(&self, reply: Value) -> Result<String, Error> {
        reply::string(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::job(&self.queue, &self.jid)
    }

    fn record(&self, recorder: &Recorder<'_>, _: &String) {
        recorder.finished(&self.queue, "completed", &self.jid);
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

impl Command for RetryArgs {
    /// The retries left (negative: it ran out and failed).
    type Output = i64;

    fn name(&self) -> &'static str {
        "retry"
    }

    fn encode(&self, args: &mut Args) {
        args.push(&self.jid).push(&self.queue).push(&self.worker);
        match self.delay {
            Some(delay) => args.push(delay),
            // Extension: the script takes the job's backoff for this attempt.
            None => args.push("backoff"),
        };
        if let (Some(group), Some(message)) = (&self.group, &self.message) {
            args.push(group).push(message);
        }
    }

    fn decode(&self, reply: Value) -> Result<i64, Error> {
        reply::integer(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::job(&self.queue, &self.jid)
    }

    fn record(&self, recorder: &Recorder<'_>, _: &i64) {
        recorder.finished(&self.queue, "retried", &self.jid);
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

impl Command for FailArgs {
    /// The job's jid.
    type Output = String;

    fn name(&self) -> &'static str {
        "fail"
    }

    fn encode(&self, args: &mut Args) {
        args.push(&self.jid)
            .push(&self.worker)
            .push(&self.group)
            .push(&self.message)
            .extend(&self.data);
    }

    fn decode(&self, reply: Value) -> Result<String, Error> {
        reply::string(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(&self.jid)
    }

    fn record(&self, recorder: &Recorder<'_>, _: &String) {
        // (The queue is the one the job ran in, which the call does not name.)
        recorder.finished("", "failed", &self.jid);
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

/// `pop.after`: runs `calls` (each ending a job of one worker in one queue: complete,
/// fail or retry), then, if all of them succeeded, leases up to `count` jobs of that
/// queue to the worker, all in one script invocation.
struct PopAfter<'a, E> {
    count: u32,
    calls: &'a [E],
}

/// What `pop.after` answers: each call's result, then what was leased (`None` when a
/// call failed, and then nothing was).
struct AfterPop<T> {
    results: Vec<Result<T, Error>>,
    leased: Option<Leased>,
}

impl<E: Command> Command for PopAfter<'_, E> {
    type Output = AfterPop<E::Output>;

    fn name(&self) -> &'static str {
        "pop.after"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.count);
        let mut call = Args::new();
        for ending in self.calls {
            ending.encode(&mut call);
            args.call(ending.name(), &call);
            call = Args::new();
        }
    }

    fn decode(&self, reply: Value) -> Result<Self::Output, Error> {
        let calls = self.calls.len();
        let Value::Array(mut items) = reply else {
            return Err(Error::reply(format!("pop.after answered {reply:?}")));
        };
        if items.len() != calls + 2 {
            return Err(Error::reply(format!(
                "pop.after answered {} items for {calls} calls",
                items.len()
            )));
        }
        let popped = items.pop().expect("checked length");
        let queue = items.pop().expect("checked length");
        let results: Vec<_> = items
            .into_iter()
            .zip(self.calls)
            .map(|(item, ending)| super::value_to_result(item).and_then(|v| ending.decode(v)))
            .collect();
        let leased = match reply::optional_string(queue)? {
            Some(queue) if results.iter().all(Result::is_ok) => Some(Leased {
                queue,
                jobs: leased::jobs(popped)?,
            }),
            _ => None,
        };
        Ok(AfterPop { results, leased })
    }

    /// The jobs it ends, and the jobs it may lease.
    fn weight(&self) -> usize {
        (self.count as usize).max(1) + self.calls.len()
    }

    fn subject(&self) -> Subject<'_> {
        self.calls.first().map(Command::subject).unwrap_or_default()
    }

    fn record(&self, recorder: &Recorder<'_>, output: &Self::Output) {
        for (ending, result) in self.calls.iter().zip(&output.results) {
            if let Ok(done) = result {
                ending.record(recorder, done);
            }
        }
        if let Some(leased) = &output.leased {
            recorder.popped(&leased.jobs);
        }
    }
}

impl<T> AfterPop<T> {
    /// The one call's result and the lease; the call's error when it failed.
    fn single(mut self) -> Result<(T, Leased), Error> {
        let done = self.results.pop().expect("one call")?;
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

/// `get.ext`: one job with its progress, result and throttles, or `None`.
struct Get<'a> {
    jid: &'a str,
}

impl Command for Get<'_> {
    type Output = Option<Job>;

    fn name(&self) -> &'static str {
        "get.ext"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid);
    }

    fn decode(&self, reply: Value) -> Result<Option<Job>, Error> {
        reply::optional_json(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `multiget`: the jobs that exist, in the order asked.
struct Multiget<'a> {
    jids: &'a [String],
}

impl Command for Multiget<'_> {
    type Output = Vec<Job>;

    fn name(&self) -> &'static str {
        "multiget"
    }

    fn encode(&self, args: &mut Args) {
        args.extend(self.jids);
    }

    fn decode(&self, reply: Value) -> Result<Vec<Job>, Error> {
        reply::json_vec(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// How a put treats a job that may exist already.
#[derive(Debug, Clone)]
enum PutForm {
    /// `put`: creates the job, or moves and resets it.
    Plain,
    /// `put.ifabsent`: writes nothing when the job exists (checked atomically).
    IfAbsent,
    /// `put.idem`: answers the first put's jid for a key seen within its ttl, else
    /// puts (`if_absent`: as `put.ifabsent`).
    Idempotent { idem: Idempotency, if_absent: bool },
}

impl PutForm {
    /// The script command of this form.
    fn name(&self) -> &'static str {
        match self {
            PutForm::Plain => "put",
            PutForm::IfAbsent => "put.ifabsent",
            PutForm::Idempotent { .. } => "put.idem",
        }
    }
}

/// A put in one of its forms; every form answers a [`PutOutcome`].
struct Put {
    args: PutArgs,
    form: PutForm,
}

impl Command for Put {
    type Output = PutOutcome;

    fn name(&self) -> &'static str {
        self.form.name()
    }

    fn encode(&self, args: &mut Args) {
        if let PutForm::Idempotent { idem, if_absent } = &self.form {
            let mode = if *if_absent {
                PutForm::IfAbsent
            } else {
                PutForm::Plain
            };
            args.push(&idem.key).push(idem.ttl).push(mode.name());
        }
        self.args.encode(args);
    }

    fn decode(&self, reply: Value) -> Result<PutOutcome, Error> {
        match self.form {
            PutForm::Plain => Ok(PutOutcome {
                jid: reply::string(reply)?,
                created: true,
            }),
            // The jid when it was created, nil when the job existed.
            PutForm::IfAbsent => Ok(PutOutcome {
                created: reply::optional_string(reply)?.is_some(),
                jid: self.args.jid.clone(),
            }),
            PutForm::Idempotent { .. } => PutOutcome::from_reply(reply),
        }
    }

    fn subject(&self) -> Subject<'_> {
        Subject::job(&self.args.queue, &self.args.jid)
    }

    fn record(&self, recorder: &Recorder<'_>, outcome: &PutOutcome) {
        if outcome.created {
            recorder.job(&self.args.queue, "put");
        }
    }
}

/// `requeue`: like `put`, but the job must exist; with the extension options
/// `keep-klass 1` / `keep-data 1` the job keeps its own klass / data.
struct Requeue {
    args: PutArgs,
    keep: RequeueKeep,
}

impl Command for Requeue {
    /// The job's jid.
    type Output = String;

    fn name(&self) -> &'static str {
        "requeue"
    }

    fn encode(&self, args: &mut Args) {
        self.args.encode(args);
        args.option("keep-klass", self.keep.klass.then_some(1u32))
            .option("keep-data", self.keep.data.then_some(1u32));
    }

    fn decode(&self, reply: Value) -> Result<String, Error> {
        reply::string(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::job(&self.args.queue, &self.args.jid)
    }
}

/// `pop`: leases up to `count` jobs of `queue` to `worker`.
struct Pop<'a> {
    queue: &'a str,
    worker: &'a str,
    count: u32,
}

impl Command for Pop<'_> {
    type Output = Vec<Job>;

    fn name(&self) -> &'static str {
        "pop"
    }

    fn encode(&self, args: &mut Args) {
        // (`fields`: the jobs' stored fields rather than JSON; see `leased`.)
        args.push(self.queue)
            .push(self.worker)
            .push(self.count)
            .push("fields");
    }

    fn decode(&self, reply: Value) -> Result<Vec<Job>, Error> {
        leased::jobs(reply)
    }

    fn weight(&self) -> usize {
        self.count as usize
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }

    fn record(&self, recorder: &Recorder<'_>, jobs: &Vec<Job>) {
        recorder.popped(jobs);
    }
}

/// `pop.multi`: leases up to `count` jobs by trying `(queue, max)` pairs in order.
struct PopMulti<'a> {
    worker: &'a str,
    count: u32,
    plan: &'a [(String, u32)],
}

impl Command for PopMulti<'_> {
    type Output = Vec<Job>;

    fn name(&self) -> &'static str {
        "pop.multi"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.worker).push(self.count);
        for (queue, max) in self.plan {
            args.push(queue).push(*max);
        }
    }

    fn decode(&self, reply: Value) -> Result<Vec<Job>, Error> {
        leased::jobs(reply)
    }

    fn weight(&self) -> usize {
        self.count as usize
    }

    fn record(&self, recorder: &Recorder<'_>, jobs: &Vec<Job>) {
        recorder.popped(jobs);
    }
}

/// `peek`: the next `count` jobs of `queue`, without leasing them.
struct Peek<'a> {
    queue: &'a str,
    count: u32,
}

impl Command for Peek<'_> {
    type Output = Vec<Job>;

    fn name(&self) -> &'static str {
        "peek"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.count);
    }

    fn decode(&self, reply: Value) -> Result<Vec<Job>, Error> {
        reply::json_vec(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `heartbeat`: renews a worker's lock, optionally replacing the job's data and
/// storing its progress (extension option `progress`, JSON text, kept beside the
/// data); answers the new expiry: whole seconds, or with `exact` (the extension word)
/// the stored expiry, fraction and all.
struct Heartbeat {
    jid: String,
    worker: String,
    /// Replaces the job's data when present (JSON text).
    data: Option<String>,
    progress: Option<String>,
    exact: bool,
}

impl Command for Heartbeat {
    type Output = f64;

    fn name(&self) -> &'static str {
        "heartbeat"
    }

    fn encode(&self, args: &mut Args) {
        args.push(&self.jid)
            .push(&self.worker)
            .extend(&self.data)
            .option("progress", self.progress.as_ref())
            .extend(self.exact.then_some("exact"));
    }

    fn decode(&self, reply: Value) -> Result<f64, Error> {
        if !self.exact {
            return reply::integer(reply).map(|whole| whole as f64);
        }
        let text = reply::string(reply)?;
        text.parse()
            .map_err(|_| Error::reply(format!("expected an expiry, got {text:?}")))
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(&self.jid)
    }
}

/// `cancel`: deletes the jobs (refused if that would break a dependency); answers
/// the jids cancelled.
struct Cancel<'a> {
    jids: &'a [String],
}

impl Command for Cancel<'_> {
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "cancel"
    }

    fn encode(&self, args: &mut Args) {
        args.extend(self.jids);
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn only_deletes(&self) -> bool {
        true
    }

    fn subject(&self) -> Subject<'_> {
        match self.jids {
            [jid] => Subject::jid(jid),
            _ => Subject::default(),
        }
    }
}

/// `timeout`: expires the jobs' locks now.
struct Timeout<'a> {
    jids: &'a [String],
}

impl Command for Timeout<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "timeout"
    }

    fn encode(&self, args: &mut Args) {
        args.extend(self.jids);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn subject(&self) -> Subject<'_> {
        match self.jids {
            [jid] => Subject::jid(jid),
            _ => Subject::default(),
        }
    }

    fn record(&self, recorder: &Recorder<'_>, _: &()) {
        for jid in self.jids {
            recorder.finished("", "timed_out", jid);
        }
    }
}

/// `depends`: adds dependencies to a job in the `depends` state (`on`), or removes
/// some or all of them (`off`).
struct Depends<'a> {
    jid: &'a str,
    change: DependsChange<'a>,
}

enum DependsChange<'a> {
    On(&'a [String]),
    /// `None`: all of them.
    Off(Option<&'a [String]>),
}

impl Command for Depends<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "depends"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid);
        match self.change {
            DependsChange::On(jids) => args.push("on").extend(jids),
            DependsChange::Off(Some(jids)) => args.push("off").extend(jids),
            DependsChange::Off(None) => args.push("off").push("all"),
        };
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `priority`: sets a job's priority.
struct Priority<'a> {
    jid: &'a str,
    priority: f64,
}

impl Command for Priority<'_> {
    type Output = i64;

    fn name(&self) -> &'static str {
        "priority"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid).push(self.priority);
    }

    fn decode(&self, reply: Value) -> Result<i64, Error> {
        reply::integer(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `log`: appends an entry to the job's history.
struct Log<'a> {
    jid: &'a str,
    message: &'a str,
    data: Option<&'a str>,
}

impl Command for Log<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "log"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid).push(self.message).extend(self.data);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `tag`, in its four forms.
enum Tag<'a> {
    /// Adds tags to a job; answers its tags.
    Add { jid: &'a str, tags: &'a [String] },
    /// Removes tags from a job; answers its tags.
    Remove { jid: &'a str, tags: &'a [String] },
    /// Jobs carrying `tag`, oldest tagging first.
    Get {
        tag: &'a str,
        offset: u32,
        count: u32,
    },
    /// Tags used at least twice, most used first.
    Top { offset: u32, count: u32 },
}

impl Command for Tag<'_> {
    /// The JSON reply: a job's tags, a page of jids, or the top tags.
    type Output = Value;

    fn name(&self) -> &'static str {
        "tag"
    }

    fn encode(&self, args: &mut Args) {
        match *self {
            Tag::Add { jid, tags } => args.push("add").push(jid).extend(tags),
            Tag::Remove { jid, tags } => args.push("remove").push(jid).extend(tags),
            Tag::Get { tag, offset, count } => args.push("get").push(tag).push(offset).push(count),
            Tag::Top { offset, count } => args.push("top").push(offset).push(count),
        };
    }

    /// Decoded by the caller, which knows which form it asked for.
    fn decode(&self, reply: Value) -> Result<Value, Error> {
        Ok(reply)
    }

    fn writes(&self) -> bool {
        matches!(self, Tag::Add { .. } | Tag::Remove { .. })
    }

    fn subject(&self) -> Subject<'_> {
        match *self {
            Tag::Add { jid, .. } | Tag::Remove { jid, .. } => Subject::jid(jid),
            Tag::Get { .. } | Tag::Top { .. } => Subject::default(),
        }
    }
}

/// `track`, in its three forms.
enum Track<'a> {
    /// Starts tracking a job: 1 when it was not tracked before.
    Start(&'a str),
    /// Stops tracking: 1 when it was tracked.
    Stop(&'a str),
    /// The tracked jobs, and tracked jids that are gone.
    List,
}

impl Command for Track<'_> {
    /// The JSON reply, decoded by the caller, which knows which form it asked for.
    type Output = Value;

    fn name(&self) -> &'static str {
        "track"
    }

    fn encode(&self, args: &mut Args) {
        match *self {
            Track::Start(jid) => args.push("track").push(jid),
            Track::Stop(jid) => args.push("untrack").push(jid),
            Track::List => args,
        };
    }

    fn decode(&self, reply: Value) -> Result<Value, Error> {
        Ok(reply)
    }

    fn writes(&self) -> bool {
        matches!(self, Track::Start(_) | Track::Stop(_))
    }

    fn subject(&self) -> Subject<'_> {
        match *self {
            Track::Start(jid) | Track::Stop(jid) => Subject::jid(jid),
            Track::List => Subject::default(),
        }
    }
}

impl Qless {
    /// `get.ext`: one job with its progress, result and throttles, or `None`.
    pub async fn get(&self, now: f64, jid: &str) -> Result<Option<Job>, Error> {
        self.run(now, &Get { jid }).await
    }

    /// `multiget`: the jobs that exist, in the order asked.
    pub async fn multiget(&self, now: f64, jids: &[String]) -> Result<Vec<Job>, Error> {
        self.run(now, &Multiget { jids }).await
    }

    /// `put`: creates or moves a job; returns its jid.
    pub async fn put(&self, now: f64, args: PutArgs) -> Result<String, Error> {
        let put = Put {
            args,
            form: PutForm::Plain,
        };
        Ok(self.run(now, &put).await?.jid)
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
        self.run(now, &Requeue { args, keep }).await
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
        let form = PutForm::Idempotent { idem, if_absent };
        self.run(now, &Put { args, form }).await
    }

    /// `put.ifabsent`: `put`, unless a job with this jid already exists (checked and
    /// written atomically). Returns the jid when it was created, `None` when it existed.
    pub async fn put_if_absent(&self, now: f64, args: PutArgs) -> Result<Option<String>, Error> {
        let put = Put {
            args,
            form: PutForm::IfAbsent,
        };
        let outcome = self.run(now, &put).await?;
        Ok(outcome.created.then_some(outcome.jid))
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
        let puts: Vec<Put> = jobs
            .into_iter()
            .map(|(args, if_absent, idem)| {
                let form = match idem {
                    Some(idem) => PutForm::Idempotent { idem, if_absent },
                    None if if_absent => PutForm::IfAbsent,
                    None => PutForm::Plain,
                };
                Put { args, form }
            })
            .collect();
        self.run_many(now, &puts).await
    }

    /// `pop`: leases up to `count` jobs of `queue` to `worker`.
    pub async fn pop(
        &self,
        now: f64,
        queue: &str,
        worker: &str,
        count: u32,
    ) -> Result<Vec<Job>, Error> {
        self.run(
            now,
            &Pop {
                queue,
                worker,
                count,
            },
        )
        .await
    }

    /// `pop.multi`: leases up to `count` jobs by trying `(queue, max)` pairs in order.
    pub async fn pop_multi(
        &self,
        now: f64,
        worker: &str,
        count: u32,
        plan: &[(String, u32)],
    ) -> Result<Vec<Job>, Error> {
        self.run(
            now,
            &PopMulti {
                worker,
                count,
                plan,
            },
        )
        .await
    }

    /// `peek`: the next `count` jobs of `queue`, without leasing them.
    pub async fn peek(&self, now: f64, queue: &str, count: u32) -> Result<Vec<Job>, Error> {
        self.run(now, &Peek { queue, count }).await
    }

    /// `heartbeat`: renews `worker`'s lock; returns the new expiry (whole seconds).
    pub async fn heartbeat(
        &self,
        now: f64,
        jid: &str,
        worker: &str,
        data: Option<&str>,
    ) -> Result<i64, Error> {
        let heartbeat = Heartbeat {
            jid: jid.to_owned(),
            worker: worker.to_owned(),
            data: data.map(str::to_owned),
            progress: None,
            exact: false,
        };
        self.run(now, &heartbeat)
            .await
            .map(|expires| expires as i64)
    }

    /// `heartbeat` with the extension option `progress` (JSON text), stored beside
    /// the job's data; returns the new expiry as stored (with its fraction).
    pub async fn heartbeat_progress(
        &self,
        now: f64,
        jid: &str,
        worker: &str,
        data: Option<&str>,
        progress: Option<&str>,
    ) -> Result<f64, Error> {
        let heartbeat = Heartbeat {
            jid: jid.to_owned(),
            worker: worker.to_owned(),
            data: data.map(str::to_owned),
            progress: progress.map(str::to_owned),
            exact: true,
        };
        self.run(now, &heartbeat).await
    }

    /// `complete`: finishes the job, or moves it to `next`; returns its new state.
    pub async fn complete(&self, now: f64, args: CompleteArgs) -> Result<String, Error> {
        self.run(now, &args).await
    }

    /// `complete` for many jobs in one round trip; one result (the new state) per job.
    pub async fn complete_many(
        &self,
        now: f64,
        jobs: Vec<CompleteArgs>,
    ) -> Result<Vec<Result<String, Error>>, Error> {
        self.run_many(now, &jobs).await
    }

    /// `heartbeat` for many `(jid, worker, data, progress)` in one pipelined round
    /// trip; one result (the new expiry as stored) per job.
    pub async fn heartbeat_many(
        &self,
        now: f64,
        jobs: Vec<(String, String, Option<String>, Option<String>)>,
    ) -> Result<Vec<Result<f64, Error>>, Error> {
        let heartbeats: Vec<Heartbeat> = jobs
            .into_iter()
            .map(|(jid, worker, data, progress)| Heartbeat {
                jid,
                worker,
                data,
                progress,
                exact: true,
            })
            .collect();
        self.run_many(now, &heartbeats).await
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
        let fail = FailArgs {
            jid: jid.to_owned(),
            worker: worker.to_owned(),
            group: group.to_owned(),
            message: message.to_owned(),
            data: data.map(str::to_owned),
        };
        self.run(now, &fail).await
    }

    /// `retry`: gives the job back, using one retry; returns the retries left
    /// (negative: it ran out and failed).
    pub async fn retry(&self, now: f64, args: RetryArgs) -> Result<i64, Error> {
        self.run(now, &args).await
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
        let calls = [args];
        self.run(
            now,
            &PopAfter {
                count,
                calls: &calls,
            },
        )
        .await?
        .single()
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
        if jobs.len() > super::BATCH_CALLS {
            let (queue, worker) = (first.queue.clone(), first.worker.clone());
            let results = self.complete_many(now, jobs).await?;
            let leased = if results.iter().all(Result::is_ok) {
                let jobs = self.pop(now, &queue, &worker, count).await?;
                Some(Leased { queue, jobs })
            } else {
                None
            };
            return Ok((results, leased));
        }
        let after = self
            .run(
                now,
                &PopAfter {
                    count,
                    calls: &jobs,
                },
            )
            .await?;
        Ok((after.results, after.leased))
    }

    /// `fail`, then a lease of up to `count` jobs of the queue the job ran in to the
    /// same worker, in one invocation. A refused failure leases nothing (its error).
    pub async fn fail_and_pop(
        &self,
        now: f64,
        args: FailArgs,
        count: u32,
    ) -> Result<(String, Leased), Error> {
        let calls = [args];
        self.run(
            now,
            &PopAfter {
                count,
                calls: &calls,
            },
        )
        .await?
        .single()
    }

    /// `retry`, then a lease of up to `count` jobs of the queue the job ran in to the
    /// same worker, in one invocation. A refused retry leases nothing (its error).
    pub async fn retry_and_pop(
        &self,
        now: f64,
        args: RetryArgs,
        count: u32,
    ) -> Result<(i64, Leased), Error> {
        let calls = [args];
        self.run(
            now,
            &PopAfter {
                count,
                calls: &calls,
            },
        )
        .await?
        .single()
    }

    /// `cancel`: deletes the jobs (refused if that would break a dependency).
    pub async fn cancel(&self, now: f64, jids: &[String]) -> Result<Vec<String>, Error> {
        self.run(now, &Cancel { jids }).await
    }

    /// `timeout`: expires the jobs' locks now.
    pub async fn timeout(&self, now: f64, jids: &[String]) -> Result<(), Error> {
        self.run(now, &Timeout { jids }).await
    }

    /// `depends … on`: adds dependencies to a job in the `depends` state.
    pub async fn depends_on(&self, now: f64, jid: &str, on: &[String]) -> Result<(), Error> {
        let change = DependsChange::On(on);
        self.run(now, &Depends { jid, change }).await
    }

    /// `depends … off`: removes dependencies (`None`: all of them).
    pub async fn depends_off(
        &self,
        now: f64,
        jid: &str,
        off: Option<&[String]>,
    ) -> Result<(), Error> {
        let change = DependsChange::Off(off);
        self.run(now, &Depends { jid, change }).await
    }

    /// `priority`: sets a job's priority.
    pub async fn priority(&self, now: f64, jid: &str, priority: f64) -> Result<i64, Error> {
        self.run(now, &Priority { jid, priority }).await
    }

    /// `log`: appends an entry to the job's history.
    pub async fn log(
        &self,
        now: f64,
        jid: &str,
        message: &str,
        data: Option<&str>,
    ) -> Result<(), Error> {
        self.run(now, &Log { jid, message, data }).await
    }

    /// `tag add`: returns the job's tags.
    pub async fn tag_add(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        reply::json_vec(self.run(now, &Tag::Add { jid, tags }).await?)
    }

    /// `tag remove`: returns the job's tags.
    pub async fn tag_remove(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        reply::json_vec(self.run(now, &Tag::Remove { jid, tags }).await?)
    }

    /// `tag get`: jobs carrying `tag`, oldest tagging first.
    pub async fn tag_get(
        &self,
        now: f64,
        tag: &str,
        offset: u32,
        count: u32,
    ) -> Result<crate::model::JidPage, Error> {
        reply::json(self.run(now, &Tag::Get { tag, offset, count }).await?)
    }

    /// `tag top`: tags used at least twice, most used first.
    pub async fn tag_top(&self, now: f64, offset: u32, count: u32) -> Result<Vec<String>, Error> {
        reply::json_vec(self.run(now, &Tag::Top { offset, count }).await?)
    }

    /// `track track`: starts tracking; true when it was not tracked before.
    pub async fn track(&self, now: f64, jid: &str) -> Result<bool, Error> {
        Ok(reply::json::<i64>(self.run(now, &Track::Start(jid)).await?)? == 1)
    }

    /// `track untrack`: stops tracking; true when it was tracked.
    pub async fn untrack(&self, now: f64, jid: &str) -> Result<bool, Error> {
        Ok(reply::json::<i64>(self.run(now, &Track::Stop(jid)).await?)? == 1)
    }

    /// `track` without arguments: tracked jobs, and tracked jids that are gone.
    pub async fn tracked(&self, now: f64) -> Result<Tracked, Error> {
        reply::json(self.run(now, &Track::List).await?)
    }
}

impl PutOutcome {
    /// `put.idem`'s reply: `[jid, 1|0]`.
    fn from_reply(value: Value) -> Result<Self, Error> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(jid: &str) -> CompleteArgs {
        CompleteArgs {
            jid: jid.into(),
            worker: "w".into(),
            queue: "q".into(),
            data: "{}".into(),
            ..CompleteArgs::default()
        }
    }

    #[test]
    fn a_call_weighs_the_jobs_it_ends_and_leases() {
        let put = Put {
            args: PutArgs::default(),
            form: PutForm::Plain,
        };
        assert_eq!(put.weight(), 1);
        let pop = |count| Pop {
            queue: "q",
            worker: "w",
            count,
        };
        assert_eq!(pop(10).weight(), 10);
        let calls = [complete("a"), complete("b")];
        assert_eq!(
            PopAfter {
                count: 10,
                calls: &calls
            }
            .weight(),
            12
        );
        // A lease of none still ends its jobs, and takes one turn of Redis.
        assert_eq!(
            PopAfter {
                count: 0,
                calls: &calls[..1]
            }
            .weight(),
            2
        );
    }

    #[test]
    fn pop_after_carries_each_call_as_its_name_count_and_arguments() {
        let calls = [complete("a")];
        let mut args = Args::new();
        PopAfter {
            count: 3,
            calls: &calls,
        }
        .encode(&mut args);
        let mut alone = Args::new();
        calls[0].encode(&mut alone);
        assert_eq!(alone.count(), 4);
        let mut expected = Args::new();
        expected.push(3u32).call("complete", &alone);
        assert_eq!(args.bytes(), expected.bytes());
        assert_eq!(args.count(), 1 + 2 + 4);
    }

    #[test]
    fn reads_are_marked_so_and_writes_are_not() {
        assert!(!Get { jid: "a" }.writes());
        assert!(
            !Tag::Top {
                offset: 0,
                count: 1
            }
            .writes()
        );
        assert!(
            Tag::Add {
                jid: "a",
                tags: &[]
            }
            .writes()
        );
        assert!(!Track::List.writes());
        assert!(Track::Start("a").writes());
        assert!(complete("a").writes());
    }
}
