//! The embedded `redis-server` supervisor.

use std::time::{Duration, Instant};

use qlessd::core::embedded::EmbeddedRedis;

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
    let redis = EmbeddedRedis::start("redis-server".as_ref(), &dir.path().join("data"))
        .await
        .unwrap();
    let url = redis.url();
    assert_eq!(config(&url, "appendonly"), "yes");
    assert_eq!(config(&url, "appendfsync"), "everysec");
    assert_eq!(config(&url, "maxmemory-policy"), "noeviction");
    assert_eq!(config(&url, "hash-max-listpack-value"), "1024");
    assert_eq!(config(&url, "zset-max-listpack-entries"), "16");
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
    let redis = EmbeddedRedis::start("redis-server".as_ref(), &dir.path().join("data"))
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
    let redis = EmbeddedRedis::start("redis-server".as_ref(), &data)
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

    let redis = EmbeddedRedis::start("redis-server".as_ref(), &data)
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
    let err = match EmbeddedRedis::start("no-such-redis-server".as_ref(), dir.path()).await {
        Ok(_) => panic!("started without a binary"),
        Err(err) => err.to_string(),
    };
    assert!(err.contains("apt-get install redis-server"), "{err}");
    assert!(err.contains("--redis-url"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}
