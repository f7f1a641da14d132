//! The jobs leased through this gateway, remembered for their run time at
//! completion (`qless_job_run_seconds`): bounded, and let go of when a job ends
//! anywhere, by age, or as the oldest of a full map (counted in
//! `qless_leased_jobs_evicted_total`), so that recording never stops.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::{Hasher, QueueSeries};

/// A job leased through this gateway: its queue's series, when it was popped (the
/// script's time, seconds) and its place in [`Leased::order`].
#[derive(Debug)]
pub(super) struct Lease {
    pub(super) series: Arc<QueueSeries>,
    pub(super) at: f64,
    seq: u64,
    /// When the script announced that the job ended (another gateway or client ended
    /// it, or this one did and its own answer is still on its way): the lease is kept
    /// [`ENDED_GRACE`] longer, for that answer.
    ended: Option<Instant>,
}

/// The jobs leased through this gateway and not yet known to have ended, by
/// namespace then jid (two namespaces may hold jobs of the same jid), for the run time
/// at completion. A lease leaves when this gateway ends the job, when the script
/// announces that the job ended anywhere (`completed`, `advanced`, `failed`,
/// `canceled` on the `log` channel, which every gateway hears), or when it is older
/// than [`LEASED_MAX_AGE`]; when `capacity` leases are held, a new one takes the place
/// of the oldest (counted in `qless_leased_jobs_evicted_total`). So the map never
/// fills up for good: every pop is timed.
#[derive(Debug)]
pub(super) struct Leased {
    by_namespace: HashMap<String, LeasesOf, Hasher>,
    /// Every lease by age (the order of the pops): sequence number to its namespace
    /// and jid, so the oldest is found without a scan.
    order: BTreeMap<u64, (Arc<str>, Arc<str>)>,
    /// Leases announced ended, oldest first, with their sequence numbers: each
    /// leaves once [`ENDED_GRACE`] has passed, unless it left or was leased anew
    /// before.
    pub(super) ending: VecDeque<(Instant, u64)>,
    next_seq: u64,
    /// Most leases held at once.
    capacity: usize,
    /// Leases given up because `capacity` were held.
    evicted: Counter,
}

/// One namespace's leases, and the gauge of those not announced ended.
#[derive(Debug)]
struct LeasesOf {
    /// The namespace's name, shared by its entries in [`Leased::order`].
    name: Arc<str>,
    jobs: HashMap<Arc<str>, Lease, Hasher>,
    /// How many of `jobs` are announced ended.
    ended: usize,
    live: Gauge,
}

impl LeasesOf {
    fn update_gauge(&self) {
        self.live.set((self.jobs.len() - self.ended) as i64);
    }
}

impl Leased {
    pub(super) fn new(capacity: usize, evicted: Counter) -> Self {
        Leased {
            by_namespace: HashMap::default(),
            order: BTreeMap::new(),
            ending: VecDeque::new(),
            next_seq: 0,
            capacity: capacity.max(1),
            evicted,
        }
    }

    /// How many leases are held, ended or not.
    /// Whether the job `jid` of `namespace` is held.
    #[cfg(test)]
    pub(super) fn holds(&self, namespace: &str, jid: &str) -> bool {
        self.by_namespace
            .get(namespace)
            .is_some_and(|leases| leases.jobs.contains_key(jid))
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// Remembers a job leased at `at` (its pop's time), in place of an older lease of
    /// the same job; first drops the leases past their age or their grace, and the
    /// oldest one when the map is full.
    pub(super) fn insert(
        &mut self,
        jid: &str,
        series: Arc<QueueSeries>,
        at: f64,
        gauge: impl FnOnce() -> Gauge,
    ) {
        let now = Instant::now();
        self.drop_ended(now);
        while let Some((_, (namespace, jid))) = self.order.first_key_value() {
            let expired = self
                .by_namespace
                .get(&**namespace)
                .and_then(|leases| leases.jobs.get(&**jid))
                .is_some_and(|lease| lease.at < at - LEASED_MAX_AGE);
            if !expired {
                break;
            }
            let (namespace, jid) = (namespace.clone(), jid.clone());
            self.remove(&namespace, &jid);
        }
        if self.remove(&series.namespace, jid).is_none()
            && self.len() >= self.capacity
            && let Some((_, (namespace, oldest))) = self.order.pop_first()
        {
            self.take(&namespace, &oldest);
            self.evicted.inc();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let jid: Arc<str> = Arc::from(jid);
        let leases = match self.by_namespace.get_mut(&series.namespace) {
            Some(leases) => leases,
            None => self
                .by_namespace
                .entry(series.namespace.clone())
                .or_insert_with(|| LeasesOf {
                    name: Arc::from(series.namespace.as_str()),
                    jobs: HashMap::default(),
                    ended: 0,
                    live: gauge(),
                }),
        };
        self.order.insert(seq, (leases.name.clone(), jid.clone()));
        let lease = Lease {
            series,
            at,
            seq,
            ended: None,
        };
        leases.jobs.insert(jid, lease);
        leases.update_gauge();
    }

    /// Forgets the job `jid` of `namespace`, returning its lease.
    pub(super) fn remove(&mut self, namespace: &str, jid: &str) -> Option<Lease> {
        let lease = self.take(namespace, jid)?;
        self.order.remove(&lease.seq);
        Some(lease)
    }

    /// Takes the lease out of its namespace's map (not out of `order`).
    fn take(&mut self, namespace: &str, jid: &str) -> Option<Lease> {
        let leases = self.by_namespace.get_mut(namespace)?;
        let lease = leases.jobs.remove(jid)?;
        if lease.ended.is_some() {
            leases.ended -= 1;
        }
        leases.update_gauge();
        Some(lease)
    }

    /// The script announced that the job `jid` of `namespace` ended: its lease leaves
    /// after [`ENDED_GRACE`] (if this gateway ended it, its own answer, arriving on
    /// another connection, may come after the announcement and still finds it).
    pub(super) fn ended(&mut self, namespace: &str, jid: &str) {
        let now = Instant::now();
        self.drop_ended(now);
        let Some(leases) = self.by_namespace.get_mut(namespace) else {
            return;
        };
        let Some(lease) = leases.jobs.get_mut(jid) else {
            return;
        };
        if lease.ended.is_none() {
            lease.ended = Some(now);
            let seq = lease.seq;
            leases.ended += 1;
            leases.update_gauge();
            self.ending.push_back((now, seq));
        }
    }

    /// Drops the leases announced ended more than [`ENDED_GRACE`] before `now`.
    fn drop_ended(&mut self, now: Instant) {
        while let Some(&(when, seq)) = self.ending.front() {
            if now.duration_since(when) < ENDED_GRACE {
                break;
            }
            self.ending.pop_front();
            // (Gone already, or leased anew since: another sequence number.)
            if let Some((namespace, jid)) = self.order.remove(&seq) {
                self.take(&namespace, &jid);
            }
        }
    }
}

/// Most jobs [`Metrics`] remembers the pop time of: past it, the oldest is given up.
pub(super) const LEASED_CAPACITY: usize = 100_000;

/// A lease older than this is given up (its job's end was not heard: the
/// subscription was down, say). Its run time, if it ends later, is not recorded; a run
/// that long is past the histogram's last bucket anyway.
pub(super) const LEASED_MAX_AGE: f64 = 86_400.0;

/// How long a lease announced ended stays, for this gateway's own answer to the call
/// that ended it: the announcement and the answer come on two connections, in either
/// order.
pub(super) const ENDED_GRACE: Duration = Duration::from_secs(5);
