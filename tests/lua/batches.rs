//! Batches (`lua/batches.lua`): one call puts every job and the record or nothing; the
//! counts move as jobs end, through whichever command ends them; each callback is put
//! exactly once by the call that settles the batch.

use qlessd::core::batches::{CallbackKind, NewBatch};
use qlessd::core::{PutArgs, Qless};
use qlessd::model::BatchView;
use serde_json::Value;

use super::jobs::{assert_error, complete, get, job, pop, put, raw, start, state, strs};
use super::malformed::snapshot;

fn callback(queue: &str, jid: &str, data: &str) -> PutArgs {
    PutArgs {
        data: data.into(),
        ..job(queue, jid)
    }
}

fn batch(bid: &str, jids: &[&str]) -> NewBatch {
    NewBatch {
        bid: bid.into(),
        description: format!("batch {bid}"),
        parent: None,
        jobs: jids.iter().map(|jid| job("work", jid)).collect(),
        callbacks: vec![
            (
                CallbackKind::OnSuccess,
                callback("done", &format!("{bid}-success"), r#"{"say": "yes"}"#),
            ),
            (
                CallbackKind::OnComplete,
                callback("done", &format!("{bid}-complete"), "{}"),
            ),
            (
                CallbackKind::OnDeath,
                callback("done", &format!("{bid}-death"), "{}"),
            ),
        ],
    }
}

async fn view(qless: &Qless, bid: &str) -> BatchView {
    qless
        .batch_get(0.0, bid, 0, 1000)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("batch {bid} should exist"))
}

async fn exists(qless: &Qless, jid: &str) -> bool {
    qless.get(0.0, jid).await.unwrap().is_some()
}

fn data(job: &qlessd::model::Job) -> Value {
    serde_json::from_str(job.data.get()).unwrap()
}

/// Pops and completes every job of `queue`, one at a time.
async fn work_off(qless: &Qless, now: f64, queue: &str) -> usize {
    let mut done = 0;
    loop {
        let jids = pop(qless, now, queue, "w", 1).await;
        let Some(jid) = jids.first() else {
            return done;
        };
        complete(qless, now, jid, "w", queue).await;
        done += 1;
    }
}

#[tokio::test]
async fn a_batch_puts_every_job_and_fires_success_and_complete_once_at_the_last_completion() {
    let (_redis, qless) = start().await;
    let jids = qless
        .batch_open(1.0, &batch("b1", &["a", "b", "c"]))
        .await
        .unwrap();
    assert_eq!(jids, ["a", "b", "c"]);
    for jid in &jids {
        assert_eq!(state(&qless, jid).await, "waiting");
        assert_eq!(get(&qless, jid).await.batch.as_deref(), Some("b1"));
    }

    for jid in pop(&qless, 2.0, "work", "w", 2).await {
        complete(&qless, 3.0, &jid, "w", "work").await;
    }
    assert!(!exists(&qless, "b1-success").await);
    assert!(!exists(&qless, "b1-complete").await);
    let before = view(&qless, "b1").await;
    assert_eq!(before.state, "open");
    assert_eq!(
        (
            before.counts.total,
            before.counts.completed,
            before.counts.waiting
        ),
        (3, 2, 1)
    );
    assert_eq!(before.callbacks["on_success"].state, "pending");

    assert_eq!(work_off(&qless, 4.0, "work").await, 1);
    let after = view(&qless, "b1").await;
    assert_eq!(after.state, "settled");
    assert_eq!(after.settled, Some(4.0));
    assert_eq!(after.succeeded, Some(4.0));
    assert_eq!(after.callbacks["on_success"].state, "fired");
    assert_eq!(after.callbacks["on_complete"].state, "fired");
    assert_eq!(after.callbacks["on_death"].state, "pending");
    let success = get(&qless, "b1-success").await;
    assert_eq!(success.queue, "done");
    let data = data(&success);
    assert_eq!(data["say"], "yes", "its own data is kept");
    assert_eq!(data["batch"]["bid"], "b1");
    assert_eq!(data["batch"]["total"], 3);
    assert_eq!(data["batch"]["completed"], 3);
    assert_eq!(data["batch"]["failed"], 0);
    assert_eq!(data["batch"]["failed_jids"], serde_json::json!([]));
    assert!(exists(&qless, "b1-complete").await);
    assert!(!exists(&qless, "b1-death").await);

    // The callbacks are ordinary jobs: completing them does not fire anything again.
    assert_eq!(work_off(&qless, 5.0, "done").await, 2);
    let last = view(&qless, "b1").await;
    assert_eq!(last.counts.completed, 3);
}

#[tokio::test]
async fn a_bad_or_conflicting_batch_writes_nothing() {
    let (redis, qless) = start().await;
    put(&qless, 1.0, "work", "taken").await;
    let before = snapshot(&redis);
    // A jid that exists.
    assert_error(
        qless.batch_open(2.0, &batch("b", &["new", "taken"])).await,
        "Job taken already exists",
    );
    // A jid given twice.
    assert_error(
        qless.batch_open(2.0, &batch("b", &["x", "x"])).await,
        "given twice",
    );
    // A callback's jid among the jobs.
    let mut clash = batch("b", &["b-success"]);
    clash.jobs[0].jid = "b-success".into();
    assert_error(qless.batch_open(2.0, &clash).await, "given twice");
    // A malformed put anywhere.
    let mut bad = batch("b", &["p", "q"]);
    bad.jobs[1].data = "{not json".into();
    assert_error(qless.batch_open(2.0, &bad).await, "not JSON");
    // A callback whose data is not an object.
    let mut bad = batch("b", &["p"]);
    bad.callbacks[0].1.data = "[1]".into();
    assert_error(qless.batch_open(2.0, &bad).await, "JSON object");
    // A parent that does not exist.
    let mut orphan = batch("b", &["p"]);
    orphan.parent = Some("nope".into());
    assert_error(
        qless.batch_open(2.0, &orphan).await,
        "Batch nope does not exist",
    );
    assert_eq!(snapshot(&redis), before, "nothing was written");
    // The same bid twice.
    qless.batch_open(3.0, &batch("b", &["p"])).await.unwrap();
    assert_error(
        qless.batch_open(3.0, &batch("b", &["r"])).await,
        "Batch b already exists",
    );
}

#[tokio::test]
async fn a_death_fires_on_death_once_and_an_unfailed_job_completing_fires_on_success_later() {
    let (redis, qless) = start().await;
    qless
        .batch_open(1.0, &batch("b", &["a", "b", "c"]))
        .await
        .unwrap();
    let popped = pop(&qless, 2.0, "work", "w", 3).await;
    assert_eq!(popped.len(), 3);
    qless
        .fail(3.0, "a", "w", "boom", "it broke", None)
        .await
        .unwrap();
    assert!(
        exists(&qless, "b-death").await,
        "on_death at the first death"
    );
    let death = data(&get(&qless, "b-death").await);
    assert_eq!(death["batch"]["failed_jids"], serde_json::json!(["a"]));
    // A second death fires nothing more.
    qless
        .fail(3.5, "b", "w", "boom", "it broke too", None)
        .await
        .unwrap();
    let mut conn = raw(&redis);
    let waiting: Vec<String> = redis::cmd("ZRANGE")
        .arg("ql:q:done-work")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(waiting, ["b-death"]);
    complete(&qless, 4.0, "c", "w", "work").await;
    let settled = view(&qless, "b").await;
    assert_eq!(settled.state, "settled");
    assert_eq!((settled.counts.completed, settled.counts.failed), (1, 2));
    assert!(exists(&qless, "b-complete").await);
    assert!(!exists(&qless, "b-success").await);
    let complete_data = data(&get(&qless, "b-complete").await);
    assert_eq!(complete_data["batch"]["failed"], 2);

    // Unfail both and complete them: success after all.
    assert_eq!(qless.unfail(5.0, "work", "boom", 10).await.unwrap(), 2);
    let reopened = view(&qless, "b").await;
    assert_eq!((reopened.counts.failed, reopened.counts.waiting), (0, 2));
    assert_eq!(reopened.state, "settled", "on_complete is not taken back");
    assert_eq!(work_off(&qless, 6.0, "work").await, 2);
    let succeeded = view(&qless, "b").await;
    assert_eq!(succeeded.succeeded, Some(6.0));
    assert!(exists(&qless, "b-success").await);
    assert_eq!(succeeded.callbacks["on_success"].state, "fired");
}

#[tokio::test]
async fn retries_used_up_count_as_a_death() {
    let (_redis, qless) = start().await;
    let mut one = batch("b", &["a"]);
    one.jobs[0].retries = Some(0);
    qless.batch_open(1.0, &one).await.unwrap();
    pop(&qless, 2.0, "work", "w", 1).await;
    let args = qlessd::core::RetryArgs {
        jid: "a".into(),
        queue: "work".into(),
        worker: "w".into(),
        delay: Some(0.0),
        group: None,
        message: None,
    };
    assert_eq!(qless.retry(3.0, args).await.unwrap(), -1);
    assert_eq!(state(&qless, "a").await, "failed");
    assert!(exists(&qless, "b-death").await);
    assert!(exists(&qless, "b-complete").await);
    assert!(!exists(&qless, "b-success").await);
}

#[tokio::test]
async fn an_empty_batch_settles_at_once_and_takes_no_more_jobs() {
    let (_redis, qless) = start().await;
    let jids = qless.batch_open(1.0, &batch("e", &[])).await.unwrap();
    assert!(jids.is_empty());
    let settled = view(&qless, "e").await;
    assert_eq!(settled.state, "settled");
    assert!(exists(&qless, "e-success").await);
    assert!(exists(&qless, "e-complete").await);
    assert_error(
        qless.batch_add(2.0, "e", &[job("work", "late")]).await,
        "Batch e is settled",
    );
    assert!(!exists(&qless, "late").await);
    assert_error(
        qless.batch_add(2.0, "nope", &[job("work", "late")]).await,
        "does not exist",
    );
}

#[tokio::test]
async fn a_running_job_may_add_jobs_and_the_batch_waits_for_them() {
    let (_redis, qless) = start().await;
    qless.batch_open(1.0, &batch("f", &["seed"])).await.unwrap();
    assert_eq!(pop(&qless, 2.0, "work", "w", 1).await, ["seed"]);
    let added = qless
        .batch_add(3.0, "f", &[job("work", "f1"), job("work", "f2")])
        .await
        .unwrap();
    assert_eq!(added, ["f1", "f2"]);
    complete(&qless, 4.0, "seed", "w", "work").await;
    assert!(
        !exists(&qless, "f-complete").await,
        "two jobs are still to run"
    );
    assert_eq!(view(&qless, "f").await.counts.total, 3);
    assert_eq!(work_off(&qless, 5.0, "work").await, 2);
    assert!(exists(&qless, "f-success").await);
    let jobs: Vec<String> = view(&qless, "f")
        .await
        .jobs
        .into_iter()
        .map(|job| job.jid)
        .collect();
    assert_eq!(jobs, ["seed", "f1", "f2"], "in the order they joined");
}

#[tokio::test]
async fn a_parent_batch_fires_only_after_its_children() {
    let (_redis, qless) = start().await;
    qless.batch_open(1.0, &batch("p", &["p1"])).await.unwrap();
    let mut child = batch("c", &["c1"]);
    child.parent = Some("p".into());
    child.jobs[0].queue = "slow".into();
    qless.batch_open(1.0, &child).await.unwrap();
    assert_eq!(view(&qless, "p").await.children, ["c"]);
    assert_eq!(view(&qless, "c").await.parent.as_deref(), Some("p"));

    assert_eq!(work_off(&qless, 2.0, "work").await, 1);
    assert!(!exists(&qless, "p-complete").await, "the child is not done");
    assert_eq!(work_off(&qless, 3.0, "slow").await, 1);
    assert!(exists(&qless, "c-success").await);
    assert!(exists(&qless, "p-success").await);
    // A child's death reaches the parent's on_death.
    let mut dying = batch("q", &[]);
    dying.jobs = vec![job("q", "q1")];
    qless.batch_open(5.0, &dying).await.unwrap();
    let mut kid = batch("k", &["k1"]);
    kid.parent = Some("q".into());
    kid.jobs[0].queue = "kq".into();
    qless.batch_open(5.0, &kid).await.unwrap();
    pop(&qless, 6.0, "kq", "w", 1).await;
    qless.fail(7.0, "k1", "w", "g", "m", None).await.unwrap();
    assert!(exists(&qless, "k-death").await);
    assert!(exists(&qless, "q-death").await);
}

#[tokio::test]
async fn canceling_a_batch_cancels_what_has_not_started_and_fires_nothing() {
    let (_redis, qless) = start().await;
    qless
        .batch_open(1.0, &batch("x", &["x1", "x2", "x3"]))
        .await
        .unwrap();
    let running = pop(&qless, 2.0, "work", "w", 1).await.remove(0);
    assert_eq!(qless.batch_cancel(3.0, "x").await.unwrap(), Some(2));
    for jid in ["x1", "x2", "x3"] {
        assert_eq!(exists(&qless, jid).await, jid == running, "{jid}");
    }
    assert_eq!(state(&qless, &running).await, "running");
    complete(&qless, 4.0, &running, "w", "work").await;
    let canceled = view(&qless, "x").await;
    assert_eq!(canceled.state, "canceled");
    assert_eq!(
        (canceled.counts.completed, canceled.counts.canceled),
        (1, 2)
    );
    for kind in ["success", "complete", "death"] {
        assert!(!exists(&qless, &format!("x-{kind}")).await, "{kind}");
    }
    assert_eq!(qless.batch_cancel(5.0, "nope").await.unwrap(), None);
}

#[tokio::test]
async fn a_worker_dying_mid_batch_loses_nothing_and_fires_each_callback_once() {
    // Between any two calls of a worker it may die: its lease then expires, another
    // worker takes the job over and ends it. Every call stands alone, so the batch
    // settles once, with its callbacks put once.
    let (redis, qless) = start().await;
    qless.config_set(0.0, "heartbeat", "10").await.unwrap();
    let jids: Vec<String> = (0..6).map(|i| format!("j{i}")).collect();
    let refs: Vec<&str> = jids.iter().map(String::as_str).collect();
    qless.batch_open(1.0, &batch("k", &refs)).await.unwrap();
    // The first worker leases three and dies after completing one.
    let leased = pop(&qless, 2.0, "work", "dies", 3).await;
    complete(&qless, 3.0, &leased[0], "dies", "work").await;
    // Much later, the others are handed to a second worker with the rest.
    // (An expired lease is handed over once its grace period is over: time moves on
    // whenever nothing is to be had.)
    let mut now = 100.0;
    for _ in 0..100 {
        if view(&qless, "k").await.counts.completed == 6 {
            break;
        }
        match pop(&qless, now, "work", "lives", 1).await.first() {
            Some(jid) => complete(&qless, now, jid, "lives", "work").await,
            None => now += 30.0,
        }
    }
    let settled = view(&qless, "k").await;
    assert_eq!(settled.counts.completed, 6);
    assert_eq!(settled.state, "settled");
    let mut conn = raw(&redis);
    let waiting: Vec<String> = redis::cmd("ZRANGE")
        .arg("ql:q:done-work")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let mut waiting = waiting;
    waiting.sort();
    assert_eq!(waiting, strs(&["k-complete", "k-success"]));
}
