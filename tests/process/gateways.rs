//! Several gateways on one Redis, as a deployment runs them: they share one clock
//! (Redis's), whatever their machines' clocks say, and one sweeper per namespace. A
//! gateway whose clock is wrong is simulated with libfaketime (`faketime`, installed by
//! `.ci/run`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::binary::{BINARY, free_port, wait_for_status};
use super::running::toolchain;
use crate::support::redis::RedisServer;

/// A qlessd on an external Redis; killed on drop.
struct Gateway {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Gateway {
    /// Starts qlessd on `redis`, its clock shifted by `offset` (a `faketime` offset
    /// such as `+60s`) when given, and waits until it is ready.
    async fn start(redis: &RedisServer, offset: Option<&str>) -> Gateway {
        Gateway::start_logged(redis, offset, None).await
    }

    /// [`Gateway::start`], its log (with every sweep) written to `log` when given.
    async fn start_logged(
        redis: &RedisServer,
        offset: Option<&str>,
        log: Option<&Path>,
    ) -> Gateway {
        let port = free_port();
        let mut command = match offset {
            Some(offset) => {
                let mut command = Command::new("faketime");
                // Only the wall clock is shifted: the monotonic clock stays honest, as
                // on a machine whose wall clock was set wrong.
                command
                    .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                    .args(["-f", offset, BINARY]);
                command
            }
            None => Command::new(BINARY),
        };
        command
            .env("QLESSD_REDIS_URL", redis.url())
            .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
            .env("NO_COLOR", "1")
            .stderr(Stdio::null());
        match log {
            Some(path) => command
                .env("RUST_LOG", "info,qlessd::sweeper=trace")
                .stdout(std::fs::File::create(path).unwrap()),
            None => command.env_remove("RUST_LOG").stdout(Stdio::null()),
        };
        let child = command.spawn().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
        Gateway {
            child,
            base,
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Value {
        let reply = request.send().await.unwrap();
        let status = reply.status();
        let text = reply.text().await.unwrap();
        assert!(status.is_success(), "{status}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    async fn put(&self, path: &str, body: Value) -> Value {
        self.send(self.http.put(format!("{}{path}", self.base)).json(&body))
            .await
    }

    async fn get(&self, path: &str) -> Value {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// Pops from `q` as `worker`: the jids handed over.
    async fn pop(&self, worker: &str) -> Vec<String> {
        let jobs = self
            .post("/v1/queues/q/pop", json!({"worker": worker}))
            .await;
        jobs.as_array()
            .expect("a list of jobs")
            .iter()
            .map(|job| job["jid"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn expires(&self, jid: &str) -> f64 {
        let job = self.get(&format!("/v1/jobs/{jid}")).await;
        job["expires"].as_f64().unwrap_or_else(|| panic!("{job}"))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Redis's clock, in seconds.
fn redis_now(redis: &RedisServer) -> f64 {
    let mut conn = redis.client().get_connection().unwrap();
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    seconds as f64 + micros as f64 / 1e6
}

#[tokio::test]
async fn a_gateway_whose_clock_runs_a_minute_ahead_keeps_leases_to_redis_time() {
    let test = "a_gateway_whose_clock_runs_a_minute_ahead_keeps_leases_to_redis_time";
    if !toolchain("faketime", "--version", test) {
        return;
    }
    let redis = RedisServer::start();
    let honest = Gateway::start(&redis, None).await;
    let ahead = Gateway::start(&redis, Some("+60s")).await;
    honest
        .put("/v1/config/heartbeat", json!({"value": 30}))
        .await;
    // No grace period: a pop hands an expired lease over at once.
    honest
        .put("/v1/config/grace-period", json!({"value": 0}))
        .await;

    // A job leased through each gateway, for 30 seconds.
    for (jid, lessor) in [("through-honest", &honest), ("through-ahead", &ahead)] {
        honest
            .post("/v1/queues/q/jobs", json!({"jid": jid, "klass": "K"}))
            .await;
        assert_eq!(lessor.pop("first").await, [jid]);
    }
    let leased_at = redis_now(&redis);
    // A second later neither lease has expired, through either gateway.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ahead.pop("second").await, Vec::<String>::new());
    assert_eq!(honest.pop("second").await, Vec::<String>::new());

    for jid in ["through-honest", "through-ahead"] {
        let (by_honest, by_ahead) = (honest.expires(jid).await, ahead.expires(jid).await);
        assert!(
            (by_honest - by_ahead).abs() < 1.0,
            "{jid}: expires {by_honest} through one gateway, {by_ahead} through the other"
        );
        assert!(
            (by_honest - (leased_at + 30.0)).abs() < 2.0,
            "{jid}: expires {by_honest}, leased at {leased_at} (Redis time)"
        );
    }
}
