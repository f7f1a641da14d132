//! Script semantics (announcements and the due index): every transition that makes a
//! job poppable is announced on `qlessd:available` once per queue and invocation, and
//! the sweep visits only the queues filed in `qlessd:due` (plus its slow-pass slice).
//! (Both are qlessd's own, so they are not under the protocol's plain `ql:` prefix.)

use qlessd::core::{PutArgs, Qless, RecurArgs, RetryArgs};
use serde_json::Value;

use super::events::Listener;
use super::jobs::{complete, config, finish, job, pop, put, raw, start, strs};
use crate::support::RedisServer;

async fn listen(redis: &RedisServer) -> Listener {
    Listener::start(redis, "qlessd:*", "qlessd:~end-of-test").await
}

/// The announcements published since the last call: (queue, count), in order.
async fn announced(listener: &mut Listener) -> Vec<(String, u64)> {
    listener
        .drain()
        .await
        .into_iter()
        .filter(|(channel, _)| channel == "qlessd:available")
        .map(|(_, payload)| {
            let value: Value = serde_json::from_str(&payload).unwrap();
            (
                value["queue"].as_str().unwrap().to_owned(),
                value["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn said(items: &[(&str, u64)]) -> Vec<(String, u64)> {
    items.iter().map(|(q, n)| (q.to_string(), *n)).collect()
}

/// The queues filed in `qlessd:due` with their scores.
fn due(redis: &RedisServer) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg("qlessd:due")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut raw(redis))
        .unwrap()
}

fn scheduled(queue: &str, jid: &str, delay: f64) -> PutArgs {
    PutArgs {
        delay,
        ..job(queue, jid)
    }
}

async fn sweep(qless: &Qless, now: f64) -> qlessd::model::SweepReport {
    qless.sweep(now, 1000, 0, 0).await.unwrap()
}

#[tokio::test]
async fn a_put_to_waiting_announces_its_queue_and_a_scheduled_put_files_a_due_time() {
    let (redis, qless) = start().await;
    let mut listener = listen(&redis).await;
    put(&qless, 1.0, "q", "a").await;
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
    assert!(due(&redis).is_empty(), "a waiting job is due for nothing");

    qless.put(1.0, scheduled("q", "later", 30.0)).await.unwrap();
    assert_eq!(announced(&mut listener).await, said(&[]));
    assert_eq!(due(&redis), vec![("q".to_owned(), 31.0)]);
}

#[tokio::test]
async fn a_batch_of_puts_announces_each_queue_once_with_its_count() {
    let (redis, qless) = start().await;
    let mut listener = listen(&redis).await;
    let jobs = ["a", "b", "c"]
        .iter()
        .map(|jid| (job("q", jid), false))
        .chain([(job("other", "d"), false)])
        .collect();
    qless.put_many(1.0, jobs).await.unwrap();
    assert_eq!(
        announced(&mut listener).await,
        said(&[("q", 3), ("other", 1)])
    );
}

#[tokio::test]
async fn a_retry_announces_its_queue_unless_delayed() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    pop(&qless, 1.0, "q", "w", 2).await;
    let mut listener = listen(&redis).await;
    let retry = |jid: &str, delay| RetryArgs {
        jid: jid.into(),
        queue: "q".into(),
        worker: "w".into(),
        delay: Some(delay),
        group: None,
        message: None,
    };
    qless.retry(2.0, retry("a", 0.0)).await.unwrap();
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
    qless.retry(2.0, retry("b", 10.0)).await.unwrap();
    assert_eq!(announced(&mut listener).await, said(&[]));
    assert!(
        due(&redis).contains(&("q".to_owned(), 12.0)),
        "{:?}",
        due(&redis)
    );
}

#[tokio::test]
async fn an_unfail_announces_how_many_jobs_moved() {
    let (redis, qless) = start().await;
    for jid in ["a", "b"] {
        put(&qless, 0.0, "q", jid).await;
    }
    pop(&qless, 1.0, "q", "w", 2).await;
    for jid in ["a", "b"] {
        qless
            .fail(2.0, jid, "w", "broken", "boom", None)
            .await
            .unwrap();
    }
    let mut listener = listen(&redis).await;
    assert_eq!(qless.unfail(3.0, "again", "broken", 10).await.unwrap(), 2);
    assert_eq!(announced(&mut listener).await, said(&[("again", 2)]));
}

#[tokio::test]
async fn a_completion_announces_the_queues_of_released_dependents_and_of_next() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "parent").await;
    for (queue, jid) in [("qb", "b"), ("qa", "a")] {
        qless
            .put(
                0.0,
                PutArgs {
                    depends: Some(strs(&["parent"])),
                    ..job(queue, jid)
                },
            )
            .await
            .unwrap();
    }
    put(&qless, 0.0, "q", "mover").await;
    pop(&qless, 1.0, "q", "w", 2).await;
    let mut listener = listen(&redis).await;
    complete(&qless, 2.0, "parent", "w", "q").await;
    // Released in jid order: `a` (in qa) before `b` (in qb).
    assert_eq!(
        announced(&mut listener).await,
        said(&[("qa", 1), ("qb", 1)])
    );
    let next = qlessd::core::CompleteArgs {
        next: Some("onward".into()),
        ..finish("mover", "w", "q")
    };
    assert_eq!(qless.complete(3.0, next).await.unwrap(), "waiting");
    assert_eq!(announced(&mut listener).await, said(&[("onward", 1)]));
}

#[tokio::test]
async fn a_timeout_hands_the_job_back_and_announces_it() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut listener = listen(&redis).await;
    qless.timeout(2.0, &strs(&["a"])).await.unwrap();
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
}

#[tokio::test]
async fn unpausing_announces_the_waiting_jobs_of_the_queue() {
    let (redis, qless) = start().await;
    qless.pause(0.0, &strs(&["q"])).await.unwrap();
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    let mut listener = listen(&redis).await;
    qless.unpause(1.0, &strs(&["q"])).await.unwrap();
    assert_eq!(announced(&mut listener).await, said(&[("q", 2)]));
}

#[tokio::test]
async fn a_slot_freed_under_max_concurrency_is_announced() {
    let (redis, qless) = start().await;
    config(&qless, "q-max-concurrency", "1").await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 2).await, strs(&["b"]));
    let mut listener = listen(&redis).await;
    complete(&qless, 2.0, "b", "w", "q").await;
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
    // Raising the limit makes every waiting job poppable.
    put(&qless, 3.0, "q", "c").await;
    pop(&qless, 3.0, "q", "w", 1).await;
    announced(&mut listener).await;
    config(&qless, "q-max-concurrency", "5").await;
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
}

#[tokio::test]
async fn a_freed_throttle_slot_announces_the_job_it_lets_through() {
    let (redis, qless) = start().await;
    qless
        .throttle_set(
            0.0,
            "t",
            qlessd::core::ThrottleLimits {
                maximum: 1,
                rate_jobs: 0,
                rate_seconds: 0.0,
            },
        )
        .await
        .unwrap();
    for jid in ["a", "b"] {
        let args = PutArgs {
            throttles: Some(strs(&["t"])),
            ..job("q", jid)
        };
        qless.put(0.0, args).await.unwrap();
    }
    let first = pop(&qless, 1.0, "q", "w", 2).await;
    assert_eq!(first.len(), 1, "the throttle lets one through");
    let mut listener = listen(&redis).await;
    complete(&qless, 2.0, &first[0], "w", "q").await;
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
}

#[tokio::test]
async fn a_pop_that_takes_what_its_own_call_released_announces_nothing() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "parent").await;
    let child = PutArgs {
        depends: Some(strs(&["parent"])),
        ..job("q", "child")
    };
    qless.put(0.0, child).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut listener = listen(&redis).await;
    let (state, leased) = qless
        .complete_and_pop(2.0, finish("parent", "w", "q"), 1)
        .await
        .unwrap();
    assert_eq!(state, "complete");
    assert_eq!(leased.jobs[0].jid, "child");
    assert_eq!(announced(&mut listener).await, said(&[]));
}

#[tokio::test]
async fn the_sweep_promotes_and_announces_and_a_pop_promoting_for_itself_does_not() {
    let (redis, qless) = start().await;
    qless.put(0.0, scheduled("q", "a", 10.0)).await.unwrap();
    qless.put(0.0, scheduled("p", "b", 10.0)).await.unwrap();
    let mut listener = listen(&redis).await;
    let report = sweep(&qless, 5.0).await;
    assert_eq!((report.promoted, report.next), (0, 10.0));
    let report = sweep(&qless, 11.0).await;
    assert_eq!(report.promoted, 2);
    // Queues due at the same time are visited in name order.
    assert_eq!(announced(&mut listener).await, said(&[("p", 1), ("q", 1)]));
    assert!(due(&redis).is_empty(), "nothing is pending any more");

    qless.put(20.0, scheduled("r", "c", 1.0)).await.unwrap();
    assert_eq!(pop(&qless, 30.0, "r", "w", 1).await, strs(&["c"]));
    assert_eq!(announced(&mut listener).await, said(&[]));
}

#[tokio::test]
async fn the_sweep_spawns_recurring_children_and_announces_them() {
    let (redis, qless) = start().await;
    let recur = RecurArgs {
        queue: "q".into(),
        jid: "every-10s".into(),
        klass: "K".into(),
        data: "{}".into(),
        interval: 10.0,
        offset: 5.0,
        ..RecurArgs::default()
    };
    qless.recur(0.0, recur).await.unwrap();
    assert_eq!(due(&redis), vec![("q".to_owned(), 5.0)]);
    let mut listener = listen(&redis).await;
    let report = sweep(&qless, 6.0).await;
    assert_eq!((report.spawned, report.next), (1, 15.0));
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
}

#[tokio::test]
async fn the_sweep_notices_an_expired_lock_then_announces_it_once_its_grace_is_over() {
    let (redis, qless) = start().await;
    config(&qless, "heartbeat", "60").await;
    config(&qless, "grace-period", "10").await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w", 1).await;
    assert_eq!(
        due(&redis),
        vec![("q".to_owned(), 60.0)],
        "pop files the lock"
    );
    let mut listener = listen(&redis).await;
    let report = sweep(&qless, 61.0).await;
    assert_eq!((report.stalled, report.expired, report.next), (1, 0, 71.0));
    assert_eq!(announced(&mut listener).await, said(&[]));
    let report = sweep(&qless, 72.0).await;
    assert_eq!((report.stalled, report.expired), (0, 1));
    assert_eq!(announced(&mut listener).await, said(&[("q", 1)]));
    // Announced once: the queue is not due again for that lock.
    assert_eq!(sweep(&qless, 73.0).await.visited, 0);
    assert_eq!(pop(&qless, 73.0, "q", "other", 1).await, strs(&["a"]));
}

#[tokio::test]
async fn a_heartbeat_files_nothing_and_the_early_entry_is_corrected_by_a_visit() {
    let (redis, qless) = start().await;
    config(&qless, "heartbeat", "60").await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w", 1).await;
    qless.heartbeat(50.0, "a", "w", None).await.unwrap();
    assert_eq!(due(&redis), vec![("q".to_owned(), 60.0)]);
    let report = sweep(&qless, 61.0).await;
    assert_eq!((report.visited, report.stalled, report.next), (1, 0, 110.0));
    assert_eq!(due(&redis), vec![("q".to_owned(), 110.0)]);
}

#[tokio::test]
async fn the_sweep_visits_only_due_queues() {
    let (redis, qless) = start().await;
    for i in 0..50 {
        put(&qless, 0.0, &format!("idle-{i}"), &format!("j{i}")).await;
    }
    qless.put(0.0, scheduled("busy", "s", 10.0)).await.unwrap();
    let report = sweep(&qless, 5.0).await;
    assert_eq!((report.visited, report.queues), (0, 51), "{report:?}");
    let report = sweep(&qless, 10.0).await;
    assert_eq!((report.visited, report.promoted, report.next), (1, 1, 0.0));
    let report = sweep(&qless, 20.0).await;
    assert_eq!(report.visited, 0, "nothing is due any more: {report:?}");
    drop(redis);
}

#[tokio::test]
async fn the_slow_pass_finds_work_written_by_clients_that_keep_no_due_index() {
    let (redis, qless) = start().await;
    for i in 0..5 {
        put(&qless, 0.0, &format!("q{i}"), &format!("j{i}")).await;
    }
    // A stock client schedules `j3` in q3: the job and its queue set, no `qlessd:due`.
    let mut conn = raw(&redis);
    let _: () = redis::pipe()
        .cmd("ZREM")
        .arg("ql:q:q3-work")
        .arg("j3")
        .cmd("ZADD")
        .arg("ql:q:q3-scheduled")
        .arg(10)
        .arg("j3")
        .cmd("HSET")
        .arg("ql:j:j3")
        .arg("state")
        .arg("scheduled")
        .query(&mut conn)
        .unwrap();
    assert_eq!(sweep(&qless, 20.0).await.promoted, 0, "not in the index");
    // Slices of two queues: q0 q1, then q2 q3 (found), then q4 and round again.
    let first = qless.sweep(20.0, 1000, 2, 0).await.unwrap();
    assert_eq!((first.visited, first.promoted, first.cursor), (2, 0, 2));
    let second = qless.sweep(20.0, 1000, 2, 2).await.unwrap();
    assert_eq!((second.visited, second.promoted, second.cursor), (2, 1, 4));
    let third = qless.sweep(20.0, 1000, 2, 4).await.unwrap();
    assert_eq!((third.visited, third.cursor), (1, 0));
}

#[tokio::test]
async fn forgetting_a_queue_drops_it_from_the_due_index() {
    let (redis, qless) = start().await;
    qless.put(0.0, scheduled("q", "a", 10.0)).await.unwrap();
    qless.queue_forget(1.0, &strs(&["q"])).await.unwrap();
    assert!(due(&redis).is_empty());
    assert_eq!(sweep(&qless, 20.0).await.visited, 0);
}
