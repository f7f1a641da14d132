//! The accept loop's limits over real sockets (`src/connections.rs`): a server on
//! port 0 with short limits, and raw TCP clients that misbehave.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use qlessd::connections::{self, ConnectionLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::TestApp;

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

struct Server {
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    served: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(app: &TestApp, limits: ConnectionLimits) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let state = app.state.clone();
        let served = tokio::spawn(connections::serve(
            listener,
            app.router.clone(),
            async move {
                let _ = stopped.await;
                state.begin_shutdown();
            },
            limits,
        ));
        Server {
            address,
            stop: Some(stop),
            served,
        }
    }

    /// Signals shutdown and returns how long `serve` took to return.
    async fn shut_down(mut self, within: Duration) -> Duration {
        let started = Instant::now();
        self.stop.take().unwrap().send(()).unwrap();
        tokio::time::timeout(within, self.served)
            .await
            .expect("serve did not return in time")
            .unwrap()
            .unwrap();
        started.elapsed()
    }
}

fn limits() -> ConnectionLimits {
    ConnectionLimits {
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        max_connections: 100,
        shutdown_timeout: Duration::from_secs(30),
        body_timeout: Duration::from_secs(60),
    }
}

/// A response's status, its head (lowercase) and its body as JSON (`null` if none).
fn parts(response: &str) -> (u16, String, serde_json::Value) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let body = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    (status, head.to_ascii_lowercase(), body)
}

/// Reads one response head and its `content-length` body.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before a whole response: {:?}",
            String::from_utf8_lossy(&data)
        );
        data.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .map(|n| n.trim().parse::<usize>().unwrap())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return text;
            }
        }
    }
}

/// Waits until the server closes `stream` (a read returns end of file or an error),
/// failing after `within`. Any bytes read meanwhile are returned.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => data.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .expect("the server did not close the connection in time");
    data
}

#[tokio::test]
async fn a_client_sending_its_head_a_byte_at_a_time_is_closed_after_the_header_timeout() {
    let app = TestApp::start().await;
    let header_timeout = Duration::from_secs(1);
    let server = Server::start(
        &app,
        ConnectionLimits {
            header_timeout,
            ..limits()
        },
    )
    .await;
    let stream = TcpStream::connect(server.address).await.unwrap();
    let connected = Instant::now();
    let (mut reader, mut writer) = stream.into_split();
    // The slowloris: a byte every 100 ms, forever (the request line never ends).
    let dripping = tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(100));
        for byte in b"GET /healthz?".iter().chain(std::iter::repeat(&b'a')) {
            interval.tick().await;
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
        }
    });
    let mut chunk = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    let elapsed = connected.elapsed();
    dripping.abort();
    assert!(closed.is_ok(), "the slow client was never closed");
    assert!(elapsed >= header_timeout, "closed early: {elapsed:?}");
    assert!(elapsed < header_timeout * 3, "closed late: {elapsed:?}");
    server.shut_down(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_but_a_long_poll_is_not_idle() {
    let app = TestApp::start().await;
    let idle_timeout = Duration::from_secs(1);
    let server = Server::start(
        &app,
        ConnectionLimits {
            idle_timeout,
            ..limits()
        },
    )
    .await;

    let mut idle = TcpStream::connect(server.address).await.unwrap();
    idle.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut idle).await.starts_with("HTTP/1.1 200"));
    let answered = Instant::now();
    assert!(
        closed_within(&mut idle, Duration::from_secs(5))
            .await
            .is_empty()
    );
    let quiet = answered.elapsed();
    assert!(
        quiet >= idle_timeout - Duration::from_millis(50),
        "closed after {quiet:?}"
    );

    // A long poll waits twice the idle timeout and still gets its answer.
    let mut polling = TcpStream::connect(server.address).await.unwrap();
    let body = r#"{"worker": "w", "wait": 2}"#;
    let request = format!(
        "POST /v1/queues/q/pop HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    polling.write_all(request.as_bytes()).await.unwrap();
    let response = read_response(&mut polling).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The connection is still usable after the poll.
    polling.write_all(HEALTHZ).await.unwrap();
    assert!(
        read_response(&mut polling)
            .await
            .starts_with("HTTP/1.1 200")
    );
    server.shut_down(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn connections_over_the_cap_wait_unanswered_until_one_closes() {
    let app = TestApp::start().await;
    let server = Server::start(
        &app,
        ConnectionLimits {
            max_connections: 2,
            ..limits()
        },
    )
    .await;
    let mut served = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        stream.write_all(HEALTHZ).await.unwrap();
        assert!(read_response(&mut stream).await.starts_with("HTTP/1.1 200"));
        served.push(stream);
    }
    // The kernel completes the handshake (the backlog), but qlessd does not accept.
    let mut waiting = TcpStream::connect(server.address).await.unwrap();
    waiting.write_all(HEALTHZ).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), waiting.read(&mut byte)).await;
    assert!(
        early.is_err(),
        "a connection over the cap was answered: {early:?}"
    );
    drop(served.pop());
    let answered = tokio::time::timeout(Duration::from_secs(5), read_response(&mut waiting))
        .await
        .expect("the waiting connection was never served");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    server.shut_down(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_half_sent_request_does_not_hold_up_shutdown() {
    let app = TestApp::start().await;
    let server = Server::start(
        &app,
        ConnectionLimits {
            header_timeout: Duration::from_secs(60),
            ..limits()
        },
    )
    .await;
    let mut half = TcpStream::connect(server.address).await.unwrap();
    half.write_all(b"GET /heal").await.unwrap();
    let mut idle = TcpStream::connect(server.address).await.unwrap();
    idle.write_all(HEALTHZ).await.unwrap();
    read_response(&mut idle).await;
    let took = server.shut_down(Duration::from_secs(5)).await;
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    closed_within(&mut half, Duration::from_secs(1)).await;
    closed_within(&mut idle, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_request_that_never_finishes_is_dropped_at_the_shutdown_timeout() {
    let app = TestApp::start().await;
    let shutdown_timeout = Duration::from_secs(1);
    let server = Server::start(
        &app,
        ConnectionLimits {
            shutdown_timeout,
            ..limits()
        },
    )
    .await;
    // A whole head, then a body that stops short: the handler waits for the rest.
    let mut stuck = TcpStream::connect(server.address).await.unwrap();
    stuck
        .write_all(
            b"POST /v1/queues/q/jobs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"klass\":",
        )
        .await
        .unwrap();
    // The head is read once the server starts handling it; wait for that (the
    // connection is then "busy") by checking a second connection is served.
    let mut other = TcpStream::connect(server.address).await.unwrap();
    other.write_all(HEALTHZ).await.unwrap();
    read_response(&mut other).await;
    let took = server.shut_down(Duration::from_secs(5)).await;
    assert!(
        took >= shutdown_timeout - Duration::from_millis(50),
        "took {took:?}"
    );
    assert!(took < shutdown_timeout * 3, "took {took:?}");
    closed_within(&mut stuck, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_quiet_event_stream_is_not_closed_as_idle() {
    let app = TestApp::start().await;
    let idle_timeout = Duration::from_secs(1);
    let server = Server::start(
        &app,
        ConnectionLimits {
            idle_timeout,
            ..limits()
        },
    )
    .await;
    assert!(
        app.state
            .events
            .wait_subscribed(Duration::from_secs(5))
            .await
    );
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    stream
        .write_all(b"GET /v1/events HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&received).contains("\r\n\r\n") {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed before the stream began");
        received.extend_from_slice(&chunk[..n]);
    }
    assert!(String::from_utf8_lossy(&received).starts_with("HTTP/1.1 200"));
    // Nothing happens for well over the idle timeout (the stream's keep-alive comments
    // come every 15 s): the connection must stay open.
    let quiet = tokio::time::timeout(idle_timeout * 5 / 2, stream.read(&mut chunk)).await;
    assert!(
        quiet.is_err(),
        "the quiet stream was closed or written to: {quiet:?}"
    );
    // And it still carries events.
    app.post(
        "/v1/queues/q/jobs",
        serde_json::json!({"klass": "K", "data": {}}),
    )
    .await;
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
        .await
        .expect("no event after the quiet time")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&chunk[..n]).contains("put"),
        "{:?}",
        String::from_utf8_lossy(&chunk[..n])
    );
    server.shut_down(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_body_that_stalls_is_answered_408_with_a_problem_at_the_body_timeout() {
    let app = TestApp::start().await;
    let body_timeout = Duration::from_secs(1);
    let server = Server::start(
        &app,
        ConnectionLimits {
            body_timeout,
            ..limits()
        },
    )
    .await;
    // A single put and a batch (read by another extractor): a whole head, then part of
    // the body, then nothing.
    for (path, part) in [
        ("/v1/queues/q/jobs", r#"{"klass":"#),
        ("/v1/queues/q/jobs/batch", r#"{"jobs":["#),
    ] {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        let started = Instant::now();
        stream
            .write_all(
                format!(
                    "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                     content-length: 100\r\n\r\n{part}"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream))
            .await
            .expect("no answer to a stalled body");
        let took = started.elapsed();
        let (status, head, problem) = parts(&response);
        assert_eq!(status, 408, "{path}: {response}");
        assert!(
            head.contains("content-type: application/problem+json"),
            "{path}: {head}"
        );
        assert!(head.contains("connection: close"), "{path}: {head}");
        assert_eq!(problem["code"], "request_timeout", "{path}: {problem}");
        assert_eq!(problem["status"], 408, "{path}: {problem}");
        assert!(
            took >= body_timeout - Duration::from_millis(50),
            "{path}: answered after {took:?}"
        );
        assert!(took < body_timeout * 3, "{path}: answered after {took:?}");
        closed_within(&mut stream, Duration::from_secs(2)).await;
    }
    // A body that comes whole in time is served as always.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let body = r#"{"klass":"K"}"#;
    stream
        .write_all(
            format!(
                "POST /v1/queues/q/jobs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let response = read_response(&mut stream).await;
    assert_eq!(parts(&response).0, 201, "{response}");
    server.shut_down(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn oversized_heads_are_refused_with_problem_bodies() {
    let app = TestApp::start().await;
    let server = Server::start(&app, limits()).await;
    let get = |target: &str, headers: &str| {
        format!("GET {target} HTTP/1.1\r\nhost: localhost\r\n{headers}\r\n").into_bytes()
    };
    let many: String = (0..120).map(|i| format!("x-header-{i}: 1\r\n")).collect();
    let cases = [
        (
            "one 100 KB header",
            get("/healthz", &format!("x-big: {}\r\n", "a".repeat(100_000))),
            431,
            "request_header_fields_too_large",
        ),
        (
            "120 headers",
            get("/healthz", &many),
            431,
            "request_header_fields_too_large",
        ),
        (
            "a 70 KB URI",
            get(&format!("/v1/jobs?jid={}", "j".repeat(70_000)), ""),
            414,
            "uri_too_long",
        ),
    ];
    let mut raw_byte = b"GET /v1/queues/a".to_vec();
    raw_byte.extend_from_slice(b"\xffb HTTP/1.1\r\nhost: localhost\r\n\r\n");
    let cases = cases.into_iter().chain([
        (
            "a raw byte that is not UTF-8 in the path",
            raw_byte,
            400,
            "bad_request",
        ),
        (
            "the same byte percent-encoded",
            get("/v1/queues/a%FFb", ""),
            400,
            "bad_request",
        ),
    ]);
    for (what, request, expected, code) in cases {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        stream.write_all(&request).await.unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream))
            .await
            .expect("no answer");
        let (status, head, problem) = parts(&response);
        assert_eq!(status, expected, "{what}: {head}");
        assert!(
            head.contains("content-type: application/problem+json"),
            "{what}: {head}"
        );
        assert_eq!(problem["code"], code, "{what}: {response}");
        assert_eq!(problem["status"], expected, "{what}: {problem}");
    }
    // A header under the cap (a long token, say) is fine.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    stream
        .write_all(&get(
            "/healthz",
            &format!("x-fine: {}\r\n", "a".repeat(8_000)),
        ))
        .await
        .unwrap();
    let response = read_response(&mut stream).await;
    assert_eq!(parts(&response).0, 200, "{response}");
    server.shut_down(Duration::from_secs(5)).await;
}
