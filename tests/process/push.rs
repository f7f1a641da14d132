//! Push delivery as users run it: real `qlessd` binaries on a real Redis, calling a
//! real HTTP receiver on loopback that checks every signature independently (HMAC
//! computed here, as the Standard Webhooks specification defines it).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::{Notify, Semaphore};

use super::binary::{BINARY, free_port, wait_for_status};
use crate::support::redis::RedisServer;

/// A qlessd on an external Redis, allowed to push to loopback; killed on drop.
struct Gateway {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Gateway {
    /// Sets the lease (the `heartbeat` option) to `seconds`.
    async fn set_heartbeat(&self, seconds: u64) {
        let (status, body) = self
            .call(
                reqwest::Method::PUT,
                "/v1/config/heartbeat",
                Some(json!({"value": seconds})),
            )
            .await;
        assert_eq!(status, 204, "{body}");
    }

    async fn start(redis: &RedisServer) -> Gateway {
        Gateway::start_with(redis, &[]).await
    }

    async fn start_with(redis: &RedisServer, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_logged(redis, env, None).await
    }

    /// [`Gateway::start_with`], its log (debug level) written to `log` when given.
    async fn start_logged(
        redis: &RedisServer,
        env: &[(&str, &str)],
        log: Option<&std::path::Path>,
    ) -> Gateway {
        let port = free_port();
        let mut command = Command::new(BINARY);
        command
            .env("QLESSD_REDIS_URL", redis.url())
            .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
            .env("QLESSD_PUSH_ALLOW_PRIVATE", "true")
            .env("NO_COLOR", "1")
            .stderr(Stdio::null());
        match log {
            Some(path) => command
                .env("RUST_LOG", "debug")
                .stdout(std::fs::File::create(path).unwrap()),
            None => command.env_remove("RUST_LOG").stdout(Stdio::null()),
        };
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
        Gateway {
            child,
            base,
            http: crate::support::http(),
        }
    }

    /// Sends a request and returns its status and JSON body (null when none).
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply = request.send().await.unwrap();
        let status = reply.status().as_u16();
        let text = reply.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Subscribes `queue` to `receiver` with `settings` added; returns the secret.
    async fn push(&self, queue: &str, receiver: &Receiver, settings: Value) -> String {
        let mut body = json!({"url": receiver.url()});
        for (key, value) in settings.as_object().unwrap() {
            body[key] = value.clone();
        }
        let (status, answer) = self
            .call(
                reqwest::Method::PUT,
                &format!("/v1/queues/{queue}/push"),
                Some(body),
            )
            .await;
        assert_eq!(status, 201, "{answer}");
        answer["secret"].as_str().unwrap().to_owned()
    }

    async fn put(&self, queue: &str, jid: &str, extra: Value) {
        self.put_traced(queue, jid, extra, None).await;
    }

    /// A put, with the producer's `traceparent` header when given.
    async fn put_traced(&self, queue: &str, jid: &str, extra: Value, traceparent: Option<&str>) {
        let mut body = json!({"jid": jid, "klass": "Greet", "data": {"name": jid}});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        let mut request = self
            .http
            .post(format!("{}/v1/queues/{queue}/jobs", self.base))
            .json(&body);
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let reply = request.send().await.unwrap();
        assert_eq!(
            reply.status().as_u16(),
            201,
            "{}",
            reply.text().await.unwrap()
        );
    }

    async fn job(&self, jid: &str) -> Value {
        let (status, job) = self
            .call(reqwest::Method::GET, &format!("/v1/jobs/{jid}"), None)
            .await;
        assert_eq!(status, 200, "{job}");
        job
    }

    /// Polls the job until `done` holds of it (within 30 s).
    async fn job_until(&self, jid: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let job = self.job(jid).await;
            if done(&job) {
                return job;
            }
            assert!(Instant::now() < deadline, "{what}: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `GET /v1/jobs/{jid}`'s body, byte for byte.
    async fn job_text(&self, jid: &str) -> String {
        let reply = self
            .http
            .get(format!("{}/v1/jobs/{jid}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status().as_u16(), 200);
        reply.text().await.unwrap()
    }

    /// Sends SIGTERM and returns once shutdown began: the listener is closed.
    async fn terminate(&self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .is_ok_and(|reply| reply.status().is_success())
        {
            assert!(Instant::now() < deadline, "qlessd did not begin to stop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the process to exit (within `within`) and returns its status.
    async fn exited(&mut self, within: Duration) -> std::process::ExitStatus {
        // (Polled rather than waited for: a receiver may answer on this test's runtime.)
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "qlessd did not stop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What the receiver does with a delivery.
#[derive(Clone)]
enum Behaviour {
    /// Answers at once with this status, these headers and this body.
    Answer(u16, Vec<(&'static str, String)>, String),
    /// Answers 200 `{}` after this long.
    Slow(Duration),
    /// Never answers (until the receiver is dropped).
    Hang,
    /// Answers 200 `{}` once the test gives the gate a permit (each takes one).
    Held(Arc<Semaphore>),
}

/// One delivery as it arrived.
#[derive(Debug, Clone)]
struct Delivery {
    headers: HeaderMap,
    body: Vec<u8>,
    at: Instant,
}

impl Delivery {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn jid(&self) -> String {
        serde_json::from_slice::<Value>(&self.body).unwrap()["jid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Which of `secrets` have a signature in `webhook-signature` that verifies (the
    /// specification's check: HMAC-SHA256 of `<id>.<timestamp>.<body>` under the
    /// base64-decoded secret).
    fn verified_by(&self, secrets: &[&str]) -> Vec<usize> {
        let signed = [
            self.header("webhook-id").as_bytes(),
            b".",
            self.header("webhook-timestamp").as_bytes(),
            b".",
            &self.body,
        ]
        .concat();
        let given: Vec<&str> = self
            .header("webhook-signature")
            .split(' ')
            .filter_map(|entry| entry.strip_prefix("v1,"))
            .collect();
        let mut verified = Vec::new();
        for (i, secret) in secrets.iter().enumerate() {
            let key = STANDARD
                .decode(secret.strip_prefix("whsec_").unwrap())
                .unwrap();
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
            mac.update(&signed);
            let expected = STANDARD.encode(mac.finalize().into_bytes());
            if given.contains(&expected.as_str()) {
                verified.push(i);
            }
        }
        verified
    }
}

/// What the receiver saw.
#[derive(Default)]
struct Seen {
    deliveries: parking_lot::Mutex<Vec<Delivery>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    arrived: Notify,
}

/// An HTTP receiver on loopback, answering each delivery as `behave` says (by the
/// delivery's jid and how many of that jid came before).
struct Receiver {
    address: SocketAddr,
    seen: Arc<Seen>,
    server: tokio::task::JoinHandle<()>,
}

type Behave = Arc<dyn Fn(&str, usize) -> Behaviour + Send + Sync>;

impl Receiver {
    /// A receiver that holds every delivery until the test adds a permit to the
    /// semaphore it returns beside it (one permit, one answer of 200).
    async fn held() -> (Receiver, Arc<Semaphore>) {
        let gate = Arc::new(Semaphore::new(0));
        let receiver = Receiver::start({
            let gate = gate.clone();
            move |_, _| Behaviour::Held(gate.clone())
        })
        .await;
        (receiver, gate)
    }

    async fn start(behave: impl Fn(&str, usize) -> Behaviour + Send + Sync + 'static) -> Receiver {
        let seen = Arc::new(Seen::default());
        let behave: Behave = Arc::new(behave);
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post({
                let seen = seen.clone();
                move |headers: HeaderMap, body: Bytes| {
                    receive(seen.clone(), behave.clone(), headers, body)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            address,
            seen,
            server,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.address)
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.seen.deliveries.lock().clone()
    }

    /// Waits until `count` deliveries arrived (within 30 s).
    async fn wait_for(&self, count: usize) -> Vec<Delivery> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let arrived = self.seen.arrived.notified();
            let deliveries = self.deliveries();
            if deliveries.len() >= count {
                return deliveries;
            }
            assert!(
                tokio::time::timeout_at(deadline, arrived).await.is_ok(),
                "{} deliveries arrived, waiting for {count}",
                deliveries.len()
            );
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(
    seen: Arc<Seen>,
    behave: Behave,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let delivery = Delivery {
        headers,
        body: body.to_vec(),
        at: Instant::now(),
    };
    let jid = delivery.jid();
    let before = {
        let mut deliveries = seen.deliveries.lock();
        let before = deliveries.iter().filter(|d| d.jid() == jid).count();
        deliveries.push(delivery);
        before
    };
    let now = seen.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
    seen.most_in_flight.fetch_max(now, Ordering::AcqRel);
    seen.arrived.notify_waiters();
    let answer = match behave(&jid, before) {
        Behaviour::Answer(status, headers, body) => {
            let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Behaviour::Slow(delay) => {
            tokio::time::sleep(delay).await;
            (StatusCode::OK, "{}").into_response()
        }
        Behaviour::Hang => std::future::pending().await,
        Behaviour::Held(gate) => {
            gate.acquire().await.unwrap().forget();
            (StatusCode::OK, "{}").into_response()
        }
    };
    seen.in_flight.fetch_sub(1, Ordering::AcqRel);
    answer
}

fn ok(body: &str) -> Behaviour {
    Behaviour::Answer(200, vec![], body.to_owned())
}

#[tokio::test]
async fn a_pushed_job_is_delivered_signed_and_completed_with_the_answer_as_its_result() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let receiver = Receiver::start(|_, _| ok(r#"{"greeted":true}"#)).await;
    let secret = gateway
        .push(
            "emails",
            &receiver,
            json!({"headers": {"x-team": "billing"}}),
        )
        .await;
    assert!(secret.starts_with("whsec_"));
    gateway
        .put_traced(
            "emails",
            "hello-ada",
            json!({}),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        )
        .await;
    let delivery = receiver.wait_for(1).await.remove(0);
    assert_eq!(delivery.verified_by(&[&secret]), [0]);
    assert_eq!(delivery.header("webhook-id"), "hello-ada");
    assert_eq!(delivery.header("qlessd-attempt"), "1");
    assert_eq!(delivery.header("content-type"), "application/json");
    assert_eq!(delivery.header("x-team"), "billing");
    assert!(delivery.header("user-agent").starts_with("qlessd/"));
    assert_eq!(
        delivery.header("traceparent"),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    );
    let age = delivery.header("webhook-timestamp").parse::<u64>().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(age) < 60, "timestamp {age} against {now}");
    let body: Value = serde_json::from_slice(&delivery.body).unwrap();
    assert_eq!(body["jid"], "hello-ada");
    assert_eq!(body["data"], json!({"name": "hello-ada"}));
    assert_eq!(body["state"], "running");
    assert!(body["worker"].as_str().unwrap().starts_with("qlessd-push:"));
    let job = gateway
        .job_until("hello-ada", "completed", |job| job["state"] == "complete")
        .await;
    assert_eq!(job["result"], json!({"greeted": true}));
    let (_, settings) = gateway
        .call(reqwest::Method::GET, "/v1/queues/emails/push", None)
        .await;
    assert_eq!(settings["delivered"], 1);
    assert_eq!(settings["in_flight"], 0);
    let recent = &settings["recent"][0];
    assert_eq!(
        (
            &recent["jid"],
            &recent["status"],
            &recent["attempt"],
            &recent["outcome"]
        ),
        (
            &json!("hello-ada"),
            &json!(200),
            &json!(1),
            &json!("delivered")
        )
    );
    assert!(
        !settings.to_string().contains(&secret),
        "GET never shows the secret"
    );
    let metrics = gateway
        .http
        .get(format!("{}/metrics", gateway.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            r#"qless_push_deliveries_total{namespace="",queue="emails",outcome="delivered"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("qless_push_delivery_duration_seconds_count"),
        "{metrics}"
    );
    assert!(metrics.contains("qless_push_in_flight 0"), "{metrics}");
    assert!(!metrics.contains(&secret));
}

#[tokio::test]
async fn each_answer_decides_the_fate_of_its_job() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let receiver = Receiver::start(|jid, before| match (jid, before) {
        ("flaky", 0) => Behaviour::Answer(500, vec![], "upstream down".into()),
        ("flaky", _) => ok("{}"),
        ("broken", _) => Behaviour::Answer(502, vec![], String::new()),
        ("refused", _) => Behaviour::Answer(422, vec![], "missing field \"email\"".into()),
        ("busy", 0) => Behaviour::Answer(429, vec![("retry-after", "1".into())], String::new()),
        ("busy", _) => ok("{}"),
        ("slow", _) => Behaviour::Slow(Duration::from_secs(5)),
        ("moved", _) => Behaviour::Answer(302, vec![("location", "/hook".into())], String::new()),
        _ => ok("{}"),
    })
    .await;
    gateway.push("work", &receiver, json!({"timeout": 1})).await;
    gateway.put("work", "flaky", json!({})).await;
    gateway.put("work", "broken", json!({"retries": 1})).await;
    gateway.put("work", "refused", json!({})).await;
    gateway.put("work", "busy", json!({})).await;
    gateway.put("work", "slow", json!({"retries": 0})).await;
    gateway.put("work", "moved", json!({})).await;

    gateway
        .job_until("flaky", "delivered again", |job| job["state"] == "complete")
        .await;
    let broken = gateway
        .job_until("broken", "failed", |job| job["state"] == "failed")
        .await;
    assert_eq!(broken["failure"]["group"], "push-http-502");
    let refused = gateway
        .job_until("refused", "failed", |job| job["state"] == "failed")
        .await;
    assert_eq!(refused["failure"]["group"], "push-http-422");
    assert!(
        refused["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("missing field"),
        "{refused}"
    );
    assert_eq!(
        refused["remaining"], 5,
        "a 4xx fails at once, using no retry"
    );
    gateway
        .job_until("busy", "delivered after Retry-After", |job| {
            job["state"] == "complete"
        })
        .await;
    let slow = gateway
        .job_until("slow", "timed out", |job| job["state"] == "failed")
        .await;
    assert_eq!(slow["failure"]["group"], "push-timeout");
    let moved = gateway
        .job_until("moved", "failed", |job| job["state"] == "failed")
        .await;
    assert_eq!(moved["failure"]["group"], "push-http-302");

    let deliveries = receiver.deliveries();
    let of =
        |jid: &str| -> Vec<&Delivery> { deliveries.iter().filter(|d| d.jid() == jid).collect() };
    assert_eq!(of("refused").len(), 1);
    assert_eq!(of("moved").len(), 1, "a redirect is not followed");
    assert_eq!(of("broken").len(), 2, "the first try and one retry");
    let busy = of("busy");
    assert!(
        busy[1].at - busy[0].at >= Duration::from_millis(900),
        "the retry waited for Retry-After"
    );
    let flaky = of("flaky");
    assert_eq!(flaky[0].header("webhook-id"), flaky[1].header("webhook-id"));
    assert_eq!(
        (
            flaky[0].header("qlessd-attempt"),
            flaky[1].header("qlessd-attempt")
        ),
        ("1", "2")
    );
    let (_, settings) = gateway
        .call(reqwest::Method::GET, "/v1/queues/work/push", None)
        .await;
    assert_eq!(settings["delivered"], 2, "{settings}");
    assert_eq!(settings["failed"], 4, "{settings}");

    // Unfail is the dead-letter queue's way back: the job is delivered again.
    let (status, _) = gateway
        .call(
            reqwest::Method::POST,
            "/v1/failures/push-http-422/unfail",
            Some(json!({"queue": "work"})),
        )
        .await;
    assert!(status < 300, "unfail answered {status}");
    let again = receiver.wait_for(deliveries.len() + 1).await.pop().unwrap();
    assert_eq!(again.jid(), "refused");
    assert_eq!(
        again.header("qlessd-attempt"),
        "2",
        "attempts count on after an unfail"
    );
}

#[tokio::test]
async fn during_a_rotation_both_secrets_sign_and_after_it_only_the_new_one() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let receiver = Receiver::start(|_, _| ok("{}")).await;
    let old = gateway.push("q", &receiver, json!({})).await;
    let (status, rotated) = gateway
        .call(
            reqwest::Method::POST,
            "/v1/queues/q/push/rotate",
            Some(json!({"grace": 2})),
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(rotated["secrets"].as_array().unwrap().len(), 2);
    gateway.put("q", "during", json!({})).await;
    let during = receiver.wait_for(1).await.remove(0);
    assert_eq!(during.verified_by(&[&new, &old]), [0, 1]);
    // After the grace (Redis's clock decides), only the new secret signs.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, settings) = gateway
            .call(reqwest::Method::GET, "/v1/queues/q/push", None)
            .await;
        if settings["secrets"].as_array().unwrap().len() == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{settings}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The delivery loop reads the settings again within two seconds.
    let mut jid = 0;
    loop {
        jid += 1;
        gateway.put("q", &format!("after-{jid}"), json!({})).await;
        let last = receiver.wait_for(1 + jid).await.pop().unwrap();
        if last.verified_by(&[&new, &old]) == [0] {
            break;
        }
        assert!(Instant::now() < deadline, "the old secret still signs");
    }
}

#[tokio::test]
async fn concurrency_holds_across_two_qlessd_and_both_deliver() {
    let redis = RedisServer::start();
    let one = Gateway::start(&redis).await;
    let two = Gateway::start(&redis).await;
    let receiver = Receiver::start(|_, _| Behaviour::Slow(Duration::from_millis(100))).await;
    one.push("q", &receiver, json!({"concurrency": 3})).await;
    // The same settings through the other qlessd: each starts delivering at once
    // (without it, the other finds the queue at its next look, within two seconds).
    let (status, _) = two
        .call(
            reqwest::Method::PUT,
            "/v1/queues/q/push",
            Some(json!({"url": receiver.url(), "concurrency": 3})),
        )
        .await;
    assert_eq!(status, 200, "a later PUT keeps the secret");
    for i in 0..24 {
        one.put("q", &format!("j{i}"), json!({})).await;
    }
    let deliveries = receiver.wait_for(24).await;
    assert!(
        receiver.seen.most_in_flight.load(Ordering::Acquire) <= 3,
        "at most 3 in flight"
    );
    assert_eq!(receiver.seen.most_in_flight.load(Ordering::Acquire), 3);
    let workers: std::collections::BTreeSet<String> = deliveries
        .iter()
        .map(|d| {
            serde_json::from_slice::<Value>(&d.body).unwrap()["worker"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(workers.len(), 2, "both qlessd delivered: {workers:?}");
    two.job_until("j23", "completed", |job| job["state"] == "complete")
        .await;
}

#[tokio::test]
async fn the_rate_holds() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let receiver = Receiver::start(|_, _| ok("{}")).await;
    gateway
        .push(
            "q",
            &receiver,
            json!({"concurrency": 50, "rate": {"jobs": 4, "seconds": 1}}),
        )
        .await;
    for i in 0..12 {
        gateway.put("q", &format!("j{i}"), json!({})).await;
    }
    let deliveries = receiver.wait_for(12).await;
    let starts: Vec<Instant> = deliveries.iter().map(|d| d.at).collect();
    for (i, start) in starts.iter().enumerate() {
        let within = starts[i..]
            .iter()
            .filter(|at| at.duration_since(*start) < Duration::from_millis(900))
            .count();
        assert!(
            within <= 4,
            "{within} deliveries within 0.9 s of delivery {i}"
        );
    }
    assert!(
        starts[11].duration_since(starts[0]) >= Duration::from_secs(2),
        "12 jobs at 4 a second take more than two seconds"
    );
}

#[tokio::test]
async fn a_qlessd_killed_mid_delivery_leaves_the_job_to_be_delivered_again() {
    let redis = RedisServer::start();
    let mut one = Gateway::start(&redis).await;
    let receiver = Receiver::start(|_, before| match before {
        0 => Behaviour::Hang,
        _ => ok("{}"),
    })
    .await;
    one.set_heartbeat(2).await;
    one.push("q", &receiver, json!({"timeout": 60})).await;
    one.put("q", "survivor", json!({})).await;
    let first = receiver.wait_for(1).await.remove(0);
    one.kill();
    let two = Gateway::start(&redis).await;
    let job = two
        .job_until("survivor", "delivered again", |job| {
            job["state"] == "complete"
        })
        .await;
    let second = receiver.deliveries().remove(1);
    assert_eq!(second.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(second.header("qlessd-attempt"), "2");
    assert_eq!(job["jid"], "survivor");
}

/// A job's fields as Redis holds them (read without a qlessd, which would deliver it).
fn stored(redis: &RedisServer, jid: &str, fields: &[&str]) -> Vec<Option<String>> {
    redis::cmd("HMGET")
        .arg(format!("ql:j:{jid}"))
        .arg(fields)
        .query(&mut redis.client().get_connection().unwrap())
        .unwrap()
}

#[tokio::test]
async fn shutdown_lets_a_delivery_in_flight_finish_and_leases_nothing_more() {
    let redis = RedisServer::start();
    let mut gateway = Gateway::start_with(&redis, &[("QLESSD_SHUTDOWN_TIMEOUT", "20")]).await;
    let (receiver, gate) = Receiver::held().await;
    gateway
        .push("q", &receiver, json!({"concurrency": 1}))
        .await;
    gateway.put("q", "in-flight", json!({})).await;
    receiver.wait_for(1).await;
    gateway.put("q", "behind", json!({})).await;
    gateway.terminate().await;
    // The delivery ends after shutdown began: its slot frees, and "behind" could be
    // leased, but no new delivery starts.
    gate.add_permits(1);
    let status = gateway.exited(Duration::from_secs(30)).await;
    assert!(status.success(), "{status}");
    assert_eq!(
        stored(&redis, "in-flight", &["state"]),
        [Some("complete".to_owned())]
    );
    assert_eq!(
        stored(&redis, "behind", &["state", "worker"]),
        [Some("waiting".to_owned()), Some(String::new())],
        "not leased after shutdown began"
    );
    assert_eq!(receiver.deliveries().len(), 1);
}

#[tokio::test]
async fn a_delivery_outlasting_the_shutdown_timeout_is_given_back_and_delivered_again() {
    let redis = RedisServer::start();
    let mut one = Gateway::start_with(&redis, &[("QLESSD_SHUTDOWN_TIMEOUT", "1")]).await;
    let receiver = Receiver::start(|_, before| match before {
        0 => Behaviour::Hang,
        _ => ok("{}"),
    })
    .await;
    one.push("q", &receiver, json!({"concurrency": 1, "timeout": 600}))
        .await;
    one.put("q", "long", json!({})).await;
    let first = receiver.wait_for(1).await.remove(0);
    // Another qlessd is ready to deliver the job, but the one slot is taken.
    let two = Gateway::start(&redis).await;
    one.terminate().await;
    let status = one.exited(Duration::from_secs(15)).await;
    assert!(status.success(), "{status}");
    // Given back at shutdown, not left to expire (the lease lasts a minute, and the
    // delivery's slot its ten-minute timeout): delivered again at once.
    let job = two
        .job_until("long", "delivered again", |job| job["state"] == "complete")
        .await;
    let second = receiver.deliveries().remove(1);
    assert_eq!(second.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(second.header("qlessd-attempt"), "2");
    let worker = |delivery: &Delivery| {
        serde_json::from_slice::<Value>(&delivery.body).unwrap()["worker"].clone()
    };
    assert_ne!(worker(&first), worker(&second), "{job}");
    assert_eq!(job["remaining"], job["retries"], "shutdown used no retry");
}

#[tokio::test]
async fn a_delivery_longer_than_its_lease_keeps_it_and_completes_once() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    gateway.set_heartbeat(2).await;
    let (receiver, gate) = Receiver::held().await;
    gateway.push("q", &receiver, json!({"timeout": 60})).await;
    gateway.put("q", "long", json!({})).await;
    receiver.wait_for(1).await;
    let leased = gateway.job("long").await;
    let first_expiry = leased["expires"].as_f64().unwrap();
    // Heartbeats move the expiry to their time plus 2 s: once it is 4 s past the first,
    // two whole leases went by, and the job is still this delivery's.
    let kept = gateway
        .job_until("long", "heartbeaten past two leases", |job| {
            job["expires"].as_f64().unwrap() >= first_expiry + 4.0
        })
        .await;
    assert_eq!(kept["state"], "running", "{kept}");
    assert_eq!(kept["worker"], leased["worker"], "{kept}");
    gate.add_permits(1);
    let job = gateway
        .job_until("long", "completed", |job| job["state"] == "complete")
        .await;
    assert_eq!(receiver.deliveries().len(), 1, "delivered once");
    let pops = job["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["what"] == "popped")
        .count();
    assert_eq!(pops, 1, "leased once: {job}");
}

#[tokio::test]
async fn the_body_is_the_job_as_get_shows_it_with_its_batch_throttles_partition_and_deadlines() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let (receiver, gate) = Receiver::held().await;
    gateway.push("q", &receiver, json!({})).await;
    let start_by = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let (status, batch) = gateway
        .call(
            reqwest::Method::POST,
            "/v1/batches",
            Some(json!({"jobs": [{
                "queue": "q", "jid": "rich", "klass": "Greet", "data": {"name": "ada"},
                "tags": ["vip"], "throttles": ["mail"], "backoff": {"initial": 2},
                "start_by": start_by, "max_run": 600, "partition": "acme",
            }]})),
        )
        .await;
    assert_eq!(status, 201, "{batch}");
    let delivery = receiver.wait_for(1).await.remove(0);
    // Read while the delivery is in flight, the job is what the receiver got.
    let shown = gateway.job_text("rich").await;
    assert_eq!(String::from_utf8_lossy(&delivery.body), shown);
    let body: Value = serde_json::from_slice(&delivery.body).unwrap();
    assert_eq!(body["batch"], batch["bid"]);
    assert_eq!(body["throttles"], json!(["mail"]));
    assert_eq!(body["partition"], "acme");
    assert_eq!(body["start_by"].as_f64(), Some(start_by as f64));
    assert_eq!(body["max_run"].as_f64(), Some(600.0));
    assert_eq!(body["backoff"]["initial"].as_f64(), Some(2.0));
    gate.add_permits(1);
    gateway
        .job_until("rich", "completed", |job| job["state"] == "complete")
        .await;
}

#[tokio::test]
async fn deleting_a_push_stops_its_deliveries_and_leaves_the_jobs_to_pull_workers() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let (receiver, gate) = Receiver::held().await;
    gateway.push("q", &receiver, json!({})).await;
    gateway.put("q", "in-flight", json!({})).await;
    receiver.wait_for(1).await;
    let (status, body) = gateway
        .call(reqwest::Method::DELETE, "/v1/queues/q/push", None)
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, _) = gateway
        .call(reqwest::Method::DELETE, "/v1/queues/q/push", None)
        .await;
    assert_eq!(status, 404, "nothing left to delete");
    let (status, _) = gateway
        .call(reqwest::Method::GET, "/v1/queues/q/push", None)
        .await;
    assert_eq!(status, 404);
    // The delivery in flight ends as it would have.
    gate.add_permits(1);
    gateway
        .job_until("in-flight", "completed", |job| job["state"] == "complete")
        .await;
    // A job put now waits for a pull worker, which gets it.
    gateway.put("q", "after", json!({})).await;
    assert_eq!(gateway.job("after").await["state"], "waiting");
    let (status, popped) = gateway
        .call(
            reqwest::Method::POST,
            "/v1/queues/q/pop",
            Some(json!({"worker": "puller"})),
        )
        .await;
    assert_eq!(status, 200, "{popped}");
    assert_eq!(popped[0]["jid"], "after", "{popped}");
    assert_eq!(popped[0]["worker"], "puller");
    let (status, answer) = gateway
        .call(
            reqwest::Method::POST,
            "/v1/jobs/after/complete",
            Some(json!({"worker": "puller", "queue": "q"})),
        )
        .await;
    assert!(status < 300, "{status} {answer}");
    assert_eq!(
        receiver.deliveries().len(),
        1,
        "nothing delivered after the DELETE"
    );
}

#[tokio::test]
async fn an_endpoint_that_refuses_connections_is_retried_then_failed_into_push_connect() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    // A port bound but not listening: connections to it are refused, and no other
    // process can take it meanwhile.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    let (status, answer) = gateway
        .call(
            reqwest::Method::PUT,
            "/v1/queues/q/push",
            Some(json!({"url": url})),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    gateway.put("q", "unreachable", json!({"retries": 1})).await;
    let job = gateway
        .job_until("unreachable", "failed", |job| job["state"] == "failed")
        .await;
    assert_eq!(job["failure"]["group"], "push-connect", "{job}");
    let (_, settings) = gateway
        .call(reqwest::Method::GET, "/v1/queues/q/push", None)
        .await;
    assert_eq!(
        (
            &settings["retried"],
            &settings["failed"],
            &settings["delivered"]
        ),
        (&json!(1), &json!(1), &json!(0)),
        "the first try and one retry: {settings}"
    );
    let statuses: Vec<&Value> = settings["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|recent| &recent["status"])
        .collect();
    assert_eq!(statuses, [&Value::Null, &Value::Null], "no answer came");
}

#[tokio::test]
async fn a_400_fails_the_job_at_once_into_push_http_400_with_the_start_of_the_answer() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let answer = format!("name is missing; {}", "x".repeat(1000));
    let receiver =
        Receiver::start(move |_, _| Behaviour::Answer(400, vec![], answer.clone())).await;
    gateway.push("q", &receiver, json!({})).await;
    gateway.put("q", "nameless", json!({})).await;
    let job = gateway
        .job_until("nameless", "failed", |job| job["state"] == "failed")
        .await;
    assert_eq!(job["failure"]["group"], "push-http-400", "{job}");
    let message = job["failure"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("HTTP 400: name is missing; xxx"),
        "{message}"
    );
    assert_eq!(message.len(), "HTTP 400: ".len() + 200, "only the start");
    assert_eq!(job["remaining"], job["retries"], "no retry was used");
    assert_eq!(receiver.deliveries().len(), 1);
    let (_, settings) = gateway
        .call(reqwest::Method::GET, "/v1/queues/q/push", None)
        .await;
    assert_eq!(settings["failed"], 1, "{settings}");
}

#[tokio::test]
async fn endpoints_are_refused_in_every_unsafe_form() {
    let redis = RedisServer::start();
    // Without --push-allow-private: only public addresses.
    let strict = Gateway::start_with(&redis, &[("QLESSD_PUSH_ALLOW_PRIVATE", "false")]).await;
    let mut refusals: HashMap<&str, &str> = HashMap::new();
    refusals.insert("http://127.0.0.1:9/hook", "--push-allow-private");
    refusals.insert("http://localhost:9/hook", "--push-allow-private");
    refusals.insert("http://[::1]:9/hook", "--push-allow-private");
    refusals.insert("http://10.1.2.3/hook", "--push-allow-private");
    refusals.insert("http://169.254.169.254/latest", "--push-allow-private");
    refusals.insert("ftp://example.com/hook", "http or https");
    refusals.insert("https://user:pw@example.com/hook", "user name");
    refusals.insert("not a url", "not a URL");
    for (url, needle) in refusals {
        let (status, problem) = strict
            .call(
                reqwest::Method::PUT,
                "/v1/queues/q/push",
                Some(json!({"url": url})),
            )
            .await;
        assert_eq!(status, 400, "{url}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains(needle),
            "{url}: {problem}"
        );
    }
    let (status, _) = strict
        .call(reqwest::Method::GET, "/v1/queues/q/push", None)
        .await;
    assert_eq!(status, 404, "nothing was subscribed");
}

#[tokio::test]
async fn one_qlessd_never_has_more_deliveries_in_flight_than_its_bound() {
    let redis = RedisServer::start();
    let gateway = Gateway::start_with(&redis, &[("QLESSD_PUSH_MAX_IN_FLIGHT", "2")]).await;
    let receiver = Receiver::start(|_, _| Behaviour::Slow(Duration::from_millis(100))).await;
    gateway
        .push("a", &receiver, json!({"concurrency": 10}))
        .await;
    gateway
        .push("b", &receiver, json!({"concurrency": 10}))
        .await;
    for i in 0..8 {
        gateway.put("a", &format!("a{i}"), json!({})).await;
        gateway.put("b", &format!("b{i}"), json!({})).await;
    }
    receiver.wait_for(16).await;
    assert_eq!(
        receiver.seen.most_in_flight.load(Ordering::Acquire),
        2,
        "two queues of concurrency 10, one qlessd bounded at 2"
    );
}

#[tokio::test]
async fn neither_the_secret_nor_the_urls_query_reaches_the_log() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("qlessd.log");
    let mut gateway = Gateway::start_logged(&redis, &[], Some(&log)).await;
    let receiver = Receiver::start(|jid, _| match jid {
        "refused" => Behaviour::Answer(400, vec![], "no".into()),
        _ => ok("{}"),
    })
    .await;
    let body = json!({"url": format!("{}?token=hush-0123456789", receiver.url()),
        "headers": {"authorization": "Bearer hush-abcdef"}});
    let (status, answer) = gateway
        .call(reqwest::Method::PUT, "/v1/queues/q/push", Some(body))
        .await;
    assert_eq!(status, 201, "{answer}");
    let secret = answer["secret"].as_str().unwrap().to_owned();
    assert_eq!(answer["headers"]["authorization"], "***");
    gateway.put("q", "fine", json!({})).await;
    gateway.put("q", "refused", json!({})).await;
    let deliveries = receiver.wait_for(2).await;
    assert!(
        deliveries
            .iter()
            .all(|d| d.header("authorization") == "Bearer hush-abcdef"),
        "the static header is sent"
    );
    gateway
        .job_until("refused", "failed", |job| job["state"] == "failed")
        .await;
    gateway
        .job_until("fine", "completed", |job| job["state"] == "complete")
        .await;
    gateway.kill();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("push delivery"),
        "one line per delivery: {text}"
    );
    for hidden in [
        secret.as_str(),
        "hush-0123456789",
        "hush-abcdef",
        &secret[6..],
    ] {
        assert!(!text.contains(hidden), "{hidden} is in the log");
    }
}

#[tokio::test]
async fn jobs_go_out_in_the_queues_order_priority_then_time() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis).await;
    let receiver = Receiver::start(|_, _| ok("{}")).await;
    // Put before the queue is pushed, so that all of them wait for the first lease.
    for (jid, priority) in [
        ("low", 0),
        ("first-high", 10),
        ("mid", 5),
        ("second-high", 10),
    ] {
        gateway.put("q", jid, json!({"priority": priority})).await;
    }
    gateway
        .push("q", &receiver, json!({"concurrency": 1}))
        .await;
    let order: Vec<String> = receiver
        .wait_for(4)
        .await
        .iter()
        .map(Delivery::jid)
        .collect();
    assert_eq!(order, ["first-high", "second-high", "mid", "low"]);
}

/// An HTTPS receiver on loopback with a certificate for `localhost` from a CA made
/// for the test (`ca.crt` in `dir`), answering every POST 200 `{"tls":true}`.
async fn https_receiver(dir: &std::path::Path) -> (u16, tokio::task::JoinHandle<()>) {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    crate::api::tls::make_certificates(dir);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(socket).await else {
                    return;
                };
                let service = hyper::service::service_fn(|_request| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(
                        http_body_util::Full::new(Bytes::from_static(br#"{"tls":true}"#)),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (port, server)
}

#[tokio::test]
async fn https_endpoints_are_verified_against_the_given_ca_or_the_systems_roots() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (port, server) = https_receiver(dir.path()).await;
    let url = format!("https://localhost:{port}/hook");
    let ca = dir.path().join("ca.crt");
    let trusting =
        Gateway::start_with(&redis, &[("QLESSD_PUSH_CA_FILE", ca.to_str().unwrap())]).await;
    let (status, answer) = trusting
        .call(
            reqwest::Method::PUT,
            "/v1/queues/trusted/push",
            Some(json!({"url": url})),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    trusting.put("trusted", "over-tls", json!({})).await;
    let job = trusting
        .job_until("over-tls", "completed", |job| job["state"] == "complete")
        .await;
    assert_eq!(job["result"], json!({"tls": true}));

    // The system's roots do not know the test's CA: the handshake fails, and so does
    // the job, into push-tls.
    // (A Redis of its own, or the first qlessd would deliver this queue too.)
    let other_redis = RedisServer::start();
    let doubting = Gateway::start(&other_redis).await;
    let (status, _) = doubting
        .call(
            reqwest::Method::PUT,
            "/v1/queues/doubted/push",
            Some(json!({"url": url})),
        )
        .await;
    assert_eq!(status, 201);
    doubting
        .put("doubted", "untrusted", json!({"retries": 0}))
        .await;
    let job = doubting
        .job_until("untrusted", "failed", |job| job["state"] == "failed")
        .await;
    assert_eq!(job["failure"]["group"], "push-tls", "{job}");
    server.abort();
}
