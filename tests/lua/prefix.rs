//! The plain prefix is the protocol's (lesson 24 of the architecture guide): on the
//! plain `ql:` prefix, which stock qless clients read and watch, a broad job lifecycle
//! writes only the keys and publishes only on the channels the spec names (§3 and
//! §4.1), and every key and channel of qlessd's own is under `qlessd:`. A Redis that
//! holds qlessd's keys under their old `ql:` names gets them moved (`migrate`) without
//! losing a due time, an idempotency key, a cron tick or a throttle.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use qlessd::core::{Idempotency, Qless};
use redis::Value;

use super::events::Listener;
use super::jobs::{job, raw, start, strs};
use crate::support::{RedisServer, connect};

/// The spec's kind of the key `key` (§3, written with its placeholders), or `None`
/// when the spec names no such key on the plain prefix. Names in these tests have no
/// `:` or `{`, and no jid ends in a suffix of the layout, so each key reads one way.
fn spec_key(key: &str) -> Option<&'static str> {
    let rest = key.strip_prefix("ql:")?;
    let named = |prefix: &str, suffix: &str| {
        rest.strip_prefix(prefix)
            .and_then(|name| name.strip_suffix(suffix))
            .is_some_and(|name| !name.is_empty() && !name.contains([':', '{']))
    };
    let stats = |kind: &str| {
        rest.strip_prefix(kind)
            .and_then(|tail| tail.split_once(':'))
            .is_some_and(|(bin, queue)| {
                !bin.is_empty() && bin.bytes().all(|b| b.is_ascii_digit()) && !queue.is_empty()
            })
    };
    Some(match rest {
        "config" => "ql:config",
        "queues" => "ql:queues",
        "paused_queues" => "ql:paused_queues",
        "workers" => "ql:workers",
        "tracked" => "ql:tracked",
        "completed" => "ql:completed",
        "failures" => "ql:failures",
        "tags" => "ql:tags",
        _ if named("j:", "-history") => "ql:j:<J>-history",
        _ if named("j:", "-dependencies") => "ql:j:<J>-dependencies",
        _ if named("j:", "-dependents") => "ql:j:<J>-dependents",
        _ if named("j:", "") => "ql:j:<J>",
        _ if named("q:", "-work") => "ql:q:<Q>-work",
        _ if named("q:", "-locks") => "ql:q:<Q>-locks",
        _ if named("q:", "-scheduled") => "ql:q:<Q>-scheduled",
        _ if named("q:", "-depends") => "ql:q:<Q>-depends",
        _ if named("q:", "-recur") => "ql:q:<Q>-recur",
        _ if named("w:", ":jobs") => "ql:w:<W>:jobs",
        _ if named("f:", "") => "ql:f:<group>",
        _ if named("t:", "") => "ql:t:<tag>",
        _ if named("r:", "") => "ql:r:<J>",
        _ if stats("s:wait:") => "ql:s:wait:<bin>:<Q>",
        _ if stats("s:run:") => "ql:s:run:<bin>:<Q>",
        _ if stats("s:stats:") => "ql:s:stats:<bin>:<Q>",
        _ => return None,
    })
}

/// The spec's kind of the pub/sub channel `channel` (§4.1), or `None`.
fn spec_channel(channel: &str) -> Option<&'static str> {
    let rest = channel.strip_prefix("ql:")?;
    Some(match rest {
        "log" => "ql:log",
        "track" => "ql:track",
        "untrack" => "ql:untrack",
        "put" => "ql:put",
        "popped" => "ql:popped",
        "completed" => "ql:completed",
        "failed" => "ql:failed",
        "stalled" => "ql:stalled",
        "canceled" => "ql:canceled",
        _ if rest
            .strip_prefix("w:")
            .is_some_and(|w| !w.is_empty() && !w.contains([':', '{'])) =>
        {
            "ql:w:<W>"
        }
        _ => return None,
    })
}

/// The events §4.2 defines for `ql:log`.
const LOG_EVENTS: &[&str] = &[
    "put",
    "lock_lost",
    "canceled",
    "completed",
    "advanced",
    "failed",
    "config_set",
    "config_unset",
];

/// Runs script command `command` at `now`, which must succeed.
async fn call(qless: &Qless, now: f64, command: &'static str, args: &[&str]) -> Value {
    qless
        .call(command, now, strs(args))
        .await
        .unwrap_or_else(|err| panic!("{command} {args:?}: {err}"))
}

/// The jids a `pop` reply leases, in order.
fn popped(reply: Value) -> Vec<String> {
    let Value::BulkString(text) = reply else {
        panic!("pop answered {reply:?}")
    };
    let jobs: serde_json::Value = serde_json::from_slice(&text).unwrap();
    jobs.as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|job| job["jid"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Pops from `queue` for `worker`, which must lease exactly `jids`.
async fn pop_exactly(qless: &Qless, now: f64, queue: &str, worker: &str, jids: &[&str]) {
    let count = jids.len().to_string();
    let reply = call(qless, now, "pop", &[queue, worker, &count]).await;
    assert_eq!(popped(reply), strs(jids), "pop {queue} for {worker}");
}

/// A job lifecycle as broad as the script's commands, on the plain prefix: every
/// transition of the spec's state machine and every extension of qlessd's. Returns
/// how many keys the move of old keys found under `ql:` at the end (none is right).
async fn lifecycle(qless: &Qless) -> i64 {
    // Configuration.
    call(qless, 0.0, "config.set", &["heartbeat", "60"]).await;
    call(qless, 0.0, "config.set", &["scratch", "1"]).await;
    call(qless, 0.0, "config.unset", &["scratch"]).await;
    call(qless, 0.0, "config.get", &[]).await;

    // A tracked, tagged job and one that depends on it: pop, heartbeat (with
    // progress), complete (releasing the dependent), put again while tracked, fail,
    // unfail, untrack; the dependent completes on to another queue.
    let put = |queue: &'static str, jid: &'static str| {
        let mut args = vec!["client", queue, jid, "K", "{}", "0"];
        args.extend(match jid {
            "a" => &["tags", r#"["t1"]"#, "priority", "5"][..],
            "b" => &["depends", r#"["a"]"#][..],
            "d" | "e" => &["throttles", r#"["th1"]"#][..],
            "g" => &["throttles", r#"["th2"]"#][..],
            "bk" => &["backoff", r#"{"initial":5}"#][..],
            "x0" => &["retries", "0"][..],
            _ => &[][..],
        });
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let put_job = async |now: f64, queue: &'static str, jid: &'static str| {
        qless
            .call("put", now, put(queue, jid))
            .await
            .unwrap_or_else(|err| panic!("put {jid}: {err}"));
    };
    put_job(1.0, "qa", "a").await;
    call(qless, 1.0, "track", &["track", "a"]).await;
    put_job(1.0, "qa", "b").await;
    pop_exactly(qless, 2.0, "qa", "w1", &["a"]).await;
    call(
        qless,
        2.0,
        "heartbeat",
        &["a", "w1", "progress", r#"{"done":1}"#],
    )
    .await;
    call(
        qless,
        2.0,
        "complete",
        &["a", "w1", "qa", "{}", "result", "{}"],
    )
    .await;
    put_job(3.0, "qa", "a").await;
    pop_exactly(qless, 4.0, "qa", "w1", &["a", "b"]).await;
    call(
        qless,
        4.0,
        "complete",
        &["b", "w1", "qa", "{}", "next", "qb"],
    )
    .await;
    call(qless, 4.0, "fail", &["a", "w1", "g1", "it broke"]).await;
    call(qless, 5.0, "unfail", &["qa", "g1", "10"]).await;
    call(qless, 5.0, "track", &["untrack", "a"]).await;

    // Throttles: `d` holds th1 (maximum 1), `e` waits for it and is let go when `d`
    // completes; `g` leases th2 (a rate).
    call(qless, 5.0, "throttle.set", &["th1", "1", "0", "0"]).await;
    call(qless, 5.0, "throttle.set", &["th2", "0", "1", "60"]).await;
    // (One after the other, so they are popped in this order.)
    put_job(5.0, "qt", "d").await;
    put_job(5.1, "qt", "e").await;
    put_job(5.2, "qt", "g").await;
    pop_exactly(qless, 6.0, "qt", "w1", &["d", "g"]).await;
    call(qless, 6.0, "queues.ext", &[]).await;
    call(qless, 6.0, "throttle.list", &[]).await;
    call(qless, 7.0, "complete", &["d", "w1", "qt", "{}"]).await;
    call(qless, 7.0, "throttle.get", &["th1"]).await;
    call(qless, 7.0, "throttle.delete", &["th1"]).await;

    // A scheduled job, promoted by the sweep; a retry with a backoff.
    put_job(1.0, "qs", "bk").await;
    qless
        .put(
            1.0,
            qlessd::core::PutArgs {
                delay: 10.0,
                ..job("qs", "c")
            },
        )
        .await
        .unwrap();
    pop_exactly(qless, 2.0, "qs", "w1", &["bk"]).await;
    call(qless, 3.0, "retry", &["bk", "qs", "w1", "backoff"]).await;
    qless.sweep(20.0, 1000, 0, 0).await.unwrap();

    // Recurring templates: one by interval (spawned by the sweep, updated, tagged,
    // stopped), one by cron (ticks stored, topped up by the gateway, fired).
    call(
        qless,
        10.0,
        "recur",
        &["qr", "r1", "K", "{}", "interval", "5", "0"],
    )
    .await;
    call(
        qless,
        10.0,
        "recur",
        &[
            "qr",
            "r2",
            "K",
            "{}",
            "cron",
            "* * * * *",
            "UTC",
            "ticks",
            "[60,120]",
        ],
    )
    .await;
    qless.sweep(20.0, 1000, 0, 0).await.unwrap();
    call(qless, 20.0, "recur.update", &["r1", "priority", "2"]).await;
    call(qless, 20.0, "recur.tag", &["r1", "rt"]).await;
    call(qless, 20.0, "recur.untag", &["r1", "rt"]).await;
    call(qless, 20.0, "recur.get.ext", &["r2"]).await;
    qless.sweep(61.0, 1000, 0, 0).await.unwrap();
    qlessd::cron::top_up(qless, 100.0).await.unwrap();
    call(qless, 100.0, "unrecur", &["r1"]).await;

    // Cancel (tracked, held by w2), lock loss with its grace notice (tracked), the
    // hand-over, a retry, an exhausted retry (tracked), a timeout.
    for (queue, jid) in [("qc", "f"), ("qx", "h"), ("qy", "x0"), ("qz", "tm")] {
        put_job(100.0, queue, jid).await;
    }
    for jid in ["f", "h", "x0"] {
        call(qless, 100.0, "track", &["track", jid]).await;
    }
    pop_exactly(qless, 101.0, "qc", "w2", &["f"]).await;
    call(qless, 101.0, "cancel", &["f"]).await;
    pop_exactly(qless, 101.0, "qx", "w3", &["h"]).await;
    qless.sweep(170.0, 1000, 0, 0).await.unwrap();
    qless.sweep(190.0, 1000, 0, 0).await.unwrap();
    pop_exactly(qless, 191.0, "qx", "w4", &["h"]).await;
    call(qless, 192.0, "retry", &["h", "qx", "w4", "5"]).await;
    pop_exactly(qless, 192.0, "qy", "w4", &["x0"]).await;
    call(qless, 193.0, "retry", &["x0", "qy", "w4"]).await;
    pop_exactly(qless, 193.0, "qz", "w1", &["tm"]).await;
    call(qless, 194.0, "timeout", &["tm"]).await;

    // Idempotent puts, put-if-absent, requeue; dependencies on and off; tags,
    // priority, log, pause, forgetting a queue.
    let idem = || Idempotency {
        key: "k1".into(),
        ttl: 100.0,
    };
    for _ in 0..2 {
        qless
            .put_idempotent(200.0, job("qi", "i"), false, idem())
            .await
            .unwrap();
    }
    assert_eq!(
        qless.put_if_absent(200.0, job("qi", "i")).await.unwrap(),
        None
    );
    qless.put(200.0, job("qi", "i2")).await.unwrap();
    qless.requeue(200.0, job("qi", "i2")).await.unwrap();
    let mut dep = job("qd", "dep");
    dep.depends = Some(strs(&["i"]));
    qless.put(200.0, dep).await.unwrap();
    call(qless, 200.0, "depends", &["dep", "on", "i2"]).await;
    call(qless, 200.0, "depends", &["dep", "off", "i"]).await;
    call(qless, 200.0, "tag", &["add", "i", "t2"]).await;
    call(qless, 200.0, "tag", &["get", "t2"]).await;
    call(qless, 200.0, "tag", &["top"]).await;
    call(qless, 200.0, "tag", &["remove", "i", "t2"]).await;
    call(qless, 200.0, "priority", &["i", "3"]).await;
    call(qless, 200.0, "log", &["i", "a note", r#"{"k":1}"#]).await;
    call(qless, 200.0, "pause", &["qi"]).await;
    call(qless, 200.0, "unpause", &["qi"]).await;
    call(qless, 200.0, "queue.forget", &["qb"]).await;

    // The gateway's ways in: pop.multi, batch, pop.after.
    call(qless, 201.0, "pop.multi", &["w5", "1", "qi", "1"]).await;
    call(
        qless,
        201.0,
        "batch",
        &["put", "6", "client", "qb", "bb", "K", "{}", "0"],
    )
    .await;
    call(
        qless,
        202.0,
        "pop.after",
        &["1", "complete", "4", "i", "w5", "qi", "{}"],
    )
    .await;

    // Readers (some write: promotion, pruning).
    for (command, args) in [
        ("get", &["i"][..]),
        ("get.ext", &["i"][..]),
        ("multiget", &["i", "i2"][..]),
        ("peek", &["qb", "1"][..]),
        ("length", &["qb"][..]),
        ("jobs", &["complete"][..]),
        ("jobs", &["running", "qb"][..]),
        ("jobs.waiting", &["qb"][..]),
        ("queues", &[][..]),
        ("queues.oldest", &[][..]),
        ("failed", &[][..]),
        ("stats", &["qa", "0"][..]),
        ("track", &[][..]),
        ("workers", &[][..]),
        ("recur.get", &["r2"][..]),
    ] {
        call(qless, 210.0, command, args).await;
    }
    call(qless, 210.0, "worker.deregister", &["w3"]).await;

    // The gateway's upkeep: the sweeper's lease, the move of old keys.
    let ttl = Duration::from_secs(5);
    assert!(qless.hold_lease("sweeper", "me", ttl).await.unwrap());
    qless.release_lease("sweeper", "me").await.unwrap();
    assert!(qless.hold_lease("sweeper", "me", ttl).await.unwrap());
    qless.migrate(210.0, true).await.unwrap()
}

#[tokio::test]
async fn a_full_lifecycle_on_the_plain_prefix_writes_only_what_the_spec_names_there() {
    let (redis, qless) = start().await;
    // Every key written is announced on its keyspace channel, so keys written and
    // deleted again within the lifecycle are seen too, not only those left at the end.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KA")
        .query(&mut raw(&redis))
        .unwrap();
    let mut listener = Listener::start(&redis, "*", "~end-of-test").await;
    let left_under_ql = lifecycle(&qless).await;
    let heard = listener.drain().await;
    let mut keys: BTreeSet<String> = redis::cmd("KEYS").arg("*").query(&mut raw(&redis)).unwrap();
    let mut channels = BTreeMap::<String, Vec<String>>::new();
    for (channel, payload) in heard {
        match channel.strip_prefix("__keyspace@0__:") {
            Some(key) => {
                keys.insert(key.to_owned());
            }
            None => channels.entry(channel).or_default().push(payload),
        }
    }

    let mut strays = Vec::new();
    let mut spec_keys = BTreeSet::new();
    let mut own_keys = BTreeSet::new();
    for key in &keys {
        if let Some(own) = key.strip_prefix("qlessd:") {
            // The kind of key: up to the first name in it.
            own_keys.insert(own.split_inclusive(':').next().unwrap_or(own).to_owned());
        } else if let Some(kind) = spec_key(key) {
            spec_keys.insert(kind);
        } else {
            strays.push(format!("key {key}"));
        }
    }
    let mut spec_channels = BTreeSet::new();
    let mut own_channels = BTreeSet::new();
    for channel in channels.keys() {
        if channel.starts_with("qlessd:") {
            own_channels.insert(channel.as_str());
        } else if let Some(kind) = spec_channel(channel) {
            spec_channels.insert(kind);
        } else {
            strays.push(format!("channel {channel}"));
        }
    }
    for payload in channels.get("ql:log").into_iter().flatten() {
        let event: serde_json::Value = serde_json::from_str(payload).unwrap();
        if !LOG_EVENTS.contains(&event["event"].as_str().unwrap_or_default()) {
            strays.push(format!("ql:log event {payload}"));
        }
    }
    assert!(
        strays.is_empty(),
        "written on the plain prefix or outside `ql:`/`qlessd:` without the spec naming it: \
         {strays:#?}"
    );
    assert_eq!(
        left_under_ql, 0,
        "keys of qlessd's own found under ql: at the end"
    );

    // The lifecycle reached every kind of key and channel the spec has, and qlessd's
    // own are all under `qlessd:` (so the test cannot pass by writing little).
    let every_spec_key = BTreeSet::from([
        "ql:config",
        "ql:j:<J>",
        "ql:j:<J>-history",
        "ql:j:<J>-dependencies",
        "ql:j:<J>-dependents",
        "ql:q:<Q>-work",
        "ql:q:<Q>-locks",
        "ql:q:<Q>-scheduled",
        "ql:q:<Q>-depends",
        "ql:q:<Q>-recur",
        "ql:queues",
        "ql:paused_queues",
        "ql:workers",
        "ql:w:<W>:jobs",
        "ql:tracked",
        "ql:completed",
        "ql:failures",
        "ql:f:<group>",
        "ql:t:<tag>",
        "ql:tags",
        "ql:s:wait:<bin>:<Q>",
        "ql:s:run:<bin>:<Q>",
        "ql:s:stats:<bin>:<Q>",
        "ql:r:<J>",
    ]);
    assert_eq!(spec_keys, every_spec_key);
    let every_spec_channel = BTreeSet::from([
        "ql:log",
        "ql:w:<W>",
        "ql:track",
        "ql:untrack",
        "ql:put",
        "ql:popped",
        "ql:completed",
        "ql:failed",
        "ql:stalled",
        "ql:canceled",
    ]);
    assert_eq!(spec_channels, every_spec_channel);
    let own: Vec<&str> = own_keys.iter().map(String::as_str).collect();
    assert_eq!(
        own,
        [
            "cron",
            "cron:",
            "due",
            "idem:",
            "migrated",
            "q:",
            "rate:",
            "sweeper",
            "th:",
            "throttles"
        ]
    );
    assert_eq!(
        own_channels,
        BTreeSet::from(["qlessd:available", "qlessd:log"])
    );
    let unthrottled = &channels["qlessd:log"];
    assert!(
        unthrottled
            .iter()
            .all(|p| p.contains(r#""event":"unthrottled""#)),
        "{unthrottled:?}"
    );
}

/// Runs each command (its words) on `redis` as it is, as an older qlessd or a stock
/// client would have.
fn seed(redis: &RedisServer, commands: &[&[&str]]) {
    let mut conn = raw(redis);
    for words in commands {
        let mut command = redis::cmd(words[0]);
        for word in &words[1..] {
            command.arg(*word);
        }
        let _: Value = command
            .query(&mut conn)
            .unwrap_or_else(|err| panic!("{words:?}: {err}"));
    }
}

fn keys(redis: &RedisServer) -> BTreeSet<String> {
    redis::cmd("KEYS").arg("*").query(&mut raw(redis)).unwrap()
}

fn zset(redis: &RedisServer, key: &str) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut raw(redis))
        .unwrap()
}

fn owned(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|item| item.to_string()).collect()
}

#[tokio::test]
async fn the_move_takes_every_old_key_out_of_ql_and_merges_what_the_new_names_hold() {
    let (redis, qless) = start().await;
    seed(
        &redis,
        &[
            // The due index, partly rebuilt under the new name already.
            &["ZADD", "ql:due", "50", "q1", "30", "q2"],
            &["ZADD", "qlessd:due", "40", "q2", "70", "q3"],
            &["SET", "ql:sweeper", "old-gateway", "PX", "60000"],
            // Idempotency keys, expiring; one written again since under the new name.
            &["HSET", "ql:idem:k", "jid", "j1", "until", "1000"],
            &["EXPIRE", "ql:idem:k", "1060"],
            &["HSET", "ql:idem:both", "jid", "old", "until", "1000"],
            &["HSET", "qlessd:idem:both", "jid", "new", "until", "1000"],
            // A cron template's ticks.
            &["HSET", "ql:r:r2", "cron", "* * * * *", "timezone", "UTC"],
            &["ZADD", "ql:cron", "60", "r2"],
            &["ZADD", "ql:cron:r2", "60", "60", "120", "120"],
            // A throttle with limits, a holder and a waiting job; and the holder of a
            // throttle without limits, which no index names.
            &["SADD", "ql:throttles", "th1"],
            &[
                "HSET",
                "ql:th:th1",
                "maximum",
                "1",
                "rate-jobs",
                "0",
                "rate-seconds",
                "0",
            ],
            &["ZADD", "ql:th:th1-locks", "1", "d"],
            &["ZADD", "ql:th:th1-waiting", "3", "e"],
            &[
                "HSET",
                "ql:j:e",
                "queue",
                "qt",
                "state",
                "waiting",
                "throttled",
                "th1",
            ],
            &["ZADD", "ql:q:qt-throttled", "3", "e"],
            &["ZADD", "ql:th:free-locks", "1", "x"],
            // A namespace's key, which is not the plain prefix's.
            &["ZADD", "ql:{ns}:due", "5", "q9"],
        ],
    );
    assert_eq!(qless.migrate(10.0, true).await.unwrap(), 12);
    assert_eq!(
        keys(&redis),
        owned(&[
            "ql:j:e",
            "ql:r:r2",
            "ql:{ns}:due",
            "qlessd:cron",
            "qlessd:cron:r2",
            "qlessd:due",
            "qlessd:idem:both",
            "qlessd:idem:k",
            "qlessd:migrated",
            "qlessd:q:qt-throttled",
            "qlessd:th:free-locks",
            "qlessd:th:th1",
            "qlessd:th:th1-locks",
            "qlessd:th:th1-waiting",
            "qlessd:throttles",
        ])
    );
    // Each queue keeps its earliest due time.
    let due = |q: &str, at: f64| (q.to_owned(), at);
    assert_eq!(
        zset(&redis, "qlessd:due"),
        [due("q2", 30.0), due("q1", 50.0), due("q3", 70.0)]
    );
    assert_eq!(
        zset(&redis, "qlessd:cron:r2"),
        [due("60", 60.0), due("120", 120.0)]
    );
    let mut conn = raw(&redis);
    let ttl: i64 = redis::cmd("TTL")
        .arg("qlessd:idem:k")
        .query(&mut conn)
        .unwrap();
    assert!(
        (1000..=1060).contains(&ttl),
        "the key keeps its expiry: {ttl}"
    );
    let both: String = redis::cmd("HGET")
        .arg("qlessd:idem:both")
        .arg("jid")
        .query(&mut conn)
        .unwrap();
    assert_eq!(both, "new", "what was written under the new name wins");
    // The moved throttle is the one pop and complete use.
    let throttle = qless.throttle_get(10.0, "th1").await.unwrap().unwrap();
    assert_eq!(
        (throttle.maximum, throttle.running, throttle.waiting),
        (Some(1), strs(&["d"]), strs(&["e"]))
    );

    // Idempotent: a second run finds nothing and changes nothing.
    let before = super::malformed::snapshot(&redis);
    assert_eq!(qless.migrate(11.0, true).await.unwrap(), 0);
    assert_eq!(super::malformed::snapshot(&redis), before);
}

#[tokio::test]
async fn a_due_time_filed_under_its_old_name_is_swept_once_moved() {
    let (redis, qless) = start().await;
    qless
        .put(
            0.0,
            qlessd::core::PutArgs {
                delay: 10.0,
                ..job("qs", "c")
            },
        )
        .await
        .unwrap();
    // As an older qlessd filed it.
    seed(&redis, &[&["RENAME", "qlessd:due", "ql:due"]]);
    let sweep = |now| qless.sweep(now, 1000, 0, 0);
    assert_eq!(sweep(20.0).await.unwrap().promoted, 0, "not in the index");
    // The indexed part alone (all the sweeper looks at once a full pass is done) moves it.
    assert_eq!(qless.migrate(20.0, false).await.unwrap(), 1);
    assert_eq!(sweep(20.0).await.unwrap().promoted, 1);
    assert!(!keys(&redis).contains("ql:due"));
}

#[tokio::test]
async fn after_a_full_pass_only_the_indexed_families_are_looked_for() {
    let (redis, qless) = start().await;
    assert_eq!(qless.migrate(1.0, true).await.unwrap(), 0);
    assert!(
        keys(&redis).contains("qlessd:migrated"),
        "the pass is recorded"
    );
    seed(
        &redis,
        &[
            &["ZADD", "ql:due", "5", "q"],
            &["HSET", "ql:idem:late", "jid", "j", "until", "100"],
        ],
    );
    assert_eq!(qless.migrate(2.0, true).await.unwrap(), 1);
    assert_eq!(
        keys(&redis),
        owned(&["ql:idem:late", "qlessd:due", "qlessd:migrated"])
    );
}

#[tokio::test]
async fn an_idempotency_key_under_its_old_name_answers_until_it_is_stale() {
    let (redis, qless) = start().await;
    // Written by a gateway of the older version, still serving during an upgrade.
    seed(
        &redis,
        &[&["HSET", "ql:idem:k", "jid", "first", "until", "100"]],
    );
    let idem = || Idempotency {
        key: "k".into(),
        ttl: 50.0,
    };
    let repeated = qless
        .put_idempotent(10.0, job("q", "second"), false, idem())
        .await
        .unwrap();
    assert_eq!((repeated.jid.as_str(), repeated.created), ("first", false));
    assert!(qless.get(10.0, "second").await.unwrap().is_none());
    let stale = qless
        .put_idempotent(150.0, job("q", "second"), false, idem())
        .await
        .unwrap();
    assert_eq!((stale.jid.as_str(), stale.created), ("second", true));
    let now: String = redis::cmd("HGET")
        .arg("qlessd:idem:k")
        .arg("jid")
        .query(&mut raw(&redis))
        .unwrap();
    assert_eq!(now, "second");
}

#[tokio::test]
async fn in_a_namespace_there_is_nothing_to_move() {
    let redis = RedisServer::start();
    let qless = connect(&redis, Some("ns")).await;
    seed(&redis, &[&["ZADD", "ql:due", "5", "q"]]);
    assert_eq!(qless.migrate(1.0, true).await.unwrap(), 0);
    assert_eq!(keys(&redis), owned(&["ql:due"]));
}
