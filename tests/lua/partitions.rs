//! Script semantics (fair queues, `lua/partitions.lua`): a queue's partitioned jobs
//! are served round robin across partitions, priority then time within each, with
//! per-partition concurrency and rate limits; unpartitioned jobs take a turn of their
//! own; stock `pop` is fair too; the queue's counts are unchanged; every way back
//! into `-work` (promotion, release, `next`, unfail, retry, timeout) files the job
//! under its partition; a namespace keeps the keys under its prefix.

use std::collections::BTreeMap;

use qlessd::core::{PartitionLimits, PutArgs, Qless};
use redis::Value;

use super::jobs::{finish, job, pop, put, raw, start};
use crate::support::{RedisServer, connect};

fn in_partition(queue: &str, jid: &str, partition: &str) -> PutArgs {
    PutArgs {
        partition: Some(partition.into()),
        ..job(queue, jid)
    }
}

/// Puts `n` jobs of `partition` (jids `<partition>-<i>`) in pipelined calls, all at
/// `now` (so in one partition they pop in no particular order).
async fn backlog(qless: &Qless, now: f64, queue: &str, partition: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let jobs = chunk
            .iter()
            .map(|i| {
                let jid = format!("{partition}-{i}");
                (in_partition(queue, &jid, partition), false)
            })
            .collect();
        for result in qless.put_many(now, jobs).await.unwrap() {
            result.unwrap();
        }
    }
}

/// The partition of each jid (`<partition>-<i>`).
fn partitions_of(jids: &[String]) -> Vec<String> {
    jids.iter()
        .map(|jid| {
            jid.rsplit_once('-')
                .map_or(jid.clone(), |(p, _)| p.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn three_partitions_are_served_in_turn_whatever_the_backlog() {
    let (_redis, qless) = start().await;
    backlog(&qless, 1.0, "q", "a", 10_000).await;
    backlog(&qless, 2.0, "q", "b", 3).await;
    backlog(&qless, 3.0, "q", "c", 3).await;
    // The queue counts every partitioned job as waiting.
    assert_eq!(qless.length(4.0, "q").await.unwrap(), 10_006);
    // A pop of 6 takes one job from each partition in turn.
    let first = pop(&qless, 5.0, "q", "w", 6).await;
    assert_eq!(partitions_of(&first), ["a", "b", "c", "a", "b", "c"]);
    // One job per pop keeps the turns.
    let mut one_by_one = Vec::new();
    for _ in 0..3 {
        one_by_one.extend(pop(&qless, 6.0, "q", "w", 1).await);
    }
    assert_eq!(partitions_of(&one_by_one), ["a", "b", "c"]);
    // Once b and c are done, a is served alone.
    let rest = pop(&qless, 7.0, "q", "w", 3).await;
    assert_eq!(partitions_of(&rest), ["a", "a", "a"]);
    assert_eq!(qless.length(8.0, "q").await.unwrap(), 10_006);
    let counts = qless.queue(8.0, "q").await.unwrap();
    assert_eq!(counts.waiting, 10_000 - 6);
}

#[tokio::test]
async fn priorities_order_the_jobs_within_a_partition_not_the_turns() {
    let (_redis, qless) = start().await;
    for (jid, partition, priority) in [
        ("a-low", "a", 0.0),
        ("a-high", "a", 10.0),
        ("b-low", "b", 0.0),
        ("b-mid", "b", 5.0),
    ] {
        let args = PutArgs {
            priority: Some(priority),
            ..in_partition("q", jid, partition)
        };
        qless.put(1.0, args).await.unwrap();
    }
    assert_eq!(
        pop(&qless, 2.0, "q", "w", 4).await,
        ["a-high", "b-mid", "a-low", "b-low"]
    );
    // A priority changed while waiting takes effect within its partition.
    backlog(&qless, 3.0, "q", "c", 3).await;
    qless.priority(4.0, "c-2", 50.0).await.unwrap();
    assert_eq!(pop(&qless, 5.0, "q", "w", 1).await, ["c-2"]);
}

#[tokio::test]
async fn unpartitioned_jobs_take_a_turn_of_their_own() {
    let (_redis, qless) = start().await;
    // Jobs waiting before the queue's first partitioned job take the turns of ''.
    put(&qless, 1.0, "q", "plain-0").await;
    put(&qless, 1.1, "q", "plain-1").await;
    for i in 0..5 {
        let jid = format!("a-{i}");
        qless
            .put(2.0 + f64::from(i) / 10.0, in_partition("q", &jid, "a"))
            .await
            .unwrap();
    }
    put(&qless, 3.0, "q", "plain-2").await;
    backlog(&qless, 4.0, "q", "b", 1).await;
    let jids = pop(&qless, 5.0, "q", "w", 7).await;
    assert_eq!(
        jids,
        ["plain-0", "a-0", "b-0", "plain-1", "a-1", "plain-2", "a-2"]
    );
    // Once the partitions are drained the queue is an ordinary one again.
    pop(&qless, 6.0, "q", "w", 10).await;
    put(&qless, 7.0, "q", "plain-3").await;
    assert_eq!(pop(&qless, 8.0, "q", "w", 5).await, ["plain-3"]);
}

#[tokio::test]
async fn jobs_that_left_the_queue_are_skipped_and_retries_come_back_in_turn() {
    let (_redis, qless) = start().await;
    for (i, jid) in ["a-0", "b-0", "a-1", "b-1", "a-2"].into_iter().enumerate() {
        let args = in_partition("q", jid, &jid[..1]);
        qless.put(1.0 + i as f64, args).await.unwrap();
    }
    qless.cancel(2.0, &["a-0".to_owned()]).await.unwrap();
    assert_eq!(pop(&qless, 3.0, "q", "w", 2).await, ["a-1", "b-0"]);
    // A retried job waits in its partition again.
    let retry = qlessd::core::RetryArgs {
        jid: "b-0".into(),
        queue: "q".into(),
        worker: "w".into(),
        delay: Some(0.0),
        group: None,
        message: None,
    };
    qless.retry(4.5, retry).await.unwrap();
    // (At the back of its partition, as a retry goes to the back of -work.)
    assert_eq!(pop(&qless, 5.0, "q", "w", 3).await, ["a-2", "b-1", "b-0"]);
}

#[tokio::test]
async fn concurrency_and_rate_limit_each_partition_across_two_gateways() {
    let (redis, one) = start().await;
    let two = connect(&redis, None).await;
    one.partitions_set(
        0.0,
        "q",
        PartitionLimits {
            concurrency: 2,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    backlog(&one, 1.0, "q", "a", 100).await;
    backlog(&one, 1.0, "q", "b", 100).await;
    // Two of a run at once, whichever gateway pops; b is still served.
    let a0 = pop(&one, 2.0, "q", "w1", 1).await;
    assert_eq!(partitions_of(&a0), ["a"]);
    assert_eq!(partitions_of(&pop(&two, 2.0, "q", "w2", 1).await), ["b"]);
    assert_eq!(
        partitions_of(&pop(&two, 2.0, "q", "w2", 10).await),
        ["a", "b"]
    );
    assert!(pop(&one, 2.5, "q", "w1", 10).await.is_empty());
    let listed = one.partitions_get(2.5, "q", 0, 10).await.unwrap();
    assert_eq!(listed.concurrency, Some(2));
    let by_name: BTreeMap<_, _> = listed
        .partitions
        .iter()
        .map(|p| (p.name.as_str(), (p.waiting, p.running, p.limited.is_some())))
        .collect();
    assert_eq!(by_name["a"], (98, Some(2), true));
    assert_eq!(by_name["b"], (98, Some(2), true));
    // A completion frees a slot: a pop after the recheck takes the next job of a.
    one.complete(3.0, finish(&a0[0], "w1", "q")).await.unwrap();
    assert_eq!(partitions_of(&pop(&two, 3.5, "q", "w2", 10).await), ["a"]);

    // A rate: 3 starts per 10 seconds per partition.
    one.partitions_set(
        10.0,
        "q",
        PartitionLimits {
            rate_jobs: 3,
            rate_seconds: 10.0,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut started = Vec::new();
    started.extend(pop(&one, 11.0, "q", "w1", 4).await);
    started.extend(pop(&two, 11.0, "q", "w2", 10).await);
    let mut counts = BTreeMap::new();
    for p in partitions_of(&started) {
        *counts.entry(p).or_insert(0) += 1;
    }
    assert_eq!(counts, BTreeMap::from([("a".into(), 3), ("b".into(), 3)]));
    assert!(pop(&two, 20.0, "q", "w2", 10).await.is_empty());
    // The window moves on: three more each.
    assert_eq!(pop(&one, 21.0, "q", "w1", 10).await.len(), 6);
}

async fn stock_pop(redis: &RedisServer, qless: &Qless, queue: &str, count: u32) -> Vec<String> {
    let reply: Value = redis::cmd("EVALSHA")
        .arg(qless.script().sha())
        .arg(0)
        .arg(&["pop", "10", queue, "stock-worker", &count.to_string()])
        .query(&mut raw(redis))
        .unwrap();
    let text = match reply {
        Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
        other => panic!("{other:?}"),
    };
    let jobs: serde_json::Value = serde_json::from_str(&text).unwrap();
    jobs.as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|job| job["jid"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_stock_pop_is_fair_and_sees_ordinary_jobs() {
    let (redis, qless) = start().await;
    backlog(&qless, 1.0, "q", "a", 50).await;
    backlog(&qless, 2.0, "q", "b", 2).await;
    let jids = stock_pop(&redis, &qless, "q", 4).await;
    assert_eq!(partitions_of(&jids), ["a", "b", "a", "b"]);
    // The job a stock client reads is an ordinary one (the partition is a field
    // beside the protocol's).
    let job: serde_json::Value = {
        let reply: Value = redis::cmd("EVALSHA")
            .arg(qless.script().sha())
            .arg(0)
            .arg(&["get", "10", jids[0].as_str()])
            .query(&mut raw(&redis))
            .unwrap();
        match reply {
            Value::BulkString(bytes) => serde_json::from_slice(&bytes).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(job["state"], "running");
    assert!(job.get("partition").is_none(), "{job}");
}

/// Pops until `jid` comes out (at most `within` pops of one job each); returns how
/// many pops that took.
async fn turns_until(qless: &Qless, now: f64, jid: &str, within: usize) -> usize {
    for turn in 1..=within {
        let jids = pop(qless, now, "q", "w", 1).await;
        if jids.iter().any(|j| j == jid) {
            return turn;
        }
    }
    panic!("{jid} not popped within {within} pops");
}

#[tokio::test]
async fn every_way_back_into_the_queue_files_the_job_under_its_partition() {
    let (_redis, qless) = start().await;
    backlog(&qless, 1.0, "q", "a", 1000).await;
    // A delayed job is promoted into its partition.
    let delayed = PutArgs {
        delay: 5.0,
        ..in_partition("q", "b-delayed", "b")
    };
    qless.put(1.0, delayed).await.unwrap();
    assert!(turns_until(&qless, 10.0, "b-delayed", 2).await <= 2);
    // A job waiting on another is released into its partition.
    qless
        .put(11.0, in_partition("q", "b-parent", "b"))
        .await
        .unwrap();
    let child = PutArgs {
        depends: Some(vec!["b-parent".into()]),
        ..in_partition("q", "b-child", "b")
    };
    qless.put(11.0, child).await.unwrap();
    turns_until(&qless, 12.0, "b-parent", 2).await;
    qless
        .complete(13.0, finish("b-parent", "w", "q"))
        .await
        .unwrap();
    assert!(turns_until(&qless, 14.0, "b-child", 2).await <= 2);
    // Completed with `next`, it waits in its partition in the next queue too (here: q).
    let next = qlessd::core::CompleteArgs {
        next: Some("q".into()),
        ..finish("b-child", "w", "q")
    };
    qless.complete(15.0, next).await.unwrap();
    assert!(turns_until(&qless, 16.0, "b-child", 2).await <= 2);
    // Failed and unfailed.
    qless
        .fail(17.0, "b-child", "w", "oops", "failed", None)
        .await
        .unwrap();
    assert_eq!(qless.unfail(18.0, "q", "oops", 10).await.unwrap(), 1);
    assert!(turns_until(&qless, 19.0, "b-child", 2).await <= 2);
    // Timed out (put back at the head of -work, stalled): at its partition's head.
    qless.timeout(20.0, &["b-child".to_owned()]).await.unwrap();
    assert!(turns_until(&qless, 21.0, "b-child", 2).await <= 2);
}

#[tokio::test]
async fn a_namespace_keeps_its_partitions_under_its_own_prefix() {
    let redis = RedisServer::start();
    let qless = connect(&redis, Some("tenant")).await;
    backlog(&qless, 1.0, "q", "a", 20).await;
    backlog(&qless, 2.0, "q", "b", 1).await;
    let jids = pop(&qless, 3.0, "q", "w", 2).await;
    assert_eq!(partitions_of(&jids), ["a", "b"]);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw(&redis)).unwrap();
    assert!(
        keys.iter().all(|key| key.starts_with("ql:{tenant}:")),
        "{keys:?}"
    );
}
