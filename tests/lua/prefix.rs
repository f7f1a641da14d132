//! The plain prefix is the protocol's (lesson 24 of the architecture guide): on the
//! plain `ql:` prefix, which stock qless clients read and watch, a broad job lifecycle
//! writes only the keys and publishes only on the channels the spec names (§3 and
//! §4.1), and every key and channel of qlessd's own is under `qlessd:`, as
//! `lua/README.md` documents it (its key table and its channels): a key of qlessd's
//! under `ql:`, or one under `qlessd:` the README does not list, fails. A Redis that
//! holds qlessd's keys under their old `ql:` names gets them moved (`migrate`) without
//! losing a due time, an idempotency key, a cron tick or a throttle.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use qlessd::core::batches::{CallbackKind, NewBatch, NewTask, NewWorkflow};
use qlessd::core::push::{Attempted, Outcome, PushConfig, PushRate, Secret};
use qlessd::core::{Idempotency, PartitionLimits, PutArgs, Qless};
use qlessd::model::ParentFailurePolicy;
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
/// transition of the spec's state machine and every extension of qlessd's (the test
/// wants every key the README documents written, so a new extension's keys, once
/// documented, fail it until the extension is used here). Returns how many keys the
/// move of old keys found under `ql:` at the end (none is right).
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
            PutArgs {
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

    extensions(qless).await;

    // The gateway's upkeep: the sweeper's lease, the move of old keys.
    let ttl = Duration::from_secs(5);
    assert!(qless.hold_lease("sweeper", "me", ttl).await.unwrap());
    qless.release_lease("sweeper", "me").await.unwrap();
    assert!(qless.hold_lease("sweeper", "me", ttl).await.unwrap());
    qless.migrate(210.0, true).await.unwrap()
}

/// The lifecycle's part that uses qlessd's later extensions (batches, workflows, push
/// delivery, fair queues, deadlines, search, per-minute rates and the failures
/// summary), each far enough to write every key the README gives it.
async fn extensions(qless: &Qless) {
    // Batches: a parent with a callback and a child batch. In the child one job fails
    // for good, and one added later is canceled with the batch; the parent settles
    // when its own job completes, and fires its callback.
    let parent = NewBatch {
        bid: "bp".into(),
        description: "parent".into(),
        parent: None,
        jobs: vec![job("qbt", "bj1")],
        callbacks: vec![(CallbackKind::OnComplete, job("qcb", "bp-done"))],
    };
    qless.batch_open(300.0, &parent).await.unwrap();
    let child = NewBatch {
        bid: "bc".into(),
        description: "child".into(),
        parent: Some("bp".into()),
        jobs: vec![job("qbt", "bj2")],
        callbacks: vec![],
    };
    // (One after the other, so they are popped in this order.)
    qless.batch_open(300.1, &child).await.unwrap();
    qless
        .batch_add(300.2, "bc", &[job("qbt", "bj3")])
        .await
        .unwrap();
    pop_exactly(qless, 301.0, "qbt", "w6", &["bj1", "bj2"]).await;
    call(qless, 301.0, "fail", &["bj2", "w6", "g2", "it broke"]).await;
    assert_eq!(qless.batch_cancel(301.0, "bc").await.unwrap(), Some(1));
    call(qless, 302.0, "complete", &["bj1", "w6", "qbt", "{}"]).await;
    let settled = qless.batch_get(302.0, "bp", 0, 10).await.unwrap().unwrap();
    assert_eq!(settled.state, "settled");

    // A workflow whose first task fails: the task after it is canceled by its policy.
    let task = |name: &str, after: &[&str]| {
        let depends: Vec<String> = after.iter().map(|p| format!("wf-{p}")).collect();
        NewTask {
            name: name.into(),
            put: PutArgs {
                depends: (!depends.is_empty()).then_some(depends),
                ..job("qwf", &format!("wf-{name}"))
            },
            after: strs(after),
            on_parent_failure: ParentFailurePolicy::Cancel,
        }
    };
    let workflow = NewWorkflow {
        wid: "wf".into(),
        name: "thumbnails".into(),
        tasks: vec![task("fetch", &[]), task("resize", &["fetch"])],
    };
    qless.workflow_open(303.0, &workflow).await.unwrap();
    pop_exactly(qless, 304.0, "qwf", "w6", &["wf-fetch"]).await;
    call(qless, 304.0, "fail", &["wf-fetch", "w6", "g3", "it broke"]).await;
    qless.workflow_get(305.0, "wf").await.unwrap().unwrap();
    qless.workflow_cancel(305.0, "wf").await.unwrap();

    // Push delivery, with a concurrency and a rate: a delivery leased, ended and
    // recorded; the secret rotated; the queue forgotten.
    let config = PushConfig {
        url: "https://example.com/hook".into(),
        timeout: 30,
        concurrency: 1,
        rate: Some(PushRate {
            jobs: 5,
            seconds: 60.0,
        }),
        headers: BTreeMap::new(),
    };
    let secret = |text: &str| Secret::new(text.to_owned());
    assert!(
        qless
            .push_set(306.0, "qp", &config, &secret("whsec_a"))
            .await
            .unwrap()
    );
    for jid in ["pj1", "pj2"] {
        qless.put(306.0, job("qp", jid)).await.unwrap();
    }
    let leased = qless.push_pop(307.0, "qp", "push-1", 10).await.unwrap();
    assert_eq!(leased.len(), 1, "one slot");
    let answered = Attempted {
        status: Some(200),
        ms: 5,
        attempt: 1,
    };
    let done = Outcome::Complete { result: None };
    qless
        .push_finish(308.0, "qp", &leased[0].job.jid, "push-1", answered, done)
        .await
        .unwrap();
    assert!(
        qless
            .push_rotate(308.0, "qp", &secret("whsec_b"), 100)
            .await
            .unwrap()
    );
    qless.push_get(308.0, "qp").await.unwrap().unwrap();
    qless.push_list(308.0).await.unwrap();
    assert!(qless.push_forget(309.0, "qp").await.unwrap());

    // A fair queue: two jobs of one partition and one of none, with limits per
    // partition; the partition's second job waits for its turn at the limit.
    let limits = PartitionLimits {
        concurrency: 1,
        rate_jobs: 1,
        rate_seconds: 60.0,
    };
    qless.partitions_set(310.0, "qf", limits).await.unwrap();
    for (now, jid, partition) in [
        (310.0, "pa1", Some("pa")),
        (310.1, "pu", None),
        (310.2, "pa2", Some("pa")),
    ] {
        let args = PutArgs {
            partition: partition.map(str::to_owned),
            ..job("qf", jid)
        };
        qless.put(now, args).await.unwrap();
    }
    let leased = call(qless, 311.0, "pop", &["qf", "w7", "3"]).await;
    assert_eq!(popped(leased), ["pa1", "pu"], "pa at its limits is parked");
    qless.partitions_get(311.0, "qf", 0, 10).await.unwrap();

    // Deadlines: a job never popped by its start_by expires; one that runs past its
    // max_run is timed out (the sweeper does both).
    qless
        .put(
            312.0,
            PutArgs {
                start_by: Some(320.0),
                ..job("qdl", "late")
            },
        )
        .await
        .unwrap();
    qless
        .put(
            312.0,
            PutArgs {
                max_run: Some(10.0),
                ..job("qmr", "capped")
            },
        )
        .await
        .unwrap();
    pop_exactly(qless, 313.0, "qmr", "w8", &["capped"]).await;
    qless.sweep(330.0, 1000, 0, 0).await.unwrap();

    // Search, and a bulk action on what it finds; the dashboard's rates and failures.
    call(qless, 331.0, "search", &[r#"{"queue":"qf"}"#, "10", "100"]).await;
    call(
        qless,
        331.0,
        "search.act",
        &["retry", "", r#"{"group":"expired"}"#, "10", "2000", "0"],
    )
    .await;
    call(qless, 331.0, "rates", &["qa", "60"]).await;
    call(qless, 331.0, "failed.summary", &["3"]).await;
}

/// qlessd's own keys as the key table of `lua/README.md` documents them, without their
/// prefix (`OWN`) and with their placeholders (`th:<T>-locks`): each row's first cell
/// names them, a row of several keys sharing a name with their suffixes alone
/// (`` `OWN workflow:<W>-tasks` / `-jids` ``).
fn documented_own_keys(readme: &str) -> BTreeSet<String> {
    let mut documented = BTreeSet::new();
    for row in readme.lines().filter(|line| line.starts_with("| `OWN ")) {
        let first_cell = row.split(" | ").next().unwrap_or_default();
        let mut named = String::new();
        for span in first_cell.split('`').skip(1).step_by(2) {
            if let Some(key) = span.strip_prefix("OWN ") {
                named = key.to_owned();
                documented.insert(named.clone());
            } else if span.starts_with('-') {
                let (stem, _) = named.rsplit_once('-').expect("a suffix after a key");
                documented.insert(format!("{stem}{span}"));
            }
        }
    }
    documented
}

/// qlessd's own channels as the README's paragraph on channels names them (`OWN
/// available`), without the prefix.
fn documented_own_channels(readme: &str) -> BTreeSet<String> {
    let paragraph = readme
        .split("\n\n")
        .find(|paragraph| paragraph.starts_with("Channels:"))
        .expect("the README has its paragraph on channels");
    paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| span.strip_prefix("OWN "))
        .map(str::to_owned)
        .collect()
}

/// Whether `key` is an instance of the documented `pattern`, each `<placeholder>`
/// standing for a name without `:` (possibly empty: a fair queue's jobs of no
/// partition are those of partition `''`).
fn instance_of(pattern: &str, key: &str) -> bool {
    let Some((literal, rest)) = pattern.split_once('<') else {
        return pattern == key;
    };
    let Some(key) = key.strip_prefix(literal) else {
        return false;
    };
    let (_, after) = rest.split_once('>').expect("a placeholder is closed");
    let name_ends = key.find(':').unwrap_or(key.len());
    (0..=name_ends)
        .filter(|&end| key.is_char_boundary(end))
        .any(|end| instance_of(after, &key[end..]))
}

/// The documented key that `key` (without its prefix) is an instance of, or `None`.
/// Where several fit (`th:<T>` fits `th:a-locks` too), the one with the most fixed
/// text is meant.
fn documented_kind<'a>(documented: &'a BTreeSet<String>, key: &str) -> Option<&'a str> {
    let fixed = |pattern: &str| {
        pattern
            .split('<')
            .map(|part| part.split_once('>').map_or(part, |(_, text)| text).len())
            .sum::<usize>()
    };
    documented
        .iter()
        .filter(|pattern| instance_of(pattern, key))
        .max_by_key(|pattern| fixed(pattern))
        .map(String::as_str)
}

/// qlessd's own events on `OWN log` (lua/README.md, "Channels").
const OWN_LOG_EVENTS: &[&str] = &["unthrottled", "batch_fired", "expired", "timed_out"];

#[test]
fn the_readme_s_own_keys_are_read_as_written() {
    let readme = "| `OWN due` | zset | x |\n\
                  | `OWN th:<T>-locks` | zset | y |\n\
                  | `OWN workflow:<W>-tasks` / `-jids` | hash / hash | z |\n\
                  | `OWN q:<Q>-prun:<name>`, `OWN q:<Q>-prate:<name>` | zset | w |\n\
                  | `P config` | hash | `OWN not-a-key` |\n\
                  \n\
                  Channels: `P log`, qlessd adds `OWN available` and `OWN log`.\n";
    let documented = documented_own_keys(readme);
    assert_eq!(
        documented,
        owned(&[
            "due",
            "q:<Q>-prate:<name>",
            "q:<Q>-prun:<name>",
            "th:<T>-locks",
            "workflow:<W>-jids",
            "workflow:<W>-tasks",
        ])
    );
    assert_eq!(
        documented_own_channels(readme),
        owned(&["available", "log"])
    );
    let every = owned(&[
        "th:<T>",
        "th:<T>-locks",
        "q:<Q>-p:<name>",
        "rate:<minute>:<Q>",
    ]);
    let kind = |key| documented_kind(&every, key);
    assert_eq!(kind("th:th1"), Some("th:<T>"));
    assert_eq!(kind("th:th1-locks"), Some("th:<T>-locks"));
    assert_eq!(kind("q:qf-p:"), Some("q:<Q>-p:<name>"));
    assert_eq!(kind("rate:60:qa"), Some("rate:<minute>:<Q>"));
    assert_eq!(kind("rate:60"), None);
    assert_eq!(kind("th:"), Some("th:<T>"));
    assert_eq!(kind("due"), None);
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

    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/README.md"))
        .expect("lua/README.md");
    let documented_keys = documented_own_keys(&readme);
    let mut strays = Vec::new();
    let mut spec_keys = BTreeSet::new();
    let mut own_keys = BTreeSet::new();
    for key in &keys {
        if let Some(own) = key.strip_prefix("qlessd:") {
            match documented_kind(&documented_keys, own) {
                Some(kind) => {
                    own_keys.insert(kind.to_owned());
                }
                None => strays.push(format!("key {key}, not in lua/README.md's key table")),
            }
        } else if let Some(kind) = spec_key(key) {
            spec_keys.insert(kind);
        } else {
            strays.push(format!("key {key}"));
        }
    }
    let mut spec_channels = BTreeSet::new();
    let mut own_channels = BTreeSet::new();
    for channel in channels.keys() {
        if let Some(own) = channel.strip_prefix("qlessd:") {
            own_channels.insert(own.to_owned());
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
    for payload in channels.get("qlessd:log").into_iter().flatten() {
        let event: serde_json::Value = serde_json::from_str(payload).unwrap();
        if !OWN_LOG_EVENTS.contains(&event["event"].as_str().unwrap_or_default()) {
            strays.push(format!("qlessd:log event {payload}"));
        }
    }
    assert!(
        strays.is_empty(),
        "written on the plain prefix without the spec naming it, under `qlessd:` without \
         lua/README.md documenting it, or outside both: {strays:#?}"
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
    // Every key and channel of qlessd's own that the README documents was written
    // (so a documented key nothing writes any more fails too), and each of its events.
    assert_eq!(own_keys, documented_keys, "qlessd's own keys written");
    assert_eq!(
        own_channels,
        documented_own_channels(&readme),
        "qlessd's own channels"
    );
    let own_events: BTreeSet<&str> = channels["qlessd:log"]
        .iter()
        .map(|payload| {
            let event: serde_json::Value = serde_json::from_str(payload).unwrap();
            OWN_LOG_EVENTS
                .iter()
                .copied()
                .find(|known| event["event"] == *known)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(own_events, OWN_LOG_EVENTS.iter().copied().collect());
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
            PutArgs {
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
