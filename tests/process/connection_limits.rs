//! The `qlessd` binary at the edges of its connections: long polls past
//! `--max-long-polls`, a process out of file descriptors, a descriptor limit below
//! `--max-connections`, a body that stalls and heads too large (`src/connections.rs`,
//! `src/leasing.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::RedisServer;

const BINARY: &str = env!("CARGO_BIN_EXE_qlessd");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// qlessd on a test Redis, its log in a file; killed on drop.
struct Gateway {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Gateway {
    /// Starts qlessd with `args` under `ulimit` (`-n 64`, say; the shell execs qlessd,
    /// so the child is qlessd itself), and waits until it answers.
    fn start(redis: &RedisServer, ulimit: &str, args: &[&str]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("qlessd.log");
        let port = free_port();
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit {ulimit} && exec \"$0\" \"$@\""))
            .arg(BINARY)
            .args(args)
            .env("QLESSD_REDIS_URL", redis.url())
            .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let gateway = Gateway {
            child,
            port,
            log,
            _dir: dir,
        };
        gateway.wait_for(Duration::from_secs(20), "qlessd to answer", || {
            gateway.request("GET", "/healthz", "").0 == 200
        });
        gateway
    }

    fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).unwrap()
    }

    /// One request on a connection of its own: the status and the body (0 when no
    /// answer came).
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return (0, String::new());
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = stream.write_all(request(method, path, body, "close").as_bytes());
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        status_and_body(&answer)
    }

    /// The log so far (standard output and error).
    fn log(&self) -> String {
        let mut text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.push_str(
            &std::fs::read_to_string(self.log.with_file_name("stderr.log")).unwrap_or_default(),
        );
        text
    }

    /// Polls `done` until it holds, failing after `within`.
    fn wait_for(&self, within: Duration, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + within;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "waited in vain for {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request(method: &str, path: &str, body: &str, connection: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         connection: {connection}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn status_and_body(answer: &str) -> (u16, String) {
    match answer.split_once("\r\n\r\n") {
        Some((head, body)) if head.len() >= 12 => {
            (head[9..12].parse().unwrap_or(0), body.to_owned())
        }
        _ => (0, String::new()),
    }
}

/// Reads one answer with a `content-length` body from a kept-alive connection.
fn read_answer(stream: &mut TcpStream) -> (u16, String) {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "closed before an answer: {:?}",
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
                .map_or(0, |n| n.trim().parse::<usize>().unwrap());
            if data.len() >= end + 4 + length {
                return status_and_body(&text);
            }
        }
    }
}

/// The value of the series `name` (exactly, labels included) in `/metrics`.
fn metric(gateway: &Gateway, name: &str) -> Option<f64> {
    let (_, text) = gateway.request("GET", "/metrics", "");
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[test]
fn long_polls_past_the_cap_answer_at_once_and_leave_room_for_puts() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(
        &redis,
        "-n 1024",
        &[
            "--max-connections",
            "4",
            "--max-long-polls",
            "2",
            "--max-wait",
            "30",
        ],
    );
    let pop = request(
        "POST",
        "/v1/queues/q/pop",
        r#"{"worker":"w","wait":30}"#,
        "keep-alive",
    );
    // Two long polls: the cap.
    let mut waiting: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = gateway.connect();
            stream.write_all(pop.as_bytes()).unwrap();
            stream
        })
        .collect();
    gateway.wait_for(Duration::from_secs(10), "two waiting pops", || {
        metric(&gateway, "qless_longpoll_waiters{namespace=\"\"}") == Some(2.0)
    });
    // A third answers at once, with what there is, and its connection stays usable.
    let mut third = gateway.connect();
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    third.write_all(pop.as_bytes()).unwrap();
    let (status, body) = read_answer(&mut third);
    assert_eq!((status, body.as_str()), (200, "[]"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        metric(&gateway, "qless_longpoll_cut_short_total"),
        Some(1.0)
    );
    // Three of four connections are held (the third kept alive): a put still gets in
    // at once, and one of the waiting pops leases its job.
    let started = Instant::now();
    let (status, put) = gateway.request("POST", "/v1/queues/q/jobs", r#"{"klass":"K"}"#);
    assert_eq!(status, 201, "{put}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let jid = serde_json::from_str::<serde_json::Value>(&put).unwrap()["jid"]
        .as_str()
        .unwrap()
        .to_owned();
    let stream = &mut waiting[0];
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (status, leased) = read_answer(stream);
    assert_eq!(status, 200);
    assert!(
        leased.contains(&jid),
        "the oldest waiter did not get the job: {leased}"
    );
}

/// With a single connection, the default cap lets no pop wait: a waiting one would
/// hold the only connection and the put that could feed it would never get in.
#[test]
fn by_default_a_long_poll_never_takes_the_last_connection() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(
        &redis,
        "-n 1024",
        &["--max-connections", "1", "--max-wait", "30"],
    );
    let started = Instant::now();
    let (status, body) = gateway.request("POST", "/v1/queues/q/pop", r#"{"worker":"w","wait":30}"#);
    assert_eq!((status, body.as_str()), (200, "[]"), "{}", gateway.log());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        metric(&gateway, "qless_longpoll_cut_short_total"),
        Some(1.0)
    );
    let (status, put) = gateway.request("POST", "/v1/queues/q/jobs", r#"{"klass":"K"}"#);
    assert_eq!(status, 201, "{put}");
}

#[test]
fn max_long_polls_must_leave_room_below_max_connections() {
    let redis = RedisServer::start();
    let output = Command::new(BINARY)
        .args(["--max-connections", "10", "--max-long-polls", "10"])
        .env("QLESSD_REDIS_URL", redis.url())
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let log = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    assert!(
        log.contains("--max-long-polls (10) must be below --max-connections (10)"),
        "{log}"
    );
}

/// Lines of `log` saying `what`.
fn lines_with(log: &str, what: &str) -> usize {
    log.lines().filter(|line| line.contains(what)).count()
}

#[test]
fn running_out_of_file_descriptors_is_logged_once_then_counted() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis, "-n 64", &[]);
    // More connections than the process has descriptors: accepting fails.
    let held: Vec<TcpStream> = (0..80).map(|_| gateway.connect()).collect();
    gateway.wait_for(Duration::from_secs(10), "the first accept failure", || {
        gateway.log().contains("cannot accept connections")
    });
    // The failure goes on (qlessd tries every 100 ms) for a second and a half.
    std::thread::sleep(Duration::from_millis(1500));
    drop(held);
    gateway.wait_for(Duration::from_secs(10), "accepting again", || {
        gateway.request("GET", "/healthz", "").0 == 200
            && gateway.log().contains("accepting connections again")
    });
    let log = gateway.log();
    assert_eq!(lines_with(&log, "ERROR"), 1, "{log}");
    assert_eq!(lines_with(&log, "cannot accept connections"), 1, "{log}");
    let again = log
        .lines()
        .find(|line| line.contains("accepting connections again"))
        .unwrap();
    let counted: u64 = again
        .split("failures_since_last_logged=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {again}"));
    assert!(counted >= 5, "the failures were not counted: {again}");
}

/// The soft limit on open files of process `pid`.
fn open_files_limit(pid: u32) -> u64 {
    let limits =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("limits")).unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn the_descriptor_limit_is_raised_for_max_connections_or_else_warned_about() {
    let redis = RedisServer::start();
    let warning = "--max-connections exceeds the file-descriptor limit";
    // A hard limit too low: a warning at start.
    let low = Gateway::start(&redis, "-n 256", &["--max-connections", "1000"]);
    low.wait_for(Duration::from_secs(5), "the warning", || {
        low.log().contains(warning)
    });
    assert!(low.log().contains("WARN"), "{}", low.log());
    // Room under the hard limit: the soft one is raised, with no warning.
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -H -n"])
        .output()
        .unwrap();
    let hard: u64 = String::from_utf8_lossy(&hard.stdout)
        .trim()
        .parse()
        .unwrap_or(u64::MAX);
    if hard < 2000 {
        return;
    }
    let raised = Gateway::start(&redis, "-S -n 256", &["--max-connections", "1000"]);
    assert!(
        open_files_limit(raised.child.id()) >= 1000,
        "{}",
        raised.log()
    );
    assert!(!raised.log().contains(warning), "{}", raised.log());
}

/// The binary answers a body that stalls with 408 at `--body-timeout`, and heads too
/// large (one header of 100 KB, a path of 70 KB) with 431 and 414, each with a problem
/// body, over its own sockets.
#[test]
fn a_stalled_body_and_oversized_heads_get_problem_answers_from_the_binary() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis, "-n 1024", &["--body-timeout", "1"]);

    // Half a body, then nothing: 408 after the body timeout, not the request's.
    let mut stream = gateway.connect();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    stream
        .write_all(
            b"POST /v1/queues/q/jobs HTTP/1.1\r\nhost: localhost\r\n\
              content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"klass\":",
        )
        .unwrap();
    let (status, body) = read_answer(&mut stream);
    let waited = started.elapsed();
    assert_eq!(status, 408, "{body}");
    let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problem["code"], "request_timeout", "{problem}");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    // Nothing was put.
    let (_, jobs) = gateway.request("GET", "/v1/queues/q", "");
    let counts: serde_json::Value = serde_json::from_str(&jobs).unwrap();
    assert_eq!(counts["waiting"], 0, "{counts}");

    let oversized = |head: String| {
        let mut stream = gateway.connect();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        let (status, body) = read_answer(&mut stream);
        let problem: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|err| panic!("{status}: {body:?}: {err}"));
        (status, problem["code"].as_str().unwrap_or("").to_owned())
    };
    let big_header = format!(
        "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n\r\n",
        "a".repeat(100_000)
    );
    assert_eq!(
        oversized(big_header),
        (431, "request_header_fields_too_large".to_owned())
    );
    let long_path = format!(
        "GET /v1/jobs/{} HTTP/1.1\r\nhost: localhost\r\n\r\n",
        "j".repeat(70_000)
    );
    assert_eq!(oversized(long_path), (414, "uri_too_long".to_owned()));
    // The server is unharmed.
    assert_eq!(gateway.request("GET", "/healthz", "").0, 200);
}
