//! Batch and workflow commands (`lua/batches.lua`, `lua/workflow.lua`, extension):
//! a batch of jobs with callbacks put once when it finishes, and a workflow, a graph
//! of jobs that wait for each other. Each is opened in one script call that puts
//! every job and writes the record, or nothing.

use redis::Value;
use serde_json::json;

use super::command::{Args, Command, Recorder};
use super::jobs::PutArgs;
use super::{Error, Qless, reply};
use crate::model::{BatchView, ParentFailurePolicy, WorkflowView};

/// When a batch's callback is put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackKind {
    /// When every job (and child batch) has completed or failed.
    OnComplete,
    /// When every job has completed (and every child batch succeeded).
    OnSuccess,
    /// The first time a job fails for good.
    OnDeath,
}

impl CallbackKind {
    /// The kind's name in the script and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            CallbackKind::OnComplete => "on_complete",
            CallbackKind::OnSuccess => "on_success",
            CallbackKind::OnDeath => "on_death",
        }
    }
}

/// A new batch: its jobs (each a put of a new jid, in any queue) and its callbacks
/// (each a put made when the batch calls for it).
#[derive(Debug, Clone)]
pub struct NewBatch {
    pub bid: String,
    pub description: String,
    /// An open batch this one is a child of: the parent finishes only after it.
    pub parent: Option<String>,
    pub jobs: Vec<PutArgs>,
    pub callbacks: Vec<(CallbackKind, PutArgs)>,
}

/// The JSON spec of a callback as the script stores it (`lua/batches.lua`, `spec`).
fn callback_spec(put: &PutArgs) -> serde_json::Value {
    json!({
        "queue": put.queue,
        "jid": put.jid,
        "klass": put.klass,
        "data": put.data,
        "delay": put.delay,
        "priority": put.priority,
        "tags": put.tags,
        "retries": put.retries,
        "throttles": put.throttles,
        "backoff": put.backoff,
    })
}

/// Appends each job as a `put` call, as `batch.open` and `batch.add` take them.
fn encode_puts(args: &mut Args, jobs: &[PutArgs]) {
    for job in jobs {
        job.encode_call(args);
    }
}

impl Command for NewBatch {
    /// The jobs' jids, in order.
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "batch.open"
    }

    fn encode(&self, args: &mut Args) {
        let callbacks: serde_json::Map<String, serde_json::Value> = self
            .callbacks
            .iter()
            .map(|(kind, put)| (kind.as_str().to_owned(), callback_spec(put)))
            .collect();
        let meta = json!({
            "description": self.description,
            "parent": self.parent,
            "callbacks": callbacks,
        });
        args.push(&self.bid).push(meta.to_string());
        encode_puts(args, &self.jobs);
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn weight(&self) -> usize {
        self.jobs.len().max(1)
    }

    fn record(&self, recorder: &Recorder<'_>, _jids: &Vec<String>) {
        for job in &self.jobs {
            recorder.job(&job.queue, "put");
        }
    }
}

/// More jobs for an open batch.
struct BatchAdd<'a> {
    bid: &'a str,
    jobs: &'a [PutArgs],
}

impl Command for BatchAdd<'_> {
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "batch.add"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.bid);
        encode_puts(args, self.jobs);
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn weight(&self) -> usize {
        self.jobs.len().max(1)
    }

    fn record(&self, recorder: &Recorder<'_>, _jids: &Vec<String>) {
        for job in self.jobs {
            recorder.job(&job.queue, "put");
        }
    }
}

/// A batch, with one page of its jobs.
struct BatchGet<'a> {
    bid: &'a str,
    offset: usize,
    count: usize,
}

impl Command for BatchGet<'_> {
    type Output = Option<BatchView>;

    fn name(&self) -> &'static str {
        "batch.get"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.bid).push(self.offset).push(self.count);
    }

    fn decode(&self, reply: Value) -> Result<Option<BatchView>, Error> {
        reply::optional_json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// Cancels what of a batch has not started.
struct BatchCancel<'a> {
    bid: &'a str,
}

impl Command for BatchCancel<'_> {
    /// How many jobs were canceled; `None`: no such batch.
    type Output = Option<i64>;

    fn name(&self) -> &'static str {
        "batch.cancel"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.bid);
    }

    fn decode(&self, reply: Value) -> Result<Option<i64>, Error> {
        match reply {
            Value::Nil => Ok(None),
            other => reply::integer(other).map(Some),
        }
    }
}

/// One task of a new workflow.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub name: String,
    /// Its put; `depends` must be its parents' jids.
    pub put: PutArgs,
    /// The names of the tasks it waits for, each put before it.
    pub after: Vec<String>,
    pub on_parent_failure: ParentFailurePolicy,
}

/// A new workflow: its tasks, parents before children.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    pub wid: String,
    pub name: String,
    pub tasks: Vec<NewTask>,
}

impl Command for NewWorkflow {
    /// The tasks' jids, in order.
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "workflow.open"
    }

    fn encode(&self, args: &mut Args) {
        let tasks: Vec<serde_json::Value> = self
            .tasks
            .iter()
            .map(|task| {
                json!({
                    "name": task.name,
                    "after": task.after,
                    "policy": task.on_parent_failure.as_str(),
                })
            })
            .collect();
        let meta = json!({ "name": self.name, "tasks": tasks });
        args.push(&self.wid).push(meta.to_string());
        for task in &self.tasks {
            task.put.encode_call(args);
        }
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn weight(&self) -> usize {
        self.tasks.len().max(1)
    }

    fn record(&self, recorder: &Recorder<'_>, _jids: &Vec<String>) {
        for task in &self.tasks {
            recorder.job(&task.put.queue, "put");
        }
    }
}

/// A workflow's tasks and their states.
struct WorkflowGet<'a> {
    wid: &'a str,
}

impl Command for WorkflowGet<'_> {
    type Output = Option<WorkflowView>;

    fn name(&self) -> &'static str {
        "workflow.get"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.wid);
    }

    fn decode(&self, reply: Value) -> Result<Option<WorkflowView>, Error> {
        reply::optional_json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// Cancels the tasks of a workflow that have not started.
struct WorkflowCancel<'a> {
    wid: &'a str,
}

impl Command for WorkflowCancel<'_> {
    /// How many tasks were canceled; `None`: no such workflow.
    type Output = Option<i64>;

    fn name(&self) -> &'static str {
        "workflow.cancel"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.wid);
    }

    fn decode(&self, reply: Value) -> Result<Option<i64>, Error> {
        match reply {
            Value::Nil => Ok(None),
            other => reply::integer(other).map(Some),
        }
    }
}

impl Qless {
    /// `batch.open`: puts every job of a new batch and records it, in one call.
    pub async fn batch_open(&self, now: f64, batch: &NewBatch) -> Result<Vec<String>, Error> {
        self.run(now, batch).await
    }

    /// `batch.add`: puts more jobs into an open batch.
    pub async fn batch_add(
        &self,
        now: f64,
        bid: &str,
        jobs: &[PutArgs],
    ) -> Result<Vec<String>, Error> {
        self.run(now, &BatchAdd { bid, jobs }).await
    }

    /// `batch.get`: a batch with the page of its jobs from `offset`.
    pub async fn batch_get(
        &self,
        now: f64,
        bid: &str,
        offset: usize,
        count: usize,
    ) -> Result<Option<BatchView>, Error> {
        self.run(now, &BatchGet { bid, offset, count }).await
    }

    /// `batch.cancel`: cancels the batch's jobs that have not started.
    pub async fn batch_cancel(&self, now: f64, bid: &str) -> Result<Option<i64>, Error> {
        self.run(now, &BatchCancel { bid }).await
    }

    /// `workflow.open`: puts every task of a new workflow, in one call.
    pub async fn workflow_open(
        &self,
        now: f64,
        workflow: &NewWorkflow,
    ) -> Result<Vec<String>, Error> {
        self.run(now, workflow).await
    }

    /// `workflow.get`: a workflow's tasks.
    pub async fn workflow_get(&self, now: f64, wid: &str) -> Result<Option<WorkflowView>, Error> {
        self.run(now, &WorkflowGet { wid }).await
    }

    /// `workflow.cancel`: cancels the tasks that have not started.
    pub async fn workflow_cancel(&self, now: f64, wid: &str) -> Result<Option<i64>, Error> {
        self.run(now, &WorkflowCancel { wid }).await
    }
}
