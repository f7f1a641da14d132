//! Script semantics (malformed calls): every error path leaves the keyspace exactly as
//! it was, and the dispatcher checks its own arguments in the documented order.

use std::collections::BTreeMap;

use qlessd::core::{Qless, RecurArgs};

use super::jobs::{complete, config, job, pop, put, start, strs};
use crate::support::RedisServer;

/// Every key with its type and its `DUMP` serialization.
pub(super) fn snapshot(redis: &RedisServer) -> BTreeMap<String, (String, Vec<u8>)> {
    let mut conn = redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).unwrap();
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut conn).unwrap();
            (key, (kind, dump))
        })
        .collect()
}

/// A database with jobs in every state: `a` waiting, `b` running (worker `w`), `c`
/// failed, `d` scheduled, `e` depends (on `a`), `f` complete, template `r`.
pub(super) async fn seed(qless: &Qless) {
    config(qless, "heartbeat", "60").await;
    put(qless, 0.0, "q", "b").await;
    put(qless, 0.0, "q", "c").await;
    put(qless, 0.0, "q", "f").await;
    assert_eq!(pop(qless, 1.0, "q", "w", 3).await.len(), 3);
    qless.fail(2.0, "c", "w", "g", "m", None).await.unwrap();
    complete(qless, 2.0, "f", "w", "q").await;
    let mut a = job("q", "a");
    a.tags = Some(strs(&["x"]));
    a.priority = Some(2.0);
    qless.put(3.0, a).await.unwrap();
    let mut d = job("q", "d");
    d.delay = 1000.0;
    qless.put(3.0, d).await.unwrap();
    let mut e = job("q", "e");
    e.depends = Some(strs(&["a"]));
    qless.put(3.0, e).await.unwrap();
    qless
        .recur(
            3.0,
            RecurArgs {
                queue: "q".into(),
                jid: "r".into(),
                klass: "K".into(),
                data: "{}".into(),
                interval: 60.0,
                offset: 500.0,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    qless.track(3.0, "a").await.unwrap();
}

/// (command, arguments, a substring of the error). An empty substring accepts any
/// error (the spec leaves the text to cjson or to Redis).
const CASES: &[(&str, &[&str], &str)] = &[
    ("get", &[], "no jid provided"),
    // extensions: put.ifabsent validates exactly like put, even for an existing job
    ("put.ifabsent", &["w", "q", "j", "K", "{bad", "0"], ""),
    (
        "put.ifabsent",
        &["w", "q", "a", "K", "{}", "0", "priority", "x"],
        "not a number",
    ),
    (
        "put.ifabsent",
        &["w", "", "a", "K", "{}", "0"],
        "no queue name provided",
    ),
    ("jobs.waiting", &[], "no queue name provided"),
    ("jobs.waiting", &["q", "-1"], "must not be negative"),
    (
        "jobs.waiting",
        &["q", "0", "many"],
        "Arg \"count\" not a number: many",
    ),
    ("pop.multi", &[], ""),
    ("pop.multi", &["w", "1"], ""),
    ("pop.multi", &["w", "1", "q"], ""),
    ("pop.multi", &["w", "x", "q", "1"], ""),
    ("pop.multi", &["w", "1", "q", "0"], ""),
    ("pop.multi", &["", "1", "q", "1"], ""),
    ("sweep", &["0"], ""),
    ("sweep", &["lots"], ""),
    (
        "sweep",
        &["10", "-1"],
        "Arg \"scan\" must be a non-negative integer: -1",
    ),
    (
        "sweep",
        &["10", "1", "1.5"],
        "Arg \"cursor\" must be a non-negative integer: 1.5",
    ),
    // batch: the whole list is checked before any call runs
    ("batch", &[], "Batch(): At least one call is required"),
    ("batch", &["put"], "Arg \"argc\" of call 1"),
    (
        "batch",
        &["nope", "0"],
        "Batch(): Unknown command in call 1: nope",
    ),
    ("batch", &["batch", "0"], "Unknown command in call 1: batch"),
    ("batch", &["get", "-1"], "Arg \"argc\" of call 1"),
    ("batch", &["get", "1.5", "a"], "Arg \"argc\" of call 1"),
    // the second call claims more arguments than there are: the first must not run
    (
        "batch",
        &["put", "6", "w", "q", "new", "K", "{}", "0", "get", "2", "a"],
        "Arg \"argc\" of call 2 is not the number of arguments that follow: 2",
    ),
    (
        "batch",
        &["put", "6", "w", "q", "new", "K", "{}", "0", "nope", "0"],
        "Unknown command in call 2: nope",
    ),
    // put
    (
        "put",
        &["w", "", "j", "K", "{}", "0"],
        "Queue(): no queue name provided",
    ),
    ("put", &["w", "q"], "Put(): Arg \"jid\" missing"),
    ("put", &["w", "q", "j"], "Put(): Arg \"klass\" missing"),
    ("put", &["w", "q", "j", "K"], ""),
    ("put", &["w", "q", "j", "K", "{bad"], ""),
    (
        "put",
        &["w", "q", "j", "K", "{}"],
        "Put(): Arg \"delay\" not a number: nil",
    ),
    (
        "put",
        &["w", "q", "j", "K", "{}", "soon"],
        "Put(): Arg \"delay\" not a number: soon",
    ),
    (
        "put",
        &["w", "q", "j", "K", "{}", "0", "priority"],
        "Odd number of additional args",
    ),
    (
        "put",
        &["w", "q", "j", "K", "{}", "0", "retries", "x"],
        "Put(): Arg \"retries\" not a number: x",
    ),
    ("put", &["w", "q", "j", "K", "{}", "0", "tags", "[oops"], ""),
    (
        "put",
        &["w", "q", "j", "K", "{}", "0", "priority", "high"],
        "Put(): Arg \"priority\" not a number",
    ),
    (
        "put",
        &["w", "q", "j", "K", "{}", "0", "depends", "nope"],
        "",
    ),
    // a bad option on an existing job must not strip its tags first
    (
        "put",
        &[
            "w", "q2", "a", "K", "{}", "0", "tags", "[\"y\"]", "priority", "x",
        ],
        "Put(): Arg \"priority\" not a number",
    ),
    (
        "put",
        &[
            "w", "q2", "a", "K", "{}", "0", "depends", "[\"b\"]", "retries", "x",
        ],
        "Put(): Arg \"retries\" not a number: x",
    ),
    // requeue
    (
        "requeue",
        &["w", "q", "zzz", "K", "{}", "0"],
        "Requeue(): Job zzz does not exist",
    ),
    (
        "requeue",
        &["w", "q", "a", "K", "{}", "later"],
        "Put(): Arg \"delay\" not a number: later",
    ),
    // pop and peek
    ("pop", &[], "Queue(): no queue name provided"),
    ("pop", &["q"], "Pop(): Arg \"worker\" missing"),
    (
        "pop",
        &["q", "w"],
        "Pop(): Arg \"count\" missing or not a number: nil",
    ),
    (
        "pop",
        &["q", "w", "many"],
        "Pop(): Arg \"count\" missing or not a number: many",
    ),
    ("peek", &[], "Queue(): no queue name provided"),
    (
        "peek",
        &["q"],
        "Peek(): Arg \"count\" missing or not a number: nil",
    ),
    (
        "peek",
        &["q", "x"],
        "Peek(): Arg \"count\" missing or not a number: x",
    ),
    // heartbeat. An empty worker is a value, not a missing one: a job that is not
    // running says so (a qless client heartbeats such a job with an empty worker).
    ("heartbeat", &["b"], "Heatbeat(): Arg \"worker\" missing"),
    (
        "heartbeat",
        &["zzz", ""],
        "Heartbeat(): Job zzz does not exist",
    ),
    (
        "heartbeat",
        &["a", ""],
        "Heartbeat(): Job a not currently running: waiting",
    ),
    (
        "heartbeat",
        &["f", ""],
        "Heartbeat(): Job f not currently running: complete",
    ),
    (
        "heartbeat",
        &["b", ""],
        "Heartbeat(): Job b given out to another worker: w",
    ),
    ("heartbeat", &["b", "w", "{bad"], ""),
    (
        "heartbeat",
        &["zzz", "w"],
        "Heartbeat(): Job zzz does not exist",
    ),
    (
        "heartbeat",
        &["a", "w"],
        "Heartbeat(): Job a not currently running: waiting",
    ),
    (
        "heartbeat",
        &["b", "v"],
        "Heartbeat(): Job b given out to another worker: w",
    ),
    // complete
    ("complete", &["b"], "Complete(): Arg \"worker\" missing"),
    (
        "complete",
        &["zzz", "", "q", "{}"],
        "Complete(): Job zzz does not exist",
    ),
    (
        "complete",
        &["a", "", "q", "{}"],
        "Complete(): Job a is not currently running: waiting",
    ),
    (
        "complete",
        &["b", "", "q", "{}"],
        "Complete(): Job b has been handed out to another worker: w",
    ),
    ("complete", &["b", "w"], "Complete(): Arg \"queue\" missing"),
    ("complete", &["b", "w", "q"], ""),
    ("complete", &["b", "w", "q", "{bad"], ""),
    (
        "complete",
        &["b", "w", "q", "{}", "next", "q2", "delay", "x"],
        "",
    ),
    (
        "complete",
        &["b", "w", "q", "{}", "next", "q2", "depends", "[bad"],
        "",
    ),
    (
        "complete",
        &["b", "w", "q", "{}", "delay", "5"],
        "Complete(): \"delay\" cannot be used without a \"next\".",
    ),
    (
        "complete",
        &["b", "w", "q", "{}", "depends", "[\"a\"]"],
        "Complete(): \"depends\" cannot be used without a \"next\".",
    ),
    (
        "complete",
        &["zzz", "w", "q", "{}"],
        "Complete(): Job zzz does not exist",
    ),
    (
        "complete",
        &["a", "w", "q", "{}"],
        "Complete(): Job a is not currently running: waiting",
    ),
    (
        "complete",
        &["b", "v", "q", "{}"],
        "Complete(): Job b has been handed out to another worker: w",
    ),
    (
        "complete",
        &["b", "w", "q2", "{}"],
        "Complete(): Job b running in another queue: q",
    ),
    // fail
    ("fail", &["b"], "Fail(): Arg \"worker\" missing"),
    (
        "fail",
        &["zzz", "", "g", "m"],
        "Fail(): Job zzzdoes not exist",
    ),
    (
        "fail",
        &["d", "", "g", "m"],
        "Fail(): Job dnot currently running: scheduled",
    ),
    (
        "fail",
        &["b", "", "g", "m"],
        "Fail(): Job b running with another worker: w",
    ),
    ("fail", &["b", "w"], "Fail(): Arg \"group\" missing"),
    ("fail", &["b", "w", "g"], "Fail(): Arg \"message\" missing"),
    ("fail", &["b", "w", "g", "m", "{bad"], ""),
    ("fail", &["zzz", "w", "g", "m"], "does not exist"),
    ("fail", &["a", "w", "g", "m"], "waiting"),
    ("fail", &["c", "w", "g", "m"], "failed"),
    ("fail", &["d", "w", "g", "m"], "scheduled"),
    ("fail", &["e", "w", "g", "m"], "depends"),
    ("fail", &["f", "w", "g", "m"], "complete"),
    (
        "fail",
        &["b", "v", "g", "m"],
        "Fail(): Job b running with another worker: w",
    ),
    // retry
    ("retry", &["b"], "Retry(): Arg \"queue\" missing"),
    ("retry", &["b", "q"], "Retry(): Arg \"worker\" missing"),
    (
        "retry",
        &["e", "q", ""],
        "Retry(): Job e is not currently running: depends",
    ),
    (
        "retry",
        &["b", "q", ""],
        "Retry(): Job b has been given to another worker: w",
    ),
    (
        "retry",
        &["b", "q", "w", "x"],
        "Retry(): Arg \"delay\" not a number: x",
    ),
    (
        "retry",
        &["zzz", "q", "w"],
        "Retry(): Job zzz does not exist",
    ),
    (
        "retry",
        &["a", "q", "w"],
        "Retry(): Job a is not currently running: waiting",
    ),
    (
        "retry",
        &["b", "q", "v"],
        "Retry(): Job b has been given to another worker: w",
    ),
    // cancel, timeout, depends, priority, log
    (
        "cancel",
        &["a"],
        "Cancel(): a is a dependency of e but is not mentioned to be canceled",
    ),
    ("cancel", &["b", "a", "c"], "is a dependency"),
    ("timeout", &["zzz"], "Timeout(): Job zzz does not exist"),
    ("timeout", &["a"], "Timeout(): Job a not running"),
    ("depends", &["e"], "Depends(): Arg \"command\" missing"),
    (
        "depends",
        &["a", "on", "b"],
        "Depends(): Job a not in the depends state: waiting",
    ),
    (
        "depends",
        &["zzz", "on", "b"],
        "Depends(): Job zzz not in the depends state: false",
    ),
    (
        "depends",
        &["e", "sideways", "b"],
        "Depends(): Argument \"command\" must be \"on\" or \"off\"",
    ),
    (
        "priority",
        &["a"],
        "Priority(): Arg \"priority\" missing or not a number: nil",
    ),
    (
        "priority",
        &["a", "x"],
        "Priority(): Arg \"priority\" missing or not a number: x",
    ),
    (
        "priority",
        &["zzz", "1"],
        "Priority(): Job zzz does not exist",
    ),
    ("log", &[], "Log(): Argument 'jid' missing"),
    ("log", &["a"], "Log(): Argument 'message' missing"),
    ("log", &["a", "m", "{bad"], ""),
    ("log", &["zzz", "m"], "Log(): Job zzz does not exist"),
    // listings
    ("jobs", &[], "Jobs(): Arg \"state\" missing"),
    (
        "jobs",
        &["complete", "x"],
        "Jobs(): Arg \"offset\" not a number: x",
    ),
    (
        "jobs",
        &["complete", "0", "x"],
        "Jobs(): Arg \"count\" not a number: x",
    ),
    ("jobs", &["running"], "Jobs(): Arg \"queue\" missing"),
    (
        "jobs",
        &["scheduled", "q", "x"],
        "Jobs(): Arg \"offset\" not a number: x",
    ),
    (
        "jobs",
        &["scheduled", "q", "0", "x"],
        "Jobs(): Arg \"count\" not a number: x",
    ),
    ("jobs", &["bogus", "q"], "Jobs(): Unknown type \"bogus\""),
    ("jobs", &["bogus"], "Jobs(): Arg \"queue\" missing"),
    (
        "jobs",
        &["bogus", "q", "x"],
        "Jobs(): Arg \"offset\" not a number: x",
    ),
    ("pause", &[], ""),
    ("unpause", &[], ""),
    (
        "failed",
        &["g", "x"],
        "Failed(): Arg \"start\" is not a number: x",
    ),
    (
        "failed",
        &["g", "0", "x"],
        "Failed(): Arg \"limit\" is not a number: x",
    ),
    ("unfail", &[], "Queue(): no queue name provided"),
    ("unfail", &["q"], "Unfail(): Arg \"group\" missing"),
    (
        "unfail",
        &["q", "g", "x"],
        "Unfail(): Arg \"count\" not a number: x",
    ),
    ("stats", &[], "Queue(): no queue name provided"),
    (
        "stats",
        &["q"],
        "Stats(): Arg \"date\" missing or not a number: nil",
    ),
    (
        "stats",
        &["q", "today"],
        "Stats(): Arg \"date\" missing or not a number: today",
    ),
    // tags and tracking
    (
        "tag",
        &[],
        "Tag(): Arg \"command\" must be \"add\", \"remove\", \"get\" or \"top\"",
    ),
    ("tag", &["add"], "Tag(): Arg \"jid\" missing"),
    ("tag", &["remove"], "Tag(): Arg \"jid\" missing"),
    ("tag", &["add", "zzz", "t"], "Tag(): Job zzz does not exist"),
    (
        "tag",
        &["remove", "zzz", "t"],
        "Tag(): Job zzz does not exist",
    ),
    ("tag", &["get"], "Tag(): Arg \"tag\" missing"),
    (
        "tag",
        &["get", "x", "first"],
        "Tag(): Arg \"offset\" not a number: first",
    ),
    (
        "tag",
        &["get", "x", "0", "all"],
        "Tag(): Arg \"count\" not a number: all",
    ),
    (
        "tag",
        &["top", "first"],
        "Tag(): Arg \"offset\" not a number: first",
    ),
    (
        "tag",
        &["top", "0", "all"],
        "Tag(): Arg \"count\" not a number: all",
    ),
    (
        "tag",
        &["bogus"],
        "Tag(): First argument must be \"add\", \"remove\" or \"get\"",
    ),
    ("track", &["track"], "Track(): Arg \"jid\" missing"),
    ("track", &["track", "zzz"], "Track(): Job does not exist"),
    ("track", &["untrack", "zzz"], "Track(): Job does not exist"),
    (
        "track",
        &["bogus", "a"],
        "Track(): Unknown action \"bogus\"",
    ),
    // recurring
    ("recur", &[], "Queue(): no queue name provided"),
    ("recur", &["q"], "RecurringJob On(): Arg \"jid\" missing"),
    (
        "recur",
        &["q", "r2"],
        "RecurringJob On(): Arg \"klass\" missing",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}"],
        "RecurringJob On(): Arg \"spec\" missing",
    ),
    (
        "recur",
        &["q", "r2", "K", "{bad", "interval", "60", "0"],
        "",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "weekly", "60", "0"],
        "Recur(): schedule type \"weekly\" unknown",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "cron", "* * * * *", "UTC"],
        "Recur(): Arg \"ticks\" missing",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "cron", "", "UTC", "ticks", "[60]"],
        "Recur(): Arg \"cron\" missing",
    ),
    (
        "recur",
        &[
            "q",
            "r2",
            "K",
            "{}",
            "cron",
            "* * * * *",
            "UTC",
            "ticks",
            "[120,60]",
        ],
        "Recur(): Arg \"ticks\" must be a JSON array of ascending whole seconds",
    ),
    (
        "recur",
        &[
            "q",
            "r2",
            "K",
            "{}",
            "cron",
            "* * * * *",
            "UTC",
            "ticks",
            "[]",
        ],
        "Recur(): Arg \"ticks\" must be a JSON array",
    ),
    (
        "recur.cron.extend",
        &["r", "* * * * *", "UTC", "[1.5]"],
        "Recur(): Arg \"ticks\" must be a JSON array",
    ),
    (
        "recur.cron.due",
        &["many"],
        "Recur(): Arg \"limit\" not a number",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "often", "0"],
        "Recur(): Arg \"interval\" not a number: often",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "60", "later"],
        "Recur(): Arg \"offset\" not a number: later",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "0", "0"],
        "Recur(): Arg \"interval\" must be greater than 0",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "-5", "0"],
        "Recur(): Arg \"interval\" must be greater than 0",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "60", "0", "tags"],
        "Odd number of additional args",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "60", "0", "tags", "[oops"],
        "",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "60", "0", "priority", "x"],
        "Recur(): Arg \"priority\" not a number: x",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "60", "0", "retries", "x"],
        "Recur(): Arg \"retries\" not a number: x",
    ),
    (
        "recur",
        &["q", "r2", "K", "{}", "interval", "60", "0", "backlog", "x"],
        "Recur(): Arg \"backlog\" not a number: x",
    ),
    // an existing template is not half-replaced by a bad re-recur
    (
        "recur",
        &["q2", "r", "K2", "{}", "interval", "30", "0", "backlog", "x"],
        "Recur(): Arg \"backlog\" not a number: x",
    ),
    ("recur.get", &[], "Recurring(): no jid provided"),
    (
        "recur.update",
        &["zzz", "priority", "1"],
        "Recur(): No recurring job zzz",
    ),
    (
        "recur.update",
        &["r", "priority"],
        "No value provided for priority",
    ),
    (
        "recur.update",
        &["r", "priority", "3", "cron", "* * * * *"],
        "Recur(): Args \"cron\", \"timezone\" and \"ticks\" go together",
    ),
    (
        "recur.update",
        &[
            "r",
            "cron",
            "* * * * *",
            "timezone",
            "UTC",
            "ticks",
            "[60]",
            "interval",
            "5",
        ],
        "Recur(): Args \"cron\" and \"interval\" exclude each other",
    ),
    (
        "recur.update",
        &["r", "cron", "* * * * *", "timezone", "UTC", "ticks", "{}"],
        "Recur(): Arg \"ticks\" must be a JSON array",
    ),
    (
        "recur.update",
        &["r", "priority", "x"],
        "Recur(): Arg \"priority\" must be a number: x",
    ),
    (
        "recur.update",
        &["r", "retries", "x"],
        "Recur(): Arg \"retries\" must be a number: x",
    ),
    (
        "recur.update",
        &["r", "interval", "x"],
        "Recur(): Arg \"interval\" must be a number: x",
    ),
    ("recur.update", &["r", "data", "{bad"], ""),
    (
        "recur.update",
        &["r", "backlog", "x"],
        "Recur(): Arg \"backlog\" not a number: x",
    ),
    (
        "recur.update",
        &["r", "tags", "[]"],
        "Recur(): Unrecognized option \"tags\"",
    ),
    (
        "recur.update",
        &["r", "priority", "5", "queue", "q9", "bogus", "1"],
        "Recur(): Unrecognized option \"bogus\"",
    ),
    (
        "recur.update",
        &["r", "queue", "q9", "interval", "x"],
        "Recur(): Arg \"interval\" must be a number: x",
    ),
    ("recur.tag", &["zzz", "t"], "Tag(): Job zzz does not exist"),
    (
        "recur.untag",
        &["zzz", "t"],
        "Untag(): Job zzz does not exist",
    ),
    // migrate (extension)
    (
        "migrate",
        &["x"],
        "Migrate(): Arg \"cursor\" must be a SCAN cursor: x",
    ),
    (
        "migrate",
        &["0", "0"],
        "Migrate(): Arg \"count\" must be positive: 0",
    ),
    // config
    ("config.set", &[], "config.set(): Arg \"option\" missing"),
    (
        "config.set",
        &["heartbeat"],
        "config.set(): Arg \"value\" missing",
    ),
    (
        "config.unset",
        &[],
        "config.unset(): Arg \"option\" missing",
    ),
];

#[tokio::test]
async fn every_malformed_call_fails_and_writes_nothing() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    let mut problems = Vec::new();
    for (command, args, needle) in CASES {
        let before = snapshot(&redis);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match qless.call(command, 100.0, &args).await {
            Ok(value) => problems.push(format!("{command} {args:?}: no error, got {value:?}")),
            Err(err) => {
                let text = err.to_string();
                if !text.contains(needle) {
                    problems.push(format!("{command} {args:?}: {text:?} lacks {needle:?}"));
                }
            }
        }
        let after = snapshot(&redis);
        if before != after {
            let changed: Vec<_> = before
                .keys()
                .chain(after.keys())
                .filter(|k| before.get(*k) != after.get(*k))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            problems.push(format!("{command} {args:?}: keyspace changed: {changed:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

async fn evalsha(redis: &RedisServer, qless: &Qless, keys: &[&str], argv: &[&str]) -> String {
    let mut conn = redis.client().get_connection().unwrap();
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(qless.script().sha())
        .arg(keys.len())
        .arg(keys)
        .arg(argv);
    match cmd.query::<redis::Value>(&mut conn) {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(err) => err.to_string(),
    }
}

#[tokio::test]
async fn an_unknown_command_is_reported_before_a_bad_now() {
    let (redis, qless) = start().await;
    let text = evalsha(&redis, &qless, &[], &["no.such", "yesterday"]).await;
    assert!(text.contains("Unknown command no.such"), "{text}");
    let text = evalsha(&redis, &qless, &[], &[]).await;
    assert!(text.contains("Must provide a command"), "{text}");
}

#[tokio::test]
async fn a_bad_now_is_refused_with_a_message_ending_in_nil() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let before = snapshot(&redis);
    for argv in [
        &["get", "yesterday", "a"][..],
        &["get"][..],
        &["put", "", "w"][..],
    ] {
        let text = evalsha(&redis, &qless, &[], argv).await;
        assert!(
            text.contains("Arg \"now\" missing or not a number: nil"),
            "{argv:?}: {text}"
        );
    }
    assert_eq!(before, snapshot(&redis));
}

#[tokio::test]
async fn numbers_use_lua_tonumber_rules() {
    let (_redis, qless) = start().await;
    // " 5 ", "1e1" and "0x10" are numbers to the script
    let reply = qless
        .call(
            "put",
            0.0,
            &strs(&["w", "q", "a", "K", "{}", " 5 ", "priority", "0x10"]),
        )
        .await
        .unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "a");
    let job = super::jobs::get(&qless, "a").await;
    assert_eq!((job.state.as_str(), job.priority), ("scheduled", 16.0));
    let peeked = qless.call("peek", 0.0, &strs(&["q", "1e1"])).await.unwrap();
    assert_eq!(redis::from_redis_value::<String>(peeked).unwrap(), "{}");
}

#[tokio::test]
async fn passing_two_keys_is_an_error() {
    let (redis, qless) = start().await;
    let before = snapshot(&redis);
    let text = evalsha(
        &redis,
        &qless,
        &["ql:{a}", "ql:{b}"],
        &["put", "0", "w", "q", "j", "K", "{}", "0"],
    )
    .await;
    assert!(text.contains("No Keys should be provided"), "{text}");
    assert_eq!(before, snapshot(&redis));
}
