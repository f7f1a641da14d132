//! The embedded `redis-server` supervisor.

use std::time::{Duration, Instant};

use qlessd::core::embedded::{EmbeddedRedis, MaxMemory};

/// Enough for any test, and a value no default would produce.
const LIMIT: MaxMemory = MaxMemory::Bytes(96 << 20);

fn redis_pid(url: &str) -> Option<u32> {
    let mut conn = redis::Client::open(url).ok()?.get_connection().ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

fn config(url: &str, name: &str) -> String {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(&mut conn)
        .unwrap();
    pair[1].clone()
}

#[tokio::test]
async fn embedded_redis_is_configured_for_a_job_queue() {
    let dir = tempfile::tempdir().unwrap();
    let redis = EmbeddedRedis::start("redis-server".as_ref(), &dir.path().join("data"), LIMIT)
        .await
        .unwrap();
    let url = redis.url();
    assert_eq!(config(&url, "appendonly"), "yes");
    assert_eq!(config(&url, "appendfsync"), "everysec");
    assert_eq!(config(&url, "maxmemory-policy"), "noeviction");
    assert_eq!(config(&url, "hash-max-listpack-value"), "1024");
    assert_eq!(config(&url, "zset-max-listpack-entries"), "0");
    assert_eq!(config(&url, "maxmemory"), (96u64 << 20).to_string());
    let pid = redis_pid(&url).unwrap();
    redis.shutdown().await;
    assert!(redis_pid(&url).is_none(), "still answering after shutdown");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} alive"
    );
    assert!(
        dir.path().join("data/appendonlydir").is_dir(),
        "no AOF written"
    );
}

#[tokio::test]
async fn embedded_redis_is_restarted_after_it_dies() {
    let dir = tempfile::tempdir().unwrap();
    let redis = EmbeddedRedis::start("redis-server".as_ref(), &dir.path().join("data"), LIMIT)
        .await
        .unwrap();
    let url = redis.url();
    let first = redis_pid(&url).unwrap();
    std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let second = loop {
        match redis_pid(&url) {
            Some(pid) if pid != first => break pid,
            _ => {
                assert!(Instant::now() < deadline, "redis-server was not restarted");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_ne!(first, second);
    redis.shutdown().await;
}

#[tokio::test]
async fn data_written_before_a_restart_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let redis = EmbeddedRedis::start("redis-server".as_ref(), &data, LIMIT)
        .await
        .unwrap();
    let url = redis.url();
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    redis::cmd("SET")
        .arg("kept")
        .arg("yes")
        .query::<()>(&mut conn)
        .unwrap();
    drop(conn);
    redis.shutdown().await;

    let redis = EmbeddedRedis::start("redis-server".as_ref(), &data, LIMIT)
        .await
        .unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let kept: Option<String> = redis::cmd("GET").arg("kept").query(&mut conn).unwrap();
    assert_eq!(kept.as_deref(), Some("yes"));
    redis.shutdown().await;
}

#[tokio::test]
async fn a_missing_redis_server_binary_says_how_to_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = match EmbeddedRedis::start("no-such-redis-server".as_ref(), dir.path(), LIMIT).await {
        Ok(_) => panic!("started without a binary"),
        Err(err) => err.to_string(),
    };
    assert!(err.contains("apt-get install redis-server"), "{err}");
    assert!(err.contains("--redis-url"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

/// A stand-in for `redis-server`: a shell script with the given body, made executable
/// by a child process (a file this process opened for writing could still be held by
/// a concurrent test's fork when it is executed, and fail with "text file busy").
fn fake_redis_server(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    let source = dir.join("fake.sh");
    std::fs::write(&source, format!("#!/bin/sh\n{body}\n")).unwrap();
    let binary = dir.join("redis-server");
    let installed = std::process::Command::new("install")
        .args(["-m", "755"])
        .arg(&source)
        .arg(&binary)
        .status()
        .unwrap();
    assert!(installed.success());
    binary
}

#[tokio::test]
async fn an_old_redis_server_is_refused_saying_what_was_found_and_what_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let old = fake_redis_server(
        dir.path(),
        r#"[ "$1" = --version ] && { echo "Redis server v=6.0.16 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64 build=6d95e1af3a2c082a"; exit 0; }
touch "$0.started"; exit 1"#,
    );
    let err = match EmbeddedRedis::start(&old, &dir.path().join("data"), LIMIT).await {
        Ok(_) => panic!("started an old redis-server"),
        Err(err) => err.to_string(),
    };
    assert!(!err.contains('\n'), "{err}");
    assert!(err.contains("Redis 6.0"), "{err}");
    assert!(err.contains("needs Redis 7.0 or newer"), "{err}");
    assert!(err.contains("apt-get install redis-server"), "{err}");
    assert!(err.contains("--redis-url"), "{err}");
    assert!(
        !dir.path().join("redis-server.started").exists(),
        "it was started anyway"
    );
}

#[tokio::test]
async fn a_redis_server_that_exits_at_start_is_quoted_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let failing = fake_redis_server(
        dir.path(),
        r#"[ "$1" = --version ] && { echo "Redis server v=7.2.4 sha=00000000:0 malloc=libc bits=64"; exit 0; }
while [ $# -gt 0 ]; do [ "$1" = --dir ] && data="$2"; shift; done
echo "*** FATAL CONFIG FILE ERROR (Redis 7.2.4) ***" >&2
echo "Bad directive or wrong number of arguments" >&2
echo "1:M 24 Nov 2026 23:00:00.000 # Can't open the append-only file: Permission denied" >> "$data/redis.log"
exit 1"#,
    );
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("redis.log"), "an earlier run's line\n").unwrap();
    let err = match EmbeddedRedis::start(&failing, &data, LIMIT).await {
        Ok(_) => panic!("a failing redis-server started"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.starts_with("embedded redis-server exited at start"),
        "{err}"
    );
    assert!(
        err.contains("Bad directive or wrong number of arguments"),
        "{err}"
    );
    assert!(err.contains("Can't open the append-only file"), "{err}");
    assert!(!err.contains("an earlier run's line"), "{err}");
}
