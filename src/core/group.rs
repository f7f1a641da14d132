//! Group commit, the layer above the one connection to Redis (`resp.rs`) that script
//! calls and every other command share.
//!
//! A good part of Redis's time per call is not the command but the invocation around
//! it (reading the request, finding the script, setting up Lua, writing the reply and
//! the events to subscribers): a quarter of the instructions of a put. So calls that
//! arrive while earlier ones are in flight wait in a queue and leave together as one
//! `batch` invocation, where each call still runs exactly as it would alone and gets
//! its own reply or error; the gateway, too, sends and parses one request and one
//! reply per group instead of per call.
//!
//! Nothing waits on purpose: when fewer than [`IN_FLIGHT`] invocations are out, a
//! call goes straight to Redis, so a lone client sees no added latency; groups only
//! form from calls that would have queued behind Redis anyway. A call whose caller has
//! gone (a client that disconnected, a request past its deadline) before it leaves is
//! not sent, so an abandoned pop leases nothing.
//!
//! One task owns the connection: it forms the groups, writes them, and hands each
//! reply (Redis answers in order) to its callers, so a call costs one hop into the
//! task and one back. The task opens the connection when there is something to send,
//! and after a failure opens a new one for the next call; the calls that were in
//! flight on a failed connection get `Unavailable`, since whether Redis ran them is
//! unknown. A connection that stays silent past the response timeout with calls in
//! flight is given up the same way. An invocation answered NOSCRIPT (Redis lost its
//! scripts, after a restart say) ran nothing: the script is loaded again on the same
//! connection and the invocation sent once more.
//!
//! The same driver carries the other commands (start-up checks, readiness, script
//! loading, `TIME`, `INFO`, the sweeper's lease), on a second connection of the same
//! kind ([`Grouper::command`]): pipelined, never grouped. Apart from the calls, they
//! never queue behind a `WAIT` for replicas or a long batch, so readiness and the
//! clock's `TIME` answer promptly.
//!
//! Redirections: an answer of `MOVED` or `READONLY` (a slot moved, a failover) drops
//! the connection, and the next opens where the primary is now; the invocation that
//! heard it ran nothing, and goes once more on that new connection (those behind it
//! on the old one fail `Unavailable`, as for any connection given up). `ASK` means the slot
//! is moving and this invocation's keys are already on the node named: the invocation
//! (and only it) goes there once, after `ASKING`, on a short connection of its own,
//! while the next calls still go to the slot's owner.

use std::collections::VecDeque;
use std::future::pending;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use redis::{ServerErrorKind, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::metrics::METRICS;

use super::command::Args;
use super::resp::{self, Connection};
use super::{Error, Script, format_now, topology, value_to_result};

/// Invocations in flight at once when grouping: one being run by Redis while the next
/// is on its way, so Redis never idles for a round trip while calls are waiting.
const IN_FLIGHT: usize = 2;

/// Where the calls go and how long to wait for Redis.
pub(super) struct Target {
    pub endpoint: resp::Endpoint,
    pub script: Script,
    /// `KEYS[1]` of every call when namespaced (`ql:{ns}`); none for the legacy prefix.
    pub namespace_key: Option<String>,
    /// The namespace's name as the metrics label it (`""`: the plain `ql:` prefix).
    pub namespace: String,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// How many replicas must have every write before its callers hear of it.
    pub replicas: super::Replicas,
}

type Reply = oneshot::Sender<Result<Value, Error>>;

/// One script call as the driver sees it: a command's name and encoded arguments,
/// with what its type says of it (its weight in a group, whether it may write).
pub(super) struct ScriptCall {
    pub name: &'static str,
    pub now: f64,
    pub args: Args,
    /// The jobs it works on (see [`super::command::Command::weight`]).
    pub weight: usize,
    /// Whether it may write, so that replicas must acknowledge it.
    pub writes: bool,
}

/// One script call and where its result goes.
struct Call {
    script: ScriptCall,
    reply: Reply,
}

/// A ready-made request, sent by itself: an invocation that is already a group of
/// calls (a chunk of `Qless::run_many`), or a command that is not a script call.
/// Neither waits for a free slot nor takes one.
struct Alone {
    request: Vec<u8>,
    reply: Reply,
    kind: AloneKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AloneKind {
    /// A `batch` invocation: it may write, and is loaded again after NOSCRIPT.
    Batch,
    /// A plain command, answered as Redis answers it (an error reply is a value).
    Command,
    /// `ROLE`, answered as Redis answers it; when the node is no longer a primary the
    /// connection is dropped (after a failover the next one finds the new primary).
    Role,
}

/// The callers' side: cheap to share, two per [`super::Qless`] (one for script
/// calls, one for other commands), each driving its own connection.
pub(super) struct Grouper {
    calls: mpsc::UnboundedSender<Call>,
    alone: mpsc::UnboundedSender<Alone>,
    target: Arc<Target>,
}

impl Grouper {
    /// Starts the connection task, which forms groups of at most `max_calls` calls
    /// (1: every call alone, any number in flight). Must be called inside a tokio
    /// runtime; the task ends when the grouper is dropped.
    pub(super) fn start(target: Target, max_calls: usize) -> Self {
        let (calls, waiting) = mpsc::unbounded_channel();
        let (alone, alone_waiting) = mpsc::unbounded_channel();
        let target = Arc::new(target);
        let max_calls = max_calls.max(1);
        let in_flight = if max_calls == 1 {
            usize::MAX
        } else {
            IN_FLIGHT
        };
        tokio::spawn(
            Driver {
                target: target.clone(),
                waiting,
                alone: alone_waiting,
                held: None,
                max_calls,
                in_flight_limit: in_flight,
                link: None,
                out: Vec::with_capacity(16 * 1024),
            }
            .run(),
        );
        Grouper {
            calls,
            alone,
            target,
        }
    }

    /// The namespace's name, as the metrics label it.
    pub(super) fn namespace(&self) -> &str {
        &self.target.namespace
    }

    /// Runs one script call, alone when Redis is idle, grouped with others otherwise.
    pub(super) async fn call(&self, script: ScriptCall) -> Result<Value, Error> {
        let (reply, result) = oneshot::channel();
        let sent = self.calls.send(Call { script, reply }).is_ok();
        answer(sent, result).await
    }

    /// Runs one `batch` invocation of `calls` by itself; its reply is one result per
    /// call.
    pub(super) async fn batch(
        &self,
        now: f64,
        calls: &[(&'static str, Args)],
    ) -> Result<Value, Error> {
        let mut request = Vec::new();
        let calls = calls.iter().map(|(name, args)| (*name, args));
        put_batch(&mut request, &self.target, &format_now(now), calls);
        self.send_alone(request, AloneKind::Batch).await
    }

    /// Sends one command (not a script call) after those already sent, and returns
    /// its answer as Redis gave it (an error reply is a [`Value::ServerError`]).
    pub(super) async fn command<T: AsRef<[u8]>>(&self, words: &[T]) -> Result<Value, Error> {
        let mut request = Vec::new();
        resp::put_command(&mut request, words);
        self.send_alone(request, AloneKind::Command).await
    }

    /// Sends one ready-made request (not a script call through the groups), and
    /// returns its answer as Redis gave it.
    pub(super) async fn request(&self, request: Vec<u8>) -> Result<Value, Error> {
        self.send_alone(request, AloneKind::Command).await
    }

    /// Asks the node its `ROLE`, as [`command`](Self::command) would; when it is not
    /// a primary (any more), the connection is dropped as well, so that the next one
    /// looks for the primary again.
    pub(super) async fn role(&self) -> Result<Value, Error> {
        let mut request = Vec::new();
        resp::put_command(&mut request, &["ROLE"]);
        self.send_alone(request, AloneKind::Role).await
    }

    async fn send_alone(&self, request: Vec<u8>, kind: AloneKind) -> Result<Value, Error> {
        let (reply, result) = oneshot::channel();
        let sent = self.alone.send(Alone {
            request,
            reply,
            kind,
        });
        answer(sent.is_ok(), result).await
    }
}

/// The result of a call handed to the connection task (`sent`), or why there is none.
async fn answer(
    sent: bool,
    result: oneshot::Receiver<Result<Value, Error>>,
) -> Result<Value, Error> {
    if !sent {
        return Err(Error::Unavailable("the server is shutting down".to_owned()));
    }
    result
        .await
        .unwrap_or_else(|_| Err(Error::Unavailable("the call was dropped".to_owned())))
}

/// An invocation written to Redis and not answered yet.
struct InFlight {
    sent: Sent,
    at: Instant,
    /// Already sent a second time (after NOSCRIPT, or alone after its group was
    /// refused): not sent a third.
    retried: bool,
}

enum Sent {
    One(Call),
    Group(Vec<Call>),
    Alone {
        request: Vec<u8>,
        reply: Reply,
        kind: AloneKind,
    },
    /// `SCRIPT LOAD`, written before invocations that met NOSCRIPT.
    Load,
    /// `WAIT <replicas> <timeout>`, written after an invocation that may have
    /// written: its callers hear their replies only once the replicas have them.
    Wait,
}

impl Sent {
    /// Whether this counts against the invocations in flight that grouping allows.
    fn takes_slot(&self) -> bool {
        matches!(self, Sent::One(_) | Sent::Group(_))
    }

    /// Whether this invocation may write (so that replicas must acknowledge it).
    fn may_write(&self) -> bool {
        match self {
            Sent::One(call) => call.script.writes,
            Sent::Group(calls) => calls.iter().any(|call| call.script.writes),
            Sent::Alone { kind, .. } => *kind == AloneKind::Batch,
            Sent::Load | Sent::Wait => false,
        }
    }

    /// Whether its caller has gone, so that sending it would serve no one.
    fn abandoned(&self) -> bool {
        match self {
            Sent::One(call) => call.reply.is_closed(),
            Sent::Group(calls) => calls.iter().all(|call| call.reply.is_closed()),
            Sent::Alone { reply, .. } => reply.is_closed(),
            Sent::Load | Sent::Wait => false,
        }
    }
}

/// An open connection and what was sent on it, in order.
struct Link {
    conn: Connection,
    /// The node it reached, with its credentials (an `ASK` names another next to it).
    node: redis::ConnectionInfo,
    in_flight: VecDeque<InFlight>,
    /// How many of `in_flight` are calls or groups of calls (the rest: `Alone`
    /// invocations and script loads, which take no slot).
    slots_taken: usize,
    /// An invocation answered whose `WAIT` is not answered yet, with its reply.
    acknowledging: Option<(InFlight, Value)>,
}

/// The connection task.
struct Driver {
    target: Arc<Target>,
    waiting: mpsc::UnboundedReceiver<Call>,
    alone: mpsc::UnboundedReceiver<Alone>,
    /// A call taken from the queue that could not join the group sent before it.
    held: Option<Call>,
    max_calls: usize,
    in_flight_limit: usize,
    link: Option<Link>,
    /// The outgoing bytes, reused.
    out: Vec<u8>,
}

impl Driver {
    async fn run(mut self) {
        // One timer for the response timeout, checked when it fires rather than reset
        // for every invocation.
        let deadline = tokio::time::sleep(self.target.response_timeout);
        tokio::pin!(deadline);
        loop {
            let (in_flight, slots_taken) = self
                .link
                .as_ref()
                .map_or((0, 0), |link| (link.in_flight.len(), link.slots_taken));
            let can_send = slots_taken < self.in_flight_limit;
            tokio::select! {
                biased;
                read = readable(self.link.as_mut()) => match read {
                    Ok(()) => self.answer().await,
                    Err(err) => self.drop_link(&format!("the Redis connection failed: {err}")),
                },
                call = next_call(&mut self.held, &mut self.waiting), if can_send => {
                    let Some(call) = call else { return };
                    self.send(call).await;
                    if in_flight == 0 {
                        deadline.as_mut().reset(Instant::now() + self.target.response_timeout);
                    }
                }
                alone = self.alone.recv() => {
                    let Some(Alone { request, reply, kind }) = alone else { return };
                    self.send_sent(Sent::Alone { request, reply, kind }).await;
                    if in_flight == 0 {
                        deadline.as_mut().reset(Instant::now() + self.target.response_timeout);
                    }
                }
                () = &mut deadline, if in_flight > 0 => {
                    let oldest = self.link.as_ref().and_then(|link| link.in_flight.front());
                    match oldest.map(|call| call.at + self.target.response_timeout) {
                        Some(due) if due > Instant::now() => deadline.as_mut().reset(due),
                        Some(_) => self.drop_link(&format!(
                            "Redis did not answer within {}s",
                            self.target.response_timeout.as_secs_f64()
                        )),
                        None => {}
                    }
                }
            }
        }
    }

    /// Sends `first` with whatever queued calls can join it.
    async fn send(&mut self, first: Call) {
        let sent = match first {
            call if call.script.name == "batch" || self.max_calls == 1 => Sent::One(call),
            call => {
                // The group is bounded by the jobs its calls work on, not by how many
                // calls it holds (see `weight`).
                let mut work = call.script.weight;
                let mut calls = vec![call];
                while work < self.max_calls {
                    let Ok(call) = self.waiting.try_recv() else {
                        break;
                    };
                    // A `batch` cannot be nested in the batch of a group, and a call that
                    // would take the group past its bound starts the next one.
                    let more = call.script.weight;
                    if call.script.name == "batch" || work + more > self.max_calls {
                        self.held = Some(call);
                        break;
                    }
                    work += more;
                    calls.push(call);
                }
                calls.retain(|call| !call.reply.is_closed());
                METRICS.group(calls.len());
                match calls.len() {
                    0 => return,
                    1 => Sent::One(calls.pop().expect("one call")),
                    _ => Sent::Group(calls),
                }
            }
        };
        self.send_sent(sent).await;
    }

    /// Sends `sent` (opening a connection first when there is none), unless its
    /// caller has gone.
    async fn send_sent(&mut self, sent: Sent) {
        if sent.abandoned() {
            return;
        }
        if self.link.is_none() {
            match connect(&self.target).await {
                Ok(link) => self.link = Some(link),
                Err(err) => {
                    let err = Error::Unavailable(format!("cannot reach Redis: {err}"));
                    fail(sent, &err);
                    return;
                }
            }
        }
        self.write(vec![(sent, false)]).await;
    }

    /// Sends `sent` once more on a new connection (with `SCRIPT LOAD` first), or
    /// fails it with `err` when none opens.
    async fn send_again(&mut self, sent: Sent, err: Error) {
        match connect(&self.target).await {
            Ok(link) => {
                self.link = Some(link);
                self.write(vec![(sent, true)]).await;
            }
            Err(_) => fail(sent, &err),
        }
    }

    /// Encodes and writes `items` (with `SCRIPT LOAD` first when one is a retry after
    /// NOSCRIPT), then records them as in flight.
    async fn write(&mut self, items: Vec<(Sent, bool)>) {
        let Some(link) = self.link.as_mut() else {
            let err = Error::Unavailable("the Redis connection failed".to_owned());
            items.into_iter().for_each(|(sent, _)| fail(sent, &err));
            return;
        };
        self.out.clear();
        let now = Instant::now();
        let mut recorded = Vec::with_capacity(items.len() + 1);
        let mut loading = false;
        for (sent, retried) in items {
            if retried && !loading {
                loading = true;
                resp::put_command(
                    &mut self.out,
                    &["SCRIPT", "LOAD", self.target.script.source()],
                );
                recorded.push(InFlight {
                    sent: Sent::Load,
                    at: now,
                    retried: true,
                });
            }
            encode(&mut self.out, &self.target, &sent);
            let wait = self.target.replicas.count > 0 && sent.may_write();
            recorded.push(InFlight {
                sent,
                at: now,
                retried,
            });
            if wait {
                let replicas = self.target.replicas;
                resp::put_command(
                    &mut self.out,
                    &[
                        "WAIT",
                        &replicas.count.to_string(),
                        &replicas.timeout.as_millis().to_string(),
                    ],
                );
                recorded.push(InFlight {
                    sent: Sent::Wait,
                    at: now,
                    retried,
                });
            }
        }
        link.slots_taken += recorded
            .iter()
            .filter(|call| call.sent.takes_slot())
            .count();
        link.in_flight.extend(recorded);
        // A write completes at once unless Redis stopped reading (hung, or a huge
        // batch against a full socket buffer): then it is bounded like an answer.
        let timeout = self.target.response_timeout;
        match tokio::time::timeout(timeout, link.conn.socket.write_all(&self.out)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => self.drop_link(&format!("writing to Redis failed: {err}")),
            Err(_) => self.drop_link(&format!(
                "Redis took no data for {}s",
                timeout.as_secs_f64()
            )),
        }
    }

    /// Hands out every complete reply read so far; resends what must be resent.
    async fn answer(&mut self) {
        let mut resend = Vec::new();
        let Some(link) = self.link.as_mut() else {
            return;
        };
        loop {
            let value = match link.conn.reader.parsed() {
                Ok(Some(value)) => value,
                Ok(None) => break,
                Err(err) => {
                    self.drop_link(&format!("unreadable reply from Redis: {err}"));
                    return;
                }
            };
            let Some(call) = link.in_flight.pop_front() else {
                self.drop_link("Redis sent a reply nobody asked for");
                return;
            };
            if call.sent.takes_slot() {
                link.slots_taken -= 1;
            }
            if let Some(node) = asked(&link.node, &call.sent, &value) {
                // What follows it on this connection (its WAIT) is left unanswered.
                tokio::spawn(redirect(self.target.clone(), node, call.sent));
                continue;
            }
            if matches!(
                call.sent,
                Sent::Alone {
                    kind: AloneKind::Role,
                    ..
                }
            ) && !matches!(value, Value::ServerError(_))
                && !resp::is_primary(&value)
            {
                let err = Error::Unavailable("READONLY the Redis node is not a primary".to_owned());
                fail(call.sent, &err);
                self.drop_link_with(&err);
                return;
            }
            if matches!(value, Value::ServerError(ref err) if super::error::not_here(Some(err.code())).is_some())
            {
                // Not the primary, or not the slot's owner (any more): nothing ran, and
                // nothing will on this connection; the next one opens where the primary
                // is now. An invocation told so goes there once more (with the script,
                // which a promoted replica or a new owner may not hold).
                let moved = matches!(&value, Value::ServerError(err) if matches!(err.code(), "MOVED" | "READONLY"));
                let err = value_to_result(value).expect_err("an error reply");
                self.drop_link_with(&err);
                if moved && !call.retried && !matches!(call.sent, Sent::Load | Sent::Wait) {
                    self.send_again(call.sent, err).await;
                } else {
                    fail(call.sent, &err);
                }
                return;
            }
            if matches!(call.sent, Sent::Wait) {
                let Some((invocation, reply)) = link.acknowledging.take() else {
                    continue;
                };
                match acknowledged(&self.target.replicas, &reply, &value) {
                    Ok(()) => deliver(invocation, reply, &mut resend),
                    Err(err) => fail(invocation.sent, &err),
                }
                continue;
            }
            if matches!(link.in_flight.front(), Some(next) if matches!(next.sent, Sent::Wait)) {
                link.acknowledging = Some((call, value));
                continue;
            }
            deliver(call, value, &mut resend);
        }
        if !resend.is_empty() {
            self.write(resend).await;
        }
    }

    /// Gives up the connection, failing everything in flight on it as unavailable.
    fn drop_link(&mut self, why: &str) {
        self.drop_link_with(&Error::Unavailable(why.to_owned()));
    }

    /// Gives up the connection, failing everything in flight on it with `err` itself:
    /// a redirection (`MOVED`, `READONLY`) reaches every call as Redis said it, so each
    /// answer names the reason, whichever call happened to read it first.
    fn drop_link_with(&mut self, err: &Error) {
        if let Some(link) = self.link.take() {
            // An idle connection closing (Redis restarting, or stopping as qlessd shuts
            // down) loses nothing: the next call opens another.
            if link.in_flight.is_empty() {
                tracing::debug!(why = %err, "dropping the idle script connection");
            } else {
                tracing::warn!(
                    why = %err,
                    in_flight = link.in_flight.len(),
                    "dropping the script connection"
                );
            }
            if let Some((call, _)) = link.acknowledging {
                fail(call.sent, err);
            }
            for call in link.in_flight {
                fail(call.sent, err);
            }
        }
    }
}

/// Opens a connection for script calls (authenticated, on the URL's database).
async fn connect(target: &Target) -> io::Result<Link> {
    let (conn, node) = Connection::open(&target.endpoint, true, target.connect_timeout).await?;
    Ok(Link {
        conn,
        node,
        in_flight: VecDeque::new(),
        slots_taken: 0,
        acknowledging: None,
    })
}

/// The node to send `sent` to when `value`, its answer on the connection to `node`,
/// is `ASK <slot> <host>:<port>`.
fn asked(
    node: &redis::ConnectionInfo,
    sent: &Sent,
    value: &Value,
) -> Option<redis::ConnectionInfo> {
    let Value::ServerError(err) = value else {
        return None;
    };
    if err.kind() != Some(ServerErrorKind::Ask) || matches!(sent, Sent::Load | Sent::Wait) {
        return None;
    }
    let (_slot, address) = err.details()?.trim().split_once(' ')?;
    let (host, port) = address.rsplit_once(':')?;
    topology::node_at(node, host, port.parse().ok()?).ok()
}

/// Sends `sent`, answered `ASK`, to `node`: `ASKING` then the request, once, on a
/// connection of its own, so that the calls behind it are not held up. Scripts are loaded per node, so NOSCRIPT there loads it and sends the
/// request once more; with `--min-replicas-ack`, the `WAIT` goes there too.
async fn redirect(target: Arc<Target>, node: redis::ConnectionInfo, sent: Sent) {
    let mut request = Vec::new();
    encode(&mut request, &target, &sent);
    let wait = target.replicas.count > 0 && sent.may_write();
    let exchange = async {
        let mut conn = Connection::to_node(&target.endpoint, &node, true).await?;
        let mut reply = asking(&mut conn, &request).await?;
        if matches!(&reply, Value::ServerError(err) if err.kind() == Some(ServerErrorKind::NoScript))
            && !matches!(
                sent,
                Sent::Alone {
                    kind: AloneKind::Command | AloneKind::Role,
                    ..
                }
            )
        {
            conn.query(&["SCRIPT", "LOAD", target.script.source()])
                .await?;
            reply = asking(&mut conn, &request).await?;
        }
        let ack = if wait {
            let replicas = target.replicas;
            let count = replicas.count.to_string();
            let timeout = replicas.timeout.as_millis().to_string();
            Some(conn.query(&["WAIT", &count, &timeout]).await?)
        } else {
            None
        };
        io::Result::Ok((reply, ack))
    };
    let timeout = target.connect_timeout + target.response_timeout;
    match resp::bounded(timeout, "no answer from the node an ASK named", exchange).await {
        Ok((reply, ack)) => {
            let acked = match &ack {
                Some(ack) => acknowledged(&target.replicas, &reply, ack),
                None => Ok(()),
            };
            let call = InFlight {
                sent,
                at: Instant::now(),
                // Nothing goes a third time.
                retried: true,
            };
            match acked {
                Ok(()) => deliver(call, reply, &mut Vec::new()),
                Err(err) => fail(call.sent, &err),
            }
        }
        Err(err) => fail(
            sent,
            &Error::Unavailable(format!(
                "ASK: the slot is moving, and the node it named failed: {err}"
            )),
        ),
    }
}

/// Sends `ASKING` and `request` together; the answer to `request`.
async fn asking(conn: &mut Connection, request: &[u8]) -> io::Result<Value> {
    let mut out = Vec::with_capacity(request.len() + 20);
    resp::put_command(&mut out, &["ASKING"]);
    out.extend_from_slice(request);
    conn.socket.write_all(&out).await?;
    if let Value::ServerError(err) = conn.reader.next_value(&mut conn.socket).await? {
        return Err(io::Error::other(format!("ASKING: {err}")));
    }
    conn.reader.next_value(&mut conn.socket).await
}

/// Resolves when more bytes were read on the connection (never without one).
async fn readable(link: Option<&mut Link>) -> io::Result<()> {
    match link {
        Some(link) => link.conn.fill().await,
        None => pending().await,
    }
}

/// The held call, or the next queued one. Cancel-safe.
async fn next_call(
    held: &mut Option<Call>,
    waiting: &mut mpsc::UnboundedReceiver<Call>,
) -> Option<Call> {
    match held.take() {
        Some(work) => Some(work),
        None => waiting.recv().await,
    }
}

/// Hands `value`, the reply to `call`, to its callers; what must go again (after
/// NOSCRIPT, or the calls of a group refused as a whole) is added to `resend`.
fn deliver(call: InFlight, value: Value, resend: &mut Vec<(Sent, bool)>) {
    let no_script =
        matches!(&value, Value::ServerError(err) if err.kind() == Some(ServerErrorKind::NoScript));
    match call.sent {
        Sent::Load => {
            if let Value::ServerError(err) = &value {
                tracing::warn!(%err, "loading the script again failed");
            }
        }
        Sent::Wait => {}
        sent @ (Sent::One(_)
        | Sent::Group(_)
        | Sent::Alone {
            kind: AloneKind::Batch,
            ..
        }) if no_script && !call.retried => resend.push((sent, true)),
        Sent::One(one) => {
            let _ = one.reply.send(value_to_result(value));
        }
        Sent::Alone {
            reply,
            kind: AloneKind::Batch,
            ..
        } => {
            let _ = reply.send(value_to_result(value));
        }
        Sent::Alone { reply, .. } => {
            let _ = reply.send(Ok(value));
        }
        Sent::Group(calls) => match value {
            Value::Array(replies) if replies.len() == calls.len() => {
                for (call, reply) in calls.into_iter().zip(replies) {
                    let _ = call.reply.send(value_to_result(reply));
                }
            }
            // The script refused the batch as a whole, which it does only before any
            // call ran (a command it does not know, say): each call goes alone, so each
            // gets its own answer.
            Value::ServerError(_) if !call.retried => {
                resend.extend(calls.into_iter().map(|call| (Sent::One(call), false)));
            }
            other => {
                let err = match value_to_result(other) {
                    Err(err) => err,
                    Ok(other) => Error::reply(format!("batch reply {other:?}")),
                };
                for call in calls {
                    let _ = call.reply.send(Err(err.clone()));
                }
            }
        },
    }
}

/// Gives every caller behind `sent` the error `err`.
fn fail(sent: Sent, err: &Error) {
    match sent {
        Sent::One(call) => {
            let _ = call.reply.send(Err(err.clone()));
        }
        Sent::Group(calls) => {
            for call in calls {
                let _ = call.reply.send(Err(err.clone()));
            }
        }
        Sent::Alone { reply, .. } => {
            let _ = reply.send(Err(err.clone()));
        }
        Sent::Load | Sent::Wait => {}
    }
}

/// Whether the write behind `reply` reached the replicas, as `WAIT` answered
/// (`ack`). An invocation refused whole (an error reply) wrote nothing and needs no
/// acknowledgement; any other is reported unavailable unless enough replicas have it,
/// since a failover now would lose it.
fn acknowledged(replicas: &super::Replicas, reply: &Value, ack: &Value) -> Result<(), Error> {
    if matches!(reply, Value::ServerError(_)) {
        return Ok(());
    }
    match ack {
        Value::Int(count) if *count >= replicas.count as i64 => Ok(()),
        Value::Int(count) => Err(Error::Unavailable(format!(
            "NOREPLICAS the write reached {count} of {} replicas within {} ms; it may or \
             may not survive a failover",
            replicas.count,
            replicas.timeout.as_millis()
        ))),
        other => Err(Error::Unavailable(format!(
            "NOREPLICAS WAIT answered {other:?}; the write may or may not survive a failover"
        ))),
    }
}

/// Appends the invocation `sent` stands for.
fn encode(out: &mut Vec<u8>, target: &Target, sent: &Sent) {
    match sent {
        Sent::One(call) => {
            let ScriptCall {
                name, now, args, ..
            } = &call.script;
            put_head(out, target, name, &format_now(*now), args.count());
            out.extend_from_slice(args.bytes());
        }
        Sent::Group(calls) => {
            let now = calls
                .iter()
                .map(|call| call.script.now)
                .fold(f64::MIN, f64::max);
            let calls = calls
                .iter()
                .map(|call| (call.script.name, &call.script.args));
            put_batch(out, target, &format_now(now), calls);
        }
        Sent::Alone { request, .. } => out.extend_from_slice(request),
        Sent::Load | Sent::Wait => {}
    }
}

/// Appends `EVALSHA sha <numkeys> [namespace key] <command> <now>`, announcing `more`
/// arguments still to be appended.
fn put_head(out: &mut Vec<u8>, target: &Target, command: &str, now: &str, more: usize) {
    let keys = usize::from(target.namespace_key.is_some());
    resp::put_array(out, 5 + keys + more);
    resp::put_bulk(out, b"EVALSHA");
    resp::put_bulk(out, target.script.sha().as_bytes());
    resp::put_bulk_number(out, keys);
    if let Some(key) = &target.namespace_key {
        resp::put_bulk(out, key.as_bytes());
    }
    resp::put_bulk(out, command.as_bytes());
    resp::put_bulk(out, now.as_bytes());
}

/// Appends one `batch` invocation of `calls`: `batch now (command argc args...)...`,
/// where each call keeps its own reply or error.
fn put_batch<'a>(
    out: &mut Vec<u8>,
    target: &Target,
    now: &str,
    calls: impl Iterator<Item = (&'a str, &'a Args)> + Clone,
) {
    let more = calls.clone().map(|(_, args)| 2 + args.count()).sum();
    put_head(out, target, "batch", now, more);
    for (name, args) in calls {
        resp::put_bulk(out, name.as_bytes());
        resp::put_bulk_number(out, args.count());
        out.extend_from_slice(args.bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &[u8]) -> Value {
        resp::parse(text).unwrap().unwrap().0
    }

    fn command() -> Sent {
        Sent::Alone {
            request: Vec::new(),
            reply: oneshot::channel().0,
            kind: AloneKind::Command,
        }
    }

    #[test]
    fn ask_names_the_node_to_send_to_once_reached_as_the_connection_was() {
        let node = topology::direct("redis://:pw@10.0.0.1:7000/0").unwrap();
        let at = asked(&node, &command(), &reply(b"-ASK 3999 10.0.0.2:7001\r\n")).unwrap();
        assert_eq!(
            at.addr(),
            &redis::ConnectionAddr::Tcp("10.0.0.2".into(), 7001)
        );
        assert_eq!(at.redis_settings().password(), Some("pw"));
        // An empty host is the address the connection reached (cluster-announce).
        let at = asked(&node, &command(), &reply(b"-ASK 3999 :7002\r\n")).unwrap();
        assert_eq!(
            at.addr(),
            &redis::ConnectionAddr::Tcp("10.0.0.1".into(), 7002)
        );
        for other in [
            &b"-MOVED 3999 10.0.0.2:7001\r\n"[..],
            b"-ASK 3999\r\n",
            b"-ASK 3999 10.0.0.2:port\r\n",
            b"+OK\r\n",
        ] {
            assert!(asked(&node, &command(), &reply(other)).is_none());
        }
        let ask = reply(b"-ASK 3999 10.0.0.2:7001\r\n");
        assert!(asked(&node, &Sent::Wait, &ask).is_none());
    }
}
