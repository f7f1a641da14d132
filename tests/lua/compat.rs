//! Compatibility with qless clients sharing the Redis: the exact text of script error
//! replies, `timeout` and the worker's job set, the `time` field's format, set-backed
//! lists in a stable order, and jids the key layout reserves.

use qlessd::core::{Error, Qless, ScriptCode};
use redis::Value;

use super::jobs::{complete, job, pop, put, raw, raw_job, start, strs};
use super::malformed::{seed, snapshot};
use crate::support::RedisServer;

/// The error reply of a raw `EVALSHA` (no gateway in between), as its `code detail`
/// text.
fn raw_errors(redis: &RedisServer, qless: &Qless, argv: &[&str]) -> Vec<String> {
    let mut conn = raw(redis);
    let result = redis::cmd("EVALSHA")
        .arg(qless.script().sha())
        .arg(0)
        .arg(argv)
        .query::<Value>(&mut conn);
    let text = |code: &str, detail: Option<&str>| format!("{code} {}", detail.unwrap_or(""));
    match result {
        Err(err) => vec![text(err.code().unwrap_or("?"), err.detail())],
        Ok(other) => panic!("expected an error, got {other:?}"),
    }
}

/// What a qless client extracts from an error text: it searches for
/// `user_script:\d+:\s*(\w+)\(\): (.*)`, the shape Redis 7 gives the original's
/// `error()` calls, and treats anything without it as a Redis error.
fn client_match(text: &str) -> Option<(String, String)> {
    let start = text.find("user_script:")?;
    let rest = &text[start + "user_script:".len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(':')?.trim_start();
    let name = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let message = rest[name..].strip_prefix("(): ")?;
    Some((rest[..name].to_owned(), message.to_owned()))
}

#[tokio::test]
async fn script_errors_carry_the_marker_qless_clients_look_for() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let cases: &[(&[&str], &str)] = &[
        (
            &["complete", "1", "a", "w", "q", "{}"],
            "QL_STATE user_script:1: Complete(): Job a is not currently running: waiting",
        ),
        (
            &["heartbeat", "1", "gone", "w"],
            "QL_NOTFOUND user_script:1: Heartbeat(): Job gone does not exist",
        ),
        // The Ruby client heartbeats a job that is not running with an empty worker,
        // and matches the state in the answer.
        (
            &["heartbeat", "1", "a", ""],
            "QL_STATE user_script:1: Heartbeat(): Job a not currently running: waiting",
        ),
        (
            &["put", "1", "w", "q", "j", "K", "{}", "soon"],
            "QL_ARG user_script:1: Put(): Arg \"delay\" not a number: soon",
        ),
        (
            &["nope", "1"],
            "QL_COMMAND user_script:1: Qless(): Unknown command nope",
        ),
        (
            &["get", "yesterday", "a"],
            "QL_ARG user_script:1: Qless(): Arg \"now\" missing or not a number: nil",
        ),
    ];
    for (argv, expected) in cases {
        assert_eq!(raw_errors(&redis, &qless, argv), [*expected], "{argv:?}");
        let (command, message) = client_match(expected).unwrap();
        let (_, wanted) = expected.split_once("): ").unwrap();
        assert!(expected.contains(&format!(" {command}(): ")), "{expected}");
        assert_eq!(message, wanted);
    }
}

#[tokio::test]
async fn errors_inside_a_batch_carry_the_marker_too() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let args = strs(&[
        "get", "1", "a", "complete", "4", "a", "w", "q", "{}", "fail", "4", "a", "w", "g", "m",
    ]);
    let Value::Array(replies) = qless.call("batch", 1.0, args).await.unwrap() else {
        panic!("batch answers an array");
    };
    let errors: Vec<String> = replies
        .iter()
        .filter_map(|reply| match reply {
            Value::ServerError(err) => Some(format!("{} {}", err.code(), err.details()?)),
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        [
            "QL_STATE user_script:1: Complete(): Job a is not currently running: waiting",
            "QL_STATE user_script:1: Fail(): Job anot currently running: waiting",
        ]
    );
    for text in &errors {
        let (command, _) = client_match(text).expect("a client sees a script error");
        assert!(["Complete", "Fail"].contains(&command.as_str()));
    }
}

#[tokio::test]
async fn the_gateway_reads_the_code_and_a_message_without_the_marker() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    // alone, and grouped with a call that succeeds
    let alone = qless
        .complete(1.0, super::jobs::finish("a", "w", "q"))
        .await;
    let grouped = qless
        .call_many(
            1.0,
            &[
                ("get", strs(&["a"])),
                ("complete", strs(&["a", "w", "q", "{}"])),
            ],
        )
        .await
        .unwrap()
        .pop()
        .unwrap();
    for err in [alone.unwrap_err(), grouped.unwrap_err()] {
        let Error::Script { code, message } = err else {
            panic!("a script error: {err:?}")
        };
        assert_eq!(code, ScriptCode::State);
        assert_eq!(
            message,
            "Complete(): Job a is not currently running: waiting"
        );
    }
}

#[tokio::test]
async fn timeout_leaves_the_job_in_its_workers_job_set() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["a"]);
    qless.timeout(2.0, &strs(&["a"])).await.unwrap();
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg("ql:w:w:jobs")
        .arg("a")
        .query(&mut raw(&redis))
        .unwrap();
    assert_eq!(score, Some(61.0), "the set keeps the job at its old expiry");
    // `workers` counts it as held until that expiry, then as stalled.
    let w = &qless.workers(3.0).await.unwrap()[0];
    assert_eq!((w.name.as_str(), w.running, w.stalled), ("w", 1, 0));
    assert_eq!(qless.worker(3.0, "w").await.unwrap().jids, ["a"]);
    let w = &qless.workers(62.0).await.unwrap()[0];
    assert_eq!((w.running, w.stalled), (0, 1));
    // the job itself is stalled at the front of its queue, and pops again
    assert_eq!(super::jobs::state(&qless, "a").await, "stalled");
    assert_eq!(pop(&qless, 63.0, "q", "w2", 1).await, ["a"]);
}

fn time_field(redis: &RedisServer, jid: &str) -> String {
    redis::cmd("HGET")
        .arg(format!("ql:j:{jid}"))
        .arg("time")
        .query(&mut raw(redis))
        .unwrap()
}

#[tokio::test]
async fn the_time_field_holds_now_with_twenty_decimals() {
    let (redis, qless) = start().await;
    put(&qless, 1.5, "q", "a").await;
    assert_eq!(time_field(&redis, "a"), "1.50000000000000000000");
    pop(&qless, 0.1, "q", "w", 1).await;
    // %.20f prints the double's exact expansion, as Rust's {:.20} does
    assert_eq!(time_field(&redis, "a"), format!("{:.20}", 0.1f64));
    assert_eq!(time_field(&redis, "a"), "0.10000000000000000555");
    complete(&qless, 1700000000.25, "a", "w", "q").await;
    assert_eq!(time_field(&redis, "a"), "1700000000.25000000000000000000");
    // complete with next, and every call of a batch (which share one `now`)
    put(&qless, 2.0, "q", "b").await;
    put(&qless, 2.0, "q", "c").await;
    pop(&qless, 3.0, "q", "w", 2).await;
    let mut next = super::jobs::finish("b", "w", "q");
    next.next = Some("q2".into());
    qless.complete(7.0, next).await.unwrap();
    assert_eq!(time_field(&redis, "b"), "7.00000000000000000000");
    let replies = qless
        .call_many(
            8.0,
            &[
                ("put", strs(&["w", "q", "d", "K", "{}", "0"])),
                ("complete", strs(&["c", "w", "q", "{}"])),
            ],
        )
        .await
        .unwrap();
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(time_field(&redis, "c"), "8.00000000000000000000");
    assert_eq!(time_field(&redis, "d"), "8.00000000000000000000");
    // the wait statistic still reads the stored time back exactly
    put(&qless, 10.5, "q3", "e").await;
    pop(&qless, 12.0, "q3", "w", 1).await;
    let stats = qless.stats(12.0, "q3", 12.0).await.unwrap();
    let stats = serde_json::to_value(stats).unwrap();
    assert_eq!(stats["wait"]["mean"], serde_json::json!(1.5));
}

#[tokio::test]
async fn set_backed_lists_come_back_sorted() {
    let (_redis, qless) = start().await;
    let names = ["m", "c", "x", "a", "q", "b", "z", "k", "e", "d"];
    for name in names {
        put(&qless, 0.0, "q", name).await;
    }
    let mut waiting = job("q", "late");
    waiting.depends = Some(strs(&names));
    qless.put(0.0, waiting).await.unwrap();
    for name in ["j3", "j1", "j2", "j9", "j5"] {
        let mut dependent = job("q", name);
        dependent.depends = Some(strs(&["m"]));
        qless.put(0.0, dependent).await.unwrap();
    }
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    let late = raw_job(&qless, "late").await;
    assert_eq!(late["dependencies"], serde_json::json!(sorted));
    let m = raw_job(&qless, "m").await;
    assert_eq!(
        m["dependents"],
        serde_json::json!(["j1", "j2", "j3", "j5", "j9", "late"])
    );
    // the same in pop's own job objects
    let popped = qless.pop(1.0, "q", "w", 10).await.unwrap();
    let m = popped.iter().find(|job| job.jid == "m").unwrap();
    assert_eq!(m.dependents, ["j1", "j2", "j3", "j5", "j9", "late"]);
    // failure groups, and the dependent a refused cancel names
    for (jid, group) in [("z", "g3"), ("k", "g1"), ("x", "g2")] {
        qless
            .fail(2.0, jid, "w", group, "boom", None)
            .await
            .unwrap();
    }
    let reply = qless.call("failed", 3.0, &[]).await.unwrap();
    assert_eq!(
        redis::from_redis_value::<String>(reply).unwrap(),
        r#"{"g1":1,"g2":1,"g3":1}"#
    );
    let err = qless.cancel(3.0, &strs(&["m"])).await.unwrap_err();
    assert!(
        err.to_string().contains("m is a dependency of j1 but"),
        "{err}"
    );
}

#[tokio::test]
async fn a_job_named_like_another_jobs_keys_is_refused_before_any_write() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    // job `e` depends on `a`: `ql:j:e-dependencies` and `ql:j:a-dependents` exist
    let before = snapshot(&redis);
    let reserved = ["a-history", "e-dependencies", "a-dependents", "new-history"];
    for jid in reserved {
        let mut calls: Vec<(&'static str, Vec<String>)> = vec![
            ("put", strs(&["w", "q", jid, "K", "{}", "0"])),
            ("put.ifabsent", strs(&["w", "q", jid, "K", "{}", "0"])),
            ("requeue", strs(&["w", "q", jid, "K", "{}", "0"])),
            ("get", strs(&[jid])),
            ("multiget", strs(&["a", jid])),
            ("complete", strs(&[jid, "w", "q", "{}"])),
            ("heartbeat", strs(&[jid, "w"])),
            ("fail", strs(&[jid, "w", "g", "m"])),
            ("retry", strs(&[jid, "q", "w"])),
            ("cancel", strs(&[jid])),
            ("timeout", strs(&[jid])),
            ("priority", strs(&[jid, "3"])),
            ("log", strs(&[jid, "hello"])),
            ("tag", strs(&["add", jid, "t"])),
            ("track", strs(&["track", jid])),
            ("depends", strs(&["e", "on", jid])),
        ];
        let depends = format!("[\"{jid}\"]");
        calls.push((
            "put",
            strs(&["w", "q", "fresh", "K", "{}", "0", "depends", &depends]),
        ));
        calls.push((
            "complete",
            strs(&["b", "w", "q", "{}", "next", "q2", "depends", &depends]),
        ));
        for (command, args) in calls {
            let result = qless.call(command, 100.0, args.clone()).await;
            let Err(Error::Script { code, message }) = result else {
                panic!("{command} {args:?}: {result:?}")
            };
            assert_eq!(code, ScriptCode::Argument, "{command} {args:?}: {message}");
            assert!(
                message.contains(&format!("Jid {jid} is reserved")),
                "{command} {args:?}: {message}"
            );
        }
    }
    assert_eq!(snapshot(&redis), before, "a refused call wrote something");
    // the jobs whose keys were at stake read and work as before
    assert_eq!(
        raw_job(&qless, "e").await["dependencies"],
        serde_json::json!(["a"])
    );
    assert_eq!(pop(&qless, 100.0, "q", "w2", 1).await, ["a"]);
}

#[tokio::test]
async fn ordinary_jids_with_hyphens_are_accepted() {
    let (_redis, qless) = start().await;
    for jid in [
        "job-1",
        "a-history-1",
        "history",
        "dependents",
        "x-histories",
        "b-Dependencies",
        "c-dependency",
        "-",
    ] {
        put(&qless, 0.0, "q", jid).await;
        assert_eq!(raw_job(&qless, jid).await["jid"], serde_json::json!(jid));
    }
}

/// The `expires` field, the `-locks` score and the worker's score of a job in `q`.
fn expiry(redis: &RedisServer, jid: &str) -> (String, f64, f64) {
    let mut conn = raw(redis);
    let text: String = redis::cmd("HGET")
        .arg(format!("ql:j:{jid}"))
        .arg("expires")
        .query(&mut conn)
        .unwrap();
    let lock: f64 = redis::cmd("ZSCORE")
        .arg("ql:q:q-locks")
        .arg(jid)
        .query(&mut conn)
        .unwrap();
    let held: f64 = redis::cmd("ZSCORE")
        .arg("ql:w:w:jobs")
        .arg(jid)
        .query(&mut conn)
        .unwrap();
    (text, lock, held)
}

#[tokio::test]
async fn a_lock_expiry_is_written_as_now_plus_the_heartbeat() {
    let (redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    // Whole seconds of heartbeat after a plain decimal `now`: its integer part plus
    // now's own fraction, the text the job object shows.
    let popped = qless
        .pop(1_700_000_000.123, "q", "w", 1)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(popped.expires, 1_700_000_060.123);
    let expected = (
        "1700000060.123".to_owned(),
        1_700_000_060.123,
        1_700_000_060.123,
    );
    assert_eq!(expiry(&redis, "a"), expected);
    assert_eq!(
        qless
            .heartbeat(1_700_000_010.5, "a", "w", None)
            .await
            .unwrap(),
        1_700_000_070
    );
    let expected = ("1700000070.5".to_owned(), 1_700_000_070.5, 1_700_000_070.5);
    assert_eq!(expiry(&redis, "a"), expected);
    assert_eq!(raw_job(&qless, "a").await["expires"], 1_700_000_070.5);
    // A fractional heartbeat, or more digits than %.14g shows: the number itself.
    qless.config_set(0.0, "heartbeat", "0.25").await.unwrap();
    assert_eq!(qless.heartbeat(20.5, "a", "w", None).await.unwrap(), 20);
    assert_eq!(expiry(&redis, "a"), ("20.75".to_owned(), 20.75, 20.75));
    qless.config_set(0.0, "heartbeat", "60").await.unwrap();
    let now = 12_345_678_901_234.5;
    qless.heartbeat(now, "a", "w", None).await.unwrap();
    let (text, lock, held) = expiry(&redis, "a");
    assert_eq!(text, "12345678901294.5");
    assert_eq!((lock, held), (now + 60.0, now + 60.0));
}
