//! Search and bulk actions on a Redis holding a million jobs: the time of one search
//! request and of one bulk chunk (`POST /v1/search/{action}`), each the median of
//! several runs, through a release qlessd in front of a private `redis-server`. It
//! prints figures, never asserts them: the machine is shared and noisy.
//!
//! ```text
//! cargo bench --bench search                         # 1,000,000 jobs, 15 runs a row
//! cargo bench --bench search -- --jobs 100000 --runs 9
//! ```
//!
//! The jobs are written straight into Redis, as the script keeps a failed job (its
//! hash, with its history in the spec's legacy field, and its jid in the failure list),
//! with pipelined HSET and LPUSH: a million puts, pops and fails through the script
//! would take most of an hour here. All of them failed in one group, `boom`, spread over
//! 1,000 queues; every tenth has the class `Job7`, and 1,000 in the middle of the list
//! the class `Deep`. Each queue also holds 10 waiting jobs, put through the script.
//!
//! Times are taken in this process around each request, over one keep-alive
//! connection to the gateway (loopback TCP), one request at a time. Redis's time per
//! request is the `usec` of EVALSHA in `INFO commandstats` over the row, divided by the
//! row's requests: an upper bound, since the gateway's own sweeps (one call a second)
//! fall in the same window.

#[path = "support/http_client.rs"]
mod http_client;
#[path = "../tests/support/redis.rs"]
mod redis_server;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http_client::HttpConnection;
use qlessd::core::{ConnectOptions, Qless, embedded};
use redis_server::RedisServer;
use serde_json::{Value, json};

/// The logical time the jobs failed around.
const T0: f64 = 1_700_000_000.0;

/// Queues the jobs are spread over.
const QUEUES: usize = 1000;

/// Waiting jobs put into each queue through the script.
const WAITING: usize = 10;

/// Jobs written per pipeline while seeding.
const PIPELINE: usize = 5000;

struct Options {
    jobs: usize,
    runs: usize,
}

impl Options {
    fn parse() -> Options {
        let mut options = Options {
            jobs: 1_000_000,
            runs: 15,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |default| args.next().and_then(|v| v.parse().ok()).unwrap_or(default);
            match arg.as_str() {
                "--jobs" => options.jobs = number(options.jobs),
                "--runs" => options.runs = number(options.runs),
                _ => {}
            }
        }
        options
    }
}

fn main() {
    let options = Options::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(options));
}

async fn run(options: Options) {
    let redis = RedisServer::start();
    let mut admin = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection");
    // The settings the embedded Redis runs with (src/core/embedded.rs).
    for (name, value) in [
        ("hash-max-listpack-value", embedded::HASH_LISTPACK_VALUE),
        ("zset-max-listpack-entries", embedded::ZSET_LISTPACK_ENTRIES),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut admin)
            .await
            .expect("CONFIG SET");
    }
    let started = Instant::now();
    seed(&redis, &mut admin, options.jobs).await;
    let memory = info_field(&mut admin, "memory", "used_memory_human").await;
    println!(
        "seeded {} failed jobs in group `boom` over {QUEUES} queues, and {} waiting, in {:.1} s \
         (Redis holds {memory})",
        options.jobs,
        QUEUES * WAITING,
        started.elapsed().as_secs_f64()
    );

    let gateway = Gateway::start(&redis).await;
    let mut conn = HttpConnection::connect(gateway.addr).await;
    let runs = options.runs;
    println!(
        "\n{:<58} {:>9} {:>9} {:>11}  what one request did",
        "request (each the median of its runs)", "median ms", "max ms", "Redis ms"
    );

    let searches = [
        ("search: a failure group, first page of 25", "group=boom"),
        (
            "search: nothing matches (looks at 2,000 jobs)",
            "group=boom&klass=Nope",
        ),
        (
            "search: a queue's failed jobs (every group)",
            "state=failed&queue=q0500",
        ),
        (
            "search: by data, a dotted path",
            "group=boom&data=%7B%22user.id%22%3A4242%7D",
        ),
        (
            "search: by text in the failure message",
            "group=boom&text=job%20123456%29",
        ),
        ("search: 500 jobs answered", "group=boom&limit=500"),
        ("search: a queue (its waiting jobs)", "queue=q0500"),
    ];
    for (what, query) in searches {
        let path = format!("/v1/search?{query}");
        let row = Row::measure(
            &mut conn,
            &mut admin,
            runs,
            async |conn: &mut HttpConnection| conn.expect_ok("GET", &path, b"").await.body,
        )
        .await;
        row.print(what, &search_detail);
    }

    // Deep in the list: the same search as "nothing matches", its cursor followed
    // to half the group.
    let depth_requests = (options.jobs / 2 / 2000).max(runs);
    let mut cursor: Option<String> = None;
    let mut times = Vec::new();
    reset_stats(&mut admin).await;
    for _ in 0..depth_requests {
        let path = match &cursor {
            Some(cursor) => format!("/v1/search?group=boom&klass=Nope&cursor={cursor}"),
            None => "/v1/search?group=boom&klass=Nope".to_owned(),
        };
        let begun = Instant::now();
        let body = conn.expect_ok("GET", &path, b"").await.body;
        times.push(begun.elapsed().as_secs_f64() * 1000.0);
        let answer: Value = serde_json::from_slice(&body).expect("JSON");
        cursor = answer["cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    let redis_ms = evalsha_ms(&mut admin).await / times.len() as f64;
    let deep = Row {
        times: times[times.len().saturating_sub(runs)..].to_vec(),
        redis_ms,
        last: format!(
            "requests {}..{} of a walk, {} jobs deep",
            times.len().saturating_sub(runs) + 1,
            times.len(),
            times.len() * 2000
        )
        .into_bytes(),
    };
    deep.print(
        "search: nothing matches, half the group deep",
        &|text: &[u8]| String::from_utf8_lossy(text).into_owned(),
    );

    let chunks = [
        (
            "chunk: retry, dry run, 500 jobs",
            json!({"filter": {"group": "boom"}, "dry_run": true, "limit": 500}),
        ),
        (
            "chunk: retry 100 jobs (oldest failures)",
            json!({"filter": {"group": "boom"}, "limit": 100}),
        ),
        (
            "chunk: retry 500 jobs (oldest failures)",
            json!({"filter": {"group": "boom"}, "limit": 500}),
        ),
        (
            "chunk: cancel 100 jobs of class Job7",
            json!({"filter": {"group": "boom", "klass": "Job7"}, "limit": 100}),
        ),
    ];
    for (what, body) in chunks {
        let action = if what.contains("cancel") {
            "cancel"
        } else {
            "retry"
        };
        let path = format!("/v1/search/{action}");
        // Each run is the next slice of one action: it goes on with the cursor of the
        // run before (a new action would walk again the jobs the earlier ones passed).
        let mut cursor = Value::Null;
        let row = Row::measure(
            &mut conn,
            &mut admin,
            runs,
            async |conn: &mut HttpConnection| {
                let mut body = body.clone();
                if !cursor.is_null() {
                    body["cursor"] = cursor.clone();
                }
                let answer = conn
                    .expect_ok("POST", &path, body.to_string().as_bytes())
                    .await;
                let parsed: Value = serde_json::from_slice(&answer.body).expect("JSON");
                cursor = parsed["cursor"].clone();
                answer.body
            },
        )
        .await;
        row.print(what, &action_detail);
    }

    // A chunk acting half a million entries deep: the walk goes there without a match
    // (each request looks at 2,000 jobs and changes none), then retries the `Deep`
    // jobs 100 at a time.
    let body = json!({"filter": {"group": "boom", "klass": "Deep"}, "limit": 100});
    let (mut times, mut cursor, mut redis_us, mut last) =
        (Vec::new(), Value::Null, 0.0, Vec::new());
    loop {
        let mut body = body.clone();
        if !cursor.is_null() {
            body["cursor"] = cursor.clone();
        }
        reset_stats(&mut admin).await;
        let begun = Instant::now();
        let answer = conn
            .expect_ok("POST", "/v1/search/retry", body.to_string().as_bytes())
            .await;
        let took = begun.elapsed().as_secs_f64() * 1000.0;
        let parsed: Value = serde_json::from_slice(&answer.body).expect("JSON");
        if parsed["changed"].as_u64().unwrap_or(0) > 0 {
            times.push(took);
            redis_us += evalsha_ms(&mut admin).await;
            last = answer.body;
        }
        if parsed["done"] == true {
            break;
        }
        cursor = parsed["cursor"].clone();
    }
    if !times.is_empty() {
        let row = Row {
            redis_ms: redis_us / times.len() as f64,
            times,
            last,
        };
        row.print("chunk: retry 100 jobs half the group deep", &action_detail);
    }
    drop(gateway);
}

/// One row: the times of its runs (ms), Redis's time per request, the last answer.
struct Row {
    times: Vec<f64>,
    redis_ms: f64,
    last: Vec<u8>,
}

impl Row {
    async fn measure(
        conn: &mut HttpConnection,
        admin: &mut redis::aio::MultiplexedConnection,
        runs: usize,
        mut request: impl AsyncFnMut(&mut HttpConnection) -> Vec<u8>,
    ) -> Row {
        // One run to warm up (the script's first use of a method, the gateway's buffers).
        request(conn).await;
        reset_stats(admin).await;
        let (mut times, mut last) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let begun = Instant::now();
            last = request(conn).await;
            times.push(begun.elapsed().as_secs_f64() * 1000.0);
        }
        let redis_ms = evalsha_ms(admin).await / runs as f64;
        Row {
            times,
            redis_ms,
            last,
        }
    }

    fn print(&self, what: &str, detail: &dyn Fn(&[u8]) -> String) {
        let mut sorted = self.times.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        let max = sorted[sorted.len() - 1];
        println!(
            "{what:<58} {median:>9.2} {max:>9.2} {:>11.2}  {}",
            self.redis_ms,
            detail(&self.last)
        );
    }
}

fn search_detail(body: &[u8]) -> String {
    let answer: Value = serde_json::from_slice(body).expect("JSON");
    format!(
        "{} jobs, {} examined, done {}",
        answer["jobs"].as_array().map_or(0, Vec::len),
        answer["examined"],
        answer["done"]
    )
}

fn action_detail(body: &[u8]) -> String {
    let answer: Value = serde_json::from_slice(body).expect("JSON");
    format!(
        "{} matched, {} changed, {} examined",
        answer["matched"], answer["changed"], answer["examined"]
    )
}

/// Writes `jobs` failed jobs as the script keeps them, and 10 waiting jobs per queue
/// through the script.
async fn seed(redis: &RedisServer, admin: &mut redis::aio::MultiplexedConnection, jobs: usize) {
    let deep = jobs / 2..jobs / 2 + 1000;
    let mut pipe = redis::pipe();
    let mut jids = Vec::with_capacity(PIPELINE);
    for k in 0..jobs {
        let jid = format!("{k:032x}");
        let queue = format!("q{:04}", k % QUEUES);
        let klass = if deep.contains(&k) {
            "Deep".to_owned()
        } else {
            format!("Job{}", k % 10)
        };
        let put = T0 + (k / 1000) as f64;
        let failed = put + 1.0;
        let data =
            json!({"n": k, "user": {"id": k % 10_000}, "to": format!("user{k}@example.com")});
        let failure = json!({"group": "boom", "message": format!("timed out after 30s (job {k})"),
            "when": failed, "worker": "worker-3"});
        let history = json!([{"q": queue, "put": put, "popped": put, "worker": "worker-3",
            "failed": failed}]);
        pipe.cmd("HSET")
            .arg(format!("ql:j:{jid}"))
            .arg(&[
                ("jid", jid.as_str()),
                ("klass", &klass),
                ("state", "failed"),
                ("queue", &queue),
                ("worker", ""),
                ("priority", "0"),
                ("expires", ""),
                ("retries", "5"),
                ("remaining", "5"),
                ("data", &data.to_string()),
                ("tags", "{}"),
                ("failure", &failure.to_string()),
                ("time", &format!("{put:.20}")),
                ("history", &history.to_string()),
            ])
            .ignore();
        jids.push(jid);
        if jids.len() == PIPELINE {
            pipe.cmd("LPUSH").arg("ql:f:boom").arg(&jids).ignore();
            let _: () = pipe.query_async(admin).await.expect("seed");
            pipe = redis::pipe();
            jids.clear();
        }
    }
    if !jids.is_empty() {
        pipe.cmd("LPUSH").arg("ql:f:boom").arg(&jids).ignore();
    }
    pipe.cmd("SADD").arg("ql:failures").arg("boom").ignore();
    let _: () = pipe.query_async(admin).await.expect("seed");

    let qless = Qless::connect(ConnectOptions {
        url: redis.url(),
        redis_ca_file: None,
        namespace: None,
        connect_timeout: Duration::from_secs(10),
        response_timeout: Duration::from_secs(60),
        external: false,
        group_calls: 1,
        replicas: Default::default(),
    })
    .await
    .expect("connect");
    let mut calls: Vec<(&'static str, Vec<String>)> = Vec::new();
    for q in 0..QUEUES {
        for n in 0..WAITING {
            let jid = format!("w{q:04}-{n}");
            let queue = format!("q{q:04}");
            calls.push((
                "put",
                vec![
                    String::new(),
                    queue,
                    jid,
                    "Wait".into(),
                    "{}".into(),
                    "0".into(),
                ],
            ));
        }
    }
    for result in qless.call_many(T0, &calls).await.expect("puts") {
        result.expect("put");
    }
}

async fn reset_stats(admin: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(admin)
        .await
        .expect("RESETSTAT");
}

/// Milliseconds Redis spent in EVALSHA since the last reset.
async fn evalsha_ms(admin: &mut redis::aio::MultiplexedConnection) -> f64 {
    let usec = info_field(admin, "commandstats", "cmdstat_evalsha").await;
    usec.split(',')
        .find_map(|field| field.strip_prefix("usec="))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1000.0
}

/// The value of `field` in the `INFO` section (empty when absent).
async fn info_field(
    admin: &mut redis::aio::MultiplexedConnection,
    section: &str,
    field: &str,
) -> String {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(admin)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_default()
        .to_owned()
}

/// A release qlessd in front of the Redis; killed on drop.
struct Gateway {
    addr: SocketAddr,
    child: Child,
}

impl Gateway {
    async fn start(redis: &RedisServer) -> Gateway {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("free port")
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = Command::new(env!("CARGO_BIN_EXE_qlessd"))
            .arg("--redis-url")
            .arg(redis.url())
            .arg("--listen")
            .arg(addr.to_string())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start qlessd");
        let gateway = Gateway { addr, child };
        // Start-up moves no key here, but its pass over `ql:*` reads the million.
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                let mut conn = HttpConnection::connect(addr).await;
                if conn.send("GET", "/readyz", b"").await.status == 200 {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "qlessd never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        gateway
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
