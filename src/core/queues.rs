//! Queue commands (`lua/queue.lua`): listings, counts, pausing, statistics, failure
//! groups, and the upkeep: the sweep and the move of qlessd's own keys out of the
//! plain `ql:` prefix (`migrate`, `lua/extra.lua`).

use std::collections::BTreeMap;

use redis::Value;

use super::command::{Args, Command, Subject};
use super::reply;
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

/// `queues.ext`: counts (with `throttled`) for every known queue, oldest first.
struct AllQueues;

impl Command for AllQueues {
    type Output = Vec<QueueCounts>;

    fn name(&self) -> &'static str {
        "queues.ext"
    }

    fn encode(&self, _: &mut Args) {}

    fn decode(&self, reply: Value) -> Result<Vec<QueueCounts>, Error> {
        reply::json_vec(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `queues.ext Q`: counts for one queue (all zero if it is unknown).
struct OneQueue<'a> {
    queue: &'a str,
}

impl Command for OneQueue<'_> {
    type Output = QueueCounts;

    fn name(&self) -> &'static str {
        "queues.ext"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue);
    }

    fn decode(&self, reply: Value) -> Result<QueueCounts, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `queues.oldest`: for each queue with a waiting job, when its job next in line was
/// put (seconds since the epoch).
struct OldestWaiting;

impl Command for OldestWaiting {
    type Output = BTreeMap<String, f64>;

    fn name(&self) -> &'static str {
        "queues.oldest"
    }

    fn encode(&self, _: &mut Args) {}

    fn decode(&self, reply: Value) -> Result<BTreeMap<String, f64>, Error> {
        // (The times come as text, in the script's own number format.)
        let times: BTreeMap<String, String> = reply::json(reply)?;
        Ok(times
            .into_iter()
            .filter_map(|(queue, time)| Some((queue, time.parse().ok()?)))
            .collect())
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `length`: running + waiting + scheduled jobs of a queue.
struct Length<'a> {
    queue: &'a str,
}

impl Command for Length<'_> {
    type Output = i64;

    fn name(&self) -> &'static str {
        "length"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue);
    }

    fn decode(&self, reply: Value) -> Result<i64, Error> {
        reply::integer(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `jobs`: a page of jids, of one queue in one state or of completed jobs.
enum Jobs<'a> {
    /// `jobs <state> Q offset count`.
    InQueue {
        listing: Listing,
        queue: &'a str,
        offset: u32,
        count: u32,
    },
    /// `jobs complete offset count`: newest first.
    Complete { offset: u32, count: u32 },
}

impl Command for Jobs<'_> {
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "jobs"
    }

    fn encode(&self, args: &mut Args) {
        match *self {
            Jobs::InQueue {
                listing,
                queue,
                offset,
                count,
            } => args
                .push(listing.as_str())
                .push(queue)
                .push(offset)
                .push(count),
            Jobs::Complete { offset, count } => args.push("complete").push(offset).push(count),
        };
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        match *self {
            Jobs::InQueue { queue, .. } => Subject::queue(queue),
            Jobs::Complete { .. } => Subject::default(),
        }
    }
}

/// `jobs.waiting`: a page of waiting jids in pop order (no side effects, unlike
/// `peek`).
struct JobsWaiting<'a> {
    queue: &'a str,
    offset: u32,
    count: u32,
}

impl Command for JobsWaiting<'_> {
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        "jobs.waiting"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.offset).push(self.count);
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::strings(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `pause` / `unpause` / `queue.forget`: a change to how queues are served.
struct QueuesChange<'a> {
    change: Change,
    queues: &'a [String],
}

#[derive(Clone, Copy)]
enum Change {
    /// Paused queues pop nothing.
    Pause,
    Unpause,
    /// Removed from the registry (their jobs stay).
    Forget,
}

impl Command for QueuesChange<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        match self.change {
            Change::Pause => "pause",
            Change::Unpause => "unpause",
            Change::Forget => "queue.forget",
        }
    }

    fn encode(&self, args: &mut Args) {
        args.extend(self.queues);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn only_deletes(&self) -> bool {
        matches!(self.change, Change::Forget)
    }

    fn subject(&self) -> Subject<'_> {
        match self.queues {
            [queue] => Subject::queue(queue),
            _ => Subject::default(),
        }
    }
}

/// `failed`: how many jobs each failure group holds.
struct FailedCounts;

impl Command for FailedCounts {
    type Output = BTreeMap<String, i64>;

    fn name(&self) -> &'static str {
        "failed"
    }

    fn encode(&self, _: &mut Args) {}

    fn decode(&self, reply: Value) -> Result<BTreeMap<String, i64>, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `failed G`: a page of one group's jids, newest failure first.
struct FailedGroup<'a> {
    group: &'a str,
    start: u32,
    limit: u32,
}

impl Command for FailedGroup<'_> {
    type Output = JidPage;

    fn name(&self) -> &'static str {
        "failed"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.group).push(self.start).push(self.limit);
    }

    fn decode(&self, reply: Value) -> Result<JidPage, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `unfail`: moves the oldest `count` jobs of a group back to `queue`; answers how
/// many moved.
struct Unfail<'a> {
    queue: &'a str,
    group: &'a str,
    count: u32,
}

impl Command for Unfail<'_> {
    type Output = i64;

    fn name(&self) -> &'static str {
        "unfail"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.group).push(self.count);
    }

    fn decode(&self, reply: Value) -> Result<i64, Error> {
        reply::integer(reply)
    }

    fn weight(&self) -> usize {
        self.count as usize
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `stats`: wait/run statistics for the day containing `date`.
struct Stats<'a> {
    queue: &'a str,
    date: f64,
}

impl Command for Stats<'_> {
    type Output = QueueStats;

    fn name(&self) -> &'static str {
        "stats"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.date);
    }

    fn decode(&self, reply: Value) -> Result<QueueStats, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

/// `sweep`: the upkeep pass (see [`Qless::sweep`]).
struct Sweep {
    limit: u32,
    scan: u32,
    cursor: u64,
}

impl Command for Sweep {
    type Output = SweepReport;

    fn name(&self) -> &'static str {
        "sweep"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.limit)
            .push(self.scan)
            .push(self.cursor as usize);
    }

    fn decode(&self, reply: Value) -> Result<SweepReport, Error> {
        reply::json(reply)
    }
}

impl Qless {
    /// `queues.ext`: counts (with `throttled`) for every known queue, oldest first.
    pub async fn queues(&self, now: f64) -> Result<Vec<QueueCounts>, Error> {
        self.run(now, &AllQueues).await
    }

    /// `queues.oldest`: for each queue with a waiting job, when its job next in line
    /// was put (seconds since the epoch).
    pub async fn oldest_waiting(&self, now: f64) -> Result<BTreeMap<String, f64>, Error> {
        self.run(now, &OldestWaiting).await
    }

    /// `queues.ext Q`: counts for one queue (all zero if it is unknown).
    pub async fn queue(&self, now: f64, queue: &str) -> Result<QueueCounts, Error> {
        self.run(now, &OneQueue { queue }).await
    }

    /// `length`: running + waiting + scheduled jobs of a queue.
    pub async fn length(&self, now: f64, queue: &str) -> Result<i64, Error> {
        self.run(now, &Length { queue }).await
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
        let jobs = Jobs::InQueue {
            listing,
            queue,
            offset,
            count,
        };
        self.run(now, &jobs).await
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
        let page = JobsWaiting {
            queue,
            offset,
            count,
        };
        self.run(now, &page).await
    }

    /// `jobs complete`: a page of completed jids, newest first.
    pub async fn jobs_complete(
        &self,
        now: f64,
        offset: u32,
        count: u32,
    ) -> Result<Vec<String>, Error> {
        self.run(now, &Jobs::Complete { offset, count }).await
    }

    /// `pause`: paused queues pop nothing.
    pub async fn pause(&self, now: f64, queues: &[String]) -> Result<(), Error> {
        let change = Change::Pause;
        self.run(now, &QueuesChange { change, queues }).await
    }

    /// `unpause`.
    pub async fn unpause(&self, now: f64, queues: &[String]) -> Result<(), Error> {
        let change = Change::Unpause;
        self.run(now, &QueuesChange { change, queues }).await
    }

    /// `queue.forget`: removes queues from the registry (their jobs stay).
    pub async fn queue_forget(&self, now: f64, queues: &[String]) -> Result<(), Error> {
        let change = Change::Forget;
        self.run(now, &QueuesChange { change, queues }).await
    }

    /// `failed`: how many jobs each failure group holds.
    pub async fn failed(&self, now: f64) -> Result<BTreeMap<String, i64>, Error> {
        self.run(now, &FailedCounts).await
    }

    /// `failed G`: a page of one group's jids, newest failure first.
    pub async fn failed_group(
        &self,
        now: f64,
        group: &str,
        start: u32,
        limit: u32,
    ) -> Result<JidPage, Error> {
        self.run(
            now,
            &FailedGroup {
                group,
                start,
                limit,
            },
        )
        .await
    }

    /// `unfail`: moves the oldest `count` jobs of a group back to `queue`.
    pub async fn unfail(
        &self,
        now: f64,
        queue: &str,
        group: &str,
        count: u32,
    ) -> Result<i64, Error> {
        self.run(
            now,
            &Unfail {
                queue,
                group,
                count,
            },
        )
        .await
    }

    /// `stats`: wait/run statistics for the day containing `date`.
    pub async fn stats(&self, now: f64, queue: &str, date: f64) -> Result<QueueStats, Error> {
        self.run(now, &Stats { queue, date }).await
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
        self.run(
            now,
            &Sweep {
                limit,
                scan,
                cursor,
            },
        )
        .await
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
            let step = Migrate {
                scan: scan.then_some(cursor.as_str()),
            };
            let (next, count) = self.run(now, &step).await?;
            moved += count;
            if next == "0" {
                return Ok(moved);
            }
            cursor = next;
        }
    }
}

/// One step of `migrate`: the indexed families, then, with a cursor, one SCAN step
/// of [`MIGRATE_SCAN`] keys; answers the next cursor (`0`: done) and the keys moved.
struct Migrate<'a> {
    scan: Option<&'a str>,
}

impl Command for Migrate<'_> {
    type Output = (String, i64);

    fn name(&self) -> &'static str {
        "migrate"
    }

    fn encode(&self, args: &mut Args) {
        if let Some(cursor) = self.scan {
            args.push(cursor).push(MIGRATE_SCAN);
        }
    }

    fn decode(&self, reply: Value) -> Result<(String, i64), Error> {
        redis::from_redis_value(reply).map_err(Error::reply)
    }
}

/// Keys one step of [`Qless::migrate`]'s pass looks at (SCAN's COUNT): a few
/// milliseconds of Redis time, so other clients are not held up for long.
const MIGRATE_SCAN: u32 = 2000;
