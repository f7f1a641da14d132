//! qlessd on Redis Sentinel and Redis Cluster, as deployments run them: real
//! topologies on loopback (`support::topology`), a primary killed with SIGKILL while
//! work goes on, a namespace's slot moved to another primary while it is in use,
//! sentinels with a password of their own, and nodes that are not where the data is.
//! What must hold: an acknowledged job survives a failover (`--min-replicas-ack 1`),
//! service comes back without a restart, calls follow a slot being moved (`ASK`), and
//! while service is away the answers are 503, never 500.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::binary::{BINARY, free_port};
use crate::support::topology::{Cluster, FORMING, SentinelSet, wait_until};

/// A qlessd process; killed on drop.
struct Gateway {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Gateway {
    /// Starts qlessd with `env` and waits until `/readyz` answers `ready` (200, or
    /// 503 for a gateway meant to be unready).
    async fn start(env: &[(&str, String)], ready: u16) -> Gateway {
        let port = free_port();
        let mut command = Command::new(BINARY);
        command
            .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
            .env("QLESSD_POOL_TIMEOUT_MS", "1000")
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let gateway = Gateway {
            child: command.spawn().unwrap(),
            base: format!("http://127.0.0.1:{port}"),
            http: crate::support::http_builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        };
        let deadline = Instant::now() + FORMING;
        while gateway.get("/readyz", None).await.0 != ready {
            assert!(Instant::now() < deadline, "/readyz never answered {ready}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gateway
    }

    /// `GET path` in `namespace`: the status (0 when there was no answer) and body.
    async fn get(&self, path: &str, namespace: Option<&str>) -> (u16, String) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(namespace) = namespace {
            request = request.header("qless-namespace", namespace);
        }
        answer(request).await
    }

    /// Puts the job `jid` into queue `q` of `namespace`: the status and body.
    async fn put(&self, jid: &str, namespace: &str) -> (u16, String) {
        let request = self
            .http
            .post(format!("{}/v1/queues/q/jobs", self.base))
            .header("qless-namespace", namespace)
            .json(&json!({"jid": jid, "klass": "K"}));
        answer(request).await
    }
}

async fn answer(request: reqwest::RequestBuilder) -> (u16, String) {
    match request.send().await {
        Ok(reply) => {
            let status = reply.status().as_u16();
            let retry_after = reply.headers().contains_key("retry-after");
            let text = reply.text().await.unwrap_or_default();
            if status == 503 {
                assert!(retry_after, "a 503 without Retry-After: {text}");
            }
            (status, text)
        }
        Err(_) => (0, String::new()),
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the job `jid` of `namespace` is stored on `node`.
fn stored(node: &crate::support::topology::Node, namespace: &str, jid: &str) -> bool {
    let mut conn = node.connection().expect("the node answers");
    redis::cmd("EXISTS")
        .arg(format!("ql:{{{namespace}}}:j:{jid}"))
        .query::<i64>(&mut conn)
        .expect("EXISTS")
        == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_loses_no_acknowledged_job_and_needs_no_restart() {
    let mut set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap();
    let gateway = Gateway::start(
        &[
            ("QLESSD_REDIS_URL", set.url()),
            ("QLESSD_NAMESPACE", "s".to_owned()),
            ("QLESSD_MIN_REPLICAS_ACK", "1".to_owned()),
            ("QLESSD_MIN_REPLICAS_TIMEOUT_MS", "300".to_owned()),
        ],
        200,
    )
    .await;
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    let mut next = 0;
    let mut put = async |acknowledged: &mut Vec<String>, refused: &mut usize| {
        next += 1;
        let jid = format!("job-{next}");
        match gateway.put(&jid, "s").await {
            (201, _) | (200, _) => acknowledged.push(jid),
            (503, _) | (0, _) => *refused += 1,
            (status, body) => panic!("put answered {status}: {body}"),
        }
    };
    while acknowledged.len() < 50 {
        put(&mut acknowledged, &mut refused).await;
    }
    assert_eq!(refused, 0, "puts refused before any failure");
    // The primary dies mid-stream; the producer keeps going through the failover.
    set.primary.kill();
    let replica_port = set.replica.port;
    let deadline = Instant::now() + FORMING;
    while set.primary_port() != Some(replica_port) {
        put(&mut acknowledged, &mut refused).await;
        assert!(Instant::now() < deadline, "the sentinels never failed over");
    }
    // The old primary comes back (empty: no persistence) and the sentinels make it a
    // replica of the new one, so writes can be acknowledged by a replica again. It
    // must never be written to.
    set.primary.restart();
    let before = acknowledged.len();
    let deadline = Instant::now() + FORMING;
    while acknowledged.len() < before + 20 {
        put(&mut acknowledged, &mut refused).await;
        assert!(
            Instant::now() < deadline,
            "no service after the failover ({} refused)",
            refused
        );
    }
    // On a loaded machine the sentinels may fail over once more (to the restarted
    // node, once it holds a copy): what matters is that the primary they name now,
    // whichever it is, holds every acknowledged job.
    let primary_port = set.primary_port().expect("the sentinels name a primary");
    let new_primary = [&set.primary, &set.replica]
        .into_iter()
        .find(|node| node.port == primary_port)
        .expect("the primary is one of the two data nodes");
    assert_eq!(new_primary.role().as_deref(), Some("master"));
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|jid| !stored(new_primary, "s", jid))
        .collect();
    assert!(lost.is_empty(), "acknowledged jobs lost: {lost:?}");
    assert_eq!(gateway.get("/readyz", None).await.0, 200);
}

/// Two namespaces whose slots belong to different primaries of `cluster`.
fn namespaces_on_two_primaries(cluster: &Cluster) -> [(String, usize); 2] {
    let first = ("t0".to_owned(), cluster.owner("ql:{t0}").unwrap());
    let second = (1..100)
        .map(|n| format!("t{n}"))
        .find_map(|name| {
            let owner = cluster.owner(&format!("ql:{{{name}}}"))?;
            (owner != first.1).then_some((name, owner))
        })
        .expect("a namespace on another primary");
    [first, second]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_serves_namespaces_on_two_primaries_and_survives_losing_one() {
    let mut cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let [(a, a_owner), (b, b_owner)] = namespaces_on_two_primaries(&cluster);
    let gateway = Gateway::start(
        &[
            ("QLESSD_REDIS_URL", cluster.url()),
            ("QLESSD_NAMESPACE", a.clone()),
            ("QLESSD_NAMESPACES", b.clone()),
        ],
        200,
    )
    .await;
    for (namespace, owner) in [(&a, a_owner), (&b, b_owner)] {
        let (status, body) = gateway.put(&format!("first-{namespace}"), namespace).await;
        assert_eq!(status, 201, "{body}");
        assert!(stored(
            &cluster.nodes[owner],
            namespace,
            &format!("first-{namespace}")
        ));
        let (status, body) = gateway
            .get(&format!("/v1/jobs/first-{namespace}"), Some(namespace))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    // `a`'s primary dies; its replica takes over after the node timeout. Meanwhile
    // puts into `a` are refused with 503 (never 500), and `b` is not affected.
    cluster.nodes[a_owner].kill();
    let deadline = Instant::now() + FORMING;
    let mut refused = 0;
    let mut n = 0;
    loop {
        n += 1;
        match gateway.put(&format!("a-{n}"), &a).await {
            (201, _) => break,
            (503, _) | (0, _) => refused += 1,
            (status, body) => panic!("put answered {status} during the failover: {body}"),
        }
        let (status, body) = gateway.put(&format!("b-{n}"), &b).await;
        assert!(
            matches!(status, 201 | 503),
            "put into the other namespace answered {status}: {body}"
        );
        assert!(
            Instant::now() < deadline,
            "no service after the failover ({refused} refused)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let promoted = cluster.owner(&format!("ql:{{{a}}}")).expect("a new owner");
    assert_ne!(promoted, a_owner);
    assert!(stored(&cluster.nodes[promoted], &a, &format!("a-{n}")));
    let (status, body) = gateway.get(&format!("/v1/jobs/a-{n}"), Some(&a)).await;
    assert_eq!(status, 200, "{body}");
}

/// Whether the job `jid` of `namespace` is stored on `node`, a node importing its
/// slot (which shows the slot's keys only after `ASKING`).
fn stored_asking(node: &crate::support::topology::Node, namespace: &str, jid: &str) -> bool {
    let mut conn = node.connection().expect("the node answers");
    let (exists,): (i64,) = redis::pipe()
        .cmd("ASKING")
        .ignore()
        .cmd("EXISTS")
        .arg(format!("ql:{{{namespace}}}:j:{jid}"))
        .query(&mut conn)
        .expect("ASKING, EXISTS");
    exists == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_follow_a_namespace_whose_slot_moves_to_another_primary() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let from = cluster.owner("ql:{t0}").unwrap();
    let to = (0..cluster.nodes.len())
        .find(|&at| at != from && cluster.nodes[at].role().as_deref() == Some("master"))
        .unwrap();
    let slot = cluster.nodes[from].slot("ql:{t0}");
    let gateway = Gateway::start(
        &[
            ("QLESSD_REDIS_URL", cluster.url()),
            ("QLESSD_NAMESPACE", "t0".to_owned()),
        ],
        200,
    )
    .await;
    for n in 0..5 {
        let (status, body) = gateway.put(&format!("before-{n}"), "t0").await;
        assert_eq!(status, 201, "{body}");
    }
    // The slot's keys move to `to` while `from` still owns the slot: `from` answers
    // ASK, and the calls go to `to` once each (after ASKING), where the script is not
    // loaded yet. None of them fails.
    cluster.start_move(slot, from, to);
    assert!(stored_asking(&cluster.nodes[to], "t0", "before-0"));
    for n in 0..5 {
        let (status, body) = gateway.put(&format!("during-{n}"), "t0").await;
        assert_eq!(status, 201, "put while the slot moves: {body}");
        let (status, body) = gateway
            .get(&format!("/v1/jobs/before-{n}"), Some("t0"))
            .await;
        assert_eq!(status, 200, "get while the slot moves: {body}");
    }
    assert!(stored_asking(&cluster.nodes[to], "t0", "during-4"));
    let (status, body) = gateway.get("/readyz", None).await;
    assert_eq!(status, 200, "ready while the slot moves: {body}");
    // The move ends: `to` owns the slot, `from` answers MOVED (to the one call that
    // meets it: 503), and the next connection opens to `to`.
    cluster.finish_move(slot, from, to);
    let deadline = Instant::now() + FORMING;
    let mut n = 0;
    loop {
        n += 1;
        match gateway.put(&format!("after-{n}"), "t0").await {
            (201, _) => break,
            (503, body) => assert!(body.contains("(MOVED)"), "{body}"),
            (status, body) => panic!("put answered {status} after the move: {body}"),
        }
        assert!(Instant::now() < deadline, "no service after the move");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(n <= 3, "{n} puts to find the slot's new owner");
    assert!(stored(&cluster.nodes[to], "t0", &format!("after-{n}")));
    for jid in ["before-0", "during-4"] {
        let (status, body) = gateway.get(&format!("/v1/jobs/{jid}"), Some("t0")).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(gateway.get("/readyz", None).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_with_a_password_of_their_own_are_asked_with_it_and_it_never_shows() {
    const PASSWORD: &str = "sentinel-S3cret";
    let set = tokio::task::spawn_blocking(|| SentinelSet::start_with(Some(PASSWORD)))
        .await
        .unwrap();
    // Without the sentinels' password, or with a wrong one, qlessd cannot find the
    // primary: it says so, and shows no password.
    let without = set.url().split('?').next().unwrap().to_owned();
    let wrong = set.url().replace(PASSWORD, "wrong-S3cret");
    for url in [without, wrong] {
        let output = Command::new(BINARY)
            .env("QLESSD_REDIS_URL", &url)
            .env("QLESSD_NAMESPACE", "s")
            .env("QLESSD_POOL_TIMEOUT_MS", "1000")
            .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout);
        assert!(!output.status.success(), "started with {url}");
        assert!(log.contains("cannot use Redis at"), "{log}");
        assert!(!log.contains("S3cret"), "a password shows:\n{log}");
    }
    let gateway = Gateway::start(
        &[
            ("QLESSD_REDIS_URL", set.url()),
            ("QLESSD_NAMESPACE", "s".to_owned()),
        ],
        200,
    )
    .await;
    let (status, body) = gateway.put("j", "s").await;
    assert_eq!(status, 201, "{body}");
    assert!(stored(&set.primary, "s", "j"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_does_not_hold_the_namespace_gives_503_and_is_not_ready() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let owner = cluster.owner("ql:{t0}").unwrap();
    let elsewhere = (0..cluster.nodes.len())
        .find(|&at| at != owner && cluster.nodes[at].role().as_deref() == Some("master"))
        .unwrap();
    let replica = (0..cluster.nodes.len())
        .find(|&at| cluster.nodes[at].role().as_deref() == Some("slave"))
        .unwrap();
    for (node, word) in [(elsewhere, "MOVED"), (replica, "READONLY")] {
        // A plain URL to one node: qlessd cannot follow, but must say why.
        let gateway = Gateway::start(
            &[
                ("QLESSD_REDIS_URL", cluster.nodes[node].url()),
                ("QLESSD_NAMESPACE", "t0".to_owned()),
            ],
            503,
        )
        .await;
        let (_, body) = gateway.get("/readyz", None).await;
        assert!(body.contains(&format!("({word})")), "{word}: {body}");
        let (status, body) = gateway.put("j", "t0").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("Redis is unavailable ("), "{body}");
    }
    wait_until("nothing was written", Duration::from_secs(1), || {
        cluster.nodes.iter().all(|node| {
            node.connection().is_ok_and(|mut conn| {
                redis::cmd("DBSIZE")
                    .query::<i64>(&mut conn)
                    .is_ok_and(|n| n == 0)
            })
        })
    });
}

#[test]
fn a_cluster_url_without_a_namespace_is_refused_with_a_clear_message() {
    let output = Command::new(BINARY)
        .env("QLESSD_REDIS_URL", "redis+cluster://127.0.0.1:1")
        .env("QLESSD_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env_remove("QLESSD_NAMESPACE")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs --namespace"), "{stderr}");
}

#[tokio::test]
async fn with_min_replicas_ack_a_primary_without_its_replicas_is_not_ready() {
    let primary = crate::support::topology::Node::start(&[]);
    let gateway = Gateway::start(
        &[
            ("QLESSD_REDIS_URL", primary.url()),
            ("QLESSD_NAMESPACE", "ns".to_owned()),
            ("QLESSD_MIN_REPLICAS_ACK", "1".to_owned()),
            ("QLESSD_MIN_REPLICAS_TIMEOUT_MS", "200".to_owned()),
        ],
        503,
    )
    .await;
    let (status, body) = gateway.get("/readyz", None).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("NOREPLICAS"), "{body}");
    // A replica connects: ready (and writes are acknowledged) without a restart.
    let _replica = crate::support::topology::Node::start(&[
        "--replicaof",
        "127.0.0.1",
        primary.address().rsplit(':').next().unwrap(),
    ]);
    let deadline = Instant::now() + FORMING;
    while gateway.get("/readyz", None).await.0 != 200 {
        assert!(Instant::now() < deadline, "never ready with its replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = gateway.put("replicated", "ns").await;
    assert_eq!(status, 201, "{body}");
}
