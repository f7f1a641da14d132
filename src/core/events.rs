//! The script's pub/sub, bridged into the process: one Redis subscription per qlessd
//! (patterns on the plain `ql:` prefix and qlessd's own `qlessd:`, or a namespace's
//! shard channels), fanned out to any number of in-process listeners through
//! broadcast channels. Long-poll waiters and SSE clients listen
//! here instead of each holding a Redis connection.
//!
//! A busy queue publishes two or three events per job (the spec's `log` events, for
//! stock clients), which most gateways have nobody to show to. So the listeners that
//! are always there take only what they need: long polls get the `available`
//! announcements as a stream of their own, the dashboard's throughput reads two
//! counters the relay keeps, and an event is made into a message only for a stream
//! somebody listens to. Otherwise each would be allocated and wake both always-on
//! listeners.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::Endpoint;
use super::subscription::{Channels, Subscription};

/// One message the script published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The channel without its prefix: `log`, `w:<worker>`, `put`, `popped`,
    /// `completed`, `failed`, `stalled`, `canceled`, `track`, `untrack` under the
    /// namespace's prefix; `available`, and `log` for qlessd's own events (throttled
    /// jobs let go), under qlessd's own (`qlessd:` beside the plain `ql:`, where the
    /// protocol has no such messages; the same prefix in a namespace).
    pub channel: String,
    /// The payload exactly as published (JSON for `log`, `w:*` and `available`, a jid
    /// otherwise).
    pub payload: String,
}

/// Handle on the bridge; cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus {
    streams: Streams,
    subscribed: watch::Receiver<bool>,
    stop: Arc<watch::Sender<bool>>,
}

/// What the relay feeds: the stream of every event, the `available` stream, the
/// counts of jobs ended, and the process's record of the jobs it leased (which lets
/// go of a job that ended, whoever ended it).
#[derive(Debug, Clone)]
struct Streams {
    every: broadcast::Sender<Arc<Event>>,
    available: broadcast::Sender<Arc<Event>>,
    outcomes: Arc<Outcomes>,
    /// The namespace's name, as the metrics label it (`""`: the plain `ql:` prefix).
    namespace: Arc<str>,
}

impl Streams {
    fn new(capacity: usize, namespace: &str) -> Self {
        Streams {
            every: broadcast::channel(capacity).0,
            available: broadcast::channel(capacity).0,
            outcomes: Arc::default(),
            namespace: Arc::from(namespace),
        }
    }

    /// Hands the event on `channel` (prefix removed) to what wants it: the streams
    /// carrying it that have listeners (it is made into an [`Event`] only if one does),
    /// and the counts.
    fn relay(&self, channel: &[u8], payload: Vec<u8>) {
        let own = match channel {
            b"available" => Some(&self.available),
            b"log" => {
                if self.outcomes.count(&payload)
                    && let Some(jid) = jid_of(&payload)
                {
                    crate::metrics::METRICS.job_ended(&self.namespace, &jid);
                }
                None
            }
            _ => None,
        }
        .filter(|stream| stream.receiver_count() > 0);
        let to_every = self.every.receiver_count() > 0;
        if own.is_none() && !to_every {
            return;
        }
        let event = Arc::new(Event {
            channel: String::from_utf8_lossy(channel).into_owned(),
            payload: into_string(payload),
        });
        if let Some(stream) = own {
            let _ = stream.send(event.clone());
        }
        if to_every {
            let _ = self.every.send(event);
        }
    }

    /// Whether every [`EventBus`] handle and listener is gone.
    fn abandoned(&self) -> bool {
        [&self.every, &self.available]
            .iter()
            .all(|stream| stream.receiver_count() == 0 && stream.is_empty())
    }
}

/// Jobs ended since the bridge started, every job's, tracked or not, whichever client
/// ended it: counted from the `log` channel, where the script announces each
/// completion (`completed`, or `advanced` when it moves the job on) and each failure.
/// (The `completed` and `failed` channels carry tracked jobs only.)
#[derive(Debug, Default)]
struct Outcomes {
    completed: AtomicU64,
    failed: AtomicU64,
}

impl Outcomes {
    /// Counts the `log` event `payload` if it ends a job; true when it ends one's
    /// lease (a completion, a failure, or a cancel, which is not counted).
    fn count(&self, payload: &[u8]) -> bool {
        const KEY: &[u8] = br#""event":""#;
        // (A JSON string cannot hold an unescaped quote: the key is found only as a key.)
        let Some(at) = memchr::memmem::find(payload, KEY) else {
            return false;
        };
        let kind = &payload[at + KEY.len()..];
        if kind.starts_with(br#"completed""#) || kind.starts_with(br#"advanced""#) {
            self.completed.fetch_add(1, Ordering::Relaxed);
        } else if kind.starts_with(br#"failed""#) {
            self.failed.fetch_add(1, Ordering::Relaxed);
        } else {
            return kind.starts_with(br#"canceled""#);
        }
        true
    }
}

/// The `jid` of a `log` event's JSON payload.
fn jid_of(payload: &[u8]) -> Option<String> {
    const KEY: &[u8] = br#""jid":"#;
    // (Found only as a key, as the event's kind is.)
    let at = memchr::memmem::find(payload, KEY)? + KEY.len();
    serde_json::Deserializer::from_slice(&payload[at..])
        .into_iter::<String>()
        .next()?
        .ok()
}

/// How many events a slow listener may fall behind before it misses some.
const BUFFER: usize = 4096;

/// After this long without a word from Redis the subscription is pinged, and if the
/// same time passes again without an answer it is given up and opened anew.
const QUIET: Duration = Duration::from_secs(15);

impl EventBus {
    /// Starts bridging the channels under `prefix` (`ql:` or `ql:{ns}:`), and under
    /// qlessd's own prefix that goes with it, from the Redis at `url` (not TLS: see
    /// [`EventBus::start_at`]); reconnects by itself when the connection drops.
    pub fn start(url: String, prefix: String) -> Self {
        Self::start_at(Endpoint::plain(url), prefix)
    }

    /// Starts bridging the channels under `prefix` from the Redis at `endpoint`.
    pub fn start_at(endpoint: Endpoint, prefix: String) -> Self {
        let streams = Streams::new(BUFFER, namespace_of(&prefix));
        let (subscribed_tx, subscribed) = watch::channel(false);
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(bridge(
            endpoint,
            prefix,
            streams.clone(),
            subscribed_tx,
            stopped,
        ));
        EventBus {
            streams,
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
        self.streams.every.subscribe()
    }

    /// A new listener to the `available` announcements alone.
    pub fn subscribe_available(&self) -> broadcast::Receiver<Arc<Event>> {
        self.streams.available.subscribe()
    }

    /// `(completed, failed)`: the jobs ended since the bridge started, as announced on
    /// the `log` channel (see [`Outcomes`]).
    pub fn ended(&self) -> (u64, u64) {
        (
            self.streams.outcomes.completed.load(Ordering::Relaxed),
            self.streams.outcomes.failed.load(Ordering::Relaxed),
        )
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
    endpoint: Endpoint,
    prefix: String,
    streams: Streams,
    subscribed: watch::Sender<bool>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::select! {
            result = listen(&endpoint, &prefix, &streams, &subscribed) => match result {
                Ok(()) => backoff = Duration::from_millis(100),
                Err(err) => {
                    tracing::warn!(%err, "event subscription lost; reconnecting");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            },
            _ = stopped.wait_for(|stop| *stop) => {}
        }
        let _ = subscribed.send(false);
        if *stopped.borrow() || (streams.abandoned() && subscribed.is_closed()) {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped.wait_for(|stop| *stop) => return,
        }
    }
}

async fn listen(
    endpoint: &Endpoint,
    prefix: &str,
    streams: &Streams,
    subscribed: &watch::Sender<bool>,
) -> std::io::Result<()> {
    let subscription = Subscription::open(endpoint, &channels(prefix)).await?;
    let _ = subscribed.send(true);
    relay(subscription, prefix, streams, QUIET).await
}

/// The channels the script publishes on that the gateway listens to (all but
/// `w:<worker>`, which repeats `log` events for qless workers), in a namespace.
pub const CHANNELS: &[&str] = &[
    "log",
    "put",
    "popped",
    "completed",
    "failed",
    "stalled",
    "canceled",
    "track",
    "untrack",
    "available",
];

/// The namespace's name in `prefix` (`ql:{ns}:`), as the metrics label it; `""` for
/// the plain `ql:` prefix.
fn namespace_of(prefix: &str) -> &str {
    prefix
        .strip_prefix("ql:{")
        .and_then(|rest| rest.strip_suffix("}:"))
        .unwrap_or("")
}

/// qlessd's own prefix beside `prefix`: `qlessd:` beside the plain `ql:`, a
/// namespace's own prefix otherwise (`Qless::own_prefix`).
fn own_prefix(prefix: &str) -> &str {
    if prefix == "ql:" {
        super::script::OWN_PREFIX
    } else {
        prefix
    }
}

/// What to subscribe to under `prefix`: the plain `ql:` prefix and qlessd's own
/// `qlessd:` are published with `PUBLISH` (stock qless clients listen on the former),
/// a namespace with `SPUBLISH` (`lua/base.lua`), whose shard channels cannot be
/// matched by a pattern.
fn channels(prefix: &str) -> Channels {
    if prefix == "ql:" {
        Channels::Patterns(vec![
            format!("{prefix}*"),
            format!("{}*", own_prefix(prefix)),
        ])
    } else {
        Channels::Sharded(
            CHANNELS
                .iter()
                .map(|name| format!("{prefix}{name}"))
                .collect(),
        )
    }
}

/// Forwards the subscription's messages to the listeners until the connection fails
/// or stays silent through a ping (`quiet` twice).
async fn relay(
    mut subscription: Subscription,
    prefix: &str,
    streams: &Streams,
    quiet: Duration,
) -> std::io::Result<()> {
    let legacy = prefix == "ql:";
    let own = own_prefix(prefix);
    let mut pinged = false;
    // One timer for the whole silence check rather than one per message: it fires
    // `quiet` after it was set, and only then looks at when the last frame came.
    let mut last_heard = Instant::now();
    let silence = tokio::time::sleep(quiet);
    tokio::pin!(silence);
    loop {
        let message = tokio::select! {
            received = subscription.next() => {
                last_heard = Instant::now();
                pinged = false;
                match received? {
                    Some(message) => message,
                    None => continue,
                }
            }
            () = &mut silence => {
                if last_heard.elapsed() < quiet {
                    silence.as_mut().reset(last_heard + quiet);
                    continue;
                }
                if pinged {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "Redis did not answer a PING on the event subscription",
                    ));
                }
                subscription.ping().await?;
                pinged = true;
                // The answer gets `quiet` from now, however long the silence was.
                last_heard = Instant::now();
                silence.as_mut().reset(last_heard + quiet);
                continue;
            }
        };
        // (A gateway of the version before qlessd's channels left `ql:` announces on
        // `ql:available`: relayed alike, its announcements wake this one's waiters
        // while both serve during an upgrade.)
        let Some(channel) = (message.channel.strip_prefix(prefix.as_bytes()))
            .or_else(|| message.channel.strip_prefix(own.as_bytes()))
        else {
            continue;
        };
        // In the legacy namespace the pattern `ql:*` also matches the channels of
        // every `ql:{ns}:` namespace; those belong to other tenants.
        if legacy && channel.starts_with(b"{") {
            continue;
        }
        streams.relay(channel, message.payload);
    }
}

/// The payload as text, without a copy when it is valid UTF-8 (the script only
/// publishes JSON and jids).
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::resp::Connection;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    const CONFIRM: &[u8] = b"*3\r\n$10\r\npsubscribe\r\n$4\r\nql:*\r\n:1\r\n";
    const PONG: &[u8] = b"*2\r\n$4\r\npong\r\n$0\r\n\r\n";

    fn pmessage(channel: &str, payload: &str) -> Vec<u8> {
        format!(
            "*4\r\n$8\r\npmessage\r\n$4\r\nql:*\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n",
            channel.len(),
            payload.len()
        )
        .into_bytes()
    }

    /// Reads from the fake server's side until `what` has arrived.
    async fn expect(server: &mut DuplexStream, what: &[u8]) {
        let mut seen = Vec::new();
        while !seen.windows(what.len()).any(|w| w == what) {
            let mut chunk = [0u8; 256];
            let n = server.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before {:?}", String::from_utf8_lossy(what));
            seen.extend_from_slice(&chunk[..n]);
        }
    }

    /// A subscription to a fake Redis: the test plays the server.
    async fn subscribed() -> (Subscription, DuplexStream) {
        let (client, mut server) = tokio::io::duplex(4096);
        let channels = Channels::Patterns(vec!["ql:*".to_owned()]);
        let opening = tokio::spawn(async move {
            Subscription::over(Connection::over(Box::new(client)), &channels).await
        });
        expect(&mut server, b"PSUBSCRIBE").await;
        server.write_all(CONFIRM).await.unwrap();
        (opening.await.unwrap().unwrap(), server)
    }

    #[tokio::test]
    async fn a_quiet_subscription_is_pinged_and_kept_while_redis_answers() {
        let (subscription, mut server) = subscribed().await;
        let streams = Streams::new(16, "");
        let mut events = streams.every.subscribe();
        let quiet = Duration::from_millis(50);
        let relaying =
            tokio::spawn(async move { relay(subscription, "ql:", &streams, quiet).await });
        // Silent for longer than `quiet`: a PING arrives; answered, the relay goes on.
        expect(&mut server, b"PING").await;
        server.write_all(PONG).await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        server.write_all(&pmessage("ql:log", "{}")).await.unwrap();
        let event = events.recv().await.unwrap();
        assert_eq!(
            (event.channel.as_str(), event.payload.as_str()),
            ("log", "{}")
        );
        assert!(!relaying.is_finished());
        relaying.abort();
    }

    #[tokio::test]
    async fn a_subscription_that_does_not_answer_a_ping_is_given_up() {
        let (subscription, mut server) = subscribed().await;
        let streams = Streams::new(16, "");
        let _events = streams.every.subscribe();
        let quiet = Duration::from_millis(50);
        let started = std::time::Instant::now();
        let relaying =
            tokio::spawn(async move { relay(subscription, "ql:", &streams, quiet).await });
        expect(&mut server, b"PING").await;
        let err = relaying.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= 2 * quiet, "{:?}", started.elapsed());
    }

    #[test]
    fn the_plain_prefix_is_heard_with_qlessd_own_and_a_namespace_alone() {
        match channels("ql:") {
            Channels::Patterns(patterns) => assert_eq!(patterns, ["ql:*", "qlessd:*"]),
            other => panic!("{other:?}"),
        }
        match channels("ql:{a}:") {
            Channels::Sharded(names) => {
                assert!(names.contains(&"ql:{a}:available".to_owned()), "{names:?}");
                assert!(names.iter().all(|name| name.starts_with("ql:{a}:")));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn qlessd_own_channels_are_relayed_beside_the_protocol_ones() {
        let (subscription, mut server) = subscribed().await;
        let streams = Streams::new(16, "");
        let mut every = streams.every.subscribe();
        let mut available = streams.available.subscribe();
        let quiet = Duration::from_secs(60);
        let relaying =
            tokio::spawn(async move { relay(subscription, "ql:", &streams, quiet).await });
        for (channel, payload) in [
            ("qlessd:available", r#"{"queue":"q","count":1}"#),
            // Another tenant's namespace, matched by `ql:*`: not this gateway's.
            ("ql:{ns}:log", "{}"),
            (
                "qlessd:log",
                r#"{"jid":"j","event":"unthrottled","queue":"q"}"#,
            ),
            ("ql:log", r#"{"jid":"j","event":"put","queue":"q"}"#),
        ] {
            server.write_all(&pmessage(channel, payload)).await.unwrap();
        }
        let mut heard = Vec::new();
        for _ in 0..3 {
            let event = every.recv().await.unwrap();
            heard.push(format!("{} {}", event.channel, event.payload));
        }
        assert_eq!(
            heard,
            [
                r#"available {"queue":"q","count":1}"#,
                r#"log {"jid":"j","event":"unthrottled","queue":"q"}"#,
                r#"log {"jid":"j","event":"put","queue":"q"}"#,
            ]
        );
        assert_eq!(available.recv().await.unwrap().channel, "available");
        relaying.abort();
    }

    #[test]
    fn each_listener_gets_the_channels_it_asked_for_in_order() {
        let streams = Streams::new(16, "");
        let mut every = streams.every.subscribe();
        let mut available = streams.available.subscribe();
        for (channel, payload) in [
            ("log", "{\"event\":\"put\"}"),
            ("available", "{\"queue\":\"q\",\"count\":1}"),
            ("completed", "j1"),
            ("popped", "j2"),
            ("failed", "j3"),
        ] {
            streams.relay(channel.as_bytes(), payload.as_bytes().to_vec());
        }
        let drain = |receiver: &mut broadcast::Receiver<Arc<Event>>| {
            std::iter::from_fn(|| receiver.try_recv().ok())
                .map(|event| format!("{} {}", event.channel, event.payload))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            drain(&mut every),
            [
                "log {\"event\":\"put\"}",
                "available {\"queue\":\"q\",\"count\":1}",
                "completed j1",
                "popped j2",
                "failed j3"
            ]
        );
        assert_eq!(
            drain(&mut available),
            ["available {\"queue\":\"q\",\"count\":1}"]
        );
    }

    #[test]
    fn late_listeners_see_only_what_follows_and_the_last_one_gone_abandons_the_bus() {
        let streams = Streams::new(16, "");
        let mut available = streams.available.subscribe();
        streams.relay(b"log", b"{}".to_vec());
        streams.relay(b"available", b"{}".to_vec());
        // Listeners that come later see nothing of what passed before them.
        let mut every = streams.every.subscribe();
        assert_eq!(streams.every.len(), 0);
        assert!(every.try_recv().is_err());
        assert_eq!(available.try_recv().unwrap().channel, "available");
        assert!(!streams.abandoned());
        drop((available, every));
        assert!(streams.abandoned());
    }

    #[test]
    fn jobs_ended_are_counted_from_the_log_whether_tracked_or_not() {
        let streams = Streams::new(16, "");
        let bus_counts = |streams: &Streams| {
            (
                streams.outcomes.completed.load(Ordering::Relaxed),
                streams.outcomes.failed.load(Ordering::Relaxed),
            )
        };
        for (channel, payload) in [
            ("log", r#"{"jid":"a","event":"completed","queue":"q"}"#),
            (
                "log",
                r#"{"jid":"b","to":"r","event":"advanced","queue":"q"}"#,
            ),
            (
                "log",
                r#"{"message":"x","jid":"c","group":"g","event":"failed","worker":"w"}"#,
            ),
            // Not endings: other events, quoted look-alikes, other channels.
            ("log", r#"{"jid":"d","event":"put","queue":"q"}"#),
            (
                "log",
                r#"{"jid":"\"event\":\"completed\"","event":"popped"}"#,
            ),
            ("completed", "a"),
            ("failed", "c"),
            ("w:w", r#"{"jid":"e","event":"failed"}"#),
        ] {
            streams.relay(channel.as_bytes(), payload.as_bytes().to_vec());
        }
        assert_eq!(bus_counts(&streams), (2, 1));
    }

    #[test]
    fn the_ends_of_leases_are_read_with_their_jids() {
        let outcomes = Outcomes::default();
        let ends = |payload: &str| {
            let payload = payload.as_bytes();
            outcomes.count(payload).then(|| jid_of(payload)).flatten()
        };
        assert_eq!(
            ends(r#"{"jid":"a","event":"completed","queue":"q"}"#).as_deref(),
            Some("a")
        );
        assert_eq!(
            ends(r#"{"message":"\"jid\":\"x\"","jid":"b\/c","group":"g","event":"failed","worker":"w"}"#)
                .as_deref(),
            Some("b/c")
        );
        assert_eq!(
            ends(r#"{"jid":"d","queue":"q","event":"canceled","worker":false}"#).as_deref(),
            Some("d")
        );
        assert_eq!(
            ends(r#"{"jid":"e","event":"lock_lost","worker":"w"}"#),
            None
        );
        assert_eq!(ends(r#"{"jid":"f","event":"put","queue":"q"}"#), None);
        assert_eq!(namespace_of("ql:{t1}:"), "t1");
        assert_eq!(namespace_of("ql:"), "");
    }
}
