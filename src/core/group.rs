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
//! form from calls that would have queued behind Redis anyway, bounded by the jobs
//! they work on (`grouping.rs`). A call whose caller has gone (a client that
//! disconnected, a request past its deadline) before it leaves is not sent, so an
//! abandoned pop leases nothing; nor is it sent again when a recovery sends its
//! group once more (the others go without it). One whose caller goes while it is in
//! flight is answered into the void: the replies behind it still reach their own
//! callers.
//!
//! One task, the driver, owns the connection: it forms the groups, writes them,
//! and hands each reply (Redis answers in order) to its callers, so a call costs one
//! hop into the task and one back. It is three layers, each tested alone:
//!
//! * `link.rs`, the connection: what was written and is not answered yet, each reply
//!   paired with its request, the response timeout's clock, and giving up (every
//!   call in flight then fails `Unavailable`: whether Redis ran it is unknown). The
//!   task opens a connection when there is something to send, and after a failure
//!   opens a new one for the next call; one that stays silent past the response
//!   timeout with calls in flight is given up the same way.
//! * `recovery.rs`, the decisions: what a reply means (`NOSCRIPT`, `MOVED`, `ASK`,
//!   `READONLY`, `LOADING`, ... and the replicas' acknowledgement), as plain
//!   functions with their table; a call that Redis certainly did not run goes once
//!   more, one whose outcome is unknown never does.
//! * `grouping.rs`: which queued calls leave together.
//!
//! This file ties them: the callers' side ([`Grouper`]) and the task's loop. The same
//! driver carries the other commands (start-up checks, readiness, script loading,
//! `TIME`, `INFO`, the sweeper's lease), on a second connection of the same kind
//! ([`Grouper::command`]): pipelined, never grouped. Apart from the calls, they never
//! queue behind a `WAIT` for replicas or a long batch, so readiness and the clock's
//! `TIME` answer promptly.

use std::collections::VecDeque;
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::metrics::METRICS;

use super::command::Args;
use super::resp;
use super::{Error, Script, format_now, value_to_result};

#[cfg(test)]
mod fake;
mod grouping;
mod link;
mod recovery;
#[cfg(test)]
mod tests;

use grouping::{Formed, Member};
use link::{Connector, Link};
use recovery::{Action, Kind};

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
/// with what its type says of it (its weight in a group, whether it must go alone,
/// whether it may write).
pub(super) struct ScriptCall {
    pub name: &'static str,
    pub now: f64,
    pub args: Args,
    /// The jobs it works on (see [`super::command::Command::weight`]).
    pub weight: usize,
    /// Whether it never joins a group (see [`super::command::Command::alone`]).
    pub alone: bool,
    /// Whether it may write, so that replicas must acknowledge it.
    pub writes: bool,
}

/// One script call and where its result goes.
struct Call {
    script: ScriptCall,
    reply: Reply,
}

impl Member for Call {
    fn weight(&self) -> usize {
        self.script.weight.max(1)
    }

    fn alone(&self) -> bool {
        self.script.alone
    }

    fn gone(&self) -> bool {
        self.reply.is_closed()
    }
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
    /// A `batch.check` invocation: like `Batch`, but it writes nothing, so no
    /// replica needs to acknowledge it.
    Check,
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
        Self::start_with(target, max_calls, Arc::new(link::ToEndpoint))
    }

    /// [`start`](Self::start), opening connections through `connector`.
    fn start_with(target: Target, max_calls: usize, connector: Arc<dyn Connector>) -> Self {
        let (calls, waiting) = mpsc::unbounded_channel();
        let (alone, alone_waiting) = mpsc::unbounded_channel();
        let target = Arc::new(target);
        let max_calls = max_calls.max(1);
        let in_flight_limit = if max_calls == 1 {
            usize::MAX
        } else {
            IN_FLIGHT
        };
        tokio::spawn(
            Driver {
                target: target.clone(),
                connector,
                waiting,
                alone: alone_waiting,
                held: None,
                max_calls,
                in_flight_limit,
                link: None,
                later: VecDeque::new(),
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
        link::put_batch(&mut request, &self.target, &format_now(now), calls);
        self.send_alone(request, AloneKind::Batch).await
    }

    /// Runs one `batch.check` invocation of `calls`, numbered from `first`: the
    /// script checks them as `batch` would and runs none. Its reply is how many it
    /// checked, or the error of the first malformed call.
    pub(super) async fn check_batch(
        &self,
        now: f64,
        first: usize,
        calls: &[(&'static str, Args)],
    ) -> Result<Value, Error> {
        let mut request = Vec::new();
        let calls = calls.iter().map(|(name, args)| (*name, args));
        link::put_batch_check(&mut request, &self.target, &format_now(now), first, calls);
        self.send_alone(request, AloneKind::Check).await
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

/// What one request on the connection stands for.
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
    /// What it is, as the recovery rules tell requests apart.
    fn kind(&self) -> Kind {
        match self {
            Sent::One(_)
            | Sent::Alone {
                kind: AloneKind::Batch | AloneKind::Check,
                ..
            } => Kind::Script,
            Sent::Group(_) => Kind::Group,
            Sent::Alone {
                kind: AloneKind::Command,
                ..
            } => Kind::Command,
            Sent::Alone {
                kind: AloneKind::Role,
                ..
            } => Kind::Role,
            Sent::Load => Kind::Load,
            Sent::Wait => Kind::Wait,
        }
    }

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

    /// What of it still serves someone, to be sent (again): nothing when its callers
    /// have gone, and of a group only the calls whose callers are still there (one
    /// left goes alone). A recovery thus runs nothing for a caller who has gone, just
    /// as a call abandoned before it first left never runs.
    fn wanted(self) -> Option<Sent> {
        match self {
            Sent::One(call) if call.reply.is_closed() => None,
            Sent::Alone { ref reply, .. } if reply.is_closed() => None,
            Sent::Group(mut calls) => {
                calls.retain(|call| !call.reply.is_closed());
                match calls.len() {
                    0 => None,
                    1 => calls.pop().map(Sent::One),
                    _ => Some(Sent::Group(calls)),
                }
            }
            sent => Some(sent),
        }
    }
}

/// Hands `value`, the answer to `sent`, to its callers.
fn deliver(sent: Sent, value: Value) {
    match sent {
        Sent::One(one) => {
            let _ = one.reply.send(value_to_result(value));
        }
        Sent::Alone {
            reply,
            kind: AloneKind::Batch | AloneKind::Check,
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
            other => {
                let err = match value_to_result(other) {
                    Err(err) => err,
                    Ok(other) => Error::reply(format!("batch reply {other:?}")),
                };
                fail(Sent::Group(calls), &err);
            }
        },
        Sent::Load => {
            if let Value::ServerError(err) = &value {
                tracing::warn!(%err, "loading the script again failed");
            }
        }
        Sent::Wait => {}
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

/// A request to send (again) on the connection: what, whether it was sent before,
/// and whether `SCRIPT LOAD` must go first.
type Resend = (Sent, bool, bool);

/// The connection task.
struct Driver {
    target: Arc<Target>,
    connector: Arc<dyn Connector>,
    waiting: mpsc::UnboundedReceiver<Call>,
    alone: mpsc::UnboundedReceiver<Alone>,
    /// A call taken from the queue that could not join the group sent before it.
    held: Option<Call>,
    max_calls: usize,
    in_flight_limit: usize,
    link: Option<Link>,
    /// Invocations refused "not now", to send again when their backoff is over, in
    /// that order.
    later: VecDeque<(Instant, Sent)>,
}

impl Driver {
    async fn run(mut self) {
        // One timer for the response timeout, checked when it fires rather than reset
        // for every invocation; one for the backoffs.
        let deadline = tokio::time::sleep(self.target.response_timeout);
        let backoff = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(deadline, backoff);
        loop {
            let (in_flight, slots_taken) = self
                .link
                .as_ref()
                .map_or((0, 0), |link| (link.in_flight(), link.slots_taken()));
            let can_send = slots_taken < self.in_flight_limit;
            if let Some(&(due, _)) = self.later.front()
                && backoff.deadline() != due
            {
                backoff.as_mut().reset(due);
            }
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
                    self.send_sent(Sent::Alone { request, reply, kind }, false, false).await;
                    if in_flight == 0 {
                        deadline.as_mut().reset(Instant::now() + self.target.response_timeout);
                    }
                }
                () = &mut deadline, if in_flight > 0 => {
                    let oldest = self.link.as_ref().and_then(Link::oldest);
                    match oldest.map(|at| at + self.target.response_timeout) {
                        Some(due) if due > Instant::now() => deadline.as_mut().reset(due),
                        Some(_) => self.drop_link(&format!(
                            "Redis did not answer within {}s",
                            self.target.response_timeout.as_secs_f64()
                        )),
                        None => {}
                    }
                }
                () = &mut backoff, if !self.later.is_empty() => {
                    let now = Instant::now();
                    while let Some(&(due, _)) = self.later.front() && due <= now {
                        let (_, sent) = self.later.pop_front().expect("a call due");
                        self.send_sent(sent, true, false).await;
                    }
                }
            }
        }
    }

    /// Sends `first` with whatever queued calls can join it.
    async fn send(&mut self, first: Call) {
        let mut first = Some(first);
        let waiting = &mut self.waiting;
        let (formed, held) = grouping::form(self.max_calls, || {
            first.take().or_else(|| waiting.try_recv().ok())
        });
        self.held = held;
        let Some(formed) = formed else { return };
        let sent = match formed {
            Formed::One(call) => {
                if self.max_calls > 1 && !call.alone() {
                    METRICS.group(1);
                }
                Sent::One(call)
            }
            Formed::Group(calls) => {
                METRICS.group(calls.len());
                Sent::Group(calls)
            }
        };
        self.send_sent(sent, false, false).await;
    }

    /// Sends what of `sent` is still wanted (opening a connection first when there
    /// is none); `again`: it was sent before; `load`: `SCRIPT LOAD` first.
    async fn send_sent(&mut self, sent: Sent, again: bool, load: bool) {
        let Some(sent) = sent.wanted() else { return };
        if let Err(err) = self.connect().await {
            return fail(sent, &err);
        }
        let link = self.link.as_mut().expect("a connection");
        link.stage(&self.target, sent, again, load);
        self.flush().await;
    }

    /// Opens a connection when there is none.
    async fn connect(&mut self) -> Result<(), Error> {
        if self.link.is_none() {
            let link = Link::open(&*self.connector, &self.target)
                .await
                .map_err(|err| Error::Unavailable(format!("cannot reach Redis: {err}")))?;
            self.link = Some(link);
        }
        Ok(())
    }

    /// Writes what was staged on the connection; gives it up when that fails.
    async fn flush(&mut self) {
        if let Some(link) = &mut self.link
            && let Err(why) = link.flush(self.target.response_timeout).await
        {
            self.drop_link(&why);
        }
    }

    /// Hands out every complete reply read so far, as the recovery rules say.
    async fn answer(&mut self) {
        // What goes again on the connection (after NOSCRIPT, or a group refused
        // whole): allocated only then.
        let mut resend: Vec<Resend> = Vec::new();
        while let Some(link) = self.link.as_mut() {
            let (call, value) = match link.reply() {
                Ok(Some(answered)) => answered,
                Ok(None) => break,
                Err(why) => {
                    self.drop_link(&why);
                    break;
                }
            };
            match recovery::decide(call.sent.kind(), value, call.again, &link.node) {
                Action::Deliver(ack) if matches!(call.sent, Sent::Wait) => {
                    if let Some((invocation, reply)) = link.acknowledging.take() {
                        match recovery::acknowledged(&self.target.replicas, &reply, &ack) {
                            Ok(()) => deliver(invocation.sent, reply),
                            Err(err) => fail(invocation.sent, &err),
                        }
                    }
                }
                Action::Deliver(value) if link.waiting_for_replicas() => {
                    link.acknowledging = Some((call, value));
                }
                Action::Deliver(value) => deliver(call.sent, value),
                Action::Reload => resend.push((call.sent, true, true)),
                Action::Split => {
                    if let Sent::Group(calls) = call.sent {
                        let alone = calls
                            .into_iter()
                            .map(|call| (Sent::One(call), false, false));
                        resend.extend(alone);
                    }
                }
                Action::Backoff => {
                    let backoff = recovery::BACKOFF.min(self.target.response_timeout);
                    self.later.push_back((Instant::now() + backoff, call.sent));
                }
                Action::Redirect(node) => {
                    // What follows it on this connection (its WAIT) is left unanswered.
                    let (connector, target) = (self.connector.clone(), self.target.clone());
                    tokio::spawn(async move {
                        redirect(&*connector, &target, node, call.sent).await;
                    });
                }
                Action::Fail(err) => fail(call.sent, &err),
                Action::Reconnect { err, again } => {
                    // Everything in flight behind it fails with this reason too: each
                    // caller hears it, whichever call happened to read it first.
                    self.drop_link_with(&err);
                    if again {
                        self.send_again(call.sent, err).await;
                    } else {
                        fail(call.sent, &err);
                    }
                }
            }
        }
        if !resend.is_empty() {
            self.resend(resend).await;
        }
    }

    /// Sends `items` again, in order, with one `SCRIPT LOAD` before the first that
    /// needs it (opening a connection first when there is none).
    async fn resend(&mut self, items: Vec<Resend>) {
        if let Err(err) = self.connect().await {
            return items.into_iter().for_each(|(sent, _, _)| fail(sent, &err));
        }
        let link = self.link.as_mut().expect("a connection");
        let mut loading = false;
        for (sent, again, load) in items {
            let Some(sent) = sent.wanted() else { continue };
            link.stage(&self.target, sent, again, load && !loading);
            loading |= load;
        }
        self.flush().await;
    }

    /// Sends `sent` once more on a new connection (with `SCRIPT LOAD` first: a
    /// promoted replica or a slot's new owner may not hold it), or fails it with
    /// `err` when none opens.
    async fn send_again(&mut self, sent: Sent, err: Error) {
        let Some(sent) = sent.wanted() else { return };
        match Link::open(&*self.connector, &self.target).await {
            Ok(link) => {
                self.link.insert(link).stage(&self.target, sent, true, true);
                self.flush().await;
            }
            Err(_) => fail(sent, &err),
        }
    }

    /// Gives up the connection, failing everything in flight on it as unavailable.
    fn drop_link(&mut self, why: &str) {
        self.drop_link_with(&Error::Unavailable(why.to_owned()));
    }

    /// Gives up the connection, failing everything in flight on it with `err`.
    fn drop_link_with(&mut self, err: &Error) {
        if let Some(link) = self.link.take() {
            link.close(err);
        }
    }
}

/// Sends `sent`, answered `ASK`, to `node`: `ASKING` then the request, once, on a
/// connection of its own, so that the calls behind it are not held up. Scripts are
/// loaded per node, so NOSCRIPT there loads it and sends the request once more; with
/// `--min-replicas-ack`, the `WAIT` goes there too. Whatever else it answers is its
/// callers' answer: nothing goes a third time.
async fn redirect(
    connector: &dyn Connector,
    target: &Target,
    node: redis::ConnectionInfo,
    sent: Sent,
) {
    let Some(sent) = sent.wanted() else { return };
    let mut request = Vec::new();
    link::encode(&mut request, target, &sent);
    let kind = sent.kind();
    let wait = target.replicas.count > 0 && sent.may_write();
    let reload = |reply: &Value| recovery::needs_script(kind, reply);
    let exchange = link::ask(connector, target, &node, &request, reload, wait);
    let timeout = target.connect_timeout + target.response_timeout;
    let (reply, ack) =
        match resp::bounded(timeout, "no answer from the node an ASK named", exchange).await {
            Ok(answered) => answered,
            Err(err) => {
                let why = format!("ASK: the slot is moving, and the node it named failed: {err}");
                return fail(sent, &Error::Unavailable(why));
            }
        };
    if let Some(ack) = ack
        && let Err(err) = recovery::acknowledged(&target.replicas, &reply, &ack)
    {
        return fail(sent, &err);
    }
    match recovery::decide(kind, reply, true, &node) {
        Action::Deliver(value) => deliver(sent, value),
        Action::Fail(err) | Action::Reconnect { err, .. } => fail(sent, &err),
        _ => fail(
            sent,
            &Error::Unavailable("ASK: the node it named sent the call elsewhere".to_owned()),
        ),
    }
}

/// Resolves when more bytes were read on the connection (never without one).
async fn readable(link: Option<&mut Link>) -> std::io::Result<()> {
    match link {
        Some(link) => link.readable().await,
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
