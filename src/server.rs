//! Builds the application state and the application ([`App`]: the request layer
//! around each namespace's router), and serves it with graceful shutdown. The server
//! takes its listener, state and shutdown signal as arguments, so tests bind port 0 or
//! call the application directly.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::Request;
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder};
use tower_http::compression::CompressionLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa_swagger_ui::SwaggerUi;

use crate::auth::{self, Auth};
use crate::clock::Clock;
use crate::connections::{self, ConnectionLimits};
use crate::core::embedded::EmbeddedRedis;
use crate::core::{ConnectOptions, Qless};
use crate::error::ApiError;
use crate::middleware::RequestLayer;
use crate::model::NamespaceName;
use crate::settings::Settings;
use crate::tenants::Tenants;
use crate::{openapi, routes, sweeper, ui};

pub use crate::connections::App;
pub use crate::state::{AppState, Limits, Shared};

/// The full application: API routes, `/openapi.json`, `/docs`, and the layer every
/// request goes through ([`RequestLayer`]). No authentication: see
/// [`authenticated_router`].
pub fn router(state: AppState) -> App {
    tenant_router(state, Vec::new(), None)
}

/// [`router`] with every request checked against `auth`'s tokens.
pub fn authenticated_router(state: AppState, auth: &Auth) -> App {
    tenant_router(state, Vec::new(), Some(auth))
}

/// The application serving several namespaces ([`Tenants`]): `default` for requests
/// that name none, `others` by name; with `auth`, every request checked against its
/// tokens.
pub fn tenant_router(
    default: AppState,
    others: Vec<(String, AppState)>,
    auth: Option<&Auth>,
) -> App {
    tenant_app(default, others, auth).0
}

/// Adds namespaces to a running [`tenant_app`], each from its next request on.
#[derive(Clone)]
pub struct AddTenant {
    add: Arc<dyn Fn(String, AppState) + Send + Sync>,
    serves: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl AddTenant {
    /// Serves `name` with `state` (a namespace already served keeps its state).
    pub fn add(&self, name: String, state: AppState) {
        (self.add)(name, state);
    }

    /// Whether `name` is served already (the default namespace aside).
    pub fn serves(&self, name: &str) -> bool {
        (self.serves)(name)
    }
}

/// [`tenant_router`], and the handle that serves more namespaces later (when a reload
/// of the auth file grants new ones).
pub fn tenant_app(
    default: AppState,
    others: Vec<(String, AppState)>,
    auth: Option<&Auth>,
) -> (App, AddTenant) {
    let deadline = default.limits.request_timeout;
    let browser = default.limits.browser.clone();
    let quiet_probes = default.limits.quiet_probes;
    let default_name = default.qless.namespace_key().map(|key| {
        key.trim_start_matches("ql:{")
            .trim_end_matches('}')
            .to_owned()
    });
    let others = others
        .into_iter()
        .map(|(name, state)| (name, namespace_service(state)))
        .collect();
    let tenants = Tenants::new((default_name, namespace_service(default)), others);
    let served = tenants.others();
    let add = AddTenant {
        serves: Arc::new({
            let served = served.clone();
            move |name| served.serves(name)
        }),
        add: Arc::new(move |name, state| served.add(name, namespace_service(state))),
    };
    // The request layer wraps the router once, not route by route (`Router::layer`):
    // a layer applied to the router boxes and clones every route's service and future
    // again on each request, a few hundred instructions a layer.
    let cors = cors(browser.cors_origins());
    let app = ServiceBuilder::new()
        // Only when asked for, and outside the token check: a preflight carries no
        // token.
        .option_layer(cors)
        .layer(
            RequestLayer::new(deadline)
                .with_browser(browser)
                .with_quiet_probes(quiet_probes)
                .with_auth(auth.cloned()),
        )
        .service(tenants);
    (BoxCloneSyncService::new(app), add)
}

/// CORS for `origins` (none: CORS stays off): their preflights are answered, for the
/// methods and headers the API uses, and their pages may read the answers.
fn cors(origins: &[String]) -> Option<CorsLayer> {
    use axum::http::{HeaderName, HeaderValue, Method, header};
    if origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    let request_id = HeaderName::from_static("x-request-id");
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ])
            .allow_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                request_id.clone(),
            ])
            .expose_headers([request_id, header::LOCATION, header::RETRY_AFTER])
            .max_age(Duration::from_secs(600)),
    )
}

/// The routes of one namespace's state, behind the body limit (outside the router,
/// like the request layer).
fn namespace_service(
    state: AppState,
) -> impl Service<Request, Response = Response, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    let (api, _) = routes::router().split_for_parts();
    // The documentation is large (the OpenAPI document about 97 KB, the page's script
    // 1.5 MB) and gzip shrinks it four- to sixfold; the API's answers are small and
    // stay uncompressed.
    let docs = Router::new()
        .merge(SwaggerUi::new("/docs").url("/openapi.json", openapi::document()))
        .layer(CompressionLayer::new());
    let routes = Router::new()
        .merge(docs)
        .route(
            "/metrics",
            axum::routing::get(crate::routes::metrics::serve),
        )
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state.clone())
        // The dashboard: per namespace, like the API.
        .merge(ui::router(state.clone()).layer(CompressionLayer::new()));
    DefaultBodyLimit::max(state.limits.body_limit).layer(routes)
}

/// Serves `app` on `listener` until `shutdown` resolves, with the default
/// [`ConnectionLimits`]; requests in flight finish (within the shutdown timeout).
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    connections::serve(listener, app, shutdown, ConnectionLimits::default()).await
}

/// Runs qlessd as configured: embedded or external Redis, script loaded, HTTP served
/// until SIGINT/SIGTERM, embedded Redis stopped last.
pub async fn run(settings: Settings) -> Result<(), String> {
    // Before anything starts: a bad token file or an exposed address is refused at once.
    let auth = auth::from_settings(&settings)?;
    let embedded = match &settings.redis_url {
        Some(_) => None,
        None => Some(
            EmbeddedRedis::start(
                &settings.redis_server,
                &settings.data_dir,
                settings.redis_maxmemory,
            )
            .await
            .map_err(|err| err.to_string())?,
        ),
    };
    let url = match (&settings.redis_url, &embedded) {
        (Some(url), _) => url.clone(),
        (None, Some(redis)) => redis.url(),
        (None, None) => unreachable!("embedded Redis starts when no URL is given"),
    };
    let result = serve_with(&settings, url, embedded.is_none(), auth).await;
    if let Some(redis) = embedded {
        redis.shutdown().await;
    }
    result
}

async fn serve_with(
    settings: &Settings,
    url: String,
    external: bool,
    auth: Option<Auth>,
) -> Result<(), String> {
    if settings.request_timeout <= settings.max_wait {
        return Err(format!(
            "--request-timeout ({}s) must be longer than --max-wait ({}s), or long polls \
             would time out",
            settings.request_timeout, settings.max_wait
        ));
    }
    if let Some(long_polls) = settings.max_long_polls
        && long_polls >= settings.max_connections
    {
        return Err(format!(
            "--max-long-polls ({long_polls}) must be below --max-connections ({}), or \
             waiting pops could hold every connection and lock the puts out",
            settings.max_connections
        ));
    }
    connections::check_descriptor_limit(settings.max_connections as usize);
    // The default namespace, then every other one named by `--namespaces` or granted
    // by a token: each with its own state (connections, events, waiters, sweeper).
    let mut others: Vec<NamespaceName> = Vec::new();
    let granted = auth.as_ref().map(Auth::namespaces).unwrap_or_default();
    for name in settings.namespaces.iter().chain(&granted) {
        if Some(name) != settings.namespace.as_ref() && !others.contains(name) {
            others.push(name.clone());
        }
    }
    if settings.pool_size.is_some() {
        tracing::warn!(
            "--pool-size (QLESSD_POOL_SIZE) is deprecated and ignored: per namespace, script \
             calls share one Redis connection and the other commands a second"
        );
    }
    let options = |namespace: Option<String>| ConnectOptions {
        url: url.clone(),
        redis_ca_file: settings.redis_ca_file.clone(),
        namespace,
        connect_timeout: Duration::from_millis(settings.pool_timeout_ms),
        response_timeout: settings.request_timeout(),
        external,
        group_calls: settings.group_calls as usize,
        replicas: crate::core::Replicas {
            count: settings.min_replicas_ack,
            timeout: Duration::from_millis(settings.min_replicas_timeout_ms),
        },
    };
    if crate::core::is_cluster(&url) && settings.namespace.is_none() {
        return Err(
            "a Redis Cluster URL needs --namespace NAME (and --namespaces for more): each \
             namespace lives in one cluster slot through its hash tag, while the plain ql: \
             prefix would spread a queue's keys over the cluster"
                .to_owned(),
        );
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let qless = Qless::connect(options(settings.namespace.clone().map(String::from)))
        .await
        .map_err(|err| err.to_string())?;
    // Every gateway on this Redis takes `now` from Redis's clock, so a lease granted
    // through one expires at the same moment in all of them (`clock.rs`).
    let clock = Clock::redis(&qless)
        .await
        .map_err(|err| format!("cannot read Redis's clock: {err}"))?;
    tokio::spawn(clock.clone().follow(qless.clone(), stopped.clone()));
    if qless.namespace_key().is_none() {
        // The plain prefix belongs to the qless protocol: qlessd's own keys of an older
        // version there move to `qlessd:` before anything is served (lua/README.md).
        // A Redis that refuses (out of memory, say) still gets served, as it would be
        // otherwise: the sweeper tries again every 30 seconds.
        match qless.migrate(clock.now(), true).await {
            Ok(0) => {}
            Ok(moved) => tracing::info!(moved, "moved qlessd's own keys from ql: to qlessd:"),
            Err(err) => tracing::warn!(%err, "could not move qlessd's own keys out of ql: yet"),
        }
    }
    let gateway = sweeper::gateway_id();
    let namespaces = Namespaces {
        options: options(None),
        clock: clock.clone(),
        limits: Limits::from_settings(settings),
        deliverer: crate::push::Deliverer::new(settings, &gateway)?,
        gateway,
        stopped: stopped.clone(),
        running: Arc::default(),
    };
    let state = AppState::new(qless, clock.clone(), namespaces.limits.clone());
    namespaces.start(&state);
    let mut tenants = Vec::with_capacity(others.len());
    for name in others {
        let state = namespaces.connect(&name).await?;
        tenants.push((String::from(name), state));
    }
    let listener = connections::Listener::bind(&settings.listen)
        .await
        .map_err(|err| format!("cannot listen on {}: {err}", settings.listen))?;
    let served_namespaces: Vec<&str> = tenants.iter().map(|(name, _)| name.as_str()).collect();
    tracing::info!(
        listen = %settings.listen,
        redis = %crate::core::redacted(&url),
        namespaces = ?served_namespaces,
        threads = settings.threads(),
        "qlessd is serving"
    );
    let running = namespaces.running.clone();
    let shutdown_began = Arc::new(std::sync::OnceLock::new());
    let began = shutdown_began.clone();
    let shutdown = async move {
        shutdown_signal().await;
        let _ = began.set(std::time::Instant::now());
        // Long polls answer and event streams end now instead of holding it up.
        let mut running = running.lock().expect("namespaces lock");
        running.shutting_down = true;
        for state in &running.states {
            state.begin_shutdown();
        }
    };
    let (app, add_tenant) = tenant_app(state, tenants, auth.as_ref());
    if let Some(auth) = auth {
        let default = settings.namespace.clone();
        tokio::spawn(
            namespaces
                .clone()
                .reload_on_hangup(auth, default, add_tenant),
        );
    }
    let limits = ConnectionLimits::from_settings(settings);
    let served = connections::serve(listener, app, shutdown, limits).await;
    // Push deliveries in flight get what is left of the shutdown timeout.
    let began = shutdown_began
        .get()
        .copied()
        .unwrap_or_else(std::time::Instant::now);
    let left = Duration::from_secs(settings.shutdown_timeout).saturating_sub(began.elapsed());
    namespaces.deliverer.drain(&clock, left).await;
    let _ = stop.send(true);
    let sweepers =
        std::mem::take(&mut namespaces.running.lock().expect("namespaces lock").sweepers);
    for sweeper in sweepers {
        let _ = sweeper.await;
    }
    served.map_err(|err| format!("server error: {err}"))
}

/// What it takes to serve one more namespace, and the namespaces being served: their
/// states (told when shutdown begins) and their sweepers (awaited at the end).
#[derive(Clone)]
struct Namespaces {
    /// Connection options, but for the namespace.
    options: ConnectOptions,
    clock: Clock,
    limits: Limits,
    /// This gateway's name in the sweepers' lease.
    gateway: String,
    /// Push deliveries, shared by every namespace.
    deliverer: Arc<crate::push::Deliverer>,
    stopped: watch::Receiver<bool>,
    running: Arc<std::sync::Mutex<Running>>,
}

#[derive(Default)]
struct Running {
    states: Vec<AppState>,
    sweepers: Vec<tokio::task::JoinHandle<()>>,
    /// Shutdown has begun: a namespace started now (by a reload under way) is told at
    /// once, so its long polls do not hold the shutdown up.
    shutting_down: bool,
}

impl Namespaces {
    /// Connects to `name`'s keys and starts its upkeep.
    async fn connect(&self, name: &NamespaceName) -> Result<AppState, String> {
        let options = ConnectOptions {
            namespace: Some(name.to_string()),
            ..self.options.clone()
        };
        let qless = Qless::connect(options)
            .await
            .map_err(|err| err.to_string())?;
        let state = AppState::new(qless, self.clock.clone(), self.limits.clone());
        self.start(&state);
        Ok(state)
    }

    /// Starts the sweeper of `state`'s namespace (one among all the gateways on this
    /// Redis: each takes its turn by lease, `sweeper.rs`) and remembers both.
    fn start(&self, state: &AppState) {
        let sweeper = tokio::spawn(sweeper::run(
            state.qless.clone(),
            state.clock.clone(),
            self.gateway.clone(),
            self.stopped.clone(),
        ));
        tokio::spawn(crate::push::run(
            self.deliverer.clone(),
            state.qless.clone(),
            state.leasing.clone(),
            state.clock.clone(),
            state.pushes_changed.clone(),
            state.shutdown.clone(),
        ));
        let mut running = self.running.lock().expect("namespaces lock");
        if running.shutting_down {
            state.begin_shutdown();
        }
        running.states.push(state.clone());
        running.sweepers.push(sweeper);
    }

    /// Re-reads the auth file on every SIGHUP and serves the namespaces that new tokens
    /// grant, until shutdown. The connections open meanwhile stay open: requests go on
    /// with the old tokens until the new ones are in place.
    async fn reload_on_hangup(self, auth: Auth, default: Option<NamespaceName>, add: AddTenant) {
        let Ok(mut hangups) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::error!("cannot listen for SIGHUP: the auth file will not be reloaded");
            return;
        };
        while hangups.recv().await.is_some() {
            if !auth.reload_and_log() {
                continue;
            }
            for name in auth.namespaces() {
                if Some(&name) == default.as_ref() || add.serves(name.as_str()) {
                    continue;
                }
                if *self.stopped.borrow() {
                    return;
                }
                match self.connect(&name).await {
                    Ok(state) => {
                        add.add(name.to_string(), state);
                        tracing::info!(namespace = %name, "serving a namespace the auth file now grants");
                    }
                    // Tried again at the next reload; its tokens get 404 meanwhile.
                    Err(err) => tracing::error!(
                        namespace = %name,
                        "cannot serve a namespace the auth file now grants: {err}"
                    ),
                }
            }
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".to_owned())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
