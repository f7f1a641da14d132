//! Script semantics (workers): the registry, listings, pruning and deregistration.

use qlessd::model::WorkerSummary;

use super::jobs::{config, job, pop, put, raw, start, strs};

fn summary(name: &str, running: i64, stalled: i64) -> WorkerSummary {
    WorkerSummary {
        name: name.into(),
        running,
        stalled,
    }
}

#[tokio::test]
async fn there_are_no_workers_at_first() {
    let (_redis, qless) = start().await;
    let reply = qless.call("workers", 0.0, &[]).await.unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    let reply = qless.call("workers", 0.0, &strs(&["ghost"])).await.unwrap();
    let value: serde_json::Value =
        serde_json::from_str(&redis::from_redis_value::<String>(reply).unwrap()).unwrap();
    assert_eq!(value, serde_json::json!({"jobs": {}, "stalled": {}}));
}

#[tokio::test]
async fn pop_registers_a_worker_but_put_does_not() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.worker = "putter".into();
    qless.put(0.0, args).await.unwrap();
    assert!(qless.workers(1.0).await.unwrap().is_empty());
    // even an empty pop registers
    assert!(pop(&qless, 2.0, "empty", "idle", 1).await.is_empty());
    pop(&qless, 3.0, "q", "busy", 1).await;
    assert_eq!(
        qless.workers(4.0).await.unwrap(),
        vec![summary("busy", 1, 0), summary("idle", 0, 0)]
    );
}

#[tokio::test]
async fn workers_are_listed_most_recently_seen_first_and_heartbeats_count() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    pop(&qless, 1.0, "q", "w1", 1).await;
    pop(&qless, 2.0, "q", "w2", 1).await;
    let names = |list: Vec<WorkerSummary>| list.into_iter().map(|w| w.name).collect::<Vec<_>>();
    assert_eq!(
        names(qless.workers(3.0).await.unwrap()),
        strs(&["w2", "w1"])
    );
    let jid = qless.worker(3.0, "w1").await.unwrap().jids[0].clone();
    qless.heartbeat(4.0, &jid, "w1", None).await.unwrap();
    assert_eq!(
        names(qless.workers(5.0).await.unwrap()),
        strs(&["w1", "w2"])
    );
}

#[tokio::test]
async fn a_worker_lists_its_running_and_stalled_jobs() {
    let (_redis, qless) = start().await;
    for jid in ["a", "b", "c"] {
        put(&qless, 0.0, "q", jid).await;
    }
    pop(&qless, 0.0, "q", "w", 1).await; // c, expires 60
    pop(&qless, 10.0, "q", "w", 1).await; // b, expires 70
    pop(&qless, 20.0, "q", "w", 1).await; // a, expires 80
    let jobs = qless.worker(30.0, "w").await.unwrap();
    // latest expiry first
    assert_eq!(jobs.jids, strs(&["a", "b", "c"]));
    assert!(jobs.stalled.is_empty());
    let jobs = qless.worker(65.0, "w").await.unwrap();
    assert_eq!(jobs.jids, strs(&["a", "b"]));
    assert_eq!(jobs.stalled, strs(&["c"]));
    assert_eq!(qless.workers(65.0).await.unwrap(), vec![summary("w", 2, 1)]);
}

#[tokio::test]
async fn workers_idle_longer_than_max_worker_age_are_forgotten() {
    let (redis, qless) = start().await;
    config(&qless, "max-worker-age", "100").await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "old", 1).await;
    pop(&qless, 50.0, "q", "young", 1).await;
    assert_eq!(qless.workers(99.0).await.unwrap().len(), 2);
    let left = qless.workers(100.0).await.unwrap();
    assert_eq!(left, vec![summary("young", 0, 0)]);
    let mut conn = raw(&redis);
    let exists: i64 = redis::cmd("EXISTS")
        .arg("ql:w:old:jobs")
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, 0);
}

#[tokio::test]
async fn workers_are_kept_for_a_day_by_default() {
    let (_redis, qless) = start().await;
    pop(&qless, 0.0, "q", "w", 1).await;
    assert_eq!(qless.workers(86399.0).await.unwrap().len(), 1);
    assert!(qless.workers(86400.0).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_deregistered_worker_leaves_the_listing_but_keeps_its_jobs() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    pop(&qless, 1.0, "q", "other", 1).await;
    qless.worker_deregister(2.0, &strs(&["w"])).await.unwrap();
    assert_eq!(
        qless.workers(3.0).await.unwrap(),
        vec![summary("other", 0, 0)]
    );
    assert_eq!(qless.worker(3.0, "w").await.unwrap().jids, strs(&["a"]));
}

#[tokio::test]
async fn jobs_leave_their_worker_on_complete_fail_retry_and_cancel() {
    let (_redis, qless) = start().await;
    for jid in ["a", "b", "c", "d"] {
        put(&qless, 0.0, "q", jid).await;
    }
    pop(&qless, 1.0, "q", "w", 4).await;
    assert_eq!(qless.worker(2.0, "w").await.unwrap().jids.len(), 4);
    super::jobs::complete(&qless, 2.0, "a", "w", "q").await;
    qless.fail(2.0, "b", "w", "g", "m", None).await.unwrap();
    qless
        .retry(
            2.0,
            qlessd::core::RetryArgs {
                jid: "c".into(),
                queue: "q".into(),
                worker: "w".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    qless.cancel(2.0, &strs(&["d"])).await.unwrap();
    assert!(qless.worker(3.0, "w").await.unwrap().jids.is_empty());
}
