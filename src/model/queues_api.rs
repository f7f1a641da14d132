//! Request and response bodies of the `/v1/queues` resources: putting jobs (one or a
//! batch), leasing and peeking, listings by state, statistics, recurring templates.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{IdempotencyKey, Jid, PartitionName, Tag, ThrottleName, WorkerName};

/// A job to put in a queue (`POST /v1/queues/{queue}/jobs`, and each item of a batch).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "klass": "email.Send", "data": {"to": "a@example.com"}, "priority": 10,
    "tags": ["signup"], "retries": 3, "delay": 0
}))]
pub struct PutJobRequest {
    /// The job id. Absent: a new one is generated (a UUID v4 as 32 lowercase hex
    /// digits). Putting an existing jid moves and resets that job, unless `if_absent`.
    #[serde(default)]
    pub jid: Option<Jid>,
    /// The class (handler name) a worker runs the job with; not empty.
    #[schema(value_type = crate::model::Text)]
    pub klass: String,
    /// The payload: any JSON value, returned as given. Absent: `{}`.
    #[serde(default = "crate::model::wire::empty_object")]
    #[schema(value_type = serde_json::Value)]
    pub data: crate::model::wire::RawJson,
    /// Higher pops first. Absent: kept from an existing job with this jid, else 0.
    #[serde(default)]
    pub priority: Option<f64>,
    /// Tags (names). Absent: kept from an existing job with this jid, else none.
    #[serde(default)]
    pub tags: Option<Vec<Tag>>,
    /// Retry budget (a whole number, at least 0). Absent: kept from an existing job
    /// with this jid, else 5.
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    #[schema(minimum = 0)]
    pub retries: Option<i64>,
    /// Jids this job waits for. Jobs that do not exist or are complete are ignored.
    /// Absent or empty: an existing job keeps its dependencies.
    #[serde(default)]
    pub depends: Option<Vec<Jid>>,
    /// Seconds before the job becomes waiting (at least 0, default 0).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub delay: Option<f64>,
    /// `true`: do nothing when a job with this jid already exists (the response then
    /// says `created: false`), so that duplicate producers do not reset a job.
    #[serde(default)]
    pub if_absent: bool,
    /// Throttles (names) the job holds while it runs: a pop leases it only while
    /// each of them has room (`PUT /v1/throttles/{name}`). Absent: kept from an
    /// existing job; empty: none.
    #[serde(default)]
    #[schema(max_items = 100)]
    pub throttles: Option<Vec<ThrottleName>>,
    /// How long a retry without a delay, or a lock expiry, waits before the job runs
    /// again. Absent: kept from an existing job, else the queue's
    /// `<queue>-backoff` option, else none.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Unix time (seconds) by which the job must have been popped: a job not popped
    /// by then is not run but fails into the failure group `expired` (when a pop
    /// reaches it, or when the sweeper passes its deadline). Only the first start
    /// counts: a job that ran and is retried is not expired. At least 0. Absent: none
    /// (a put of an existing job drops its old one).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_by: Option<f64>,
    /// Seconds from now (the server's clock) by which the job must have been popped:
    /// `start_by` = now + `start_within`. At least 0; not with `start_by`.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_within: Option<f64>,
    /// Seconds the job may run from its pop, heartbeats or not: after that its lock
    /// ends (it is retried or failed by its retries, as on a lock expiry) and its
    /// worker's next heartbeat or completion is a 409 `timed_out`. More than 0.
    /// Absent: kept from an existing job, else none.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub max_run: Option<f64>,
    /// The job's partition (a name: a customer, a tenant) in a fair queue: the
    /// queue's partitioned jobs are served in turn across partitions, each with the
    /// queue's partition limits. Absent: none (a put of an existing job drops its
    /// old one).
    #[serde(default)]
    pub partition: Option<PartitionName>,
    /// In a batch item: the item's idempotency key (as the `Idempotency-Key` header
    /// of a single put). A put repeating a key used within `--idempotency-ttl` answers
    /// the first put's jid with `created: false` and writes nothing.
    #[serde(default)]
    pub idempotency_key: Option<IdempotencyKey>,
}

/// A retry backoff: attempt n (1 for the first retry) waits
/// `min(max, initial * factor^(n-1))` seconds, less up to `jitter` of it (a
/// fraction derived from the jid and attempt, so it differs between jobs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"initial": 5, "factor": 2, "max": 300, "jitter": 0.2}))]
pub struct Backoff {
    /// Seconds before the first retry (at least 0).
    #[schema(minimum = 0)]
    pub initial: f64,
    /// Growth per attempt (at least 1, default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub factor: Option<f64>,
    /// Longest wait, seconds (default: no bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub max: Option<f64>,
    /// Fraction of the wait that may be taken off, 0 to 1 (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1)]
    pub jitter: Option<f64>,
}

/// The outcome of a put.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jid": "8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f", "created": true}))]
pub struct PutJobResponse {
    /// The job id (generated when the request had none).
    pub jid: String,
    /// `false` only with `if_absent` when the job already existed (nothing changed).
    pub created: bool,
}

/// Many jobs to put in one queue in one round trip.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"jobs": [
    {"klass": "email.Send", "data": {"to": "a@example.com"}},
    {"jid": "report-2024-01", "klass": "report.Build", "if_absent": true}
]}))]
pub struct PutJobsRequest {
    /// 1 to 1000 jobs, put in this order.
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<PutJobRequest>,
}

/// The outcome of a batch put, one entry per job in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PutJobsResponse {
    /// One outcome per requested job, in the same order.
    pub jobs: Vec<PutJobResponse>,
}

/// A worker asking for jobs of one queue.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"worker": "worker-1", "count": 5}))]
pub struct PopJobsRequest {
    /// The worker that will hold the leases (a name).
    pub worker: WorkerName,
    /// Most jobs to lease, 1 to 1000 (default 1).
    #[serde(default = "one", deserialize_with = "crate::model::wire::whole")]
    #[schema(minimum = 1, maximum = 1000, default = 1)]
    pub count: u32,
    /// Seconds to wait for a job when none is available (default 0: answer at once).
    /// The request returns as soon as a job arrives, or `[]` when the time is up;
    /// capped at the server's `--max-wait`.
    #[serde(default)]
    #[schema(minimum = 0, default = 0)]
    pub wait: f64,
}

fn one() -> u32 {
    1
}

/// `?count=` of a peek.
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PeekJobsQuery {
    /// Most jobs to show, 1 to 1000 (default 1).
    #[serde(default = "one")]
    #[param(minimum = 1, maximum = 1000)]
    pub count: u32,
}

/// The states a queue's jobs can be listed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueueJobState {
    /// Ready to pop, in pop order (highest priority first, then oldest).
    Waiting,
    /// Leased with an unexpired lock, soonest expiry first.
    Running,
    /// Leased with an expired lock.
    Stalled,
    /// Delayed, soonest first (jobs whose delay has passed become waiting).
    Scheduled,
    /// Waiting for other jobs to complete.
    Depends,
    /// Recurring templates (their jids) attached to the queue.
    Recurring,
}

/// `?state=&offset=&count=` of a queue's job listing.
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueJobsQuery {
    /// Which jobs to list (required).
    #[param(inline)]
    pub state: QueueJobState,
    /// Index of the first jid (default 0).
    #[serde(default)]
    #[param(value_type = u64, maximum = 4294967295_u64)]
    pub offset: u32,
    /// Jids per page, 1 to 1000 (default 25).
    #[serde(default = "twenty_five")]
    #[param(minimum = 1, maximum = 1000)]
    pub count: u32,
}

fn twenty_five() -> u32 {
    25
}

/// A page of jids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jids": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f"]}))]
pub struct QueueJids {
    /// The jids, in the listing's order (`[]` when none).
    pub jids: Vec<String>,
}

/// `?date=` of the statistics.
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueStatsQuery {
    /// Any time (seconds since the epoch) in the UTC day to report. Default: now.
    #[serde(default)]
    pub date: Option<f64>,
}

/// A recurring job to create (or replace) in a queue.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "jid": "nightly-report", "klass": "report.Build", "data": {"kind": "daily"},
    "interval": 86400, "offset": 3600, "priority": 0, "tags": ["reports"],
    "retries": 2, "backlog": 1
}))]
pub struct CreateRecurringJobRequest {
    /// The template id; children are `<jid>-1`, `<jid>-2`, ... Absent: generated
    /// (a UUID v4 as 32 lowercase hex digits). An existing template with this jid is
    /// replaced.
    #[serde(default)]
    pub jid: Option<Jid>,
    /// Class of the spawned jobs; not empty.
    #[schema(value_type = crate::model::Text)]
    pub klass: String,
    /// Payload of the spawned jobs: any JSON value. Absent: `{}`.
    #[serde(default = "crate::model::wire::empty_object")]
    #[schema(value_type = serde_json::Value)]
    pub data: crate::model::wire::RawJson,
    /// Seconds between spawns (greater than 0). Give exactly one of `interval` and
    /// `cron`.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub interval: Option<f64>,
    /// A cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6
    /// with seconds first. Give exactly one of `interval` and `cron`.
    #[serde(default)]
    #[schema(example = "0 9 * * 1-5", max_length = 200)]
    pub cron: Option<String>,
    /// The IANA time zone `cron` is read in (default `UTC`); only with `cron`.
    #[serde(default)]
    #[schema(example = "Europe/Berlin", max_length = 64)]
    pub timezone: Option<String>,
    /// Seconds from now until the first spawn (at least 0, default 0); interval only.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub offset: f64,
    /// Priority of the children (default 0).
    #[serde(default)]
    pub priority: Option<f64>,
    /// Tags of the children (default none).
    #[serde(default)]
    pub tags: Option<Vec<Tag>>,
    /// Retry budget of the children (a whole number, at least 0; default 0).
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    #[schema(minimum = 0)]
    pub retries: Option<i64>,
    /// At most this many missed intervals are caught up at once (at least 0; default
    /// 0, meaning all). For `cron`: at most this many missed ticks fire (default 0,
    /// meaning only the latest).
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    #[schema(minimum = 0)]
    pub backlog: Option<i64>,
    /// Each child must be popped within this many seconds of its spawn time (its
    /// `start_by`; past it the child fails into `expired` instead of running). At
    /// least 0. Absent: none.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub start_within: Option<f64>,
    /// Each child's `max_run`: seconds it may run from its pop, heartbeats or not.
    /// More than 0. Absent: none.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub max_run: Option<f64>,
    /// Each child's partition (fair queues). Absent: none.
    #[serde(default)]
    pub partition: Option<PartitionName>,
}

/// The id of a created recurring job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jid": "nightly-report"}))]
pub struct CreatedRecurringJob {
    /// The template id.
    pub jid: String,
}
