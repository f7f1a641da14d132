//! A lean HTTP/1.1 load client for the benchmark: one keep-alive TCP connection per
//! task, requests written as bytes and responses read by `content-length`, in the
//! manner of `wrk`. A general client (URL parsing, header maps, connection pool) spends
//! as much CPU per request as the gateway does; on a two-core machine that CPU is
//! taken from the gateway and Redis, so the figures would measure the client.

use std::io::Write as _;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The bearer secret every request carries when `BENCH_AUTH` is set (the gateway
/// then runs with an auth file holding its digest; see `lifecycle.rs`).
pub const BENCH_SECRET: &str = "bench-secret-0123456789abcdef0123456789abcdef0123456789abcdef";

/// The `traceparent` every request carries when `BENCH_TRACEPARENT` is set.
pub const BENCH_TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// One keep-alive connection to the gateway.
pub struct HttpConnection {
    stream: TcpStream,
    /// Extra header lines sent with every request (the token, with `BENCH_AUTH`).
    headers: String,
    request: Vec<u8>,
    received: Vec<u8>,
}

/// A response: status and body.
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

impl HttpConnection {
    /// Opens a connection with Nagle's algorithm off, as HTTP clients do.
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect to gateway");
        stream.set_nodelay(true).expect("nodelay");
        let mut headers = match std::env::var_os("BENCH_AUTH") {
            Some(_) => format!("authorization: Bearer {BENCH_SECRET}\r\n"),
            None => String::new(),
        };
        // With `BENCH_TRACEPARENT`, requests come from a traced client: each carries
        // a sampled `traceparent`, which a put keeps with its job.
        if std::env::var_os("BENCH_TRACEPARENT").is_some() {
            headers.push_str(&format!("traceparent: {BENCH_TRACEPARENT}\r\n"));
        }
        HttpConnection {
            stream,
            headers,
            request: Vec::with_capacity(4096),
            received: Vec::with_capacity(16 * 1024),
        }
    }

    /// Sends the header `name: value` with every later request (a namespace, say).
    #[allow(dead_code)]
    pub fn add_header(&mut self, name: &str, value: &str) {
        self.headers.push_str(&format!("{name}: {value}\r\n"));
    }

    /// Sends one request and reads its response.
    pub async fn send(&mut self, method: &str, path: &str, body: &[u8]) -> HttpResponse {
        self.request.clear();
        write!(
            self.request,
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             {}content-length: {}\r\n\r\n",
            self.headers,
            body.len()
        )
        .expect("format request");
        self.request.extend_from_slice(body);
        self.stream
            .write_all(&self.request)
            .await
            .expect("write request");
        self.read_response().await
    }

    /// Sends a request that must succeed (2xx); returns the body.
    pub async fn expect_ok(&mut self, method: &str, path: &str, body: &[u8]) -> HttpResponse {
        let response = self.send(method, path, body).await;
        assert!(
            (200..300).contains(&response.status),
            "{method} {path}: {} {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        );
        response
    }

    async fn read_response(&mut self) -> HttpResponse {
        let head_end = loop {
            if let Some(at) = find(&self.received, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill().await;
        };
        let head = std::str::from_utf8(&self.received[..head_end]).expect("ASCII head");
        let status = head
            .get(9..12)
            .and_then(|code| code.parse().ok())
            .expect("status line");
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())
                    .flatten()
            })
            .expect("responses carry content-length");
        while self.received.len() < head_end + length {
            self.fill().await;
        }
        let body = self.received[head_end..head_end + length].to_vec();
        self.received.drain(..head_end + length);
        HttpResponse { status, body }
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        let read = self.stream.read(&mut chunk).await.expect("read response");
        assert!(read > 0, "the gateway closed the connection");
        self.received.extend_from_slice(&chunk[..read]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
