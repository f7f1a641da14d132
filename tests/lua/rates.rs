//! The dashboard's bookkeeping (`lua/rates.lua`, `lua/failures.lua`): what each queue
//! did minute by minute, and failure groups described.

use qlessd::core::{Minute, Qless, RecurArgs, RetryArgs};
use redis::Commands;

use super::jobs::{assert_error, complete, get, job, pop, put, raw, start, strs};
use crate::support::{RedisServer, connect};

/// A minute's first second in the tests' logical time (a multiple of 60).
const M: f64 = 6000.0;

/// `(put, completed, failed)` of a minute.
fn counts(minute: &Minute) -> (u64, u64, u64) {
    (minute.put, minute.completed, minute.failed)
}

/// A job of `queue` that fails at its first lock expiry or retry.
async fn put_without_retries(qless: &Qless, now: f64, queue: &str, jid: &str) {
    let mut args = job(queue, jid);
    args.retries = Some(0);
    qless.put(now, args).await.unwrap();
}

#[tokio::test]
async fn each_minute_counts_the_jobs_put_completed_and_failed_and_their_waits() {
    let (_redis, qless) = start().await;
    // Minute M: three jobs put, popped after waiting 5, 4 and 3 seconds.
    put(&qless, M, "q", "a").await;
    put(&qless, M + 1.0, "q", "b").await;
    put_without_retries(&qless, M + 2.0, "q", "c").await;
    assert_eq!(pop(&qless, M + 5.0, "q", "w", 3).await.len(), 3);
    // The next minute: one completed, one failed by its worker, one out of retries;
    // one more put and popped at once.
    complete(&qless, M + 61.0, "a", "w", "q").await;
    qless
        .fail(M + 62.0, "b", "w", "smtp", "refused", None)
        .await
        .unwrap();
    let retry = RetryArgs {
        jid: "c".into(),
        queue: "q".into(),
        worker: "w".into(),
        delay: Some(0.0),
        group: None,
        message: None,
    };
    assert!(qless.retry(M + 63.0, retry).await.unwrap() < 0);
    put_without_retries(&qless, M + 64.0, "q", "d").await;
    assert_eq!(pop(&qless, M + 64.0, "q", "w", 1).await, strs(&["d"]));
    // The minute after: d's lock expires (60 s heartbeat), and with no retries left
    // it fails once its grace is over.
    assert!(pop(&qless, M + 124.0, "q", "w2", 1).await.is_empty());
    assert!(pop(&qless, M + 135.0, "q", "w2", 1).await.is_empty());
    assert_eq!(get(&qless, "d").await.state, "failed");

    let minutes = qless.rates(M + 150.0, "q", 4).await.unwrap();
    let starts: Vec<i64> = minutes.iter().map(|m| m.start).collect();
    assert_eq!(starts, [5940, 6000, 6060, 6120]);
    assert_eq!(counts(&minutes[0]), (0, 0, 0));
    assert_eq!(minutes[0].popped(), 0);
    assert_eq!(counts(&minutes[1]), (3, 0, 0));
    assert_eq!(minutes[1].popped(), 3);
    assert_eq!(&minutes[1].waits[3..6], &[1, 1, 1]);
    assert_eq!(minutes[1].wait_quantile(0.5), Some(4));
    assert_eq!(minutes[1].wait_quantile(0.95), Some(5));
    assert_eq!(counts(&minutes[2]), (1, 1, 2));
    assert_eq!((minutes[2].popped(), minutes[2].waits[0]), (1, 1));
    assert_eq!(counts(&minutes[3]), (0, 0, 1));
    assert_eq!(minutes[3].popped(), 0);
    // The day's statistics count the same completions, failures and waits.
    let stats = qless.stats(M + 150.0, "q", M).await.unwrap();
    assert_eq!(
        (stats.run.count, stats.failures, stats.wait.count),
        (1, 3, 4)
    );
    // The whole hour by default; another queue has nothing.
    let hour = qless.rates(M + 150.0, "q", 60).await.unwrap();
    assert_eq!(hour.len(), 60);
    assert_eq!(hour[0].start, 6120 - 59 * 60);
    assert_eq!(hour[59], minutes[3]);
    let other = qless.rates(M + 150.0, "other", 60).await.unwrap();
    assert!(
        other
            .iter()
            .all(|m| counts(m) == (0, 0, 0) && m.popped() == 0)
    );
}

#[tokio::test]
async fn waits_fall_in_the_buckets_of_the_day_statistics() {
    let (_redis, qless) = start().await;
    // Waits of 59 s, 2 min 5 s, 3 h and 9 days (counted in the last bucket, 6 days).
    let waits = [59.0, 125.0, 3.0 * 3600.0, 9.0 * 86_400.0];
    let popped_at = M + 10.0 * 86_400.0;
    for (i, wait) in waits.iter().enumerate() {
        let queue = format!("q{i}");
        put(&qless, popped_at - wait, &queue, &format!("j{i}")).await;
        assert_eq!(pop(&qless, popped_at, &queue, "w", 1).await.len(), 1);
        let minute = qless.rates(popped_at, &queue, 1).await.unwrap().remove(0);
        let bucket = minute.waits.iter().position(|&n| n == 1);
        assert_eq!(bucket, Some([59, 61, 121, 147][i]), "a wait of {wait} s");
        let day = qless.stats(popped_at, &queue, popped_at).await.unwrap();
        if i < 3 {
            assert_eq!(
                day.wait.histogram.iter().position(|&n| n == 1),
                bucket,
                "the day's statistics put a wait of {wait} s elsewhere"
            );
        }
    }
}

#[tokio::test]
async fn recurring_spawns_count_as_put() {
    let (_redis, qless) = start().await;
    let template = RecurArgs {
        queue: "ticks".into(),
        jid: "every-20s".into(),
        klass: "Tick".into(),
        data: "{}".into(),
        interval: 20.0,
        offset: 0.0,
        ..Default::default()
    };
    qless.recur(M, template).await.unwrap();
    // Due at M, M + 20, M + 40: spawned by the pop at M + 50.
    let popped = pop(&qless, M + 50.0, "ticks", "w", 10).await;
    assert_eq!(popped.len(), 3);
    let minute = qless.rates(M + 50.0, "ticks", 1).await.unwrap().remove(0);
    assert_eq!((minute.put, minute.popped()), (3, 3));
}

/// The calls of [`a_batch_counts_what_its_calls_count_one_by_one`], after `old` was
/// put into `q1` the minute before.
fn calls() -> Vec<(&'static str, Vec<String>)> {
    let put = |queue: &str, jid: &str| strs(&["", queue, jid, "K", "{}", "0"]);
    vec![
        ("put", put("q1", "a")),
        ("put", put("q2", "c")),
        ("pop", strs(&["q1", "w", "2"])),
        ("pop", strs(&["q2", "w", "1"])),
        ("complete", strs(&["a", "w", "q1", "{}"])),
        ("fail", strs(&["old", "w", "g", "boom"])),
        ("put", put("q1", "b")),
        ("put", put("q2", "d")),
        ("complete", strs(&["c", "w", "q2", "{}"])),
    ]
}

#[tokio::test]
async fn a_batch_counts_what_its_calls_count_one_by_one() {
    let (_one, alone) = start().await;
    let (_other, together) = start().await;
    // Jobs waiting since the minute before, popped within the batch.
    for qless in [&alone, &together] {
        put(qless, M - 30.0, "q1", "old").await;
    }
    for (name, args) in calls() {
        alone.call(name, M + 10.0, &args).await.unwrap();
    }
    let replies = together.call_many(M + 10.0, &calls()).await.unwrap();
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    for queue in ["q1", "q2"] {
        let one_by_one = alone.rates(M + 20.0, queue, 2).await.unwrap();
        let batched = together.rates(M + 20.0, queue, 2).await.unwrap();
        assert_eq!(one_by_one, batched, "{queue}");
    }
    let q1 = together.rates(M + 20.0, "q1", 2).await.unwrap();
    assert_eq!(counts(&q1[0]), (1, 0, 0));
    assert_eq!(counts(&q1[1]), (2, 1, 1));
    // `old` waited 40 s, `a` none.
    assert_eq!((q1[1].popped(), q1[1].waits[0], q1[1].waits[40]), (2, 1, 1));
    let q2 = together.rates(M + 20.0, "q2", 1).await.unwrap().remove(0);
    assert_eq!((counts(&q2), q2.popped()), ((2, 1, 0), 1));
    // A `rates` call in a batch sees the counts of the calls before it.
    let mut calls = calls();
    calls.truncate(4);
    calls.push(("rates", strs(&["q1", "1"])));
    let (_third, fresh) = start().await;
    put(&fresh, M - 30.0, "q1", "old").await;
    let replies = fresh.call_many(M + 10.0, &calls).await.unwrap();
    let Ok(redis::Value::Array(seen)) = &replies[4] else {
        panic!("rates answered {:?}", replies[4]);
    };
    let fields: Vec<String> = redis::from_redis_value(seen[1].clone()).unwrap();
    let mut pairs: Vec<&[String]> = fields.chunks(2).collect();
    pairs.sort();
    assert_eq!(pairs.concat(), strs(&["put", "1", "s0", "1", "s40", "1"]));
}

/// The keys holding per-minute counts, with their time to live.
fn rate_keys(redis: &RedisServer, pattern: &str) -> Vec<(String, i64)> {
    let mut conn = raw(redis);
    let mut keys: Vec<String> = conn.keys(pattern).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let ttl: i64 = conn.ttl(&key).unwrap();
            (key, ttl)
        })
        .collect()
}

#[tokio::test]
async fn a_queue_has_one_hash_a_minute_under_qlessds_prefix_that_expires_after_the_hour() {
    let (redis, qless) = start().await;
    for i in 0..300 {
        // Three minutes: 100 puts in each.
        put(&qless, M + f64::from(i) * 0.6, "q", &format!("j{i}")).await;
    }
    pop(&qless, M + 179.0, "q", "w", 300).await;
    let keys = rate_keys(&redis, "*rate:*");
    let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "qlessd:rate:6000:q",
            "qlessd:rate:6060:q",
            "qlessd:rate:6120:q"
        ]
    );
    // (Redis's own clock: a test's logical time never expires them early.)
    for (key, ttl) in &keys {
        assert!((3600..=3720).contains(ttl), "{key} lives {ttl} s");
    }
    // In a namespace, under the namespace's prefix (its hash tag).
    let spaced = connect(&redis, Some("ns")).await;
    put(&spaced, M, "q", "n1").await;
    let keys = rate_keys(&redis, "ql:{ns}:rate:*");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].0, "ql:{ns}:rate:6000:q");
    let minute = spaced.rates(M + 1.0, "q", 1).await.unwrap().remove(0);
    assert_eq!(minute.put, 1);
}

#[tokio::test]
async fn a_count_that_cannot_be_written_never_fails_the_call() {
    let (redis, qless) = start().await;
    let _: () = raw(&redis).set("qlessd:rate:6000:q", "not a hash").unwrap();
    put(&qless, M, "q", "a").await;
    assert_eq!(pop(&qless, M + 1.0, "q", "w", 1).await, strs(&["a"]));
    complete(&qless, M + 2.0, "a", "w", "q").await;
    let kept: String = raw(&redis).get("qlessd:rate:6000:q").unwrap();
    assert_eq!(kept, "not a hash");
}

#[tokio::test]
async fn malformed_rates_and_summaries_are_refused() {
    let (_redis, qless) = start().await;
    for minutes in ["0", "61", "1.5", "x", "nan", "inf"] {
        assert_error(
            qless.call("rates", M, strs(&["q", minutes])).await,
            &format!("Rates(): Arg \"minutes\" must be a whole number from 1 to 60: {minutes}"),
        );
    }
    assert_error(
        qless.call("rates", M, Vec::new()).await,
        "Queue(): no queue name provided",
    );
    for sample in ["0", "1001", "2.5", "x"] {
        assert_error(
            qless.call("failed.summary", M, strs(&[sample, "g"])).await,
            &format!(
                "FailedSummary(): Arg \"sample\" must be a whole number from 1 to 1000: {sample}"
            ),
        );
    }
    assert_error(
        qless.call("failed.summary", M, Vec::new()).await,
        "FailedSummary(): Arg \"sample\" must be a whole number from 1 to 1000: nil",
    );
}

/// Puts `jid` into `queue`, pops it and fails it into `group` at `now`.
async fn failed(qless: &Qless, now: f64, jid: &str, group: &str, message: &str) {
    put(qless, now, "q", jid).await;
    assert_eq!(pop(qless, now, "q", "w", 1).await, strs(&[jid]));
    qless
        .fail(now, jid, "w", group, message, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failure_group_is_described_by_its_first_and_last_failure_and_commonest_message() {
    let (_redis, qless) = start().await;
    let messages = [
        "refused", "timeout", "refused", "timeout", "timeout", "refused",
    ];
    for (i, message) in messages.iter().enumerate() {
        failed(
            &qless,
            100.0 + 10.0 * i as f64,
            &format!("f{i}"),
            "smtp",
            message,
        )
        .await;
    }
    failed(&qless, 500.5, "other", "disk", "full").await;
    let groups = strs(&["smtp", "disk", "none"]);
    let all = qless.failed_summary(600.0, &groups, 100).await.unwrap();
    assert_eq!(all.len(), 3);
    let smtp = &all[0];
    assert_eq!((smtp.group.as_str(), smtp.total), ("smtp", 6));
    assert_eq!((smtp.first, smtp.last), (Some(100.0), Some(150.0)));
    // Three each: the one that got to three first, counting from the newest, wins.
    assert_eq!(smtp.message.as_deref(), Some("timeout"));
    assert_eq!((smtp.count, smtp.sampled), (3, 6));
    let disk = &all[1];
    assert_eq!((disk.first, disk.last), (Some(500.0), Some(500.0)));
    assert_eq!((disk.message.as_deref(), disk.count), (Some("full"), 1));
    let none = &all[2];
    assert_eq!((none.total, none.first, none.last), (0, None, None));
    assert_eq!((none.message.as_deref(), none.sampled), (None, 0));
    // The message is counted over the newest jobs only: a bounded look.
    let newest = qless
        .failed_summary(600.0, &strs(&["smtp"]), 2)
        .await
        .unwrap();
    assert_eq!(newest[0].message.as_deref(), Some("refused"));
    assert_eq!(
        (newest[0].count, newest[0].sampled, newest[0].total),
        (1, 2, 6)
    );
    assert_eq!(newest[0].first, Some(100.0));
    // The oldest job leaves the group (put back): the group's first failure is the
    // next one.
    put(&qless, 700.0, "q", "f0").await;
    let after = qless
        .failed_summary(700.0, &strs(&["smtp"]), 100)
        .await
        .unwrap();
    assert_eq!((after[0].total, after[0].first), (5, Some(110.0)));
    // Asking about no group at all answers nothing.
    assert!(
        qless
            .failed_summary(700.0, &[], 10)
            .await
            .unwrap()
            .is_empty()
    );
}
