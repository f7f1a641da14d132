//! The `pop.after` extension: ending jobs (complete, fail, retry) and leasing the
//! worker's next ones in one invocation, exactly as the separate calls would.

use qlessd::core::{CompleteArgs, FailArgs, RetryArgs};

use super::jobs::{finish, get, message, pop, put, start, state};
use super::malformed::snapshot;

fn jids(jobs: &[qlessd::model::Job]) -> Vec<String> {
    jobs.iter().map(|job| job.jid.clone()).collect()
}

fn fail_args(jid: &str, worker: &str) -> FailArgs {
    FailArgs {
        jid: jid.into(),
        worker: worker.into(),
        group: "g".into(),
        message: "boom".into(),
        data: None,
    }
}

#[tokio::test]
async fn complete_and_pop_writes_what_complete_then_pop_write() {
    let (one_redis, one) = start().await;
    let (two_redis, two) = start().await;
    for qless in [&one, &two] {
        for (i, jid) in ["a", "b", "c"].into_iter().enumerate() {
            put(qless, i as f64 / 10.0, "q", jid).await;
        }
        assert_eq!(pop(qless, 1.0, "q", "w", 1).await, ["a"]);
    }
    let (completion, leased) = one
        .complete_and_pop(2.0, finish("a", "w", "q"), 2)
        .await
        .unwrap();
    assert_eq!(completion, "complete");
    assert_eq!(leased.queue, "q");
    assert_eq!(jids(&leased.jobs), ["b", "c"]);
    assert_eq!(
        two.complete(2.0, finish("a", "w", "q")).await.unwrap(),
        "complete"
    );
    assert_eq!(pop(&two, 2.0, "q", "w", 2).await, ["b", "c"]);
    assert_eq!(snapshot(&one_redis), snapshot(&two_redis));
}

#[tokio::test]
async fn a_refused_completion_leases_nothing_and_writes_nothing() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.1, "q", "b").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["a"]);
    let before = snapshot(&redis);
    for args in [
        finish("a", "someone-else", "q"),
        finish("a", "w", "elsewhere"),
        finish("missing", "w", "q"),
        CompleteArgs {
            data: "not json".into(),
            ..finish("a", "w", "q")
        },
    ] {
        let plain = message(qless.complete(2.0, args.clone()).await);
        let after = message(qless.complete_and_pop(2.0, args, 1).await);
        assert_eq!(plain, after);
    }
    assert_eq!(snapshot(&redis), before);
    assert_eq!(state(&qless, "b").await, "waiting");
}

#[tokio::test]
async fn moving_on_to_next_leases_from_the_queue_the_job_ran_in() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.1, "q", "b").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["a"]);
    let args = CompleteArgs {
        next: Some("q2".into()),
        ..finish("a", "w", "q")
    };
    let (completion, leased) = qless.complete_and_pop(2.0, args, 5).await.unwrap();
    assert_eq!(completion, "waiting");
    assert_eq!(leased.queue, "q");
    assert_eq!(jids(&leased.jobs), ["b"]);
    assert_eq!(state(&qless, "a").await, "waiting");
    assert_eq!(get(&qless, "b").await.worker, "w");
}

#[tokio::test]
async fn an_empty_queue_leases_nothing_but_the_completion_stands() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["a"]);
    let (completion, leased) = qless
        .complete_and_pop(2.0, finish("a", "w", "q"), 1)
        .await
        .unwrap();
    assert_eq!(completion, "complete");
    assert_eq!(leased.queue, "q");
    assert!(leased.jobs.is_empty());
}

#[tokio::test]
async fn fail_and_pop_leases_from_the_failed_jobs_queue() {
    let (one_redis, one) = start().await;
    let (two_redis, two) = start().await;
    for qless in [&one, &two] {
        put(qless, 0.0, "q", "a").await;
        put(qless, 0.1, "q", "b").await;
        assert_eq!(pop(qless, 1.0, "q", "w", 1).await, ["a"]);
    }
    let (jid, leased) = one.fail_and_pop(2.0, fail_args("a", "w"), 1).await.unwrap();
    assert_eq!(jid, "a");
    assert_eq!(leased.queue, "q");
    assert_eq!(jids(&leased.jobs), ["b"]);
    two.fail(2.0, "a", "w", "g", "boom", None).await.unwrap();
    assert_eq!(pop(&two, 2.0, "q", "w", 1).await, ["b"]);
    assert_eq!(snapshot(&one_redis), snapshot(&two_redis));
    assert_eq!(state(&one, "a").await, "failed");
}

#[tokio::test]
async fn a_refused_fail_or_retry_leases_nothing() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.1, "q", "b").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["a"]);
    let before = snapshot(&redis);
    let refused = message(qless.fail_and_pop(2.0, fail_args("a", "other"), 1).await);
    assert!(refused.contains("running with another worker"), "{refused}");
    let retry = RetryArgs {
        jid: "a".into(),
        queue: "q".into(),
        worker: "other".into(),
        ..Default::default()
    };
    let refused = message(qless.retry_and_pop(2.0, retry, 1).await);
    assert!(refused.contains("given to another worker"), "{refused}");
    let missing = message(qless.fail_and_pop(2.0, fail_args("nope", "w"), 1).await);
    assert!(missing.contains("does not exist"), "{missing}");
    assert_eq!(snapshot(&redis), before);
}

#[tokio::test]
async fn retry_and_pop_can_hand_the_retried_job_straight_back() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["a"]);
    let retry = RetryArgs {
        jid: "a".into(),
        queue: "q".into(),
        worker: "w".into(),
        ..Default::default()
    };
    let (remaining, leased) = qless.retry_and_pop(2.0, retry, 1).await.unwrap();
    assert_eq!(remaining, 4);
    assert_eq!(jids(&leased.jobs), ["a"]);
    let job = get(&qless, "a").await;
    assert_eq!(
        (job.state, job.remaining),
        (qlessd::model::JobState::Running, 4)
    );
}

#[tokio::test]
async fn a_batch_leases_only_when_every_completion_succeeded() {
    let (_redis, qless) = start().await;
    for (i, jid) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
        put(&qless, i as f64 / 10.0, "q", jid).await;
    }
    assert_eq!(pop(&qless, 1.0, "q", "w", 3).await, ["a", "b", "c"]);
    let (results, leased) = qless
        .complete_many_and_pop(
            2.0,
            vec![finish("a", "w", "q"), finish("missing", "w", "q")],
            2,
        )
        .await
        .unwrap();
    assert!(results[0].is_ok() && results[1].is_err(), "{results:?}");
    assert_eq!(leased, None);
    assert_eq!(state(&qless, "d").await, "waiting");
    let (results, leased) = qless
        .complete_many_and_pop(2.0, vec![finish("b", "w", "q"), finish("c", "w", "q")], 2)
        .await
        .unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(jids(&leased.unwrap().jobs), ["d", "e"]);
}

#[tokio::test]
async fn a_batch_larger_than_one_invocation_still_leases_after_all_completions() {
    let (_redis, qless) = start().await;
    for i in 0..150 {
        put(&qless, f64::from(i) / 1000.0, "q", &format!("j{i:03}")).await;
    }
    let held = pop(&qless, 1.0, "q", "w", 120).await;
    let args = held.iter().map(|jid| finish(jid, "w", "q")).collect();
    let (results, leased) = qless.complete_many_and_pop(2.0, args, 10).await.unwrap();
    assert_eq!(results.len(), 120);
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(leased.unwrap().jobs.len(), 10);
}

#[tokio::test]
async fn pop_after_refuses_calls_that_do_not_end_a_job_and_bad_counts() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let before = snapshot(&redis);
    let cases: [(&[&str], &str); 4] = [
        (
            &["1", "put", "6", "w", "q", "b", "K", "{}", "0"],
            "must be complete",
        ),
        (
            &["-1", "complete", "4", "a", "w", "q", "{}"],
            "non-negative integer",
        ),
        (&["x"], "non-negative integer"),
        (&["1"], "At least one call is required"),
    ];
    for (args, needle) in cases {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let err = message(qless.call("pop.after", 1.0, &args).await);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(
            err.starts_with("QL_ARG") || err.contains("PopAfter"),
            "{err}"
        );
    }
    assert_eq!(snapshot(&redis), before);
}
