//! Request and response bodies of `/v1/batches` (jobs put together, with callbacks
//! put once when they finish) and `/v1/workflows` (jobs that wait for each other).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Backoff, Jid, PartitionName, QueueName, Tag, TaskName, ThrottleName, WorkflowName};

/// One job of a batch or a task of a workflow: a put body naming its queue (and, for a
/// task, its place in the graph).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"queue": "images", "klass": "image.Resize", "data": {"id": 7}}))]
pub struct QueuedJobRequest {
    /// The queue to put the job in.
    pub queue: QueueName,
    /// The job id; absent: generated. It must not be a job that exists.
    #[serde(default)]
    pub jid: Option<Jid>,
    /// The class (handler name) a worker runs the job with; not empty.
    #[schema(value_type = crate::model::Text)]
    pub klass: String,
    /// The payload: any JSON value (a callback's: an object). Absent: `{}`.
    #[serde(default = "crate::model::wire::empty_object")]
    #[schema(value_type = serde_json::Value)]
    pub data: crate::model::wire::RawJson,
    /// Higher pops first (default 0).
    #[serde(default)]
    pub priority: Option<f64>,
    /// Tags (names).
    #[serde(default)]
    pub tags: Option<Vec<Tag>>,
    /// Retry budget (a whole number, at least 0; default 5).
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    #[schema(minimum = 0)]
    pub retries: Option<i64>,
    /// Seconds before the job becomes waiting (at least 0, default 0).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub delay: Option<f64>,
    /// Throttles (names) the job holds while it runs.
    #[serde(default)]
    #[schema(max_items = 100)]
    pub throttles: Option<Vec<ThrottleName>>,
    /// Retry backoff.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Unix time (seconds) by which the job must have been popped (else it fails
    /// into `expired`), as a single put's. At least 0. Not on a callback (it is put
    /// when the batch settles).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_by: Option<f64>,
    /// Seconds from now by which the job must have been popped; not with `start_by`.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_within: Option<f64>,
    /// Seconds the job may run from its pop, as a single put's. More than 0.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub max_run: Option<f64>,
    /// The job's partition in a fair queue, as a single put's.
    #[serde(default)]
    pub partition: Option<PartitionName>,
    /// A workflow task's parents: the names of the tasks it waits for (workflow tasks
    /// only; a 400 elsewhere).
    #[serde(default)]
    pub after: Option<Vec<TaskName>>,
    /// What a parent's failure (no retries left, or canceled) does to a workflow task
    /// while it waits (default `cancel`; workflow tasks only).
    #[serde(default)]
    pub on_parent_failure: Option<ParentFailurePolicy>,
}

impl QueuedJobRequest {
    /// Refuses the fields only a workflow's task may have.
    pub fn no_task_fields(&self) -> Result<(), &'static str> {
        if self.after.is_some() {
            return Err("after is for the tasks of a workflow");
        }
        if self.on_parent_failure.is_some() {
            return Err("on_parent_failure is for the tasks of a workflow");
        }
        Ok(())
    }
}

/// A new batch.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "description": "nightly import",
    "jobs": [{"queue": "import", "klass": "import.Row", "data": {"row": 1}},
             {"queue": "import", "klass": "import.Row", "data": {"row": 2}}],
    "on_success": {"queue": "import", "klass": "import.Report", "data": {"notify": "ops"}}
}))]
pub struct CreateBatchRequest {
    /// Free text shown with the batch.
    #[serde(default)]
    pub description: Option<String>,
    /// The batch's jobs (at most 10,000; may be none: more can be added later, and a
    /// batch created with none and given none settles at once).
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub jobs: Vec<QueuedJobRequest>,
    /// Put once every job (and child batch) has completed.
    #[serde(default)]
    pub on_success: Option<QueuedJobRequest>,
    /// Put once every job (and child batch) has completed or failed.
    #[serde(default)]
    pub on_complete: Option<QueuedJobRequest>,
    /// Put the first time a job of the batch (or of a child batch) fails for good.
    #[serde(default)]
    pub on_death: Option<QueuedJobRequest>,
    /// An open batch this one belongs to: its callbacks wait for this one's.
    #[serde(default)]
    #[schema(value_type = Option<crate::model::Name>)]
    pub parent: Option<super::BatchId>,
}

/// A created batch.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedBatch {
    pub bid: String,
    /// The jobs' jids, in request order.
    pub jids: Vec<String>,
}

/// More jobs for an open batch.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddBatchJobsRequest {
    /// 1 to 10,000 jobs.
    #[schema(min_items = 1, max_items = 10000)]
    pub jobs: Vec<QueuedJobRequest>,
}

/// The jids of the jobs added.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AddedBatchJobs {
    pub jids: Vec<String>,
}

/// A page of a batch's jobs.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BatchQuery {
    /// Jobs to skip (default 0).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Jobs to list (1 to 1000, default 25).
    #[serde(default)]
    pub count: Option<usize>,
}

/// How many of a batch's jobs stand where.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchCounts {
    pub total: u64,
    pub waiting: u64,
    /// Running (leased), stalled included.
    pub running: u64,
    pub scheduled: u64,
    /// Waiting for dependencies.
    pub depends: u64,
    pub completed: u64,
    pub failed: u64,
    pub canceled: u64,
}

/// A callback of a batch.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchCallback {
    /// `pending` until put, then `fired`.
    pub state: String,
    /// The callback job's jid (its job exists once fired).
    pub jid: String,
    pub queue: String,
}

/// A job of a batch and where it stands.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchJob {
    pub jid: String,
    /// The job's state, `canceled` for a canceled one.
    pub state: String,
}

/// A batch.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchView {
    pub bid: String,
    pub description: String,
    /// Unix seconds.
    pub created: f64,
    /// `open`, `settled` (every job and child batch finished) or `canceled`.
    pub state: String,
    #[serde(deserialize_with = "false_as_none")]
    pub parent: Option<String>,
    /// Child batches, oldest first.
    pub children: Vec<String>,
    pub counts: BatchCounts,
    /// By kind (`on_success`, `on_complete`, `on_death`): only those it has.
    pub callbacks: BTreeMap<String, BatchCallback>,
    /// When it settled (Unix seconds).
    #[serde(deserialize_with = "false_as_none")]
    pub settled: Option<f64>,
    /// When every job had completed (Unix seconds).
    #[serde(deserialize_with = "false_as_none")]
    pub succeeded: Option<f64>,
    /// The page of jobs asked for, in the order they joined.
    pub jobs: Vec<BatchJob>,
    /// The offset of the next page, if there is one.
    #[serde(deserialize_with = "false_as_none")]
    pub next: Option<usize>,
}

/// What a parent's failure does to a waiting task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParentFailurePolicy {
    /// The task, and everything after it, is canceled.
    #[default]
    Cancel,
    /// The task fails into the group `workflow-parent-failed`.
    Fail,
    /// The task runs once its other parents are done, as if the failed one had
    /// completed.
    Ignore,
    /// The task runs at once.
    Continue,
}

impl ParentFailurePolicy {
    /// The policy's name in the script and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ParentFailurePolicy::Cancel => "cancel",
            ParentFailurePolicy::Fail => "fail",
            ParentFailurePolicy::Ignore => "ignore",
            ParentFailurePolicy::Continue => "continue",
        }
    }
}

/// A new workflow.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "thumbnail", "tasks": {
    "fetch": {"queue": "io", "klass": "Fetch", "data": {"url": "https://example.com/a.png"}},
    "resize": {"queue": "cpu", "klass": "Resize", "after": ["fetch"]},
    "notify": {"queue": "io", "klass": "Notify", "after": ["resize"],
               "on_parent_failure": "cancel"}
}}))]
pub struct CreateWorkflowRequest {
    /// What the workflow is, shown with it (a name; not unique).
    #[serde(default)]
    pub name: Option<WorkflowName>,
    /// The tasks by name (1 to 1,000), the graph acyclic.
    #[schema(value_type = BTreeMap<String, QueuedJobRequest>)]
    pub tasks: BTreeMap<TaskName, QueuedJobRequest>,
}

/// A created workflow.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedWorkflow {
    pub wid: String,
    /// Each task's jid, by name.
    pub jids: BTreeMap<String, String>,
}

/// A task of a workflow.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkflowTask {
    pub name: String,
    pub jid: String,
    /// Its job's state; `canceled` once canceled; `complete` for a completed job
    /// since purged.
    pub state: String,
    /// The tasks it waits for (the graph's edges).
    pub after: Vec<String>,
    pub policy: String,
    pub queue: String,
}

/// A workflow.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkflowView {
    pub wid: String,
    pub name: String,
    /// Unix seconds.
    pub created: f64,
    /// Every task, parents before children.
    pub tasks: Vec<WorkflowTask>,
}

/// How many jobs a cancel canceled.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CanceledCount {
    pub canceled: i64,
}

/// The script writes an absent value as `false` (cjson has no nil in a table).
fn false_as_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    if value == serde_json::Value::Bool(false) || value.is_null() {
        return Ok(None);
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(serde::de::Error::custom)
}
