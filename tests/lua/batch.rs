//! The `batch` extension: many calls in one invocation, each answered on its own, as if
//! it had been called alone.

use qlessd::core::{BATCH_CALLS, Error, Qless};
use redis::Value;

use super::jobs::{complete, config, get, job, pop, put, start, state, strs};
use super::malformed::{seed, snapshot};
use crate::support::RedisServer;

/// Runs `batch` with `calls` given as (command, args) and returns its raw replies.
async fn batch(qless: &Qless, now: f64, calls: &[(&str, &[&str])]) -> Vec<Value> {
    let mut args = Vec::new();
    for (command, call_args) in calls {
        args.push(command.to_string());
        args.push(call_args.len().to_string());
        args.extend(strs(call_args));
    }
    match qless.call("batch", now, &args).await.unwrap() {
        Value::Array(replies) => replies,
        other => panic!("batch answered {other:?}"),
    }
}

fn text(value: &Value) -> String {
    redis::from_redis_value(value.clone()).unwrap_or_else(|_| panic!("not text: {value:?}"))
}

fn error(value: &Value) -> String {
    match value {
        Value::ServerError(err) => format!("{} {}", err.code(), err.details().unwrap_or("")),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

#[tokio::test]
async fn each_call_is_answered_in_order_with_its_own_reply_or_error() {
    let (_redis, qless) = start().await;
    let replies = batch(
        &qless,
        1.0,
        &[
            ("put", &["w", "q", "a", "K", "{}", "0"]),
            ("put.ifabsent", &["w", "q", "a", "K", "{}", "0"]),
            ("complete", &["missing", "w", "q", "{}"]),
            (
                "put",
                &["w", "q", "b", "K", "{\"n\":1}", "0", "priority", "3"],
            ),
        ],
    )
    .await;
    assert_eq!(replies.len(), 4);
    assert_eq!(text(&replies[0]), "a");
    assert_eq!(
        replies[1],
        Value::Nil,
        "put.ifabsent of an existing job is nil"
    );
    assert_eq!(
        error(&replies[2]),
        "QL_NOTFOUND user_script:1: Complete(): Job missing does not exist"
    );
    assert_eq!(text(&replies[3]), "b");
    assert_eq!(get(&qless, "b").await.priority, 3.0);
    // Later calls see the writes of earlier ones: b (priority 3) pops before a.
    assert_eq!(pop(&qless, 2.0, "q", "w", 2).await, ["b", "a"]);
}

#[tokio::test]
async fn calls_of_any_length_keep_their_arguments() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    // 3000 arguments: more than a Lua function can receive at once.
    let mut jids: Vec<String> = (0..3000).map(|i| format!("missing-{i}")).collect();
    jids[1234] = "a".to_owned();
    jids[2999] = "b".to_owned();
    let long: Vec<&str> = jids.iter().map(String::as_str).collect();
    let replies = batch(
        &qless,
        1.0,
        &[
            ("multiget", &["a"]),
            ("multiget", &long),
            ("multiget", &["b", "a"]),
        ],
    )
    .await;
    let jids_of = |reply: &Value| -> Vec<String> {
        let jobs: serde_json::Value = serde_json::from_str(&text(reply)).unwrap();
        jobs.as_array()
            .unwrap()
            .iter()
            .map(|job| job["jid"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(jids_of(&replies[0]), ["a"]);
    assert_eq!(jids_of(&replies[1]), ["a", "b"]);
    assert_eq!(jids_of(&replies[2]), ["b", "a"]);
}

/// A call refused for the state of its job (not for its arguments) fails alone.
#[tokio::test]
async fn a_failing_call_writes_nothing_and_the_calls_around_it_still_run() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    let before = snapshot(&redis);
    let replies = batch(
        &qless,
        100.0,
        &[
            ("complete", &["missing", "w", "q", "{}"]),
            ("complete", &["b", "someone-else", "q", "{}"]),
            ("heartbeat", &["a", "w", "{}"]),
        ],
    )
    .await;
    assert!(error(&replies[0]).starts_with("QL_NOTFOUND user_script:1: Complete(): Job missing"));
    assert!(error(&replies[1]).starts_with("QL_WORKER user_script:1: Complete(): Job b"));
    assert!(error(&replies[2]).starts_with("QL_STATE user_script:1: Heartbeat(): Job a"));
    assert_eq!(snapshot(&redis), before, "failed calls wrote something");

    let replies = batch(
        &qless,
        101.0,
        &[
            ("complete", &["nope", "w", "q", "{}"]),
            ("complete", &["b", "w", "q", "{}"]),
            ("put", &["w", "q", "j", "K", "{}", "0"]),
        ],
    )
    .await;
    assert!(matches!(replies[0], Value::ServerError(_)));
    assert_eq!(text(&replies[1]), "complete");
    assert_eq!(state(&qless, "b").await, "complete");
    assert_eq!(state(&qless, "j").await, "waiting");
}

/// JSON nested deeper than the script's decoder takes (cjson: 1,000 levels).
fn too_deep() -> String {
    format!("{}1{}", "[".repeat(1001), "]".repeat(1001))
}

/// A call of a batch: its command and arguments.
type Call<'a> = (&'a str, Vec<String>);

/// `head`, then `calls` as `batch` takes them: `command argc args...` each.
fn batch_args(head: &[&str], calls: &[Call<'_>]) -> Vec<String> {
    let mut args = strs(head);
    for (name, call_args) in calls {
        args.push(name.to_string());
        args.push(call_args.len().to_string());
        args.extend(call_args.iter().cloned());
    }
    args
}

/// Runs `command` (`batch`, `batch.check` or `pop.after`) with `calls` and returns its
/// error reply.
async fn refusal(
    qless: &Qless,
    command: &'static str,
    head: &[&str],
    calls: &[Call<'_>],
) -> String {
    let args = batch_args(head, calls);
    match qless.call(command, 100.0, &args).await {
        Err(Error::Script { code, message }) => format!("{code:?} {message}"),
        other => panic!("{command} answered {other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_call_anywhere_in_a_batch_refuses_it_whole_and_writes_nothing() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    let before = snapshot(&redis);
    let deep = too_deep();
    // 99 good puts, then one whose data the script's decoder refuses.
    let mut puts: Vec<Call> = (0..99)
        .map(|i| ("put", strs(&["", "q", &format!("new-{i}"), "K", "{}", "0"])))
        .collect();
    puts.push(("put", strs(&["", "q", "new-99", "K", &deep, "0"])));
    let message = refusal(&qless, "batch", &[], &puts).await;
    assert!(
        message.starts_with(
            "Argument Batch(): Call 100 is malformed, no call ran: Put(): Arg \"data\" missing or not JSON"
        ),
        "{message}"
    );
    assert_eq!(snapshot(&redis), before, "a refused batch wrote something");

    // Every batched form checks its arguments before any call runs.
    let good_heartbeat = ("heartbeat", strs(&["b", "w", "{}"]));
    let good_complete = ("complete", strs(&["b", "w", "q", "{}"]));
    let good_cancel = ("cancel", strs(&["a", "e"]));
    let good_put = ("put", strs(&["", "q", "n", "K", "{}", "0"]));
    let cases: Vec<(Vec<Call>, &str)> = vec![
        (
            vec![good_put.clone(), ("heartbeat", strs(&["b", "w", &deep]))],
            "Call 2 is malformed, no call ran: Heartbeat(): Arg \"data\" not JSON",
        ),
        (
            vec![
                good_heartbeat.clone(),
                ("heartbeat", strs(&["b", "w", "progress", &deep])),
            ],
            "Heartbeat(): Arg \"progress\" not JSON",
        ),
        (
            vec![
                good_heartbeat.clone(),
                ("complete", strs(&["b", "w", "q", &deep])),
            ],
            "Complete(): Arg \"data\" missing or not JSON",
        ),
        (
            vec![
                good_put.clone(),
                ("complete", strs(&["b", "w", "q", "{}", "result", &deep])),
            ],
            "Complete(): Arg \"result\" not JSON",
        ),
        (
            vec![good_complete.clone(), ("cancel", strs(&["c", "x-history"]))],
            "Cancel(): Jid x-history is reserved",
        ),
        (
            vec![
                good_cancel.clone(),
                ("fail", strs(&["b", "w", "g", "m", &deep])),
            ],
            "Fail(): Arg \"data\" not JSON",
        ),
        (
            vec![
                good_cancel.clone(),
                ("retry", strs(&["b", "q", "w", "soon"])),
            ],
            "Retry(): Arg \"delay\" not a number",
        ),
        (
            vec![good_cancel.clone(), ("log", strs(&["b", "m", &deep]))],
            "Log(): Argument 'data' not cjson",
        ),
        (
            vec![
                good_cancel.clone(),
                (
                    "put.idem",
                    strs(&["key", "60", "put", "", "q", "n", "K", &deep, "0"]),
                ),
            ],
            "Put(): Arg \"data\" missing or not JSON",
        ),
        (
            vec![
                good_put.clone(),
                (
                    "put",
                    strs(&["", "q", "n", "K", "{}", "0", "depends", r#"["z-history"]"#]),
                ),
            ],
            "Put(): Jid z-history is reserved",
        ),
        (
            vec![
                good_put.clone(),
                (
                    "put.ifabsent",
                    strs(&["", "q", "n", "K", "{}", "0", "priority", "x"]),
                ),
            ],
            "Put(): Arg \"priority\" not a number",
        ),
    ];
    for (calls, expected) in cases {
        let message = refusal(&qless, "batch", &[], &calls).await;
        assert!(
            message.starts_with("Argument Batch(): Call ") && message.contains(expected),
            "{message}"
        );
        assert_eq!(
            snapshot(&redis),
            before,
            "a refused batch wrote something: {expected}"
        );
    }

    // pop.after too: nothing is ended and nothing leased.
    let message = refusal(
        &qless,
        "pop.after",
        &["1"],
        &[good_complete, ("complete", strs(&["a", "w", "q", &deep]))],
    )
    .await;
    assert!(
        message.starts_with("Argument PopAfter(): Call 2 is malformed, no call ran: Complete()"),
        "{message}"
    );
    assert_eq!(
        snapshot(&redis),
        before,
        "a refused pop.after wrote something"
    );
}

#[tokio::test]
async fn call_many_sends_large_batches_in_chunks_and_keeps_every_answer_in_place() {
    let (_redis, qless) = start().await;
    let total = BATCH_CALLS * 2 + 37;
    put(&qless, 0.0, "q", "job-5").await;
    let jobs = (0..total)
        .map(|i| {
            let mut job = super::jobs::job("q", &format!("job-{i}"));
            job.data = format!("{{\"i\":{i}}}");
            (job, true)
        })
        .collect();
    let results = qless.put_many(1.0, jobs).await.unwrap();
    assert_eq!(results.len(), total);
    for (i, result) in results.iter().enumerate() {
        let expected = (i != 5).then(|| format!("job-{i}"));
        assert_eq!(result.as_ref().unwrap(), &expected, "answer {i}");
    }
    assert_eq!(get(&qless, "job-5").await.data.get(), "{}");
    assert_eq!(
        get(&qless, &format!("job-{}", total - 1)).await.state,
        "waiting"
    );
}

#[tokio::test]
async fn batch_check_checks_a_list_as_batch_does_and_runs_none_of_it() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    let before = snapshot(&redis);
    let good: Vec<Call> = vec![
        ("put", strs(&["", "q", "new", "K", "{}", "0"])),
        ("complete", strs(&["b", "w", "q", "{}"])),
        ("cancel", strs(&["a"])),
    ];
    let reply = qless
        .call("batch.check", 100.0, batch_args(&["201"], &good))
        .await
        .unwrap();
    assert_eq!(reply, Value::Int(3), "every call is counted as checked");
    assert_eq!(snapshot(&redis), before, "a check ran a call");

    // Numbered from `first`, as one `batch` of the whole request would name the call.
    let mut bad = good.clone();
    bad.push(("put", strs(&["", "q", "new-2", "K", &too_deep(), "0"])));
    let message = refusal(&qless, "batch.check", &["201"], &bad).await;
    assert!(
        message.starts_with(
            "Argument Batch(): Call 204 is malformed, no call ran: Put(): Arg \"data\" missing or not JSON"
        ),
        "{message}"
    );
    // The same refusal as `batch`'s of the same list, but for the numbering.
    let alone = refusal(&qless, "batch", &[], &bad).await;
    assert_eq!(message.replace("Call 204", "Call 4"), alone);
    let message = refusal(&qless, "batch.check", &["0"], &good).await;
    assert!(
        message.starts_with("Argument Batch(): Arg \"first\" must be a positive integer"),
        "{message}"
    );
    assert_eq!(snapshot(&redis), before, "a refused check wrote something");
}

/// `put_many`, `complete_many` and `heartbeat_many` send more than [`BATCH_CALLS`]
/// calls as several `batch`es: a call the script refuses for its arguments in a later
/// one refuses the whole list before the first writes anything.
#[tokio::test]
async fn a_list_longer_than_one_batch_with_a_malformed_call_in_a_later_part_writes_nothing() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    let before = snapshot(&redis);
    let deep = too_deep();

    let jobs = (0..250)
        .map(|i| {
            let mut put = job("q", &format!("new-{i}"));
            if i == 240 {
                put.data = deep.clone();
            }
            (put, false)
        })
        .collect();
    let refused = qless.put_many(100.0, jobs).await;
    let Err(Error::Script { message, .. }) = refused else {
        panic!("a put of 250 jobs, the 241st malformed, answered {refused:?}");
    };
    assert!(
        message.starts_with("Batch(): Call 241 is malformed, no call ran: Put(): Arg \"data\""),
        "{message}"
    );
    assert_eq!(snapshot(&redis), before, "jobs were put");

    // The running job `b` first: without the check, the first part would complete it.
    let completes = (0..150)
        .map(|i| qlessd::core::CompleteArgs {
            jid: if i == 0 {
                "b".into()
            } else {
                format!("nope-{i}")
            },
            worker: "w".into(),
            queue: "q".into(),
            data: if i == 149 { deep.clone() } else { "{}".into() },
            ..Default::default()
        })
        .collect();
    let refused = qless.complete_many(100.0, completes).await;
    let Err(Error::Script { message, .. }) = refused else {
        panic!("150 completions, the last malformed, answered {refused:?}");
    };
    assert!(message.contains("Call 150 is malformed"), "{message}");
    assert_eq!(snapshot(&redis), before, "a job was completed");

    let heartbeats = (0..150)
        .map(|i| {
            let progress = (i == 149).then(|| deep.clone());
            ("b".to_owned(), "w".to_owned(), None, progress)
        })
        .collect();
    let refused = qless.heartbeat_many(100.0, heartbeats).await;
    let Err(Error::Script { message, .. }) = refused else {
        panic!("150 heartbeats, the last malformed, answered {refused:?}");
    };
    assert!(message.contains("Call 150 is malformed"), "{message}");
    assert_eq!(snapshot(&redis), before, "a lock was renewed");
}

/// Puts j1..j5 and leases them one second apart (at 10, 11, ...), so that completing
/// them all at 20 records five different run times.
async fn five_running_jobs(qless: &Qless) {
    for i in 1..=5 {
        put(qless, f64::from(i), "q", &format!("j{i}")).await;
    }
    for i in 1..=5 {
        let leased = pop(qless, 9.0 + f64::from(i), "q", "w", 1).await;
        assert_eq!(leased, [format!("j{i}")]);
    }
}

fn run_stats(redis: &RedisServer) -> Vec<(String, String)> {
    let mut conn = redis.client().get_connection().unwrap();
    let mut fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg("ql:s:run:0:q")
        .query(&mut conn)
        .unwrap();
    fields.sort();
    fields
}

#[tokio::test]
async fn a_batch_records_the_same_statistics_as_the_calls_made_one_by_one() {
    let (one_by_one, alone) = start().await;
    five_running_jobs(&alone).await;
    for i in 1..=5 {
        let jid = format!("j{i}");
        let args = strs(&[&jid, "w", "q", "{}"]);
        let reply = alone.call("complete", 20.0, &args).await.unwrap();
        assert_eq!(text(&reply), "complete");
    }

    let (batched, together) = start().await;
    five_running_jobs(&together).await;
    let calls: Vec<(&str, &[&str])> = vec![
        ("complete", &["j1", "w", "q", "{}"]),
        ("complete", &["j2", "w", "q", "{}"]),
        ("complete", &["j3", "w", "q", "{}"]),
        ("complete", &["j4", "w", "q", "{}"]),
        ("complete", &["j5", "w", "q", "{}"]),
    ];
    let replies = batch(&together, 20.0, &calls).await;
    assert!(replies.iter().all(|r| text(r) == "complete"), "{replies:?}");

    let expected = run_stats(&one_by_one);
    assert!(
        expected.contains(&("total".to_owned(), "5".to_owned())),
        "{expected:?}"
    );
    assert_eq!(run_stats(&batched), expected);
    assert_eq!(
        together.stats(20.0, "q", 20.0).await.unwrap(),
        alone.stats(20.0, "q", 20.0).await.unwrap()
    );
}

#[tokio::test]
async fn a_stats_call_in_a_batch_sees_the_calls_before_it() {
    let (_redis, qless) = start().await;
    five_running_jobs(&qless).await;
    let replies = batch(
        &qless,
        20.0,
        &[
            ("complete", &["j1", "w", "q", "{}"]),
            ("complete", &["j2", "w", "q", "{}"]),
            ("stats", &["q", "20"]),
            ("complete", &["j3", "w", "q", "{}"]),
        ],
    )
    .await;
    let stats: serde_json::Value = serde_json::from_str(&text(&replies[2])).unwrap();
    assert_eq!(stats["run"]["count"], 2, "{stats}");
    let after = qless.stats(20.0, "q", 20.0).await.unwrap();
    assert_eq!(after.run.count, 3);
}

#[tokio::test]
async fn calls_whose_statistics_cannot_be_written_answer_with_that_error() {
    let (redis, qless) = start().await;
    five_running_jobs(&qless).await;
    let mut conn = redis.client().get_connection().unwrap();
    // A key of the wrong type where the run statistics go: Redis refuses the write.
    redis::cmd("SET")
        .arg("ql:s:run:0:q")
        .arg("not a hash")
        .query::<()>(&mut conn)
        .unwrap();
    let replies = batch(
        &qless,
        20.0,
        &[
            ("complete", &["j1", "w", "q", "{}"]),
            ("complete", &["nope", "w", "q", "{}"]),
            ("heartbeat", &["j2", "w", "{}"]),
        ],
    )
    .await;
    assert!(error(&replies[0]).contains("WRONGTYPE"), "{replies:?}");
    assert!(error(&replies[1]).contains("QL_NOTFOUND"), "{replies:?}");
    assert!(
        matches!(replies[2], Value::Int(_) | Value::BulkString(_)),
        "{replies:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lost_mid_batch_keeps_the_results_of_the_calls_already_run() {
    const JOBS: usize = 5_000;
    // Redis is killed after a growing delay until the kill lands part-way through.
    for delay in [5u64, 10, 20, 40, 80, 160, 320] {
        let redis = RedisServer::start();
        let qless = crate::support::connect(&redis, None).await;
        let jobs = (0..JOBS)
            .map(|i| (job("q", &format!("j{i}")), false))
            .collect();
        let batch = tokio::spawn(async move { qless.put_many(1.0, jobs).await });
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        drop(redis);
        let Ok(results) = batch.await.unwrap() else {
            continue; // Killed before the first invocation answered: nothing to keep.
        };
        assert_eq!(results.len(), JOBS);
        let done = results.iter().take_while(|r| r.is_ok()).count();
        if done == JOBS {
            continue; // Finished before the kill.
        }
        assert_eq!(done % BATCH_CALLS, 0, "{done} calls answered");
        for (i, result) in results.iter().enumerate().take(done) {
            assert_eq!(
                result.as_ref().unwrap().as_deref(),
                Some(format!("j{i}").as_str())
            );
        }
        for result in &results[done..] {
            assert!(
                matches!(result, Err(qlessd::core::Error::Unavailable(_))),
                "{result:?}"
            );
        }
        return;
    }
    panic!("the kill never landed part-way through the batch");
}

/// Every key's type and contents in an order-free form (hash fields, set members and
/// zset members sorted): two databases that hold the same data compare equal however
/// their writes were spread over invocations.
fn contents(redis: &RedisServer) -> std::collections::BTreeMap<String, String> {
    let mut conn = redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).unwrap();
            let mut items: Vec<String> = match kind.as_str() {
                "hash" => redis::cmd("HGETALL")
                    .arg(&key)
                    .query::<Vec<(String, String)>>(&mut conn)
                    .unwrap()
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
                "zset" => redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query::<Vec<(String, String)>>(&mut conn)
                    .unwrap()
                    .into_iter()
                    .map(|(m, s)| format!("{m}@{s}"))
                    .collect(),
                "set" => redis::cmd("SMEMBERS").arg(&key).query(&mut conn).unwrap(),
                "list" => redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query(&mut conn)
                    .unwrap(),
                _ => vec![redis::cmd("GET").arg(&key).query(&mut conn).unwrap()],
            };
            if kind != "list" {
                items.sort();
            }
            (key, format!("{kind} {items:?}"))
        })
        .collect()
}

/// The state both runs of the memo test start from: `a1`..`a6` running (worker `wN`
/// has `aN`), `a7`, `a8` and `y` waiting, `d` waiting on `a7` then on a delay, `f`
/// complete, at most 3 completed jobs kept.
async fn running_and_waiting(qless: &Qless) {
    config(qless, "jobs-history-count", "3").await;
    for i in 1..=8 {
        put(qless, f64::from(i), "q", &format!("a{i}")).await;
    }
    for i in 1..=6 {
        let leased = pop(qless, 9.0, "q", &format!("w{i}"), 1).await;
        assert_eq!(leased, [format!("a{i}")]);
    }
    put(qless, 9.0, "side", "f").await;
    assert_eq!(pop(qless, 9.0, "side", "wf", 1).await, ["f"]);
    complete(qless, 9.0, "f", "wf", "side").await;
    put(qless, 9.0, "q", "y").await;
    // d waits on a7, then for its delay (long past once a7 completes).
    let mut d = job("q", "d");
    d.depends = Some(strs(&["a7"]));
    d.delay = 5.0;
    qless.put(9.0, d).await.unwrap();
}

#[tokio::test]
async fn a_batch_leaves_the_same_data_and_events_as_its_calls_made_one_by_one() {
    // Within a batch, the hot commands skip reads of what calls before them learnt
    // (options, the completed set's size, registered queues...): the calls between
    // them here write each of those, and the batch must still do exactly what the
    // calls do one by one.
    let calls: Vec<(&'static str, Vec<String>)> = vec![
        ("put", strs(&["", "q", "n1", "K", "{}", "0"])),
        (
            "pop.after",
            strs(&["1", "complete", "4", "a1", "w1", "q", "{}"]),
        ),
        ("complete", strs(&["a2", "w2", "q", "{}"])),
        // A completed job put again leaves the completed set.
        ("put", strs(&["", "q", "a2", "K", "{}", "0"])),
        ("complete", strs(&["a3", "w3", "q", "{}"])),
        ("complete", strs(&["missing", "w3", "q", "{}"])),
        // y tracked, then gone but still tracked: its next put is announced.
        ("track", strs(&["track", "y"])),
        ("cancel", strs(&["y"])),
        ("put", strs(&["", "q", "y", "K", "{}", "0"])),
        ("config.set", strs(&["q-heartbeat", "30"])),
        (
            "pop.after",
            strs(&["1", "complete", "4", "a4", "w4", "q", "{}"]),
        ),
        ("config.set", strs(&["jobs-history-count", "1"])),
        ("complete", strs(&["a5", "w5", "q", "{}"])),
        (
            "pop.after",
            strs(&["1", "fail", "5", "a6", "w6", "g", "m", "{}"]),
        ),
        ("queue.forget", strs(&["q"])),
        ("put", strs(&["", "q", "n2", "K", "{}", "0"])),
        ("sweep", strs(&[])),
        ("config.set", strs(&["q-heartbeat", "60"])),
        ("pop", strs(&["q", "w7", "1", "fields"])),
        // Releases d into -scheduled, already due: the next pop promotes it.
        ("complete", strs(&["a7", "w1", "q", "{}"])),
        ("pop", strs(&["q", "w8", "1", "fields"])),
        // Leases that expire at once: the next pop finds the lock expired.
        ("config.set", strs(&["q-heartbeat", "0"])),
        ("pop", strs(&["q", "w9", "1", "fields"])),
        ("pop", strs(&["q", "w10", "1", "fields"])),
        ("pop", strs(&["q", "w11", "1", "fields"])),
    ];

    let (one_by_one, alone) = start().await;
    running_and_waiting(&alone).await;
    let mut alone_events = super::events::Listener::start(&one_by_one, "ql:*", "ql:end").await;
    let mut expected = Vec::new();
    for (command, args) in &calls {
        expected.push(
            alone
                .call(command, 20.0, args)
                .await
                .map_err(|e| e.to_string()),
        );
    }

    let (batched, together) = start().await;
    running_and_waiting(&together).await;
    let mut together_events = super::events::Listener::start(&batched, "ql:*", "ql:end").await;
    let borrowed: Vec<(&str, Vec<&str>)> = calls
        .iter()
        .map(|(command, args)| (*command, args.iter().map(String::as_str).collect()))
        .collect();
    let as_slices: Vec<(&str, &[&str])> = borrowed
        .iter()
        .map(|(command, args)| (*command, args.as_slice()))
        .collect();
    let replies = batch(&together, 20.0, &as_slices).await;

    assert_eq!(replies.len(), expected.len());
    for ((reply, alone), (command, _)) in replies.iter().zip(&expected).zip(&calls) {
        match alone {
            Ok(value) => assert_eq!(reply, value, "{command}"),
            Err(_) => assert!(
                matches!(reply, Value::ServerError(_)),
                "{command}: {reply:?}"
            ),
        }
    }
    let events = together_events.drain().await;
    assert_eq!(events, alone_events.drain().await);
    assert!(
        events.contains(&("ql:put".to_owned(), "y".to_owned())),
        "the tracked job's put is announced: {events:?}"
    );
    let data = contents(&batched);
    assert_eq!(data, contents(&one_by_one));
    // What the calls between the hot ones changed took effect within the batch.
    assert_eq!(
        data["ql:completed"].matches('@').count(),
        1,
        "{}",
        data["ql:completed"]
    );
    assert!(data["ql:queues"].contains("q@"), "{}", data["ql:queues"]);
    assert_eq!(state(&together, "d").await, "running");
    assert!(
        events
            .iter()
            .any(|(channel, payload)| channel == "ql:w:w9" && payload.contains("lock_lost")),
        "w9's lease expired at once and was noticed: {events:?}"
    );
}
