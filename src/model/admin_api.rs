//! HTTP request and response bodies of the administrative resources: recurring-job
//! templates, tags, failure groups, workers and configuration options.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{PartitionName, QueueName, Tag};

/// Changes to a recurring job template (`PATCH /v1/recurring/{jid}`). Fields left out
/// keep their value; at least one field must be given.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"interval": 3600, "priority": 10, "data": {"report": "hourly"}}))]
pub struct RecurringJobUpdate {
    /// Priority of the children spawned from now on (higher pops first).
    pub priority: Option<f64>,
    /// Seconds between spawns, greater than 0. The next spawn moves by the difference
    /// between the new and the old interval; a cron template becomes an interval one,
    /// next spawn an interval from now.
    #[schema(exclusive_minimum = 0)]
    pub interval: Option<f64>,
    /// Retry budget of the children spawned from now on (0 or more).
    #[schema(minimum = 0)]
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    pub retries: Option<i64>,
    /// Payload of the children spawned from now on: any JSON value (`null` included).
    #[serde(default, deserialize_with = "crate::model::wire::present_raw")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub data: Option<crate::model::wire::RawJson>,
    /// Class of the children spawned from now on.
    #[schema(value_type = Option<crate::model::Text>)]
    pub klass: Option<String>,
    /// Queue the children are put in from now on; the template moves there, keeping its
    /// next spawn time.
    pub queue: Option<QueueName>,
    /// Catch up at most this many missed intervals (0: all of them); for a cron
    /// template, fire at most this many missed ticks (0: only the latest).
    #[schema(minimum = 0)]
    #[serde(default, deserialize_with = "crate::model::wire::optional_whole")]
    pub backlog: Option<i64>,
    /// A new cron expression (5 fields, or 6 with seconds first); the template then
    /// spawns at its next tick after now. Not with `interval`.
    #[schema(example = "0 9 * * 1-5", max_length = 200)]
    pub cron: Option<String>,
    /// A new IANA time zone for the cron expression (the template's own, or given
    /// with `cron`; a template without one becomes a cron template only with `cron`).
    #[schema(example = "Europe/Berlin", max_length = 64)]
    pub timezone: Option<String>,
    /// Seconds within which each child spawned from now on must be popped (at least
    /// 0); `null` removes it.
    #[serde(default, deserialize_with = "crate::model::wire::present")]
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub start_within: Option<Option<f64>>,
    /// The `max_run` of each child spawned from now on (more than 0); `null` removes
    /// it.
    #[serde(default, deserialize_with = "crate::model::wire::present")]
    #[schema(value_type = Option<f64>, exclusive_minimum = 0)]
    pub max_run: Option<Option<f64>>,
    /// The partition of each child spawned from now on; `null` removes it.
    #[serde(default, deserialize_with = "crate::model::wire::present")]
    #[schema(value_type = Option<crate::model::Name>)]
    pub partition: Option<Option<PartitionName>>,
}

/// Tags to add to a recurring job template.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"tags": ["nightly", "billing"]}))]
pub struct RecurringTagsChange {
    /// At least one tag.
    #[schema(min_items = 1, max_items = 1000)]
    pub tags: Vec<Tag>,
}

/// The tags of a recurring job template after a change, in the order they were added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"tags": ["nightly", "billing"]}))]
pub struct RecurringTags {
    /// The template's tags (children spawned from now on carry them).
    pub tags: Vec<String>,
}

/// The most used tags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"tags": ["billing", "eu"]}))]
pub struct TopTags {
    /// Tags used at least twice, most used first.
    pub tags: Vec<String>,
}

/// How many failed jobs each failure group holds, by group name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(example = json!({"timeout": 3, "smtp-refused": 1}))]
pub struct FailureGroups(pub BTreeMap<String, i64>);

/// Puts the oldest failed jobs of a group back into a queue.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"queue": "emails", "count": 10}))]
pub struct UnfailRequest {
    /// Queue the jobs are put in (waiting, with their full retry budget).
    pub queue: QueueName,
    /// How many jobs to move, oldest failure first (default 25, between 1 and 1000).
    #[serde(
        default = "default_unfail_count",
        deserialize_with = "crate::model::wire::whole"
    )]
    #[schema(default = 25, minimum = 1, maximum = 1000)]
    pub count: u32,
}

fn default_unfail_count() -> u32 {
    25
}

/// What an unfail did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"moved": 3}))]
pub struct UnfailResult {
    /// Jobs moved back to the queue (0 for an empty or unknown group).
    pub moved: i64,
}

/// Every configuration option with its value: the defaults overlaid with every stored
/// option. Numeric options are numbers; other options are the text stored.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(example = json!({
    "application": "qless", "heartbeat": 60, "grace-period": 10, "stats-history": 30,
    "histogram-history": 7, "jobs-history-count": 50000, "jobs-history": 604800,
    "emails-max-concurrency": 4
}))]
pub struct ConfigOptions(pub BTreeMap<String, Value>);

/// One configuration option and its effective value (stored, else the default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"option": "heartbeat", "value": 60}))]
pub struct ConfigOption {
    /// Option name.
    pub option: String,
    /// A number for numeric options, else the text stored.
    pub value: Value,
}

/// The new value of a configuration option.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"value": 30}))]
pub struct ConfigOptionValue {
    /// Stored as its text (`30`, `qless`, `true`).
    pub value: ConfigScalar,
}

/// `?custom=` of the requests that write an option.
#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ConfigWriteQuery {
    /// `true`: the option is one of your own, which qlessd does not know (a qless
    /// client may keep its own settings there); its value is stored as given. Without
    /// it, an option qlessd does not know is refused, so a typo is not stored silently.
    #[serde(default)]
    pub custom: bool,
}

/// A configuration value: a string, a number or a boolean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ConfigScalar {
    /// Stored as given.
    Text(String),
    /// Stored in its shortest decimal form (`30`, `0.5`).
    Number(f64),
    /// Stored as `true` or `false`.
    Flag(bool),
}

impl ConfigScalar {
    /// The text the script stores.
    pub fn to_text(&self) -> String {
        match self {
            ConfigScalar::Text(text) => text.clone(),
            ConfigScalar::Number(number) => number.to_string(),
            ConfigScalar::Flag(flag) => flag.to_string(),
        }
    }
}
