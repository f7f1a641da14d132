//! Several gateways on one Redis, as a deployment runs them: they share one clock
//! (Redis's), whatever their machines' clocks say, and one sweeper per namespace. A
//! gateway whose clock is wrong is simulated with libfaketime (`faketime`, installed by
//! `.ci/run`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        // A group of its own, so that the whole group is stopped on drop: `faketime`
        // runs qlessd as a child process of its own, which killing `faketime` alone
        // would leave running.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
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
            http: crate::support::http(),
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

    /// How many pop requests wait on this gateway (its `/metrics` gauge).
    async fn waiters(&self) -> i64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|line| line.starts_with("qless_longpoll_waiters"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<i64>().ok())
            .sum()
    }

    /// Long-polls `q` here, runs `act` once the poll waits, and returns how long after
    /// `act` began the poll came back, with the one job it must have got: `jid`.
    async fn woken_by(&self, jid: &str, act: impl Future<Output = ()>) -> Duration {
        let request = self
            .http
            .post(format!("{}/v1/queues/q/pop", self.base))
            .json(&json!({"worker": "waiter", "wait": 20}));
        let waiter = tokio::spawn(async move {
            let reply = request.send().await.unwrap();
            let at = Instant::now();
            (at, reply.json::<Value>().await.unwrap())
        });
        until(Duration::from_secs(5), "the long poll waits", async || {
            self.waiters().await == 1
        })
        .await;
        let started = Instant::now();
        act.await;
        let (returned, body) = waiter.await.unwrap();
        assert_eq!(body[0]["jid"], jid, "{body}");
        returned.duration_since(started)
    }

    async fn expires(&self, jid: &str) -> f64 {
        let job = self.get(&format!("/v1/jobs/{jid}")).await;
        job["expires"].as_f64().unwrap_or_else(|| panic!("{job}"))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // The process group (see `start_logged`): qlessd itself, also under faketime.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
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

    // Dropping the gateway stops qlessd itself, not only the `faketime` wrapper that
    // started it: nothing answers on its port any more.
    let base = ahead.base.clone();
    drop(ahead);
    until(
        Duration::from_secs(10),
        "qlessd under faketime stopped",
        async || {
            crate::support::http()
                .get(format!("{base}/healthz"))
                .send()
                .await
                .is_err()
        },
    )
    .await;
}

/// The sweeper lease's holder, if any.
fn sweeper(redis: &RedisServer) -> Option<String> {
    let mut conn = redis.client().get_connection().unwrap();
    redis::cmd("GET")
        .arg("qlessd:sweeper")
        .query(&mut conn)
        .unwrap()
}

/// How many sweeps the log at `path` records.
fn sweeps(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .matches("swept")
        .count()
}

/// Polls `check` every 20 ms until it holds, failing after `within`.
async fn until(within: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn one_gateway_sweeps_and_another_takes_over_within_the_lease_when_it_dies() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<PathBuf> = ["a.log", "b.log"].map(|name| dir.path().join(name)).into();
    let mut gateways = Vec::new();
    for log in &logs {
        gateways.push(Gateway::start_logged(&redis, None, Some(log)).await);
    }
    let pid_of = |gateway: &Gateway| format!("{}-", gateway.child.id());

    until(
        Duration::from_secs(5),
        "a gateway takes the lease",
        async || sweeper(&redis).is_some(),
    )
    .await;
    let holder = sweeper(&redis).unwrap();
    let (leader, other) = if holder.starts_with(&pid_of(&gateways[0])) {
        (0, 1)
    } else {
        (1, 0)
    };
    assert!(holder.starts_with(&pid_of(&gateways[leader])), "{holder}");
    // Several seconds of sweeping by the holder, none by the other.
    until(Duration::from_secs(10), "the holder sweeps", async || {
        sweeps(&logs[leader]) >= 3
    })
    .await;
    assert_eq!(sweeps(&logs[other]), 0, "the other gateway swept too");
    assert_eq!(sweeper(&redis).as_deref(), Some(holder.as_str()));

    // The holder dies without giving the lease up (SIGKILL).
    let survivor = gateways.remove(other);
    let dead = gateways.remove(0);
    drop(dead);
    let killed = Instant::now();
    let heir = pid_of(&survivor);
    let within =
        qlessd::sweeper::LEASE_TTL + qlessd::sweeper::MAX_IDLE + Duration::from_millis(500);
    until(
        within,
        "the other gateway takes the lease over",
        async || sweeper(&redis).is_some_and(|holder| holder.starts_with(&heir)),
    )
    .await;
    println!(
        "took the sweeper lease over {:?} after the holder died",
        killed.elapsed()
    );
    until(
        Duration::from_secs(3),
        "the new holder sweeps",
        async || sweeps(&logs[other]) > 0,
    )
    .await;

    // A scheduled job is promoted on time with nobody popping.
    survivor
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "later", "klass": "K", "delay": 2}),
        )
        .await;
    let put = Instant::now();
    assert_eq!(survivor.get("/v1/jobs/later").await["state"], "scheduled");
    until(
        Duration::from_secs(4),
        "the scheduled job is promoted",
        async || survivor.get("/v1/jobs/later").await["state"] == "waiting",
    )
    .await;
    let promoted = put.elapsed();
    println!("promoted {promoted:?} after a put with a 2 s delay");
    assert!(
        promoted >= Duration::from_millis(1900) && promoted < Duration::from_millis(3200),
        "promoted after {promoted:?}"
    );
}

/// Well under the waiters' own re-check (and the old one-second one): only an
/// announcement can wake a long poll this fast.
const PROMPTLY: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_long_poll_on_one_gateway_wakes_promptly_for_work_made_available_elsewhere() {
    let redis = RedisServer::start();
    let a = Gateway::start(&redis, None).await;
    let b = Gateway::start(&redis, None).await;
    assert!(PROMPTLY < qlessd::leasing::RECHECK);

    // A put through the other gateway.
    let put = a
        .woken_by("put", async {
            b.post("/v1/queues/q/jobs", json!({"jid": "put", "klass": "K"}))
                .await;
        })
        .await;
    assert!(
        put < PROMPTLY,
        "a put on B woke A's long poll after {put:?}"
    );

    // A retry through the other gateway.
    b.post("/v1/queues/q/jobs", json!({"jid": "retried", "klass": "K"}))
        .await;
    assert_eq!(b.pop("first").await, ["retried"]);
    let retry = a
        .woken_by("retried", async {
            b.post(
                "/v1/jobs/retried/retry",
                json!({"worker": "first", "queue": "q"}),
            )
            .await;
        })
        .await;
    assert!(
        retry < PROMPTLY,
        "a retry on B woke A's long poll after {retry:?}"
    );

    // An unfail through the other gateway.
    b.post(
        "/v1/queues/q/jobs",
        json!({"jid": "unfailed", "klass": "K"}),
    )
    .await;
    assert_eq!(b.pop("first").await, ["unfailed"]);
    b.post(
        "/v1/jobs/unfailed/fail",
        json!({"worker": "first", "group": "boom", "message": "m"}),
    )
    .await;
    let unfail = a
        .woken_by("unfailed", async {
            b.post("/v1/failures/boom/unfail", json!({"queue": "q"}))
                .await;
        })
        .await;
    assert!(
        unfail < PROMPTLY,
        "an unfail on B woke A's long poll after {unfail:?}"
    );

    // A put by a plain Redis client running the script, no gateway involved.
    let raw = a
        .woken_by("raw", async {
            let mut conn = redis.client().get_connection().unwrap();
            let now = redis_now(&redis);
            let _: String = redis::cmd("EVAL")
                .arg(qlessd::core::script::SOURCE)
                .arg(0)
                .arg(&["put", &now.to_string(), "", "q", "raw", "K", "{}", "0"])
                .query(&mut conn)
                .unwrap();
        })
        .await;
    assert!(
        raw < PROMPTLY,
        "a raw script put woke A's long poll after {raw:?}"
    );

    // A job scheduled through the other gateway, on a queue nobody pops: the sweeper
    // (in whichever gateway holds the lease) promotes it, the script announces it.
    let scheduled = a
        .woken_by("scheduled", async {
            b.post(
                "/v1/queues/q/jobs",
                json!({"jid": "scheduled", "klass": "K", "delay": 1}),
            )
            .await;
        })
        .await;
    let late = qlessd::sweeper::MAX_IDLE + PROMPTLY;
    assert!(
        scheduled >= Duration::from_millis(900) && scheduled < Duration::from_secs(1) + late,
        "a job due in 1 s woke A's long poll after {scheduled:?}"
    );
    println!(
        "woken after: put {put:?}, retry {retry:?}, unfail {unfail:?}, raw script put \
         {raw:?}, a 1 s delay {scheduled:?}"
    );
}

#[tokio::test]
async fn a_gateway_moves_an_older_versions_keys_out_of_ql_before_it_serves() {
    let redis = RedisServer::start();
    // What a qlessd of the version before issue 34 left under the plain prefix: a job
    // scheduled a second from now with its due time in `ql:due` (on a queue the slow
    // pass does not visit, so only the due index finds it), an idempotency key, and a
    // sweeper lease held by a gateway that is gone.
    let qless = crate::support::connect(&redis, None).await;
    let (seconds, micros) = qless.time().await.unwrap();
    let now = seconds as f64 + micros as f64 / 1e6;
    let job = qlessd::core::PutArgs {
        worker: "old".into(),
        queue: "q".into(),
        jid: "old".into(),
        klass: "K".into(),
        data: "{}".into(),
        delay: 1.0,
        ..Default::default()
    };
    qless.put(now, job).await.unwrap();
    let mut conn = redis.client().get_connection().unwrap();
    let _: () = redis::pipe()
        .cmd("RENAME")
        .arg("qlessd:due")
        .arg("ql:due")
        .cmd("ZREM")
        .arg("ql:queues")
        .arg("q")
        .cmd("HSET")
        .arg("ql:idem:k")
        .arg("jid")
        .arg("old")
        .arg("until")
        .arg(now + 3600.0)
        .cmd("SET")
        .arg("ql:sweeper")
        .arg("gone")
        .arg("PX")
        .arg(60_000)
        .query(&mut conn)
        .unwrap();
    drop(qless);

    let gateway = Gateway::start(&redis, None).await;
    // Ready means moved: nothing of qlessd's is left under `ql:`.
    let exists = |key: &str| -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query(&mut redis.client().get_connection().unwrap())
            .unwrap()
    };
    for key in ["ql:due", "ql:idem:k", "ql:sweeper"] {
        assert!(!exists(key), "{key} is still there");
    }
    assert!(exists("qlessd:idem:k") && exists("qlessd:migrated"));
    until(
        Duration::from_secs(5),
        "the gateway takes the sweeper lease",
        async || sweeper(&redis).is_some_and(|holder| holder != "gone"),
    )
    .await;
    // The due time moved with it: the job is promoted on time, nobody popping.
    until(
        Duration::from_secs(5),
        "the scheduled job is promoted",
        async || gateway.get("/v1/jobs/old").await["state"] == "waiting",
    )
    .await;
}
