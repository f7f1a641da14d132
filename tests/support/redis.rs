//! A private `redis-server` per test: a Unix socket in a fresh temp dir, no
//! persistence, killed (and its directory removed) when the guard drops. Tests never
//! touch a shared Redis, so they run in parallel without seeing each other's keys.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A running private Redis.
pub struct RedisServer {
    child: Child,
    socket: PathBuf,
    _dir: TempDir,
}

impl RedisServer {
    /// Starts a server and waits until its socket accepts connections.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("qlessd-test-")
            .tempdir()
            .expect("temp dir");
        let socket = dir.path().join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&socket)
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed to run the tests");
        let server = RedisServer {
            child,
            socket,
            _dir: dir,
        };
        server.wait_until_ready();
        server
    }

    /// `unix://` URL of this server.
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Process id of the server.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Path of the socket.
    #[allow(dead_code)]
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Empties Redis's script cache (as a restart does): the next call meets NOSCRIPT.
    #[allow(dead_code)]
    pub fn forget_scripts(&self) {
        let mut conn = self.client().get_connection().expect("connection");
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query::<()>(&mut conn)
            .expect("SCRIPT FLUSH");
    }

    /// A plain client, for assertions on raw keys.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    /// Holds every client's commands for `millis` from now on (`CLIENT PAUSE ... ALL`),
    /// as a long script would. (Not a script that loops until `TIME` moves on: Redis
    /// 7.2 and later, and Valkey, give a script one `TIME` throughout.)
    #[allow(dead_code)]
    pub fn pause_clients(&self, millis: u64) {
        let mut admin = self.client().get_connection().unwrap();
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(millis)
            .arg("ALL")
            .query::<()>(&mut admin)
            .unwrap();
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // NOAUTH also means the server is up (it was started with a password).
            if let Ok(mut conn) = self.client().get_connection() {
                match redis::cmd("PING").query::<String>(&mut conn) {
                    Ok(_) => return,
                    Err(err) if err.code() == Some("NOAUTH") => return,
                    Err(_) => {}
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
