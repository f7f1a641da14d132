//! The `qlessd` binary facing a network: no secret in its log, and a SIGTERM that
//! ends it within the shutdown timeout whatever its clients do.

use std::io::{Read, Write};
use std::net::TcpStream;
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

/// Runs qlessd against `url` until it exits (within 20 s), returning its whole
/// output (stdout and stderr, debug logging on).
fn output_of_a_run(url: &str) -> String {
    let output = Command::new(BINARY)
        .env("QLESSD_REDIS_URL", url)
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "qlessd started with a wrong password"
    );
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text
}

#[test]
fn a_redis_password_never_appears_in_the_log_of_a_failed_start() {
    let port = free_port();
    let redis = RedisServer::start_with(&[
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--requirepass",
        "right-password",
    ]);
    let secret = "wrong-S3cret-pw";
    let cases = [
        format!("redis://:{secret}@127.0.0.1:{port}/0"),
        format!("redis://default:{secret}@127.0.0.1:{port}"),
        format!("unix://{}?pass={secret}", redis.socket().display()),
    ];
    for url in cases {
        let log = output_of_a_run(&url);
        assert!(
            !log.contains(secret),
            "the password leaked for {url}:\n{log}"
        );
        assert!(log.contains("***"), "the URL is not shown redacted:\n{log}");
        assert!(log.contains("cannot use Redis at"), "{log}");
        assert!(
            log.contains("WRONGPASS") || log.to_lowercase().contains("authentication failed"),
            "the cause is not shown: {log}"
        );
    }
}

/// Starts qlessd on a test Redis with `args`, and waits until it answers.
// The child is returned to the caller, which waits on it.
#[allow(clippy::zombie_processes)]
fn spawn(redis: &RedisServer, port: u16, args: &[&str]) -> Child {
    let mut child = Command::new(BINARY)
        .env("QLESSD_REDIS_URL", redis.url())
        .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
        .env_remove("RUST_LOG")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
                .unwrap();
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            if answer.starts_with("HTTP/1.1 200") {
                return child;
            }
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("qlessd did not start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_ends_qlessd_within_the_shutdown_timeout_whatever_clients_do() {
    let redis = RedisServer::start();
    let port = free_port();
    let mut child = spawn(
        &redis,
        port,
        &["--shutdown-timeout", "2", "--header-timeout", "60"],
    );
    // Half a request line, and a request whose body never comes.
    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(b"GET /hea").unwrap();
    let mut stuck = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stuck
        .write_all(
            b"POST /v1/queues/q/jobs HTTP/1.1\r\nhost: localhost\r\n\
              content-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        )
        .unwrap();
    let started = Instant::now();
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM sent");
    let deadline = started + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("qlessd was still running 10 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    assert!(status.success(), "{status}");
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
}

#[test]
fn help_documents_the_network_settings_with_their_environment_variables() {
    let output = Command::new(BINARY).arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    for env in [
        "QLESSD_CORS_ORIGIN",
        "QLESSD_HEADER_TIMEOUT",
        "QLESSD_IDLE_TIMEOUT",
        "QLESSD_MAX_CONNECTIONS",
        "QLESSD_MAX_LONG_POLLS",
        "QLESSD_BODY_TIMEOUT",
        "QLESSD_SHUTDOWN_TIMEOUT",
        "QLESSD_REDIS_CA_FILE",
    ] {
        assert!(help.contains(env), "--help does not mention {env}");
    }
}
