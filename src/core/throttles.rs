//! Throttle commands (`lua/throttle.lua`, extension): limits shared by the jobs that
//! name them.

use redis::Value;

use super::command::{Args, Command};
use super::reply;
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

/// `throttle.set`: sets (replaces) a throttle's limits.
struct ThrottleSet<'a> {
    name: &'a str,
    limits: ThrottleLimits,
}

impl Command for ThrottleSet<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "throttle.set"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.name)
            .push(self.limits.maximum)
            .push(self.limits.rate_jobs)
            .push(self.limits.rate_seconds);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::integer(reply).map(|_| ())
    }
}

/// `throttle.list`: the throttles with limits, by name, `count` from `offset`.
struct ThrottleList {
    offset: u32,
    count: u32,
}

impl Command for ThrottleList {
    type Output = Vec<Throttle>;

    fn name(&self) -> &'static str {
        "throttle.list"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.offset).push(self.count);
    }

    fn decode(&self, reply: Value) -> Result<Vec<Throttle>, Error> {
        reply::json_vec(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `throttle.get`: a throttle's limits, holders and waiting jobs, or `None`.
struct ThrottleGet<'a> {
    name: &'a str,
}

impl Command for ThrottleGet<'_> {
    type Output = Option<Throttle>;

    fn name(&self) -> &'static str {
        "throttle.get"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.name);
    }

    fn decode(&self, reply: Value) -> Result<Option<Throttle>, Error> {
        reply::optional_json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `throttle.delete`: removes a throttle's limits; true when it had some.
struct ThrottleDelete<'a> {
    name: &'a str,
}

impl Command for ThrottleDelete<'_> {
    type Output = bool;

    fn name(&self) -> &'static str {
        "throttle.delete"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.name);
    }

    fn decode(&self, reply: Value) -> Result<bool, Error> {
        Ok(reply::integer(reply)? == 1)
    }
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
        self.run(now, &ThrottleSet { name, limits }).await
    }

    /// `throttle.list`: the throttles with limits, by name, `count` from `offset`.
    pub async fn throttle_list(
        &self,
        now: f64,
        offset: u32,
        count: u32,
    ) -> Result<Vec<Throttle>, Error> {
        self.run(now, &ThrottleList { offset, count }).await
    }

    /// `throttle.get`: a throttle's limits, holders and waiting jobs, or `None`.
    pub async fn throttle_get(&self, now: f64, name: &str) -> Result<Option<Throttle>, Error> {
        self.run(now, &ThrottleGet { name }).await
    }

    /// `throttle.delete`: removes a throttle's limits; true when it had some.
    pub async fn throttle_delete(&self, now: f64, name: &str) -> Result<bool, Error> {
        self.run(now, &ThrottleDelete { name }).await
    }
}
