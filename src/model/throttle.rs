//! Throttles (`/v1/throttles/{name}`): concurrency and rate limits shared by the jobs
//! that name them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A rate limit: at most `jobs` leases per `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ThrottleRate {
    /// Most leases in any window of `seconds` (at least 1).
    #[schema(minimum = 1)]
    pub jobs: u64,
    /// The window, in seconds (above 0).
    #[serde(serialize_with = "super::wire::whole_when_possible")]
    pub seconds: f64,
}

/// Body of `PUT /v1/throttles/{name}`: the limits, replacing any earlier ones. At
/// least one must be given.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"maximum": 5, "rate": {"jobs": 100, "seconds": 60}}))]
pub struct SetThrottleRequest {
    /// At most this many jobs holding the throttle run at once (at least 1).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub maximum: Option<u64>,
    /// At most `jobs` leases of jobs holding it per `seconds`.
    #[serde(default)]
    pub rate: Option<ThrottleRate>,
}

/// A throttle: its limits, the jobs holding it and the jobs waiting for room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "smtp", "maximum": 5, "rate": null, "recent": 3,
    "running": ["a1", "b2"], "waiting": ["c3"]}))]
pub struct Throttle {
    /// Its name.
    pub name: String,
    /// Most jobs holding it at once; `null`: no limit.
    pub maximum: Option<u64>,
    /// Its rate limit; `null`: none.
    pub rate: Option<ThrottleRate>,
    /// Leases within the current rate window (0 without a rate limit).
    pub recent: u64,
    /// Jobs holding it (running, or stalled until handed over or failed).
    #[serde(deserialize_with = "super::wire::list")]
    pub running: Vec<String>,
    /// Jobs waiting for room (out of their queues' waiting lists), next first.
    /// Jobs held back by the rate limit are `scheduled` in their queues instead.
    #[serde(deserialize_with = "super::wire::list")]
    pub waiting: Vec<String>,
}
