//! Queues, their counts and statistics, and failure groups.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::wire;

/// How many jobs a queue holds in each state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "emails", "waiting": 12, "running": 3, "stalled": 0,
    "scheduled": 1, "depends": 0, "recurring": 1, "paused": false, "throttled": 0}))]
pub struct QueueCounts {
    /// Queue name.
    pub name: String,
    /// Ready to pop.
    pub waiting: i64,
    /// Leased with an unexpired lock.
    pub running: i64,
    /// Leased with an expired lock.
    pub stalled: i64,
    /// Delayed.
    pub scheduled: i64,
    /// Waiting on dependencies.
    pub depends: i64,
    /// Recurring templates attached to the queue.
    pub recurring: i64,
    /// Paused queues pop nothing.
    pub paused: bool,
    /// Waiting for room in a full throttle (state `waiting`, not counted in `waiting`).
    #[serde(default)]
    pub throttled: i64,
}

/// Wait or run time statistics of one queue for one day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TimingStats {
    /// Number of samples.
    pub count: i64,
    /// Mean, seconds.
    #[serde(deserialize_with = "wire::number")]
    pub mean: f64,
    /// Sample standard deviation, seconds.
    #[serde(deserialize_with = "wire::number")]
    pub std: f64,
    /// 148 buckets: seconds 0-59, minutes 1-59, hours 1-23, days 1-6.
    #[serde(deserialize_with = "wire::list")]
    pub histogram: Vec<i64>,
}

/// A queue's statistics for the day containing `date`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueStats {
    /// Lock-expiry notices sent that day.
    pub retries: i64,
    /// Jobs failed that day and still failed.
    pub failed: i64,
    /// Failures that day.
    pub failures: i64,
    /// Time from put (or delay end) to pop.
    pub wait: TimingStats,
    /// Time from pop to completion.
    pub run: TimingStats,
}

/// A page of jids with the total they were taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"total": 1, "jids": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f"]}))]
pub struct JidPage {
    /// How many jids there are in all.
    pub total: i64,
    /// This page, in the listing's order.
    // The script's reply calls it `jobs`.
    #[serde(deserialize_with = "wire::list", alias = "jobs")]
    pub jids: Vec<String>,
}

/// Result of the upkeep pass (`sweep`): what was done and when something is next due.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SweepReport {
    /// Scheduled jobs that became waiting.
    pub promoted: i64,
    /// Recurring children created.
    pub spawned: i64,
    /// Expired locks whose workers were notified.
    pub stalled: i64,
    /// Expired locks past their notice, announced as available to the next pop.
    #[serde(default)]
    pub expired: i64,
    /// Queues visited: those due, plus the slice of the slow pass.
    #[serde(default)]
    pub visited: i64,
    /// Queues registered in the namespace.
    #[serde(default)]
    pub queues: i64,
    /// Rank in the queue list where the next slice of the slow pass starts (0: the
    /// pass starts over).
    #[serde(default)]
    pub cursor: i64,
    /// Earliest time some queue is due (may be now or past when one sweep could not
    /// handle everything due); 0 when nothing is pending.
    #[serde(deserialize_with = "wire::number")]
    pub next: f64,
}

/// A failure group described: when the jobs it holds failed first and last, and the
/// most common message among its newest jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"group": "smtp-refused", "total": 1200, "first": 1764100000.5,
    "last": 1764103600.25, "message": "connection refused", "count": 97, "sampled": 100}))]
pub struct FailureSummary {
    /// The failure group.
    pub group: String,
    /// Jobs in the group.
    pub total: i64,
    /// When the oldest job in the group failed (Unix seconds); absent for an empty
    /// group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<f64>,
    /// When the newest job in the group failed (Unix seconds); absent for an empty
    /// group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<f64>,
    /// The most common failure message among the group's newest `sampled` jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many of the `sampled` jobs failed with `message`.
    pub count: i64,
    /// How many of the group's newest jobs were looked at for `message`: a bounded
    /// sample, so the answer costs the same for a group of any size.
    pub sampled: i64,
}

/// A page of a failure group's jids, newest failure first, with the group described:
/// when its jobs failed first and last, and its most common message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"total": 3, "jids": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f"],
    "first": 1764100000.0, "last": 1764103600.0, "message": "connection refused",
    "message_count": 2, "sampled": 3}))]
pub struct FailedJobs {
    /// How many jobs the group holds.
    pub total: i64,
    /// This page, newest failure first.
    pub jids: Vec<String>,
    /// When the group's oldest job failed (Unix seconds); absent for an empty group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<f64>,
    /// When the group's newest job failed (Unix seconds); absent for an empty group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<f64>,
    /// The most common failure message among the group's newest `sampled` jobs;
    /// absent for an empty group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many of the `sampled` jobs failed with `message`.
    pub message_count: i64,
    /// How many of the group's newest jobs `message` was counted over (at most 100:
    /// the answer costs the same for a group of any size).
    pub sampled: i64,
}

impl FailedJobs {
    /// A page of the group `summary` describes.
    pub fn new(page: JidPage, summary: Option<FailureSummary>) -> Self {
        let summary = summary.filter(|s| s.total > 0);
        FailedJobs {
            total: page.total,
            jids: page.jids,
            first: summary.as_ref().and_then(|s| s.first),
            last: summary.as_ref().and_then(|s| s.last),
            message_count: summary.as_ref().map_or(0, |s| s.count),
            sampled: summary.as_ref().map_or(0, |s| s.sampled),
            message: summary.and_then(|s| s.message),
        }
    }
}
