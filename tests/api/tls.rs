//! Redis over TLS (`rediss://`): script calls, the other commands (readiness) and the
//! event subscription, against a `redis-server` serving TLS with a certificate from a
//! CA made here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use qlessd::clock::Clock;
use qlessd::core::{ConnectOptions, Qless};
use qlessd::server::{self, AppState, Limits};
use qlessd::settings::Settings;
use serde_json::json;

use crate::support::{RedisServer, START, TestApp};

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl must be installed to run the TLS tests");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA (`ca.crt`) and a certificate it signed for `localhost` (`server.crt`,
/// `server.key`), in `dir`.
pub(crate) fn make_certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=qlessd test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = DNS:localhost, IP:127.0.0.1\nbasicConstraints = CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
}

/// Whether the installed `redis-server` was built with TLS.
fn redis_has_tls() -> bool {
    let Ok(output) = Command::new("sh")
        .args(["-c", "ldd \"$(command -v redis-server)\""])
        .output()
    else {
        return false;
    };
    String::from_utf8_lossy(&output.stdout).contains("libssl")
}

struct TlsRedis {
    redis: RedisServer,
    port: u16,
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

fn start_tls_redis() -> Option<TlsRedis> {
    if !redis_has_tls() {
        eprintln!("skipped: the installed redis-server is not built with TLS");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    make_certificates(dir.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = |name: &str| dir.path().join(name).display().to_string();
    let redis = RedisServer::start_with(&[
        "--tls-port",
        &port.to_string(),
        "--tls-cert-file",
        &file("server.crt"),
        "--tls-key-file",
        &file("server.key"),
        "--tls-ca-cert-file",
        &file("ca.crt"),
        "--tls-auth-clients",
        "no",
        "--bind",
        "127.0.0.1",
    ]);
    Some(TlsRedis {
        redis,
        port,
        ca: dir.path().join("ca.crt"),
        _dir: dir,
    })
}

fn options(url: String, ca: Option<PathBuf>) -> ConnectOptions {
    ConnectOptions {
        url,
        redis_ca_file: ca,
        namespace: None,
        connect_timeout: Duration::from_secs(5),
        response_timeout: Duration::from_secs(30),
        external: false,
        group_calls: qlessd::core::BATCH_CALLS,
        replicas: Default::default(),
    }
}

#[tokio::test]
async fn jobs_and_events_travel_over_a_tls_redis_with_our_own_ca() {
    let Some(tls) = start_tls_redis() else { return };
    let url = format!("rediss://localhost:{}/0", tls.port);
    let qless = Qless::connect(options(url.clone(), Some(tls.ca.clone())))
        .await
        .expect("connect over TLS");
    let settings = Settings::for_redis(url);
    let state = AppState::new(
        qless.clone(),
        Clock::manual(START),
        Limits::from_settings(&settings),
    );
    assert!(
        state.events.wait_subscribed(Duration::from_secs(5)).await,
        "no TLS subscription"
    );
    let mut events = state.events.subscribe();
    // The app's own checks, on a TLS Redis: the same router as every other test.
    let app = TestApp {
        redis: tls.redis,
        qless,
        clock: state.clock.clone(),
        router: server::router(state.clone()),
        state,
    };
    assert_eq!(
        app.get("/readyz").await.status.as_u16(),
        200,
        "readiness over TLS"
    );
    let put = app
        .post(
            "/v1/queues/q/jobs",
            json!({"klass": "K", "data": {"over": "tls"}}),
        )
        .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let jid = put.body["jid"].as_str().unwrap().to_owned();
    let about_the_job = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let event = events.recv().await.unwrap();
            if event.payload.contains(&jid) {
                return event;
            }
        }
    })
    .await
    .expect("no event about the job over the TLS subscription");
    eprintln!("over TLS: {about_the_job:?}");
    let popped = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped.status.as_u16(), 200, "{}", popped.text);
    assert_eq!(popped.body[0]["jid"], jid.as_str());
    assert_eq!(popped.body[0]["data"], json!({"over": "tls"}));
    let tls_clients = tls_connections(&app.redis);
    assert!(
        tls_clients >= 2,
        "script calls and the subscription use TLS: {tls_clients}"
    );
}

/// How many clients are connected to `redis` on its TLS port (not the Unix socket).
fn tls_connections(redis: &RedisServer) -> usize {
    let mut conn = redis.client().get_connection().unwrap();
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut conn).unwrap();
    clients
        .lines()
        .filter(|line| line.contains("addr=127.0.0.1:"))
        .count()
}

#[tokio::test]
async fn a_tls_redis_whose_ca_is_not_trusted_is_refused_at_start_up() {
    let Some(tls) = start_tls_redis() else { return };
    let url = format!("rediss://:pw-S3cret@localhost:{}/0", tls.port);
    let err = Qless::connect(options(url.clone(), None))
        .await
        .expect_err("a server certificate from an unknown CA was accepted");
    let message = err.to_string();
    eprintln!("untrusted CA: {message}");
    assert!(!message.contains("pw-S3cret"), "{message}");
    assert!(message.contains("rediss://:***@localhost"), "{message}");
    assert!(message.contains("certificate"), "{message}");
    let missing = Qless::connect(options(url, Some(PathBuf::from("/nonexistent/ca.pem"))))
        .await
        .expect_err("a missing CA file was accepted");
    assert!(
        missing.to_string().contains("/nonexistent/ca.pem"),
        "{missing}"
    );
}
