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
//! * `zset-max-listpack-entries 0`: every sorted set is a skiplist. qless scores are
//!   fractional timestamps, which a listpack sorted set keeps as text: each ZADD into
//!   one formats the new score (`%.17g`) and re-parses (strtod) every score before the
//!   insertion point, and moving a member (a worker's `ql:workers` entry on every pop
//!   and heartbeat) deletes and reinserts it, reallocating the listpack twice. At
//!   Redis's default of 128 entries that made ZADD twice as slow in the worker
//!   benchmark; at 16 the sets that stay small (a worker's jobs, a quiet queue's work
//!   and locks) still paid it, a tenth of the single-job worker path's script
//!   instructions. A skiplist costs ~0.8 KB more than a small listpack per sorted set
//!   (per queue and per worker holding jobs), nothing per job;
//! * `maxmemory` (by default half the machine's memory, see [`MaxMemory`]): without a
//!   limit `noeviction` never applies, and Redis grows until the kernel kills it.
//!
//! The listpack settings exist only from Redis 7.0, so the binary's version is checked
//! before it is started; and when it exits at start, its own words (stderr and the new
//! lines of its log) are the error, since they say what went wrong.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};
use tokio::sync::watch;

use super::Error;

/// Largest value a job-hash field may have and still be stored as a listpack.
pub const HASH_LISTPACK_VALUE: u32 = 1024;

/// Largest sorted set kept as a listpack (see the module documentation).
pub const ZSET_LISTPACK_ENTRIES: u32 = 0;

/// The oldest `redis-server` that accepts every option embedded mode passes (the
/// listpack settings are new in 7.0).
const MIN_EMBEDDED_VERSION: (u32, u32) = (7, 0);

/// Most lines of Redis's own output quoted when it fails to start.
const QUOTED_LINES: usize = 12;

/// The embedded Redis's memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxMemory {
    /// A number of bytes.
    Bytes(u64),
    /// A percentage (1-100) of the memory available: the machine's (`MemTotal` in
    /// `/proc/meminfo`), or the container's cgroup limit when that is lower.
    Share(u8),
}

impl MaxMemory {
    /// The limit in bytes.
    pub fn bytes(self) -> Result<u64, Error> {
        match self {
            MaxMemory::Bytes(bytes) => Ok(bytes),
            MaxMemory::Share(percent) => {
                let total = available_memory().ok_or_else(|| {
                    Error::Startup(
                        "cannot read the machine's memory from /proc/meminfo: give the \
                         embedded Redis an explicit size with --redis-maxmemory (e.g. 2gb)"
                            .to_owned(),
                    )
                })?;
                Ok(total / 100 * u64::from(percent))
            }
        }
    }
}

/// `MemTotal`, or the cgroup v2 limit (a container's) when it is lower.
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let total = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())?
        * 1024;
    // "max" (no limit) does not parse, and leaves the machine's total.
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|limit| limit.trim().parse::<u64>().ok());
    Some(cgroup.map_or(total, |limit| limit.min(total)))
}

/// Unix socket paths longer than this are refused by the kernel (`sun_path`).
const MAX_SOCKET_PATH: usize = 100;

/// A supervised `redis-server`. Dropping it does not stop Redis; call
/// [`EmbeddedRedis::shutdown`].
pub struct EmbeddedRedis {
    socket: PathBuf,
    stop: watch::Sender<bool>,
    supervisor: tokio::task::JoinHandle<()>,
    /// The data directory's lock, held for as long as this process runs its Redis.
    _lock: std::fs::File,
}

impl EmbeddedRedis {
    /// Starts `redis-server` with its data in `data_dir`, holding at most `maxmemory`,
    /// and waits until it answers.
    pub async fn start(
        binary: &Path,
        data_dir: &Path,
        maxmemory: MaxMemory,
    ) -> Result<Self, Error> {
        let binary = find_binary(binary)?;
        check_version(&binary).await?;
        let maxmemory = maxmemory.bytes()?;
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
        // One qlessd per data directory: a second one must not touch the first one's
        // live Redis, nor run a second redis-server on the same AOF files.
        let lock = lock_data_dir(&data_dir)?;
        let socket = data_dir.join("redis.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::Startup(format!(
                "data directory path too long for a Unix socket ({}); choose a shorter --data-dir",
                socket.display()
            )));
        }
        // A server left running by a qlessd that was killed would fight the new one for
        // the same AOF files: stop it first. (Holding the lock, we know no live qlessd
        // runs it: the lock goes with the process that held it, however it ended.)
        stop_leftover(&socket).await;

        let spec = Arc::new(ServerSpec {
            binary,
            data_dir,
            socket: socket.clone(),
            maxmemory,
        });
        let child = spec.spawn_and_wait().await?;
        let (stop, stopped) = watch::channel(false);
        let supervisor = tokio::spawn(supervise(spec, child, stopped));
        Ok(EmbeddedRedis {
            socket,
            stop,
            supervisor,
            _lock: lock,
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
    maxmemory: u64,
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
            .arg("--maxmemory")
            .arg(self.maxmemory.to_string())
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
        let log = self.data_dir.join("redis.log");
        // Only this attempt's lines of the log say why it failed.
        let log_start = std::fs::metadata(&log).map_or(0, |meta| meta.len());
        let mut child = self.command().spawn().map_err(|err| {
            Error::Startup(format!("cannot start {}: {err}", self.binary.display()))
        })?;
        let stderr = child.stderr.take().map(StderrTail::start);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let said = match &stderr {
                    Some(tail) => tail.lines_at_exit().await,
                    None => Vec::new(),
                };
                return Err(Error::Startup(format!(
                    "embedded redis-server exited at start ({status}){}",
                    quote(said, &log, log_start)
                )));
            }
            if ping(&self.socket).await {
                if let Some(tail) = &stderr {
                    tail.started();
                }
                return Ok(child);
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.kill().await;
                let said = match &stderr {
                    Some(tail) => tail.lines(),
                    None => Vec::new(),
                };
                return Err(Error::Startup(format!(
                    "embedded redis-server did not answer within 10s{}",
                    quote(said, &log, log_start)
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Reads Redis's stderr for as long as it runs, so the pipe never fills: before Redis
/// answers, its last lines are kept to explain a failed start; after, each line is
/// logged (Redis writes there only what it cannot write to its log file).
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    started: Arc<AtomicBool>,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl StderrTail {
    fn start(stderr: ChildStderr) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        let started = Arc::new(AtomicBool::new(false));
        let (kept, logging) = (lines.clone(), started.clone());
        let reader = tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if logging.load(Ordering::Relaxed) {
                    tracing::warn!(target: "redis", "{line}");
                    continue;
                }
                let mut kept = kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if kept.len() == QUOTED_LINES {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        StderrTail {
            lines,
            started,
            reader: Mutex::new(Some(reader)),
        }
    }

    fn started(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    fn lines(&self) -> Vec<String> {
        let kept = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.iter().cloned().collect()
    }

    /// The lines written before the process exited: the reader reaches the end of the
    /// pipe right after the exit, so it is given a moment to get there.
    async fn lines_at_exit(&self) -> Vec<String> {
        let reader = self
            .reader
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        self.lines()
    }
}

/// Redis's own words about a failed start: its stderr, then the lines this attempt
/// added to its log file, on indented lines after the error.
fn quote(stderr: Vec<String>, log: &Path, log_start: u64) -> String {
    let logged = std::fs::read(log)
        .ok()
        .and_then(|bytes| {
            bytes
                .get(log_start as usize..)
                .map(|new| String::from_utf8_lossy(new).into_owned())
        })
        .unwrap_or_default();
    let mut said: Vec<String> = stderr
        .into_iter()
        .chain(logged.lines().map(str::to_owned))
        .filter(|line| !line.trim().is_empty())
        .collect();
    if said.len() > QUOTED_LINES {
        said.drain(..said.len() - QUOTED_LINES);
    }
    if said.is_empty() {
        return format!(" and wrote nothing (log: {})", log.display());
    }
    let mut text = format!("; it said (log: {}):", log.display());
    for line in said {
        text.push_str("\n    ");
        text.push_str(line.trim_end());
    }
    text
}

/// Embedded mode passes options that older servers refuse with a cryptic "Bad
/// directive"; a version check turns that into one line saying what to do.
async fn check_version(binary: &Path) -> Result<(), Error> {
    let output = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(5), output).await {
        Ok(Ok(output)) => output,
        Ok(Err(err)) => {
            return Err(Error::Startup(format!(
                "cannot run {} --version: {err}",
                binary.display()
            )));
        }
        Err(_) => {
            return Err(Error::Startup(format!(
                "{} --version did not answer within 5s",
                binary.display()
            )));
        }
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(version) = parse_version(&text) else {
        return Err(Error::Startup(format!(
            "{} --version printed {:?}, not a Redis server version",
            binary.display(),
            text.trim()
        )));
    };
    if version < MIN_EMBEDDED_VERSION {
        let (major, minor) = MIN_EMBEDDED_VERSION;
        return Err(Error::Startup(format!(
            "{} is Redis {}.{}, but embedded mode needs Redis {major}.{minor} or newer: \
             install it (Debian 12 / Ubuntu 24.04: `sudo apt-get install redis-server`; \
             otherwise https://redis.io/docs/latest/operate/oss_and_stack/install/), \
             point --redis-server at one, or use an existing Redis with --redis-url",
            binary.display(),
            version.0,
            version.1
        )));
    }
    Ok(())
}

/// `Redis server v=7.0.15 sha=...` -> (7, 0).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))?;
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
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
                            crate::metrics::METRICS.redis_restarted();
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
    // The connection drops as the server exits, so there is no reply by design.
    command(socket, "SHUTDOWN").await;
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
#[allow(
    unsafe_code,
    reason = "`pre_exec` is unsafe, and the only way to run prctl in the child"
)]
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

/// The file in a data directory that the qlessd using it holds locked.
const LOCK_FILE: &str = "qlessd.lock";

/// Takes the exclusive lock of `data_dir` (an advisory lock on [`LOCK_FILE`], which
/// the kernel releases when the process ends, even by SIGKILL) and writes this
/// process's id in the file; refuses, naming the holder, when another process has it.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, Error> {
    use std::io::{Read, Seek, Write};
    let path = data_dir.join(LOCK_FILE);
    let cannot = |err: std::io::Error| {
        Error::Startup(format!(
            "cannot lock the data directory ({}): {err}",
            path.display()
        ))
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(cannot)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "another process".to_owned(),
                pid => format!("the process {pid}"),
            };
            return Err(Error::Startup(format!(
                "the data directory {} is in use by {holder} (another qlessd with the same \
                 --data-dir); give this one a --data-dir of its own, or an external Redis \
                 with --redis-url",
                data_dir.display()
            )));
        }
        Err(std::fs::TryLockError::Error(err)) => return Err(cannot(err)),
    }
    file.set_len(0).map_err(cannot)?;
    file.rewind().map_err(cannot)?;
    writeln!(file, "{}", std::process::id()).map_err(cannot)?;
    Ok(file)
}

async fn stop_leftover(socket: &Path) {
    if !socket.exists() || !ping(socket).await {
        return;
    }
    tracing::warn!(socket = %socket.display(), "stopping a redis-server left by an earlier run");
    command(socket, "SHUTDOWN").await;
    for _ in 0..100 {
        if !ping(socket).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn ping(socket: &Path) -> bool {
    matches!(command(socket, "PING").await, Some(reply) if !matches!(reply, redis::Value::ServerError(_)))
}

/// Sends `word` to the server at `socket` on a connection of its own: its reply, or
/// `None` when there is none within half a second.
async fn command(socket: &Path, word: &str) -> Option<redis::Value> {
    const WITHIN: Duration = Duration::from_millis(500);
    let endpoint = super::Endpoint::plain(format!("unix://{}", socket.display()));
    let attempt = async {
        let (mut conn, _node) = super::resp::Connection::open(&endpoint, false, WITHIN).await?;
        conn.query(&[word]).await
    };
    tokio::time::timeout(WITHIN, attempt).await.ok()?.ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_is_locked_by_one_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_data_dir(dir.path()).unwrap();
        let err = lock_data_dir(dir.path()).expect_err("a second lock is refused");
        let message = err.to_string();
        assert!(
            message.contains(&format!("the process {}", std::process::id())),
            "{message}"
        );
        drop(first);
        lock_data_dir(dir.path()).expect("free again once the holder is gone");
    }

    #[test]
    fn versions_are_read_from_what_redis_server_prints() {
        let printed =
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d";
        assert_eq!(parse_version(printed), Some((7, 0)));
        assert_eq!(parse_version("Redis server v=6.0.16 sha=0"), Some((6, 0)));
        assert_eq!(parse_version("Redis server v=10.2.1"), Some((10, 2)));
        assert_eq!(parse_version("hello"), None);
        assert_eq!(parse_version("v=seven"), None);
    }

    #[test]
    fn a_share_of_memory_is_a_share_of_what_the_machine_has() {
        let half = MaxMemory::Share(50).bytes().unwrap();
        let all = MaxMemory::Share(100).bytes().unwrap();
        assert!(half > 0 && half < all, "{half} of {all}");
        assert_eq!(MaxMemory::Bytes(1 << 30).bytes().unwrap(), 1 << 30);
    }
}
