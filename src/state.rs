//! What every handler can reach: the [`AppState`] built by `server.rs` and given
//! to the routes and the dashboard, and the request [`Limits`] it carries. Its own
//! module, so that the handlers and the server both import it and neither imports
//! the other.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::browser::BrowserPolicy;
use crate::clock::Clock;
use crate::core::Qless;
use crate::core::events::EventBus;
use crate::leasing::{Leasing, LongPolls};
use crate::settings::Settings;

/// Limits the handlers enforce, taken from [`Settings`].
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest single-request body.
    pub body_limit: usize,
    /// Largest batch body.
    pub batch_body_limit: usize,
    /// Per-request deadline.
    pub request_timeout: Duration,
    /// Longest long-poll wait a client may ask for.
    pub max_wait: Duration,
    /// Largest job `data`, in bytes of JSON text (`--max-job-size`).
    pub max_job_size: u64,
    /// Which requests a browser could have forged are refused (`browser.rs`).
    pub browser: BrowserPolicy,
    /// How long an idempotency key answers its first put (`--idempotency-ttl`).
    pub idempotency_ttl: f64,
    /// Most index entries a search request looks at (`--search-scan-limit`).
    pub search_scan_limit: u32,
    /// Probes and scrapes leave no access-log line (`--quiet-probes`).
    pub quiet_probes: bool,
    /// Which push endpoints may be subscribed (`--push-allow-private`).
    pub push: crate::push::endpoint::AddressPolicy,
    /// The dashboard's cookie is sent over HTTPS only (`--secure-cookies`).
    pub secure_cookies: bool,
    /// The cap on waiting long polls (`--max-long-polls`), one for the whole process:
    /// every namespace's state shares it.
    pub long_polls: Arc<LongPolls>,
}

impl Limits {
    /// Limits as configured.
    pub fn from_settings(settings: &Settings) -> Self {
        Limits {
            body_limit: settings.body_limit,
            batch_body_limit: settings.batch_body_limit,
            request_timeout: settings.request_timeout(),
            max_wait: Duration::from_secs(settings.max_wait),
            max_job_size: settings.max_job_size,
            browser: BrowserPolicy::new(settings.listen.is_loopback(), &settings.cors_origins),
            idempotency_ttl: settings.idempotency_ttl as f64,
            search_scan_limit: settings.search_scan_limit,
            quiet_probes: settings.quiet_probes,
            push: crate::push::endpoint::AddressPolicy {
                allow_private: settings.push_allow_private,
            },
            secure_cookies: settings.secure_cookies,
            long_polls: Arc::new(LongPolls::new(settings.max_long_polls())),
        }
    }
}

/// What every handler can reach. Axum clones the state for each extractor and
/// middleware of every request, so it is one shared allocation: a clone is one
/// reference-count increment, whatever the state holds.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The contents of [`AppState`].
#[derive(Debug)]
pub struct Shared {
    /// The script in Redis.
    pub qless: Qless,
    /// The server's clock: the only source of `now`.
    pub clock: Clock,
    /// Request limits.
    pub limits: Limits,
    /// The script's events, bridged from one Redis subscription.
    pub events: EventBus,
    /// Long-poll and multi-queue pops.
    pub leasing: Arc<Leasing>,
    /// Turns true when the server starts shutting down: long polls answer and event
    /// streams end, so graceful shutdown only waits for short requests.
    pub shutdown: watch::Receiver<bool>,
    /// The scrape-time figures of `/metrics`, cached briefly.
    pub scrape: Scrape,
    /// Told when a queue of this namespace was subscribed to push delivery here, so
    /// that this qlessd starts delivering at once rather than at its next look at
    /// the list of pushed queues (`push::run`).
    pub pushes_changed: Arc<crate::push::Changes>,
    stopping: watch::Sender<bool>,
}

impl AppState {
    /// Builds the state and starts relaying the script's events to waiting pops.
    /// Must be called inside a tokio runtime.
    pub fn new(qless: Qless, clock: Clock, limits: Limits) -> Self {
        let events = EventBus::start_at(qless.endpoint().clone(), qless.prefix());
        let leasing = Arc::new(Leasing::new(
            qless.clone(),
            clock.clone(),
            limits.long_polls.clone(),
        ));
        tokio::spawn(leasing.clone().listen(events.clone()));
        let (stopping, shutdown) = watch::channel(false);
        AppState(Arc::new(Shared {
            qless,
            clock,
            limits,
            events,
            leasing,
            shutdown,
            scrape: Scrape::default(),
            pushes_changed: Arc::default(),
            stopping,
        }))
    }

    /// Starts shutting down: waiting pops answer with what they have and event
    /// streams end.
    pub fn begin_shutdown(&self) {
        self.leasing.close();
        self.events.close();
        let _ = self.stopping.send(true);
    }
}

/// The cached scrape-time figures of one namespace.
#[derive(Debug, Default)]
pub struct Scrape {
    /// When the figures were read, and their exposition text.
    pub(crate) cached: tokio::sync::Mutex<Option<(std::time::Instant, String)>>,
}
