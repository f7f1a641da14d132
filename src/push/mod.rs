//! Push delivery: queues worked by an HTTP endpoint that qlessd calls, signed, so the
//! worker is any program that answers a POST.
//!
//! A queue is subscribed with `PUT /v1/queues/{queue}/push`; its settings and
//! secrets live in Redis (`lua/push.lua`), so every qlessd on the namespace delivers
//! its jobs. Each qlessd runs, per namespace, one task ([`run`]) that follows the
//! list of pushed queues, and per pushed queue one loop that leases jobs through the
//! same waiters as long-poll pops ([`Leasing::push_pop`]: woken by the script's
//! announcements) and starts a delivery for each (`delivery.rs`). The script leases
//! only within the queue's `concurrency` and `rate`, which therefore hold across every
//! qlessd; `--push-max-in-flight` bounds this process's deliveries in all.
//!
//! Delivery is at least once: a lease is an ordinary qless lease under this qlessd's
//! worker name, heartbeaten while the endpoint takes its time. If qlessd dies
//! mid-delivery the lease expires and the job is delivered again, with the same
//! `webhook-id` and a higher `qlessd-attempt`.

mod answer;
mod delivery;
pub mod endpoint;
pub mod shown;
pub mod signature;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::core::Qless;
use crate::core::push::{PushState, Pushed};
use crate::leasing::Leasing;
use crate::settings::Settings;
use endpoint::{AddressPolicy, PublicResolver};

/// How often each qlessd reads the list of pushed queues (a queue subscribed through
/// another qlessd starts being delivered by this one within that), and a queue's
/// settings (a change made elsewhere applies to the next deliveries within that).
const REFRESH: Duration = Duration::from_secs(2);

/// What the worker name of every push delivery starts with; the rest names the qlessd
/// holding the lease.
const WORKER_PREFIX: &str = "qlessd-push:";

/// Most jobs one lease of a queue's loop asks for.
const MOST_PER_LEASE: u32 = 50;

/// Subscriptions and settings changed through this qlessd, so that its deliveries
/// follow them at once rather than at their next [`REFRESH`] (other qlessd on the
/// namespace follow within it).
#[derive(Debug, Default)]
pub struct Changes {
    /// Wakes [`run`] to read the list of pushed queues again.
    listed: Notify,
    /// Counts the changes: a queue's loop reads its settings again when it moved.
    generation: AtomicU64,
}

impl Changes {
    /// A queue was subscribed, changed, rotated or forgotten here.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.listed.notify_one();
    }
}

/// What every delivery of this process shares: the HTTP client (pooled, kept-alive
/// connections; no redirects; addresses checked as they resolve), the bound on
/// deliveries in flight, and the worker name its leases are under.
#[derive(Debug)]
pub struct Deliverer {
    client: reqwest::Client,
    policy: AddressPolicy,
    permits: Arc<Semaphore>,
    max_in_flight: u32,
    worker: String,
    max_result: usize,
    /// Deliveries in flight, by namespace, jid: what shutdown releases when they
    /// outlast it.
    in_flight: parking_lot::Mutex<HashMap<(String, String), InFlight>>,
}

/// A delivery in flight, as shutdown needs it.
#[derive(Debug)]
struct InFlight {
    qless: Qless,
    queue: String,
    /// Which delivery of the job this is (`qlessd-attempt`).
    attempt: u64,
    task: Option<tokio::task::AbortHandle>,
}

/// Whether a delivery given back at shutdown was posted: a lease that never reached
/// the endpoint does not count as one of the job's deliveries.
#[derive(Debug, Clone, Copy)]
enum Posted {
    Yes { attempt: u64 },
    No,
}

impl Deliverer {
    /// The deliverer `settings` describe; `gateway` names this process among the
    /// qlessd on the same Redis (its leases' worker name says it is a push delivery
    /// and which qlessd holds it).
    pub fn new(settings: &Settings, gateway: &str) -> Result<Arc<Self>, String> {
        let policy = AddressPolicy {
            allow_private: settings.push_allow_private,
        };
        let tls = match crate::core::tls_config(settings.push_ca_file.as_deref(), "--push-ca-file")
        {
            Ok(tls) => tls,
            // A file given but unreadable is the operator's mistake: say so at start. A
            // system without CA certificates still serves; only `https` deliveries fail
            // (into `push-tls`), and the log says why.
            Err(err) if settings.push_ca_file.is_some() => return Err(err.to_string()),
            Err(err) => {
                tracing::warn!(%err, "https push endpoints cannot be verified until CA certificates are installed");
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            }
        };
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            // A delivery that fails is the job's retry to make (with its backoff and
            // its count), not the client's.
            .retry(reqwest::retry::never())
            .dns_resolver(PublicResolver::shared(policy))
            .no_proxy()
            .user_agent(concat!("qlessd/", env!("CARGO_PKG_VERSION")))
            .pool_idle_timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| format!("cannot build the push delivery client: {err}"))?;
        let deliverer = Arc::new(Deliverer {
            client,
            policy,
            permits: Arc::new(Semaphore::new(settings.push_max_in_flight as usize)),
            max_in_flight: settings.push_max_in_flight,
            worker: worker_name(&host_name(), gateway),
            max_result: usize::try_from(settings.max_job_size).unwrap_or(usize::MAX),
            in_flight: parking_lot::Mutex::default(),
        });
        // So that an operator can tell which qlessd holds a job a listing shows.
        tracing::info!(worker = %deliverer.worker, "push deliveries lease jobs under this worker name");
        Ok(deliverer)
    }

    /// Waits up to `timeout` for the deliveries in flight to finish (shutdown: the
    /// queues' loops lease nothing once it began). Those still going then are stopped
    /// and their jobs put back to be delivered again.
    pub async fn drain(&self, clock: &Clock, timeout: Duration) {
        let everyone = self.permits.acquire_many(self.max_in_flight);
        if tokio::time::timeout(timeout, everyone).await.is_ok() {
            return;
        }
        let left: Vec<((String, String), InFlight)> = self.in_flight.lock().drain().collect();
        for ((_, jid), delivery) in left {
            if let Some(task) = delivery.task {
                task.abort();
            }
            self.release(
                &delivery.qless,
                clock,
                &delivery.queue,
                &jid,
                Posted::Yes {
                    attempt: delivery.attempt,
                },
                "qlessd stopped during the delivery",
            )
            .await;
        }
    }

    /// Puts a job this qlessd leased back in its queue at once, using none of its
    /// retries (shutdown stopped its delivery, or came before it started); when that
    /// fails, its lease expires and it is delivered again all the same.
    async fn release(
        &self,
        qless: &Qless,
        clock: &Clock,
        queue: &str,
        jid: &str,
        posted: Posted,
        why: &str,
    ) {
        let released = qless
            .push_finish(
                clock.now(),
                queue,
                jid,
                &self.worker,
                crate::core::push::Attempted {
                    status: None,
                    ms: 0,
                    // (0 tells the script that the lease was never posted.)
                    attempt: match posted {
                        Posted::Yes { attempt } => attempt,
                        Posted::No => 0,
                    },
                },
                crate::core::push::Outcome::Retry {
                    delay: crate::core::push::RetryDelay::Postponed(0.0),
                    group: "push-shutdown",
                    message: why,
                },
            )
            .await;
        match released {
            Ok(_) => tracing::info!(%queue, %jid, "{why}; the job goes back to its queue"),
            Err(err) => tracing::warn!(%queue, %jid, %err, "{why}; its lease will expire"),
        }
    }
}

/// The worker name of this qlessd's deliveries: that it is a push delivery, the host
/// it runs on and `gateway` (its process id and start time), so that an operator
/// can tell which process holds a job: `qlessd-push:web-3:4121-18a2…`. The host name
/// is cut to 64 characters (Linux's longest) and its characters that a name may not
/// hold become `-`, so that the name is always a valid worker name.
fn worker_name(host: &str, gateway: &str) -> String {
    let host: String = host
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_graphic() && !matches!(c, '{' | '}' | ':') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let host = if host.is_empty() { "unnamed" } else { &host };
    format!("{WORKER_PREFIX}{host}:{gateway}")
}

/// The machine's host name (`uname`'s node name).
fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Delivers the pushed queues of one namespace until `stopping` turns true: follows
/// the list of pushed queues (read every [`REFRESH`], and at once when `changes` tells
/// of a subscription made here) and runs a loop for each.
pub async fn run(
    deliverer: Arc<Deliverer>,
    qless: Qless,
    leasing: Arc<Leasing>,
    clock: Clock,
    changes: Arc<Changes>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut loops: HashMap<String, JoinHandle<()>> = HashMap::new();
    let mut failing = false;
    loop {
        if *stopping.borrow() {
            break;
        }
        match qless.push_list(clock.now()).await {
            Ok(names) => {
                failing = false;
                loops.retain(|name, task| {
                    let keep = names.contains(name) && !task.is_finished();
                    if !keep {
                        task.abort();
                    }
                    keep
                });
                for name in names {
                    loops.entry(name.clone()).or_insert_with(|| {
                        let queue = QueueLoop {
                            deliverer: deliverer.clone(),
                            qless: qless.clone(),
                            leasing: leasing.clone(),
                            clock: clock.clone(),
                            changes: changes.clone(),
                            queue: name,
                            local: Arc::default(),
                        };
                        tokio::spawn(queue.run(stopping.clone()))
                    });
                }
            }
            Err(err) if !failing => {
                failing = true;
                tracing::warn!(%err, "cannot read the pushed queues; trying again");
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(REFRESH) => {}
            _ = changes.listed.notified() => {}
            _ = stopping.changed() => {}
        }
    }
    // The loops are left to end by themselves (shutdown closed `leasing`, so they
    // lease nothing more): one stopped in the middle of a `push.pop` would leave the
    // jobs it leased undelivered until their leases expire.
}

/// One pushed queue's deliveries started by this qlessd: how many are in flight, and
/// a signal when one ends (a slot may have freed).
#[derive(Debug, Default)]
struct Local {
    in_flight: AtomicUsize,
    ended: Notify,
}

/// The loop leasing one pushed queue's jobs for delivery.
struct QueueLoop {
    deliverer: Arc<Deliverer>,
    qless: Qless,
    leasing: Arc<Leasing>,
    clock: Clock,
    changes: Arc<Changes>,
    queue: String,
    local: Arc<Local>,
}

impl QueueLoop {
    async fn run(self, stopping: watch::Receiver<bool>) {
        // The settings, when they were read, and the generation of changes then.
        let mut settings: Option<(tokio::time::Instant, u64, Arc<PushState>)> = None;
        loop {
            if *stopping.borrow() || self.leasing.is_closing() {
                return;
            }
            let generation = self.changes.generation.load(Ordering::Acquire);
            let fresh = settings
                .as_ref()
                .is_some_and(|(read, seen, _)| read.elapsed() < REFRESH && *seen == generation);
            if !fresh {
                match self.qless.push_get(self.clock.now(), &self.queue).await {
                    Ok(Some(state)) => {
                        settings = Some((tokio::time::Instant::now(), generation, Arc::new(state)))
                    }
                    Ok(None) => return,
                    Err(err) => {
                        tracing::warn!(queue = %self.queue, %err, "cannot read a pushed queue's settings");
                        tokio::time::sleep(REFRESH).await;
                        continue;
                    }
                }
            }
            let state = settings.as_ref().expect("read above").2.clone();
            let Ok(url) = reqwest::Url::parse(&state.url) else {
                tracing::warn!(queue = %self.queue, "a pushed queue's url does not parse; not delivering");
                tokio::time::sleep(REFRESH).await;
                continue;
            };
            // Room here: the queue's concurrency less what this qlessd has in flight
            // (the script checks the whole of it, across every qlessd).
            let local = self.local.in_flight.load(Ordering::Acquire);
            let room = (state.concurrency as usize).saturating_sub(local);
            if room == 0 {
                let _ = tokio::time::timeout(REFRESH, self.local.ended.notified()).await;
                continue;
            }
            let want = room.min(MOST_PER_LEASE as usize);
            // A rate-limited queue has no announcement when its window frees: look
            // again after one job's share of the window.
            let wait = state.rate.map_or(crate::leasing::RECHECK, |rate| {
                Duration::from_secs_f64(rate.seconds / rate.jobs.max(1) as f64)
                    .clamp(Duration::from_millis(10), crate::leasing::RECHECK)
            });
            // Each attempt takes permits of --push-max-in-flight for what it asks,
            // keeps one per job it leased and gives the rest back before it returns:
            // a queue waiting for jobs holds none, so idle queues never starve busy ones.
            let held: parking_lot::Mutex<Vec<OwnedSemaphorePermit>> = Default::default();
            let attempt = || async {
                let Ok(first) = self.deliverer.permits.clone().acquire_owned().await else {
                    return Ok(Vec::new());
                };
                let mut permits = vec![first];
                while permits.len() < want {
                    match self.deliverer.permits.clone().try_acquire_owned() {
                        Ok(permit) => permits.push(permit),
                        Err(_) => break,
                    }
                }
                // Shutdown began (maybe while waiting for a permit): lease nothing more.
                if self.leasing.is_closing() {
                    return Ok(Vec::new());
                }
                let jobs = self
                    .qless
                    .push_pop(
                        self.clock.now(),
                        &self.queue,
                        &self.deliverer.worker,
                        permits.len() as u32,
                    )
                    .await?;
                permits.truncate(jobs.len());
                *held.lock() = permits;
                Ok(jobs)
            };
            let jobs = self
                .leasing
                .lease_for_push(&self.queue, want as u32, wait, attempt)
                .await;
            let jobs = match jobs {
                Ok(jobs) => jobs,
                Err(err) => {
                    tracing::warn!(queue = %self.queue, %err, "cannot lease jobs for push delivery");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let permits = std::mem::take(&mut *held.lock());
            if self.leasing.is_closing() {
                // Leased as shutdown began: given back undelivered, holding their
                // permits until then, so that the drain waits for it.
                for leased in &jobs {
                    self.deliverer
                        .release(
                            &self.qless,
                            &self.clock,
                            &self.queue,
                            &leased.job.jid,
                            Posted::No,
                            "qlessd stopped before the delivery",
                        )
                        .await;
                }
                drop(permits);
                return;
            }
            // Settings changed here while the lease waited (a rotation, say): these
            // jobs go out with the new ones.
            let mut state = state;
            if self.changes.generation.load(Ordering::Acquire) != generation
                && let Ok(Some(fresh)) = self.qless.push_get(self.clock.now(), &self.queue).await
            {
                state = Arc::new(fresh);
            }
            for (leased, permit) in jobs.into_iter().zip(permits) {
                self.start(leased, state.clone(), url.clone(), permit);
            }
        }
    }

    /// Starts the delivery of a leased job (it runs on even if this loop stops: a
    /// leased job is always delivered or given back).
    fn start(
        &self,
        leased: Pushed,
        state: Arc<PushState>,
        url: reqwest::Url,
        permit: OwnedSemaphorePermit,
    ) {
        let key = (self.qless.prefix().to_owned(), leased.job.jid.clone());
        self.local.in_flight.fetch_add(1, Ordering::AcqRel);
        let delivery = delivery::Delivery {
            client: self.deliverer.client.clone(),
            policy: self.deliverer.policy,
            qless: self.qless.clone(),
            clock: self.clock.clone(),
            worker: self.deliverer.worker.clone(),
            max_result: self.deliverer.max_result,
            state,
            url,
        };
        let deliverer = self.deliverer.clone();
        let local = self.local.clone();
        deliverer.in_flight.lock().insert(
            key.clone(),
            InFlight {
                qless: self.qless.clone(),
                queue: self.queue.clone(),
                attempt: leased.attempt,
                task: None,
            },
        );
        let task = tokio::spawn({
            let deliverer = deliverer.clone();
            let key = key.clone();
            async move {
                delivery.deliver(leased.job, leased.attempt).await;
                deliverer.in_flight.lock().remove(&key);
                local.in_flight.fetch_sub(1, Ordering::AcqRel);
                local.ended.notify_one();
                drop(permit);
            }
        });
        if let Some(entry) = deliverer.in_flight.lock().get_mut(&key) {
            entry.task = Some(task.abort_handle());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WorkerName;

    #[test]
    fn the_worker_name_says_push_delivery_and_which_host_and_process() {
        assert_eq!(
            worker_name("web-3.example.com", "4121-18a2"),
            "qlessd-push:web-3.example.com:4121-18a2"
        );
        let long = "h".repeat(300);
        for host in ["", "a b{c}", long.as_str(), "hôte:1", &host_name()] {
            let name = worker_name(host, "4121-18a2");
            assert!(name.parse::<WorkerName>().is_ok(), "{name}");
            assert!(name.starts_with(WORKER_PREFIX), "{name}");
            assert_eq!(name.matches(':').count(), 2, "{name}");
        }
        assert_eq!(worker_name("", "1-a"), "qlessd-push:unnamed:1-a");
        assert_eq!(worker_name("a b{c}", "1-a"), "qlessd-push:a-b-c-:1-a");
    }
}
