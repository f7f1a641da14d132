//! Bodies of the worker-side endpoints: multi-queue pops and batch heartbeat/complete.

use serde::{Deserialize, Serialize};

use utoipa::ToSchema;

use super::{CompletionState, Jid, Problem, QueueName, WorkerName};

/// How `POST /v1/pop` chooses among its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PopStrategy {
    /// The first non-empty queue in the order given, then the next one.
    #[default]
    Ordered,
    /// One job from each queue in turn; successive pops start at the next queue.
    RoundRobin,
    /// A lottery by weight for each job: higher weights win more often, an empty queue
    /// is skipped and the draw repeated among the rest, so low weights are never
    /// starved when heavier queues are empty.
    Weighted,
}

/// One queue of a multi-queue pop.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PopQueue {
    /// Queue name.
    pub name: QueueName,
    /// Relative weight for `weighted` (default 1, must be > 0).
    #[serde(default = "one")]
    #[schema(exclusive_minimum = 0, default = 1)]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// Body of `POST /v1/pop`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "worker-1", "strategy": "weighted", "count": 10,
    "wait": 20, "queues": [{"name": "critical", "weight": 6},
                           {"name": "default", "weight": 3}, {"name": "bulk", "weight": 1}]}))]
pub struct MultiPopRequest {
    /// The worker that will hold the leases.
    pub worker: WorkerName,
    /// The queues to serve (1 to 64, distinct).
    #[schema(min_items = 1, max_items = 64)]
    pub queues: Vec<PopQueue>,
    /// How queues are chosen (default `ordered`).
    #[serde(default)]
    pub strategy: PopStrategy,
    /// Most jobs to lease, 1 to 1000 (default 1).
    #[serde(default = "one_job", deserialize_with = "crate::model::wire::whole")]
    #[schema(minimum = 1, maximum = 1000)]
    pub count: u32,
    /// Seconds to wait for a job when every queue is empty (default 0; capped at the
    /// server's `--max-wait`).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub wait: f64,
}

fn one_job() -> u32 {
    1
}

/// One job of `POST /v1/jobs/complete`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteJobsItem {
    /// The job.
    pub jid: Jid,
    /// The worker holding the job.
    pub worker: WorkerName,
    /// The queue the job runs in.
    pub queue: QueueName,
    /// The job's data from now on; absent keeps the job's data.
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
    /// With `next`: jobs it waits for there.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub depends: Option<Vec<Jid>>,
    /// The job's result (any JSON value), stored beside its data.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub result: Option<crate::model::wire::RawJson>,
}

/// Body of `POST /v1/jobs/complete`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [
    {"jid": "a1", "worker": "worker-1", "queue": "emails", "data": {"sent": true}},
    {"jid": "b2", "worker": "worker-1", "queue": "emails", "next": "audit"}]}))]
pub struct CompleteJobsRequest {
    /// The jobs to complete (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<CompleteJobsItem>,
    /// After completing the jobs (all of one worker in one queue), lease up to `count`
    /// jobs of that queue to the worker in the same call (`popped`). Nothing is leased
    /// unless every job was completed.
    #[serde(default)]
    pub pop: Option<super::PopNext>,
}

/// Outcome of completing one job of a batch: `state` on success, `problem` otherwise.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompleteJobsOutcome {
    /// The job.
    pub jid: String,
    /// Where it went, when it was completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<CompletionState>,
    /// Why it was not (e.g. `lock_lost`: another worker holds it now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

/// Reply of `POST /v1/jobs/complete`, in request order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompleteJobsResponse {
    /// One outcome per job.
    pub jobs: Vec<CompleteJobsOutcome>,
    /// With `pop`: the jobs now leased to the worker (`[]` when none came, or when a
    /// job could not be completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popped: Option<Vec<super::Job>>,
}

/// One job of `POST /v1/jobs/heartbeat`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatJobsItem {
    /// The job.
    pub jid: Jid,
    /// The worker holding it.
    pub worker: WorkerName,
    /// Replaces the job's data when present.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub data: Option<crate::model::wire::RawJson>,
    /// The job's progress (any JSON value), stored beside its data.
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub progress: Option<crate::model::wire::RawJson>,
}

/// Body of `POST /v1/jobs/heartbeat`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [{"jid": "a1", "worker": "worker-1"},
                                   {"jid": "b2", "worker": "worker-1"}]}))]
pub struct HeartbeatJobsRequest {
    /// The jobs to renew (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<HeartbeatJobsItem>,
}

/// Outcome of one heartbeat of a batch: `expires` on success, `problem` otherwise.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatJobsOutcome {
    /// The job.
    pub jid: String,
    /// The new lock expiry (seconds since the epoch), when renewed.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::model::wire::optional_whole_when_possible"
    )]
    pub expires: Option<f64>,
    /// Why it was not renewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

/// Reply of `POST /v1/jobs/heartbeat`, in request order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatJobsResponse {
    /// One outcome per job.
    pub jobs: Vec<HeartbeatJobsOutcome>,
}

/// Filters of `GET /v1/events`; an event passes when it matches every filter given.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events about this queue (`queue`, or `to` for `advanced`).
    pub queue: Option<QueueName>,
    /// Only events about this job.
    pub jid: Option<Jid>,
    /// Only events naming this worker (`lock_lost`, `canceled`, `failed`).
    pub worker: Option<WorkerName>,
    /// Only these event types, comma-separated (e.g. `lock_lost,canceled`), from
    /// `put`, `lock_lost`, `canceled`, `completed`, `advanced`, `failed`, `config_set`,
    /// `config_unset`, `tracked`, `tracking`; another name is a 400. `ready` and
    /// `lagged` are always sent.
    #[param(example = "lock_lost,canceled")]
    pub events: Option<String>,
}
