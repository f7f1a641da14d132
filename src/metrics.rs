//! The process's Prometheus registry: the figures counted as things happen (served at
//! `/metrics` by `routes::metrics`, which adds those read from Redis at scrape time).
//!
//! Counted process-wide ([`METRICS`]): jobs put, popped, completed,
//!   failed, retried and timed out through this gateway, wait times seen at pop, HTTP
//!   request durations by route template, script-call latency and errors, group sizes,
//!   event-stream clients, sweeper runs, embedded Redis restarts. Each costs a few
//!   atomic operations: label values are `&'static str` or small integers, or, for a
//!   queue's series, found in [`QueueSeries`] by the names given, so a lookup
//!   allocates nothing once a series exists.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::model::Job;
use leased::{LEASED_CAPACITY, Leased};

mod leased;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueEvent {
    namespace: String,
    queue: String,
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    namespace: String,
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabel {
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PushLabels {
    namespace: String,
    queue: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: &'static str,
    route: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabel {
    command: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_buckets() -> Histogram {
    // 0.5 ms .. about 16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

fn job_seconds_buckets() -> Histogram {
    // 10 ms .. about a day.
    Histogram::new(exponential_buckets(0.01, 4.0, 12))
}

fn delivery_buckets() -> Histogram {
    // 5 ms .. about 25 minutes (a delivery may take up to 900 s).
    Histogram::new(exponential_buckets(0.005, 2.5, 14))
}

fn group_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 8))
}

/// The process-wide metrics.
pub struct Metrics {
    registry: Registry,
    jobs: Family<QueueEvent, Counter>,
    wait: HistogramFamily<QueueLabel>,
    run: HistogramFamily<QueueLabel>,
    http: HistogramFamily<HttpLabels>,
    redis_calls: HistogramFamily<CommandLabel>,
    redis_errors: Family<CommandLabel, Counter>,
    group_size: Histogram,
    event_streams: Gauge,
    sweeps: Counter,
    sweep_errors: Counter,
    sweep_seconds: Histogram,
    redis_restarts: Counter,
    spans_dropped: Counter,
    long_polls_cut_short: Counter,
    push_deliveries: Family<PushLabels, Counter>,
    push_seconds: HistogramFamily<QueueLabel>,
    push_in_flight: Gauge,
    /// Each queue's series, by namespace then queue.
    queues: parking_lot::RwLock<HashMap<String, QueuesOf, Hasher>>,
    /// Jobs popped through this gateway and not yet ended, for the run time at
    /// completion. Bounded: when full, the oldest is given up.
    leased: parking_lot::Mutex<Leased>,
    /// Per namespace, how many of them are not announced ended.
    leased_jobs: Family<NamespaceLabel, Gauge>,
}

/// The hasher of the maps keyed by names clients choose (queues, jids): seeded per
/// process, and several times faster than the standard library's SipHash on short
/// keys.
type Hasher = foldhash::quality::RandomState;

/// One namespace's queues' series, by queue.
type QueuesOf = HashMap<String, Arc<QueueSeries>, Hasher>;

/// The job events counted per queue (`qless_jobs_total`'s `event` label).
const EVENTS: [&str; 6] = [
    "put",
    "popped",
    "completed",
    "failed",
    "retried",
    "timed_out",
];

/// One queue's series, each made in its family the first time it is used (so a
/// scrape shows the same series as before there was this cache) and kept here.
/// prometheus-client's families are keyed by label sets that own their strings: a
/// lookup there costs two allocations and a SipHash of the labels, and a job is
/// counted five times on its way (put, popped, its wait, completed, its run time).
#[derive(Debug)]
struct QueueSeries {
    namespace: String,
    queue: String,
    events: [OnceLock<Counter>; EVENTS.len()],
    wait: OnceLock<Histogram>,
    run: OnceLock<Histogram>,
}

impl QueueSeries {
    fn label(&self) -> QueueLabel {
        QueueLabel {
            namespace: self.namespace.clone(),
            queue: self.queue.clone(),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The one set of process-wide metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        Self::with_leased_capacity(LEASED_CAPACITY)
    }

    /// The metrics, remembering the pop times of at most `capacity` jobs.
    fn with_leased_capacity(capacity: usize) -> Self {
        let mut registry = Registry::default();
        let jobs = Family::<QueueEvent, Counter>::default();
        registry.register(
            "qless_jobs",
            "Jobs put, popped, completed, failed, retried and timed out through this gateway, by namespace (empty: the plain ql: prefix) and queue",
            jobs.clone(),
        );
        let wait: HistogramFamily<QueueLabel> = Family::new_with_constructor(job_seconds_buckets);
        registry.register(
            "qless_job_wait_seconds",
            "Time a job waited in its queue before a pop",
            wait.clone(),
        );
        let run: HistogramFamily<QueueLabel> = Family::new_with_constructor(job_seconds_buckets);
        registry.register(
            "qless_job_run_seconds",
            "Time from a job's pop to its completion",
            run.clone(),
        );
        let leased_jobs = Family::<NamespaceLabel, Gauge>::default();
        registry.register(
            "qless_leased_jobs",
            "Jobs leased through this gateway whose end it has not heard of yet, remembered for qless_job_run_seconds",
            leased_jobs.clone(),
        );
        let evicted = Counter::default();
        registry.register(
            "qless_leased_jobs_evicted",
            "Leased jobs given up unended because the gateway remembered as many as it can (their run time is not recorded)",
            evicted.clone(),
        );
        let http: HistogramFamily<HttpLabels> = Family::new_with_constructor(seconds_buckets);
        registry.register(
            "http_server_request_duration_seconds",
            "HTTP request durations by method, route template and status",
            http.clone(),
        );
        let redis_calls: HistogramFamily<CommandLabel> =
            Family::new_with_constructor(seconds_buckets);
        registry.register(
            "qless_redis_call_duration_seconds",
            "Latency of script calls to Redis, by command",
            redis_calls.clone(),
        );
        let redis_errors = Family::<CommandLabel, Counter>::default();
        registry.register(
            "qless_redis_call_errors",
            "Script calls answered with an error, by command",
            redis_errors.clone(),
        );
        let group_size = group_buckets();
        registry.register(
            "qless_redis_group_size",
            "Script calls sent to Redis together in one invocation",
            group_size.clone(),
        );
        let event_streams = Gauge::default();
        registry.register(
            "qless_event_stream_clients",
            "Open event streams (/v1/events)",
            event_streams.clone(),
        );
        let sweeps = Counter::default();
        registry.register("qless_sweeper_runs", "Sweeper passes", sweeps.clone());
        let sweep_errors = Counter::default();
        registry.register(
            "qless_sweeper_errors",
            "Sweeper passes that failed",
            sweep_errors.clone(),
        );
        let sweep_seconds = seconds_buckets();
        registry.register(
            "qless_sweeper_duration_seconds",
            "Duration of a sweeper pass",
            sweep_seconds.clone(),
        );
        let redis_restarts = Counter::default();
        registry.register(
            "qless_embedded_redis_restarts",
            "Times the embedded redis-server exited and was started again",
            redis_restarts.clone(),
        );
        let spans_dropped = Counter::default();
        registry.register(
            "qless_spans_dropped",
            "Spans not exported because the export buffer was full (with --otlp-endpoint)",
            spans_dropped.clone(),
        );
        let long_polls_cut_short = Counter::default();
        registry.register(
            "qless_longpoll_cut_short",
            "Pops with a wait answered at once, without waiting, because --max-long-polls were waiting already",
            long_polls_cut_short.clone(),
        );
        let push_deliveries = Family::<PushLabels, Counter>::default();
        registry.register(
            "qless_push_deliveries",
            "Push deliveries made by this gateway, by namespace, queue and outcome (delivered, retried, failed, gone)",
            push_deliveries.clone(),
        );
        let push_seconds: HistogramFamily<QueueLabel> =
            Family::new_with_constructor(delivery_buckets);
        registry.register(
            "qless_push_delivery_duration_seconds",
            "Time from a push delivery's request to its answer (or timeout)",
            push_seconds.clone(),
        );
        let push_in_flight = Gauge::default();
        registry.register(
            "qless_push_in_flight",
            "Push deliveries this gateway has in flight (bounded by --push-max-in-flight)",
            push_in_flight.clone(),
        );
        Metrics {
            registry,
            jobs,
            wait,
            run,
            http,
            redis_calls,
            redis_errors,
            group_size,
            event_streams,
            sweeps,
            sweep_errors,
            sweep_seconds,
            redis_restarts,
            spans_dropped,
            long_polls_cut_short,
            push_deliveries,
            push_seconds,
            push_in_flight,
            queues: Default::default(),
            leased: parking_lot::Mutex::new(Leased::new(capacity, evicted)),
            leased_jobs,
        }
    }

    /// Counts `event` (`put`, `popped`, `completed`, `failed`, `retried`,
    /// `timed_out`) for `queue` of `namespace` (`""`: the plain `ql:` prefix).
    pub fn job(&self, namespace: &str, queue: &str, event: &'static str) {
        self.count(&self.series(namespace, queue), event);
    }

    /// The series of `queue` of `namespace`, made on first use.
    fn series(&self, namespace: &str, queue: &str) -> Arc<QueueSeries> {
        if let Some(found) = self.queues.read().get(namespace).and_then(|q| q.get(queue)) {
            return found.clone();
        }
        self.queues
            .write()
            .entry(namespace.to_owned())
            .or_default()
            .entry(queue.to_owned())
            .or_insert_with(|| {
                Arc::new(QueueSeries {
                    namespace: namespace.to_owned(),
                    queue: queue.to_owned(),
                    events: Default::default(),
                    wait: OnceLock::new(),
                    run: OnceLock::new(),
                })
            })
            .clone()
    }

    /// Counts `event` in `series`.
    fn count(&self, series: &QueueSeries, event: &'static str) {
        let make = || {
            self.jobs
                .get_or_create(&QueueEvent {
                    namespace: series.namespace.clone(),
                    queue: series.queue.clone(),
                    event,
                })
                .clone()
        };
        match EVENTS.iter().position(|known| *known == event) {
            Some(at) => series.events[at].get_or_init(make).inc(),
            // (Not one of the kept events: counted in the family itself.)
            None => make().inc(),
        };
    }

    /// Counts the jobs of a pop, and how long each waited (from the history entry
    /// before its `popped` one).
    pub fn popped(&self, namespace: &str, jobs: &[Job]) {
        for job in jobs {
            let series = self.series(namespace, &job.queue);
            self.count(&series, "popped");
            if let [.., before, popped] = job.history.as_slice() {
                let waited = popped.when - before.when;
                if waited.is_finite() && waited >= 0.0 {
                    let wait = series
                        .wait
                        .get_or_init(|| self.wait.get_or_create(&series.label()).clone());
                    wait.observe(waited);
                }
                let gauge = || {
                    self.leased_jobs
                        .get_or_create(&NamespaceLabel {
                            namespace: namespace.to_owned(),
                        })
                        .clone()
                };
                self.leased
                    .lock()
                    .insert(&job.jid, series, popped.when, gauge);
            }
        }
    }

    /// The job `jid` left its worker at `now` (`event`: completed, failed, retried,
    /// timed out): counts the event, under `queue` or, for the calls that do not name
    /// it (fail, timeout), under the queue this gateway leased the job from; a
    /// completion also records its run time when this gateway saw its pop.
    pub fn finished(&self, namespace: &str, queue: &str, event: &'static str, jid: &str, now: f64) {
        let popped = self.leased.lock().remove(namespace, jid);
        let series = match &popped {
            // Usually the job's own queue, known from its pop.
            Some(lease) if queue.is_empty() || lease.series.queue == queue => lease.series.clone(),
            _ => self.series(namespace, queue),
        };
        self.count(&series, event);
        if let (Some(lease), "completed") = (&popped, event) {
            let seconds = now - lease.at;
            if seconds.is_finite() && seconds >= 0.0 {
                let run = series
                    .run
                    .get_or_init(|| self.run.get_or_create(&series.label()).clone());
                run.observe(seconds);
            }
        }
    }

    /// The script announced that the job `jid` of `namespace` ended (completed, moved
    /// on, failed or canceled, by any gateway or client): its lease, if this gateway
    /// holds one, is let go.
    pub fn job_ended(&self, namespace: &str, jid: &str) {
        self.leased.lock().ended(namespace, jid);
    }

    /// Records one HTTP request.
    pub fn request(&self, method: &'static str, route: &'static str, status: u16, took: Duration) {
        self.http
            .get_or_create(&HttpLabels {
                method,
                route,
                status,
            })
            .observe(took.as_secs_f64());
    }

    /// Records one script call: its latency, and whether it failed.
    pub fn script_call(&self, command: &'static str, took: Duration, failed: bool) {
        let labels = CommandLabel { command };
        self.redis_calls
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if failed {
            self.redis_errors.get_or_create(&labels).inc();
        }
    }

    /// Records how many calls one invocation carried.
    pub fn group(&self, calls: usize) {
        self.group_size.observe(calls as f64);
    }

    /// Records one sweeper pass.
    pub fn sweep(&self, took: Duration, failed: bool) {
        self.sweeps.inc();
        if failed {
            self.sweep_errors.inc();
        }
        self.sweep_seconds.observe(took.as_secs_f64());
    }

    /// Counts a restart of the embedded Redis.
    pub fn redis_restarted(&self) {
        self.redis_restarts.inc();
    }

    /// Counts a span dropped because the export buffer was full.
    pub fn span_dropped(&self) {
        self.spans_dropped.inc();
    }

    /// A push delivery of `queue` ended as `outcome` after `took`.
    pub fn push_delivered(
        &self,
        namespace: &str,
        queue: &str,
        outcome: &'static str,
        took: Duration,
    ) {
        self.push_deliveries
            .get_or_create(&PushLabels {
                namespace: namespace.to_owned(),
                queue: queue.to_owned(),
                outcome,
            })
            .inc();
        self.push_seconds
            .get_or_create(&QueueLabel {
                namespace: namespace.to_owned(),
                queue: queue.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A push delivery started (`1`) or ended (`-1`).
    pub fn push_in_flight(&self, change: i64) {
        self.push_in_flight.inc_by(change);
    }

    /// Counts a long poll answered at once because the cap was reached.
    pub fn long_poll_cut_short(&self) {
        self.long_polls_cut_short.inc();
    }

    /// The registry, for the exposition.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// An event stream opened; it counts until the guard is dropped.
    pub fn event_stream(&self) -> StreamGuard {
        self.event_streams.inc();
        StreamGuard(())
    }
}

/// Counts one open event stream while it lives.
#[derive(Debug)]
pub struct StreamGuard(());

impl Drop for StreamGuard {
    fn drop(&mut self) {
        METRICS.event_streams.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::leased::{ENDED_GRACE, LEASED_MAX_AGE};
    use super::*;
    use serde_json::json;

    /// A leased job of `queue`, put at 100 and popped at 103.
    fn leased(jid: &str, queue: &str) -> Job {
        serde_json::from_value(json!({
            "jid": jid, "klass": "K", "state": "running", "queue": queue, "worker": "w",
            "tracked": false, "priority": 0, "expires": 160, "retries": 5, "remaining": 5,
            "data": {}, "tags": [], "failure": null, "spawned_from_jid": null,
            "dependents": [], "dependencies": [],
            "history": [
                {"when": 100, "what": "put", "q": queue},
                {"when": 103, "what": "popped", "worker": "w"},
            ],
        }))
        .expect("a job")
    }

    fn exposition(metrics: &Metrics) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &metrics.registry).unwrap();
        text
    }

    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn a_queues_series_count_as_the_families_would_and_only_once_used() {
        let metrics = Metrics::new();
        metrics.job("", "mail", "put");
        metrics.job("", "mail", "put");
        metrics.job("ns", "mail", "put");
        metrics.popped("", &[leased("a", "mail"), leased("b", "mail")]);
        // Completed naming its queue, failed naming none (the leased queue counts).
        metrics.finished("", "mail", "completed", "a", 110.0);
        metrics.finished("", "", "failed", "b", 111.0);
        // A job this gateway did not lease: no run time.
        metrics.finished("", "mail", "completed", "elsewhere", 112.0);
        let text = exposition(&metrics);
        let jobs = |labels: &str| sample(&text, &format!("qless_jobs_total{{{labels}}}"));
        let plain = |event: &str| jobs(&format!("namespace=\"\",queue=\"mail\",event=\"{event}\""));
        assert_eq!(plain("put"), Some(2.0), "{text}");
        assert_eq!(plain("popped"), Some(2.0), "{text}");
        assert_eq!(plain("completed"), Some(2.0), "{text}");
        assert_eq!(plain("failed"), Some(1.0), "{text}");
        assert_eq!(
            jobs("namespace=\"ns\",queue=\"mail\",event=\"put\""),
            Some(1.0),
            "{text}"
        );
        // Nothing retried or timed out: no such series, as before series were kept.
        assert_eq!(plain("retried"), None, "{text}");
        assert!(!text.contains("queue=\"\""), "{text}");
        let seconds = |what: &str, part: &str| {
            sample(
                &text,
                &format!("qless_job_{what}_seconds_{part}{{namespace=\"\",queue=\"mail\"}}"),
            )
        };
        assert_eq!(seconds("wait", "count"), Some(2.0), "{text}");
        assert_eq!(seconds("wait", "sum"), Some(6.0), "{text}");
        assert_eq!(seconds("run", "count"), Some(1.0), "{text}");
        assert_eq!(seconds("run", "sum"), Some(7.0), "{text}");
        assert!(
            !text.contains("qless_job_wait_seconds_count{namespace=\"ns\""),
            "{text}"
        );
    }

    #[test]
    fn the_same_jid_leased_in_two_namespaces_is_timed_in_each() {
        let metrics = Metrics::new();
        metrics.popped("a", &[leased("same", "qa")]);
        metrics.popped("b", &[leased("same", "qb")]);
        // A fail names no queue: each counts under its own namespace's leased queue.
        metrics.finished("b", "", "failed", "same", 105.0);
        metrics.finished("a", "", "completed", "same", 108.0);
        let text = exposition(&metrics);
        let count = |labels: &str| sample(&text, &format!("qless_jobs_total{{{labels}}}"));
        assert_eq!(
            count("namespace=\"b\",queue=\"qb\",event=\"failed\""),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            count("namespace=\"a\",queue=\"qa\",event=\"completed\""),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "qless_job_run_seconds_sum{namespace=\"a\",queue=\"qa\"}"
            ),
            Some(5.0),
            "{text}"
        );
        assert_eq!(metrics.leased.lock().len(), 0);
    }

    #[test]
    fn a_job_that_moved_queues_counts_where_its_caller_says() {
        let metrics = Metrics::new();
        metrics.popped("", &[leased("a", "first")]);
        metrics.finished("", "second", "completed", "a", 104.0);
        let text = exposition(&metrics);
        assert_eq!(
            sample(
                &text,
                "qless_jobs_total{namespace=\"\",queue=\"second\",event=\"completed\"}"
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "qless_job_run_seconds_count{namespace=\"\",queue=\"second\"}"
            ),
            Some(1.0),
            "{text}"
        );
    }
    /// A lease whose job ended elsewhere, as the script announced, leaves (after
    /// its grace, in which this gateway's own completion still finds it).
    #[test]
    fn a_job_announced_ended_leaves_the_map_after_its_grace() {
        let metrics = Metrics::new();
        metrics.popped("ends", &[leased("mine", "q"), leased("theirs", "q")]);
        let live = |metrics: &Metrics| {
            sample(
                &exposition(metrics),
                "qless_leased_jobs{namespace=\"ends\"}",
            )
        };
        assert_eq!(live(&metrics), Some(2.0));
        // The announcement of this gateway's own completion came first: the answer,
        // just after, still times the run.
        metrics.job_ended("ends", "mine");
        metrics.job_ended("ends", "theirs");
        metrics.job_ended("elsewhere", "theirs");
        assert_eq!(live(&metrics), Some(0.0));
        metrics.finished("ends", "q", "completed", "mine", 110.0);
        let text = exposition(&metrics);
        assert_eq!(
            sample(
                &text,
                "qless_job_run_seconds_sum{namespace=\"ends\",queue=\"q\"}"
            ),
            Some(7.0),
            "{text}"
        );
        assert_eq!(metrics.leased.lock().len(), 1);
        // Past the grace, the next pop finds the other one gone.
        let mut leased_map = metrics.leased.lock();
        for (when, _) in leased_map.ending.iter_mut() {
            *when -= ENDED_GRACE;
        }
        drop(leased_map);
        metrics.popped("ends", &[leased("next", "q")]);
        let leases = metrics.leased.lock();
        assert_eq!(leases.len(), 1);
        assert!(leases.holds("ends", "next"));
    }

    /// A full map gives up its oldest lease for the new one, counts that, and goes on
    /// timing runs; a lease past its age leaves too.
    #[test]
    fn a_full_map_evicts_the_oldest_and_keeps_recording() {
        let metrics = Metrics::with_leased_capacity(2);
        metrics.popped("full", &[leased("a", "q"), leased("b", "q")]);
        metrics.popped("full", &[leased("c", "q")]);
        let text = exposition(&metrics);
        assert_eq!(
            sample(&text, "qless_leased_jobs_evicted_total"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(metrics.leased.lock().len(), 2);
        // `a` was given up: not timed; `c`, popped when the map was full, is.
        metrics.finished("full", "q", "completed", "a", 110.0);
        metrics.finished("full", "q", "completed", "c", 113.0);
        let text = exposition(&metrics);
        let run = |part: &str| {
            sample(
                &text,
                &format!("qless_job_run_seconds_{part}{{namespace=\"full\",queue=\"q\"}}"),
            )
        };
        assert_eq!(
            (run("count"), run("sum")),
            (Some(1.0), Some(10.0)),
            "{text}"
        );
        // The same job leased again replaces its lease: nothing evicted.
        metrics.popped("full", &[leased("b", "q")]);
        metrics.popped("full", &[leased("b", "q")]);
        assert_eq!(
            sample(&exposition(&metrics), "qless_leased_jobs_evicted_total"),
            Some(1.0)
        );
        // A pop a day and more after `b`'s: `b` is too old to keep (not an eviction).
        let mut late = leased("d", "q");
        for entry in &mut late.history {
            entry.when += LEASED_MAX_AGE + 10.0;
        }
        metrics.popped("full", &[late]);
        let leases = metrics.leased.lock();
        assert_eq!(leases.len(), 1);
        assert!(leases.holds("full", "d"));
        drop(leases);
        assert_eq!(
            sample(&exposition(&metrics), "qless_leased_jobs_evicted_total"),
            Some(1.0)
        );
    }
}
