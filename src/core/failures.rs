//! Failure groups described (`lua/failures.lua`, extension): when the jobs of each
//! group failed first and last, and its most common message among its newest jobs.

use redis::Value;

use super::command::{Args, Command};
use super::{Error, Qless, reply};
use crate::model::FailureSummary;

/// `failed.summary`: each of `groups` described, in order.
struct FailedSummary<'a> {
    groups: &'a [String],
    sample: u32,
}

impl Command for FailedSummary<'_> {
    type Output = Vec<FailureSummary>;

    fn name(&self) -> &'static str {
        "failed.summary"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.sample).extend(self.groups);
    }

    fn decode(&self, reply: Value) -> Result<Vec<FailureSummary>, Error> {
        reply::json_vec(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

impl Qless {
    /// `failed.summary`: each of `groups` described (an unknown or empty group has
    /// total 0), its most common message counted over its newest `sample` jobs (1 to
    /// 1,000).
    pub async fn failed_summary(
        &self,
        now: f64,
        groups: &[String],
        sample: u32,
    ) -> Result<Vec<FailureSummary>, Error> {
        self.run(now, &FailedSummary { groups, sample }).await
    }
}
