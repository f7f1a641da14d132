//! Request and response bodies of the `/v1/jobs` resources (and `/v1/tracked`,
//! `/v1/completed`). Requests refuse unknown fields, so a typo is a 400 rather than a
//! silently ignored option.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::job::Job;
use super::{GroupName, Jid, PartitionName, QueueName, Tag, WorkerName};

/// Body of `POST /v1/jobs/{jid}/heartbeat`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "worker-1", "data": {"progress": 40}}))]
pub struct HeartbeatJobRequest {
    /// The worker holding the job.
    pub worker: WorkerName,
    /// Replaces the job's data when present (any JSON value); absent keeps it.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub data: Option<crate::model::wire::RawJson>,
    /// The job's progress (any JSON value), stored beside its data (which it leaves
    /// as it is) and shown with the job; absent keeps the last one.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub progress: Option<crate::model::wire::RawJson>,
}

/// Reply of a heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"expires": 1700000060.25}))]
pub struct HeartbeatJobResponse {
    /// The new lock expiry, seconds since the epoch with its fraction: the job's
    /// `expires` as a pop or `GET /v1/jobs/{jid}` shows it from now on.
    #[serde(serialize_with = "crate::model::wire::whole_when_possible")]
    pub expires: f64,
}

/// Body of `POST /v1/jobs/{jid}/complete`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "worker-1", "queue": "emails",
    "data": {"to": "a@example.com", "sent": true}, "next": "audit", "delay": 30}))]
pub struct CompleteJobRequest {
    /// The worker holding the job.
    pub worker: WorkerName,
    /// The queue the job runs in (a safety check: it must match).
    pub queue: QueueName,
    /// The job's data from now on (any JSON value). It replaces the stored data;
    /// absent keeps the data the job has.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub data: Option<crate::model::wire::RawJson>,
    /// Move the job on to this queue instead of finishing it.
    #[serde(default)]
    pub next: Option<QueueName>,
    /// With `next`: seconds before it becomes waiting there.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub delay: Option<f64>,
    /// With `next`: jobs it waits for there (unknown or completed jids are ignored).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub depends: Option<Vec<Jid>>,
    /// The job's result (any JSON value), stored beside its data (which it leaves as
    /// it is) and shown with the job for as long as the job is kept.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub result: Option<crate::model::wire::RawJson>,
    /// After ending the job, lease up to `count` jobs of the queue it ran in to the
    /// same worker, in the same call (they come back as `popped`). Nothing is leased
    /// when the job could not be ended.
    #[serde(default)]
    pub pop: Option<PopNext>,
}

/// `pop` of a complete, fail or retry: lease the worker's next jobs in the same call.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"count": 1, "wait": 5}))]
pub struct PopNext {
    /// Most jobs to lease from the queue the ended job ran in, 1 to 1000 (default 1).
    #[serde(default = "one", deserialize_with = "crate::model::wire::whole")]
    #[schema(minimum = 1, maximum = 1000, default = 1)]
    pub count: u32,
    /// Seconds to wait for a job when none is available (default 0: answer at once),
    /// as a pop does; capped at the server's `--max-wait`.
    #[serde(default)]
    #[schema(minimum = 0, default = 0)]
    pub wait: f64,
}

fn one() -> u32 {
    1
}

/// Reply of a completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"state": "complete"}))]
pub struct CompleteJobResponse {
    /// The job's state after the completion: `complete`, or, with `next`, `waiting`,
    /// `scheduled` (a delay) or `depends` (open dependencies) in the next queue.
    pub state: super::JobState,
    /// With `pop`: the jobs now leased to the worker (`[]` when none came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popped: Option<Vec<Job>>,
}

/// Body of `POST /v1/jobs/{jid}/fail`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "worker-1", "group": "smtp.timeout",
    "message": "connection timed out after 30 s"}))]
pub struct FailJobRequest {
    /// The worker holding the job.
    pub worker: WorkerName,
    /// The failure group: a kind of failure, listed under `/v1/failures`.
    pub group: GroupName,
    /// What went wrong, for humans (a stack trace, ...); at most `--max-job-size`
    /// bytes.
    pub message: String,
    /// Replaces the job's data when present (any JSON value); absent keeps it.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub data: Option<crate::model::wire::RawJson>,
    /// After ending the job, lease up to `count` jobs of the queue it ran in to the
    /// same worker, in the same call (they come back as `popped`). Nothing is leased
    /// when the job could not be ended.
    #[serde(default)]
    pub pop: Option<PopNext>,
}

/// Reply of a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jid": "8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f", "state": "failed"}))]
pub struct FailJobResponse {
    /// The job id.
    pub jid: String,
    /// Always `failed`.
    pub state: super::JobState,
    /// With `pop`: the jobs now leased to the worker (`[]` when none came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popped: Option<Vec<Job>>,
}

/// Body of `POST /v1/jobs/{jid}/retry`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "worker-1", "queue": "emails", "delay": 60,
    "group": "smtp.timeout", "message": "connection timed out after 30 s"}))]
pub struct RetryJobRequest {
    /// The worker holding the job.
    pub worker: WorkerName,
    /// The queue to put the job back in.
    pub queue: QueueName,
    /// Seconds before it becomes waiting again. Absent: the job's backoff for this
    /// attempt (its own `backoff`, else its queue's `<queue>-backoff` option), or 0
    /// when it has none.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub delay: Option<f64>,
    /// With `message`: the failure recorded now, and the job's failure group should
    /// this retry exhaust its retries.
    #[serde(default)]
    pub group: Option<GroupName>,
    /// With `group`: the failure message; at most `--max-job-size` bytes.
    #[serde(default)]
    pub message: Option<String>,
    /// After ending the job, lease up to `count` jobs of the queue it ran in to the
    /// same worker, in the same call (they come back as `popped`). Nothing is leased
    /// when the job could not be ended.
    #[serde(default)]
    pub pop: Option<PopNext>,
}

/// Reply of a retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"remaining": 4}))]
pub struct RetryJobResponse {
    /// Retries left. Negative: the job ran out of retries and is now failed.
    pub remaining: i64,
    /// With `pop`: the jobs now leased to the worker (`[]` when none came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popped: Option<Vec<Job>>,
}

/// Body of `POST /v1/jobs/{jid}/requeue`: the fields of putting a job, where every
/// field but `queue` left out keeps what the job has.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"queue": "emails", "priority": 10, "delay": 0}))]
pub struct RequeueJobRequest {
    /// The queue to move the job to.
    pub queue: QueueName,
    /// The class (handler name) a worker runs it with. Absent: the job keeps its class.
    #[serde(default)]
    #[schema(value_type = Option<crate::model::Text>)]
    pub klass: Option<String>,
    /// The payload (any JSON value, `null` included). Absent: the job keeps its data.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub data: Option<crate::model::wire::RawJson>,
    /// Higher pops first. Absent: the job keeps its priority.
    #[serde(default)]
    pub priority: Option<f64>,
    /// Absent: the job keeps its tags.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub tags: Option<Vec<Tag>>,
    /// Retry budget (its `remaining` starts full again either way). Absent: the job
    /// keeps its budget.
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    #[schema(minimum = 0)]
    pub retries: Option<i64>,
    /// Jobs to wait for. Absent or empty: the job keeps its dependencies.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub depends: Option<Vec<Jid>>,
    /// Seconds before it becomes waiting (default 0: a delay is not kept, it is part
    /// of the move, not of the job).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub delay: Option<f64>,
    /// Unix time by which the job must have been popped, else it fails into `expired`
    /// (see `put_job`). Absent: none (a requeue drops an old one: it was for the
    /// job's old wait).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_by: Option<f64>,
    /// Seconds from now by which the job must have been popped; not with `start_by`.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_within: Option<f64>,
    /// Seconds the job may run from its pop (see `put_job`). Absent: the job keeps its
    /// own.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub max_run: Option<f64>,
    /// The job's partition (a name: a customer, a tenant) in a fair queue: the
    /// queue's partitioned jobs are served in turn across partitions, each with the
    /// queue's partition limits. Absent: none (a put of an existing job drops its
    /// old one).
    #[serde(default)]
    pub partition: Option<PartitionName>,
}

/// Reply of a requeue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jid": "8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f"}))]
pub struct RequeueJobResponse {
    /// The job id.
    pub jid: String,
}

/// Body of `POST /v1/jobs/cancel`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jids": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f",
    "0b6e2d7c4f1a4e3b8d5c9a2f1e0d3c4b"]}))]
pub struct CancelJobsRequest {
    /// The jobs to cancel (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    pub jids: Vec<Jid>,
}

/// Reply of a group cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"canceled": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f",
    "0b6e2d7c4f1a4e3b8d5c9a2f1e0d3c4b"]}))]
pub struct CancelJobsResponse {
    /// The jids as given, whether they existed or not.
    pub canceled: Vec<String>,
}

/// Body of `PUT /v1/jobs/{jid}/priority`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"priority": 10}))]
pub struct JobPriorityRequest {
    /// Higher pops first.
    pub priority: f64,
}

/// Reply of a priority change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"priority": 10}))]
pub struct JobPriorityResponse {
    /// The job's priority from now on.
    pub priority: f64,
}

/// Body of `POST /v1/jobs/{jid}/dependencies`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"depends": ["0b6e2d7c4f1a4e3b8d5c9a2f1e0d3c4b"]}))]
pub struct AddJobDependenciesRequest {
    /// Jobs to wait for (1 to 1000; unknown or completed jids are ignored).
    #[schema(min_items = 1, max_items = 1000)]
    pub depends: Vec<Jid>,
}

/// Body of `POST /v1/jobs/{jid}/tags`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tags": ["signup", "vip"]}))]
pub struct JobTagsRequest {
    /// Tags to add (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    pub tags: Vec<Tag>,
}

/// A job's tags after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"tags": ["signup", "vip"]}))]
pub struct JobTagsResponse {
    /// The job's tags, in the order they were added.
    pub tags: Vec<String>,
}

/// Whether a job is tracked, after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"tracked": true}))]
pub struct JobTrackedResponse {
    /// Tracked jobs have their transitions published.
    pub tracked: bool,
}

/// Reply of `GET /v1/tracked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrackedJobsResponse {
    /// The tracked jobs that exist, oldest tracking first.
    pub jobs: Vec<Job>,
    /// Tracked jids whose job no longer exists (canceled or purged).
    pub expired: Vec<String>,
}

/// Body of `POST /v1/jobs/{jid}/log`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"message": "resized", "data": {"width": 640}}))]
pub struct LogJobEventRequest {
    /// The entry's `what`; at most `--max-job-size` bytes.
    #[schema(value_type = crate::model::Text)]
    pub message: String,
    /// Keys merged into the entry (`when` and `what` cannot be overridden; `q`,
    /// `worker` and `group`, when present, are strings); at most `--max-job-size`
    /// bytes as JSON.
    #[serde(default)]
    pub data: Option<Map<String, Value>>,
}

/// Reply of `GET /v1/completed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jids": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f"]}))]
pub struct CompletedJobsResponse {
    /// Completed jids, most recently completed first.
    pub jids: Vec<String>,
}
