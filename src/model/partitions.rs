//! Fair queues (`/v1/queues/{queue}/partitions`): a queue's partitions, served in
//! turn, and the limits each of them has.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::ThrottleRate;

/// Body of `PUT /v1/queues/{queue}/partitions`: the limits of each partition of the
/// queue, replacing any earlier ones (none given: no limits).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"concurrency": 2, "rate": {"jobs": 100, "seconds": 60}}))]
pub struct SetPartitionsRequest {
    /// At most this many jobs of any one partition run at once (at least 1).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub concurrency: Option<u64>,
    /// At most `jobs` jobs of any one partition start per `seconds`.
    #[serde(default)]
    pub rate: Option<ThrottleRate>,
}

/// A partition with jobs waiting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Partition {
    /// Its name (the `partition` its jobs were put with).
    pub name: String,
    /// Its jobs waiting (jobs that left the queue another way are counted until a pop
    /// meets them).
    pub waiting: u64,
    /// Its jobs running, counted while the queue has a `concurrency` (else `null`).
    pub running: Option<u64>,
    /// When at one of its limits: when pops look at it again (Unix seconds); `null`
    /// when it takes its turns.
    pub limited: Option<f64>,
}

/// A page of a queue's partitions with jobs waiting, and their limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"partitions": [{"name": "acme", "waiting": 10000, "running": 2,
    "limited": null}], "cursor": null, "concurrency": 2, "rate": null}))]
pub struct QueuePartitions {
    /// The partitions in the rotation's order (next served first), then those parked
    /// at a limit.
    pub partitions: Vec<Partition>,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub cursor: Option<String>,
    /// At most this many jobs of one partition run at once; `null`: no limit.
    pub concurrency: Option<u64>,
    /// At most `jobs` jobs of one partition start per `seconds`; `null`: no limit.
    pub rate: Option<ThrottleRate>,
}

/// Query of `GET /v1/queues/{queue}/partitions`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PartitionsQuery {
    /// The `cursor` of the previous page; absent: the first page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Partitions per page (1 to 1000, default 100).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub count: Option<u32>,
}
