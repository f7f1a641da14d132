//! Process configuration: every option is a command-line flag with a `QLESSD_*`
//! environment twin, so `qlessd --help` is the configuration reference.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::core::embedded::MaxMemory;
use crate::model::{NamespaceName, TokenName};
pub use crate::telemetry::LogFormat;

/// Where the HTTP server listens (`--listen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl Listen {
    /// Whether only this machine can connect: a loopback address or a Unix socket.
    pub fn is_local(&self) -> bool {
        match self {
            Listen::Tcp(addr) => addr.ip().is_loopback(),
            Listen::Unix(_) => true,
        }
    }

    /// Whether this is a loopback TCP address, which a browser's page can reach (and a
    /// Unix socket is not: no browser connects to one, and a reverse proxy in front of
    /// it passes on its own `Host`).
    pub fn is_loopback(&self) -> bool {
        matches!(self, Listen::Tcp(addr) if addr.ip().is_loopback())
    }
}

impl FromStr for Listen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(path) = text.strip_prefix("unix:") {
            // (`unix:///run/q.sock`, URL-style, names the same path as `unix:/run/q.sock`.)
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err("a Unix socket needs a path: unix:PATH".to_owned());
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        text.parse().map(Listen::Tcp).map_err(|_| {
            format!("not an address: {text:?} (HOST:PORT, e.g. 127.0.0.1:5858, or unix:PATH)")
        })
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Tcp(addr) => addr.fmt(f),
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// qlessd: an HTTP/JSON job-queue server speaking the qless protocol over Redis.
#[derive(Debug, Clone, Parser)]
#[command(name = "qlessd", version, about, long_about = None, disable_help_flag = true)]
pub struct Settings {
    /// Print the options in short (`--help-all`: every detail).
    #[arg(short = 'h', long = "help", action = clap::ArgAction::HelpShort, global = true)]
    help: Option<bool>,

    /// Print every option with every detail.
    #[arg(long = "help-all", action = clap::ArgAction::HelpLong, global = true)]
    help_all: Option<bool>,

    /// Address the HTTP server listens on.
    ///
    /// `HOST:PORT`, or `unix:PATH` for a Unix socket that workers on the same machine reach
    /// with less work than TCP (`curl --unix-socket PATH http://localhost/...`; connecting
    /// takes write permission on the socket file, which qlessd's umask sets, and access to
    /// its directory). A stale socket file left by a process that is gone is replaced; a
    /// socket something still answers on is not.
    #[arg(
        help_heading = "HTTP",
        long,
        env = "QLESSD_LISTEN",
        default_value = "127.0.0.1:5858",
        global = true
    )]
    pub listen: Listen,

    /// Redis to use, e.g. `redis://127.0.0.1:6379/0` or `unix:///run/redis.sock`; a
    /// Sentinel-managed primary as
    /// `redis+sentinel://[user:pass@]HOST:PORT[,HOST:PORT...]/MASTER_NAME[/DB]`
    /// (`?sentinel_password=...&sentinel_username=...` when the sentinels require a
    /// password of their own); a Redis Cluster as
    /// `redis+cluster://[user:pass@]HOST:PORT[,HOST:PORT...]` (needs `--namespace`).
    ///
    /// `rediss`, `rediss+sentinel`, `rediss+cluster`: TLS. Unset: qlessd starts and
    /// supervises its own `redis-server` (embedded mode).
    #[arg(help_heading = "Redis", long, env = "QLESSD_REDIS_URL")]
    pub redis_url: Option<String>,

    /// Directory holding the embedded Redis's data (AOF), socket and log.
    #[arg(
        help_heading = "Embedded Redis",
        long,
        env = "QLESSD_DATA_DIR",
        default_value = "./qlessd-data"
    )]
    pub data_dir: PathBuf,

    /// The `redis-server` binary used in embedded mode.
    #[arg(
        help_heading = "Embedded Redis",
        long,
        env = "QLESSD_REDIS_SERVER",
        default_value = "redis-server"
    )]
    pub redis_server: PathBuf,

    /// Namespace for every key and channel.
    ///
    /// Unset: the plain `ql:` prefix shared with other qless clients. Set to `NAME`: keys
    /// live under `ql:{NAME}:` (one Redis Cluster slot per namespace; tenants never see
    /// each other).
    #[arg(help_heading = "Redis", long, env = "QLESSD_NAMESPACE")]
    pub namespace: Option<NamespaceName>,

    /// More namespaces to serve besides `--namespace` (comma-separated), chosen per request
    /// by the `Qless-Namespace` header.
    ///
    /// Namespaces the `--auth-file` tokens grant are served too (from start-up, or from the
    /// reload that first grants them). Each has its own Redis connections and sweeper.
    #[arg(
        help_heading = "Redis",
        long,
        env = "QLESSD_NAMESPACES",
        value_delimiter = ','
    )]
    pub namespaces: Vec<NamespaceName>,

    /// Deprecated and ignored (a warning says so).
    ///
    /// Qlessd keeps no pool of Redis connections any more: per namespace, script calls
    /// share one pipelined connection, and every other command (readiness checks, loading
    /// the script) shares a second. Still accepted, so that existing deployments keep
    /// starting.
    #[arg(help_heading = "Redis", long, env = "QLESSD_POOL_SIZE",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pool_size: Option<u32>,

    /// Most concurrent script calls sent to Redis together as one invocation, counted in
    /// jobs.
    ///
    /// A call that leases or ends several (a pop of ten, a batch completion that leases the
    /// next ten) counts each. Calls that arrive while others are in flight leave as a
    /// group: each runs as if alone and gets its own reply, and Redis pays the invocation's
    /// fixed cost once per group. A call never waits to form a group. 1 sends every call by
    /// itself.
    #[arg(help_heading = "Redis", long, env = "QLESSD_GROUP_CALLS", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub group_calls: u32,

    /// Threads serving requests.
    ///
    /// Unset: one per CPU core, less one when Redis runs on this machine (embedded, a
    /// `unix://` socket or a loopback address), which then needs a core of its own: a
    /// gateway thread more would only take turns with Redis and wake its siblings across
    /// cores for every call (a single-job worker's requests cost the gateway a fifth less
    /// CPU on two cores with one thread than with two, `docs/archive/benchmarks-2026-11.md`). At least 1.
    #[arg(help_heading = "HTTP", long, env = "QLESSD_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,

    /// How long opening a Redis connection may take (finding the primary,
    /// connecting, TLS, AUTH) before the requests waiting for it get a 503
    /// (milliseconds).
    #[arg(
        help_heading = "Redis",
        long,
        env = "QLESSD_POOL_TIMEOUT_MS",
        default_value_t = 2000
    )]
    pub pool_timeout_ms: u64,

    /// Largest accepted request body, in bytes (single-job requests).
    #[arg(help_heading = "Limits", long, env = "QLESSD_BODY_LIMIT", default_value_t = 1024 * 1024)]
    pub body_limit: usize,

    /// Largest accepted body for batch endpoints, in bytes.
    #[arg(help_heading = "Limits", long, env = "QLESSD_BATCH_BODY_LIMIT", default_value_t = 16 * 1024 * 1024)]
    pub batch_body_limit: usize,

    /// Largest job `data` accepted, in bytes of its JSON text, on every path that
    /// writes it (put, batch items, requeue, heartbeat, complete, fail, recurring).
    #[arg(help_heading = "Limits", long, env = "QLESSD_MAX_JOB_SIZE", default_value_t = 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_job_size: u64,

    /// How long an `Idempotency-Key` of a put answers the first put's jid (seconds).
    #[arg(help_heading = "Limits", long, env = "QLESSD_IDEMPOTENCY_TTL", default_value_t = 86400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idempotency_ttl: u64,

    /// Most index entries one search (`GET /v1/search`), or one slice of a bulk
    /// action, looks at: what it costs Redis, however many jobs are stored.
    #[arg(help_heading = "Limits", long, env = "QLESSD_SEARCH_SCAN_LIMIT", default_value_t = 2000,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub search_scan_limit: u32,

    /// Requests taking longer than this are answered with 503 (seconds).
    ///
    /// Long polls are bounded separately by `--max-wait`, which this must exceed.
    #[arg(
        help_heading = "Limits",
        long,
        env = "QLESSD_REQUEST_TIMEOUT",
        default_value_t = 60
    )]
    pub request_timeout: u64,

    /// Upper bound of the `wait` a long-polling pop may ask for (seconds).
    #[arg(
        help_heading = "Limits",
        long,
        env = "QLESSD_MAX_WAIT",
        default_value_t = 30
    )]
    pub max_wait: u64,

    /// A browser origin (`https://dash.example.com`) allowed to call the API across origins
    /// (CORS).
    ///
    /// Preflights are answered for it and its requests pass the `Origin` check. Repeat the
    /// flag or separate origins with commas. Unset: CORS is off, and a request from another
    /// origin that would change anything is refused.
    #[arg(help_heading = "Auth", long = "cors-origin", env = "QLESSD_CORS_ORIGIN", value_delimiter = ',',
          value_parser = parse_origin)]
    pub cors_origins: Vec<String>,

    /// Mark the dashboard's login cookie `Secure` (sent over HTTPS only), for a proxy
    /// that ends TLS in front of qlessd.
    ///
    /// Without it the cookie is `Secure` when the proxy says `X-Forwarded-Proto: https`.
    #[arg(help_heading = "Auth", long, env = "QLESSD_SECURE_COOKIES")]
    pub secure_cookies: bool,

    /// A connection must send each request's head (request line and headers) within
    /// this many seconds of its first byte (or of connecting), or it is closed.
    #[arg(help_heading = "HTTP", long, env = "QLESSD_HEADER_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,

    /// A keep-alive connection with no request in progress and no bytes moving for this
    /// many seconds is closed.
    ///
    /// Long polls and event streams are not idle.
    #[arg(help_heading = "HTTP", long, env = "QLESSD_IDLE_TIMEOUT", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout: u64,

    /// Most connections served at once.
    ///
    /// At the cap, new connections wait in the listen backlog (unanswered) until a served
    /// one closes.
    #[arg(help_heading = "HTTP", long, env = "QLESSD_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Most long polls (pops with a `wait`) waiting at once, over every namespace;
    /// default: half of `--max-connections`, rounded down (5,000 of 10,000; none of 1).
    ///
    /// A long poll holds its connection while it waits, so the rest of
    /// `--max-connections` stays for short requests (puts, completions): by default
    /// at least half of them, and at least one, so that with `--max-connections 1` no
    /// pop waits. A pop past the cap does not wait: it answers at once with what there
    /// is (maybe `[]`). Must be below `--max-connections`.
    #[arg(help_heading = "HTTP", long, env = "QLESSD_MAX_LONG_POLLS",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_long_polls: Option<u32>,

    /// A request's body must arrive whole within this many seconds of its head, or the
    /// request is answered 408 and its connection closed.
    #[arg(help_heading = "HTTP", long, env = "QLESSD_BODY_TIMEOUT", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout: u64,

    /// After SIGTERM/SIGINT, requests in flight get this many seconds to finish; then
    /// the remaining connections are dropped and the process exits.
    #[arg(
        help_heading = "HTTP",
        long,
        env = "QLESSD_SHUTDOWN_TIMEOUT",
        default_value_t = 30
    )]
    pub shutdown_timeout: u64,

    /// A PEM file of CA certificates trusted for `rediss://` URLs, instead of the
    /// system's roots.
    #[arg(help_heading = "Redis", long, env = "QLESSD_REDIS_CA_FILE")]
    pub redis_ca_file: Option<PathBuf>,

    /// A write is reported done only once this many replicas have it (Redis `WAIT`
    /// after each invocation that wrote); one that fewer replicas have within
    /// `--min-replicas-timeout-ms` is answered 503 (its outcome unknown). 0: no waiting.
    #[arg(
        help_heading = "Redis",
        long,
        env = "QLESSD_MIN_REPLICAS_ACK",
        default_value_t = 0
    )]
    pub min_replicas_ack: u32,

    /// How long a write waits for `--min-replicas-ack` replicas (milliseconds).
    #[arg(help_heading = "Redis", long, env = "QLESSD_MIN_REPLICAS_TIMEOUT_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub min_replicas_timeout_ms: u64,

    /// Let push endpoints (`PUT /v1/queues/{queue}/push`) be on loopback, private,
    /// link-local or other non-public addresses.
    ///
    /// Off by default, so that whoever may subscribe a queue cannot make qlessd call
    /// into the network it runs in; checked when a queue is subscribed and again at
    /// every connection. For tests and single-machine setups.
    #[arg(
        help_heading = "Push delivery",
        long,
        env = "QLESSD_PUSH_ALLOW_PRIVATE"
    )]
    pub push_allow_private: bool,

    /// A PEM file of CA certificates trusted for `https` push endpoints, instead of
    /// the system's roots.
    #[arg(help_heading = "Push delivery", long, env = "QLESSD_PUSH_CA_FILE")]
    pub push_ca_file: Option<PathBuf>,

    /// Most push deliveries this qlessd has in flight at once, over every queue and
    /// namespace (each queue's own `concurrency` holds across every qlessd).
    #[arg(help_heading = "Push delivery", long, env = "QLESSD_PUSH_MAX_IN_FLIGHT", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub push_max_in_flight: u32,

    /// Log format.
    #[arg(help_heading = "Telemetry", long, env = "QLESSD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Leave health probes (`/healthz`, `/readyz`) and metrics scrapes (`/metrics`)
    /// out of the access log.
    #[arg(help_heading = "Telemetry", long, env = "QLESSD_QUIET_PROBES")]
    pub quiet_probes: bool,

    /// Export OpenTelemetry spans (a request's, its script calls', a job's trace) over
    /// OTLP/HTTP to this collector.
    ///
    /// Its base URL (`http://collector:4318`; spans go to `<URL>/v1/traces`). Off by
    /// default.
    #[arg(help_heading = "Telemetry", long, env = "QLESSD_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// The share of traces whose spans are exported (0 to 1), decided where a trace starts,
    /// from its id.
    ///
    /// A request continuing a caller's `traceparent` follows the caller's sampled flag
    /// instead. With `--otlp-endpoint`.
    #[arg(help_heading = "Telemetry", long, env = "QLESSD_OTLP_SAMPLE_RATIO", default_value = "1",
          value_parser = parse_ratio)]
    pub otlp_sample_ratio: f64,

    /// Print the Lua script the server loads into Redis, then exit.
    #[arg(help_heading = "Other", long)]
    pub print_lua: bool,

    /// Memory limit of the embedded Redis, past which it refuses writes (and qlessd answers
    /// 503) instead of growing until the machine swaps or kills it.
    ///
    /// A size (`2gb`, `512mb`, bytes) or a share of the machine's memory (`50%`).
    #[arg(help_heading = "Embedded Redis", long, env = "QLESSD_REDIS_MAXMEMORY", default_value = "50%",
          value_parser = parse_memory)]
    pub redis_maxmemory: MaxMemory,

    /// TOML file of API tokens (each a name, the SHA-256 of its secret, scopes and
    /// optionally namespaces; make one with `qlessd token`).
    ///
    /// Every request then needs `Authorization: Bearer <secret>`, except `/healthz`,
    /// `/readyz`, `/docs` and `/openapi.json`. Re-read on SIGHUP.
    #[arg(help_heading = "Auth", long, env = "QLESSD_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,

    /// Serve without `--auth-file` on an address other than loopback.
    ///
    /// Without this, qlessd refuses to start there: anyone who reaches the port could do
    /// anything.
    #[arg(help_heading = "Auth", long, env = "QLESSD_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,

    /// What to do instead of serving (none: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands: each runs instead of the server and exits.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Ask the qlessd serving on `--listen` whether it is ready (`GET /readyz`): exit
    /// 0 if it answers 200, 1 otherwise. For container health checks without curl.
    Healthcheck(HealthcheckArgs),
    /// Make an API token: prints a new random secret and the entry to add to the
    /// `--auth-file` (which holds only the secret's SHA-256).
    Token(TokenArgs),
}

/// Options of `qlessd healthcheck`.
#[derive(Debug, Clone, Args)]
pub struct HealthcheckArgs {
    /// Only check that the process answers (`/healthz`), not that Redis is reachable
    /// (`/readyz`).
    #[arg(long)]
    pub live: bool,

    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3)]
    pub timeout: u64,
}

/// The arguments of `qlessd token`.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// The token's name, shown in logs instead of its secret.
    #[arg(long)]
    pub name: TokenName,

    /// What the token may do (repeat for several): read, produce, work or admin
    /// (admin implies all).
    #[arg(long = "scope", required = true,
          value_parser = ["read", "produce", "work", "admin"])]
    pub scopes: Vec<String>,

    /// A namespace the token may reach (repeat for several). None: every namespace.
    #[arg(long = "namespace")]
    pub namespaces: Vec<NamespaceName>,
}

impl Settings {
    /// How many threads serve requests (`--threads`, else one per core, less one for a
    /// Redis on the same machine).
    pub fn threads(&self) -> usize {
        if let Some(threads) = self.threads {
            return usize::from(threads);
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if crate::core::is_local(self.redis_url.as_deref()) {
            cores.saturating_sub(1).max(1)
        } else {
            cores
        }
    }

    /// The per-request deadline.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout)
    }

    /// How many long polls may wait at once: `--max-long-polls`, else
    /// `--max-connections` less a reserve for short requests of half of them, rounded
    /// up. The reserve is never empty: with one connection no pop waits (each answers
    /// at once), since a waiting one would hold the only connection.
    pub fn max_long_polls(&self) -> usize {
        let reserved = self.max_connections.div_ceil(2);
        let cap = self
            .max_long_polls
            .unwrap_or(self.max_connections - reserved);
        cap as usize
    }

    /// Settings for tests and embedding: defaults, with an explicit Redis URL.
    pub fn for_redis(url: impl Into<String>) -> Self {
        let mut settings = Settings::parse_from(["qlessd"]);
        settings.redis_url = Some(url.into());
        settings
    }
}

/// Sizes as Redis writes them (`100mb`, `2gb`, `1024`), or a percentage.
fn parse_memory(raw: &str) -> Result<MaxMemory, String> {
    let raw = raw.trim().to_ascii_lowercase();
    if let Some(percent) = raw.strip_suffix('%') {
        return match percent.trim().parse::<u8>() {
            Ok(share @ 1..=100) => Ok(MaxMemory::Share(share)),
            _ => Err("a share of memory is 1% to 100%".to_owned()),
        };
    }
    let digits = raw.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = raw.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        _ => {
            return Err(
                "a size is a number with b, kb, mb or gb (e.g. 2gb), or a share like 50%"
                    .to_owned(),
            );
        }
    };
    // Redis reads maxmemory 0 as "no limit", the opposite of what a small number means.
    match number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
    {
        Some(bytes) if bytes >= 1 << 20 => Ok(MaxMemory::Bytes(bytes)),
        Some(_) => Err("the embedded Redis needs at least 1mb".to_owned()),
        None => Err(format!("{raw:?} is not a size (e.g. 2gb, 512mb, 50%)")),
    }
}

/// A CORS origin is compared byte for byte with browsers' `Origin` header, which is
/// `scheme://host[:port]` with no path: anything else would never match.
fn parse_ratio(raw: &str) -> Result<f64, String> {
    match raw.trim().parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
        _ => Err(format!("a ratio is a number from 0 to 1, not {raw:?}")),
    }
}

fn parse_origin(raw: &str) -> Result<String, String> {
    let origin = raw.trim().trim_end_matches('/');
    let valid = ["http://", "https://"].iter().any(|scheme| {
        origin
            .strip_prefix(scheme)
            .is_some_and(|host| !host.is_empty() && !host.contains(['/', '?', '#', ' ', '@']))
    });
    if valid {
        Ok(origin.to_ascii_lowercase())
    } else {
        Err(format!("an origin is scheme://host[:port], not {raw:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_leave_a_core_to_a_local_redis_unless_told() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let local = Settings::for_redis("unix:///tmp/redis.sock");
        assert_eq!(local.threads(), cores.saturating_sub(1).max(1));
        let remote = Settings::for_redis("redis://redis.internal:6379");
        assert_eq!(remote.threads(), cores);
        let mut told = Settings::for_redis("unix:///tmp/redis.sock");
        told.threads = Some(7);
        assert_eq!(told.threads(), 7);
        let parsed = Settings::try_parse_from(["qlessd", "--threads", "3"]).unwrap();
        assert_eq!(parsed.threads, Some(3));
        assert!(Settings::try_parse_from(["qlessd", "--threads", "0"]).is_err());
    }

    #[test]
    fn by_default_long_polls_leave_room_for_short_requests_whatever_the_connections() {
        let cap = |connections: &str| {
            Settings::try_parse_from(["qlessd", "--max-connections", connections])
                .unwrap()
                .max_long_polls()
        };
        assert_eq!(Settings::for_redis("redis://r").max_long_polls(), 5_000);
        for (connections, long_polls) in [(1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (101, 50)] {
            assert_eq!(cap(&connections.to_string()), long_polls, "{connections}");
        }
        for connections in 1..=1000 {
            let long_polls = cap(&connections.to_string());
            assert!(
                long_polls * 2 <= connections,
                "{long_polls} of {connections} connections"
            );
        }
        let told = Settings::try_parse_from([
            "qlessd",
            "--max-connections",
            "10",
            "--max-long-polls",
            "9",
        ])
        .unwrap();
        assert_eq!(told.max_long_polls(), 9);
    }

    #[test]
    fn namespaces_and_token_names_are_checked_on_the_command_line() {
        let refused = |args: &[&str]| Settings::try_parse_from(args).unwrap_err().to_string();
        let parsed =
            Settings::try_parse_from(["qlessd", "--namespaces", "a,tenant-1.eu_west"]).unwrap();
        assert_eq!(parsed.namespaces[1].as_str(), "tenant-1.eu_west");
        for bad in ["", "a{b", "a}b", "a:b", "a b", &"x".repeat(65)] {
            let message = refused(&["qlessd", "--namespace", bad]);
            assert!(
                message.contains("a namespace is 1-64 characters from [A-Za-z0-9._-]"),
                "{bad:?}: {message}"
            );
        }
        assert!(refused(&["qlessd", "--namespaces", "a,b:c"]).contains("a namespace is"));
        let message = refused(&["qlessd", "token", "--name", "a b", "--scope", "read"]);
        assert!(
            message.contains("a token name is 1-64 characters"),
            "{message}"
        );
    }

    #[test]
    fn listen_takes_an_address_or_a_unix_socket() {
        let parse = |text: &str| text.parse::<Listen>();
        let unix = Listen::Unix(PathBuf::from("/run/qlessd.sock"));
        assert_eq!(parse("unix:/run/qlessd.sock"), Ok(unix.clone()));
        assert_eq!(parse("unix:///run/qlessd.sock"), Ok(unix.clone()));
        assert_eq!(unix.to_string(), "unix:/run/qlessd.sock");
        assert_eq!(
            parse("unix:q.sock"),
            Ok(Listen::Unix(PathBuf::from("q.sock")))
        );
        assert!(unix.is_local() && !unix.is_loopback());
        assert!(parse("[::1]:80").unwrap().is_local());
        assert!(parse("127.0.0.1:80").unwrap().is_loopback());
        assert!(!parse("0.0.0.0:80").unwrap().is_local());
        for bad in ["unix:", "unix://", "localhost", "5858", ""] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn defaults_need_no_configuration() {
        let settings = Settings::parse_from(["qlessd"]);
        assert_eq!(settings.listen.to_string(), "127.0.0.1:5858");
        assert!(settings.redis_url.is_none());
        assert_eq!(settings.data_dir, PathBuf::from("./qlessd-data"));
        assert!(settings.namespace.is_none());
        assert_eq!(settings.redis_maxmemory, MaxMemory::Share(50));
        assert!(settings.command.is_none());
    }

    #[test]
    fn the_deprecated_pool_size_is_still_accepted() {
        assert_eq!(Settings::parse_from(["qlessd"]).pool_size, None);
        let settings = Settings::try_parse_from(["qlessd", "--pool-size", "16"]).unwrap();
        assert_eq!(settings.pool_size, Some(16));
    }

    #[test]
    fn memory_limits_read_like_redis_sizes_or_a_share() {
        let gb = 1 << 30;
        assert_eq!(parse_memory("2gb"), Ok(MaxMemory::Bytes(2 * gb)));
        assert_eq!(parse_memory("512MB"), Ok(MaxMemory::Bytes(512 << 20)));
        assert_eq!(parse_memory("1048576"), Ok(MaxMemory::Bytes(1 << 20)));
        assert_eq!(parse_memory("25%"), Ok(MaxMemory::Share(25)));
        for bad in [
            "",
            "0",
            "0%",
            "101%",
            "2tb",
            "gb",
            "-1gb",
            "100",
            "99999999999999gb",
        ] {
            assert!(parse_memory(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn healthcheck_is_a_subcommand_that_reads_the_listen_address() {
        let settings = Settings::parse_from(["qlessd", "--listen", "0.0.0.0:7000", "healthcheck"]);
        assert_eq!(
            settings.listen,
            Listen::Tcp("0.0.0.0:7000".parse().unwrap())
        );
        let Some(Command::Healthcheck(args)) = settings.command else {
            panic!("no healthcheck: {:?}", settings.command);
        };
        assert!(!args.live);
    }
}
