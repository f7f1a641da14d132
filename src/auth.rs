//! Authentication and authorization: bearer tokens listed in a TOML file (by the
//! SHA-256 of their secret, never the secret), the one table ([`ROUTES`]) giving every
//! route the scope it needs, and the layer that checks each request against both.
//!
//! A request names its token with `Authorization: Bearer <secret>`. No or an unknown
//! token is a 401 with `WWW-Authenticate: Bearer`; a token without the route's scope,
//! or not granted the namespace the request addresses, is a 403. That namespace is the
//! `Qless-Namespace` header's, else the token's when it is granted exactly one, else
//! the default (`--namespace`; see `tenants`). A token restricted to some namespaces
//! never reaches the unnamed `ql:` one. The scopes: `read` (every GET and
//! the event stream), `produce` (putting jobs and creating recurring ones, changing a
//! job's dependencies), `work` (popping, heartbeats, completing, failing, retrying and
//! logging to a job), `admin` (everything else, and everything the others may do).
//! `/healthz`, `/readyz`, `/docs` and `/openapi.json` are open: orchestrators probe
//! them and the API's shape is no secret. `/metrics` needs `read`.
//!
//! The file is re-read on SIGHUP ([`Auth::reload`]): requests in flight and open
//! connections are unaffected, and a bad file keeps the tokens in use.

use std::fmt::Write as _;
use std::hash::BuildHasher as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, OnceLock};

use arc_swap::ArcSwap;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use toml::Spanned;

use crate::error::ApiError;
use crate::model::{NameError, NamespaceName, TokenName};
use crate::settings::{Settings, TokenArgs};
use crate::tenants::{self, Addressed};

/// What a token may do. `Admin` implies every other scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every GET and the event stream.
    Read,
    /// Putting jobs (one or a batch), creating recurring jobs, changing dependencies.
    Produce,
    /// Popping (every form), heartbeats, complete, fail, retry, the job log.
    Work,
    /// Everything else: configuration, pausing, cancelling, forgetting, unfailing,
    /// workers, tags, priority, requeueing, timeouts, tracking, recurring templates.
    Admin,
}

impl Scope {
    const ALL: [Scope; 4] = [Scope::Read, Scope::Produce, Scope::Work, Scope::Admin];

    /// The word used in the auth file, on the command line and in the OpenAPI document.
    pub fn word(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Produce => "produce",
            Scope::Work => "work",
            Scope::Admin => "admin",
        }
    }

    fn parse(word: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.word() == word)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, without a token.
    Open,
    /// A token with this scope (or `admin`) that reaches this server's namespace.
    Needs(Scope),
}

/// One row of [`ROUTES`]: a method and a path template as the router declares it.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE` (a HEAD is checked as its GET).
    pub method: &'static str,
    /// The template, with `{name}` parameters as in the OpenAPI document.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
}

const fn route(method: &'static str, path: &'static str, access: Access) -> Route {
    Route {
        method,
        path,
        access,
    }
}

use Access::{Needs, Open};
use Scope::{Admin, Produce, Read, Work};

/// Every route and who may call it: the one place authorization is decided. A test
/// holds it to the OpenAPI document (each operation exactly one row), so a new route
/// cannot go unlisted; a request to a path listed nowhere needs a valid token and then
/// meets the router's 404 or 405.
pub const ROUTES: &[Route] = &[
    // Probes, the documentation, metrics; the root only redirects to the dashboard,
    // whose pages ask for a token themselves.
    route("GET", "/", Open),
    route("GET", "/healthz", Open),
    route("GET", "/readyz", Open),
    route("GET", "/openapi.json", Open),
    route("GET", "/docs", Open),
    route("GET", "/docs/", Open),
    route("GET", "/docs/{*file}", Open),
    route("GET", "/metrics", Needs(Read)),
    // The dashboard (`ui`): its login, logout and assets are open; pages need `read`;
    // every action needs `admin`, the scope of its API twin (requeue, cancel, priority,
    // tags, tracking, pausing, unfailing, recurring templates, configuration).
    route("GET", "/ui/login", Open),
    route("POST", "/ui/login", Open),
    route("POST", "/ui/logout", Open),
    route("GET", "/ui/assets/htmx.min.js", Open),
    route("GET", "/ui/assets/style.css", Open),
    route("GET", "/ui", Needs(Read)),
    route("GET", "/ui/", Needs(Read)),
    route("GET", "/ui/partials/overview", Needs(Read)),
    route("GET", "/ui/live", Needs(Read)),
    route("GET", "/ui/search", Needs(Read)),
    route("POST", "/ui/search/{action}", Needs(Admin)),
    route("GET", "/ui/queues/{queue}", Needs(Read)),
    route("GET", "/ui/queues/{queue}/push", Needs(Read)),
    route("POST", "/ui/queues/{queue}/pause", Needs(Admin)),
    route("POST", "/ui/queues/{queue}/unpause", Needs(Admin)),
    route("GET", "/ui/jobs/{jid}", Needs(Read)),
    route("POST", "/ui/jobs/{jid}/{action}", Needs(Admin)),
    route("GET", "/ui/failures", Needs(Read)),
    route("GET", "/ui/failures/{group}", Needs(Read)),
    route("POST", "/ui/failures/{group}/{action}", Needs(Admin)),
    route("GET", "/ui/workers", Needs(Read)),
    route("GET", "/ui/workers/{worker}", Needs(Read)),
    route("GET", "/ui/tags", Needs(Read)),
    route("GET", "/ui/tracked", Needs(Read)),
    route("GET", "/ui/recurring", Needs(Read)),
    route("GET", "/ui/recurring/{jid}", Needs(Read)),
    route("POST", "/ui/recurring/{jid}/{action}", Needs(Admin)),
    route("GET", "/ui/throttles", Needs(Read)),
    route("GET", "/ui/config", Needs(Read)),
    route("POST", "/ui/config", Needs(Admin)),
    route("GET", "/ui/batches/{bid}", Needs(Read)),
    route("GET", "/ui/workflows/{wid}", Needs(Read)),
    // Queues.
    route("GET", "/v1/queues", Needs(Read)),
    route("GET", "/v1/queues/{queue}", Needs(Read)),
    route("DELETE", "/v1/queues/{queue}", Needs(Admin)),
    route("GET", "/v1/queues/{queue}/jobs", Needs(Read)),
    route("POST", "/v1/queues/{queue}/jobs", Needs(Produce)),
    route("POST", "/v1/queues/{queue}/jobs/batch", Needs(Produce)),
    route("POST", "/v1/queues/{queue}/recurring", Needs(Produce)),
    route("POST", "/v1/queues/{queue}/pop", Needs(Work)),
    route("POST", "/v1/pop", Needs(Work)),
    route("GET", "/v1/queues/{queue}/peek", Needs(Read)),
    route("GET", "/v1/queues/{queue}/stats", Needs(Read)),
    route("POST", "/v1/queues/{queue}/pause", Needs(Admin)),
    route("POST", "/v1/queues/{queue}/unpause", Needs(Admin)),
    // Jobs: a worker's lifecycle.
    route("POST", "/v1/jobs/{jid}/heartbeat", Needs(Work)),
    route("POST", "/v1/jobs/heartbeat", Needs(Work)),
    route("POST", "/v1/jobs/{jid}/complete", Needs(Work)),
    route("POST", "/v1/jobs/complete", Needs(Work)),
    route("POST", "/v1/jobs/{jid}/fail", Needs(Work)),
    route("POST", "/v1/jobs/{jid}/retry", Needs(Work)),
    // Workers record progress in the job's history.
    route("POST", "/v1/jobs/{jid}/log", Needs(Work)),
    // Dependencies are the producer's to declare, at put time or later.
    route("POST", "/v1/jobs/{jid}/dependencies", Needs(Produce)),
    route("DELETE", "/v1/jobs/{jid}/dependencies", Needs(Produce)),
    // Jobs: inspection.
    route("GET", "/v1/jobs", Needs(Read)),
    route("GET", "/v1/jobs/{jid}", Needs(Read)),
    route("GET", "/v1/tracked", Needs(Read)),
    route("GET", "/v1/completed", Needs(Read)),
    // Jobs: an operator's interventions. A timeout takes the job from its worker.
    route("DELETE", "/v1/jobs/{jid}", Needs(Admin)),
    route("POST", "/v1/jobs/cancel", Needs(Admin)),
    route("POST", "/v1/jobs/{jid}/requeue", Needs(Admin)),
    route("POST", "/v1/jobs/{jid}/timeout", Needs(Admin)),
    route("PUT", "/v1/jobs/{jid}/priority", Needs(Admin)),
    route("POST", "/v1/jobs/{jid}/tags", Needs(Admin)),
    route("DELETE", "/v1/jobs/{jid}/tags", Needs(Admin)),
    route("PUT", "/v1/jobs/{jid}/tracked", Needs(Admin)),
    route("DELETE", "/v1/jobs/{jid}/tracked", Needs(Admin)),
    // Events.
    route("GET", "/v1/events", Needs(Read)),
    // Recurring templates: created by producers, managed by operators.
    route("GET", "/v1/recurring/{jid}", Needs(Read)),
    route("PATCH", "/v1/recurring/{jid}", Needs(Admin)),
    route("DELETE", "/v1/recurring/{jid}", Needs(Admin)),
    route("POST", "/v1/recurring/{jid}/tags", Needs(Admin)),
    route("DELETE", "/v1/recurring/{jid}/tags", Needs(Admin)),
    // Batches and workflows: created by producers, canceled by operators.
    route("POST", "/v1/batches", Needs(Produce)),
    route("GET", "/v1/batches/{bid}", Needs(Read)),
    route("DELETE", "/v1/batches/{bid}", Needs(Admin)),
    route("POST", "/v1/batches/{bid}/jobs", Needs(Produce)),
    route("POST", "/v1/workflows", Needs(Produce)),
    route("GET", "/v1/workflows/{wid}", Needs(Read)),
    route("DELETE", "/v1/workflows/{wid}", Needs(Admin)),
    // Tags, failures, workers, configuration.
    route("GET", "/v1/tags", Needs(Read)),
    route("GET", "/v1/tags/{tag}/jobs", Needs(Read)),
    // Throttles: limits are an operator's to set.
    route("GET", "/v1/queues/{queue}/push", Needs(Admin)),
    route("PUT", "/v1/queues/{queue}/push", Needs(Admin)),
    route("DELETE", "/v1/queues/{queue}/push", Needs(Admin)),
    route("POST", "/v1/queues/{queue}/push/rotate", Needs(Admin)),
    route("GET", "/v1/throttles", Needs(Read)),
    route("GET", "/v1/throttles/{name}", Needs(Read)),
    route("PUT", "/v1/throttles/{name}", Needs(Admin)),
    route("DELETE", "/v1/throttles/{name}", Needs(Admin)),
    route("GET", "/v1/failures", Needs(Read)),
    route("GET", "/v1/failures/{group}", Needs(Read)),
    route("POST", "/v1/failures/{group}/unfail", Needs(Admin)),
    route("GET", "/v1/workers", Needs(Read)),
    route("GET", "/v1/workers/{worker}", Needs(Read)),
    route("DELETE", "/v1/workers/{worker}", Needs(Admin)),
    route("GET", "/v1/config", Needs(Read)),
    route("GET", "/v1/config/{option}", Needs(Read)),
    route("PUT", "/v1/config/{option}", Needs(Admin)),
    route("DELETE", "/v1/config/{option}", Needs(Admin)),
    // Search: finding jobs is a read; acting on every job a filter matches is an
    // operator's, as acting on one job is.
    route("GET", "/v1/search", Needs(Read)),
    route("POST", "/v1/search/{action}", Needs(Admin)),
    // Fair queues: the partitions are readers' to see, their limits an operator's.
    route("GET", "/v1/queues/{queue}/partitions", Needs(Read)),
    route("PUT", "/v1/queues/{queue}/partitions", Needs(Admin)),
];

/// Who may call `method path` by [`ROUTES`]; `None` for a route not listed.
pub fn access(method: &str, path: &str) -> Option<Access> {
    ROUTES
        .iter()
        .find(|route| route.method == method && route.path == path)
        .map(|route| route.access)
}

/// The methods [`ROUTES`] uses, in the order of [`PerMethod`]'s slots.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// The access of one path template, by method.
type PerMethod = [Option<Access>; METHODS.len()];

fn method_slot(method: &Method) -> Option<usize> {
    let method = if method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    METHODS.iter().position(|known| *known == method)
}

/// What a request's path and method meet in [`ROUTES`]: its template (for metrics,
/// the access log and spans) and who may call it. Matched once per request by the
/// request layer and handed to [`Auth::check`], so the path is routed once, not once
/// per concern.
#[derive(Debug, Clone, Copy)]
pub struct RouteMatch {
    /// The template (`/v1/jobs/{jid}`), or `"unmatched"` for a path listed nowhere.
    pub route: &'static str,
    /// Who may call it with this method; `None` when the method or path is unlisted.
    access: Option<Access>,
}

/// The route `method path` meets in [`ROUTES`].
pub fn route_of(method: &Method, path: &str) -> RouteMatch {
    static ROUTER: LazyLock<matchit::Router<(&'static str, PerMethod)>> =
        LazyLock::new(compile_routes);
    match ROUTER.at(path) {
        Ok(found) => {
            let (route, methods) = *found.value;
            RouteMatch {
                route,
                access: method_slot(method).and_then(|slot| methods[slot]),
            }
        }
        Err(_) => RouteMatch {
            route: "unmatched",
            access: None,
        },
    }
}

/// [`ROUTES`] compiled into a path router of the same kind axum uses, so a request's
/// path meets the same template that routes it.
fn compile_routes() -> matchit::Router<(&'static str, PerMethod)> {
    let mut templates: Vec<(&'static str, PerMethod)> = Vec::new();
    for route in ROUTES {
        let slot = METHODS
            .iter()
            .position(|method| *method == route.method)
            .expect("ROUTES uses the methods of METHODS");
        match templates.iter_mut().find(|(path, _)| *path == route.path) {
            Some((_, methods)) => methods[slot] = Some(route.access),
            None => {
                let mut methods = [None; METHODS.len()];
                methods[slot] = Some(route.access);
                templates.push((route.path, methods));
            }
        }
    }
    let mut router = matchit::Router::new();
    for (path, methods) in templates {
        router
            .insert(path, (path, methods))
            .expect("ROUTES holds valid, distinct templates");
    }
    router
}

/// One token of the file, ready for checking. Its `Debug` shows neither digest nor
/// secret.
struct Token {
    /// Shared with the access log of each request it lets through (a reference count,
    /// not a copy).
    name: Arc<str>,
    digest: [u8; 32],
    /// [`Scope::bit`]s.
    scopes: u8,
    /// The namespaces granted; `None`: every namespace.
    namespaces: Option<Vec<NamespaceName>>,
    /// The secret, once a request proved it (its digest matched), with its
    /// fingerprint: later requests are recognised without hashing it again.
    proven: OnceLock<(u64, Box<[u8]>)>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("scopes", &self.scopes)
            .field("namespaces", &self.namespaces)
            .finish_non_exhaustive()
    }
}

impl Token {
    fn grants(&self, scope: Scope) -> bool {
        self.scopes & (scope.bit() | Scope::Admin.bit()) != 0
    }

    /// Whether the token may use `namespace` (`None`: the unnamed `ql:` one, which
    /// only a token for every namespace reaches).
    fn reaches(&self, namespace: Option<&str>) -> bool {
        match (&self.namespaces, namespace) {
            (None, _) => true,
            (Some(granted), Some(namespace)) => granted.iter().any(|name| name == namespace),
            (Some(_), None) => false,
        }
    }

    /// The token's namespace when it is granted exactly one.
    fn only_namespace(&self) -> Option<&str> {
        match self.namespaces.as_deref() {
            Some([only]) => Some(only.as_str()),
            _ => None,
        }
    }
}

/// The tokens of one reading of the file. The second field keys the fingerprints of
/// proven secrets (random per reading). The fingerprint only picks which proven secret
/// to compare in full, so it needs a secret key, not a cryptographic hash: foldhash
/// reads a 43-character secret in about a fifth of the instructions of the standard
/// library's SipHash.
#[derive(Debug)]
struct Tokens(Vec<Token>, foldhash::quality::RandomState);

impl Tokens {
    /// The token whose digest is the presented secret's.
    ///
    /// SHA-256 costs a request about a quarter of the gateway's own work, so a secret
    /// that once matched is kept (in memory only, with the tokens of this reading) and
    /// recognised again by a keyed fingerprint and a constant-time comparison of the
    /// whole secret. The fingerprint's key is random, so a guess cannot aim at one;
    /// a guess that is not recognised is hashed and every digest compared in constant
    /// time, so the time taken tells nothing about how close it came.
    fn find(&self, secret: &[u8]) -> Option<&Token> {
        let fingerprint = self.1.hash_one(secret);
        for token in &self.0 {
            if let Some((proven, known)) = token.proven.get()
                && *proven == fingerprint
                && same_secret(known, secret)
            {
                return Some(token);
            }
        }
        let digest = sha256(secret);
        let mut found = None;
        for token in &self.0 {
            if bool::from(token.digest.ct_eq(&digest)) {
                found = Some(token);
            }
        }
        if let Some(token) = found {
            let _ = token.proven.set((fingerprint, secret.into()));
        }
        found
    }
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths: eight
/// bytes at a time, differences gathered without an early exit.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut difference = 0u64;
    let (a_words, b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in a_words.remainder().iter().zip(b_words.remainder()) {
        difference |= u64::from(x ^ y);
    }
    for (x, y) in a_words.zip(b_words) {
        let x = u64::from_ne_bytes(x.try_into().expect("eight bytes"));
        let y = u64::from_ne_bytes(y.try_into().expect("eight bytes"));
        difference = std::hint::black_box(difference | (x ^ y));
    }
    bool::from(difference.ct_eq(&0))
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut digest = [0; 32];
    digest.copy_from_slice(&Sha256::digest(bytes));
    digest
}

/// The checked tokens, shared by every request and replaced whole on reload.
#[derive(Debug, Clone)]
pub struct Auth(Arc<AuthShared>);

#[derive(Debug)]
struct AuthShared {
    tokens: ArcSwap<Tokens>,
    /// Where the tokens were read from (for reloads and messages).
    file: PathBuf,
    /// The namespace of requests that name none (`None`: the unnamed `ql:` one).
    namespace: Option<String>,
}

impl Auth {
    /// Reads and checks the token file. The error names the file, the line and the
    /// field at fault, and never quotes a value from the file.
    /// `namespace` is the default one (`--namespace`), for requests that name none.
    pub fn load(file: &Path, namespace: Option<&str>) -> Result<Self, String> {
        let tokens = read_tokens(file)?;
        Ok(Auth(Arc::new(AuthShared {
            tokens: ArcSwap::from_pointee(tokens),
            file: file.to_owned(),
            namespace: namespace.map(str::to_owned),
        })))
    }

    /// Re-reads the file. On an error the tokens in use stay. Returns how many tokens
    /// the file now holds.
    pub fn reload(&self) -> Result<usize, String> {
        let tokens = read_tokens(&self.0.file)?;
        let count = tokens.0.len();
        self.0.tokens.store(Arc::new(tokens));
        Ok(count)
    }

    /// Every namespace some token is granted, in file order, without repeats. A
    /// gateway serves these (read at start-up, and again after each reload).
    pub fn namespaces(&self) -> Vec<NamespaceName> {
        let mut names: Vec<NamespaceName> = Vec::new();
        for token in &self.0.tokens.load().0 {
            for name in token.namespaces.iter().flatten() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names
    }

    /// Re-reads the file as [`Auth::reload`] does and logs the outcome: whether the
    /// new tokens are in use.
    pub fn reload_and_log(&self) -> bool {
        match self.reload() {
            Ok(count) => {
                tracing::info!(file = %self.0.file.display(), tokens = count, "auth file reloaded");
                true
            }
            Err(message) => {
                tracing::error!(
                    "auth file not reloaded, the previous tokens stay in use: {message}"
                );
                false
            }
        }
    }

    /// Decides whether the request, which met `matched` in [`ROUTES`], may go on to
    /// the router, and which namespace it addresses when its token decides that
    /// ([`Addressed`]). Answers the name of the token it was let through with (none
    /// for an open route), for the access log.
    pub fn check(
        &self,
        request: &mut Request,
        matched: RouteMatch,
    ) -> Result<Option<Arc<str>>, ApiError> {
        let needed = matched.access;
        if needed == Some(Access::Open) {
            // The login form keeps only a token this server knows.
            if matched.route == "/ui/login" {
                let check = LoginCheck(self.clone());
                request.extensions_mut().insert(check);
            }
            return Ok(None);
        }
        let tokens = self.0.tokens.load();
        // The dashboard's pages carry the token in its HttpOnly cookie instead.
        let secret = match bearer(request.headers()) {
            Ok(secret) => secret,
            Err(err) if is_dashboard(request.uri().path()) => {
                ui_cookie(request.headers()).ok_or(err)?.as_bytes()
            }
            Err(err) => return Err(err),
        };
        let token = tokens.find(secret).ok_or_else(|| {
            ApiError::Unauthorized("the bearer token is not one this server knows".to_owned())
        })?;
        let grants = Grants(token.scopes);
        // An unlisted route needs a valid token only: the router answers 404 or 405.
        let Some(Access::Needs(scope)) = needed else {
            return Ok(Some(token.name.clone()));
        };
        // Without a `Qless-Namespace` header: the token's only namespace, else the
        // default one.
        let named = tenants::named(request.headers())?;
        let by_token = match named {
            Some(_) => None,
            None => token
                .only_namespace()
                .filter(|only| Some(*only) != self.0.namespace.as_deref()),
        };
        let target = named.or(by_token).or(self.0.namespace.as_deref());
        if !token.reaches(target) {
            return Err(ApiError::Forbidden(match target {
                Some(name) => format!(
                    "the token `{}` is not granted the namespace `{name}`",
                    token.name
                ),
                None => format!(
                    "the token `{}` is not granted the unnamed namespace; name one with \
                     the Qless-Namespace header",
                    token.name
                ),
            }));
        }
        if !token.grants(scope) {
            return Err(ApiError::Forbidden(format!(
                "the token `{}` lacks the `{}` scope this needs",
                token.name,
                scope.word()
            )));
        }
        if scope == Scope::Admin {
            tracing::info!(
                token = %token.name,
                namespace = target.unwrap_or(""),
                method = %request.method(),
                path = request.uri().path(),
                "admin action"
            );
            // For the handlers that log what an operator did (bulk actions): by name.
            let name = ActingToken(token.name.clone());
            request.extensions_mut().insert(name);
        }
        if let Some(name) = by_token {
            let addressed = Addressed(name.to_owned());
            request.extensions_mut().insert(addressed);
        }
        // Only the dashboard reads the grants (to show the actions the token may
        // take): an extension costs the API's requests an allocation or two.
        if is_dashboard(request.uri().path()) {
            request.extensions_mut().insert(grants);
        }
        // `/metrics` shows a token the series of its namespaces only.
        if request.uri().path() == "/metrics" {
            let seen = SeenNamespaces(token.namespaces.clone());
            request.extensions_mut().insert(seen);
        }
        Ok(Some(token.name.clone()))
    }
}

/// Whether `path` is one of the dashboard's (`/ui`, `/ui/...`).
fn is_dashboard(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// The answer to a request `check` refused: the problem, except that a dashboard page
/// without a (known) token goes to the login form.
pub fn refusal(refused: ApiError, method: &Method, path: &str) -> Response {
    match refused {
        ApiError::Unauthorized(_) if method == Method::GET && is_dashboard(path) => {
            axum::response::Redirect::to("/ui/login").into_response()
        }
        refused => refused.into_response(),
    }
}

/// The scopes of the token a request was let through with (a request extension, so
/// the dashboard shows only the actions the token may take). Absent without
/// `--auth-file`, where everything is allowed.
#[derive(Debug, Clone, Copy)]
pub struct Grants(u8);

impl Grants {
    /// Whether the token has `scope` (or `admin`).
    pub fn allow(self, scope: Scope) -> bool {
        self.0 & (scope.bit() | Scope::Admin.bit()) != 0
    }
}

/// The name of the token an `admin` request was let through with (a request
/// extension), for handlers that log what was done and by whom. Absent without
/// `--auth-file`.
#[derive(Debug, Clone)]
pub struct ActingToken(pub Arc<str>);

/// The namespaces whose figures a `/metrics` request's token may see (`None`: every
/// namespace, and the figures of none, such as HTTP and Redis calls).
#[derive(Debug, Clone)]
pub struct SeenNamespaces(pub Option<Vec<NamespaceName>>);

/// The cookie the dashboard keeps the token in (`HttpOnly`, `SameSite=Strict`, path
/// `/ui`), set by its login form.
pub const UI_COOKIE: &str = "qlessd_token";

/// The token in the dashboard's cookie. Read for requests to `/ui` only: the API
/// takes bearer headers alone, so a browser's cookie can never call it.
fn ui_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == UI_COOKIE)
        .map(|(_, secret)| secret)
        .filter(|secret| !secret.is_empty())
}

/// The secret a dashboard request presents, as [`Auth::check`] reads it: its bearer
/// header's, else its cookie's. The dashboard's session is tied to it.
pub fn dashboard_secret(headers: &HeaderMap) -> Option<&[u8]> {
    bearer(headers)
        .ok()
        .or_else(|| ui_cookie(headers).map(str::as_bytes))
}

/// Put by [`Auth::check`] on a request to the dashboard's login form (with
/// `--auth-file`), so that the form keeps only a token this server knows.
#[derive(Debug, Clone)]
pub struct LoginCheck(Auth);

impl LoginCheck {
    /// Whether `secret` is one of the tokens in use.
    pub fn knows(&self, secret: &str) -> bool {
        self.0.0.tokens.load().find(secret.as_bytes()).is_some()
    }
}

/// The secret of an `Authorization: Bearer <secret>` header.
fn bearer(headers: &HeaderMap) -> Result<&[u8], ApiError> {
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::Unauthorized("this needs an `Authorization: Bearer` token".into())
    })?;
    let malformed =
        || ApiError::Unauthorized("the Authorization header is not `Bearer <token>`".into());
    // Read as bytes, as every request pays for it: the scheme, the secret, and spaces
    // around the secret when there are any.
    const SCHEME: &[u8] = b"bearer ";
    let bytes = value.as_bytes();
    if bytes.len() <= SCHEME.len() || !bytes[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
        return Err(malformed());
    }
    let mut secret = &bytes[SCHEME.len()..];
    while let [b' ', rest @ ..] = secret {
        secret = rest;
    }
    while let [rest @ .., b' '] = secret {
        secret = rest;
    }
    // Visible ASCII only (no space, tab or byte above 0x7e), checked without an early
    // exit so that the check runs many bytes at a time.
    let visible = secret.iter().fold(true, |visible, &byte| {
        visible & (byte.wrapping_sub(0x21) < 0x5e)
    });
    if secret.is_empty() || !visible {
        return Err(malformed());
    }
    Ok(secret)
}

/// The tokens `--auth-file` names, or none: then qlessd only serves on a loopback
/// address, unless `--allow-unauthenticated` says the network is trusted.
pub fn from_settings(settings: &Settings) -> Result<Option<Auth>, String> {
    if let Some(file) = &settings.auth_file {
        return Auth::load(file, settings.namespace.as_ref().map(NamespaceName::as_str)).map(Some);
    }
    if !settings.listen.is_local() {
        if !settings.allow_unauthenticated {
            return Err(format!(
                "refusing to serve {} without authentication: anyone who reaches it could \
                 read, change and delete every job. Make a token with \
                 `qlessd token --name NAME --scope produce [--scope work] [--namespace NS]`, \
                 add the entry it prints to a file and pass it as --auth-file \
                 (QLESSD_AUTH_FILE); or, on a network you trust, pass \
                 --allow-unauthenticated (QLESSD_ALLOW_UNAUTHENTICATED=true)",
                settings.listen
            ));
        }
        tracing::warn!(listen = %settings.listen, "serving without authentication");
    }
    Ok(None)
}

/// `qlessd token`: a new secret (32 bytes from the operating system's generator, in
/// hex) and the auth-file entry holding its SHA-256.
pub fn new_token(args: &TokenArgs) -> Result<(String, String), String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|err| format!("no randomness from the OS: {err}"))?;
    let secret = hex(&bytes);
    fn quoted(words: &[impl std::fmt::Display]) -> String {
        let words: Vec<String> = words.iter().map(|word| format!("\"{word}\"")).collect();
        format!("[{}]", words.join(", "))
    }
    let mut entry = format!(
        "[[tokens]]\nname = \"{}\"\nsha256 = \"{}\"\nscopes = {}\n",
        args.name,
        hex(&sha256(secret.as_bytes())),
        quoted(&args.scopes)
    );
    if !args.namespaces.is_empty() {
        let _ = writeln!(entry, "namespaces = {}", quoted(&args.namespaces));
    }
    Ok((secret, entry))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(digest)
}

/// The file's shape; every value keeps its place for error messages.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tokens: Option<Vec<Spanned<FileToken>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToken {
    name: Spanned<String>,
    sha256: Spanned<String>,
    scopes: Spanned<Vec<Spanned<String>>>,
    namespaces: Option<Spanned<Vec<Spanned<String>>>>,
}

fn read_tokens(file: &Path) -> Result<Tokens, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|err| format!("cannot read the auth file {}: {err}", file.display()))?;
    parse_tokens(&text).map_err(|message| format!("{}:{message}", file.display()))
}

/// Checks a whole file: the error starts with the line number and names the field.
fn parse_tokens(text: &str) -> Result<Tokens, String> {
    let line = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let parsed: File = toml::from_str(text).map_err(|err| {
        let at = err.span().map_or(1, |span| line(span.start));
        format!("{at}: {}", redact(err.message()))
    })?;
    let Some(entries) = parsed.tokens.filter(|entries| !entries.is_empty()) else {
        return Err("1: no [[tokens]]: every request would be refused".to_owned());
    };
    let mut tokens: Vec<(Token, usize)> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let entry = entry.get_ref();
        let fail = |span: std::ops::Range<usize>, field: &str, why: &str| {
            format!("{}: tokens[{index}].{field}: {why}", line(span.start))
        };
        let name: TokenName = entry
            .name
            .get_ref()
            .parse()
            .map_err(|why: NameError| fail(entry.name.span(), "name", &why.to_string()))?;
        if let Some((_, at)) = tokens.iter().find(|(token, _)| name == *token.name) {
            return Err(fail(
                entry.name.span(),
                "name",
                &format!("`{name}` already names the token on line {at}"),
            ));
        }
        let digest = unhex(entry.sha256.get_ref()).ok_or_else(|| {
            fail(
                entry.sha256.span(),
                "sha256",
                "not 64 hexadecimal digits (the SHA-256 of the secret, as `qlessd token` \
                 prints it)",
            )
        })?;
        if let Some((token, _)) = tokens.iter().find(|(token, _)| token.digest == digest) {
            return Err(fail(
                entry.sha256.span(),
                "sha256",
                &format!("the same digest as the token `{}`", token.name),
            ));
        }
        let mut scopes = 0;
        for word in entry.scopes.get_ref() {
            let scope = Scope::parse(word.get_ref()).ok_or_else(|| {
                fail(
                    word.span(),
                    "scopes",
                    "an unknown scope (one of read, produce, work, admin)",
                )
            })?;
            scopes |= scope.bit();
        }
        if scopes == 0 {
            return Err(fail(
                entry.scopes.span(),
                "scopes",
                "empty (give at least one of read, produce, work, admin)",
            ));
        }
        let namespaces = match &entry.namespaces {
            None => None,
            Some(granted) if granted.get_ref().is_empty() => {
                return Err(fail(
                    granted.span(),
                    "namespaces",
                    "empty (leave it out to grant every namespace)",
                ));
            }
            Some(granted) => {
                let mut names = Vec::with_capacity(granted.get_ref().len());
                for word in granted.get_ref() {
                    let name: NamespaceName =
                        word.get_ref().parse().map_err(|why: NameError| {
                            fail(word.span(), "namespaces", &why.to_string())
                        })?;
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                Some(names)
            }
        };
        let token = Token {
            name: String::from(name).into(),
            digest,
            scopes,
            namespaces,
            proven: OnceLock::new(),
        };
        tokens.push((token, line(entry.name.span().start)));
    }
    let tokens = tokens.into_iter().map(|(token, _)| token).collect();
    Ok(Tokens(tokens, foldhash::quality::RandomState::default()))
}

/// A TOML error message quotes the offending string; from this file that might be a
/// secret pasted in the wrong place, so the quote is dropped.
fn redact(message: &str) -> String {
    match (message.find('"'), message.rfind('"')) {
        (Some(first), Some(last)) if first < last => {
            format!("{}\"…\"{}", &message[..first], &message[last + 1..])
        }
        _ => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn entry(fields: &str) -> String {
        format!("[[tokens]]\nname = \"a\"\n{fields}\n")
    }

    #[test]
    fn the_bearer_secret_is_read_with_any_case_and_spacing_and_nothing_else() {
        let read = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer(&headers)
                .ok()
                .map(|secret| String::from_utf8(secret.to_vec()).unwrap())
        };
        assert_eq!(read("Bearer abc-123_x").as_deref(), Some("abc-123_x"));
        assert_eq!(read("bearer   abc  ").as_deref(), Some("abc"));
        assert_eq!(read("BEARER abc").as_deref(), Some("abc"));
        for refused in [
            "Bearer",
            "Bearer ",
            "Bearer    ",
            "Basic abc",
            "Bearerabc",
            "Bearer a b",
            "Bearer a\tb",
            "Token abc",
        ] {
            assert_eq!(read(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn a_well_formed_file_is_accepted() {
        let text = format!(
            "[[tokens]]\nname = \"billing\"\nsha256 = \"{DIGEST}\"\nscopes = [\"produce\", \
             \"read\"]\nnamespaces = [\"billing\"]\n\n[[tokens]]\nname = \"ops\"\n\
             sha256 = \"{}\"\nscopes = [\"admin\"]\n",
            DIGEST.to_uppercase().replace("9F86", "0000")
        );
        let tokens = parse_tokens(&text).unwrap();
        assert_eq!(tokens.0.len(), 2);
        let (billing, ops) = (&tokens.0[0], &tokens.0[1]);
        assert!(billing.grants(Scope::Produce) && !billing.grants(Scope::Work));
        assert!(billing.reaches(Some("billing")) && !billing.reaches(Some("shipping")));
        assert!(
            !billing.reaches(None),
            "the unnamed namespace needs an unrestricted token"
        );
        assert_eq!(billing.only_namespace(), Some("billing"));
        assert!(Scope::ALL.iter().all(|scope| ops.grants(*scope)));
        assert!(ops.reaches(Some("shipping")) && ops.reaches(None));
    }

    #[test]
    fn malformed_files_are_refused_naming_the_line_and_field() {
        let twice = format!(
            "{}{}",
            entry(&format!("sha256 = \"{DIGEST}\"\nscopes = [\"read\"]")),
            entry(&format!(
                "sha256 = \"{}\"\nscopes = [\"read\"]",
                DIGEST.replace('9', "1")
            ))
        );
        let same_digest = format!(
            "{}[[tokens]]\nname = \"b\"\nsha256 = \"{DIGEST}\"\nscopes = [\"read\"]\n",
            entry(&format!("sha256 = \"{DIGEST}\"\nscopes = [\"read\"]"))
        );
        let cases = [
            (
                entry("sha256 = \"xyz\"\nscopes = [\"read\"]"),
                "3: tokens[0].sha256",
            ),
            (
                entry(&format!("sha256 = \"{DIGEST}\"\nscopes = [\"root\"]")),
                "4: tokens[0].scopes: an unknown scope",
            ),
            (
                entry(&format!("sha256 = \"{DIGEST}\"\nscopes = []")),
                "4: tokens[0].scopes: empty",
            ),
            (
                entry(&format!(
                    "sha256 = \"{DIGEST}\"\nscopes = [\"read\"]\nnamespaces = [\"a:b\"]"
                )),
                "5: tokens[0].namespaces",
            ),
            (
                twice,
                "6: tokens[1].name: `a` already names the token on line 2",
            ),
            (
                same_digest,
                "7: tokens[1].sha256: the same digest as the token `a`",
            ),
            ("".to_owned(), "1: no [[tokens]]"),
            (entry("scopes = [\"read\"]"), "missing field `sha256`"),
        ];
        for (text, expected) in cases {
            let message = parse_tokens(&text).expect_err(expected);
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
    }

    #[test]
    fn errors_never_quote_a_string_from_the_file() {
        let text = entry("sha256 = \"s3cr3t\"\nscopes = \"s3cr3t\"");
        let message = parse_tokens(&text).err().unwrap();
        assert!(!message.contains("s3cr3t"), "{message}");
        assert!(message.starts_with("4: "), "{message}");
    }

    #[test]
    fn a_new_token_parses_and_its_secret_matches_its_digest() {
        let args = TokenArgs {
            name: "billing".parse().unwrap(),
            scopes: vec!["produce".into(), "work".into()],
            namespaces: vec!["billing".parse().unwrap()],
        };
        let (secret, entry) = new_token(&args).unwrap();
        assert_eq!(secret.len(), 64);
        assert!(!entry.contains(&secret));
        let tokens = parse_tokens(&entry).unwrap();
        let token = tokens.find(secret.as_bytes()).expect("the secret is known");
        assert_eq!(&*token.name, "billing");
        assert!(token.grants(Scope::Work) && !token.grants(Scope::Read));
        assert!(token.reaches(Some("billing")));
        assert!(tokens.find(b"not the secret").is_none());
        // Recognised again once proven; a near miss of the same length is not.
        assert!(tokens.find(secret.as_bytes()).is_some());
        let mut near = secret.clone().into_bytes();
        near[63] ^= 1;
        assert!(tokens.find(&near).is_none());
        assert!(same_secret(b"0123456789", b"0123456789"));
        assert!(!same_secret(b"0123456789", b"0123456788"));
        assert!(!same_secret(b"01234567", b"012345678"));
        assert_ne!(new_token(&args).unwrap().0, secret, "secrets are random");
    }
}
