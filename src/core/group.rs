//! Group commit for script calls. A good part of Redis's time per call is not the
//! command but the invocation around it (reading the request, finding the script,
//! setting up Lua, writing the reply and the events to subscribers): a quarter of the
//! instructions of a put. So calls that arrive while earlier ones are in flight wait
//! in a queue and leave together as one `batch` invocation, where each call still runs
//! exactly as it would alone and gets its own reply or error; the gateway, too, sends
//! and parses one request and one reply per group instead of per call.
//!
//! Nothing waits on purpose: when no call is in flight, a call goes straight to Redis
//! by itself, so a lone client sees no added latency; groups only form from calls
//! that would have queued behind Redis anyway. A call whose caller has gone (a client
//! that disconnected, a request past its deadline) before its group leaves is not sent,
//! so an abandoned pop leases nothing.

use std::sync::Arc;

use redis::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::{Error, Transport, value_to_result};

/// Groups in flight at once: one being run by Redis while the next is on its way, so
/// Redis never idles for a round trip while calls are waiting.
const IN_FLIGHT: usize = 2;

/// One queued call and where its result goes.
struct Pending {
    command: String,
    now: f64,
    args: Vec<String>,
    reply: oneshot::Sender<Result<Value, Error>>,
}

/// The caller's side of the grouping: cheap to share, one per [`super::Qless`].
pub(super) struct Grouper {
    queue: mpsc::UnboundedSender<Pending>,
    in_flight: Arc<Semaphore>,
    transport: Arc<Transport>,
}

impl Grouper {
    /// Starts the task that forms groups of at most `max_calls` calls (must be called
    /// inside a tokio runtime). The task ends when the grouper is dropped.
    pub(super) fn start(transport: Arc<Transport>, max_calls: usize) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
        tokio::spawn(form_groups(
            transport.clone(),
            waiting,
            in_flight.clone(),
            max_calls.max(1),
        ));
        Grouper {
            queue,
            in_flight,
            transport,
        }
    }

    /// Runs one script call, alone when Redis is idle, grouped with others otherwise.
    pub(super) async fn call(
        &self,
        command: &str,
        now: f64,
        args: Vec<String>,
    ) -> Result<Value, Error> {
        // A `batch` cannot be nested in the batch of a group: it always goes alone.
        if command == "batch" {
            let cmd = self.transport.invocation(command, now, &args);
            return self.transport.run(&cmd).await;
        }
        if self.in_flight.available_permits() == IN_FLIGHT
            && let Ok(_permit) = self.in_flight.clone().try_acquire_owned()
        {
            let cmd = self.transport.invocation(command, now, &args);
            return self.transport.run(&cmd).await;
        }
        let (reply, result) = oneshot::channel();
        let pending = Pending {
            command: command.to_owned(),
            now,
            args,
            reply,
        };
        if self.queue.send(pending).is_err() {
            return Err(Error::Unavailable("the server is shutting down".to_owned()));
        }
        result
            .await
            .unwrap_or_else(|_| Err(Error::Unavailable("the call was dropped".to_owned())))
    }
}

/// Waits for a call, then for a free slot, then takes every call queued meanwhile (up
/// to `max_calls`) and sends them off as one group.
async fn form_groups(
    transport: Arc<Transport>,
    mut waiting: mpsc::UnboundedReceiver<Pending>,
    in_flight: Arc<Semaphore>,
    max_calls: usize,
) {
    while let Some(first) = waiting.recv().await {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let mut group = Vec::with_capacity(max_calls.min(64));
        group.push(first);
        while group.len() < max_calls {
            match waiting.try_recv() {
                Ok(pending) => group.push(pending),
                Err(_) => break,
            }
        }
        tokio::spawn(run_group(transport.clone(), group, permit));
    }
}

/// Sends one group: a single call as itself, several as one `batch` invocation whose
/// `now` is the latest of theirs (each was read from the clock before queueing, so the
/// latest is still no later than the moment the group runs).
async fn run_group(
    transport: Arc<Transport>,
    mut group: Vec<Pending>,
    _permit: OwnedSemaphorePermit,
) {
    group.retain(|pending| !pending.reply.is_closed());
    if group.len() <= 1 {
        if let Some(pending) = group.pop() {
            let cmd = transport.invocation(&pending.command, pending.now, &pending.args);
            let _ = pending.reply.send(transport.run(&cmd).await);
        }
        return;
    }
    let now = group.iter().map(|p| p.now).fold(f64::MIN, f64::max);
    let mut cmd = transport.invocation("batch", now, &[]);
    for pending in &group {
        cmd.arg(&pending.command)
            .arg(pending.args.len())
            .arg(&pending.args);
    }
    match transport.run(&cmd).await {
        Ok(Value::Array(replies)) if replies.len() == group.len() => {
            for (pending, reply) in group.into_iter().zip(replies) {
                let _ = pending.reply.send(value_to_result(reply));
            }
        }
        Ok(other) => {
            let err = Error::reply(format!("batch reply {other:?}"));
            for pending in group {
                let _ = pending.reply.send(Err(err.clone()));
            }
        }
        Err(Error::Script { .. }) => {
            // The script refused the batch as a whole, which it does only before any
            // call ran (a command it does not know, say): each call goes alone, so each
            // gets its own answer.
            for pending in group {
                let cmd = transport.invocation(&pending.command, pending.now, &pending.args);
                let _ = pending.reply.send(transport.run(&cmd).await);
            }
        }
        Err(err) => {
            for pending in group {
                let _ = pending.reply.send(Err(err.clone()));
            }
        }
    }
}
