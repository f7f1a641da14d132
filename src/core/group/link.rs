//! The connection layer under group commit: one connection to Redis and what was
//! sent on it, in order. It writes invocations (with the `SCRIPT LOAD` and `WAIT`
//! that go with them), pairs each reply with what it answers (Redis answers in
//! order), says how old the oldest unanswered request is (for the response timeout),
//! and when given up fails everything still in flight. Where connections come from
//! is a [`Connector`]: the endpoint in production, a scripted fake in tests. What a
//! reply means is not decided here (`recovery.rs`).

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use redis::{ConnectionInfo, Value};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::super::command::{Args, BATCH, BATCH_CHECK};
use super::super::resp::{self, Connection};
use super::super::{Error, format_now};
use super::{ScriptCall, Sent, Target, fail};

#[cfg(test)]
mod tests;

/// How the driver opens its connections.
pub(super) trait Connector: Send + Sync {
    /// A connection to wherever the target's primary is now (authenticated, on the
    /// URL's database, checked to be a primary where the topology says so, bounded
    /// by the connect timeout), and the node it reached, with its credentials.
    fn primary<'a>(
        &'a self,
        target: &'a Target,
    ) -> BoxFuture<'a, io::Result<(Connection, ConnectionInfo)>>;

    /// A connection to `node` (one an `ASK` named), reached as the primary was.
    /// Unbounded: the caller bounds it.
    fn node<'a>(
        &'a self,
        target: &'a Target,
        node: &'a ConnectionInfo,
    ) -> BoxFuture<'a, io::Result<Connection>>;
}

/// The production connector: the target's endpoint.
pub(super) struct ToEndpoint;

impl Connector for ToEndpoint {
    fn primary<'a>(
        &'a self,
        target: &'a Target,
    ) -> BoxFuture<'a, io::Result<(Connection, ConnectionInfo)>> {
        Connection::open(&target.endpoint, true, target.connect_timeout).boxed()
    }

    fn node<'a>(
        &'a self,
        target: &'a Target,
        node: &'a ConnectionInfo,
    ) -> BoxFuture<'a, io::Result<Connection>> {
        Connection::to_node(&target.endpoint, node, true).boxed()
    }
}

/// A request written to Redis and not answered yet.
pub(super) struct InFlight {
    pub sent: Sent,
    pub at: Instant,
    /// Already sent once more (after NOSCRIPT, a redirection, a backoff, or alone
    /// after its group was refused): not sent a third time.
    pub again: bool,
}

/// An open connection and what was sent on it, in order.
pub(super) struct Link {
    conn: Connection,
    /// The node it reached, with its credentials (an `ASK` names another next to it).
    pub node: ConnectionInfo,
    in_flight: VecDeque<InFlight>,
    /// How many of `in_flight` are calls or groups of calls (the rest: `Alone`
    /// requests, script loads and `WAIT`s, which take no slot).
    slots_taken: usize,
    /// An invocation answered whose `WAIT` is not answered yet, with its reply.
    pub acknowledging: Option<(InFlight, Value)>,
    /// The bytes staged and not written yet (kept for the next write).
    out: Vec<u8>,
}

impl Link {
    /// Opens a connection through `connector`.
    pub(super) async fn open(connector: &dyn Connector, target: &Target) -> io::Result<Link> {
        let (conn, node) = connector.primary(target).await?;
        Ok(Link {
            conn,
            node,
            in_flight: VecDeque::new(),
            slots_taken: 0,
            acknowledging: None,
            out: Vec::with_capacity(16 * 1024),
        })
    }

    /// Requests sent and not answered yet.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// How many of them count against grouping's limit.
    pub(super) fn slots_taken(&self) -> usize {
        self.slots_taken
    }

    /// When the oldest request still unanswered was written.
    pub(super) fn oldest(&self) -> Option<Instant> {
        self.in_flight.front().map(|call| call.at)
    }

    /// Stages `sent` for the next [`flush`](Self::flush): `SCRIPT LOAD` first when
    /// `load`, then the request, then `WAIT` when it may write and replicas must
    /// acknowledge it. `again`: it was sent before.
    pub(super) fn stage(&mut self, target: &Target, sent: Sent, again: bool, load: bool) {
        let at = Instant::now();
        if load {
            resp::put_command(&mut self.out, &["SCRIPT", "LOAD", target.script.source()]);
            self.record(Sent::Load, at, true);
        }
        encode(&mut self.out, target, &sent);
        let wait = target.replicas.count > 0 && sent.may_write();
        self.record(sent, at, again);
        if wait {
            put_wait(&mut self.out, target);
            self.record(Sent::Wait, at, again);
        }
    }

    fn record(&mut self, sent: Sent, at: Instant, again: bool) {
        self.slots_taken += usize::from(sent.takes_slot());
        self.in_flight.push_back(InFlight { sent, at, again });
    }

    /// Writes what was staged. A write completes at once unless Redis stopped reading
    /// (hung, or a huge batch against a full socket buffer): then it is bounded by
    /// `timeout`, like an answer. On failure, says why (the connection is then lost).
    pub(super) async fn flush(&mut self, timeout: Duration) -> Result<(), String> {
        let written = tokio::time::timeout(timeout, self.conn.socket.write_all(&self.out)).await;
        self.out.clear();
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(format!("writing to Redis failed: {err}")),
            Err(_) => Err(format!("Redis took no data for {}s", timeout.as_secs_f64())),
        }
    }

    /// Resolves when more bytes were read. Cancel-safe.
    pub(super) async fn readable(&mut self) -> io::Result<()> {
        self.conn.fill().await
    }

    /// The next whole reply read so far, with what it answers; on failure, says why
    /// (the connection is then lost).
    pub(super) fn reply(&mut self) -> Result<Option<(InFlight, Value)>, String> {
        let value = match self.conn.reader.parsed() {
            Ok(Some(value)) => value,
            Ok(None) => return Ok(None),
            Err(err) => return Err(format!("unreadable reply from Redis: {err}")),
        };
        let Some(call) = self.in_flight.pop_front() else {
            return Err("Redis sent a reply nobody asked for".to_owned());
        };
        self.slots_taken -= usize::from(call.sent.takes_slot());
        Ok(Some((call, value)))
    }

    /// Whether the next request in flight is the `WAIT` for the one just answered.
    pub(super) fn waiting_for_replicas(&self) -> bool {
        matches!(self.in_flight.front(), Some(next) if matches!(next.sent, Sent::Wait))
    }

    /// Gives the connection up, failing everything in flight on it with `err`: whether
    /// Redis ran those is unknown.
    pub(super) fn close(self, err: &Error) {
        // An idle connection closing (Redis restarting, or stopping as qlessd shuts
        // down) loses nothing: the next call opens another.
        if self.in_flight.is_empty() {
            tracing::debug!(why = %err, "dropping the idle script connection");
        } else {
            tracing::warn!(
                why = %err,
                in_flight = self.in_flight.len(),
                "dropping the script connection"
            );
        }
        if let Some((call, _)) = self.acknowledging {
            fail(call.sent, err);
        }
        for call in self.in_flight {
            fail(call.sent, err);
        }
    }
}

/// Sends `request` to `node` after `ASKING`, on a short connection of its own, and
/// returns the connection and the answer; `SCRIPT LOAD` then the request once more
/// when the answer is NOSCRIPT and `reload` says so (scripts are loaded per node),
/// and `WAIT` after it when `wait`. Unbounded: the caller bounds it.
pub(super) async fn ask(
    connector: &dyn Connector,
    target: &Target,
    node: &ConnectionInfo,
    request: &[u8],
    reload: impl Fn(&Value) -> bool,
    wait: bool,
) -> io::Result<(Value, Option<Value>)> {
    let mut conn = connector.node(target, node).await?;
    let mut reply = asking(&mut conn, request).await?;
    if reload(&reply) {
        conn.query(&["SCRIPT", "LOAD", target.script.source()])
            .await?;
        reply = asking(&mut conn, request).await?;
    }
    let ack = if wait {
        let mut command = Vec::new();
        put_wait(&mut command, target);
        conn.socket.write_all(&command).await?;
        Some(conn.reader.next_value(&mut conn.socket).await?)
    } else {
        None
    };
    Ok((reply, ack))
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

/// Appends `WAIT <replicas> <timeout>`.
fn put_wait(out: &mut Vec<u8>, target: &Target) {
    let replicas = target.replicas;
    resp::put_array(out, 3);
    resp::put_bulk(out, b"WAIT");
    resp::put_bulk_number(out, replicas.count as usize);
    resp::put_bulk_number(out, replicas.timeout.as_millis() as usize);
}

/// Appends the request `sent` stands for.
pub(super) fn encode(out: &mut Vec<u8>, target: &Target, sent: &Sent) {
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
pub(super) fn put_batch<'a>(
    out: &mut Vec<u8>,
    target: &Target,
    now: &str,
    calls: impl Iterator<Item = (&'a str, &'a Args)> + Clone,
) {
    put_head(out, target, BATCH, now, calls_length(calls.clone()));
    put_calls(out, calls);
}

/// Appends one `batch.check` invocation of `calls`, the part of a longer list whose
/// first call is call number `first`: `batch.check now first (command argc args...)...`.
/// The script checks them as `batch` would and runs none.
pub(super) fn put_batch_check<'a>(
    out: &mut Vec<u8>,
    target: &Target,
    now: &str,
    first: usize,
    calls: impl Iterator<Item = (&'a str, &'a Args)> + Clone,
) {
    put_head(
        out,
        target,
        BATCH_CHECK,
        now,
        1 + calls_length(calls.clone()),
    );
    resp::put_bulk_number(out, first);
    put_calls(out, calls);
}

/// How many arguments `calls` take as a list of `command argc args...`.
fn calls_length<'a>(calls: impl Iterator<Item = (&'a str, &'a Args)>) -> usize {
    calls.map(|(_, args)| 2 + args.count()).sum()
}

/// Appends `calls` as a list of `command argc args...`.
fn put_calls<'a>(out: &mut Vec<u8>, calls: impl Iterator<Item = (&'a str, &'a Args)>) {
    for (name, args) in calls {
        resp::put_bulk(out, name.as_bytes());
        resp::put_bulk_number(out, args.count());
        out.extend_from_slice(args.bytes());
    }
}
