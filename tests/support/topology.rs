//! Redis topologies on loopback for the tests that need more than one server: a
//! primary with a replica watched by three sentinels (which may require a password
//! of their own), and a cluster of three primaries with a replica each, whose slots
//! can be moved between primaries. Every node is a `redis-server` on a free port with
//! its own temp dir, killed when its guard drops; every wait polls a condition under
//! a deadline.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a topology may take to form (or re-form after a failure).
pub const FORMING: Duration = Duration::from_secs(30);

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `condition` every 50 ms until it holds, failing with `what` after `within`.
pub fn wait_until(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One `redis-server` on a loopback port.
pub struct Node {
    pub port: u16,
    child: Option<Child>,
    args: Vec<String>,
    dir: TempDir,
    /// What clients must `AUTH` with (`requirepass`), if anything.
    password: Option<String>,
}

impl Node {
    /// Starts a server on a free port with `extra` arguments and waits for it to
    /// answer.
    pub fn start(extra: &[&str]) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("qlessd-topology-")
            .tempdir()
            .unwrap();
        let mut node = Node {
            port: free_port(),
            child: None,
            args: extra.iter().map(|arg| arg.to_string()).collect(),
            dir,
            password: None,
        };
        node.restart();
        node
    }

    /// Starts a sentinel watching `master` (at `primary_port`), with a generated
    /// config file (sentinels rewrite it) and short failure timings; clients (and the
    /// other sentinels) must give it `password`, when there is one.
    pub fn sentinel(master: &str, primary_port: u16, password: Option<&str>) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("qlessd-sentinel-")
            .tempdir()
            .unwrap();
        let port = free_port();
        let config = dir.path().join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 sentinel monitor {master} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {master} 1000\n\
                 sentinel failover-timeout {master} 2000\n\
                 sentinel parallel-syncs {master} 1\n{requirepass}",
                dir = dir.path().display(),
                requirepass = password
                    .map(|password| format!("requirepass {password}\n"))
                    .unwrap_or_default(),
            ),
        )
        .unwrap();
        let mut node = Node {
            port,
            child: None,
            args: vec![config.display().to_string(), "--sentinel".to_owned()],
            dir,
            password: password.map(str::to_owned),
        };
        node.restart();
        node
    }

    /// Starts the server again (after [`Node::kill`]) on the same port and directory.
    pub fn restart(&mut self) {
        let sentinel = self.args.iter().any(|arg| arg == "--sentinel");
        let mut command = Command::new("redis-server");
        if sentinel {
            command.args(&self.args);
        } else {
            command
                .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(self.dir.path())
                .args(&self.args);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed to run the tests");
        self.child = Some(child);
        wait_until("a node answers PING", Duration::from_secs(10), || {
            redis::Client::open(self.url())
                .and_then(|client| client.get_connection())
                .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn))
                .is_ok()
        });
    }

    /// Kills the server at once (SIGKILL): no shutdown, no last words to replicas.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!("redis://:{password}@127.0.0.1:{}", self.port),
            None => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// A synchronous connection (for assertions and setup).
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(1))
    }

    /// The node's `ROLE`: `master`, `slave` or `sentinel`; `None` when unreachable.
    pub fn role(&self) -> Option<String> {
        let mut conn = self.connection().ok()?;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut conn).ok()?;
        match role.first() {
            Some(redis::Value::BulkString(role)) => Some(String::from_utf8_lossy(role).into()),
            _ => None,
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A primary with one replica, watched by three sentinels under the name `MASTER`.
pub struct SentinelSet {
    pub primary: Node,
    pub replica: Node,
    pub sentinels: Vec<Node>,
    /// The sentinels' own password (`requirepass`), if they have one.
    sentinel_password: Option<String>,
}

pub const MASTER: &str = "qless";

impl SentinelSet {
    /// Starts the five processes and waits until every sentinel knows the replica and
    /// the other two sentinels (so that they can agree on a failover).
    pub fn start() -> SentinelSet {
        SentinelSet::start_with(None)
    }

    /// [`SentinelSet::start`], with sentinels that require `sentinel_password`.
    pub fn start_with(sentinel_password: Option<&str>) -> SentinelSet {
        let primary = Node::start(&[]);
        let replica = Node::start(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        let sentinels: Vec<Node> = (0..3)
            .map(|_| Node::sentinel(MASTER, primary.port, sentinel_password))
            .collect();
        let set = SentinelSet {
            primary,
            replica,
            sentinels,
            sentinel_password: sentinel_password.map(str::to_owned),
        };
        wait_until("the replica is in sync", FORMING, || {
            set.replica.connection().is_ok_and(|mut conn| {
                redis::cmd("INFO")
                    .arg("replication")
                    .query::<String>(&mut conn)
                    .is_ok_and(|info| info.contains("master_link_status:up"))
            })
        });
        wait_until(
            "the sentinels know each other and the replica",
            FORMING,
            || {
                set.sentinels.iter().all(|sentinel| {
                    let Ok(mut conn) = sentinel.connection() else {
                        return false;
                    };
                    let peers: Vec<redis::Value> = redis::cmd("SENTINEL")
                        .arg("SENTINELS")
                        .arg(MASTER)
                        .query(&mut conn)
                        .unwrap_or_default();
                    let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
                        .arg("REPLICAS")
                        .arg(MASTER)
                        .query(&mut conn)
                        .unwrap_or_default();
                    peers.len() == 2 && replicas.len() == 1
                })
            },
        );
        set
    }

    /// The `redis+sentinel://` URL of the set (with the sentinels' password).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(Node::address).collect();
        let url = format!("redis+sentinel://{}/{MASTER}", hosts.join(","));
        match &self.sentinel_password {
            Some(password) => format!("{url}?sentinel_password={password}"),
            None => url,
        }
    }

    /// The port the sentinels name as the primary now.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|sentinel| {
            let mut conn = sentinel.connection().ok()?;
            let (_host, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER)
                .query(&mut conn)
                .ok()?;
            Some(port)
        })
    }
}

/// Three primaries with one replica each (`redis-cli --cluster create`).
pub struct Cluster {
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// Starts six nodes, joins them into a cluster and waits until every node says
    /// the cluster is ok.
    pub fn start() -> Cluster {
        let nodes: Vec<Node> = (0..6)
            .map(|_| {
                Node::start(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "1000",
                    "--cluster-replica-validity-factor",
                    "0",
                ])
            })
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(Node::address))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli must be installed to run the tests");
        assert!(created.success(), "redis-cli --cluster create failed");
        let cluster = Cluster { nodes };
        cluster.wait_ok();
        cluster
    }

    /// Waits until every running node says the cluster is ok and agrees on it.
    pub fn wait_ok(&self) {
        wait_until("the cluster is ok", FORMING, || {
            self.nodes
                .iter()
                .filter(|node| node.child.is_some())
                .all(|node| {
                    node.connection().is_ok_and(|mut conn| {
                        redis::cmd("CLUSTER")
                            .arg("INFO")
                            .query::<String>(&mut conn)
                            .is_ok_and(|info| info.contains("cluster_state:ok"))
                    })
                })
        });
    }

    /// The `redis+cluster://` URL (every node a seed).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(Node::address).collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The index of the node that is the primary for `key`'s slot now.
    pub fn owner(&self, key: &str) -> Option<usize> {
        self.nodes.iter().position(|node| {
            node.child.is_some()
                && node.role().as_deref() == Some("master")
                && node.connection().is_ok_and(|mut conn| {
                    // A keyed read answers on the owner, MOVED elsewhere.
                    redis::cmd("EXISTS")
                        .arg(key)
                        .query::<i64>(&mut conn)
                        .is_ok()
                })
        })
    }

    /// Begins moving `slot` from the primary `from` to the primary `to`, as
    /// `redis-cli --cluster reshard` does: `to` importing, `from` migrating, then every
    /// key of the slot moved in one `MIGRATE`. Until [`Cluster::finish_move`], `from`
    /// answers `ASK` for them and `to` serves them only after `ASKING`.
    pub fn start_move(&self, slot: u16, from: usize, to: usize) {
        let (source, target) = (&self.nodes[from], &self.nodes[to]);
        let mut source_conn = source.connection().unwrap();
        let mut target_conn = target.connection().unwrap();
        let setslot = |conn: &mut redis::Connection, state: &str, id: &str| {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .query::<()>(conn)
                .unwrap_or_else(|err| panic!("CLUSTER SETSLOT {state}: {err}"));
        };
        setslot(&mut target_conn, "IMPORTING", &source.id());
        setslot(&mut source_conn, "MIGRATING", &target.id());
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100_000)
            .query(&mut source_conn)
            .unwrap();
        if keys.is_empty() {
            return;
        }
        redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(target.port)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("REPLACE")
            .arg("KEYS")
            .arg(&keys)
            .query::<()>(&mut source_conn)
            .unwrap_or_else(|err| panic!("MIGRATE: {err}"));
    }

    /// Ends the move [`Cluster::start_move`] began: `to` owns `slot` now, as every
    /// primary is told (`to` first, then `from`, then the others; replicas learn it
    /// by gossip).
    pub fn finish_move(&self, slot: u16, from: usize, to: usize) {
        let owner = self.nodes[to].id();
        let others = (0..self.nodes.len()).filter(|&at| {
            at != to && at != from && self.nodes[at].role().as_deref() == Some("master")
        });
        let order: Vec<usize> = [to, from].into_iter().chain(others).collect();
        for at in order {
            let mut conn = self.nodes[at].connection().unwrap();
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&owner)
                .query::<()>(&mut conn)
                .unwrap_or_else(|err| panic!("CLUSTER SETSLOT NODE: {err}"));
        }
    }
}

impl Node {
    /// The node's cluster id (`CLUSTER MYID`).
    pub fn id(&self) -> String {
        let mut conn = self.connection().unwrap();
        redis::cmd("CLUSTER").arg("MYID").query(&mut conn).unwrap()
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot(&self, key: &str) -> u16 {
        let mut conn = self.connection().unwrap();
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .unwrap()
    }
}
