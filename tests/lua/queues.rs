//! Script semantics (queues): counts, listings, pausing, concurrency caps, failure
//! groups and statistics.

use std::collections::BTreeSet;

use qlessd::core::{Listing, RecurArgs};
use serde_json::{Value, json};

use super::jobs::{assert_error, complete, config, job, pop, put, start, state, strs};

fn raw_json(value: redis::Value) -> Value {
    serde_json::from_str(&redis::from_redis_value::<String>(value).unwrap()).unwrap()
}

fn recur_args(queue: &str, jid: &str, interval: f64, offset: f64) -> RecurArgs {
    RecurArgs {
        queue: queue.into(),
        jid: jid.into(),
        klass: "K".into(),
        data: "{}".into(),
        interval,
        offset,
        ..Default::default()
    }
}

/// A queue `q` at t=80 with one job in every state: `a` stalled (lock expired at 60),
/// `b` running (until 110), `c` waiting, `d` scheduled, `e` depends, `r` recurring.
async fn busy_queue(qless: &qlessd::core::Qless) {
    put(qless, 0.0, "q", "a").await;
    assert_eq!(pop(qless, 0.0, "q", "w", 1).await, strs(&["a"]));
    put(qless, 1.0, "q", "b").await;
    assert_eq!(pop(qless, 50.0, "q", "w", 1).await, strs(&["b"]));
    put(qless, 2.0, "q", "c").await;
    let mut d = job("q", "d");
    d.delay = 1000.0;
    qless.put(3.0, d).await.unwrap();
    let mut e = job("q", "e");
    e.depends = Some(strs(&["c"]));
    qless.put(4.0, e).await.unwrap();
    qless
        .recur(5.0, recur_args("q", "r", 60.0, 1000.0))
        .await
        .unwrap();
}

#[tokio::test]
async fn queue_counts_have_exactly_eight_keys() {
    let (_redis, qless) = start().await;
    busy_queue(&qless).await;
    let counts = raw_json(qless.call("queues", 80.0, &strs(&["q"])).await.unwrap());
    assert_eq!(
        counts,
        json!({"name": "q", "waiting": 1, "stalled": 1, "running": 1, "scheduled": 1,
               "depends": 1, "recurring": 1, "paused": false})
    );
    let all = raw_json(qless.call("queues", 80.0, &[]).await.unwrap());
    assert_eq!(all, json!([counts]));
}

#[tokio::test]
async fn queues_is_empty_braces_when_there_are_none() {
    let (_redis, qless) = start().await;
    let reply = qless.call("queues", 0.0, &[]).await.unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    let unknown = qless.queue(0.0, "nope").await.unwrap();
    assert_eq!(
        (unknown.waiting, unknown.running, unknown.paused),
        (0, 0, false)
    );
}

#[tokio::test]
async fn queues_are_listed_in_the_order_first_seen() {
    let (_redis, qless) = start().await;
    put(&qless, 5.0, "zeta", "a").await;
    put(&qless, 6.0, "alpha", "b").await;
    put(&qless, 7.0, "zeta", "c").await;
    qless
        .recur(8.0, recur_args("mid", "r", 60.0, 0.0))
        .await
        .unwrap();
    let names: Vec<_> = qless
        .queues(9.0)
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, strs(&["zeta", "alpha", "mid"]));
    let zeta = qless.queue(9.0, "zeta").await.unwrap();
    assert_eq!(zeta.waiting, 2);
}

#[tokio::test]
async fn queues_promotes_due_scheduled_jobs() {
    let (_redis, qless) = start().await;
    let mut a = job("q", "a");
    a.delay = 10.0;
    qless.put(0.0, a).await.unwrap();
    let counts = qless.queue(10.0, "q").await.unwrap();
    assert_eq!((counts.waiting, counts.scheduled), (1, 0));
    assert_eq!(state(&qless, "a").await, "waiting");
}

#[tokio::test]
async fn length_counts_running_waiting_and_scheduled_jobs() {
    let (_redis, qless) = start().await;
    busy_queue(&qless).await;
    // a and b locked, c waiting, d scheduled; e (depends) and r (recurring) don't count
    assert_eq!(qless.length(80.0, "q").await.unwrap(), 4);
    assert_eq!(qless.length(80.0, "other").await.unwrap(), 0);
}

#[tokio::test]
async fn jobs_lists_each_state_of_a_queue() {
    let (_redis, qless) = start().await;
    busy_queue(&qless).await;
    let list = |listing| qless.jobs(80.0, listing, "q", 0, 25);
    assert_eq!(list(Listing::Running).await.unwrap(), strs(&["b"]));
    assert_eq!(list(Listing::Stalled).await.unwrap(), strs(&["a"]));
    assert_eq!(list(Listing::Scheduled).await.unwrap(), strs(&["d"]));
    assert_eq!(list(Listing::Depends).await.unwrap(), strs(&["e"]));
    // recurring templates are listed even when their next run is in the future
    assert_eq!(list(Listing::Recurring).await.unwrap(), strs(&["r"]));
}

#[tokio::test]
async fn running_jobs_are_listed_by_expiry() {
    let (_redis, qless) = start().await;
    for (t, jid) in [(0.0, "a"), (1.0, "b"), (2.0, "c")] {
        put(&qless, t, "q", jid).await;
    }
    pop(&qless, 3.0, "q", "w", 1).await; // a, expires 63
    pop(&qless, 1.0, "q", "w", 1).await; // b, expires 61
    pop(&qless, 2.0, "q", "w", 1).await; // c, expires 62
    assert_eq!(
        qless
            .jobs(10.0, Listing::Running, "q", 0, 25)
            .await
            .unwrap(),
        strs(&["b", "c", "a"])
    );
    assert_eq!(
        qless.jobs(10.0, Listing::Running, "q", 1, 1).await.unwrap(),
        strs(&["c"])
    );
    assert_eq!(
        qless
            .jobs(61.5, Listing::Stalled, "q", 0, 25)
            .await
            .unwrap(),
        strs(&["b"])
    );
}

#[tokio::test]
async fn jobs_scheduled_no_longer_lists_due_jobs() {
    let (_redis, qless) = start().await;
    for (jid, delay) in [("a", 10.0), ("b", 20.0), ("c", 30.0)] {
        let mut args = job("q", jid);
        args.delay = delay;
        qless.put(0.0, args).await.unwrap();
    }
    assert_eq!(
        qless
            .jobs(0.0, Listing::Scheduled, "q", 0, 25)
            .await
            .unwrap(),
        strs(&["a", "b", "c"])
    );
    assert_eq!(
        qless
            .jobs(20.0, Listing::Scheduled, "q", 0, 25)
            .await
            .unwrap(),
        strs(&["c"])
    );
    assert_eq!(state(&qless, "b").await, "waiting");
}

#[tokio::test]
async fn completed_jobs_are_listed_newest_first() {
    let (_redis, qless) = start().await;
    for (i, jid) in ["a", "b", "c"].into_iter().enumerate() {
        put(&qless, 0.0, "q", jid).await;
        pop(&qless, i as f64, "q", "w", 1).await;
        complete(&qless, 10.0 + i as f64, jid, "w", "q").await;
    }
    assert_eq!(
        qless.jobs_complete(20.0, 0, 25).await.unwrap(),
        strs(&["c", "b", "a"])
    );
    assert_eq!(qless.jobs_complete(20.0, 1, 1).await.unwrap(), strs(&["b"]));
}

#[tokio::test]
async fn a_paused_queue_pops_nothing_and_registers_no_worker() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    qless.pause(1.0, &strs(&["q"])).await.unwrap();
    assert!(qless.queue(1.0, "q").await.unwrap().paused);
    assert!(pop(&qless, 2.0, "q", "w", 5).await.is_empty());
    assert!(qless.workers(2.0).await.unwrap().is_empty());
    // peek ignores the pause
    assert_eq!(qless.peek(2.0, "q", 5).await.unwrap().len(), 1);
    qless.unpause(3.0, &strs(&["q"])).await.unwrap();
    assert!(!qless.queue(3.0, "q").await.unwrap().paused);
    assert_eq!(pop(&qless, 4.0, "q", "w", 5).await, strs(&["a"]));
}

#[tokio::test]
async fn a_forgotten_queue_leaves_the_listing_but_keeps_its_jobs() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "keep", "b").await;
    qless.queue_forget(1.0, &strs(&["q"])).await.unwrap();
    let names: Vec<_> = qless
        .queues(2.0)
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, strs(&["keep"]));
    assert_eq!(qless.length(2.0, "q").await.unwrap(), 1);
    assert_eq!(pop(&qless, 3.0, "q", "w", 1).await, strs(&["a"]));
}

#[tokio::test]
async fn max_concurrency_caps_unexpired_locks() {
    let (_redis, qless) = start().await;
    config(&qless, "q-max-concurrency", "1").await;
    for jid in ["a", "b", "c"] {
        put(&qless, 0.0, "q", jid).await;
    }
    assert_eq!(pop(&qless, 1.0, "q", "w", 5).await.len(), 1);
    assert!(pop(&qless, 2.0, "q", "w", 5).await.is_empty());
    // the first lock expired at 61: it no longer counts
    assert_eq!(pop(&qless, 62.0, "q", "w2", 5).await.len(), 1);
    assert!(pop(&qless, 63.0, "q", "w2", 5).await.is_empty());
    // other queues are not capped
    for jid in ["x", "y"] {
        put(&qless, 0.0, "other", jid).await;
    }
    assert_eq!(pop(&qless, 64.0, "other", "w", 5).await.len(), 2);
}

#[tokio::test]
async fn failed_counts_groups_and_lists_newest_failures_first() {
    let (_redis, qless) = start().await;
    let reply = qless.call("failed", 0.0, &[]).await.unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    for jid in ["a", "b", "c"] {
        put(&qless, 0.0, "q", jid).await;
    }
    let popped = pop(&qless, 1.0, "q", "w", 3).await;
    assert_eq!(popped, strs(&["c", "b", "a"]));
    qless.fail(2.0, "a", "w", "g1", "m", None).await.unwrap();
    qless.fail(3.0, "b", "w", "g1", "m", None).await.unwrap();
    qless.fail(4.0, "c", "w", "g2", "m", None).await.unwrap();
    let groups = qless.failed(5.0).await.unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!((groups["g1"], groups["g2"]), (2, 1));
    let page = qless.failed_group(5.0, "g1", 0, 25).await.unwrap();
    assert_eq!(page.total, 2);
    assert_eq!(page.jids, strs(&["b", "a"]));
    assert_eq!(
        qless.failed_group(5.0, "g1", 1, 1).await.unwrap().jids,
        strs(&["a"])
    );
    let empty = raw_json(qless.call("failed", 5.0, &strs(&["none"])).await.unwrap());
    assert_eq!(empty, json!({"total": 0, "jobs": {}}));
}

#[tokio::test]
async fn unfail_moves_the_oldest_failures_back_first() {
    let (_redis, qless) = start().await;
    for jid in ["a", "b", "c"] {
        put(&qless, 0.0, "q", jid).await;
    }
    pop(&qless, 1.0, "q", "w", 3).await;
    qless.fail(2.0, "a", "w", "g", "m", None).await.unwrap();
    qless.fail(3.0, "b", "w", "g", "m", None).await.unwrap();
    qless.fail(4.0, "c", "w", "g", "m", None).await.unwrap();
    assert_eq!(qless.unfail(5.0, "back", "g", 2).await.unwrap(), 2);
    assert_eq!(state(&qless, "a").await, "waiting");
    assert_eq!(state(&qless, "b").await, "waiting");
    assert_eq!(state(&qless, "c").await, "failed");
    let page = qless.failed_group(6.0, "g", 0, 25).await.unwrap();
    assert_eq!((page.total, page.jids), (1, strs(&["c"])));
    let a = super::jobs::get(&qless, "a").await;
    assert_eq!(a.queue, "back");
    assert_eq!(a.worker, "");
    assert_eq!(a.history.last().unwrap().what, "put");
    assert_eq!(a.history.last().unwrap().extra["q"], json!("back"));
    // both were put back at the same time: ties go by jid, descending
    assert_eq!(pop(&qless, 7.0, "back", "w", 5).await, strs(&["b", "a"]));
    assert_eq!(qless.unfail(8.0, "back", "g", 25).await.unwrap(), 1);
    assert!(qless.failed(9.0).await.unwrap().is_empty());
}

#[tokio::test]
async fn stats_summarise_wait_and_run_samples() {
    let (_redis, qless) = start().await;
    for i in 0..20 {
        put(&qless, 0.0, "q", &format!("j{i:02}")).await;
    }
    for i in 0..20 {
        let t = i as f64;
        let popped = pop(&qless, t, "q", "w", 1).await;
        complete(&qless, 2.0 * t, &popped[0], "w", "q").await;
    }
    let stats = qless.stats(100.0, "q", 50.0).await.unwrap();
    for timing in [&stats.wait, &stats.run] {
        assert_eq!(timing.count, 20);
        assert_eq!(timing.mean, 9.5);
        assert!((timing.std - 35f64.sqrt()).abs() < 1e-12, "{}", timing.std);
        assert_eq!(format!("{:.12}", timing.std - 5e-13), "5.916079783099");
        assert_eq!(timing.histogram.len(), 148);
        assert!(
            timing.histogram[..20].iter().all(|&n| n == 1),
            "{:?}",
            timing.histogram
        );
        assert!(timing.histogram[20..].iter().all(|&n| n == 0));
    }
    // another day has nothing
    let other = qless.stats(100.0, "q", 86400.0).await.unwrap();
    assert_eq!(other.wait.count, 0);
    assert_eq!(other.run.histogram, vec![0; 148]);
}

#[tokio::test]
async fn stats_buckets_minutes_hours_and_days() {
    let (_redis, qless) = start().await;
    for (i, wait) in [59.0, 60.0, 3599.0, 3600.0, 86399.0]
        .into_iter()
        .enumerate()
    {
        let jid = format!("j{i}");
        put(&qless, 0.0, &jid, &jid).await;
        pop(&qless, wait, &jid, "w", 1).await;
    }
    let mut histogram = vec![0i64; 148];
    let mut total = 0;
    for i in 0..5 {
        let q = format!("j{i}");
        let stats = qless.stats(0.0, &q, 0.0).await.unwrap();
        for (slot, n) in stats.wait.histogram.iter().enumerate() {
            histogram[slot] += n;
            total += n;
        }
    }
    assert_eq!(total, 5);
    // s59, m1, m59, h1, h23
    for slot in [59, 60, 118, 119, 141] {
        assert_eq!(histogram[slot], 1, "slot {slot}: {histogram:?}");
    }
}

#[tokio::test]
async fn stats_count_failures_failed_jobs_and_retries() {
    let (_redis, qless) = start().await;
    for jid in ["a", "b", "c"] {
        put(&qless, 0.0, "q", jid).await;
    }
    pop(&qless, 1.0, "q", "w", 3).await;
    qless.fail(2.0, "a", "w", "g", "m", None).await.unwrap();
    qless.fail(3.0, "b", "w", "g", "m", None).await.unwrap();
    // b is put back: one less currently failed
    put(&qless, 4.0, "q", "b").await;
    // c's lock expires at 61: the notice counts as a retry
    pop(&qless, 61.0, "q", "w2", 1).await;
    let stats = qless.stats(70.0, "q", 0.0).await.unwrap();
    assert_eq!((stats.failures, stats.failed, stats.retries), (2, 1, 1));
    let raw = raw_json(qless.call("stats", 70.0, &strs(&["q", "0"])).await.unwrap());
    let keys: BTreeSet<&str> = raw
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["failed", "failures", "retries", "run", "wait"]
            .into_iter()
            .collect()
    );
    let wait_keys: BTreeSet<&str> = raw["wait"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        wait_keys,
        ["count", "histogram", "mean", "std"].into_iter().collect()
    );
}

#[tokio::test]
async fn a_per_queue_heartbeat_overrides_the_global_one() {
    let (_redis, qless) = start().await;
    config(&qless, "q-heartbeat", "7").await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "r", "b").await;
    assert_eq!(qless.pop(10.0, "q", "w", 1).await.unwrap()[0].expires, 17.0);
    assert_eq!(qless.pop(10.0, "r", "w", 1).await.unwrap()[0].expires, 70.0);
    assert_eq!(qless.heartbeat(12.0, "a", "w", None).await.unwrap(), 19);
    assert_error(qless.pop(0.0, "", "w", 1).await, "no queue name provided");
}
