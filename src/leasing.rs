//! Leasing jobs to HTTP workers: long-poll pops and multi-queue selection.
//!
//! A pop that finds nothing can wait. Waiters queue up per Redis queue, oldest first.
//! The script itself announces every transition that makes jobs poppable (a put, a
//! retry, an unfail, released dependents, a promotion or spawn by the sweeper, a lock
//! handed over, an unpause, a freed concurrency or throttle slot...): one message per
//! queue and invocation on `<own prefix>available` (`qlessd:available` beside the plain
//! `ql:` prefix, whose channels are the protocol's), `{"queue":Q,"count":n}`. Every gateway
//! relays it ([`Leasing::listen`]) to the waiters of Q only, one waiter per job, so one
//! job is contended by one request rather than by a thundering herd, and a retry made
//! on another gateway, or by any client running this script, wakes a waiter here
//! within milliseconds.
//!
//! Each waiter still re-checks on its own every [`RECHECK`], as a slow safety net for
//! what no announcement covers: work written by clients running another script (stock
//! qless clients on the legacy prefix), and announcements lost while the gateway's
//! subscription was reconnecting (Redis pub/sub delivers at most once).
//!
//! Multi-queue pops plan, in Rust, the order in which queues are tried (ordered,
//! round-robin, or a weighted lottery) and hand the whole plan to one script call
//! (`pop.multi`), which skips queues it finds empty at no extra cost.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::clock::Clock;
use crate::core::events::EventBus;
use crate::core::{Error, Leased, Qless};
use crate::model::Job;

/// How often a waiter re-checks its queues even without a wake-up (the safety net of
/// the module docs: slow, since every transition this script makes is announced).
pub const RECHECK: Duration = Duration::from_secs(5);

/// Most (queue, max) pairs a plan sends to the script.
const MAX_PLAN: usize = 4096;

/// How queues are chosen by a multi-queue pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The first non-empty queue in the given order, then the next.
    Ordered,
    /// One job from each queue in turn.
    RoundRobin,
    /// A lottery by weight, redrawing among the rest when a drawn queue is empty.
    Weighted,
}

/// A queue of a multi-queue pop and its weight (used by [`Strategy::Weighted`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedQueue {
    pub name: String,
    pub weight: f64,
}

/// Small, fast, seedable generator (SplitMix64): the lottery needs uniform draws, not
/// cryptographic ones, and tests need to fix the seed.
#[derive(Debug)]
pub struct Rng(AtomicU64);

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        Rng(AtomicU64::new(seed))
    }

    /// Seeded from the clock.
    pub fn from_time() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Rng::seeded(nanos)
    }

    /// A uniform draw in `[0, 1)`.
    pub fn next_f64(&self) -> f64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Draws an index with probability proportional to its weight among `candidates`.
fn draw(rng: &Rng, queues: &[WeightedQueue], candidates: &[usize]) -> usize {
    let total: f64 = candidates.iter().map(|&i| queues[i].weight).sum();
    let mut ticket = rng.next_f64() * total;
    for &i in candidates {
        ticket -= queues[i].weight;
        if ticket < 0.0 {
            return i;
        }
    }
    *candidates.last().expect("at least one candidate")
}

/// The `(queue, max)` pairs the script tries in order for one multi-queue pop.
///
/// * ordered: each queue once, for up to `count` jobs;
/// * round-robin: rounds of one job per queue, starting at `cursor` so successive pops
///   rotate; queues found empty are skipped by the script;
/// * weighted: `count` lottery draws of one job each, then every queue in a lottery
///   order without replacement for whatever is left, so a drawn queue that turns out
///   empty is replaced by a draw among the rest.
pub fn plan(
    strategy: Strategy,
    queues: &[WeightedQueue],
    count: u32,
    cursor: usize,
    rng: &Rng,
) -> Vec<(String, u32)> {
    let n = queues.len();
    if n == 0 || count == 0 {
        return Vec::new();
    }
    let mut pairs = Vec::new();
    match strategy {
        Strategy::Ordered => {}
        Strategy::RoundRobin => {
            'rounds: for _ in 0..count {
                for k in 0..n {
                    if pairs.len() + n >= MAX_PLAN {
                        break 'rounds;
                    }
                    pairs.push((queues[(cursor + k) % n].name.clone(), 1));
                }
            }
        }
        Strategy::Weighted => {
            let all: Vec<usize> = (0..n).collect();
            for _ in 0..count.min((MAX_PLAN - n) as u32) {
                pairs.push((queues[draw(rng, queues, &all)].name.clone(), 1));
            }
        }
    }
    // The tail: every queue once for up to `count`, which is the whole plan when
    // ordered and the fallback otherwise.
    let mut order: Vec<usize> = (0..n).collect();
    match strategy {
        Strategy::Ordered => {}
        Strategy::RoundRobin => order.rotate_left(cursor % n),
        Strategy::Weighted => {
            let mut left = order;
            order = Vec::with_capacity(n);
            while !left.is_empty() {
                let chosen = draw(rng, queues, &left);
                left.retain(|&i| i != chosen);
                order.push(chosen);
            }
        }
    }
    pairs.extend(order.into_iter().map(|i| (queues[i].name.clone(), count)));
    pairs
}

const WAITING: u8 = 0;
const NOTIFIED: u8 = 1;
const GONE: u8 = 2;

/// One waiting request, possibly registered on several queues.
#[derive(Debug)]
struct Slot {
    state: AtomicU8,
    notify: Notify,
    /// How many jobs the request pops at once.
    count: u32,
    /// "A job is available" signals attributed to this request since it was woken.
    /// Signals go to an awake request until they cover its `count`, so a batch of
    /// puts wakes one request per `count` jobs instead of one per job.
    credits: AtomicU32,
}

impl Slot {
    fn new(count: u32) -> Self {
        Slot {
            state: AtomicU8::new(WAITING),
            notify: Notify::new(),
            count: count.max(1),
            credits: AtomicU32::new(0),
        }
    }

    /// Claims the wake-up for this slot; false if it was already woken or gone.
    fn wake(&self) -> bool {
        let claimed = self
            .state
            .compare_exchange(WAITING, NOTIFIED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if claimed {
            self.credits.fetch_add(1, Ordering::AcqRel);
            self.notify.notify_one();
        }
        claimed
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Takes one more signal if the request's pop can still absorb it.
    fn credit(&self) -> bool {
        self.credits
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                (c < self.count).then_some(c + 1)
            })
            .is_ok()
    }
}

/// The requests waiting on one queue, and those woken for it whose pop is pending.
#[derive(Debug, Default)]
struct Line {
    waiting: VecDeque<Arc<Slot>>,
    awake: Vec<Arc<Slot>>,
}

/// A request's place in the lines; leaving them (including when the request is
/// dropped because the client disconnected) passes on signals it did not use.
struct Registration<'a> {
    leasing: &'a Leasing,
    slot: Arc<Slot>,
    queues: &'a [String],
    /// Signals already accounted for by a completed pop.
    settled: u32,
}

impl Registration<'_> {
    /// Signals that arrived since the last pop was accounted for.
    fn unsettled(&self) -> u32 {
        self.slot
            .credits
            .load(Ordering::Acquire)
            .saturating_sub(self.settled)
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.slot.state.store(GONE, Ordering::Release);
        // Jobs announced to this request after its last pop may still be waiting.
        for _ in 0..self.unsettled() {
            for queue in self.queues {
                let _ = self.leasing.job_available(queue);
            }
        }
    }
}

/// The process-wide cap on long polls waiting at once (`--max-long-polls`), shared by
/// every namespace's [`Leasing`]: a waiting pop holds its connection, so without a cap
/// waiters could hold every connection `--max-connections` allows and lock out the
/// puts that would feed them.
#[derive(Debug)]
pub struct LongPolls {
    waiting: AtomicUsize,
    cap: usize,
}

impl LongPolls {
    /// At most `cap` long polls wait at once.
    pub fn new(cap: usize) -> Self {
        LongPolls {
            waiting: AtomicUsize::new(0),
            cap,
        }
    }

    /// A place for one more waiting pop, or `None` at the cap.
    fn enter(&self) -> Option<LongPoll<'_>> {
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                (waiting < self.cap).then_some(waiting + 1)
            })
            .ok()
            .map(|_| LongPoll(self))
    }
}

/// One waiting pop's place under the cap, given back when dropped.
struct LongPoll<'a>(&'a LongPolls);

impl Drop for LongPoll<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Leasing service shared by the pop handlers.
#[derive(Debug)]
pub struct Leasing {
    qless: Qless,
    clock: Clock,
    long_polls: Arc<LongPolls>,
    lines: Mutex<HashMap<String, Line>>,
    rng: Rng,
    cursor: AtomicUsize,
    closing: AtomicBool,
}

impl Leasing {
    /// Leases from `qless`'s namespace; its long polls count against `long_polls`.
    pub fn new(qless: Qless, clock: Clock, long_polls: Arc<LongPolls>) -> Self {
        Leasing {
            qless,
            clock,
            long_polls,
            lines: Mutex::new(HashMap::new()),
            rng: Rng::from_time(),
            cursor: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
        }
    }

    /// Ends every wait at once (the server is shutting down): waiting pops answer
    /// with what they have, so graceful shutdown is not held up by long polls.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.wake_all();
    }

    /// Whether shutdown began ([`Leasing::close`]): push deliveries lease nothing more.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// `count` jobs became available in `queue`: each is credited to a woken request
    /// whose pop can still take it, or else wakes the oldest waiting request.
    pub fn jobs_available(&self, queue: &str, count: u64) {
        for _ in 0..count {
            if !self.job_available(queue) {
                return;
            }
        }
    }

    /// A job became available in `queue`: credit it to a woken request whose pop can
    /// still take it, or else wake the oldest waiting request. False when nobody is
    /// left to tell (more jobs would change nothing).
    fn job_available(&self, queue: &str) -> bool {
        let mut lines = self.lines.lock().expect("waiters lock");
        let Some(line) = lines.get_mut(queue) else {
            return false;
        };
        line.awake.retain(|slot| slot.state() == NOTIFIED);
        if line.awake.iter().any(|slot| slot.credit()) {
            return true;
        }
        let mut told = false;
        while let Some(slot) = line.waiting.pop_front() {
            if slot.wake() {
                line.awake.push(slot);
                told = true;
                break;
            }
        }
        if line.waiting.is_empty() && line.awake.is_empty() {
            lines.remove(queue);
        }
        told
    }

    /// Wakes every waiter (shutting down, or announcements may have been missed: they
    /// re-check their queues).
    fn wake_all(&self) {
        let mut lines = self.lines.lock().expect("waiters lock");
        for (_, line) in lines.drain() {
            for slot in line.waiting {
                slot.wake();
            }
        }
    }

    /// How many requests are waiting (for tests and metrics).
    pub fn waiting(&self) -> usize {
        let lines = self.lines.lock().expect("waiters lock");
        let mut seen: Vec<*const Slot> = lines
            .values()
            .flat_map(|line| line.waiting.iter())
            .filter(|slot| slot.state() == WAITING)
            .map(Arc::as_ptr)
            .collect();
        seen.sort();
        seen.dedup();
        seen.len()
    }

    fn register<'a>(&'a self, queues: &'a [String], count: u32) -> Registration<'a> {
        let slot = Arc::new(Slot::new(count));
        let mut lines = self.lines.lock().expect("waiters lock");
        for queue in queues {
            let line = lines.entry(queue.clone()).or_default();
            line.waiting.retain(|slot| slot.state() == WAITING);
            line.waiting.push_back(slot.clone());
        }
        Registration {
            leasing: self,
            slot,
            queues,
            settled: 0,
        }
    }

    /// Relays the script's announcements (`available`) to the waiters of the queue
    /// they name. Should the relay fall behind the event stream, some announcements
    /// are lost: everyone re-checks.
    pub async fn listen(self: Arc<Self>, events: EventBus) {
        let mut receiver = events.subscribe_available();
        loop {
            match receiver.recv().await {
                Ok(event) if event.channel == "available" => self.on_available(&event.payload),
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => self.wake_all(),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    fn on_available(&self, payload: &str) {
        // With nobody waiting every announcement is a no-op: skip reading it. (A
        // request that starts waiting right after still sees the job: it registers,
        // then pops.)
        if self.lines.lock().expect("waiters lock").is_empty() {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Available<'a> {
            #[serde(borrow)]
            queue: Cow<'a, str>,
            count: u64,
        }
        match serde_json::from_str::<Available>(payload) {
            Ok(available) => self.jobs_available(&available.queue, available.count),
            Err(err) => tracing::warn!(%err, "unreadable announcement on the available channel"),
        }
    }

    /// Pops up to `count` jobs of `queue`, waiting up to `wait` for some to arrive.
    pub async fn pop(
        &self,
        queue: &str,
        worker: &str,
        count: u32,
        wait: Duration,
    ) -> Result<Vec<Job>, Error> {
        let queues = [queue.to_owned()];
        self.wait_for_jobs(&queues, count, wait, || {
            self.qless.pop(self.clock.now(), queue, worker, count)
        })
        .await
    }

    /// Leases jobs of the pushed `queue` for delivery (up to `max`, within the queue's
    /// concurrency and rate: `attempt` makes the `push.pop` call, with what the
    /// deliverer allows), waiting up to `wait` for some: the same waiters as a
    /// long-poll pop, woken by the same announcements.
    pub async fn lease_for_push<T, F, Fut>(
        &self,
        queue: &str,
        max: u32,
        wait: Duration,
        attempt: F,
    ) -> Result<Vec<T>, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Vec<T>, Error>>,
    {
        let queues = [queue.to_owned()];
        self.wait_for_jobs(&queues, max, wait, attempt).await
    }

    /// The jobs a worker leased while ending one (complete, fail or retry with `pop`):
    /// those already leased, or, when none were, up to `count` jobs of the same queue
    /// waited for up to `wait`, as a pop would.
    pub async fn after_end(
        &self,
        leased: Leased,
        worker: &str,
        count: u32,
        wait: Duration,
    ) -> Result<Vec<Job>, Error> {
        if !leased.jobs.is_empty() || wait.is_zero() {
            return Ok(leased.jobs);
        }
        self.pop(&leased.queue, worker, count, wait).await
    }

    /// Pops up to `count` jobs from several queues chosen by `strategy`, waiting up to
    /// `wait` when all of them are empty.
    pub async fn pop_multi(
        &self,
        queues: &[WeightedQueue],
        strategy: Strategy,
        worker: &str,
        count: u32,
        wait: Duration,
    ) -> Result<Vec<Job>, Error> {
        let names: Vec<String> = queues.iter().map(|q| q.name.clone()).collect();
        self.wait_for_jobs(&names, count, wait, || {
            let cursor = self.cursor.fetch_add(1, Ordering::Relaxed);
            let plan = plan(strategy, queues, count, cursor, &self.rng);
            async move {
                self.qless
                    .pop_multi(self.clock.now(), worker, count, &plan)
                    .await
            }
        })
        .await
    }

    /// Runs `attempt` until it returns jobs or `wait` has passed. The request is in
    /// the lines before each attempt, so a job announced while an attempt is in flight
    /// is never missed: the attempt is simply repeated. Past `--max-long-polls`, the
    /// attempt is made once and answered at once, whatever it found.
    async fn wait_for_jobs<T, F, Fut>(
        &self,
        queues: &[String],
        count: u32,
        wait: Duration,
        attempt: F,
    ) -> Result<Vec<T>, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Vec<T>, Error>>,
    {
        if wait.is_zero() {
            return attempt().await;
        }
        let Some(_place) = self.long_polls.enter() else {
            crate::metrics::METRICS.long_poll_cut_short();
            return attempt().await;
        };
        let deadline = tokio::time::Instant::now() + wait;
        let mut registration = self.register(queues, count);
        loop {
            let before = registration.slot.credits.load(Ordering::Acquire);
            let jobs = attempt().await?;
            registration.settled = before;
            let now = tokio::time::Instant::now();
            if !jobs.is_empty() || now >= deadline || self.closing.load(Ordering::Acquire) {
                return Ok(jobs);
            }
            if registration.unsettled() > 0 {
                // Announced while the attempt was in flight: try again at once.
                continue;
            }
            if registration.slot.state() != WAITING {
                // Woken, but another request got there first: back in line.
                registration.settled = registration.slot.credits.load(Ordering::Acquire);
                registration = self.register(queues, count);
                continue;
            }
            let recheck = (now + RECHECK).min(deadline);
            tokio::select! {
                _ = registration.slot.notify.notified() => {}
                _ = tokio::time::sleep_until(recheck) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(weights: &[(&str, f64)]) -> Vec<WeightedQueue> {
        weights
            .iter()
            .map(|(name, weight)| WeightedQueue {
                name: (*name).to_owned(),
                weight: *weight,
            })
            .collect()
    }

    #[test]
    fn ordered_plans_try_each_queue_in_the_given_order() {
        let plan = plan(
            Strategy::Ordered,
            &queues(&[("a", 1.0), ("b", 1.0)]),
            5,
            0,
            &Rng::seeded(1),
        );
        assert_eq!(plan, vec![("a".to_owned(), 5), ("b".to_owned(), 5)]);
    }

    #[test]
    fn round_robin_plans_take_one_per_queue_and_rotate_between_pops() {
        let qs = queues(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]);
        let first = plan(Strategy::RoundRobin, &qs, 2, 0, &Rng::seeded(1));
        let names: Vec<&str> = first.iter().map(|(q, _)| q.as_str()).collect();
        assert_eq!(&names[..6], ["a", "b", "c", "a", "b", "c"]);
        assert!(first[..6].iter().all(|(_, max)| *max == 1));
        let second = plan(Strategy::RoundRobin, &qs, 1, 1, &Rng::seeded(1));
        assert_eq!(second[0].0, "b", "the next pop starts at the next queue");
    }

    #[test]
    fn weighted_draws_follow_the_weights() {
        let qs = queues(&[("high", 6.0), ("mid", 3.0), ("low", 1.0)]);
        let rng = Rng::seeded(42);
        let mut wins: HashMap<String, usize> = HashMap::new();
        let draws = 20_000;
        for _ in 0..draws {
            let plan = plan(Strategy::Weighted, &qs, 1, 0, &rng);
            *wins.entry(plan[0].0.clone()).or_default() += 1;
        }
        for (name, weight) in [("high", 0.6), ("mid", 0.3), ("low", 0.1)] {
            let share = wins[name] as f64 / draws as f64;
            // Three standard deviations of a binomial share at n = 20,000 is < 0.011.
            assert!(
                (share - weight).abs() < 0.015,
                "{name}: {share} vs {weight}"
            );
        }
    }

    #[test]
    fn weighted_plans_fall_back_to_every_queue_so_none_is_starved() {
        let qs = queues(&[("big", 1000.0), ("tiny", 1.0)]);
        let rng = Rng::seeded(7);
        for _ in 0..100 {
            let plan = plan(Strategy::Weighted, &qs, 3, 0, &rng);
            let tail: Vec<&str> = plan[3..].iter().map(|(q, _)| q.as_str()).collect();
            assert_eq!(tail.len(), 2);
            assert!(tail.contains(&"tiny") && tail.contains(&"big"), "{plan:?}");
            assert!(plan[3..].iter().all(|(_, max)| *max == 3));
        }
    }

    #[test]
    fn the_generator_is_uniform_enough_and_repeatable() {
        let a = Rng::seeded(5);
        let b = Rng::seeded(5);
        let xs: Vec<f64> = (0..1000).map(|_| a.next_f64()).collect();
        let ys: Vec<f64> = (0..1000).map(|_| b.next_f64()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }
}
