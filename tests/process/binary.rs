//! The `qlessd` binary as a newcomer runs it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(super) const BINARY: &str = env!("CARGO_BIN_EXE_qlessd");

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn status_of(url: &str) -> Option<u16> {
    let client = crate::support::http_builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    client
        .get(url)
        .send()
        .await
        .ok()
        .map(|r| r.status().as_u16())
}

pub(super) async fn wait_for_status(url: &str, want: u16, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if status_of(url).await == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{url} never answered {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn redis_pid(socket: &std::path::Path) -> Option<u32> {
    let url = format!("unix://{}", socket.display());
    let mut conn = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// Starts qlessd in embedded mode with its data in `data`, serving on `port`; its
/// log goes to `logs` (stdout and stderr).
pub(super) fn spawn_embedded(data: &std::path::Path, port: u16, logs: fn() -> Stdio) -> Child {
    spawn_embedded_on(data, &format!("127.0.0.1:{port}"), logs)
}

/// The same, serving on `listen` (any `--listen` value).
fn spawn_embedded_on(data: &std::path::Path, listen: &str, logs: fn() -> Stdio) -> Child {
    embedded(data, listen)
        .stdout(logs())
        .stderr(logs())
        .spawn()
        .unwrap()
}

/// The command that runs qlessd in embedded mode with its data in `data`, serving on
/// `listen`, for a caller to add settings to.
pub(super) fn embedded(data: &std::path::Path, listen: &str) -> Command {
    let mut command = Command::new(BINARY);
    command
        .env("QLESSD_DATA_DIR", data)
        .env("QLESSD_LISTEN", listen)
        .env_remove("QLESSD_REDIS_URL")
        .env_remove("RUST_LOG");
    command
}

#[test]
fn print_lua_prints_exactly_the_loaded_script() {
    let output = Command::new(BINARY).arg("--print-lua").output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        qlessd::core::script::SOURCE
    );
}

#[test]
fn help_documents_every_setting_with_its_environment_variable() {
    let output = Command::new(BINARY).arg("--help").output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    for env in [
        "QLESSD_LISTEN",
        "QLESSD_REDIS_URL",
        "QLESSD_DATA_DIR",
        "QLESSD_NAMESPACE",
        "QLESSD_MIN_REPLICAS_ACK",
        "QLESSD_MIN_REPLICAS_TIMEOUT_MS",
        "QLESSD_POOL_SIZE",
        "QLESSD_BODY_LIMIT",
        "QLESSD_LOG_FORMAT",
        "QLESSD_REDIS_MAXMEMORY",
    ] {
        assert!(help.contains(env), "--help lacks {env}");
    }
}

#[test]
fn a_wrong_redis_url_exits_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("unix://{}/nobody.sock", dir.path().display());
    let output = Command::new(BINARY)
        .env("QLESSD_REDIS_URL", &url)
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("qlessd: cannot"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_missing_redis_server_exits_with_an_install_hint() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BINARY)
        .env("QLESSD_REDIS_SERVER", "definitely-not-redis-server")
        .env("QLESSD_DATA_DIR", dir.path())
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("apt-get install redis-server"), "{stderr}");
}

#[tokio::test]
async fn qlessd_serves_on_embedded_redis_recovers_from_its_death_and_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let mut child = spawn_embedded(&data, port, Stdio::null);
    let base = format!("http://127.0.0.1:{port}");
    wait_for_status(&format!("{base}/healthz"), 200, Duration::from_secs(20)).await;
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(5)).await;
    assert_eq!(status_of(&format!("{base}/openapi.json")).await, Some(200));

    // Kill the embedded Redis: readiness fails, then recovers on its own.
    let socket = data.canonicalize().unwrap().join("redis.sock");
    let first = redis_pid(&socket).expect("embedded redis answers");
    Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    wait_for_status(&format!("{base}/readyz"), 503, Duration::from_secs(5)).await;
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
    let second = redis_pid(&socket).expect("restarted");
    assert_ne!(first, second);

    // SIGTERM: qlessd exits cleanly and takes its Redis down with it.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "qlessd did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    assert!(
        !std::path::Path::new(&format!("/proc/{second}")).exists(),
        "redis left running"
    );
}

#[tokio::test]
async fn a_clean_shutdown_logs_no_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = spawn_embedded(&dir.path().join("data"), port, Stdio::piped);
    let base = format!("http://127.0.0.1:{port}");
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output.status);
    let logs =
        String::from_utf8(output.stdout).unwrap() + &String::from_utf8(output.stderr).unwrap();
    assert!(logs.contains("shutting down"), "{logs}");
    assert!(!logs.contains("WARN") && !logs.contains("ERROR"), "{logs}");
    assert!(
        !logs.contains('\x1b'),
        "colour codes in a piped log: {logs:?}"
    );
}

#[tokio::test]
async fn the_embedded_redis_stops_when_qlessd_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let mut child = spawn_embedded(&data, port, Stdio::null);
    wait_for_status(
        &format!("http://127.0.0.1:{port}/readyz"),
        200,
        Duration::from_secs(20),
    )
    .await;
    let socket = data.canonicalize().unwrap().join("redis.sock");
    let redis = redis_pid(&socket).expect("embedded redis answers");
    child.kill().unwrap(); // SIGKILL: qlessd gets no chance to stop Redis itself
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{redis}")).exists()
        && !std::fs::read_to_string(format!("/proc/{redis}/stat")).is_ok_and(|s| s.contains(") Z "))
    {
        assert!(Instant::now() < deadline, "redis {redis} outlived qlessd");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_old_redis_server_stops_qlessd_with_one_line_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("fake.sh");
    std::fs::write(
        &source,
        "#!/bin/sh\necho 'Redis server v=6.0.16 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64'\n",
    )
    .unwrap();
    let fake = dir.path().join("redis-server");
    // Installed by a child process: see `fake_redis_server` in embedded.rs.
    assert!(
        Command::new("install")
            .args(["-m", "755"])
            .arg(&source)
            .arg(&fake)
            .status()
            .unwrap()
            .success()
    );
    let output = Command::new(BINARY)
        .arg("--redis-server")
        .arg(&fake)
        .env("QLESSD_DATA_DIR", dir.path().join("data"))
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env_remove("QLESSD_REDIS_URL")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("Redis 6.0"), "{stderr}");
    assert!(stderr.contains("needs Redis 7.0 or newer"), "{stderr}");
}

#[tokio::test]
async fn healthcheck_exits_0_when_ready_and_1_when_nothing_answers() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let healthcheck = |live: bool| {
        let mut cmd = Command::new(BINARY);
        cmd.arg("healthcheck")
            .env("QLESSD_LISTEN", format!("0.0.0.0:{port}"))
            .args(["--timeout", "2"]);
        if live {
            cmd.arg("--live");
        }
        cmd.output().unwrap()
    };
    let down = healthcheck(false);
    assert_eq!(down.status.code(), Some(1));
    let said = String::from_utf8(down.stderr).unwrap();
    assert!(
        said.starts_with("qlessd: cannot connect to 127.0.0.1:"),
        "{said}"
    );

    let mut child = spawn_embedded(&dir.path().join("data"), port, Stdio::null);
    wait_for_status(
        &format!("http://127.0.0.1:{port}/readyz"),
        200,
        Duration::from_secs(20),
    )
    .await;
    let ready = healthcheck(false);
    assert_eq!(ready.status.code(), Some(0), "{ready:?}");
    assert!(
        ready.stdout.is_empty() && ready.stderr.is_empty(),
        "{ready:?}"
    );
    assert_eq!(healthcheck(true).status.code(), Some(0));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn healthcheck_reaches_a_unix_socket_and_refuses_a_server_that_is_not_http() {
    // Something answers, but not in HTTP.
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_listen = other.local_addr().unwrap().to_string();
    let talker = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let (mut stream, _) = other.accept().await.unwrap();
        stream.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").await.unwrap();
    });
    let refused = tokio::task::spawn_blocking(move || healthcheck_on(&other_listen))
        .await
        .unwrap();
    talker.await.unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8(refused.stderr).unwrap();
    assert!(said.contains("did not answer HTTP"), "{said}");

    let dir = tempfile::tempdir().unwrap();
    let listen = format!("unix:{}", dir.path().join("q.sock").display());
    let mut child = spawn_embedded_on(&dir.path().join("data"), &listen, Stdio::null);
    // Polled until ready, as a container runtime does.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let ready = loop {
        let answer = healthcheck_on(&listen);
        if answer.status.code() == Some(0) || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(ready.status.code(), Some(0), "{ready:?}");
    assert!(ready.stderr.is_empty(), "{ready:?}");
}

/// `qlessd healthcheck` run against `listen`.
fn healthcheck_on(listen: &str) -> std::process::Output {
    Command::new(BINARY)
        .arg("healthcheck")
        .env("QLESSD_LISTEN", listen)
        .args(["--timeout", "2"])
        .output()
        .unwrap()
}

#[tokio::test]
async fn the_root_leads_to_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = spawn_embedded(&dir.path().join("data"), port, Stdio::null);
    let base = format!("http://127.0.0.1:{port}");
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
    let client = crate::support::http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let root = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(root.status().as_u16(), 307);
    assert_eq!(root.headers()["location"], "/ui");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_full_embedded_redis_refuses_new_jobs_with_503_keeps_the_old_ones_and_lets_them_go() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(BINARY)
        .env("QLESSD_DATA_DIR", dir.path().join("data"))
        .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
        .env("QLESSD_REDIS_MAXMEMORY", "4mb")
        .env_remove("QLESSD_REDIS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
    let client = crate::support::http();
    let data = "x".repeat(200 * 1024);
    let mut stored = Vec::new();
    let refused = loop {
        assert!(
            stored.len() < 40,
            "4 MB held {} jobs of 200 KB",
            stored.len()
        );
        let reply = client
            .post(format!("{base}/v1/queues/big/jobs"))
            .json(&serde_json::json!({"klass": "Big", "data": {"blob": data}}))
            .send()
            .await
            .unwrap();
        match reply.status().as_u16() {
            201 => stored.push(reply.json::<serde_json::Value>().await.unwrap()["jid"].clone()),
            _ => break reply,
        }
    };
    assert_eq!(refused.status().as_u16(), 503);
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "out_of_memory", "{problem}");
    assert!(!stored.is_empty(), "not one job fitted");
    // Canceling still works while Redis is full: memory can be freed through the API.
    let freed = stored.pop().unwrap();
    let freed = format!("{base}/v1/jobs/{}", freed.as_str().unwrap());
    let canceled = client.delete(&freed).send().await.unwrap();
    assert_eq!(canceled.status().as_u16(), 204);
    let gone = client.get(&freed).send().await.unwrap();
    assert_eq!(gone.status().as_u16(), 404);
    for jid in &stored {
        let job = client
            .get(format!("{base}/v1/jobs/{}", jid.as_str().unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(job.status().as_u16(), 200, "job {jid} lost");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// One request over a Unix socket (`Connection: close`): the status and the body.
async fn over_unix(
    socket: &std::path::Path,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    // A Host a reverse proxy in front of the socket would pass on: not refused.
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: queue.example.com\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer.split(' ').nth(1).unwrap().parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[tokio::test]
async fn qlessd_serves_on_a_unix_socket_replacing_a_stale_one_and_removes_it_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("qlessd.sock");
    let listen = format!("unix:{}", socket.display());
    // A socket file left by a server that is gone.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let mut child = spawn_embedded_on(&dir.path().join("data"), &listen, Stdio::null);
    let deadline = Instant::now() + Duration::from_secs(20);
    let healthcheck = || {
        Command::new(BINARY)
            .args(["healthcheck", "--listen", &listen, "--timeout", "2"])
            .output()
            .unwrap()
    };
    while !healthcheck().status.success() {
        assert!(Instant::now() < deadline, "never ready on {listen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (status, body) = over_unix(
        &socket,
        "POST",
        "/v1/queues/mail/jobs",
        r#"{"klass":"Mailer","data":{"to":"a@example.com"},"jid":"u1"}"#,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = over_unix(&socket, "GET", "/v1/jobs/u1", "").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""queue":"mail""#), "{body}");

    // A second server is not let in on a socket that answers.
    let second = Command::new(BINARY)
        .env("QLESSD_DATA_DIR", dir.path().join("data2"))
        .env("QLESSD_LISTEN", &listen)
        .env_remove("QLESSD_REDIS_URL")
        .output()
        .unwrap();
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("another server answers"), "{said}");

    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert!(child.wait().unwrap().success());
    assert!(!socket.exists(), "the socket file outlived qlessd");
}

#[tokio::test]
async fn a_second_qlessd_on_the_same_data_directory_refuses_to_start_and_touches_nothing() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("data");
    let port = free_port();
    let mut first = spawn_embedded(&dir, port, Stdio::null);
    let base = format!("http://127.0.0.1:{port}");
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
    let redis_before = redis_pid(&dir.join("redis.sock")).expect("the first one's Redis");

    let second = Command::new(BINARY)
        .env("QLESSD_DATA_DIR", &dir)
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env_remove("QLESSD_REDIS_URL")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!second.status.success(), "the second qlessd started");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&second.stdout),
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(said.contains("is in use by"), "{said}");
    assert!(said.contains(&first.id().to_string()), "{said}");
    // The first one's Redis was not stopped, and it still serves.
    assert_eq!(redis_pid(&dir.join("redis.sock")), Some(redis_before));
    wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(5)).await;
    let _ = first.kill();
    let _ = first.wait();
}

#[test]
fn help_is_short_and_by_topic_and_help_all_has_every_detail() {
    let run = |flag: &str| {
        let output = Command::new(BINARY).arg(flag).output().unwrap();
        assert!(output.status.success(), "{flag}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let short = run("--help");
    for topic in [
        "HTTP:",
        "Redis:",
        "Embedded Redis:",
        "Auth:",
        "Limits:",
        "Telemetry:",
    ] {
        assert!(
            short.lines().any(|line| line == topic),
            "no {topic}\n{short}"
        );
    }
    let long = run("--help-all");
    assert!(long.lines().count() > short.lines().count() * 2, "{long}");
    // The details of --listen are in the long form only.
    assert!(
        long.contains("unix:PATH") && !short.contains("unix:PATH"),
        "{short}"
    );
}
