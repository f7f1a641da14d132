//! Script semantics (namespaces): tenants on one Redis never see each other, every key
//! and channel carries the namespace, and the legacy prefix sees none of it.

use qlessd::core::{Qless, RecurArgs};

use super::jobs::{complete, finish, job, pop, put, strs};
use crate::support::{RedisServer, connect};

async fn tenants() -> (RedisServer, Qless, Qless, Qless) {
    let redis = RedisServer::start();
    let a = connect(&redis, Some("tenant-a")).await;
    let b = connect(&redis, Some("tenant-b")).await;
    let legacy = connect(&redis, None).await;
    (redis, a, b, legacy)
}

fn keys(redis: &RedisServer) -> Vec<String> {
    let mut conn = redis.client().get_connection().unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.sort();
    keys
}

/// Touches most kinds of keys: jobs, history, tags, dependencies, locks, workers,
/// failures, completed, stats, recurring templates, tracking and config.
async fn exercise(qless: &Qless) {
    qless
        .config_set(0.0, "jobs-history-count", "10")
        .await
        .unwrap();
    let mut a = job("q", "a");
    a.tags = Some(strs(&["t"]));
    qless.put(0.0, a).await.unwrap();
    put(qless, 0.0, "q", "b").await;
    put(qless, 0.0, "q", "c").await;
    let mut d = job("q", "d");
    d.depends = Some(strs(&["c"]));
    qless.put(0.0, d).await.unwrap();
    let mut e = job("q", "e");
    e.delay = 100.0;
    qless.put(0.0, e).await.unwrap();
    qless.track(0.0, "a").await.unwrap();
    assert_eq!(pop(qless, 1.0, "q", "w", 3).await.len(), 3);
    complete(qless, 2.0, "a", "w", "q").await;
    qless.fail(2.0, "b", "w", "g", "m", None).await.unwrap();
    qless
        .recur(
            2.0,
            RecurArgs {
                queue: "q".into(),
                jid: "r".into(),
                klass: "K".into(),
                data: "{}".into(),
                interval: 60.0,
                offset: 0.0,
                tags: Some(strs(&["t"])),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    qless.pause(3.0, &strs(&["p"])).await.unwrap();
    assert!(!pop(qless, 3.0, "q", "w", 1).await.is_empty());
    put(qless, 4.0, "q", "z").await;
}

#[tokio::test]
async fn jobs_of_one_tenant_are_invisible_to_the_other() {
    let (_redis, a, b, legacy) = tenants().await;
    put(&a, 0.0, "q", "j").await;
    assert!(b.get(1.0, "j").await.unwrap().is_none());
    assert!(legacy.get(1.0, "j").await.unwrap().is_none());
    assert!(b.queues(1.0).await.unwrap().is_empty());
    assert!(legacy.queues(1.0).await.unwrap().is_empty());
    assert!(pop(&b, 1.0, "q", "w", 5).await.is_empty());
    // the same jid can live in both, independently
    let mut other = job("elsewhere", "j");
    other.priority = Some(4.0);
    b.put(2.0, other).await.unwrap();
    assert_eq!(a.get(3.0, "j").await.unwrap().unwrap().queue, "q");
    assert_eq!(b.get(3.0, "j").await.unwrap().unwrap().queue, "elsewhere");
    assert_eq!(pop(&a, 4.0, "q", "w", 5).await, strs(&["j"]));
    assert_eq!(b.get(4.0, "j").await.unwrap().unwrap().state, "waiting");
    b.config_set(5.0, "heartbeat", "5").await.unwrap();
    assert_eq!(
        a.config_get(5.0, "heartbeat").await.unwrap(),
        Some(serde_json::json!(60))
    );
    assert!(b.worker(5.0, "w").await.unwrap().jids.is_empty());
    assert_eq!(a.worker(5.0, "w").await.unwrap().jids, strs(&["j"]));
}

#[tokio::test]
async fn every_key_a_tenant_writes_lives_under_its_namespace() {
    let (redis, a, _b, _legacy) = tenants().await;
    exercise(&a).await;
    let keys = keys(&redis);
    assert!(keys.len() > 15, "{keys:?}");
    for key in &keys {
        assert!(key.starts_with("ql:{tenant-a}:"), "{key} escaped: {keys:?}");
    }
    for expected in [
        "ql:{tenant-a}:config",
        "ql:{tenant-a}:j:a",
        // (b failed, which moves its history out of the hash into the list; a's,
        // put, popped and completed, stays in its hash: lua/README.md "Compact history".)
        "ql:{tenant-a}:j:b-history",
        "ql:{tenant-a}:q:q-work",
        "ql:{tenant-a}:q:q-locks",
        "ql:{tenant-a}:q:q-recur",
        "ql:{tenant-a}:queues",
        "ql:{tenant-a}:workers",
        "ql:{tenant-a}:completed",
        "ql:{tenant-a}:tracked",
        "ql:{tenant-a}:r:r",
        "ql:{tenant-a}:t:t",
        "ql:{tenant-a}:f:g",
        "ql:{tenant-a}:paused_queues",
    ] {
        assert!(
            keys.contains(&expected.to_owned()),
            "{expected} missing: {keys:?}"
        );
    }
}

#[tokio::test]
async fn two_tenants_doing_the_same_work_do_not_collide() {
    let (redis, a, b, legacy) = tenants().await;
    exercise(&a).await;
    exercise(&b).await;
    let keys = keys(&redis);
    let (in_a, in_b): (Vec<_>, Vec<_>) = keys.iter().partition(|k| k.starts_with("ql:{tenant-a}:"));
    assert!(
        in_b.iter().all(|k| k.starts_with("ql:{tenant-b}:")),
        "{in_b:?}"
    );
    let strip = |ks: Vec<&String>, p: &str| -> Vec<String> {
        ks.into_iter()
            .map(|k| k.trim_start_matches(p).to_owned())
            .collect()
    };
    assert_eq!(strip(in_a, "ql:{tenant-a}:"), strip(in_b, "ql:{tenant-b}:"));
    assert!(legacy.queues(10.0).await.unwrap().is_empty());
    assert!(legacy.failed(10.0).await.unwrap().is_empty());
    assert_eq!(a.failed(10.0).await.unwrap().get("g"), Some(&1));
}

/// A connection subscribed to tenant `ns`'s shard channels (`SSUBSCRIBE`, where a
/// namespace publishes) and to every plain channel (`PSUBSCRIBE *`), so an event
/// published anywhere else would show too.
struct ShardListener {
    conn: redis::Connection,
    sentinel: String,
}

impl ShardListener {
    fn start(redis: &RedisServer, ns: &str) -> Self {
        let mut conn = redis.client().get_connection().unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let sentinel = format!("ql:{{{ns}}}:~end-of-test");
        let mut subscribe = redis::cmd("SSUBSCRIBE");
        let channels = [
            "log",
            "put",
            "popped",
            "completed",
            "failed",
            "stalled",
            "canceled",
            "track",
            "untrack",
            "w:w",
        ];
        for channel in channels {
            subscribe.arg(format!("ql:{{{ns}}}:{channel}"));
        }
        subscribe.arg(&sentinel);
        conn.send_packed_command(&subscribe.get_packed_command())
            .unwrap();
        conn.send_packed_command(&redis::cmd("PSUBSCRIBE").arg("*").get_packed_command())
            .unwrap();
        for _ in 0..channels.len() + 2 {
            conn.recv_response().unwrap();
        }
        ShardListener { conn, sentinel }
    }

    /// Everything published since the last call, as (channel, payload), in order.
    fn drain(&mut self, redis: &RedisServer) -> Vec<(String, String)> {
        let mut publisher = redis.client().get_connection().unwrap();
        let _: i64 = redis::cmd("SPUBLISH")
            .arg(&self.sentinel)
            .arg("end")
            .query(&mut publisher)
            .unwrap();
        let mut out = Vec::new();
        loop {
            let frame: Vec<Vec<u8>> =
                redis::from_redis_value(self.conn.recv_response().unwrap()).unwrap();
            let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
            let (channel, payload) = match frame.as_slice() {
                [kind, channel, payload] if kind == b"smessage" => (text(channel), text(payload)),
                [kind, _, channel, payload] if kind == b"pmessage" => {
                    (text(channel), text(payload))
                }
                other => panic!("unexpected frame {other:?}"),
            };
            if channel == self.sentinel {
                return out;
            }
            out.push((channel, payload));
        }
    }
}

#[tokio::test]
async fn a_tenants_events_go_to_its_own_shard_channels() {
    let (redis, a, _b, _legacy) = tenants().await;
    let mut events = ShardListener::start(&redis, "tenant-a");
    put(&a, 0.0, "q", "j").await;
    a.track(0.0, "j").await.unwrap();
    pop(&a, 1.0, "q", "w", 1).await;
    a.complete(2.0, finish("j", "w", "q")).await.unwrap();
    put(&a, 3.0, "q", "k").await;
    pop(&a, 3.0, "q", "w", 1).await;
    a.timeout(4.0, &strs(&["k"])).await.unwrap();
    let lost = r#"{"jid":"k","event":"lock_lost","worker":"w"}"#;
    let expected: Vec<(String, String)> = [
        (
            "ql:{tenant-a}:log",
            r#"{"jid":"j","event":"put","queue":"q"}"#,
        ),
        ("ql:{tenant-a}:track", "j"),
        ("ql:{tenant-a}:popped", "j"),
        ("ql:{tenant-a}:completed", "j"),
        (
            "ql:{tenant-a}:log",
            r#"{"jid":"j","event":"completed","queue":"q"}"#,
        ),
        (
            "ql:{tenant-a}:log",
            r#"{"jid":"k","event":"put","queue":"q"}"#,
        ),
        ("ql:{tenant-a}:w:w", lost),
        ("ql:{tenant-a}:log", lost),
    ]
    .iter()
    .map(|(c, p)| (c.to_string(), p.to_string()))
    .collect();
    assert_eq!(events.drain(&redis), expected);
}

#[tokio::test]
async fn the_legacy_prefix_sees_no_tenant_and_no_tenant_sees_it() {
    let (redis, a, b, legacy) = tenants().await;
    put(&legacy, 0.0, "q", "old").await;
    assert!(a.get(1.0, "old").await.unwrap().is_none());
    assert!(b.get(1.0, "old").await.unwrap().is_none());
    let keys = keys(&redis);
    assert!(keys.iter().all(|k| !k.starts_with("ql:{")), "{keys:?}");
    assert!(keys.contains(&"ql:j:old".to_owned()), "{keys:?}");
}

/// A job's `time` field under `prefix`.
fn time_field(redis: &RedisServer, prefix: &str, jid: &str) -> String {
    redis::cmd("HGET")
        .arg(format!("{prefix}j:{jid}"))
        .arg("time")
        .query(&mut redis.client().get_connection().unwrap())
        .unwrap()
}

#[tokio::test]
async fn a_namespaced_jobs_time_is_now_as_written_and_its_statistics_are_the_same() {
    // Only this script reads a namespace's keys, so there `time` is `now` as the
    // gateway wrote it (17 bytes less per job than the spec's %.20f, which the plain
    // prefix keeps for stock clients): every reader parses it to the same number.
    let (redis, tenant, _, legacy) = tenants().await;
    for qless in [&tenant, &legacy] {
        put(qless, 1.25, "q", "a").await;
        put(qless, 1.3, "q", "b").await;
        pop(qless, 3.5, "q", "w", 1).await;
    }
    assert_eq!(time_field(&redis, "ql:{tenant-a}:", "a"), "3.5");
    assert_eq!(time_field(&redis, "ql:{tenant-a}:", "b"), "1.3");
    assert_eq!(time_field(&redis, "ql:", "a"), "3.50000000000000000000");
    assert_eq!(time_field(&redis, "ql:", "b"), "1.30000000000000004441");
    for qless in [&tenant, &legacy] {
        pop(qless, 7.1, "q", "w", 1).await;
        complete(qless, 10.1, "a", "w", "q").await;
        complete(qless, 12.7, "b", "w", "q").await;
    }
    assert_eq!(time_field(&redis, "ql:{tenant-a}:", "b"), "12.7");
    let namespaced = tenant.stats(13.0, "q", 13.0).await.unwrap();
    assert_eq!(namespaced, legacy.stats(13.0, "q", 13.0).await.unwrap());
    assert_eq!((namespaced.wait.count, namespaced.run.count), (2, 2));
}
