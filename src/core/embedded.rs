//! Embedded mode: with no Redis URL, qlessd starts its own `redis-server` on a private
//! Unix socket with its data in a local directory, waits for it to answer, restarts it
//! if it dies, and shuts it down (flushing the AOF) when qlessd stops.
//!
//! The server is configured for a job queue rather than a cache:
//! * AOF with `appendfsync everysec`: at most a second of writes at risk on a crash;
//! * `maxmemory-policy noeviction`: Redis refuses writes rather than dropping jobs;
//! * `hash-max-listpack-value 1024`: a job hash whose fields (mostly `data`) are under
//!   1 KB keeps the compact listpack encoding, about a quarter of the memory of the
//!   default hashtable encoding that 100 bytes of data would otherwise force;
//! * `zset-max-listpack-entries 16`: qless scores are fractional timestamps, and a
//!   listpack sorted set re-parses (strtod) every score before the insertion point on
//!   each ZADD. At Redis's default limit of 128, the sets that stay small in a busy
//!   queue (`ql:workers` with 50 workers, a queue's `-locks`) cost several µs per ZADD;
//!   moving them to skiplists at 16 entries halved ZADD time in the worker benchmark.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::Error;

/// Largest value a job-hash field may have and still be stored as a listpack.
pub const HASH_LISTPACK_VALUE: u32 = 1024;

/// Largest sorted set kept as a listpack (see the module documentation).
pub const ZSET_LISTPACK_ENTRIES: u32 = 16;

/// Unix socket paths longer than this are refused by the kernel (`sun_path`).
const MAX_SOCKET_PATH: usize = 100;

/// A supervised `redis-server`. Dropping it does not stop Redis; call
/// [`EmbeddedRedis::shutdown`].
pub struct EmbeddedRedis {
    socket: PathBuf,
    stop: watch::Sender<bool>,
    supervisor: tokio::task::JoinHandle<()>,
}

impl EmbeddedRedis {
    /// Starts `redis-server` with its data in `data_dir` and waits until it answers.
    pub async fn start(binary: &Path, data_dir: &Path) -> Result<Self, Error> {
        let binary = find_binary(binary)?;
        std::fs::create_dir_all(data_dir).map_err(|err| {
            Error::Startup(format!(
                "cannot create data directory {}: {err}",
                data_dir.display()
            ))
        })?;
        let data_dir = data_dir.canonicalize().map_err(|err| {
            Error::Startup(format!(
                "cannot resolve data directory {}: {err}",
                data_dir.display()
            ))
        })?;
        let socket = data_dir.join("redis.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::Startup(format!(
                "data directory path too long for a Unix socket ({}); choose a shorter --data-dir",
                socket.display()
            )));
        }
        // A server left running by a qlessd that was killed would fight the new one for
        // the same AOF files: stop it first.
        stop_leftover(&socket).await;

        let spec = Arc::new(ServerSpec {
            binary,
            data_dir,
            socket: socket.clone(),
        });
        let child = spec.spawn_and_wait().await?;
        let (stop, stopped) = watch::channel(false);
        let supervisor = tokio::spawn(supervise(spec, child, stopped));
        Ok(EmbeddedRedis {
            socket,
            stop,
            supervisor,
        })
    }

    /// The URL clients use to reach this server.
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Asks Redis to shut down (writing its AOF) and waits for the process to exit.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.supervisor.await;
    }
}

struct ServerSpec {
    binary: PathBuf,
    data_dir: PathBuf,
    socket: PathBuf,
}

impl ServerSpec {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        let listpack = HASH_LISTPACK_VALUE.to_string();
        let zset_entries = ZSET_LISTPACK_ENTRIES.to_string();
        cmd.args(["--port", "0", "--unixsocketperm", "700"])
            .arg("--unixsocket")
            .arg(&self.socket)
            .arg("--dir")
            .arg(&self.data_dir)
            .args(["--logfile", "redis.log", "--daemonize", "no"])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ])
            .args(["--maxmemory-policy", "noeviction"])
            .args(["--hash-max-listpack-value", &listpack])
            .args(["--zset-max-listpack-entries", &zset_entries])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        stop_with_parent(&mut cmd);
        cmd
    }

    async fn spawn_and_wait(&self) -> Result<Child, Error> {
        let mut child = self.command().spawn().map_err(|err| {
            Error::Startup(format!("cannot start {}: {err}", self.binary.display()))
        })?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::Startup(format!(
                    "embedded redis-server exited at start ({status}); see {}",
                    self.data_dir.join("redis.log").display()
                )));
            }
            if ping(&self.socket).await {
                return Ok(child);
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.kill().await;
                return Err(Error::Startup(format!(
                    "embedded redis-server did not answer within 10s; see {}",
                    self.data_dir.join("redis.log").display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn supervise(spec: Arc<ServerSpec>, mut child: Child, mut stopped: watch::Receiver<bool>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::select! {
            status = child.wait() => {
                tracing::error!(?status, "embedded redis-server exited; restarting it");
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stopped.changed() => return,
                    }
                    match spec.spawn_and_wait().await {
                        Ok(restarted) => {
                            tracing::info!("embedded redis-server is back");
                            child = restarted;
                            backoff = Duration::from_millis(100);
                            break;
                        }
                        Err(err) => {
                            tracing::error!(%err, "restarting embedded redis-server failed");
                            backoff = (backoff * 2).min(Duration::from_secs(5));
                        }
                    }
                }
            }
            _ = stopped.changed() => {
                shutdown_server(&spec.socket, &mut child).await;
                return;
            }
        }
    }
}

/// SHUTDOWN makes Redis fsync its AOF before exiting; a kill is only the fallback.
async fn shutdown_server(socket: &Path, child: &mut Child) {
    if let Ok(client) = redis::Client::open(format!("unix://{}", socket.display()))
        && let Ok(mut conn) = client.get_multiplexed_async_connection().await
    {
        // The connection drops as the server exits, so the reply is an error by design.
        let _: Result<(), _> = redis::cmd("SHUTDOWN").query_async(&mut conn).await;
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        tracing::warn!("embedded redis-server did not stop in 10s; killing it");
        let _ = child.kill().await;
    }
}

/// Asks the kernel to send Redis SIGTERM (a clean shutdown that flushes the AOF) if
/// qlessd dies without stopping it, e.g. on SIGKILL, so no orphan keeps the data
/// directory. Elsewhere than Linux the next start stops such a leftover instead.
#[cfg(target_os = "linux")]
fn stop_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: between fork and exec only async-signal-safe calls are allowed;
    // prctl, getppid and _exit are system calls that allocate nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // qlessd died before the request took effect: do not outlive it.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn stop_with_parent(_cmd: &mut Command) {}

async fn stop_leftover(socket: &Path) {
    if !socket.exists() || !ping(socket).await {
        return;
    }
    tracing::warn!(socket = %socket.display(), "stopping a redis-server left by an earlier run");
    if let Ok(client) = redis::Client::open(format!("unix://{}", socket.display()))
        && let Ok(mut conn) = client.get_multiplexed_async_connection().await
    {
        let _: Result<(), _> = redis::cmd("SHUTDOWN").query_async(&mut conn).await;
    }
    for _ in 0..100 {
        if !ping(socket).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn ping(socket: &Path) -> bool {
    let Ok(client) = redis::Client::open(format!("unix://{}", socket.display())) else {
        return false;
    };
    let attempt = async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), attempt).await,
        Ok(Some(_))
    )
}

/// Resolves the binary on PATH so a missing Redis gives one clear line.
fn find_binary(binary: &Path) -> Result<PathBuf, Error> {
    if binary.components().count() > 1 {
        return if binary.is_file() {
            Ok(binary.to_path_buf())
        } else {
            Err(missing_binary(binary))
        };
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| missing_binary(binary))
}

fn missing_binary(binary: &Path) -> Error {
    Error::Startup(format!(
        "{} not found: install Redis (e.g. `sudo apt-get install redis-server`) or pass \
         --redis-url / QLESSD_REDIS_URL to use an existing Redis",
        binary.display()
    ))
}
