//! Authentication as an operator meets it in the binary: `qlessd token`, the refusal
//! to serve a non-loopback address unauthenticated, reloading the file on SIGHUP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
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

/// `qlessd` with none of the authentication settings the environment might carry.
fn qlessd() -> Command {
    let mut command = Command::new(BINARY);
    command
        .env_remove("QLESSD_AUTH_FILE")
        .env_remove("QLESSD_ALLOW_UNAUTHENTICATED")
        .env_remove("QLESSD_NAMESPACE")
        .env_remove("RUST_LOG");
    command
}

/// `qlessd token ...`: (the secret, the auth-file entry).
fn make_token(args: &[&str]) -> (String, String) {
    let output = qlessd().arg("token").args(args).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let (secret, entry) = stdout
        .split_once("\n\n")
        .expect("secret, blank line, entry");
    (secret.to_owned(), entry.to_owned())
}

fn failure(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// One keep-alive HTTP/1.1 connection, read by `content-length`.
struct Connection(TcpStream);

impl Connection {
    fn open(port: u16) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Connection(stream)
    }

    /// The status of `method path` sent with `secret` as the bearer token.
    fn status(&mut self, method: &str, path: &str, secret: &str) -> u16 {
        self.send(method, path, secret, "").0
    }

    /// The status and body of `method path` sent with `secret` and a JSON `body`.
    fn send(&mut self, method: &str, path: &str, secret: &str, body: &str) -> (u16, String) {
        write!(
            self.0,
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {secret}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(self.0.read(&mut byte).unwrap(), 1, "the connection closed");
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map_or(0, |n| n.trim().parse().unwrap());
        let mut body = vec![0u8; length];
        self.0.read_exact(&mut body).unwrap();
        (
            head[9..12].parse().unwrap(),
            String::from_utf8(body).unwrap(),
        )
    }
}

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// qlessd serving `redis` on `port` with the tokens of `file`; its output goes to `log`.
fn serve(redis: &RedisServer, port: u16, file: &Path, log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    let child = qlessd()
        .env("QLESSD_REDIS_URL", redis.url())
        .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
        .env("QLESSD_AUTH_FILE", file)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_until("qlessd answers", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    child
}

fn hang_up(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).expect("SIGHUP sent");
}

#[test]
fn without_an_auth_file_a_non_loopback_address_is_refused_with_how_to_make_a_token() {
    let output = qlessd()
        .env("QLESSD_LISTEN", format!("0.0.0.0:{}", free_port()))
        .env("QLESSD_REDIS_URL", "redis://127.0.0.1:1/")
        .output()
        .unwrap();
    let stderr = failure(&output);
    assert!(stderr.contains("refusing to serve 0.0.0.0:"), "{stderr}");
    assert!(
        stderr.contains("qlessd token --name NAME --scope"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-unauthenticated"), "{stderr}");
}

#[test]
fn allow_unauthenticated_serves_a_non_loopback_address_without_tokens() {
    let redis = RedisServer::start();
    let port = free_port();
    let mut child = qlessd()
        .env("QLESSD_LISTEN", format!("0.0.0.0:{port}"))
        .env("QLESSD_REDIS_URL", redis.url())
        .env("QLESSD_ALLOW_UNAUTHENTICATED", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("qlessd answers", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let status = Connection::open(port).status("GET", "/v1/queues", "anything");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
}

#[test]
fn a_malformed_auth_file_stops_start_up_naming_the_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    std::fs::write(
        &file,
        "[[tokens]]\nname = \"ops\"\nsha256 = \"my-actual-secret\"\nscopes = [\"admin\"]\n",
    )
    .unwrap();
    let output = qlessd()
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("QLESSD_REDIS_URL", "redis://127.0.0.1:1/")
        .env("QLESSD_AUTH_FILE", &file)
        .output()
        .unwrap();
    let stderr = failure(&output);
    assert!(
        stderr.contains("tokens.toml:3: tokens[0].sha256"),
        "{stderr}"
    );
    assert!(!stderr.contains("my-actual-secret"), "{stderr}");
}

#[test]
fn sighup_reloads_the_tokens_on_open_connections_and_a_bad_file_keeps_them() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let log = dir.path().join("qlessd.log");
    let (first, first_entry) = make_token(&["--name", "first", "--scope", "admin"]);
    let (second, second_entry) = make_token(&["--name", "second", "--scope", "read"]);
    assert!(first_entry.contains("name = \"first\"") && !first_entry.contains(&first));
    std::fs::write(&file, &first_entry).unwrap();
    let port = free_port();
    let mut child = serve(&redis, port, &file, &log);
    let mut connection = Connection::open(port);
    assert_eq!(connection.status("GET", "/v1/queues", &first), 200);
    assert_eq!(connection.status("GET", "/v1/queues", &second), 401);
    // An admin action is logged with the token's name, never its secret.
    assert_eq!(connection.status("POST", "/v1/queues/q/pause", &first), 204);

    std::fs::write(&file, &second_entry).unwrap();
    hang_up(&child);
    wait_until("the new tokens serve", Duration::from_secs(10), || {
        connection.status("GET", "/v1/queues", &second) == 200
    });
    assert_eq!(connection.status("GET", "/v1/queues", &first), 401);

    std::fs::write(&file, "[[tokens]]\nname = \"broken\"\n").unwrap();
    hang_up(&child);
    let logged = || std::fs::read_to_string(&log).unwrap();
    wait_until("the bad file is reported", Duration::from_secs(10), || {
        logged().contains("auth file not reloaded")
    });
    assert_eq!(connection.status("GET", "/v1/queues", &second), 200);
    let _ = child.kill();
    let _ = child.wait();

    let log = logged();
    assert!(
        log.contains("admin action") && log.contains("first"),
        "{log}"
    );
    assert!(log.contains("missing field `sha256`"), "{log}");
    assert!(!log.contains(&first) && !log.contains(&second), "{log}");
}

#[test]
fn sighup_serves_a_namespace_that_a_new_token_grants() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let log = dir.path().join("qlessd.log");
    let (alpha, alpha_entry) = make_token(&[
        "--name",
        "alpha",
        "--scope",
        "admin",
        "--namespace",
        "alpha",
    ]);
    let (beta, beta_entry) =
        make_token(&["--name", "beta", "--scope", "admin", "--namespace", "beta"]);
    std::fs::write(&file, &alpha_entry).unwrap();
    let port = free_port();
    let mut child = serve(&redis, port, &file, &log);
    let mut connection = Connection::open(port);
    assert_eq!(connection.status("GET", "/v1/queues", &alpha), 200);

    std::fs::write(&file, format!("{alpha_entry}\n{beta_entry}")).unwrap();
    hang_up(&child);
    wait_until("the new token serves", Duration::from_secs(10), || {
        connection.status("GET", "/v1/queues", &beta) == 200
    });
    // The new namespace is served in full: a job put through it lands under its keys
    // and is leased back, and the other tenant's token does not reach it.
    let job = r#"{"klass": "Report", "data": {"n": 1}, "jid": "beta-job"}"#;
    let (status, body) = connection.send("POST", "/v1/queues/reports/jobs", &beta, job);
    assert_eq!(status, 201, "{body}");
    let mut redis_connection = redis.client().get_connection().unwrap();
    let state: Option<String> = redis::cmd("HGET")
        .arg("ql:{beta}:j:beta-job")
        .arg("state")
        .query(&mut redis_connection)
        .unwrap();
    assert_eq!(state.as_deref(), Some("waiting"));
    let (status, body) = connection.send(
        "POST",
        "/v1/queues/reports/pop",
        &beta,
        r#"{"worker": "w1", "count": 1}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("beta-job"), "{body}");
    let mut other = Connection::open(port);
    let (status, _) = other.send("GET", "/v1/jobs/beta-job", &alpha, "");
    assert_eq!(status, 404, "alpha's namespace has no such job");
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("serving a namespace the auth file now grants"),
        "{logged}"
    );
}
