//! Script semantics (events): every pub/sub message, its channel, its exact payload
//! and the order of the messages within one operation.

use std::time::Duration;

use futures_util::StreamExt;
use qlessd::core::{Qless, RetryArgs};

use super::jobs::{config, finish, job, pop, put, start, strs};
use crate::support::RedisServer;

/// A pattern subscription that reads everything published until a sentinel.
pub(super) struct Listener {
    stream: redis::aio::PubSubStream,
    conn: redis::Connection,
    sentinel: String,
}

impl Listener {
    /// Subscribes to `pattern`; `sentinel` must be a channel the pattern matches. Under
    /// `ql:*` that is the spec's events alone: qlessd's own announcements are on
    /// `qlessd:available` (lua/available.rs tests them), so a stray message of qlessd's
    /// on the protocol's channels fails these tests.
    pub(super) async fn start(redis: &RedisServer, pattern: &str, sentinel: &str) -> Self {
        let mut pubsub = redis.client().get_async_pubsub().await.unwrap();
        pubsub.psubscribe(pattern).await.unwrap();
        Listener {
            stream: pubsub.into_on_message(),
            conn: redis.client().get_connection().unwrap(),
            sentinel: sentinel.to_owned(),
        }
    }

    /// Everything published since the last call, as (channel, payload), in order.
    pub(super) async fn drain(&mut self) -> Vec<(String, String)> {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&self.sentinel)
            .arg("end")
            .query(&mut self.conn)
            .unwrap();
        let mut out = Vec::new();
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.stream.next())
                .await
                .expect("no pub/sub message within 5 s")
                .expect("subscription closed");
            let channel = msg.get_channel_name().to_owned();
            if channel == self.sentinel {
                return out;
            }
            let payload = String::from_utf8(msg.get_payload_bytes().to_vec()).unwrap();
            out.push((channel, payload));
        }
    }
}

async fn listen(redis: &RedisServer) -> Listener {
    Listener::start(redis, "ql:*", "ql:~end-of-test").await
}

fn msgs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(c, p)| (c.to_string(), p.to_string()))
        .collect()
}

async fn running(qless: &Qless, jid: &str, worker: &str, tracked: bool) {
    put(qless, 0.0, "q", jid).await;
    if tracked {
        qless.track(0.0, jid).await.unwrap();
    }
    assert_eq!(pop(qless, 1.0, "q", worker, 1).await, strs(&[jid]));
}

#[tokio::test]
async fn put_publishes_a_put_event() {
    let (redis, qless) = start().await;
    let mut events = listen(&redis).await;
    put(&qless, 0.0, "q", "a").await;
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:log", r#"{"jid":"a","event":"put","queue":"q"}"#)])
    );
}

#[tokio::test]
async fn payload_strings_are_escaped_like_cjson() {
    let (redis, qless) = start().await;
    let mut events = listen(&redis).await;
    put(&qless, 0.0, "a/b", "x\"y").await;
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:log", r#"{"jid":"x\"y","event":"put","queue":"a\/b"}"#)])
    );
}

#[tokio::test]
async fn a_put_that_takes_a_job_from_another_worker_tells_that_worker() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w1", false).await;
    let mut events = listen(&redis).await;
    let mut args = job("q", "a");
    args.worker = "w2".into();
    qless.put(2.0, args).await.unwrap();
    let lost = r#"{"jid":"a","event":"lock_lost","worker":"w1"}"#;
    assert_eq!(
        events.drain().await,
        msgs(&[
            ("ql:log", r#"{"jid":"a","event":"put","queue":"q"}"#),
            ("ql:w:w1", lost),
            ("ql:log", lost),
        ])
    );
    // no lock_lost when the owner itself puts it back
    pop(&qless, 3.0, "q", "w1", 1).await;
    events.drain().await;
    let mut args = job("q", "a");
    args.worker = "w1".into();
    qless.put(4.0, args).await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:log", r#"{"jid":"a","event":"put","queue":"q"}"#)])
    );
}

#[tokio::test]
async fn tracking_publishes_track_untrack_and_each_transition() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let mut events = listen(&redis).await;
    qless.track(1.0, "a").await.unwrap();
    assert_eq!(events.drain().await, msgs(&[("ql:track", "a")]));
    put(&qless, 2.0, "q", "a").await;
    assert_eq!(
        events.drain().await,
        msgs(&[
            ("ql:log", r#"{"jid":"a","event":"put","queue":"q"}"#),
            ("ql:put", "a"),
        ])
    );
    pop(&qless, 3.0, "q", "w", 1).await;
    assert_eq!(events.drain().await, msgs(&[("ql:popped", "a")]));
    qless.untrack(4.0, "a").await.unwrap();
    assert_eq!(events.drain().await, msgs(&[("ql:untrack", "a")]));
}

#[tokio::test]
async fn pop_publishes_popped_for_each_tracked_job_in_order() {
    let (redis, qless) = start().await;
    for (t, jid) in [(0.0, "a"), (1.0, "b"), (2.0, "c")] {
        put(&qless, t, "q", jid).await;
    }
    qless.track(3.0, "c").await.unwrap();
    qless.track(3.0, "a").await.unwrap();
    let mut events = listen(&redis).await;
    assert_eq!(pop(&qless, 4.0, "q", "w", 3).await, strs(&["a", "b", "c"]));
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:popped", "a"), ("ql:popped", "c")])
    );
}

#[tokio::test]
async fn complete_publishes_completed_after_the_tracked_notice() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    running(&qless, "b", "w", false).await;
    let mut events = listen(&redis).await;
    qless.complete(2.0, finish("a", "w", "q")).await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[
            ("ql:completed", "a"),
            ("ql:log", r#"{"jid":"a","event":"completed","queue":"q"}"#),
        ])
    );
    qless.complete(2.0, finish("b", "w", "q")).await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:log", r#"{"jid":"b","event":"completed","queue":"q"}"#)])
    );
}

#[tokio::test]
async fn complete_with_next_publishes_advanced() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    let mut events = listen(&redis).await;
    let mut next = finish("a", "w", "q");
    next.next = Some("q2".into());
    qless.complete(2.0, next).await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[
            ("ql:completed", "a"),
            (
                "ql:log",
                r#"{"jid":"a","to":"q2","event":"advanced","queue":"q"}"#
            ),
        ])
    );
}

#[tokio::test]
async fn fail_publishes_failed_then_the_tracked_notice() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    let mut events = listen(&redis).await;
    qless
        .fail(2.0, "a", "w", "grp", "it \"broke\"", None)
        .await
        .unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[
            (
                "ql:log",
                r#"{"message":"it \"broke\"","jid":"a","group":"grp","event":"failed","worker":"w"}"#
            ),
            ("ql:failed", "a"),
        ])
    );
}

#[tokio::test]
async fn retry_publishes_only_the_tracked_failure_when_exhausted() {
    let (redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(1);
    qless.put(0.0, args).await.unwrap();
    qless.track(0.0, "a").await.unwrap();
    let retry = || RetryArgs {
        jid: "a".into(),
        queue: "q".into(),
        worker: "w".into(),
        ..Default::default()
    };
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut events = listen(&redis).await;
    assert_eq!(qless.retry(2.0, retry()).await.unwrap(), 0);
    assert_eq!(events.drain().await, vec![]);
    pop(&qless, 3.0, "q", "w", 1).await;
    events.drain().await;
    assert_eq!(qless.retry(4.0, retry()).await.unwrap(), -1);
    assert_eq!(events.drain().await, msgs(&[("ql:failed", "a")]));
}

#[tokio::test]
async fn lock_expiry_publishes_stalled_then_lock_lost() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w1", true).await;
    let mut events = listen(&redis).await;
    assert!(pop(&qless, 61.0, "q", "w2", 1).await.is_empty());
    let lost = r#"{"jid":"a","event":"lock_lost","worker":"w1"}"#;
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:stalled", "a"), ("ql:w:w1", lost), ("ql:log", lost)])
    );
    assert_eq!(pop(&qless, 71.0, "q", "w2", 1).await, strs(&["a"]));
    assert_eq!(events.drain().await, msgs(&[("ql:popped", "a")]));
}

#[tokio::test]
async fn lock_expiry_exhaustion_publishes_failed_with_the_previous_worker() {
    let (redis, qless) = start().await;
    let mut args = job("queue", "jid");
    args.retries = Some(0);
    qless.put(0.0, args).await.unwrap();
    qless.track(0.0, "jid").await.unwrap();
    pop(&qless, 0.0, "queue", "worker", 1).await;
    pop(&qless, 60.0, "queue", "other", 1).await;
    let mut events = listen(&redis).await;
    assert!(pop(&qless, 70.0, "queue", "other", 1).await.is_empty());
    assert_eq!(
        events.drain().await,
        msgs(&[
            ("ql:failed", "jid"),
            (
                "ql:log",
                r#"{"message":"Job exhausted retries in queue \"queue\"","jid":"jid","group":"failed-retries-queue","event":"failed","worker":"worker"}"#
            ),
        ])
    );
}

#[tokio::test]
async fn timeout_publishes_lock_lost_to_the_worker_then_the_log() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    let mut events = listen(&redis).await;
    qless.timeout(2.0, &strs(&["a"])).await.unwrap();
    let lost = r#"{"jid":"a","event":"lock_lost","worker":"w"}"#;
    assert_eq!(
        events.drain().await,
        msgs(&[("ql:w:w", lost), ("ql:log", lost)])
    );
}

#[tokio::test]
async fn cancel_publishes_canceled_to_the_log_the_worker_and_trackers() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    put(&qless, 0.0, "q", "b").await;
    let mut events = listen(&redis).await;
    qless.cancel(2.0, &strs(&["a"])).await.unwrap();
    let canceled = r#"{"jid":"a","queue":"q","event":"canceled","worker":"w"}"#;
    assert_eq!(
        events.drain().await,
        msgs(&[
            ("ql:log", canceled),
            ("ql:w:w", canceled),
            ("ql:canceled", "a")
        ])
    );
    qless.cancel(3.0, &strs(&["b"])).await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[(
            "ql:log",
            r#"{"jid":"b","queue":"q","event":"canceled","worker":""}"#
        )])
    );
    qless.cancel(4.0, &strs(&["ghost"])).await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[(
            "ql:log",
            r#"{"jid":"ghost","queue":false,"event":"canceled","worker":false}"#
        )])
    );
}

#[tokio::test]
async fn canceling_a_completed_job_publishes_nothing() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    qless.complete(2.0, finish("a", "w", "q")).await.unwrap();
    let mut events = listen(&redis).await;
    qless.cancel(3.0, &strs(&["a"])).await.unwrap();
    assert_eq!(events.drain().await, vec![]);
}

#[tokio::test]
async fn config_changes_are_published() {
    let (redis, qless) = start().await;
    let mut events = listen(&redis).await;
    config(&qless, "heartbeat", "5").await;
    qless.config_unset(1.0, "heartbeat").await.unwrap();
    assert_eq!(
        events.drain().await,
        msgs(&[
            (
                "ql:log",
                r#"{"option":"heartbeat","event":"config_set","value":"5"}"#
            ),
            ("ql:log", r#"{"event":"config_unset","option":"heartbeat"}"#),
        ])
    );
}

#[tokio::test]
async fn quiet_commands_publish_nothing() {
    let (redis, qless) = start().await;
    running(&qless, "a", "w", true).await;
    put(&qless, 0.0, "q", "b").await;
    qless.track(0.0, "b").await.unwrap();
    let mut c = job("q", "c");
    c.depends = Some(strs(&["b"]));
    qless.put(0.0, c).await.unwrap();
    running(&qless, "f", "w", true).await;
    qless.fail(1.0, "f", "w", "g", "m", None).await.unwrap();
    qless
        .recur(
            1.0,
            qlessd::core::RecurArgs {
                queue: "rq".into(),
                jid: "r".into(),
                klass: "K".into(),
                data: "{}".into(),
                interval: 60.0,
                offset: 0.0,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut events = listen(&redis).await;
    qless.heartbeat(2.0, "a", "w", None).await.unwrap();
    qless.peek(2.0, "q", 5).await.unwrap();
    qless.depends_on(2.0, "c", &strs(&["a"])).await.unwrap();
    qless.priority(2.0, "b", 3.0).await.unwrap();
    qless.tag_add(2.0, "b", &strs(&["t"])).await.unwrap();
    qless.log(2.0, "b", "note", None).await.unwrap();
    qless.unfail(2.0, "q", "g", 5).await.unwrap();
    qless.pause(2.0, &strs(&["q"])).await.unwrap();
    qless.unpause(2.0, &strs(&["q"])).await.unwrap();
    qless.worker_deregister(2.0, &strs(&["w"])).await.unwrap();
    qless.queue_forget(2.0, &strs(&["nope"])).await.unwrap();
    qless.recur_tag(2.0, "r", &strs(&["t"])).await.unwrap();
    // spawning a recurring child publishes nothing either
    assert_eq!(pop(&qless, 2.0, "rq", "w", 1).await, strs(&["r-1"]));
    assert_eq!(events.drain().await, vec![]);
}
