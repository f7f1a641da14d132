//! Throughput and Redis CPU per job as deployments grow: 1, 2 and 4 gateways on one
//! Redis; one gateway writing with and without `--min-replicas-ack 1`; and one gateway
//! serving 3 tenants on a 3-primary cluster against 1 tenant on one node. Prints
//! figures, never asserts them (the machine is shared and noisy).
//!
//! ```text
//! cargo bench --bench topology                       # everything
//! cargo bench --bench topology -- --jobs 4000 gateways acks cluster
//! ```
//!
//! A job is one lifecycle through HTTP: put, pop, complete (three requests), driven by
//! 48 keep-alive connections spread over the gateways. Redis CPU per job is the change
//! of `used_cpu_sys + used_cpu_user` (`INFO cpu`) over the run, summed over the
//! primaries, divided by the jobs.

#[path = "support/http_client.rs"]
mod http_client;
#[path = "../tests/support/topology.rs"]
mod topology;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_client::HttpConnection;
use topology::{Cluster, Node};

/// Connections driving the load, over all gateways.
const CONNECTIONS: usize = 48;

struct Options {
    jobs: usize,
    sections: Vec<String>,
}

impl Options {
    fn parse() -> Options {
        let mut options = Options {
            jobs: 6000,
            sections: Vec::new(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--jobs" => options.jobs = args.next().and_then(|v| v.parse().ok()).unwrap_or(6000),
                "--bench" => {}
                section => options.sections.push(section.to_owned()),
            }
        }
        options
    }

    fn wants(&self, section: &str) -> bool {
        self.sections.is_empty() || self.sections.iter().any(|s| s == section)
    }
}

/// A release qlessd in front of a Redis; killed on drop.
struct Gateway {
    addr: SocketAddr,
    child: Child,
}

impl Gateway {
    async fn start(env: &[(&str, String)]) -> Gateway {
        let port = topology::free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_qlessd"));
        command
            .env("QLESSD_LISTEN", addr.to_string())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let gateway = Gateway {
            addr,
            child: command.spawn().expect("qlessd"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Ok(stream)) =
                tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
                    .await
            {
                drop(stream);
                let mut c = HttpConnection::connect(addr).await;
                if c.send("GET", "/readyz", b"").await.status == 200 {
                    return gateway;
                }
            }
            assert!(Instant::now() < deadline, "qlessd never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds of CPU `node` has used (`used_cpu_sys + used_cpu_user`).
fn cpu_seconds(node: &Node) -> f64 {
    let mut conn = node.connection().expect("connection");
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query(&mut conn)
        .expect("INFO");
    info.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            matches!(name, "used_cpu_sys" | "used_cpu_user")
                .then(|| value.trim().parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Runs `jobs` lifecycles over `targets` (a gateway address and the namespace header
/// to send, if any): jobs per second.
async fn drive(targets: &[(SocketAddr, Option<String>)], jobs: usize) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..CONNECTIONS {
        let (addr, namespace) = targets[task % targets.len()].clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = HttpConnection::connect(addr).await;
            if let Some(namespace) = &namespace {
                c.add_header("qless-namespace", namespace);
            }
            // A queue per connection: its pop finds the job it just put.
            let queue = format!("q{task}");
            let worker = format!("w{task}");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    break;
                }
                let put = format!(r#"{{"jid":"job-{i}","klass":"K","data":{{"n":{i}}}}}"#);
                c.expect_ok("POST", &format!("/v1/queues/{queue}/jobs"), put.as_bytes())
                    .await;
                let pop = format!(r#"{{"worker":"{worker}"}}"#);
                let popped = c
                    .expect_ok("POST", &format!("/v1/queues/{queue}/pop"), pop.as_bytes())
                    .await;
                let popped: serde_json::Value =
                    serde_json::from_slice(&popped.body).expect("pop JSON");
                let Some(jid) = popped[0]["jid"].as_str() else {
                    continue;
                };
                let done = format!(r#"{{"worker":"{worker}","queue":"{queue}"}}"#);
                c.expect_ok("POST", &format!("/v1/jobs/{jid}/complete"), done.as_bytes())
                    .await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("load task");
    }
    jobs as f64 / started.elapsed().as_secs_f64()
}

/// Drives `jobs` lifecycles and prints a row: jobs/s and Redis µs of CPU per job,
/// summed over `primaries`.
async fn measure(
    label: &str,
    targets: &[(SocketAddr, Option<String>)],
    primaries: &[&Node],
    jobs: usize,
) {
    // Warm-up: connections, the script cache, the allocator.
    drive(targets, jobs / 10).await;
    let before: f64 = primaries.iter().map(|node| cpu_seconds(node)).sum();
    let rate = drive(targets, jobs).await;
    let after: f64 = primaries.iter().map(|node| cpu_seconds(node)).sum();
    let per_job = (after - before) * 1e6 / jobs as f64;
    println!("{label:<44} {rate:>9.0} jobs/s {per_job:>9.1} µs Redis CPU/job");
}

async fn gateways(options: &Options) {
    println!("\n== gateways on one Redis (plain ql: prefix) ==");
    for count in [1, 2, 4] {
        let redis = Node::start(&[]);
        let mut gateways = Vec::new();
        for _ in 0..count {
            gateways.push(Gateway::start(&[("QLESSD_REDIS_URL", redis.url())]).await);
        }
        let targets: Vec<_> = gateways.iter().map(|g| (g.addr, None)).collect();
        let label = format!("{count} gateway(s)");
        measure(&label, &targets, &[&redis], options.jobs).await;
    }
}

async fn acks(options: &Options) {
    println!("\n== one gateway, a primary with one replica: --min-replicas-ack ==");
    for acks in [0, 1] {
        let primary = Node::start(&[]);
        let _replica = Node::start(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        topology::wait_until("the replica is in sync", topology::FORMING, || {
            _replica.connection().is_ok_and(|mut conn| {
                redis::cmd("INFO")
                    .arg("replication")
                    .query::<String>(&mut conn)
                    .is_ok_and(|info| info.contains("master_link_status:up"))
            })
        });
        let gateway = Gateway::start(&[
            ("QLESSD_REDIS_URL", primary.url()),
            ("QLESSD_MIN_REPLICAS_ACK", acks.to_string()),
        ])
        .await;
        let label = format!("--min-replicas-ack {acks}");
        measure(&label, &[(gateway.addr, None)], &[&primary], options.jobs).await;
    }
}

async fn cluster(options: &Options) {
    println!("\n== one gateway: 1 tenant on one node vs 3 tenants on a 3-primary cluster ==");
    {
        let redis = Node::start(&[]);
        let gateway = Gateway::start(&[
            ("QLESSD_REDIS_URL", redis.url()),
            ("QLESSD_NAMESPACE", "t0".to_owned()),
        ])
        .await;
        let targets = [(gateway.addr, Some("t0".to_owned()))];
        measure("1 tenant, one node", &targets, &[&redis], options.jobs).await;
    }
    let cluster = Cluster::start();
    // Three namespaces whose slots belong to three different primaries.
    let mut tenants: Vec<(String, usize)> = Vec::new();
    for n in 0..1000 {
        let name = format!("t{n}");
        let Some(owner) = cluster.owner(&format!("ql:{{{name}}}")) else {
            continue;
        };
        if tenants.iter().all(|(_, taken)| *taken != owner) {
            tenants.push((name, owner));
        }
        if tenants.len() == 3 {
            break;
        }
    }
    let names: Vec<String> = tenants.iter().map(|(name, _)| name.clone()).collect();
    let gateway = Gateway::start(&[
        ("QLESSD_REDIS_URL", cluster.url()),
        ("QLESSD_NAMESPACE", names[0].clone()),
        ("QLESSD_NAMESPACES", names[1..].join(",")),
    ])
    .await;
    let targets: Vec<_> = names
        .iter()
        .map(|name| (gateway.addr, Some(name.clone())))
        .collect();
    let primaries: Vec<&Node> = tenants.iter().map(|(_, at)| &cluster.nodes[*at]).collect();
    measure(
        "3 tenants, 3-primary cluster (sum of primaries)",
        &targets,
        &primaries,
        options.jobs,
    )
    .await;
}

#[tokio::main]
async fn main() {
    let options = Options::parse();
    println!(
        "{} jobs per row (put + pop + complete over HTTP), {CONNECTIONS} connections",
        options.jobs
    );
    if options.wants("gateways") {
        gateways(&options).await;
    }
    if options.wants("acks") {
        acks(&options).await;
    }
    if options.wants("cluster") {
        cluster(&options).await;
    }
}
