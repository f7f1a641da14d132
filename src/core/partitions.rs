//! Fair-queue commands (`lua/partitions.lua`, extension): the limits of a queue's
//! partitions, and the partitions with jobs waiting.

use redis::Value;

use super::command::{Args, Command, Subject};
use super::reply;
use super::{Error, Qless};
use crate::model::QueuePartitions;

/// The limits of each partition of a queue; 0 means "no such limit".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PartitionLimits {
    /// Most jobs of one partition running at once.
    pub concurrency: u64,
    /// Most jobs of one partition started per `rate_seconds`.
    pub rate_jobs: u64,
    pub rate_seconds: f64,
}

/// `partitions.set`: sets (replaces) a queue's partition limits.
struct PartitionsSet<'a> {
    queue: &'a str,
    limits: PartitionLimits,
}

impl Command for PartitionsSet<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "partitions.set"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue)
            .push(self.limits.concurrency)
            .push(self.limits.rate_jobs)
            .push(self.limits.rate_seconds);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::integer(reply).map(|_| ())
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `partitions.get`: a page of a queue's partitions with jobs waiting, and its limits.
struct PartitionsGet<'a> {
    queue: &'a str,
    offset: u64,
    count: u32,
}

impl Command for PartitionsGet<'_> {
    type Output = QueuePartitions;

    fn name(&self) -> &'static str {
        "partitions.get"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.offset).push(self.count);
    }

    fn decode(&self, reply: Value) -> Result<QueuePartitions, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

impl Qless {
    /// `partitions.set`: sets (replaces) the limits of each partition of `queue`.
    pub async fn partitions_set(
        &self,
        now: f64,
        queue: &str,
        limits: PartitionLimits,
    ) -> Result<(), Error> {
        self.run(now, &PartitionsSet { queue, limits }).await
    }

    /// `partitions.get`: `count` of `queue`'s partitions with jobs waiting, from
    /// `offset` (the rotation's order, then the parked ones), and its limits.
    pub async fn partitions_get(
        &self,
        now: f64,
        queue: &str,
        offset: u64,
        count: u32,
    ) -> Result<QueuePartitions, Error> {
        self.run(
            now,
            &PartitionsGet {
                queue,
                offset,
                count,
            },
        )
        .await
    }
}
