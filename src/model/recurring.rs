//! Recurring jobs: templates that spawn a job every interval, or on a cron schedule.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::wire;

/// A recurring job template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecurringJob {
    /// Template id; children are `<jid>-1`, `<jid>-2`, ...
    pub jid: String,
    /// Class of the spawned jobs.
    pub klass: String,
    /// Always `recur`.
    #[schema(example = "recur")]
    pub state: String,
    /// Queue the children are put in.
    pub queue: String,
    /// Priority of the children.
    #[serde(
        deserialize_with = "wire::number",
        serialize_with = "wire::whole_when_possible"
    )]
    pub priority: f64,
    /// Seconds between spawns. For a cron template, the gap between its next two
    /// fire times (what stock qless clients read).
    #[serde(
        deserialize_with = "wire::number",
        serialize_with = "wire::whole_when_possible"
    )]
    pub interval: f64,
    /// Retry budget of the children.
    #[serde(deserialize_with = "wire::integer")]
    pub retries: i64,
    /// Children spawned so far.
    #[serde(deserialize_with = "wire::integer")]
    pub count: i64,
    /// Payload of the children.
    #[schema(value_type = serde_json::Value)]
    pub data: wire::JsonData,
    /// Tags of the children.
    #[serde(deserialize_with = "wire::list")]
    pub tags: Vec<String>,
    /// Interval templates: at most this many missed intervals are caught up (0: all).
    /// Cron templates: at most this many missed ticks fire (0: only the latest).
    #[serde(deserialize_with = "wire::integer", default)]
    pub backlog: i64,
    /// The cron expression, for a cron template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "0 9 * * 1-5")]
    pub cron: Option<String>,
    /// The IANA time zone of the cron expression, for a cron template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "Europe/Berlin")]
    pub timezone: Option<String>,
    /// The next spawn times (seconds since the epoch, at most 5), soonest first.
    #[serde(
        default,
        deserialize_with = "wire::list",
        serialize_with = "wire::whole_list_when_possible"
    )]
    pub next: Vec<f64>,
    /// Each child must be popped within this many seconds of its spawn time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::optional_whole_when_possible"
    )]
    pub start_within: Option<f64>,
    /// Each child's `max_run` (seconds it may run from its pop).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "wire::optional_whole_when_possible"
    )]
    pub max_run: Option<f64>,
    /// Each child's partition (fair queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
}
