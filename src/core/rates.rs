//! What each queue did minute by minute (`lua/rates.lua`, extension): jobs put,
//! completed and failed, and the wait times of the jobs popped, over the last hour.
//! The script counts them as jobs move (one hash per queue and minute, expiring after
//! about an hour); `rates` reads them back.

use redis::Value;

use super::command::{Args, Command, Subject};
use super::{Error, Qless, reply};

/// Minutes the script keeps (and `rates` reads at most): the current one and the 59
/// before it.
pub const MINUTES: u32 = 60;

/// Buckets of the wait-time histogram, as the day's statistics have them: seconds
/// 0-59, minutes 1-59, hours 1-23, days 1-6 (the last also every longer wait).
const BUCKETS: usize = 148;

/// One minute of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minute {
    /// Unix time of the minute's first second.
    pub start: i64,
    /// Jobs put into the queue (puts and recurring spawns).
    pub put: u64,
    /// Jobs completed in it.
    pub completed: u64,
    /// Jobs failed in it (failed by their worker, or out of retries).
    pub failed: u64,
    /// The wait times of the jobs popped, counted per bucket ([`BUCKETS`]).
    pub waits: Vec<u64>,
}

impl Minute {
    /// Jobs popped (whose wait was counted).
    pub fn popped(&self) -> u64 {
        self.waits.iter().sum()
    }

    /// The wait time (seconds) under which a fraction `q` (0 to 1) of the jobs popped
    /// waited, as the lower bound of the bucket it falls in (so `12` means 12 to 13
    /// seconds, `120` two to three minutes); `None` without jobs popped.
    pub fn wait_quantile(&self, q: f64) -> Option<u64> {
        let popped = self.popped();
        if popped == 0 {
            return None;
        }
        // The rank of the sample that holds the quantile (1-based, nearest rank).
        let rank = ((q * popped as f64).ceil() as u64).clamp(1, popped);
        let mut seen = 0;
        for (i, &n) in self.waits.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_seconds(i));
            }
        }
        None
    }
}

/// The lower bound, in seconds, of histogram bucket `i`.
fn bucket_seconds(i: usize) -> u64 {
    let i = i as u64;
    match i {
        0..=59 => i,
        60..=118 => (i - 59) * 60,
        119..=141 => (i - 118) * 3600,
        _ => (i - 141) * 86_400,
    }
}

/// The bucket a field of the script's hash names (`s0`..`s59`, `m1`..`m59`, `h1`..`h23`,
/// `d1`..`d6`), if it is one.
fn bucket_of(field: &str) -> Option<usize> {
    let (unit, number) = field.split_at_checked(1)?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: usize = number.parse().ok()?;
    match (unit, n) {
        ("s", 0..=59) => Some(n),
        ("m", 1..=59) => Some(59 + n),
        ("h", 1..=23) => Some(118 + n),
        ("d", 1..=6) => Some(141 + n),
        _ => None,
    }
}

/// `rates`: the last `minutes` minutes of a queue, oldest first.
struct Rates<'a> {
    queue: &'a str,
    minutes: u32,
}

impl Command for Rates<'_> {
    type Output = Vec<Minute>;

    fn name(&self) -> &'static str {
        "rates"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.queue).push(self.minutes);
    }

    fn decode(&self, reply: Value) -> Result<Vec<Minute>, Error> {
        let Value::Array(items) = reply else {
            return Err(Error::reply(format!("expected an array, got {reply:?}")));
        };
        let mut minutes = Vec::with_capacity(items.len() / 2);
        let mut items = items.into_iter();
        while let (Some(start), Some(fields)) = (items.next(), items.next()) {
            let start = reply::string(start)?
                .parse()
                .map_err(|err| Error::reply(format!("a minute: {err}")))?;
            let mut minute = Minute {
                start,
                put: 0,
                completed: 0,
                failed: 0,
                waits: vec![0; BUCKETS],
            };
            let fields = reply::strings(fields)?;
            for pair in fields.chunks_exact(2) {
                // (A count is an integer HINCRBY made; anything else reads as none.)
                let n = pair[1].parse().unwrap_or(0);
                match pair[0].as_str() {
                    "put" => minute.put = n,
                    "done" => minute.completed = n,
                    "failed" => minute.failed = n,
                    field => {
                        if let Some(i) = bucket_of(field) {
                            minute.waits[i] = n;
                        }
                    }
                }
            }
            minutes.push(minute);
        }
        Ok(minutes)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::queue(self.queue)
    }
}

impl Qless {
    /// `rates`: what `queue` did in each of the last `minutes` minutes (1 to
    /// [`MINUTES`]) up to the one of `now`, oldest first; a minute without anything
    /// is all zeros.
    pub async fn rates(&self, now: f64, queue: &str, minutes: u32) -> Result<Vec<Minute>, Error> {
        self.run(now, &Rates { queue, minutes }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(waits: &[(usize, u64)]) -> Minute {
        let mut minute = Minute {
            start: 0,
            put: 0,
            completed: 0,
            failed: 0,
            waits: vec![0; BUCKETS],
        };
        for &(i, n) in waits {
            minute.waits[i] = n;
        }
        minute
    }

    #[test]
    fn bucket_fields_are_read_as_the_day_statistics_name_them() {
        assert_eq!(bucket_of("s0"), Some(0));
        assert_eq!(bucket_of("s59"), Some(59));
        assert_eq!(bucket_of("m1"), Some(60));
        assert_eq!(bucket_of("h1"), Some(119));
        assert_eq!(bucket_of("d6"), Some(147));
        for other in ["put", "done", "failed", "s60", "m0", "d7", "s", "s-1", "x1"] {
            assert_eq!(bucket_of(other), None, "{other}");
        }
        assert_eq!(bucket_seconds(12), 12);
        assert_eq!(bucket_seconds(61), 120);
        assert_eq!(bucket_seconds(120), 7200);
        assert_eq!(bucket_seconds(147), 6 * 86_400);
    }

    #[test]
    fn quantiles_are_the_bucket_of_the_nearest_rank() {
        assert_eq!(minute(&[]).wait_quantile(0.5), None);
        // 10 jobs: 5 waited 1 s, 4 waited 3 s, 1 waited 2 minutes.
        let m = minute(&[(1, 5), (3, 4), (61, 1)]);
        assert_eq!(m.popped(), 10);
        assert_eq!(m.wait_quantile(0.5), Some(1));
        assert_eq!(m.wait_quantile(0.6), Some(3));
        assert_eq!(m.wait_quantile(0.95), Some(120));
        assert_eq!(m.wait_quantile(0.0), Some(1));
        assert_eq!(minute(&[(7, 1)]).wait_quantile(0.95), Some(7));
    }
}
