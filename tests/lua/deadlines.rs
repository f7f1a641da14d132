//! Script semantics (deadlines, `lua/deadlines.lua`): a job's `start_by` (not popped
//! by then: failed into `expired`, at pop or by the sweeper) and `max_run` (its lock
//! never outlives popped + max_run; the worker's next call is refused `timed_out`),
//! also given by recurring templates to their children.

use qlessd::core::{PutArgs, Qless, RetryArgs};

use super::events::Listener;
use super::jobs::{assert_error, config, finish, get, job, pop, put, start, state};
use crate::support::connect;

fn starting_by(queue: &str, jid: &str, at: f64) -> PutArgs {
    PutArgs {
        start_by: Some(at),
        ..job(queue, jid)
    }
}

fn running_at_most(queue: &str, jid: &str, seconds: f64) -> PutArgs {
    PutArgs {
        max_run: Some(seconds),
        ..job(queue, jid)
    }
}

async fn failed_in(qless: &Qless, group: &str) -> Vec<String> {
    qless.failed_group(0.0, group, 0, 100).await.unwrap().jids
}

async fn own_log(redis: &crate::support::RedisServer) -> Listener {
    Listener::start(redis, "qlessd:*", "qlessd:~end-of-test").await
}

#[tokio::test]
async fn a_job_past_its_start_by_is_failed_by_pop_and_the_next_job_is_handed_out() {
    let (redis, qless) = start().await;
    let mut events = own_log(&redis).await;
    qless
        .put(0.0, starting_by("q", "late", 10.0))
        .await
        .unwrap();
    put(&qless, 1.0, "q", "next").await;
    // Before the deadline it pops as usual (here: not popped, only checked).
    assert_eq!(get(&qless, "late").await.start_by, Some(10.0));
    assert_eq!(pop(&qless, 11.0, "q", "w", 1).await, ["next"]);
    assert_eq!(state(&qless, "late").await, "failed");
    let failure = get(&qless, "late").await.failure.unwrap();
    assert_eq!(failure.group, "expired");
    assert!(
        failure.message.contains("start_by 10"),
        "{}",
        failure.message
    );
    assert_eq!(failed_in(&qless, "expired").await, ["late"]);
    let published = events.drain().await;
    assert!(
        published.contains(&(
            "qlessd:log".into(),
            r#"{"jid":"late","event":"expired","queue":"q","start_by":10}"#.into()
        )),
        "{published:?}"
    );
}

#[tokio::test]
async fn a_job_popped_before_its_start_by_runs_and_is_not_expired_later() {
    let (_redis, qless) = start().await;
    qless.put(0.0, starting_by("q", "a", 10.0)).await.unwrap();
    assert_eq!(pop(&qless, 5.0, "q", "w", 1).await, ["a"]);
    // Its lock expires; the next pop, after the deadline, hands it over (a retry).
    config(&qless, "grace-period", "0").await;
    assert_eq!(pop(&qless, 100.0, "q", "w2", 1).await, ["a"]);
    qless.sweep(200.0, 100, 0, 0).await.unwrap();
    assert_eq!(state(&qless, "a").await, "running");
    assert_eq!(failed_in(&qless, "expired").await, Vec::<String>::new());
}

#[tokio::test]
async fn the_sweeper_fails_a_job_at_its_start_by_across_a_handover() {
    let (redis, one) = start().await;
    let two = connect(&redis, None).await;
    one.put(0.0, starting_by("q", "a", 20.0)).await.unwrap();
    one.put(0.0, starting_by("q", "b", 40.0)).await.unwrap();
    put(&one, 0.0, "q", "c").await;
    // The first gateway's sweeper: nothing due yet, the queue is filed for 20.
    let report = one.sweep(10.0, 100, 0, 0).await.unwrap();
    assert_eq!(report.next, 20.0);
    assert_eq!(state(&one, "a").await, "waiting");
    // The second gateway takes the sweeper over and finds both deadlines in turn.
    let report = two.sweep(20.0, 100, 0, 0).await.unwrap();
    assert_eq!(state(&two, "a").await, "failed");
    assert_eq!(state(&two, "b").await, "waiting");
    assert_eq!(report.next, 40.0);
    two.sweep(41.0, 100, 0, 0).await.unwrap();
    assert_eq!(state(&two, "b").await, "failed");
    assert_eq!(state(&two, "c").await, "waiting");
    assert_eq!(failed_in(&two, "expired").await, ["b", "a"]);
    // Nothing of the queue is pending any more but its waiting job: no due entry left.
    assert_eq!(two.sweep(42.0, 100, 0, 0).await.unwrap().next, 0.0);
}

#[tokio::test]
async fn a_scheduled_job_past_its_start_by_is_expired_by_the_sweeper() {
    let (_redis, qless) = start().await;
    let args = PutArgs {
        delay: 100.0,
        ..starting_by("q", "a", 50.0)
    };
    qless.put(0.0, args).await.unwrap();
    // Expired, it is no longer scheduled: nothing of the queue is due any more.
    assert_eq!(qless.sweep(50.0, 100, 0, 0).await.unwrap().next, 0.0);
    assert_eq!(state(&qless, "a").await, "failed");
    assert_eq!(pop(&qless, 101.0, "q", "w", 1).await, Vec::<String>::new());
}

#[tokio::test]
async fn unfail_of_an_expired_job_clears_its_start_by_and_it_runs() {
    let (_redis, qless) = start().await;
    qless.put(0.0, starting_by("q", "a", 10.0)).await.unwrap();
    qless.sweep(10.0, 100, 0, 0).await.unwrap();
    assert_eq!(state(&qless, "a").await, "failed");
    assert_eq!(qless.unfail(20.0, "q", "expired", 10).await.unwrap(), 1);
    let job = get(&qless, "a").await;
    assert_eq!((job.state.as_str(), job.start_by), ("waiting", None));
    qless.sweep(30.0, 100, 0, 0).await.unwrap();
    assert_eq!(pop(&qless, 30.0, "q", "w", 1).await, ["a"]);
}

#[tokio::test]
async fn a_re_put_without_start_by_drops_the_old_one() {
    let (_redis, qless) = start().await;
    qless.put(0.0, starting_by("q", "a", 10.0)).await.unwrap();
    put(&qless, 1.0, "other", "a").await;
    assert_eq!(get(&qless, "a").await.start_by, None);
    qless.sweep(10.0, 100, 0, 0).await.unwrap();
    assert_eq!(pop(&qless, 11.0, "other", "w", 1).await, ["a"]);
}

#[tokio::test]
async fn bad_deadlines_are_refused_and_nothing_is_written() {
    let (_redis, qless) = start().await;
    for (option, value) in [
        ("start-by", "-1"),
        ("start-by", "nan"),
        ("start-by", "inf"),
        ("max-run", "0"),
        ("max-run", "x"),
    ] {
        let args: Vec<String> = ["", "q", "a", "K", "{}", "0", option, value]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let err = qless.call("put", 0.0, &args).await.unwrap_err();
        assert!(
            err.to_string().contains(&format!("Arg \"{option}\"")),
            "{option}={value}: {err}"
        );
    }
    assert!(qless.get(0.0, "a").await.unwrap().is_none());
}

#[tokio::test]
async fn max_run_caps_the_lock_and_heartbeats_do_not_extend_it() {
    let (_redis, qless) = start().await;
    qless
        .put(0.0, running_at_most("q", "a", 30.0))
        .await
        .unwrap();
    let popped = qless.pop(100.0, "q", "w", 1).await.unwrap();
    // The default heartbeat is 60 s: the lock ends at the run's end instead.
    assert_eq!(popped[0].expires, 130.0);
    assert_eq!(get(&qless, "a").await.max_run, Some(30.0));
    assert_eq!(qless.heartbeat(110.0, "a", "w", None).await.unwrap(), 130);
    assert_error(qless.heartbeat(130.0, "a", "w", None).await, "QL_TIMEDOUT");
    assert_error(
        qless.complete(131.0, finish("a", "w", "q")).await,
        "timed out",
    );
}

#[tokio::test]
async fn a_timed_out_job_is_retried_and_its_worker_hears_timed_out() {
    let (redis, qless) = start().await;
    config(&qless, "grace-period", "5").await;
    let mut events = own_log(&redis).await;
    qless
        .put(0.0, running_at_most("q", "a", 30.0))
        .await
        .unwrap();
    assert_eq!(pop(&qless, 0.0, "q", "w", 1).await, ["a"]);
    qless.heartbeat(20.0, "a", "w", None).await.unwrap();
    // The sweeper sends the notice at the run's end...
    let report = qless.sweep(30.0, 100, 0, 0).await.unwrap();
    assert_eq!(report.stalled, 1);
    let published = events.drain().await;
    assert!(
        published.contains(&(
            "qlessd:log".into(),
            r#"{"jid":"a","event":"timed_out","queue":"q","worker":"w","max_run":30}"#.into()
        )),
        "{published:?}"
    );
    assert_error(qless.heartbeat(31.0, "a", "w", None).await, "QL_TIMEDOUT");
    // ...and after the grace a pop hands it over: a retry, as on any lock expiry.
    assert_eq!(pop(&qless, 36.0, "q", "w2", 1).await, ["a"]);
    let job = get(&qless, "a").await;
    assert_eq!((job.remaining, job.worker.as_str()), (4, "w2"));
    assert_error(qless.heartbeat(37.0, "a", "w", None).await, "QL_TIMEDOUT");
    assert_error(
        qless.complete(37.0, finish("a", "w", "q")).await,
        "QL_TIMEDOUT",
    );
    // The new worker's run has its own max_run.
    assert_eq!(qless.heartbeat(40.0, "a", "w2", None).await.unwrap(), 66);
    qless.complete(41.0, finish("a", "w2", "q")).await.unwrap();
}

#[tokio::test]
async fn a_timed_out_job_without_retries_left_fails() {
    let (_redis, qless) = start().await;
    config(&qless, "grace-period", "0").await;
    let args = PutArgs {
        retries: Some(0),
        ..running_at_most("q", "a", 10.0)
    };
    qless.put(0.0, args).await.unwrap();
    assert_eq!(pop(&qless, 0.0, "q", "w", 1).await, ["a"]);
    qless.heartbeat(5.0, "a", "w", None).await.unwrap();
    assert_eq!(pop(&qless, 10.0, "q", "w2", 1).await, Vec::<String>::new());
    assert_eq!(state(&qless, "a").await, "failed");
    assert_eq!(failed_in(&qless, "failed-retries-q").await, ["a"]);
    assert_error(qless.heartbeat(11.0, "a", "w", None).await, "QL_TIMEDOUT");
    // A worker that is not the one timed out gets the ordinary refusal.
    let retry = RetryArgs {
        jid: "a".into(),
        queue: "q".into(),
        worker: "w".into(),
        ..Default::default()
    };
    assert_error(qless.retry(11.0, retry).await, "QL_STATE");
    assert_error(qless.heartbeat(11.0, "a", "other", None).await, "QL_STATE");
}

#[tokio::test]
async fn a_job_within_its_max_run_completes() {
    let (_redis, qless) = start().await;
    qless
        .put(0.0, running_at_most("q", "a", 30.0))
        .await
        .unwrap();
    assert_eq!(pop(&qless, 0.0, "q", "w", 1).await, ["a"]);
    assert_eq!(
        qless.complete(29.0, finish("a", "w", "q")).await.unwrap(),
        "complete"
    );
}

#[tokio::test]
async fn a_recurring_template_gives_each_child_its_deadlines() {
    let (_redis, qless) = start().await;
    let template = qlessd::core::RecurArgs {
        queue: "q".into(),
        jid: "r".into(),
        klass: "Tick".into(),
        data: "{}".into(),
        interval: 60.0,
        start_within: Some(5.0),
        max_run: Some(30.0),
        ..Default::default()
    };
    qless.recur(0.0, template).await.unwrap();
    let stored = qless.recur_get(0.0, "r").await.unwrap().unwrap();
    assert_eq!(
        (stored.start_within, stored.max_run),
        (Some(5.0), Some(30.0))
    );
    // The first child spawns at 0 (a peek spawns it): start_by 0 + 5.
    qless.peek(0.0, "q", 10).await.unwrap();
    let first = get(&qless, "r-1").await;
    assert_eq!((first.start_by, first.max_run), (Some(5.0), Some(30.0)));
    // Not popped by then: expired, and the pop hands out nothing.
    assert!(pop(&qless, 10.0, "q", "w", 1).await.is_empty());
    assert_eq!(failed_in(&qless, "expired").await, ["r-1"]);
    // The next child, popped in time, runs under its max_run.
    assert_eq!(pop(&qless, 62.0, "q", "w", 1).await, ["r-2"]);
    let second = get(&qless, "r-2").await;
    assert_eq!((second.start_by, second.max_run), (Some(65.0), Some(30.0)));
    assert_eq!(second.expires, 92.0);
    // An update removes start_within and changes max_run for the children to come.
    qless
        .recur_update(
            63.0,
            "r",
            qlessd::core::RecurUpdate {
                start_within: Some(None),
                max_run: Some(Some(10.0)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let stored = qless.recur_get(63.0, "r").await.unwrap().unwrap();
    assert_eq!((stored.start_within, stored.max_run), (None, Some(10.0)));
    assert_eq!(pop(&qless, 500.0, "q", "w", 1).await, ["r-3"]);
    let third = get(&qless, "r-3").await;
    assert_eq!((third.start_by, third.max_run), (None, Some(10.0)));
    // A re-recur without deadlines drops them.
    qless
        .recur(
            501.0,
            qlessd::core::RecurArgs {
                queue: "q".into(),
                jid: "r".into(),
                klass: "Tick".into(),
                data: "{}".into(),
                interval: 60.0,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let stored = qless.recur_get(501.0, "r").await.unwrap().unwrap();
    assert_eq!((stored.start_within, stored.max_run), (None, None));
}

#[tokio::test]
async fn bad_recurring_deadlines_are_refused() {
    let (_redis, qless) = start().await;
    let template = |within: Option<f64>, max_run: Option<f64>| qlessd::core::RecurArgs {
        queue: "q".into(),
        jid: "r".into(),
        klass: "Tick".into(),
        data: "{}".into(),
        interval: 60.0,
        start_within: within,
        max_run,
        ..Default::default()
    };
    assert_error(
        qless.recur(0.0, template(Some(-1.0), None)).await,
        "start-within",
    );
    assert_error(qless.recur(0.0, template(None, Some(0.0))).await, "max-run");
    assert!(qless.recur_get(0.0, "r").await.unwrap().is_none());
}
