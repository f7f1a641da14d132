//! Concurrent calls leaving together as one `batch` invocation (`core/group.rs`):
//! each call keeps its own reply or error, and a call whose caller has gone is not sent.

use std::time::Duration;

use qlessd::core::{Error, PutArgs, Qless, ScriptCode};

use crate::support::{RedisServer, START, connect};

/// A plain put of `jid` into queue `q`.
fn job(jid: &str) -> PutArgs {
    super::jobs::job("q", jid)
}

/// `calls` of `cmdstat_evalsha` in INFO commandstats.
fn evalsha_calls(redis: &RedisServer) -> u64 {
    let mut conn = redis.client().get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// Puts jobs `j0`..`j<count>` from concurrent tasks while Redis is held up, so the
/// calls queue and leave in groups; returns each put's reply, in jid order.
async fn put_while_busy(redis: &RedisServer, qless: &Qless, count: usize) -> Vec<String> {
    redis.pause_clients(150);
    let calls = (0..count).map(|i| {
        let qless = qless.clone();
        tokio::spawn(async move { qless.put(START, job(&format!("j{i}"))).await })
    });
    let replies = futures_util::future::join_all(calls).await;
    replies.into_iter().map(|r| r.unwrap().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_invocations_and_each_gets_its_own_reply() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let before = evalsha_calls(&redis);
    let replies = put_while_busy(&redis, &qless, 200).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply, format!("j{i}"));
    }
    let invocations = evalsha_calls(&redis) - before;
    assert!(invocations < 20, "200 calls took {invocations} invocations");
    assert_each_put_once(&qless, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_bounded_by_the_jobs_their_calls_lease_not_by_their_number() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    put_while_busy(&redis, &qless, 400).await;
    // 40 pops of ten while Redis is held: counted in calls they would leave as one
    // group behind the first one or two (two or three invocations); counted in jobs
    // (100 a group), as groups of at most ten pops behind them (five or more).
    let before = evalsha_calls(&redis);
    redis.pause_clients(150);
    let pops = (0..40).map(|i| {
        let qless = qless.clone();
        tokio::spawn(async move { qless.pop(START, "q", &format!("w{i}"), 10).await })
    });
    let mut leased = Vec::new();
    for pop in futures_util::future::join_all(pops).await {
        let jobs = pop.unwrap().unwrap();
        assert_eq!(jobs.len(), 10, "a pop of ten leased {}", jobs.len());
        leased.extend(jobs.into_iter().map(|job| job.jid));
    }
    leased.sort();
    leased.dedup();
    assert_eq!(leased.len(), 400, "a job was leased twice");
    let invocations = evalsha_calls(&redis) - before;
    assert!(
        (5..=12).contains(&invocations),
        "40 pops of ten took {invocations} invocations"
    );
}

/// Jobs `j0`..`j<count>` exist, each put exactly once (one history entry).
async fn assert_each_put_once(qless: &Qless, count: usize) {
    for i in 0..count {
        let stored = qless.get(START, &format!("j{i}")).await.unwrap();
        let stored = stored.unwrap_or_else(|| panic!("j{i} missing"));
        assert_eq!(stored.history.len(), 1, "j{i} put more than once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_in_a_group_fails_alone_and_writes_nothing() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.pause_clients(150);
    let put =
        |qless: Qless, jid: String| tokio::spawn(async move { qless.put(START, job(&jid)).await });
    let before = put(qless.clone(), "before".into());
    let refused = {
        let qless = qless.clone();
        tokio::spawn(async move {
            // An unknown jid to complete: the script refuses it.
            qless
                .call(
                    "complete",
                    START,
                    &["nobody".into(), "w".into(), "q".into(), "{}".into()],
                )
                .await
        })
    };
    let after = put(qless.clone(), "after".into());
    assert_eq!(before.await.unwrap().unwrap(), "before");
    assert_eq!(after.await.unwrap().unwrap(), "after");
    match refused.await.unwrap() {
        Err(Error::Script { code, .. }) => assert_eq!(code, ScriptCode::NotFound),
        other => panic!("expected a script error, got {other:?}"),
    }
    assert!(qless.get(START, "nobody").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_gave_up_before_it_left_is_not_sent() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.pause_clients(300);
    // Two calls fill both slots in flight (both held by the pause) ...
    let first = tokio::spawn({
        let qless = qless.clone();
        async move { qless.put(START, job("first")).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = tokio::spawn({
        let qless = qless.clone();
        async move { qless.put(START, job("second")).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    // ... so this one queues, and its caller stops waiting before a slot frees.
    let abandoned = tokio::time::timeout(Duration::from_millis(50), qless.put(START, job("gone")));
    assert!(abandoned.await.is_err(), "the abandoned put answered");
    assert_eq!(first.await.unwrap().unwrap(), "first");
    assert_eq!(second.await.unwrap().unwrap(), "second");
    // Anything queued behind has left by now: a call made after it is answered.
    qless.put(START, job("later")).await.unwrap();
    assert!(qless.get(START, "gone").await.unwrap().is_none());
    assert!(qless.get(START, "later").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batch_calls_are_never_nested_in_a_group() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.pause_clients(150);
    let calls = (0..4).map(|i| {
        let qless = qless.clone();
        tokio::spawn(async move {
            let args: Vec<String> = ["put", "6", "", "q", &format!("j{i}"), "K", "{}", "0"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            qless.call("batch", START, &args).await
        })
    });
    let replies = futures_util::future::join_all(calls).await;
    for (i, reply) in replies.into_iter().enumerate() {
        let reply = reply.unwrap().unwrap();
        assert_eq!(
            reply,
            redis::Value::Array(vec![redis::Value::BulkString(format!("j{i}").into_bytes())])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_calls_stay_in_their_namespace() {
    let redis = RedisServer::start();
    let tenant = connect(&redis, Some("tenant")).await;
    let before = evalsha_calls(&redis);
    assert_eq!(put_while_busy(&redis, &tenant, 20).await.len(), 20);
    let invocations = evalsha_calls(&redis) - before;
    assert!(invocations < 20, "20 calls took {invocations} invocations");
    let mut conn = redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.iter().any(|k| k == "ql:{tenant}:j:j7"), "{keys:?}");
    assert!(
        keys.iter().all(|k| k.starts_with("ql:{tenant}:")),
        "a key outside the namespace: {keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_command_in_a_group_fails_alone() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.pause_clients(150);
    let put = |jid: &'static str| {
        let qless = qless.clone();
        tokio::spawn(async move { qless.put(START, job(jid)).await })
    };
    let first = put("first");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let second = put("second");
    tokio::time::sleep(Duration::from_millis(10)).await;
    // These three queue behind the two in flight and leave as one group.
    let before = put("before");
    let unknown = {
        let qless = qless.clone();
        tokio::spawn(async move { qless.call("no.such.command", START, &[]).await })
    };
    let after = put("after");
    for (task, jid) in [
        (first, "first"),
        (second, "second"),
        (before, "before"),
        (after, "after"),
    ] {
        assert_eq!(task.await.unwrap().unwrap(), jid);
    }
    match unknown.await.unwrap() {
        Err(Error::Script { code, message }) => {
            assert_eq!(code, ScriptCode::Command);
            assert!(
                message.contains("Unknown command no.such.command"),
                "{message}"
            );
        }
        other => panic!("expected a script error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_that_meet_noscript_are_sent_again_and_each_call_runs_once() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.forget_scripts();
    let replies = put_while_busy(&redis, &qless, 100).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply, format!("j{i}"));
    }
    assert_each_put_once(&qless, 100).await;
}
