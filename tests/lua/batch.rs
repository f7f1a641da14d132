//! The `batch` extension: many calls in one invocation, each answered on its own, as if
//! it had been called alone.

use qlessd::core::{BATCH_CALLS, Qless};
use redis::Value;

use super::jobs::{get, pop, put, start, state, strs};
use super::malformed::{seed, snapshot};

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
        "QL_NOTFOUND Complete(): Job missing does not exist"
    );
    assert_eq!(text(&replies[3]), "b");
    assert_eq!(get(&qless, "b").await.priority, 3.0);
    // Later calls see the writes of earlier ones: b (priority 3) pops before a.
    assert_eq!(pop(&qless, 2.0, "q", "w", 2).await, ["b", "a"]);
}

#[tokio::test]
async fn a_failing_call_writes_nothing_and_the_calls_around_it_still_run() {
    let (redis, qless) = start().await;
    seed(&qless).await;
    let before = snapshot(&redis);
    let replies = batch(
        &qless,
        100.0,
        &[
            ("put", &["w", "q", "j", "K", "{bad", "0"]),
            ("complete", &["b", "someone-else", "q", "{}"]),
            ("heartbeat", &["a", "w", "{}"]),
        ],
    )
    .await;
    assert!(error(&replies[0]).starts_with("QL_ARG Put(): Arg \"data\""));
    assert!(error(&replies[1]).starts_with("QL_WORKER Complete(): Job b"));
    assert!(error(&replies[2]).starts_with("QL_STATE Heartbeat(): Job a"));
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
