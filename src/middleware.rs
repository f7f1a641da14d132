//! What every request goes through, in one layer: a request id (the client's
//! `x-request-id`, or a fresh one) echoed on the response, a deadline answered with a
//! 503 problem, a panic in a handler answered with a 500 problem, a debug-level span
//! with the method, path and id (and, with `--otlp-endpoint`, the request's
//! OpenTelemetry span), the access log line and metrics of every request, a log line
//! for every 5xx answer, a header over [`MAX_HEADER_BYTES`] refused (431), the browser
//! checks of `browser.rs` and the token check of `auth.rs` (all answered before the
//! router sees the request).
//!
//! The path is matched against `auth::ROUTES` once here, and the match serves the
//! token check, the metrics, the access log and the span alike.
//!
//! These are one hand-written layer rather than tower-http's five because of cost:
//! stacked, those layers spent about a third of the gateway's instructions on a
//! heartbeat (each boxed the body or the future, cloned the state, or allocated the id
//! and its extension), and on a two-core machine that CPU is taken from Redis. Here a
//! request costs one timer, one clock read and one small header value.

use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::header::HeaderValue;
use axum::http::{HeaderName, Method, Uri};
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service};
use tracing::Span;

use crate::auth::{self, Auth};
use crate::browser::BrowserPolicy;
use crate::error::ApiError;
use crate::telemetry;

/// The header carrying the request id, both ways.
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Wraps the whole router; see the module documentation.
#[derive(Debug, Clone)]
pub struct RequestLayer {
    deadline: Duration,
    browser: BrowserPolicy,
    quiet_probes: bool,
    auth: Option<Auth>,
}

impl RequestLayer {
    /// Every request is answered within `deadline`.
    pub fn new(deadline: Duration) -> Self {
        RequestLayer {
            deadline,
            browser: BrowserPolicy::default(),
            quiet_probes: false,
            auth: None,
        }
    }

    /// Every request is checked against `auth`'s tokens (none: every request passes).
    pub fn with_auth(mut self, auth: Option<Auth>) -> Self {
        self.auth = auth;
        self
    }

    /// Health probes and metrics scrapes leave no access-log line (`--quiet-probes`).
    pub fn with_quiet_probes(mut self, quiet: bool) -> Self {
        self.quiet_probes = quiet;
        self
    }

    /// Requests a browser could forge are refused as `browser` says.
    pub fn with_browser(mut self, browser: BrowserPolicy) -> Self {
        self.browser = browser;
        self
    }
}

impl<S> Layer<S> for RequestLayer {
    type Service = RequestService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestService {
            inner,
            deadline: self.deadline,
            browser: self.browser.clone(),
            quiet_probes: self.quiet_probes,
            auth: self.auth.clone(),
        }
    }
}

/// The service of [`RequestLayer`].
#[derive(Debug, Clone)]
pub struct RequestService<S> {
    inner: S,
    deadline: Duration,
    browser: BrowserPolicy,
    quiet_probes: bool,
    auth: Option<Auth>,
}

impl<S> Service<Request> for RequestService<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RequestFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let id = request
            .headers()
            .get(&REQUEST_ID)
            .cloned()
            .unwrap_or_else(new_request_id);
        let matched = auth::route_of(request.method(), request.uri().path());
        let route = matched.route;
        let trace = telemetry::tracing_on().then(|| {
            telemetry::request_span(method_label(request.method()), route, request.headers())
        });
        // Disabled at the default `info` filter, where it costs a flag check;
        // `RUST_LOG=qlessd=debug` gives every log line its request's id.
        let span = tracing::debug_span!(
            "request",
            method = %request.method(),
            uri = %request.uri(),
            id = id.to_str().unwrap_or("-"),
        );
        let mut what = Requested {
            method: request.method().clone(),
            uri: request.uri().clone(),
            started: Instant::now(),
            route,
            quiet: self.quiet_probes && is_probe(route),
            token: None,
        };
        // The token first: a request without a valid one hears 401 whatever else is
        // wrong with it, so that only an authenticated client learns more. (Only an
        // oversized header comes before: it is not even read.)
        let authenticated = match (&self.auth, oversized_header(request.headers())) {
            (_, Some(refused)) => Err(refused),
            (None, None) => Ok(()),
            (Some(auth), None) => match auth.check(&mut request, matched) {
                Ok(token) => {
                    what.token = token;
                    Ok(())
                }
                Err(refused) => Err(auth::refusal(
                    refused,
                    request.method(),
                    request.uri().path(),
                )),
            },
        };
        let refused = match authenticated {
            Err(response) => Some(response),
            Ok(()) => self
                .browser
                .check_request(
                    request.method(),
                    request.uri().path(),
                    request.headers(),
                    axum::body::HttpBody::is_end_stream(request.body()),
                )
                .err()
                .map(IntoResponse::into_response),
        };
        if let Some(refused) = refused {
            return RequestFuture {
                state: State::Done {
                    response: Some(refused),
                },
                id,
                span,
                trace,
                what,
            };
        }
        let called = {
            let _entered = span.enter();
            std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(request)))
        };
        let state = match called {
            Ok(future) => State::Running {
                future,
                deadline: tokio::time::sleep(self.deadline),
            },
            Err(panic) => State::Done {
                response: Some(panic_to_problem(panic)),
            },
        };
        RequestFuture {
            state,
            id,
            span,
            trace,
            what,
        }
    }
}

/// The largest single header (name and value), in bytes. hyper bounds only the whole
/// head (about 400 KB) and the number of headers (100); one header as large as that
/// would be kept, logged or matched against by whatever reads it. Common servers cap
/// a header at 8 KB; twice that leaves room for long cookies and tokens.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// A 431 problem when a header is over [`MAX_HEADER_BYTES`].
fn oversized_header(headers: &axum::http::HeaderMap) -> Option<Response> {
    let (name, value) = headers
        .iter()
        .find(|(name, value)| name.as_str().len() + value.len() > MAX_HEADER_BYTES)?;
    let size = name.as_str().len() + value.len();
    let refused = ApiError::HeadersTooLarge(format!(
        "the header {} is {size} bytes, over the limit of {MAX_HEADER_BYTES} bytes",
        crate::error::echo(name.as_str())
    ));
    Some(refused.into_response())
}

/// What a failure log line says about the request.
#[derive(Debug)]
struct Requested {
    method: Method,
    uri: Uri,
    started: Instant,
    /// The route template (`/v1/jobs/{jid}`), for the metrics and the access log.
    route: &'static str,
    /// No access-log line (a probe, with `--quiet-probes`).
    quiet: bool,
    /// The name of the token the request was let through with (with `--auth-file`).
    token: Option<std::sync::Arc<str>>,
}

/// Health probes and metrics scrapes, which `--quiet-probes` keeps out of the log.
fn is_probe(route: &str) -> bool {
    matches!(route, "/healthz" | "/readyz" | "/metrics")
}

/// The method as a static string, for a metrics label (others are `OTHER`).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

pin_project_lite::pin_project! {
    /// The future of [`RequestService`]: the handler's response with the id header.
    pub struct RequestFuture<F> {
        #[pin]
        state: State<F>,
        id: HeaderValue,
        span: Span,
        // The request's OpenTelemetry span (with `--otlp-endpoint`), current while the
        // handler is polled so its script calls are children of it.
        trace: Option<telemetry::Span>,
        what: Requested,
    }

    impl<F> PinnedDrop for RequestFuture<F> {
        // A request its client abandoned still leaves its span (with no status); one
        // answered has ended it already.
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // Checked first: reading the clock for a span already ended cost every
            // request about 65 instructions.
            if let Some(trace) = this.trace.as_mut().filter(|trace| trace.is_recording()) {
                let took = this.what.started.elapsed();
                telemetry::end_request(trace, 0, took, this.id, this.what.token.as_ref());
            }
        }
    }
}

pin_project_lite::pin_project! {
    #[project = StateProjection]
    enum State<F> {
        // The handler runs, racing the deadline (whose timer is only registered if
        // the handler does not answer on its first poll).
        Running { #[pin] future: F, #[pin] deadline: tokio::time::Sleep },
        // The answer was known before any polling: building the future panicked.
        Done { response: Option<Response> },
    }
}

impl<F> Future for RequestFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = match this.state.project() {
            StateProjection::Done { response } => response.take().expect("polled after completion"),
            StateProjection::Running { future, deadline } => {
                let _entered = this.span.enter();
                let _traced = this.trace.as_mut().map(telemetry::Span::enter);
                match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
                    Ok(Poll::Ready(Ok(response))) => response,
                    Ok(Poll::Pending) => {
                        ready!(deadline.poll(cx));
                        ApiError::Unavailable("the request took too long".to_owned())
                            .into_response()
                    }
                    Err(panic) => panic_to_problem(panic),
                }
            }
        };
        response
            .headers_mut()
            .insert(REQUEST_ID.clone(), this.id.clone());
        let Requested {
            method,
            uri,
            started,
            route,
            quiet,
            token,
        } = this.what;
        let took = started.elapsed();
        let status = response.status().as_u16();
        crate::metrics::METRICS.request(method_label(method), route, status, took);
        if let Some(trace) = this.trace {
            telemetry::end_request(trace, status, took, this.id, token.as_ref());
        }
        if response.status().is_server_error() {
            tracing::warn!(
                %method,
                %uri,
                id = this.id.to_str().unwrap_or("-"),
                status = response.status().as_u16(),
                elapsed_ms = took.as_millis() as u64,
                "request answered with a server error"
            );
        }
        if !*quiet {
            match axum::body::HttpBody::size_hint(response.body()).exact() {
                // The access log: one line per request at the default level.
                Some(bytes) => log_access(method, route, status, took, this.id, bytes, token),
                // A body of unknown length (an event stream, a compressed page) is
                // logged when it ends, with the bytes sent and the whole duration.
                None => {
                    let line = AccessLine {
                        method: method.clone(),
                        route,
                        status,
                        started: *started,
                        id: this.id.clone(),
                        token: token.take(),
                    };
                    response = response.map(|body| {
                        axum::body::Body::new(LoggedBody {
                            inner: body,
                            line: Some(line),
                            bytes: 0,
                        })
                    })
                }
            }
        }
        Poll::Ready(Ok(response))
    }
}

/// The access log line of one request, written once its answer is sent.
#[derive(Debug)]
struct AccessLine {
    method: Method,
    route: &'static str,
    status: u16,
    started: Instant,
    id: HeaderValue,
    token: Option<std::sync::Arc<str>>,
}

/// Writes the access log line of a request (target `qlessd::access`).
fn log_access(
    method: &Method,
    route: &str,
    status: u16,
    took: Duration,
    id: &HeaderValue,
    bytes: u64,
    token: &Option<std::sync::Arc<str>>,
) {
    tracing::info!(
        target: "qlessd::access",
        // (As text, not `%method`: the same characters, without a `Display` call.)
        method = method.as_str(),
        route,
        status,
        // Whole microseconds: `0.51`, not `0.5098929999999999`.
        latency_ms = took.as_micros() as f64 / 1000.0,
        id = id.to_str().unwrap_or("-"),
        bytes,
        token = token.as_deref(),
        "request"
    );
}

pin_project_lite::pin_project! {
    /// A response body of unknown length, counting what it sends and writing the
    /// access log line when it ends (finished, failed, or dropped by a client that
    /// went away).
    struct LoggedBody {
        #[pin]
        inner: axum::body::Body,
        line: Option<AccessLine>,
        bytes: u64,
    }

    impl PinnedDrop for LoggedBody {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(line) = this.line.take() {
                let took = line.started.elapsed();
                log_access(&line.method, line.route, line.status, took, &line.id, *this.bytes, &line.token);
            }
        }
    }
}

impl axum::body::HttpBody for LoggedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            *this.bytes += data.len() as u64;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A fresh request id: a UUID (version 4 in form) made of random bits drawn once per
/// process with a counter mixed into its low half, so ids are unique within the
/// process, unpredictable across processes, and cost no random draw or allocation of
/// a `String` per request.
fn new_request_id() -> HeaderValue {
    static BASE: OnceLock<u128> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| uuid::Uuid::new_v4().as_u128());
    // The counter stays below 2^62, clear of the two variant bits at the top of the
    // low half; the version nibble sits in the high half and is never touched.
    let count = COUNTER.fetch_add(1, Ordering::Relaxed) & ((1 << 62) - 1);
    let id = uuid::Uuid::from_u128(base ^ u128::from(count));
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = id.hyphenated().encode_lower(&mut text);
    HeaderValue::from_str(text).expect("a UUID is a valid header value")
}

fn panic_to_problem(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "unknown panic".to_owned());
    ApiError::Internal(format!("handler panicked: {what}")).into_response()
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    fn app() -> Router {
        Router::new()
            .route("/fine", get(|| async { "fine" }))
            .route("/slow", get(|| tokio::time::sleep(Duration::from_secs(30))))
            .route(
                "/panics",
                get(|| async {
                    if true {
                        panic!("boom");
                    }
                }),
            )
            .layer(RequestLayer::new(Duration::from_millis(100)))
    }

    async fn send(path: &str, id: Option<&str>) -> (Response, serde_json::Value) {
        let mut request = Request::get(path);
        if let Some(id) = id {
            request = request.header(&REQUEST_ID, id);
        }
        let response = app()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (Response::from_parts(parts, Body::empty()), json)
    }

    fn id_of(response: &Response) -> &str {
        response.headers()[&REQUEST_ID].to_str().unwrap()
    }

    #[tokio::test]
    async fn answers_carry_a_fresh_id_or_the_one_the_client_sent() {
        let (fresh, _) = send("/fine", None).await;
        assert_eq!(fresh.status(), StatusCode::OK);
        uuid::Uuid::parse_str(id_of(&fresh)).expect("a UUID");
        let (echoed, _) = send("/fine", Some("client-chosen-7")).await;
        assert_eq!(id_of(&echoed), "client-chosen-7");
    }

    #[tokio::test]
    async fn a_request_past_its_deadline_gets_a_503_problem() {
        let started = Instant::now();
        let (response, problem) = send("/slow", None).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(problem["code"], "unavailable", "{problem}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(response.headers().contains_key(&REQUEST_ID));
    }

    #[tokio::test]
    async fn a_panicking_handler_gets_a_500_problem_without_details() {
        let (response, problem) = send("/panics", None).await;
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(problem["code"], "internal", "{problem}");
        assert!(!problem.to_string().contains("boom"), "{problem}");
        assert!(response.headers().contains_key(&REQUEST_ID));
    }

    #[test]
    fn request_ids_are_distinct_version_4_uuids() {
        let first = new_request_id();
        let second = new_request_id();
        assert_ne!(first, second);
        for id in [first, second] {
            let parsed = uuid::Uuid::parse_str(id.to_str().unwrap()).expect("a UUID");
            assert_eq!(parsed.get_version_num(), 4, "{parsed}");
            assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122, "{parsed}");
        }
    }
}
