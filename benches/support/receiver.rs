//! The endpoint of the push benchmark: a webhook receiver that reads each POST's body
//! and answers 200 `{}` at once, counting what it answered.
//!
//! It runs on a thread of its own with a single-threaded runtime, so that its work is
//! not queued among the benchmark's other tasks (which poll Redis while deliveries go
//! on). Its CPU is this process's, reported as the client's: the figures per job that
//! matter, the gateway's and Redis's, never include it. It is hyper's bare connection
//! server, not a router: a receiver as cheap as can be leaves the two shared cores to
//! the gateway and Redis, so the rate measures qlessd rather than the receiver.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use tokio::sync::oneshot;

/// What the receiver has seen so far, shared with its connections.
#[derive(Default)]
struct Seen {
    answered: AtomicUsize,
    first: OnceLock<Instant>,
}

/// A running receiver; dropping it stops it.
pub struct Receiver {
    addr: SocketAddr,
    seen: Arc<Seen>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Starts listening on a free loopback port.
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("receiver address");
        let seen = Arc::new(Seen::default());
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::spawn({
            let seen = seen.clone();
            move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("receiver runtime");
                // Connections still open when the accept loop ends are dropped with
                // the runtime.
                runtime.block_on(serve(listener, seen, stopped));
            }
        });
        Receiver {
            addr,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The URL to subscribe a queue to.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Deliveries answered so far.
    pub fn answered(&self) -> usize {
        self.seen.answered.load(Ordering::Relaxed)
    }

    /// When the first delivery arrived, if one has.
    pub fn first(&self) -> Option<Instant> {
        self.seen.first.get().copied()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until `stopped`, each served as HTTP/1.1 with keep-alive.
async fn serve(
    listener: std::net::TcpListener,
    seen: Arc<Seen>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = &mut stopped => return,
        };
        let _ = stream.set_nodelay(true);
        let seen = seen.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| answer(seen.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Reads the delivery's body, as a real receiver would to verify its signature, and
/// answers 200 `{}`: the job is completed with `{}` as its result.
async fn answer(
    seen: Arc<Seen>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    std::hint::black_box(body.len());
    seen.first.get_or_init(Instant::now);
    seen.answered.fetch_add(1, Ordering::Relaxed);
    let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
