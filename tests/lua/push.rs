//! The push delivery extension (`lua/push.lua`): a queue's endpoint settings and
//! secrets, leases for delivery within the queue's concurrency and rate, and the end
//! of a delivery, which frees its slot and counts its outcome.

use std::collections::BTreeMap;

use qlessd::core::PutArgs;
use qlessd::core::push::{
    Attempted, Finished, Outcome, PushConfig, PushRate, Pushed, RetryDelay, Secret,
};

use super::jobs::{assert_error, get, job, put, start, state, strs};
use super::malformed::snapshot;

fn config(concurrency: u32, rate: Option<PushRate>) -> PushConfig {
    PushConfig {
        url: "https://example.com/hook".into(),
        timeout: 30,
        concurrency,
        rate,
        headers: BTreeMap::from([("x-team".to_owned(), "billing".to_owned())]),
    }
}

/// A delivery that was answered 200 in 5 ms, the job's first.
const ANSWERED: Attempted = Attempted {
    status: Some(200),
    ms: 5,
    attempt: 1,
};

fn secret(text: &str) -> Secret {
    Secret::new(text.to_owned())
}

fn jids(leased: &[Pushed]) -> Vec<String> {
    leased.iter().map(|leased| leased.job.jid.clone()).collect()
}

#[tokio::test]
async fn the_first_set_keeps_its_secret_and_a_later_one_changes_only_the_settings() {
    let (_redis, qless) = start().await;
    assert!(
        qless
            .push_set(1.0, "q", &config(10, None), &secret("whsec_one"))
            .await
            .unwrap()
    );
    let mut changed = config(
        3,
        Some(PushRate {
            jobs: 5,
            seconds: 2.0,
        }),
    );
    changed.url = "http://example.org/other".into();
    assert!(
        !qless
            .push_set(2.0, "q", &changed, &secret("whsec_two"))
            .await
            .unwrap()
    );
    let state = qless.push_get(3.0, "q").await.unwrap().unwrap();
    assert_eq!(state.url, "http://example.org/other");
    assert_eq!(state.concurrency, 3);
    assert_eq!(
        state.rate,
        Some(PushRate {
            jobs: 5,
            seconds: 2.0
        })
    );
    assert_eq!(state.headers["x-team"], "billing");
    assert_eq!(state.secrets, vec![secret("whsec_one")]);
    assert_eq!(qless.push_list(3.0).await.unwrap(), strs(&["q"]));
    assert!(qless.push_get(3.0, "other").await.unwrap().is_none());
}

#[tokio::test]
async fn a_rotated_out_secret_signs_beside_the_new_one_until_its_grace_ends() {
    let (redis, qless) = start().await;
    let stored = |field: &str| -> Option<String> {
        redis::cmd("HGET")
            .arg("qlessd:push:q")
            .arg(field)
            .query(&mut super::jobs::raw(&redis))
            .unwrap()
    };
    qless
        .push_set(1.0, "q", &config(10, None), &secret("whsec_old"))
        .await
        .unwrap();
    assert!(
        qless
            .push_rotate(10.0, "q", &secret("whsec_new"), 100)
            .await
            .unwrap()
    );
    let during = qless.push_get(50.0, "q").await.unwrap().unwrap();
    assert_eq!(
        during.secrets,
        vec![secret("whsec_new"), secret("whsec_old")]
    );
    assert_eq!(during.old_until, Some(110.0));
    assert_eq!(stored("old-secret").as_deref(), Some("whsec_old"));
    let after = qless.push_get(110.0, "q").await.unwrap().unwrap();
    assert_eq!(after.secrets, vec![secret("whsec_new")]);
    assert_eq!(after.old_until, None);
    assert_eq!(
        (stored("old-secret"), stored("old-until")),
        (None, None),
        "once its grace is over, the old secret is gone from Redis too"
    );
    assert!(
        !qless
            .push_rotate(10.0, "unpushed", &secret("whsec_x"), 100)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_job_leased_for_delivery_reads_as_get_shows_it() {
    let (_redis, qless) = start().await;
    // The members `get` adds beside a job's own, each set; and a plain job beside it.
    let full = PutArgs {
        data: r#"{"name":"ada","n":[1,2.50]}"#.into(),
        tags: Some(strs(&["vip"])),
        throttles: Some(strs(&["mail"])),
        backoff: Some(r#"{"initial":2,"factor":3}"#.into()),
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        start_by: Some(1000.5),
        max_run: Some(600.0),
        partition: Some("acme".into()),
        ..job("q", "full")
    };
    qless.put(1.0, full).await.unwrap();
    put(&qless, 2.0, "q", "plain").await;
    qless
        .push_set(3.0, "q", &config(10, None), &secret("whsec_s"))
        .await
        .unwrap();
    let leased = qless.push_pop(4.0, "q", "push-1", 10).await.unwrap();
    assert_eq!(jids(&leased), ["full", "plain"]);
    let full = &leased[0].job;
    assert_eq!(
        (
            full.throttles.as_deref(),
            full.partition.as_deref(),
            full.start_by,
            full.max_run
        ),
        (
            Some(&strs(&["mail"])[..]),
            Some("acme"),
            Some(1000.5),
            Some(600.0)
        )
    );
    for job in leased.iter().map(|leased| &leased.job) {
        assert_eq!(
            serde_json::to_string(job).unwrap(),
            serde_json::to_string(&get(&qless, &job.jid).await).unwrap(),
            "{} reads the same leased for delivery and from get",
            job.jid
        );
    }
}

#[tokio::test]
async fn deliveries_in_flight_never_exceed_the_concurrency() {
    let (_redis, qless) = start().await;
    for (i, jid) in ["a", "b", "c", "d"].into_iter().enumerate() {
        put(&qless, i as f64, "q", jid).await;
    }
    qless
        .push_set(5.0, "q", &config(2, None), &secret("whsec_s"))
        .await
        .unwrap();
    let first = qless.push_pop(6.0, "q", "push-1", 10).await.unwrap();
    assert_eq!(jids(&first), ["a", "b"], "two slots, queue order");
    assert!(
        qless
            .push_pop(6.0, "q", "push-2", 10)
            .await
            .unwrap()
            .is_empty(),
        "another qlessd finds no room either"
    );
    let finished = qless
        .push_finish(
            7.0,
            "q",
            "a",
            "push-1",
            ANSWERED,
            Outcome::Complete {
                result: Some(r#"{"ok":true}"#),
            },
        )
        .await
        .unwrap();
    assert_eq!(finished, Finished::Delivered);
    assert_eq!(state(&qless, "a").await, "complete");
    let next = qless.push_pop(8.0, "q", "push-2", 10).await.unwrap();
    assert_eq!(jids(&next), ["c"], "one slot freed");
    let counts = qless.push_get(8.0, "q").await.unwrap().unwrap();
    assert_eq!((counts.delivered, counts.in_flight), (1, 2));
    let recent = &counts.recent;
    assert_eq!(recent.len(), 1);
    assert_eq!(
        (
            recent[0].jid.as_str(),
            recent[0].status,
            recent[0].ms,
            recent[0].outcome.as_str()
        ),
        ("a", Some(200), 5, "delivered")
    );
}

#[tokio::test]
async fn a_slot_held_past_its_timeout_is_freed() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.5, "q", "b").await;
    qless
        .push_set(1.0, "q", &config(1, None), &secret("whsec_s"))
        .await
        .unwrap();
    assert_eq!(
        jids(&qless.push_pop(2.0, "q", "push-1", 5).await.unwrap()),
        ["a"]
    );
    assert!(
        qless
            .push_pop(31.0, "q", "push-2", 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        jids(&qless.push_pop(32.0, "q", "push-2", 5).await.unwrap()),
        ["b"],
        "the first delivery's timeout (30 s) is over: its slot is free"
    );
}

#[tokio::test]
async fn the_rate_holds_across_deliveries() {
    let (_redis, qless) = start().await;
    for (i, jid) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
        put(&qless, i as f64 / 10.0, "q", jid).await;
    }
    let rate = PushRate {
        jobs: 2,
        seconds: 10.0,
    };
    qless
        .push_set(1.0, "q", &config(100, Some(rate)), &secret("whsec_s"))
        .await
        .unwrap();
    let leased = qless.push_pop(2.0, "q", "push-1", 10).await.unwrap();
    assert_eq!(jids(&leased), ["a", "b"]);
    for jid in ["a", "b"] {
        qless
            .push_finish(
                3.0,
                "q",
                jid,
                "push-1",
                ANSWERED,
                Outcome::Complete { result: None },
            )
            .await
            .unwrap();
    }
    assert!(
        qless
            .push_pop(11.0, "q", "push-1", 10)
            .await
            .unwrap()
            .is_empty(),
        "both starts are within the window although both ended"
    );
    assert_eq!(
        jids(&qless.push_pop(12.5, "q", "push-1", 10).await.unwrap()),
        ["c", "d"]
    );
}

#[tokio::test]
async fn retries_count_until_they_run_out_and_fail_into_the_named_group() {
    let (_redis, qless) = start().await;
    let mut job = super::jobs::job("q", "a");
    job.retries = Some(1);
    qless.put(0.0, job).await.unwrap();
    qless
        .push_set(1.0, "q", &config(5, None), &secret("whsec_s"))
        .await
        .unwrap();
    let retry = Outcome::Retry {
        delay: RetryDelay::Backoff,
        group: "push-http-500",
        message: "HTTP 500",
    };
    qless.push_pop(2.0, "q", "push-1", 1).await.unwrap();
    assert_eq!(
        qless
            .push_finish(3.0, "q", "a", "push-1", ANSWERED, retry)
            .await
            .unwrap(),
        Finished::Retried
    );
    qless.push_pop(4.0, "q", "push-1", 1).await.unwrap();
    assert_eq!(
        qless
            .push_finish(5.0, "q", "a", "push-1", ANSWERED, retry)
            .await
            .unwrap(),
        Finished::Failed
    );
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "failed");
    assert_eq!(job.failure.unwrap().group, "push-http-500");
    let counts = qless.push_get(6.0, "q").await.unwrap().unwrap();
    assert_eq!(
        (
            counts.delivered,
            counts.retried,
            counts.failed,
            counts.in_flight
        ),
        (0, 1, 1, 0)
    );
}

/// `qlessd-attempt` is the script's count of a job's push leases: it goes on rising
/// past what the job's capped history remembers, and a lease given back before its
/// POST (attempt 0, as shutdown does) is not counted.
#[tokio::test]
async fn each_push_lease_counts_one_delivery_past_the_history_and_an_unposted_one_none() {
    let (_redis, qless) = start().await;
    qless.config_set(0.0, "max-job-history", "4").await.unwrap();
    let mut job = super::jobs::job("q", "a");
    job.retries = Some(20);
    qless.put(0.0, job).await.unwrap();
    qless
        .push_set(1.0, "q", &config(5, None), &secret("whsec_s"))
        .await
        .unwrap();
    let again = Outcome::Retry {
        delay: RetryDelay::Backoff,
        group: "push-http-500",
        message: "HTTP 500",
    };
    let mut now = 2.0;
    for delivery in 1..=8u64 {
        let leased = qless.push_pop(now, "q", "push-1", 1).await.unwrap();
        assert_eq!(
            leased.iter().map(|l| l.attempt).collect::<Vec<_>>(),
            [delivery],
            "delivery {delivery}"
        );
        let answered = Attempted {
            attempt: delivery,
            ..ANSWERED
        };
        qless
            .push_finish(now + 0.5, "q", "a", "push-1", answered, again)
            .await
            .unwrap();
        now += 1.0;
    }
    assert!(
        get(&qless, "a").await.history.len() <= 4,
        "the history is capped"
    );

    // Leased, then given back unposted: the next lease is still the ninth delivery.
    let leased = qless.push_pop(now, "q", "push-1", 1).await.unwrap();
    assert_eq!(leased[0].attempt, 9);
    let unposted = Attempted {
        status: None,
        ms: 0,
        attempt: 0,
    };
    let back = Outcome::Retry {
        delay: RetryDelay::Postponed(0.0),
        group: "push-shutdown",
        message: "qlessd stopped before the delivery",
    };
    qless
        .push_finish(now + 0.5, "q", "a", "push-1", unposted, back)
        .await
        .unwrap();
    let leased = qless.push_pop(now + 1.0, "q", "push-1", 1).await.unwrap();
    assert_eq!(leased[0].attempt, 9);
}

#[tokio::test]
async fn a_delivery_of_a_job_canceled_meanwhile_is_gone_and_frees_its_slot() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.5, "q", "b").await;
    qless
        .push_set(1.0, "q", &config(1, None), &secret("whsec_s"))
        .await
        .unwrap();
    qless.push_pop(2.0, "q", "push-1", 1).await.unwrap();
    qless.cancel(3.0, &strs(&["a"])).await.unwrap();
    let finished = qless
        .push_finish(
            4.0,
            "q",
            "a",
            "push-1",
            ANSWERED,
            Outcome::Fail {
                group: "push-http-400",
                message: "bad",
            },
        )
        .await
        .unwrap();
    assert!(matches!(finished, Finished::Gone(ref why) if why.contains("does not exist")));
    assert_eq!(
        jids(&qless.push_pop(5.0, "q", "push-1", 1).await.unwrap()),
        ["b"]
    );
}

#[tokio::test]
async fn forgetting_a_push_keeps_the_queues_jobs_for_pull_workers() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    qless
        .push_set(1.0, "q", &config(1, None), &secret("whsec_s"))
        .await
        .unwrap();
    assert!(qless.push_forget(2.0, "q").await.unwrap());
    assert!(!qless.push_forget(2.0, "q").await.unwrap());
    assert!(qless.push_get(2.0, "q").await.unwrap().is_none());
    assert!(qless.push_list(2.0).await.unwrap().is_empty());
    assert!(
        qless
            .push_pop(3.0, "q", "push-1", 1)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(super::jobs::pop(&qless, 3.0, "q", "w", 1).await, ["a"]);
}

#[tokio::test]
async fn bad_settings_are_refused_and_write_nothing() {
    let (redis, qless) = start().await;
    let before = snapshot(&redis);
    let cases: &[(&[&str], &str)] = &[
        (
            &["q", "ftp://x", "30", "1", "0", "0", "{}", "s"],
            "http or https",
        ),
        (
            &["q", "https://x", "0", "1", "0", "0", "{}", "s"],
            "1 to 900",
        ),
        (
            &["q", "https://x", "901", "1", "0", "0", "{}", "s"],
            "1 to 900",
        ),
        (
            &["q", "https://x", "30", "0", "0", "0", "{}", "s"],
            "concurrency",
        ),
        (
            &["q", "https://x", "30", "1", "5", "0", "{}", "s"],
            "rate_seconds",
        ),
        (
            &["q", "https://x", "30", "1", "0", "0", "[]", "s"],
            "JSON object",
        ),
        (
            &["q", "https://x", "30", "1", "0", "0", r#"{"a":1}"#, "s"],
            "string",
        ),
        (&["q", "https://x", "30", "1", "0", "0", "{}", ""], "secret"),
        (&["", "https://x", "30", "1", "0", "0", "{}", "s"], "queue"),
    ];
    for (args, needle) in cases {
        assert_error(qless.call("push.set", 1.0, &strs(args)).await, needle);
    }
    for (command, args, needle) in [
        ("push.pop", &["q", "w", "0"][..], "positive integer"),
        ("push.pop", &["q", "", "1"][..], "worker"),
        (
            "push.finish",
            &["q", "a", "w", "200", "5", "1", "explode"][..],
            "complete, retry, postpone or fail",
        ),
        (
            "push.finish",
            &["q", "a", "w", "200", "5", "1", "complete", "{nope"][..],
            "not JSON",
        ),
        (
            "push.finish",
            &["q", "a", "w", "500", "5", "1", "retry", "soon", "g", "m"][..],
            "delay",
        ),
        (
            "push.finish",
            &["q", "a", "w", "400", "5", "1", "fail", "g"][..],
            "missing",
        ),
        (
            "push.finish",
            &["q", "a", "w", "2000", "5", "1", "complete"][..],
            "HTTP status",
        ),
        (
            "push.finish",
            &["q", "a", "w", "", "-1", "1", "complete"][..],
            "whole numbers",
        ),
        ("push.rotate", &["q", "s", "-1"][..], "grace"),
    ] {
        assert_error(qless.call(command, 1.0, &strs(args)).await, needle);
    }
    assert_eq!(snapshot(&redis), before, "nothing was written");
}

#[tokio::test]
async fn a_postponed_delivery_waits_its_delay_and_uses_none_of_the_jobs_retries() {
    let (_redis, qless) = start().await;
    let mut job = super::jobs::job("q", "a");
    job.retries = Some(1);
    qless.put(0.0, job).await.unwrap();
    qless
        .push_set(1.0, "q", &config(5, None), &secret("whsec_s"))
        .await
        .unwrap();
    let later = Outcome::Retry {
        delay: RetryDelay::Postponed(30.0),
        group: "push-http-429",
        message: "HTTP 429",
    };
    for round in 0..3 {
        let at = 2.0 + 40.0 * f64::from(round);
        assert_eq!(
            jids(&qless.push_pop(at, "q", "push-1", 1).await.unwrap()),
            ["a"],
            "round {round}"
        );
        assert_eq!(
            qless
                .push_finish(at + 1.0, "q", "a", "push-1", ANSWERED, later)
                .await
                .unwrap(),
            Finished::Retried
        );
        let job = get(&qless, "a").await;
        assert_eq!((job.state.as_str(), job.remaining), ("scheduled", 1));
        assert!(
            qless
                .push_pop(at + 30.0, "q", "push-1", 1)
                .await
                .unwrap()
                .is_empty(),
            "not before its delay"
        );
    }
    // A postponement of a job this worker no longer holds writes nothing.
    qless.cancel(200.0, &strs(&["a"])).await.unwrap();
    let gone = qless
        .push_finish(201.0, "q", "a", "push-1", ANSWERED, later)
        .await
        .unwrap();
    assert!(matches!(gone, Finished::Gone(_)));
}
