//! The script's pub/sub, bridged into the process: one Redis subscription per qlessd
//! (a pattern on the namespace prefix), fanned out to any number of in-process
//! listeners through a broadcast channel. Long-poll waiters and SSE clients listen
//! here instead of each holding a Redis connection.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use super::subscription::Subscription;

/// One message the script published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The channel without the namespace prefix: `log`, `w:<worker>`, `put`, `popped`,
    /// `completed`, `failed`, `stalled`, `canceled`, `track`, `untrack`.
    pub channel: String,
    /// The payload exactly as published (JSON for `log` and `w:*`, a jid otherwise).
    pub payload: String,
}

/// Handle on the bridge; cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
    subscribed: watch::Receiver<bool>,
    stop: Arc<watch::Sender<bool>>,
}

/// How many events a slow listener may fall behind before it misses some.
const BUFFER: usize = 4096;

impl EventBus {
    /// Starts bridging the channels under `prefix` (`ql:` or `ql:{ns}:`) from the Redis
    /// at `url`; reconnects by itself when the connection drops.
    pub fn start(url: String, prefix: String) -> Self {
        let (sender, _) = broadcast::channel(BUFFER);
        let (subscribed_tx, subscribed) = watch::channel(false);
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(bridge(url, prefix, sender.clone(), subscribed_tx, stopped));
        EventBus {
            sender,
            subscribed,
            stop: Arc::new(stop),
        }
    }

    /// Ends the Redis subscription for good (the server is shutting down), so that
    /// Redis going away afterwards is not reported as a lost subscription.
    pub fn close(&self) {
        let _ = self.stop.send(true);
    }

    /// A new listener, receiving every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }

    /// Whether the Redis subscription is currently active.
    pub fn is_subscribed(&self) -> bool {
        *self.subscribed.borrow()
    }

    /// Waits until the Redis subscription is active (events published before that are
    /// not seen), up to `timeout`. Returns whether it became active.
    pub async fn wait_subscribed(&self, timeout: Duration) -> bool {
        let mut subscribed = self.subscribed.clone();
        tokio::time::timeout(timeout, subscribed.wait_for(|active| *active))
            .await
            .is_ok_and(|result| result.is_ok())
    }
}

async fn bridge(
    url: String,
    prefix: String,
    sender: broadcast::Sender<Arc<Event>>,
    subscribed: watch::Sender<bool>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::select! {
            result = listen(&url, &prefix, &sender, &subscribed) => match result {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(err) => {
                    tracing::warn!(%err, "event subscription lost; reconnecting");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            },
            _ = stopped.wait_for(|stop| *stop) => {}
        }
        let _ = subscribed.send(false);
        if *stopped.borrow()
            || (sender.receiver_count() == 0 && sender.is_empty() && subscribed.is_closed())
        {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped.wait_for(|stop| *stop) => return,
        }
    }
}

async fn listen(
    url: &str,
    prefix: &str,
    sender: &broadcast::Sender<Arc<Event>>,
    subscribed: &watch::Sender<bool>,
) -> std::io::Result<()> {
    let mut subscription = Subscription::open(url, &format!("{prefix}*")).await?;
    let _ = subscribed.send(true);
    let legacy = prefix == "ql:";
    loop {
        let message = subscription.next_message().await?;
        let Some(channel) = message.channel.strip_prefix(prefix.as_bytes()) else {
            continue;
        };
        // In the legacy namespace the pattern `ql:*` also matches the channels of
        // every `ql:{ns}:` namespace; those belong to other tenants.
        if legacy && channel.starts_with(b"{") {
            continue;
        }
        let _ = sender.send(Arc::new(Event {
            channel: String::from_utf8_lossy(channel).into_owned(),
            payload: into_string(message.payload),
        }));
    }
}

/// The payload as text, without a copy when it is valid UTF-8 (the script only
/// publishes JSON and jids).
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}
