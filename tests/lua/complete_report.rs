//! The `complete.report` extension: `complete`, also naming the queues where the
//! dependents it released are now waiting.

use qlessd::core::{CompleteArgs, Completion, PutArgs, Qless};

use super::jobs::{finish, job, message, pop, put, start, state};
use super::malformed::snapshot;

fn dependent(queue: &str, jid: &str, depends: &[&str], delay: f64) -> PutArgs {
    PutArgs {
        depends: Some(depends.iter().map(|d| d.to_string()).collect()),
        delay,
        ..job(queue, jid)
    }
}

/// `parent` running in `q` for worker `w`, with dependents: `b1`, `b2` in `qb` (only on
/// the parent), `c` in `qb` (also on `other`), `d` in `qd` (with a delay) and `e` in `qe`.
async fn family(qless: &Qless) {
    put(qless, 0.0, "q", "parent").await;
    put(qless, 0.0, "q-other", "other").await;
    for (queue, jid, depends, delay) in [
        ("qb", "b1", &["parent"][..], 0.0),
        ("qb", "b2", &["parent"][..], 0.0),
        ("qb", "c", &["parent", "other"][..], 0.0),
        ("qd", "d", &["parent"][..], 30.0),
        ("qe", "e", &["parent"][..], 0.0),
    ] {
        qless
            .put(0.0, dependent(queue, jid, depends, delay))
            .await
            .unwrap();
    }
    assert_eq!(pop(qless, 1.0, "q", "w", 1).await, ["parent"]);
}

#[tokio::test]
async fn names_each_queue_where_a_released_dependent_now_waits_once() {
    let (_redis, qless) = start().await;
    family(&qless).await;
    let completion = qless
        .complete_report(2.0, finish("parent", "w", "q"))
        .await
        .unwrap();
    assert_eq!(
        completion,
        Completion {
            state: "complete".into(),
            released: vec!["qb".into(), "qe".into()],
        }
    );
    for (jid, expected) in [
        ("b1", "waiting"),
        ("b2", "waiting"),
        ("c", "depends"),
        ("d", "scheduled"),
        ("e", "waiting"),
    ] {
        assert_eq!(state(&qless, jid).await, expected, "{jid}");
    }
}

#[tokio::test]
async fn writes_exactly_what_complete_writes() {
    let (plain_redis, plain) = start().await;
    let (report_redis, report) = start().await;
    family(&plain).await;
    family(&report).await;
    assert_eq!(
        plain
            .complete(2.0, finish("parent", "w", "q"))
            .await
            .unwrap(),
        "complete"
    );
    report
        .complete_report(2.0, finish("parent", "w", "q"))
        .await
        .unwrap();
    assert_eq!(snapshot(&plain_redis), snapshot(&report_redis));
}

#[tokio::test]
async fn moving_on_to_next_releases_nothing() {
    let (_redis, qless) = start().await;
    family(&qless).await;
    let args = CompleteArgs {
        next: Some("q2".into()),
        ..finish("parent", "w", "q")
    };
    let completion = qless.complete_report(2.0, args).await.unwrap();
    assert_eq!(completion.state, "waiting");
    assert!(completion.released.is_empty(), "{completion:?}");
    assert_eq!(state(&qless, "b1").await, "depends");
}

#[tokio::test]
async fn refuses_what_complete_refuses_with_the_same_error() {
    let (redis, qless) = start().await;
    family(&qless).await;
    let before = snapshot(&redis);
    for args in [
        finish("nobody", "w", "q"),
        finish("parent", "someone-else", "q"),
        finish("parent", "w", "elsewhere"),
        CompleteArgs {
            data: "not json".into(),
            ..finish("parent", "w", "q")
        },
    ] {
        let plain = message(qless.complete(2.0, args.clone()).await);
        let reported = message(qless.complete_report(2.0, args).await);
        assert_eq!(plain, reported);
    }
    assert_eq!(snapshot(&redis), before);
}
