//! The only code that talks to Redis: the compiled-in qless script, the embedded
//! `redis-server` supervisor, the event subscription, and [`Qless`], whose methods
//! are one typed function per Lua command (same names as the commands). Each command
//! is a type (`command.rs`: its name, its arguments, whether it writes, its weight,
//! its subject and what it counts); every call passes through `Qless::run`, which
//! records its span and metrics from that type. One transport
//! carries everything: the hand-written RESP connection of `resp.rs`. Per namespace,
//! script calls share one, with group commit as a layer above it (`group.rs`); the
//! other commands (start-up checks, readiness, script loading, `TIME`, `INFO`) share
//! a second, driven by the same code; the event subscription has a third. Every connection opens
//! to wherever the primary is now (`topology.rs`: one server, a Sentinel-managed
//! primary, or the cluster primary of the namespace's slot).

pub mod batches;
mod command;
mod config;
pub mod embedded;
mod error;
pub mod events;
mod failures;
mod group;
pub mod info;
pub mod jobs;
mod leased;
pub mod partitions;
pub mod push;
pub mod queues;
mod rates;
pub mod recurring;
mod reply;
mod resp;
pub mod script;
mod search;
mod subscription;
mod throttles;
mod topology;
mod workers;

use std::time::Duration;

use redis::{ServerErrorKind, Value};

use crate::metrics::METRICS;
use command::{Args, Command, Recorder};

pub use command::SENT as SENT_COMMANDS;
pub use error::{Error, ScriptCode};
pub use jobs::{
    CompleteArgs, FailArgs, Idempotency, Leased, PutArgs, PutOutcome, RequeueKeep, RetryArgs,
    Tracked,
};
pub use partitions::PartitionLimits;
pub use queues::Listing;
pub use rates::{MINUTES as RATE_MINUTES, Minute};
pub use recurring::{CronDue, CronSpec, RecurArgs, RecurUpdate};
pub use resp::{Endpoint, tls_config};
pub use script::Script;
pub use search::{Acted, Bounds, Bulk, Found};
pub use throttles::ThrottleLimits;
pub use topology::{is_cluster, is_local};

/// The oldest Redis the script runs on: its `#!lua` shebang (script flags) is a
/// Redis 7 feature.
const MIN_REDIS_VERSION: (u32, u32) = (7, 0);

/// How long start-up waits for Redis to answer before giving up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a readiness check waits for Redis, whatever the connect timeout: a probe
/// must hear "not ready" quickly (load balancers time out in a second or two).
const READY_TIMEOUT: Duration = Duration::from_millis(150);

/// Most calls sent in one `batch` invocation by [`Qless::run_many`]: about 2-4 ms of
/// Redis time for puts or completions, so other clients wait at most that long.
pub const BATCH_CALLS: usize = 100;

/// Options for [`Qless::connect`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// A Redis URL (`redis://`, `rediss://` for TLS, or `unix://`, with the password
    /// and database in it as redis-rs reads them).
    pub url: String,
    /// CA certificates (PEM) trusted for a `rediss://` URL instead of the system's.
    pub redis_ca_file: Option<std::path::PathBuf>,
    /// `None`: the plain `ql:` prefix. `Some(ns)`: keys under `ql:{ns}:`.
    pub namespace: Option<String>,
    /// How long opening a connection to Redis may take (finding the primary,
    /// connecting, TLS, `AUTH`); the calls waiting for it fail after that.
    pub connect_timeout: Duration,
    /// How long a call waits for Redis's answer (a call Redis ran but answered later
    /// is reported as unavailable, so this is generous: the request deadline).
    pub response_timeout: Duration,
    /// Whether Redis is ours (embedded) or someone else's; only the latter gets the
    /// eviction-policy warning, since we configure our own.
    pub external: bool,
    /// Most concurrent calls sent to Redis together as one invocation (see
    /// `group.rs`); 1 sends every call by itself.
    pub group_calls: usize,
    /// How many replicas must acknowledge each write before it is reported done.
    pub replicas: Replicas,
}

/// Writes acknowledged by replicas (`--min-replicas-ack`): after each invocation that
/// may have written, `WAIT count timeout` on the same connection; a write that fewer
/// than `count` replicas have after `timeout` is reported unavailable (its outcome
/// unknown), never as done. `count` 0: no waiting.
#[derive(Debug, Clone, Copy)]
pub struct Replicas {
    pub count: u32,
    pub timeout: Duration,
}

impl Default for Replicas {
    fn default() -> Self {
        Replicas {
            count: 0,
            timeout: Duration::from_secs(1),
        }
    }
}

/// A handle on the qless script in one Redis (cheap to clone: every handler gets one).
#[derive(Clone)]
pub struct Qless {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    /// The connection script calls share.
    calls: group::Grouper,
    /// The connection the other commands share (so that they never wait behind a
    /// `WAIT` for replicas or a long batch).
    commands: group::Grouper,
    script: Script,
    /// The same script declared `no-writes`, for reads while Redis is out of memory.
    read_only: Script,
    /// The connection for the `allow-oom` copy of the script, which runs only the
    /// commands that only delete: they free memory while Redis refuses the script
    /// (opened the first time Redis is out of memory).
    deleting: group::Grouper,
    /// `KEYS[1]` of every call when namespaced (`ql:{ns}`); none for the legacy prefix.
    namespace_key: Option<String>,
    endpoint: Endpoint,
    /// The replicas every write waits for (`--min-replicas-ack`): readiness needs them.
    replicas: Replicas,
}

impl std::fmt::Debug for Qless {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qless")
            .field("sha", &self.inner.script.sha())
            .field("namespace_key", &self.inner.namespace_key)
            .finish()
    }
}

impl Qless {
    /// Connects, checks the server (reachable, recent enough, safe eviction policy)
    /// and loads the script. Fails fast with a one-line message.
    pub async fn connect(options: ConnectOptions) -> Result<Self, Error> {
        let ca_file = options.redis_ca_file.as_deref();
        let namespace_key = options.namespace.as_ref().map(|ns| format!("ql:{{{ns}}}"));
        let endpoint = Endpoint::new(&options.url, ca_file, namespace_key.as_deref())?;
        let script = Script::qless();
        let target_of = |script: &Script| group::Target {
            endpoint: endpoint.clone(),
            script: script.clone(),
            namespace_key: namespace_key.clone(),
            namespace: options.namespace.clone().unwrap_or_default(),
            connect_timeout: options.connect_timeout,
            response_timeout: options.response_timeout,
            replicas: options.replicas,
        };
        let qless = Qless {
            inner: std::sync::Arc::new(Inner {
                calls: group::Grouper::start(target_of(&script), options.group_calls),
                commands: group::Grouper::start(target_of(&script), 1),
                script,
                read_only: Script::qless_read_only(),
                deleting: group::Grouper::start(target_of(&Script::qless_allow_oom()), 1),
                namespace_key,
                endpoint,
                replicas: options.replicas,
            }),
        };
        // On the connection for commands, which then stays open for readiness checks
        // (bounded tightly: they need not open one).
        let checks = async {
            let info = qless.command(&["INFO", "server"]).await?;
            check_version(&redis::from_redis_value::<String>(info).unwrap_or_default())?;
            if options.external {
                qless.warn_about_eviction().await;
            }
            qless.load(&qless.inner.script).await
        };
        match tokio::time::timeout(STARTUP_TIMEOUT, checks).await {
            Ok(Ok(())) => Ok(qless),
            Ok(Err(Error::Unavailable(why))) | Ok(Err(Error::Redis(why))) => Err(Error::Startup(
                format!("cannot use Redis at {}: {why}", redacted(&options.url)),
            )),
            Ok(Err(other)) => Err(other),
            Err(_) => Err(Error::Startup(format!(
                "cannot reach Redis at {} (no answer within {}s)",
                redacted(&options.url),
                STARTUP_TIMEOUT.as_secs()
            ))),
        }
    }

    /// The script this handle runs.
    pub fn script(&self) -> &Script {
        &self.inner.script
    }

    /// The Redis URL, password included: never log it (see [`redacted`]).
    pub fn url(&self) -> &str {
        self.inner.endpoint.url()
    }

    /// How to reach Redis (for connections of their own, such as subscriptions).
    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    /// The prefix of the protocol's keys and channels: `ql:` or `ql:{ns}:` (qlessd's own
    /// are under [`own_prefix`](Self::own_prefix)).
    pub fn prefix(&self) -> String {
        match &self.inner.namespace_key {
            Some(key) => format!("{key}:"),
            None => "ql:".to_owned(),
        }
    }

    /// The namespace routing key, if any.
    pub fn namespace_key(&self) -> Option<&str> {
        self.inner.namespace_key.as_deref()
    }

    /// The namespace's name (`""` for the plain `ql:` prefix): the `namespace` label of
    /// the job metrics.
    pub fn namespace(&self) -> &str {
        self.inner.calls.namespace()
    }

    /// Readiness: Redis answers and holds the script (loading it again if Redis lost
    /// its script cache, e.g. after a restart), within [`READY_TIMEOUT`].
    pub async fn ready(&self) -> Result<(), Error> {
        let check = async {
            match self.check_ready().await {
                // The node is no longer the primary or the slot's owner: that dropped the
                // connection, and the next one opens where the primary is now (after a
                // failover or a slot move), unless the URL names that very node.
                Err(err) if matches!(err.reason(), Some("MOVED" | "READONLY")) => {
                    self.check_ready().await
                }
                other => other,
            }
        };
        tokio::time::timeout(READY_TIMEOUT, check)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Unavailable(format!(
                    "no answer from Redis within {} ms",
                    READY_TIMEOUT.as_millis()
                )))
            })
    }

    /// Redis's clock (`TIME`): seconds and microseconds since the Unix epoch. Every
    /// gateway on one Redis takes `now` from it (`clock.rs`).
    pub async fn time(&self) -> Result<(i64, i64), Error> {
        let reply = self.command(&["TIME"]).await?;
        let (seconds, micros): (String, String) =
            redis::from_redis_value(reply).map_err(Error::reply)?;
        let number = |text: &str| {
            text.parse::<i64>()
                .map_err(|_| Error::Unavailable(format!("Redis answered TIME with {text:?}")))
        };
        Ok((number(&seconds)?, number(&micros)?))
    }

    /// The prefix of qlessd's own keys and channels, which the qless protocol does not
    /// have: `qlessd:` beside the plain `ql:` prefix (which belongs to the protocol and
    /// the stock clients sharing it), the namespace's `ql:{ns}:` in a namespace (whose
    /// keys need its hash tag). The script's `OWN` (`lua/base.lua`).
    pub fn own_prefix(&self) -> String {
        match &self.inner.namespace_key {
            Some(key) => format!("{key}:"),
            None => script::OWN_PREFIX.to_owned(),
        }
    }

    /// Takes the lease `<own prefix><name>` for `holder`, or keeps it if `holder` has
    /// it already, for `ttl`: true when `holder` holds it now. One atomic script, so a
    /// lease that another holder took meanwhile is never overwritten or extended.
    pub async fn hold_lease(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, Error> {
        const HOLD: &str = "local held = redis.call('get', KEYS[1]) \
            if held == false then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end \
            if held == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return 1 end \
            return 0";
        let key = format!("{}{name}", self.own_prefix());
        let ttl = ttl.as_millis().max(1).to_string();
        let reply = self
            .command(&["EVAL", HOLD, "1", &key, holder, &ttl])
            .await?;
        let held: i64 = redis::from_redis_value(reply).map_err(Error::reply)?;
        Ok(held == 1)
    }

    /// Gives up the lease `<own prefix><name>` if `holder` holds it, so another takes
    /// it over at once instead of when it expires.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<(), Error> {
        const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
            redis.call('del', KEYS[1]) end return 0";
        let key = format!("{}{name}", self.own_prefix());
        self.command(&["EVAL", RELEASE, "1", &key, holder]).await?;
        Ok(())
    }

    async fn check_ready(&self) -> Result<(), Error> {
        // A replica answers reads, and a cluster node that lost the namespace's slot
        // answers keyless commands: neither can serve. Probes hear the reason word.
        // (A node that is no longer a primary also loses the connection, so that the
        // next one looks for the primary again.)
        self.inner.commands.role().await.and_then(value_to_result)?;
        if let Some(key) = &self.inner.namespace_key {
            self.command(&["EXISTS", key]).await?;
        }
        // With `--min-replicas-ack`, a primary without enough replicas refuses every
        // write (503 after the wait): it is not ready.
        let wanted = self.inner.replicas.count;
        if wanted > 0 {
            let info = self.command(&["INFO", "replication"]).await?;
            let online =
                online_replicas(&redis::from_redis_value::<String>(info).unwrap_or_default());
            if online < wanted {
                return Err(Error::Unavailable(format!(
                    "NOREPLICAS {online} replica(s) connected, and --min-replicas-ack needs \
                     {wanted}: every write would be refused"
                )));
            }
        }
        let exists = self
            .command(&["SCRIPT", "EXISTS", self.inner.script.sha()])
            .await?;
        let loaded: Vec<i64> = redis::from_redis_value(exists).map_err(Error::reply)?;
        if loaded.first() == Some(&1) {
            Ok(())
        } else {
            self.load(&self.inner.script).await
        }
    }

    /// Sends one command that is not a script call, on the connection such commands
    /// share; an error reply is an `Err`.
    async fn command(&self, words: &[&str]) -> Result<Value, Error> {
        self.inner
            .commands
            .command(words)
            .await
            .and_then(value_to_result)
    }

    /// `SCRIPT LOAD`, checking the SHA Redis gives it.
    async fn load(&self, script: &Script) -> Result<(), Error> {
        let reply = self.command(&["SCRIPT", "LOAD", script.source()]).await?;
        let sha: String = redis::from_redis_value(reply).map_err(Error::reply)?;
        if sha != script.sha() {
            return Err(Error::reply(format!(
                "SCRIPT LOAD returned {sha}, expected {}",
                script.sha()
            )));
        }
        Ok(())
    }

    /// Runs one command as the `no-writes` script (loading that script when Redis does
    /// not have it).
    async fn read_only(&self, name: &str, now: f64, args: &Args) -> Result<Value, Error> {
        let mut request = Vec::new();
        let keys = usize::from(self.inner.namespace_key.is_some());
        resp::put_array(&mut request, 5 + keys + args.count());
        resp::put_bulk(&mut request, b"EVALSHA");
        resp::put_bulk(&mut request, self.inner.read_only.sha().as_bytes());
        resp::put_bulk_number(&mut request, keys);
        if let Some(key) = &self.inner.namespace_key {
            resp::put_bulk(&mut request, key.as_bytes());
        }
        resp::put_bulk(&mut request, name.as_bytes());
        resp::put_bulk(&mut request, format_now(now).as_bytes());
        request.extend_from_slice(args.bytes());
        match self.inner.commands.request(request.clone()).await? {
            Value::ServerError(err) if err.kind() == Some(ServerErrorKind::NoScript) => {
                self.load(&self.inner.read_only).await?;
                self.inner
                    .commands
                    .request(request)
                    .await
                    .and_then(value_to_result)
            }
            other => value_to_result(other),
        }
    }

    /// Jobs are data that must never vanish: any eviction policy other than
    /// `noeviction` lets Redis delete job keys silently under memory pressure.
    async fn warn_about_eviction(&self) {
        let reply = self.command(&["CONFIG", "GET", "maxmemory-policy"]).await;
        let policy = reply
            .ok()
            .and_then(|value| redis::from_redis_value::<Vec<String>>(value).ok())
            .and_then(|pair| pair.get(1).cloned());
        match policy.as_deref() {
            Some("noeviction") => {}
            Some(policy) => tracing::warn!(
                policy,
                "Redis maxmemory-policy is {policy:?}: under memory pressure Redis may evict \
                 job keys and lose jobs silently; set it to noeviction"
            ),
            None => tracing::info!("could not read Redis maxmemory-policy (CONFIG disabled?)"),
        }
    }

    /// Runs any script command by name, with arguments made elsewhere: for tests and
    /// tools that drive the script directly (see [`command::Raw`]). The gateway's own
    /// calls go through the typed functions of `jobs.rs`, `queues.rs`, ...
    pub async fn call(
        &self,
        name: &'static str,
        now: f64,
        args: impl AsRef<[String]>,
    ) -> Result<Value, Error> {
        let args = args.as_ref();
        self.execute(now, &command::Raw { name, args }).await
    }

    /// Runs several script commands by name, as [`call`](Self::call) runs one, in
    /// `batch` invocations as [`run_many`](Self::run_many) sends them: one result
    /// per command.
    pub async fn call_many(
        &self,
        now: f64,
        calls: &[(&'static str, Vec<String>)],
    ) -> Result<Vec<Result<Value, Error>>, Error> {
        let raw: Vec<command::Raw<'_>> = calls
            .iter()
            .map(|(name, args)| command::Raw { name, args })
            .collect();
        self.execute_many(now, &raw).await
    }

    /// Runs one typed script command: `EVALSHA sha <0|1> [ns-key] name now args...`,
    /// loading the script again when Redis answers NOSCRIPT. Concurrent calls may
    /// share one invocation (see `group.rs`); each still gets its own reply. Every
    /// script call passes here, so here alone its span, its timing and the job
    /// events it counts are recorded, from what its type says of it.
    async fn run<C: Command>(&self, now: f64, command: &C) -> Result<C::Output, Error> {
        debug_assert!(
            command::SENT.contains(&command.name()),
            "{}",
            command.name()
        );
        self.execute(now, command).await
    }

    async fn execute<C: Command>(&self, now: f64, command: &C) -> Result<C::Output, Error> {
        let mut span = crate::telemetry::tracing_on().then(|| {
            let subject = command.subject();
            crate::telemetry::call_span(command.name(), subject.queue, subject.jid)
        });
        let started = std::time::Instant::now();
        let outcome = self
            .send(now, command)
            .await
            .and_then(|reply| command.decode(reply));
        METRICS.script_call(command.name(), started.elapsed(), outcome.is_err());
        if let Some(span) = &mut span {
            crate::telemetry::end_call(span, outcome.is_err());
        }
        if let Ok(output) = &outcome {
            command.record(&self.recorder(now), output);
        }
        outcome
    }

    fn recorder(&self, now: f64) -> Recorder<'_> {
        Recorder {
            namespace: self.namespace(),
            now,
        }
    }

    async fn send<C: Command>(&self, now: f64, command: &C) -> Result<Value, Error> {
        let mut args = Args::new();
        command.encode(&mut args);
        let name = command.name();
        let call = |args| group::ScriptCall {
            name,
            now,
            args,
            weight: command.weight().max(1),
            alone: command.alone(),
            writes: command.writes(),
        };
        if command.only_deletes() {
            debug_assert!(script::ONLY_DELETING.contains(&name), "{name}");
            // Refused whole for lack of memory, it goes again as the `allow-oom` copy,
            // which Redis runs then: deleting is how memory is freed.
            return match self.inner.calls.call(call(args.clone())).await {
                Err(err) if err.is_out_of_memory() => self.inner.deleting.call(call(args)).await,
                other => other,
            };
        }
        if command.writes() {
            return self.inner.calls.call(call(args)).await;
        }
        // Redis refuses the script whole when it is out of memory; a command that
        // usually only reads goes again as the `no-writes` script, which Redis runs
        // then. Only if that one needs to write after all is the answer "out of memory".
        match self.inner.calls.call(call(args.clone())).await {
            Err(err) if err.is_out_of_memory() => match self.read_only(name, now, &args).await {
                Ok(value) => Ok(value),
                Err(script @ Error::Script { .. }) => Err(script),
                Err(_) => Err(err),
            },
            other => other,
        }
    }

    /// Runs several script commands, returning one result per command: a failing
    /// command writes nothing and does not affect the others. The calls go to Redis
    /// in `batch` invocations of up to [`BATCH_CALLS`] calls each, so a batch of jobs
    /// pays the fixed cost of a script invocation once per hundred calls rather than
    /// once per call, and a huge batch still lets other clients in between chunks.
    ///
    /// A malformed call anywhere refuses the whole list and nothing is written (an
    /// `Err`): the script checks every call of a `batch` before it runs any, and when
    /// the list takes more than one invocation every part is first sent as
    /// `batch.check`, which checks as `batch` does and writes nothing. A list of up to
    /// [`BATCH_CALLS`] calls is one invocation and no check.
    ///
    /// Only when the first invocation fails is the whole call an `Err`. When a later
    /// one fails (Redis went away mid-batch), the calls already run keep their results
    /// and every call from the failed invocation on gets its error, so callers can
    /// tell what was done.
    async fn run_many<C: Command>(
        &self,
        now: f64,
        commands: &[C],
    ) -> Result<Vec<Result<C::Output, Error>>, Error> {
        for command in commands {
            debug_assert!(
                command::SENT.contains(&command.name()),
                "{}",
                command.name()
            );
        }
        self.execute_many(now, commands).await
    }

    async fn execute_many<C: Command>(
        &self,
        now: f64,
        commands: &[C],
    ) -> Result<Vec<Result<C::Output, Error>>, Error> {
        let encoded: Vec<(&'static str, Args)> = commands
            .iter()
            .map(|command| {
                let mut args = Args::new();
                command.encode(&mut args);
                (command.name(), args)
            })
            .collect();
        if encoded.len() > BATCH_CALLS {
            self.check_many(now, &encoded).await?;
        }
        let mut results = Vec::with_capacity(commands.len());
        let recorder = self.recorder(now);
        for (chunk, calls) in commands
            .chunks(BATCH_CALLS)
            .zip(encoded.chunks(BATCH_CALLS))
        {
            let started = std::time::Instant::now();
            let answered = self.inner.calls.batch(now, calls).await;
            METRICS.script_call(command::BATCH, started.elapsed(), answered.is_err());
            let err = match answered {
                Ok(Value::Array(replies)) if replies.len() == chunk.len() => {
                    for (command, reply) in chunk.iter().zip(replies) {
                        let result = value_to_result(reply).and_then(|reply| command.decode(reply));
                        if let Ok(output) = &result {
                            command.record(&recorder, output);
                        }
                        results.push(result);
                    }
                    continue;
                }
                Ok(other) => Error::reply(format!("batch reply {other:?}")),
                Err(err) => err,
            };
            if results.is_empty() {
                return Err(err);
            }
            results.resize_with(commands.len(), || Err(err.clone()));
            break;
        }
        Ok(results)
    }

    /// Sends `calls`, a list too long for one `batch`, part by part as `batch.check`,
    /// and fails with the error of the first malformed call: the script's checks of
    /// the whole list before its first `batch` writes anything.
    async fn check_many(&self, now: f64, calls: &[(&'static str, Args)]) -> Result<(), Error> {
        for (index, part) in calls.chunks(BATCH_CALLS).enumerate() {
            let started = std::time::Instant::now();
            let answered = self
                .inner
                .calls
                .check_batch(now, index * BATCH_CALLS + 1, part)
                .await;
            METRICS.script_call(command::BATCH_CHECK, started.elapsed(), answered.is_err());
            match answered? {
                Value::Int(checked) if usize::try_from(checked) == Ok(part.len()) => {}
                other => return Err(Error::reply(format!("batch.check reply {other:?}"))),
            }
        }
        Ok(())
    }
}

/// `url` as it may be shown (logs, errors): the password replaced by `***`, whether
/// in the user information (`redis://:***@host:6379/0`, `rediss://user:***@host`) or
/// in the query (`unix:///run/redis.sock?pass=***`, `?sentinel_password=***`). Only
/// the values of query parameters known to hold no secret are shown, so that a
/// misspelt `sentinel_pasword=...` is hidden too.
pub fn redacted(url: &str) -> String {
    const SHOWN_PARAMETERS: &[&str] = &["db", "user", "protocol", "sentinel_username"];
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => return "<not a URL>".to_owned(),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if !SHOWN_PARAMETERS.contains(&key) => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// `now` as the script receives it: seconds with millisecond precision, without
/// trailing zeros (logical test times stay short: `1`, `2.5`).
pub fn format_now(now: f64) -> String {
    let millis = (now * 1000.0).round();
    // Every call formats the time: whole milliseconds are written with integer
    // arithmetic, which costs a tenth of float formatting.
    if !(0.0..1e15).contains(&millis) {
        let text = format!("{now:.3}");
        return text.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let millis = millis as u64;
    let mut text = (millis / 1000).to_string();
    let mut fraction = millis % 1000;
    if fraction != 0 {
        text.push('.');
        let mut digits = 3;
        while fraction.is_multiple_of(10) {
            fraction /= 10;
            digits -= 1;
        }
        text.push_str(&format!("{fraction:0digits$}"));
    }
    text
}

fn value_to_result(value: Value) -> Result<Value, Error> {
    match value {
        Value::ServerError(err) => Err(redis::RedisError::from(err).into()),
        other => Ok(other),
    }
}

/// How many replicas `INFO replication` (its text) shows connected and online.
fn online_replicas(info: &str) -> u32 {
    let online = info
        .lines()
        .filter(|line| line.starts_with("slave") && line.contains("state=online"))
        .count();
    u32::try_from(online).unwrap_or(u32::MAX)
}

fn check_version(info: &str) -> Result<(), Error> {
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .map(str::trim)
        .unwrap_or("0.0.0");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < MIN_REDIS_VERSION {
        return Err(Error::Startup(format!(
            "Redis {version} is too old: qlessd needs Redis {}.{} or newer",
            MIN_REDIS_VERSION.0, MIN_REDIS_VERSION.1
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_sent_without_trailing_zeros() {
        assert_eq!(format_now(0.0), "0");
        assert_eq!(format_now(12.5), "12.5");
        assert_eq!(format_now(1_700_000_000.123), "1700000000.123");
        assert_eq!(format_now(1_700_000_000.05), "1700000000.05");
        assert_eq!(format_now(7.0004), "7");
        assert_eq!(format_now(7.0096), "7.01");
        assert_eq!(format_now(0.001), "0.001");
        for millis in (0..100_000u64).step_by(7) {
            let now = 1_763_800_000.0 + millis as f64 / 1000.0;
            let text = format!("{now:.3}");
            assert_eq!(
                format_now(now),
                text.trim_end_matches('0').trim_end_matches('.'),
                "{now}"
            );
        }
    }

    #[test]
    fn passwords_never_appear_in_a_shown_url() {
        let cases = [
            ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
            (
                "rediss://alice:s3cret@host:6380",
                "rediss://alice:***@host:6380",
            ),
            ("redis://alice@host", "redis://alice@host"),
            ("redis://:p@ss@host/1", "redis://:***@host/1"),
            ("redis://host:6379", "redis://host:6379"),
            (
                "unix:///run/redis.sock?db=2&pass=s3cret",
                "unix:///run/redis.sock?db=2&pass=***",
            ),
            (
                "redis+unix:///r.sock?password=s3cret",
                "redis+unix:///r.sock?password=***",
            ),
            (
                "redis+sentinel://:s3cret@a:1,b:2/m/0?sentinel_username=u&sentinel_password=s3cret",
                "redis+sentinel://:***@a:1,b:2/m/0?sentinel_username=u&sentinel_password=***",
            ),
            (
                "redis+sentinel://a:1/m?sentinel_pasword=s3cret",
                "redis+sentinel://a:1/m?sentinel_pasword=***",
            ),
            ("s3cret", "<not a URL>"),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    #[test]
    fn only_online_replicas_count() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
            slave0:ip=10.0.0.2,port=6379,state=online,offset=10,lag=0\r\n\
            slave1:ip=10.0.0.3,port=6379,state=wait_bgsave,offset=0,lag=0\r\n\
            master_replid:abc\r\n";
        assert_eq!(online_replicas(info), 1);
        assert_eq!(online_replicas("role:master\r\nconnected_slaves:0\r\n"), 0);
    }

    #[test]
    fn old_redis_versions_are_refused() {
        assert!(check_version("redis_version:7.0.15\r\n").is_ok());
        assert!(check_version("redis_version:7.0.0\r\n").is_ok());
        let err = check_version("redis_version:6.2.14\r\n").unwrap_err();
        assert!(err.to_string().contains("too old"), "{err}");
    }
}
