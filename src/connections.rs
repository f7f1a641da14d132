//! The HTTP/1.1 accept loop, with the limits that let qlessd face a network:
//!
//! * **Header timeout.** A connection must send a request's whole head (request line
//!   and headers) within `header_timeout` of connecting, or of the first byte of a
//!   later request; otherwise it is closed. A client sending a byte a second
//!   (slowloris) holds a connection for that long, not forever.
//! * **Idle timeout.** A keep-alive connection with no request in progress and no
//!   bytes moving either way for `idle_timeout` is closed. A long poll and an event
//!   stream are requests in progress, so neither is idle; a client that stops reading
//!   its answer is.
//! * **Connection cap.** At most `max_connections` connections are served at once. At
//!   the cap the loop stops accepting: new connections wait in the kernel's listen
//!   backlog, unanswered, until a served one closes (and beyond the backlog the kernel
//!   drops or refuses them). Nothing is read from them, so they cost no memory here.
//! * **Body timeout.** A request's body must arrive whole within `body_timeout` of its
//!   head; reading it fails after that ([`BodyTimeout`]) and the request is answered
//!   408, its connection closed. A client dripping its body holds a connection that
//!   long, not for the whole request timeout.
//! * **Head size.** hyper refuses a head over its buffer (about 400 KB), with more
//!   than 100 headers, or with a URI over 64 KB, answering 431 or 414 on its own with
//!   an empty body; those answers are given a problem body here on their way out
//!   ([`Watched`]). (A single header over its own cap is refused by the request layer,
//!   `middleware.rs`.)
//! * **Bounded shutdown.** When the shutdown signal resolves, accepting stops;
//!   connections waiting for a request head are closed at once, and the others finish
//!   their request in flight and close. Whatever is left after `shutdown_timeout` is
//!   dropped, so the process exits whatever clients do.
//!
//! A failing accept (out of file descriptors, say) is logged once, then counted, with
//! a line per [`ACCEPT_ERROR_INTERVAL`] while it goes on and one when accepting works
//! again; and [`check_descriptor_limit`] makes room at start for as many descriptors
//! as `max_connections` needs, or warns that it could not.
//!
//! The listener is a TCP address or a Unix socket ([`Listener`]); a Unix socket's file
//! is made at start (replacing one left by a process that is gone) and removed at the
//! end.
//!
//! hyper's own header timer restarts whenever the connection waits for a request, so
//! it would also close idle keep-alive connections after the (short) header timeout;
//! both timeouts are therefore kept here, per connection, from what its socket and its
//! requests do ([`Activity`]).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower::Service;
use tower::util::BoxCloneSyncService;

use crate::settings::{Listen, Settings};

/// The whole application as one service: CORS (when asked for) and the request layer
/// (`middleware::RequestLayer`) around the router of the request's namespace. It is always
/// ready (every part of it is), so it may be called without `poll_ready`.
///
/// A service, not an axum `Router`: a router around the layer would only forward
/// every path to it through a catch-all route, whose match (the whole path decoded
/// and stored as a parameter) cost about 1.3k instructions a request.
pub type App = BoxCloneSyncService<Request, Response, Infallible>;

/// The connection limits (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest wait for a request's whole head.
    pub header_timeout: Duration,
    /// Longest quiet time of a connection with no request in progress.
    pub idle_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight.
    pub shutdown_timeout: Duration,
    /// Longest wait for a request's whole body, from its head.
    pub body_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            shutdown_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(20),
        }
    }
}

impl ConnectionLimits {
    /// The limits as configured.
    pub fn from_settings(settings: &Settings) -> Self {
        ConnectionLimits {
            header_timeout: Duration::from_secs(settings.header_timeout),
            idle_timeout: Duration::from_secs(settings.idle_timeout),
            max_connections: settings.max_connections as usize,
            shutdown_timeout: Duration::from_secs(settings.shutdown_timeout),
            body_timeout: Duration::from_secs(settings.body_timeout),
        }
    }
}

/// Where connections come from.
#[derive(Debug)]
pub enum Listener {
    /// A TCP socket.
    Tcp(TcpListener),
    /// A Unix socket, and its file (removed when serving ends).
    Unix(UnixListener, PathBuf),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Listener::Tcp(listener)
    }
}

impl Listener {
    /// Listens on `listen`. A Unix socket's path may hold the file of a socket nobody
    /// answers on any more (a qlessd killed before it could remove it): that file is
    /// replaced. A socket something answers on, or a file that is not a socket, is an
    /// error.
    pub async fn bind(listen: &Listen) -> io::Result<Self> {
        match listen {
            Listen::Tcp(addr) => TcpListener::bind(addr).await.map(Listener::Tcp),
            Listen::Unix(path) => {
                remove_stale_socket(path).await?;
                let listener = UnixListener::bind(path)?;
                Ok(Listener::Unix(listener, path.clone()))
            }
        }
    }
}

/// Removes `path` if it is a Unix socket that refuses connections.
async fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt as _;
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !metadata.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket",
        ));
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another server answers on this socket",
        )),
        Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
        Err(err) => Err(err),
    }
}

/// A connection just accepted.
enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then shuts
/// down within `limits.shutdown_timeout`.
pub async fn serve(
    listener: impl Into<Listener>,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> io::Result<()> {
    let listener = listener.into();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (closing, closed) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    let mut failures = AcceptFailures::default();
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = accept(&listener, &permits) => match accepted {
                Ok((accepted, permit)) => {
                    failures.recovered();
                    let (app, closed) = (app.clone(), closed.clone());
                    match accepted {
                        Accepted::Tcp(stream) => connections
                            .spawn(serve_connection(stream, app, limits, closed, permit)),
                        Accepted::Unix(stream) => connections
                            .spawn(serve_connection(stream, app, limits, closed, permit)),
                    };
                }
                Err(err) => failures.failed(err).await,
            },
        }
    }
    // Connections still in the backlog are refused from here on.
    if let Listener::Unix(_, path) = &listener
        && let Err(err) = std::fs::remove_file(path)
    {
        tracing::warn!(%err, path = %path.display(), "could not remove the socket file");
    }
    drop(listener);
    let _ = closing.send(true);
    let drained = tokio::time::timeout(limits.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            timeout_s = limits.shutdown_timeout.as_secs_f64(),
            "shutdown timeout: dropping the connections still open"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// The next connection, once the cap allows one more: until then the listener is not
/// asked, so new connections wait in the backlog.
async fn accept(
    listener: &Listener,
    permits: &Arc<Semaphore>,
) -> io::Result<(Accepted, OwnedSemaphorePermit)> {
    let permit = permits
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let listener = match listener {
        Listener::Tcp(listener) => listener,
        Listener::Unix(listener, _) => {
            let (stream, _) = listener.accept().await?;
            return Ok((Accepted::Unix(stream), permit));
        }
    };
    let (stream, _) = listener.accept().await?;
    // Small writes go out at once. Without TCP_NODELAY (Nagle's algorithm), an SSE
    // event written while the previous one is still unacknowledged waits for that
    // acknowledgement: a network round trip, or a delayed ACK of tens of milliseconds.
    // (On loopback acknowledgements are immediate, so local tests cannot tell.)
    if let Err(err) = stream.set_nodelay(true) {
        tracing::debug!(%err, "could not set TCP_NODELAY on a connection");
    }
    Ok((Accepted::Tcp(stream), permit))
}

/// How often a failing accept is logged while it goes on.
const ACCEPT_ERROR_INTERVAL: Duration = Duration::from_secs(10);

/// Accepts that failed for want of something the whole process lacks (out of file
/// descriptors, say): such a failure repeats every pause until it clears, so it is
/// logged once, then as a count per [`ACCEPT_ERROR_INTERVAL`], and once more when
/// accepting works again.
#[derive(Debug, Default)]
struct AcceptFailures {
    /// Since when accepting fails (none: it works).
    since: Option<tokio::time::Instant>,
    /// When the failures were last logged.
    logged: Option<tokio::time::Instant>,
    /// Failures since they were last logged.
    unlogged: u64,
}

impl AcceptFailures {
    /// A failed accept: one connection's trouble (reset before it was accepted) is
    /// skipped; anything else is logged as the type says, and the loop pauses briefly
    /// rather than spinning.
    async fn failed(&mut self, err: io::Error) {
        use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
        if matches!(
            err.kind(),
            ConnectionAborted | ConnectionRefused | ConnectionReset
        ) {
            tracing::debug!(%err, "a connection failed before it was accepted");
            return;
        }
        let now = tokio::time::Instant::now();
        match self.logged {
            None => {
                self.since = Some(now);
                self.logged = Some(now);
                tracing::error!(%err, "cannot accept connections");
            }
            Some(logged) if now.duration_since(logged) >= ACCEPT_ERROR_INTERVAL => {
                self.logged = Some(now);
                let failures = std::mem::take(&mut self.unlogged) + 1;
                tracing::error!(
                    %err,
                    failures,
                    over_s = now.duration_since(logged).as_secs(),
                    "still cannot accept connections"
                );
            }
            Some(_) => self.unlogged += 1,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// A connection was accepted: failures before it, if any, are over.
    fn recovered(&mut self) {
        let Some(since) = self.since.take() else {
            return;
        };
        self.logged = None;
        let unlogged = std::mem::take(&mut self.unlogged);
        tracing::warn!(
            failures_since_last_logged = unlogged,
            failing_for_s = since.elapsed().as_secs(),
            "accepting connections again"
        );
    }
}

/// Descriptors the process keeps for itself beside connections: Redis connections,
/// the listener, the runtime's own, logs, an embedded Redis's pipes.
const OWN_DESCRIPTORS: u64 = 128;

/// Makes room for `max_connections` connections in the process's file-descriptor
/// limit: the soft limit is raised toward the hard one as far as they need, and a
/// warning says so when even the hard limit is too low (accepting would then fail with
/// "too many open files" before the cap is reached).
pub fn check_descriptor_limit(max_connections: usize) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let needed = max_connections as u64 + OWN_DESCRIPTORS;
    let limit = getrlimit(Resource::Nofile);
    let Some(soft) = limit.current else {
        return;
    };
    if soft >= needed {
        return;
    }
    let raised = limit.maximum.map_or(needed, |hard| hard.min(needed));
    let soft = if raised > soft
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(raised),
                maximum: limit.maximum,
            },
        )
        .is_ok()
    {
        tracing::info!(from = soft, to = raised, "raised the file-descriptor limit");
        raised
    } else {
        soft
    };
    if soft < needed {
        tracing::warn!(
            max_connections,
            file_descriptors = soft,
            "--max-connections exceeds the file-descriptor limit (ulimit -n, with about \
             {OWN_DESCRIPTORS} for qlessd itself): past it, accepting fails with \
             \"too many open files\" instead of new connections waiting in the backlog; \
             raise the limit or lower --max-connections"
        );
    }
}

/// Serves one connection until it closes, a timeout closes it, or shutdown does.
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    app: App,
    limits: ConnectionLimits,
    mut closing: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
        rewriting: None,
    });
    let service = Tracked {
        app,
        activity: activity.clone(),
        body_timeout: limits.body_timeout,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Both timeouts are kept by `Activity` (see the module documentation).
    builder.keep_alive(true).header_read_timeout(None);
    let mut connection = pin!(builder.serve_connection(io, service));
    // One timer for the connection's life, set to the next moment a timeout could
    // expire (never later: see `Activity::next_check`). Requests do not touch it, so a
    // request costs no timer work; when it fires it is pushed further out, in place.
    let first = activity
        .next_check(limits)
        .unwrap_or_else(|_| tokio::time::Instant::now());
    let mut timer = pin!(tokio::time::sleep_until(first));
    let mut shutting_down = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(%err, "connection ended with an error");
                }
                return;
            }
            () = timer.as_mut() => match activity.next_check(limits) {
                Ok(next) => timer.as_mut().reset(next),
                Err(why) => {
                    tracing::debug!(why, "closing a connection");
                    return;
                }
            },
            _ = closing.wait_for(|closing| *closing), if !shutting_down => {
                shutting_down = true;
                if activity.awaiting_head() {
                    // No request to finish: a half-sent head would only hold shutdown up.
                    return;
                }
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// What a connection's socket and requests did, for its timeouts. Times are
/// milliseconds since the connection was accepted.
#[derive(Debug)]
struct Activity {
    accepted: tokio::time::Instant,
    /// When bytes last moved either way.
    last_io: AtomicU64,
    /// One more than when the connection started waiting for a request head (its
    /// acceptance, or the first byte after a finished request); 0 when not waiting.
    head_since: AtomicU64,
    /// Requests whose answer has not been produced yet.
    busy: AtomicUsize,
    /// The body of the request in progress did not arrive in time.
    body_late: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Activity {
            accepted: tokio::time::Instant::now(),
            last_io: AtomicU64::new(0),
            head_since: AtomicU64::new(1),
            busy: AtomicUsize::new(0),
            body_late: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        self.accepted.elapsed().as_millis() as u64
    }

    fn read(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let now = self.now();
        self.last_io.store(now, Ordering::Relaxed);
        if self.busy.load(Ordering::Relaxed) == 0 && self.head_since.load(Ordering::Relaxed) == 0 {
            self.head_since.store(now + 1, Ordering::Relaxed);
        }
    }

    fn wrote(&self, bytes: usize) {
        if bytes > 0 {
            self.last_io.store(self.now(), Ordering::Relaxed);
        }
    }

    fn request_started(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(0, Ordering::Relaxed);
        self.body_late.store(false, Ordering::Relaxed);
    }

    fn request_answered(&self) {
        self.busy.fetch_sub(1, Ordering::Relaxed);
        self.last_io.store(self.now(), Ordering::Relaxed);
    }

    fn awaiting_head(&self) -> bool {
        self.head_since.load(Ordering::Relaxed) != 0
    }

    /// When to look at the connection next, or why it has overstayed a timeout.
    ///
    /// The moment returned is never later than the earliest a timeout could expire,
    /// whatever happens meanwhile, so nothing needs to move the timer earlier: a head
    /// that begins later has its deadline at least `header_timeout` from now, and an
    /// idle time that begins later ends at least `idle_timeout` from now. (So an idle
    /// connection is looked at every `header_timeout`, a busy one every
    /// `min(header_timeout, idle_timeout)`: a timer firing, not work per request.)
    fn next_check(&self, limits: ConnectionLimits) -> Result<tokio::time::Instant, &'static str> {
        let now = self.now();
        let header = limits.header_timeout.as_millis() as u64;
        let idle = limits.idle_timeout.as_millis() as u64;
        let head_since = self.head_since.load(Ordering::Relaxed);
        let next = if head_since != 0 {
            let deadline = head_since - 1 + header;
            if now >= deadline {
                return Err("the request head took too long");
            }
            deadline.min(now + idle)
        } else if self.busy.load(Ordering::Relaxed) == 0 {
            let deadline = self.last_io.load(Ordering::Relaxed) + idle;
            if now >= deadline {
                return Err("the connection was idle too long");
            }
            deadline.min(now + header)
        } else {
            now + header.min(idle)
        };
        Ok(self.accepted + Duration::from_millis(next))
    }
}

/// The socket, reporting the bytes it moves to the connection's [`Activity`], and
/// giving hyper's own answers to a head it cannot take a problem body.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
    /// An answer of hyper's being written in its place: the replacement, how much of
    /// it is written, and how many of hyper's bytes it stands for.
    rewriting: Option<(Vec<u8>, usize, usize)>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.activity.read(buf.filled().len() - before);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> Watched<S> {
    /// Writes `bytes` from hyper, or the problem answer that replaces them when they
    /// are hyper's bodiless refusal of a head ([`problem_for_refusal`]).
    fn poll_rewrite(
        &mut self,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Option<Poll<io::Result<usize>>> {
        if self.rewriting.is_none() {
            let replacement = problem_for_refusal(bytes)?;
            self.rewriting = Some((replacement, 0, bytes.len()));
        }
        let (replacement, written, stands_for) = self.rewriting.as_mut()?;
        while *written < replacement.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &replacement[*written..]) {
                Poll::Ready(Ok(0)) => return Some(Poll::Ready(Ok(0))),
                Poll::Ready(Ok(n)) => {
                    *written += n;
                    self.activity.wrote(n);
                }
                other => return Some(other),
            }
        }
        let stands_for = *stands_for;
        self.rewriting = None;
        Some(Poll::Ready(Ok(stands_for)))
    }
}

/// hyper answers a head it refuses (a URI over 64 KB: 414; too many headers, or a
/// head over its buffer: 431) by itself, with no body and before the application sees
/// anything. Such an answer, seen on its way out, is replaced by the same status with
/// a problem body (the application's own 414 and 431 have bodies, so never match).
fn problem_for_refusal(bytes: &[u8]) -> Option<Vec<u8>> {
    // Checked first, cheaply, on every write: the status line's start.
    let status = bytes.strip_prefix(b"HTTP/1.1 4")?;
    let error = match status.get(..3)? {
        b"14 " => {
            crate::error::ApiError::UriTooLong("the URI is longer than 65534 bytes".to_owned())
        }
        b"31 " => crate::error::ApiError::HeadersTooLarge(
            "the request head has more than 100 headers or is over 400 KB".to_owned(),
        ),
        // hyper's refusal of a head it cannot parse: a byte that is not UTF-8 (or not
        // allowed) in the path, say, refused like its percent-encoded form.
        b"00 " => crate::error::ApiError::BadRequest(
            "the request line or a header is malformed (a byte that is not allowed there \
             must be percent-encoded)"
                .to_owned(),
        ),
        _ => return None,
    };
    let end = memchr::memmem::find(bytes, b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    if end + 4 != bytes.len() || !head.contains("\r\ncontent-length: 0") {
        return None;
    }
    let body = serde_json::to_vec(&error.problem()).ok()?;
    let head = head.replace(
        "\r\ncontent-length: 0",
        &format!(
            "\r\ncontent-type: application/problem+json\r\ncontent-length: {}",
            body.len()
        ),
    );
    let mut answer = head.into_bytes();
    answer.extend_from_slice(b"\r\n\r\n");
    answer.extend_from_slice(&body);
    Some(answer)
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(polled) = self.poll_rewrite(cx, buf) {
            return polled;
        }
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.activity.wrote(written);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // (A head is always hyper's first buffer.)
        if let Some(first) = bufs.iter().find(|buf| !buf.is_empty())
            && let Some(polled) = self.poll_rewrite(cx, first)
        {
            return polled;
        }
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(written)) = polled {
            self.activity.wrote(written);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The application as hyper calls it, counting the connection's requests in progress.
#[derive(Clone)]
struct Tracked {
    app: App,
    activity: Arc<Activity>,
    body_timeout: Duration,
}

type AppFuture = <App as Service<Request>>::Future;

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = Answering;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.activity.request_started();
        let request = if request.body().is_end_stream() {
            request.map(Body::new)
        } else {
            let deadline = tokio::time::Instant::now() + self.body_timeout;
            let activity = self.activity.clone();
            request.map(|body| Body::new(Timed::new(body, deadline, activity)))
        };
        Answering {
            // (The application is always ready: see [`App`].)
            future: self.app.clone().call(request),
            busy: Some(Busy(self.activity.clone())),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer being produced; the request stops counting as in progress
    /// when this is dropped (answered, or abandoned with its connection), or for a
    /// streamed body (an event stream) when the body ends.
    struct Answering {
        #[pin]
        future: AppFuture,
        busy: Option<Busy>,
    }
}

impl Future for Answering {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(mut response) = std::task::ready!(this.future.poll(cx));
        if let Some(Busy(activity)) = this.busy.as_ref()
            && activity.body_late.load(Ordering::Relaxed)
            && response.status() != axum::http::StatusCode::REQUEST_TIMEOUT
        {
            // A reader of the body that took its failure for something else (the
            // API's extractors answer 408 themselves): the answer is still 408, with
            // the request's id.
            let mut late = body_timeout_answer();
            if let Some(id) = response
                .headers_mut()
                .remove(&crate::middleware::REQUEST_ID)
            {
                late.headers_mut()
                    .insert(crate::middleware::REQUEST_ID.clone(), id);
            }
            response = late;
        }
        if response.body().size_hint().exact().is_some() {
            return Poll::Ready(Ok(response));
        }
        // A body of unknown length is streamed: an event stream is quiet between
        // events (and keep-alive comments), but it is a request in progress, not an
        // idle connection, until its body ends.
        let busy = this.busy.take();
        Poll::Ready(Ok(
            response.map(|body| Body::new(Streaming { body, _busy: busy }))
        ))
    }
}

pin_project_lite::pin_project! {
    /// A streamed body (an event stream), counting as a request in progress while it
    /// lasts.
    struct Streaming {
        #[pin]
        body: Body,
        _busy: Option<Busy>,
    }
}

impl HttpBody for Streaming {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

struct Busy(Arc<Activity>);

/// The failure of reading a body that did not arrive within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body timeout")]
pub struct BodyTimeout;

impl BodyTimeout {
    /// Whether `err`, or an error it wraps, is a [`BodyTimeout`].
    pub fn caused(err: &(dyn std::error::Error + 'static)) -> bool {
        let mut cause = Some(err);
        while let Some(err) = cause {
            if err.is::<BodyTimeout>() {
                return true;
            }
            cause = err.source();
        }
        false
    }
}

/// The answer to a request whose body came too late.
fn body_timeout_answer() -> Response {
    use axum::response::IntoResponse as _;
    crate::error::ApiError::RequestTimeout(BodyTimeout.to_string()).into_response()
}

pin_project_lite::pin_project! {
    /// A request body that fails with [`BodyTimeout`] when it has not all arrived by
    /// its deadline (and marks its connection's request as late).
    struct Timed {
        #[pin]
        body: Incoming,
        #[pin]
        deadline: tokio::time::Sleep,
        activity: Arc<Activity>,
    }
}

impl Timed {
    fn new(body: Incoming, deadline: tokio::time::Instant, activity: Arc<Activity>) -> Self {
        Timed {
            body,
            // (A timer is only registered if the body is polled while incomplete.)
            deadline: tokio::time::sleep_until(deadline),
            activity,
        }
    }
}

impl HttpBody for Timed {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::BoxError>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.body.poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        std::task::ready!(this.deadline.poll(cx));
        this.activity.body_late.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(BodyTimeout.into())))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_answered();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_refusals_of_a_head_are_given_a_problem_body() {
        let refused = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\
                        date: Sun, 29 Nov 2026 10:00:00 GMT\r\n\r\n";
        let answer = String::from_utf8(problem_for_refusal(refused).unwrap()).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
        assert!(head.contains("date: Sun"), "{head}");
        assert!(
            head.contains("content-type: application/problem+json"),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let problem: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(problem["code"], "request_header_fields_too_large");
        // The application's own answers pass untouched: they have bodies, or other
        // statuses.
        for answer in [
            &b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 90\r\n\r\n"[..],
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]",
            b"[1,2,3]",
        ] {
            assert!(problem_for_refusal(answer).is_none());
        }
    }
}
