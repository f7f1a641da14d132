//! Load generator and report for qlessd: the job lifecycle driven directly against the
//! script (EVALSHA through `core`) and through the HTTP gateway, each against its own
//! private `redis-server`. It prints figures, never asserts them: machines are shared
//! and noisy, so every figure is the median of several runs, next to its target.
//!
//! ```text
//! cargo bench --bench lifecycle                    # everything
//! cargo bench --bench lifecycle -- direct memory   # some sections: memory, direct,
//!                                                  # http, worker
//! cargo bench --bench lifecycle -- --jobs 5000 --runs 1
//! ```
//!
//! Redis-side cost per call is `usec_per_call` of `cmdstat_evalsha` from
//! `INFO commandstats`, reset before each phase: it is the time the script itself
//! takes inside Redis, independent of the client and the network.

#[path = "../tests/support/redis.rs"]
mod redis_server;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use qlessd::clock::Clock;
use qlessd::core::{CompleteArgs, ConnectOptions, PutArgs, Qless};
use qlessd::server::{self, AppState, Limits};
use qlessd::settings::Settings;
use redis_server::RedisServer;

/// Command-line options.
#[derive(Debug, Clone)]
struct Options {
    jobs: usize,
    runs: usize,
    sections: Vec<String>,
}

impl Options {
    fn parse() -> Self {
        let mut options = Options {
            jobs: 20_000,
            runs: 3,
            sections: Vec::new(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--jobs" => {
                    options.jobs = args.next().and_then(|v| v.parse().ok()).unwrap_or(20_000)
                }
                "--runs" => options.runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(3),
                "--bench" => {} // added by `cargo bench`
                section if !section.starts_with('-') => options.sections.push(section.to_owned()),
                _ => {}
            }
        }
        if options.sections.is_empty() {
            options.sections = vec![
                "memory".into(),
                "direct".into(),
                "http".into(),
                "worker".into(),
            ];
        }
        options
    }

    fn wants(&self, section: &str) -> bool {
        self.sections.iter().any(|s| s == section)
    }
}

/// About 100 bytes of JSON, different per job.
fn payload(i: usize) -> String {
    let text = format!(
        r#"{{"user_id":{i},"email":"user-{i:06}@example.com","plan":"pro","note":"welcome mail, retry ok"}}"#
    );
    debug_assert!((90..=110).contains(&text.len()), "{}", text.len());
    text
}

fn put_args(queue: &str, jid: String, i: usize) -> PutArgs {
    PutArgs {
        worker: String::new(),
        queue: queue.to_owned(),
        jid,
        klass: "bench.Job".to_owned(),
        data: payload(i),
        ..PutArgs::default()
    }
}

/// A private Redis with a `Qless` handle and an admin connection for INFO.
struct Target {
    _redis: RedisServer,
    qless: Qless,
    admin: redis::aio::MultiplexedConnection,
}

impl Target {
    async fn start(pool_size: u32) -> Self {
        let redis = RedisServer::start();
        let qless = Qless::connect(ConnectOptions {
            url: redis.url(),
            namespace: None,
            pool_size,
            checkout_timeout: Duration::from_secs(10),
            external: false,
        })
        .await
        .expect("connect");
        let admin = redis
            .client()
            .get_multiplexed_async_connection()
            .await
            .expect("admin connection");
        let mut target = Target {
            _redis: redis,
            qless,
            admin,
        };
        // The settings the embedded Redis runs with (src/core/embedded.rs).
        target.config_set("hash-max-listpack-value", "1024").await;
        target
    }

    async fn config_set(&mut self, name: &str, value: &str) {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut self.admin)
            .await
            .expect("CONFIG SET");
    }

    async fn flush(&mut self) {
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut self.admin)
            .await
            .expect("FLUSHALL");
    }

    async fn reset_stats(&mut self) {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut self.admin)
            .await
            .expect("RESETSTAT");
    }

    /// `usec_per_call` of EVALSHA since the last reset.
    async fn evalsha_usec(&mut self) -> f64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.admin)
            .await
            .expect("INFO");
        info.lines()
            .find(|line| line.starts_with("cmdstat_evalsha:"))
            .and_then(|line| {
                line.split([':', ','])
                    .find_map(|field| field.strip_prefix("usec_per_call="))
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }

    async fn used_memory(&mut self) -> i64 {
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut self.admin)
            .await
            .expect("INFO");
        info.lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_default()
    }
}

/// Runs `total` calls of `call(i)` from `concurrency` tasks; returns calls per second.
async fn drive<F, Fut>(total: usize, concurrency: usize, call: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let call = call.clone();
            let next = next.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    call(i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("bench task");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// One measured phase: throughput and Redis-side cost per call.
#[derive(Debug, Clone, Copy, Default)]
struct Figure {
    per_second: f64,
    usec: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

fn median_figure(figures: &[Figure]) -> Figure {
    Figure {
        per_second: median(figures.iter().map(|f| f.per_second).collect()),
        usec: median(figures.iter().map(|f| f.usec).collect()),
    }
}

/// Measures each lifecycle command directly against the script.
async fn direct_run(
    target: &mut Target,
    jobs: usize,
    concurrency: usize,
) -> HashMap<&'static str, Figure> {
    let clock = Clock::system();
    let mut figures = HashMap::new();
    target.flush().await;

    macro_rules! phase {
        ($name:literal, $total:expr, $body:expr) => {{
            target.reset_stats().await;
            let per_second = drive($total, concurrency, $body).await;
            let usec = target.evalsha_usec().await;
            figures.insert($name, Figure { per_second, usec });
        }};
    }

    let q = target.qless.clone();
    let c = clock.clone();
    phase!("put", jobs, move |i| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            q.put(c.now(), put_args("bench", format!("job-{i}"), i))
                .await
                .expect("put");
        }
    });
    let q = target.qless.clone();
    let c = clock.clone();
    phase!("pop", jobs, move |_| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            let popped = q
                .pop(c.now(), "bench", "bench-worker", 1)
                .await
                .expect("pop");
            assert_eq!(popped.len(), 1, "pop found nothing");
        }
    });
    let q = target.qless.clone();
    let c = clock.clone();
    phase!("heartbeat", jobs, move |i| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            q.heartbeat(c.now(), &format!("job-{i}"), "bench-worker", None)
                .await
                .expect("heartbeat");
        }
    });
    let q = target.qless.clone();
    let c = clock.clone();
    phase!("complete", jobs, move |i| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            q.complete(
                c.now(),
                CompleteArgs {
                    jid: format!("job-{i}"),
                    worker: "bench-worker".into(),
                    queue: "bench".into(),
                    data: "{}".into(),
                    ..CompleteArgs::default()
                },
            )
            .await
            .expect("complete");
        }
    });

    // Batch pop: 100 jobs per call; the cost is reported per job.
    let q = target.qless.clone();
    let c = clock.clone();
    drive(jobs, concurrency, move |i| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            q.put(c.now(), put_args("batch", format!("b-{i}"), i))
                .await
                .expect("put");
        }
    })
    .await;
    let q = target.qless.clone();
    let c = clock.clone();
    let batches = jobs / 100;
    phase!("pop100", batches, move |_| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            let popped = q
                .pop(c.now(), "batch", "batch-worker", 100)
                .await
                .expect("pop");
            assert_eq!(popped.len(), 100, "batch pop came up short");
        }
    });
    if let Some(f) = figures.get_mut("pop100") {
        f.per_second *= 100.0;
        f.usec /= 100.0;
    }

    // The whole cycle: put, pop, complete, one job at a time per task.
    let q = target.qless.clone();
    let c = clock.clone();
    let started = Instant::now();
    target.reset_stats().await;
    drive(jobs, concurrency, move |i| {
        let (q, c) = (q.clone(), c.clone());
        async move {
            let jid = format!("cycle-{i}");
            q.put(c.now(), put_args("cycle", jid, i))
                .await
                .expect("put");
            let popped = q
                .pop(c.now(), "cycle", "cycle-worker", 1)
                .await
                .expect("pop");
            for job in popped {
                q.complete(
                    c.now(),
                    CompleteArgs {
                        jid: job.jid,
                        worker: "cycle-worker".into(),
                        queue: "cycle".into(),
                        data: "{}".into(),
                        ..CompleteArgs::default()
                    },
                )
                .await
                .expect("complete");
            }
        }
    })
    .await;
    let usec = target.evalsha_usec().await;
    figures.insert(
        "cycle",
        Figure {
            per_second: jobs as f64 / started.elapsed().as_secs_f64(),
            usec: usec * 3.0,
        },
    );
    figures
}

/// Targets from the issue tracker: half the original script's cost per call.
const DIRECT_ROWS: [(&str, &str, f64); 6] = [
    ("put", "put", 27.0),
    ("pop", "pop (1 job)", 60.0),
    ("pop100", "pop (100 jobs), per job", 35.0),
    ("heartbeat", "heartbeat", 25.0),
    ("complete", "complete", 44.0),
    ("cycle", "put+pop+complete cycle", 3.0 * 44.0),
];

async fn direct(options: &Options) {
    println!(
        "\n== direct script calls: {} jobs, ~100-byte data, median of {} runs ==",
        options.jobs, options.runs
    );
    for concurrency in [1usize, 50] {
        let mut target = Target::start(64).await;
        let mut runs: Vec<HashMap<&str, Figure>> = Vec::new();
        for _ in 0..options.runs {
            runs.push(direct_run(&mut target, options.jobs, concurrency).await);
        }
        println!("\nconcurrency {concurrency}");
        println!(
            "{:<28} {:>12} {:>16} {:>12}",
            "command", "calls/s", "redis usec/call", "target usec"
        );
        for (key, label, target_usec) in DIRECT_ROWS {
            let figure = median_figure(
                &runs
                    .iter()
                    .filter_map(|r| r.get(key).copied())
                    .collect::<Vec<_>>(),
            );
            let verdict = if figure.usec <= target_usec {
                "ok"
            } else {
                "OVER"
            };
            println!(
                "{label:<28} {:>12.0} {:>16.1} {:>9.0} {verdict}",
                figure.per_second, figure.usec, target_usec
            );
        }
        let cycle = median_figure(
            &runs
                .iter()
                .filter_map(|r| r.get("cycle").copied())
                .collect::<Vec<_>>(),
        );
        println!(
            "cycle rate {:.0} jobs/s (target >= 7600, twice the original's 3800): {}",
            cycle.per_second,
            if cycle.per_second >= 7600.0 {
                "ok"
            } else {
                "UNDER"
            }
        );
    }
}

/// Memory per waiting job, with Redis's default hash encoding limit and with ours.
async fn memory(options: &Options) {
    println!(
        "\n== memory per waiting job: {} jobs, ~100-byte data ==",
        options.jobs
    );
    let clock = Clock::system();
    for (label, listpack_value) in [
        ("redis default (hash-max-listpack-value 64)", "64"),
        ("qlessd (hash-max-listpack-value 1024)", "1024"),
    ] {
        let mut target = Target::start(8).await;
        target
            .config_set("hash-max-listpack-value", listpack_value)
            .await;
        let before = target.used_memory().await;
        let q = target.qless.clone();
        let c = clock.clone();
        drive(options.jobs, 8, move |i| {
            let (q, c) = (q.clone(), c.clone());
            async move {
                q.put(c.now(), put_args("memory", format!("job-{i}"), i))
                    .await
                    .expect("put");
            }
        })
        .await;
        let after = target.used_memory().await;
        let per_job = (after - before) as f64 / options.jobs as f64;
        println!("{label:<44} {per_job:>8.0} bytes/job (target <= 1550)");
    }
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    if options.wants("memory") {
        memory(&options).await;
    }
    if options.wants("direct") {
        direct(&options).await;
    }
    if options.wants("http") {
        http(&options).await;
    }
    if options.wants("worker") {
        worker(&options).await;
    }
}

/// A gateway on a real TCP socket in front of `target`, with the system clock.
struct Gateway {
    base: String,
    client: reqwest::Client,
    state: AppState,
}

impl Gateway {
    async fn start(target: &Target) -> Self {
        let settings = Settings::for_redis("unix:///unused");
        let state = AppState::new(
            target.qless.clone(),
            Clock::system(),
            Limits::from_settings(&settings),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(server::serve(
            listener,
            server::router(state.clone()),
            std::future::pending(),
        ));
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()
            .expect("client");
        Gateway {
            base,
            client,
            state,
        }
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = response.status();
        let value: serde_json::Value = response.json().await.unwrap_or_default();
        assert!(status.is_success(), "{path}: {status} {value}");
        value
    }
}

fn job_body(jid: String, i: usize) -> serde_json::Value {
    serde_json::json!({
        "jid": jid,
        "klass": "bench.Job",
        "data": serde_json::from_str::<serde_json::Value>(&payload(i)).expect("payload"),
    })
}

/// Measures the lifecycle over HTTP at concurrency 50, next to direct calls made in
/// the same run, and batch puts.
async fn http_run(jobs: usize) -> HashMap<&'static str, (f64, f64)> {
    const CONCURRENCY: usize = 50;
    let mut figures = HashMap::new();
    let mut target = Target::start(64).await;
    let direct = direct_run(&mut target, jobs, CONCURRENCY).await;
    target.flush().await;
    let gateway = Arc::new(Gateway::start(&target).await);

    macro_rules! phase {
        ($name:literal, $total:expr, $body:expr) => {{
            let per_second = drive($total, CONCURRENCY, $body).await;
            let direct_rate = direct.get($name).map(|f| f.per_second).unwrap_or(f64::NAN);
            figures.insert($name, (per_second, direct_rate));
        }};
    }
    let g = gateway.clone();
    phase!("put", jobs, move |i| {
        let g = g.clone();
        async move {
            g.post("/v1/queues/bench/jobs", job_body(format!("job-{i}"), i))
                .await;
        }
    });
    // The HTTP stack alone (no Redis): the ceiling the gateway works under here.
    let g = gateway.clone();
    let ceiling = drive(jobs, CONCURRENCY, move |_| {
        let g = g.clone();
        async move {
            let url = format!("{}/healthz", g.base);
            let response = g.client.get(url).send().await.expect("healthz");
            assert!(response.status().is_success());
            let _ = response.bytes().await;
        }
    })
    .await;
    figures.insert("ceiling", (ceiling, f64::NAN));
    let g = gateway.clone();
    phase!("pop", jobs, move |_| {
        let g = g.clone();
        async move {
            let jobs = g
                .post(
                    "/v1/queues/bench/pop",
                    serde_json::json!({"worker": "bench-worker"}),
                )
                .await;
            assert_eq!(jobs.as_array().map(Vec::len), Some(1), "pop found nothing");
        }
    });
    let g = gateway.clone();
    phase!("heartbeat", jobs, move |i| {
        let g = g.clone();
        async move {
            g.post(
                &format!("/v1/jobs/job-{i}/heartbeat"),
                serde_json::json!({"worker": "bench-worker"}),
            )
            .await;
        }
    });
    let g = gateway.clone();
    phase!("complete", jobs, move |i| {
        let g = g.clone();
        async move {
            g.post(
                &format!("/v1/jobs/job-{i}/complete"),
                serde_json::json!({"worker": "bench-worker", "queue": "bench"}),
            )
            .await;
        }
    });
    // Batch put: 100 jobs per request.
    let g = gateway.clone();
    let batches = jobs / 100;
    let rate = drive(batches, CONCURRENCY.min(batches.max(1)), move |b| {
        let g = g.clone();
        async move {
            let items: Vec<_> = (0..100)
                .map(|k| job_body(format!("batch-{b}-{k}"), b * 100 + k))
                .collect();
            g.post(
                "/v1/queues/batch/jobs/batch",
                serde_json::json!({"jobs": items}),
            )
            .await;
        }
    })
    .await;
    figures.insert("batch put", (rate * 100.0, f64::NAN));
    figures
}

async fn http(options: &Options) {
    println!(
        "\n== HTTP gateway vs direct script calls: {} jobs, concurrency 50, keep-alive, median of {} runs ==",
        options.jobs, options.runs
    );
    let mut runs = Vec::new();
    for _ in 0..options.runs {
        runs.push(http_run(options.jobs).await);
    }
    println!(
        "{:<12} {:>12} {:>12} {:>8} {:>8}",
        "command", "http/s", "direct/s", "ratio", "target"
    );
    for name in ["put", "pop", "heartbeat", "complete"] {
        let http = median(
            runs.iter()
                .filter_map(|r| r.get(name).map(|f| f.0))
                .collect(),
        );
        let direct = median(
            runs.iter()
                .filter_map(|r| r.get(name).map(|f| f.1))
                .collect(),
        );
        let ratio = median(
            runs.iter()
                .filter_map(|r| r.get(name).map(|f| f.0 / f.1))
                .collect(),
        );
        let verdict = if ratio >= 0.85 { "ok" } else { "UNDER" };
        println!(
            "{name:<12} {http:>12.0} {direct:>12.0} {ratio:>8.2} {:>5} {verdict}",
            ">=0.85"
        );
    }
    let ceiling = median(
        runs.iter()
            .filter_map(|r| r.get("ceiling").map(|f| f.0))
            .collect(),
    );
    println!("HTTP stack alone (GET /healthz, same client): {ceiling:.0} requests/s");
    let batch = median(
        runs.iter()
            .filter_map(|r| r.get("batch put").map(|f| f.0))
            .collect(),
    );
    println!(
        "batch put (100 jobs per request): {batch:.0} jobs/s (target >= 30000): {}",
        if batch >= 30_000.0 { "ok" } else { "UNDER" }
    );
    println!("reference: Ocypod ~7,700 creates/s, 7,400 fetches/s, 8,000 completes/s (aim: 2x)");
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// The worker scenario: 50 HTTP workers long-polling one queue (up to 10 jobs per pop,
/// completed with one batch request) fed by producers. Throughput: a flood of jobs,
/// drained end to end. Latency: a paced producer, each job stamped with its put time.
async fn worker_run(jobs: usize) -> (f64, Vec<f64>) {
    const WORKERS: usize = 50;
    const PRODUCERS: usize = 4;
    const PRODUCER_BATCH: usize = 10;
    let target = Target::start(64).await;
    let gateway = Arc::new(Gateway::start(&target).await);
    assert!(
        gateway
            .state
            .events
            .wait_subscribed(Duration::from_secs(5))
            .await
    );
    let done = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (g, done, latencies, stop) = (gateway.clone(), done.clone(), latencies.clone(), stop.clone());
            tokio::spawn(async move {
                let worker = format!("worker-{w}");
                while !stop.load(Ordering::Relaxed) {
                    let popped = g
                        .post("/v1/queues/work/pop", serde_json::json!({"worker": worker, "count": 10, "wait": 1}))
                        .await;
                    let popped = popped.as_array().cloned().unwrap_or_default();
                    if popped.is_empty() {
                        continue;
                    }
                    let now = Clock::system().now();
                    {
                        let mut latencies = latencies.lock().expect("latencies");
                        for job in &popped {
                            if let Some(put_at) = job["data"]["put_at"].as_f64() {
                                latencies.push((now - put_at) * 1000.0);
                            }
                        }
                    }
                    let items: Vec<_> = popped
                        .iter()
                        .map(|job| serde_json::json!({"jid": job["jid"], "worker": worker, "queue": "work"}))
                        .collect();
                    let outcome = g.post("/v1/jobs/complete", serde_json::json!({"jobs": items})).await;
                    let completed = outcome["jobs"]
                        .as_array()
                        .map(|all| all.iter().filter(|o| o.get("state").is_some()).count())
                        .unwrap_or(0);
                    done.fetch_add(completed, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Throughput: producers flood `jobs` jobs in batches of PRODUCER_BATCH.
    let started = Instant::now();
    let g = gateway.clone();
    drive(jobs / PRODUCER_BATCH, PRODUCERS, move |b| {
        let g = g.clone();
        async move {
            let put_at = Clock::system().now();
            let items: Vec<_> = (0..PRODUCER_BATCH)
                .map(|k| {
                    serde_json::json!({"jid": format!("flood-{b}-{k}"), "klass": "bench.Job",
                    "data": {"put_at": put_at, "pad": "x".repeat(70)}})
                })
                .collect();
            g.post(
                "/v1/queues/work/jobs/batch",
                serde_json::json!({"jobs": items}),
            )
            .await;
        }
    })
    .await;
    let produced_in = started.elapsed();
    while done.load(Ordering::Relaxed) < jobs / PRODUCER_BATCH * PRODUCER_BATCH {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let throughput =
        (jobs / PRODUCER_BATCH * PRODUCER_BATCH) as f64 / started.elapsed().as_secs_f64();
    eprintln!(
        "  flood: produced in {:.2}s ({:.0} puts/s), drained in {:.2}s",
        produced_in.as_secs_f64(),
        (jobs / PRODUCER_BATCH * PRODUCER_BATCH) as f64 / produced_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    // Latency: 2,000 single puts at about 1,000 per second into idle, waiting workers.
    latencies.lock().expect("latencies").clear();
    let before = done.load(Ordering::Relaxed);
    for i in 0..2000 {
        let put_at = Clock::system().now();
        gateway
            .post(
                "/v1/queues/work/jobs",
                serde_json::json!({"jid": format!("paced-{i}"), "klass": "bench.Job",
                "data": {"put_at": put_at}}),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while done.load(Ordering::Relaxed) < before + 2000 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        let _ = worker.await;
    }
    let mut latencies = latencies.lock().expect("latencies").clone();
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (throughput, latencies)
}

async fn worker(options: &Options) {
    println!(
        "\n== worker scenario over HTTP: 50 long-polling workers (pop 10, batch complete), {} jobs, median of {} runs ==",
        options.jobs, options.runs
    );
    let mut rates = Vec::new();
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    for _ in 0..options.runs {
        let (rate, latencies) = worker_run(options.jobs).await;
        rates.push(rate);
        p50s.push(percentile(&latencies, 0.50));
        p99s.push(percentile(&latencies, 0.99));
    }
    let (rate, p50, p99) = (median(rates), median(p50s), median(p99s));
    println!(
        "end to end: {rate:.0} jobs/s (target >= 10000): {}",
        if rate >= 10_000.0 { "ok" } else { "UNDER" }
    );
    println!(
        "put -> lease latency at ~1000 jobs/s: p50 {p50:.1} ms, p99 {p99:.1} ms (target p99 < 50 ms): {}",
        if p99 < 50.0 { "ok" } else { "OVER" }
    );
}
