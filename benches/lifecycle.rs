//! Load generator and report for qlessd: the job lifecycle driven directly against the
//! script (EVALSHA through `core`) and through the HTTP gateway, each against its own
//! private `redis-server`. It prints figures, never asserts them: machines are shared
//! and noisy, so every figure is the median of several runs, next to its target.
//!
//! ```text
//! cargo bench --bench lifecycle                    # everything
//! cargo bench --bench lifecycle -- direct memory   # some sections
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
            options.sections = vec!["memory".into(), "direct".into()];
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
}
