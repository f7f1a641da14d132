//! Queue commands (`lua/queue.lua`): listings, counts, pausing, statistics, failure
//! groups, and the upkeep: the sweep and the move of qlessd's own keys out of the
//! plain `ql:` prefix (`migrate`, `lua/extra.lua`).

use std::collections::BTreeMap;

use super::reply::{self, Args};
use super::{Error, Qless};
use crate::model::{JidPage, QueueCounts, QueueStats, SweepReport};

/// The per-queue listings of `jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Running,
    Stalled,
    Scheduled,
    Depends,
    Recurring,
}

impl Listing {
    /// The state word the script expects.
    pub fn as_str(self) -> &'static str {
        match self {
            Listing::Running => "running",
            Listing::Stalled => "stalled",
            Listing::Scheduled => "scheduled",
            Listing::Depends => "depends",
            Listing::Recurring => "recurring",
        }
    }
}

impl Qless {
    /// `queues.ext`: counts (with `throttled`) for every known queue, oldest first.
    pub async fn queues(&self, now: f64) -> Result<Vec<QueueCounts>, Error> {
        reply::json_vec(self.call("queues.ext", now, &[]).await?)
    }

    /// `queues.oldest`: for each queue with a waiting job, when its job next in line
    /// was put (seconds since the epoch).
    pub async fn oldest_waiting(&self, now: f64) -> Result<BTreeMap<String, f64>, Error> {
        let times: BTreeMap<String, String> =
            reply::json(self.call("queues.oldest", now, &[]).await?)?;
        Ok(times
            .into_iter()
            .filter_map(|(queue, time)| Some((queue, time.parse().ok()?)))
            .collect())
    }

    /// `queues.ext Q`: counts for one queue (all zero if it is unknown).
    pub async fn queue(&self, now: f64, queue: &str) -> Result<QueueCounts, Error> {
        reply::json(self.call("queues.ext", now, &[queue.to_owned()]).await?)
    }

    /// `length`: running + waiting + scheduled jobs of a queue.
    pub async fn length(&self, now: f64, queue: &str) -> Result<i64, Error> {
        reply::integer(self.call("length", now, &[queue.to_owned()]).await?)
    }

    /// `jobs <state> Q`: a page of jids of one queue in one state.
    pub async fn jobs(
        &self,
        now: f64,
        listing: Listing,
        queue: &str,
        offset: u32,
        count: u32,
    ) -> Result<Vec<String>, Error> {
        let args = Args::new()
            .arg(listing.as_str())
            .arg(queue)
            .arg(offset)
            .arg(count)
            .into_vec();
        reply::strings(self.call("jobs", now, args).await?)
    }

    /// `jobs.waiting`: a page of waiting jids in pop order (no side effects, unlike
    /// `peek`).
    pub async fn jobs_waiting(
        &self,
        now: f64,
        queue: &str,
        offset: u32,
        count: u32,
    ) -> Result<Vec<String>, Error> {
        let args = Args::new().arg(queue).arg(offset).arg(count).into_vec();
        reply::strings(self.call("jobs.waiting", now, args).await?)
    }

    /// `jobs complete`: a page of completed jids, newest first.
    pub async fn jobs_complete(
        &self,
        now: f64,
        offset: u32,
        count: u32,
    ) -> Result<Vec<String>, Error> {
        let args = Args::new()
            .arg("complete")
            .arg(offset)
            .arg(count)
            .into_vec();
        reply::strings(self.call("jobs", now, args).await?)
    }

    /// `pause`: paused queues pop nothing.
    pub async fn pause(&self, now: f64, queues: &[String]) -> Result<(), Error> {
        reply::nothing(self.call("pause", now, queues).await?)
    }

    /// `unpause`.
    pub async fn unpause(&self, now: f64, queues: &[String]) -> Result<(), Error> {
        reply::nothing(self.call("unpause", now, queues).await?)
    }

    /// `queue.forget`: removes queues from the registry (their jobs stay).
    pub async fn queue_forget(&self, now: f64, queues: &[String]) -> Result<(), Error> {
        reply::nothing(self.call("queue.forget", now, queues).await?)
    }

    /// `failed`: how many jobs each failure group holds.
    pub async fn failed(&self, now: f64) -> Result<BTreeMap<String, i64>, Error> {
        let value = self.call("failed", now, &[]).await?;
        let text = reply::string(value)?;
        serde_json::from_str(&text).map_err(|err| Error::reply(format!("{err}: {text}")))
    }

    /// `failed G`: a page of one group's jids, newest failure first.
    pub async fn failed_group(
        &self,
        now: f64,
        group: &str,
        start: u32,
        limit: u32,
    ) -> Result<JidPage, Error> {
        let args = Args::new().arg(group).arg(start).arg(limit).into_vec();
        reply::json(self.call("failed", now, args).await?)
    }

    /// `unfail`: moves the oldest `count` jobs of a group back to `queue`.
    pub async fn unfail(
        &self,
        now: f64,
        queue: &str,
        group: &str,
        count: u32,
    ) -> Result<i64, Error> {
        let args = Args::new().arg(queue).arg(group).arg(count).into_vec();
        reply::integer(self.call("unfail", now, args).await?)
    }

    /// `stats`: wait/run statistics for the day containing `date`.
    pub async fn stats(&self, now: f64, queue: &str, date: f64) -> Result<QueueStats, Error> {
        let args = Args::new().arg(queue).arg(date).into_vec();
        reply::json(self.call("stats", now, args).await?)
    }

    /// `sweep`: promotes due jobs, spawns due recurring children, notifies and
    /// announces expired locks, without leasing anything, on the queues due by `now`
    /// and on `scan` queues from rank `cursor` on (the slow pass).
    pub async fn sweep(
        &self,
        now: f64,
        limit: u32,
        scan: u32,
        cursor: u64,
    ) -> Result<SweepReport, Error> {
        let args = Args::new().arg(limit).arg(scan).arg(cursor).into_vec();
        reply::json(self.call("sweep", now, args).await?)
    }

    /// `migrate`, to the end: moves qlessd's own keys of the plain prefix from their
    /// names of before (under `ql:`) to `qlessd:`, and returns how many keys it moved.
    /// Always the families an index names (due times, cron ticks, throttles), which a
    /// gateway of the older version may still write during an upgrade; with `scan`
    /// also a full pass over the keys under `ql:` unless one was done before
    /// (`MIGRATE_SCAN` keys a step, each step one atomic call). Nothing to do in a
    /// namespace.
    pub async fn migrate(&self, now: f64, scan: bool) -> Result<i64, Error> {
        let mut cursor = "0".to_owned();
        let mut moved = 0;
        loop {
            let args = if scan {
                vec![cursor, MIGRATE_SCAN.to_string()]
            } else {
                Vec::new()
            };
            let reply = self.call("migrate", now, args).await?;
            let (next, count): (String, i64) =
                redis::from_redis_value(reply).map_err(Error::reply)?;
            moved += count;
            if next == "0" {
                return Ok(moved);
            }
            cursor = next;
        }
    }
}

/// Keys one step of [`Qless::migrate`]'s pass looks at (SCAN's COUNT): a few
/// milliseconds of Redis time, so other clients are not held up for long.
const MIGRATE_SCAN: u32 = 2000;
