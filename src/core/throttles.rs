//! Throttle commands (`lua/throttle.lua`, extension): limits shared by the jobs that
//! name them.

use super::reply::{self, Args};
use super::{Error, Qless};
use crate::model::Throttle;

/// The limits of one throttle; 0 means "no such limit".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThrottleLimits {
    /// Most jobs holding it at once.
    pub maximum: u64,
    /// Most leases per `rate_seconds`.
    pub rate_jobs: u64,
    pub rate_seconds: f64,
}

impl Qless {
    /// `throttle.set`: sets (replaces) a throttle's limits; waiting jobs that now
    /// have room go back to their queues.
    pub async fn throttle_set(
        &self,
        now: f64,
        name: &str,
        limits: ThrottleLimits,
    ) -> Result<(), Error> {
        let args = Args::new()
            .arg(name)
            .arg(limits.maximum)
            .arg(limits.rate_jobs)
            .arg(limits.rate_seconds)
            .into_vec();
        reply::integer(self.call("throttle.set", now, args).await?).map(|_| ())
    }

    /// `throttle.list`: the throttles with limits, by name, `count` from `offset`.
    pub async fn throttle_list(
        &self,
        now: f64,
        offset: u32,
        count: u32,
    ) -> Result<Vec<Throttle>, Error> {
        let args = [offset.to_string(), count.to_string()];
        reply::json_vec(self.call("throttle.list", now, &args).await?)
    }

    /// `throttle.get`: a throttle's limits, holders and waiting jobs, or `None`.
    pub async fn throttle_get(&self, now: f64, name: &str) -> Result<Option<Throttle>, Error> {
        reply::optional_json(self.call("throttle.get", now, &[name.to_owned()]).await?)
    }

    /// `throttle.delete`: removes a throttle's limits; true when it had some.
    pub async fn throttle_delete(&self, now: f64, name: &str) -> Result<bool, Error> {
        Ok(reply::integer(
            self.call("throttle.delete", now, &[name.to_owned()])
                .await?,
        )? == 1)
    }
}
