//! Script semantics (jobs): put, pop, complete, fail, retry, lock expiry, cancel,
//! dependencies, history, purging, tags, tracking and the job object itself.

use std::collections::BTreeSet;
use std::fmt::Debug;

use qlessd::core::{CompleteArgs, Error, PutArgs, Qless, RetryArgs};
use qlessd::model::Job;
use serde_json::{Value, json};

use crate::support::{RedisServer, connect};

// ---- helpers shared by the other `lua::*` files ----------------------------------

/// A fresh Redis and a legacy-namespace handle on it.
pub(super) async fn start() -> (RedisServer, Qless) {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    (redis, qless)
}

/// Owned strings.
pub(super) fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A plain put of `jid` into `queue` (class `K`, data `{}`, no delay).
pub(super) fn job(queue: &str, jid: &str) -> PutArgs {
    PutArgs {
        worker: "putter".into(),
        queue: queue.into(),
        jid: jid.into(),
        klass: "K".into(),
        data: "{}".into(),
        ..Default::default()
    }
}

pub(super) async fn put(qless: &Qless, now: f64, queue: &str, jid: &str) {
    assert_eq!(qless.put(now, job(queue, jid)).await.unwrap(), jid);
}

/// Pops and returns the jids handed out.
pub(super) async fn pop(
    qless: &Qless,
    now: f64,
    queue: &str,
    worker: &str,
    count: u32,
) -> Vec<String> {
    qless
        .pop(now, queue, worker, count)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.jid)
        .collect()
}

/// The decoded job; panics if it does not exist.
pub(super) async fn get(qless: &Qless, jid: &str) -> Job {
    qless
        .get(0.0, jid)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("job {jid} should exist"))
}

pub(super) async fn state(qless: &Qless, jid: &str) -> String {
    get(qless, jid).await.state.as_str().to_owned()
}

/// The job object exactly as the script encodes it.
pub(super) async fn raw_job(qless: &Qless, jid: &str) -> Value {
    let reply = qless.call("get", 0.0, &strs(&[jid])).await.unwrap();
    let text: String = redis::from_redis_value(reply).expect("get returns a bulk string");
    serde_json::from_str(&text).unwrap()
}

pub(super) fn finish(jid: &str, worker: &str, queue: &str) -> CompleteArgs {
    CompleteArgs {
        jid: jid.into(),
        worker: worker.into(),
        queue: queue.into(),
        data: "{}".into(),
        ..Default::default()
    }
}

pub(super) async fn complete(qless: &Qless, now: f64, jid: &str, worker: &str, queue: &str) {
    assert_eq!(
        qless
            .complete(now, finish(jid, worker, queue))
            .await
            .unwrap(),
        "complete"
    );
}

pub(super) async fn config(qless: &Qless, option: &str, value: &str) {
    qless.config_set(0.0, option, value).await.unwrap();
}

/// The error text of a call that must fail.
pub(super) fn message<T: Debug>(result: Result<T, Error>) -> String {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(err) => err.to_string(),
    }
}

/// Asserts that the call failed with a message containing `needle`.
pub(super) fn assert_error<T: Debug>(result: Result<T, Error>, needle: &str) {
    let text = message(result);
    assert!(text.contains(needle), "{needle:?} not in {text:?}");
}

/// A raw redis connection.
pub(super) fn raw(redis: &RedisServer) -> redis::Connection {
    redis.client().get_connection().unwrap()
}

fn history(job: &Job) -> Vec<(i64, String)> {
    job.history
        .iter()
        .map(|h| (h.when as i64, h.what.clone()))
        .collect()
}

fn set(items: &[String]) -> BTreeSet<String> {
    items.iter().cloned().collect()
}

// ---- put and the job object -------------------------------------------------------

#[tokio::test]
async fn put_defaults_to_priority_zero_no_tags_and_five_retries() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    let job = get(&qless, "a").await;
    assert_eq!(job.priority, 0.0);
    assert!(job.tags.is_empty());
    assert_eq!(job.retries, 5);
    assert_eq!(job.remaining, 5);
    assert_eq!(job.state, "waiting");
    assert_eq!(job.queue, "q");
    assert_eq!(job.klass, "K");
}

#[tokio::test]
async fn a_re_put_inherits_priority_tags_and_retries() {
    let (_redis, qless) = start().await;
    let mut first = job("q", "a");
    first.priority = Some(7.0);
    first.tags = Some(strs(&["x", "y"]));
    first.retries = Some(2);
    qless.put(1.0, first).await.unwrap();
    qless.put(2.0, job("other", "a")).await.unwrap();
    let job = get(&qless, "a").await;
    assert_eq!(job.priority, 7.0);
    assert_eq!(job.tags, strs(&["x", "y"]));
    assert_eq!(job.retries, 2);
    assert_eq!(job.queue, "other");
    // the tag index still lists it once
    let page = qless.tag_get(3.0, "x", 0, 10).await.unwrap();
    assert_eq!(page.jids, strs(&["a"]));
}

#[tokio::test]
async fn the_job_object_has_exactly_seventeen_keys() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.data = "[]".into();
    qless.put(1.0, args).await.unwrap();
    let job = raw_job(&qless, "a").await;
    let keys: BTreeSet<&str> = job
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        "jid",
        "klass",
        "state",
        "queue",
        "worker",
        "tracked",
        "priority",
        "expires",
        "retries",
        "remaining",
        "data",
        "tags",
        "history",
        "failure",
        "spawned_from_jid",
        "dependents",
        "dependencies",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, expected);
    assert_eq!(job["spawned_from_jid"], json!(false));
    assert_eq!(job["tags"], json!({}));
    assert_eq!(job["dependents"], json!({}));
    assert_eq!(job["dependencies"], json!({}));
    assert_eq!(job["failure"], json!({}));
    assert_eq!(job["data"], json!("[]"));
    assert_eq!(job["tracked"], json!(false));
    assert_eq!(job["worker"], json!(""));
    assert_eq!(job["expires"], json!(0));
    assert_eq!(job["priority"], json!(0));
    assert_eq!(job["retries"], json!(5));
    assert_eq!(job["remaining"], json!(5));
    assert_eq!(
        job["history"],
        json!([{"when": 1, "what": "put", "q": "q"}])
    );
}

#[tokio::test]
async fn data_comes_back_as_the_exact_text_given() {
    let (_redis, qless) = start().await;
    let text = "{\"foo\": \"bar\",  \"n\": [1, 2]}";
    let mut args = job("q", "a");
    args.data = text.into();
    qless.put(1.0, args).await.unwrap();
    assert_eq!(raw_job(&qless, "a").await["data"], json!(text));
}

#[tokio::test]
async fn get_of_a_missing_job_is_nil_and_multiget_skips_it() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    put(&qless, 1.0, "q", "b").await;
    assert!(qless.get(2.0, "nope").await.unwrap().is_none());
    let jobs = qless
        .multiget(2.0, &strs(&["b", "nope", "a"]))
        .await
        .unwrap();
    let jids: Vec<_> = jobs.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(jids, ["b", "a"]);
}

#[tokio::test]
async fn requeue_of_a_missing_job_does_not_exist() {
    let (_redis, qless) = start().await;
    assert_error(qless.requeue(1.0, job("q", "a")).await, "does not exist");
    put(&qless, 1.0, "q", "a").await;
    assert_eq!(qless.requeue(2.0, job("q2", "a")).await.unwrap(), "a");
    assert_eq!(get(&qless, "a").await.queue, "q2");
}

// ---- ordering and scheduling ---------------------------------------------------------

#[tokio::test]
async fn higher_priority_pops_first() {
    let (_redis, qless) = start().await;
    for p in -10..10 {
        let mut args = job("q", &format!("j{p}"));
        args.priority = Some(p as f64);
        qless.put(1.0 + (p + 10) as f64, args).await.unwrap();
    }
    let popped = pop(&qless, 100.0, "q", "w", 20).await;
    let expected: Vec<String> = (-10..10).rev().map(|p| format!("j{p}")).collect();
    assert_eq!(popped, expected);
}

#[tokio::test]
async fn equal_priorities_pop_in_put_order() {
    let (_redis, qless) = start().await;
    // jid order is the reverse of put order, so a jid tie-break would show
    put(&qless, 1.0, "q", "a").await;
    put(&qless, 2.0, "q", "b").await;
    put(&qless, 3.0, "q", "c").await;
    assert_eq!(pop(&qless, 4.0, "q", "w", 10).await, strs(&["a", "b", "c"]));
}

#[tokio::test]
async fn a_scheduled_job_is_promoted_by_pop_at_its_due_time() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.delay = 10.0;
    qless.put(0.0, args).await.unwrap();
    assert_eq!(state(&qless, "a").await, "scheduled");
    assert!(pop(&qless, 9.0, "q", "w", 1).await.is_empty());
    assert_eq!(state(&qless, "a").await, "scheduled");
    assert_eq!(pop(&qless, 10.0, "q", "w", 1).await, strs(&["a"]));
    assert_eq!(state(&qless, "a").await, "running");
}

#[tokio::test]
async fn a_scheduled_job_is_promoted_by_peek_at_its_due_time() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.delay = 10.0;
    qless.put(0.0, args).await.unwrap();
    assert!(qless.peek(9.5, "q", 5).await.unwrap().is_empty());
    let peeked = qless.peek(10.0, "q", 5).await.unwrap();
    assert_eq!(peeked.len(), 1);
    assert_eq!(peeked[0].state, "waiting");
    assert_eq!(state(&qless, "a").await, "waiting");
}

#[tokio::test]
async fn priority_reorders_a_waiting_job() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    put(&qless, 2.0, "q", "b").await;
    qless.priority(3.0, "b", 5.0).await.unwrap();
    assert_eq!(get(&qless, "b").await.priority, 5.0);
    assert_eq!(pop(&qless, 4.0, "q", "w", 2).await, strs(&["b", "a"]));
    assert_error(qless.priority(5.0, "nope", 1.0).await, "does not exist");
}

#[tokio::test]
async fn pop_sets_the_lock_and_records_the_worker() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let jobs = qless.pop(1.0, "q", "w", 1).await.unwrap();
    assert_eq!(jobs[0].expires, 61.0);
    assert_eq!(jobs[0].worker, "w");
    assert_eq!(jobs[0].state, "running");
    let job = get(&qless, "a").await;
    assert_eq!(
        history(&job),
        vec![(0, "put".to_owned()), (1, "popped".to_owned())]
    );
    assert_eq!(job.history[1].extra["worker"], json!("w"));
}

// ---- dependencies ---------------------------------------------------------------------

#[tokio::test]
async fn a_dependency_on_a_missing_job_is_dropped() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "b");
    args.depends = Some(strs(&["nope"]));
    qless.put(1.0, args).await.unwrap();
    let job = get(&qless, "b").await;
    assert_eq!(job.state, "waiting");
    assert!(job.dependencies.is_empty());
}

#[tokio::test]
async fn a_dependency_on_a_completed_job_is_dropped() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    pop(&qless, 2.0, "q", "w", 1).await;
    complete(&qless, 3.0, "a", "w", "q").await;
    let mut args = job("q", "b");
    args.depends = Some(strs(&["a"]));
    qless.put(4.0, args).await.unwrap();
    let job = get(&qless, "b").await;
    assert_eq!(job.state, "waiting");
    assert!(job.dependencies.is_empty());
    assert!(get(&qless, "a").await.dependents.is_empty());
}

#[tokio::test]
async fn dependents_are_released_only_on_final_completion() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    let mut args = job("q", "b");
    args.depends = Some(strs(&["a"]));
    qless.put(2.0, args).await.unwrap();
    let b = get(&qless, "b").await;
    assert_eq!(b.state, "depends");
    assert_eq!(b.dependencies, strs(&["a"]));
    assert_eq!(get(&qless, "a").await.dependents, strs(&["b"]));
    // b is not poppable
    assert_eq!(pop(&qless, 3.0, "q", "w", 5).await, strs(&["a"]));
    let mut next = finish("a", "w", "q");
    next.next = Some("q2".into());
    assert_eq!(qless.complete(4.0, next).await.unwrap(), "waiting");
    assert_eq!(state(&qless, "b").await, "depends");
    assert_eq!(pop(&qless, 5.0, "q2", "w", 5).await, strs(&["a"]));
    complete(&qless, 6.0, "a", "w", "q2").await;
    let b = get(&qless, "b").await;
    assert_eq!(b.state, "waiting");
    assert!(b.dependencies.is_empty());
    assert_eq!(pop(&qless, 7.0, "q", "w", 5).await, strs(&["b"]));
}

#[tokio::test]
async fn a_chain_of_dependencies_releases_one_link_at_a_time() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    qless.put(2.0, b).await.unwrap();
    let mut c = job("q", "c");
    c.depends = Some(strs(&["b"]));
    qless.put(3.0, c).await.unwrap();
    assert_eq!(pop(&qless, 4.0, "q", "w", 5).await, strs(&["a"]));
    complete(&qless, 5.0, "a", "w", "q").await;
    assert_eq!(state(&qless, "b").await, "waiting");
    assert_eq!(state(&qless, "c").await, "depends");
    assert_eq!(pop(&qless, 6.0, "q", "w", 5).await, strs(&["b"]));
    complete(&qless, 7.0, "b", "w", "q").await;
    assert_eq!(state(&qless, "c").await, "waiting");
}

#[tokio::test]
async fn depends_on_and_off_edit_the_dependency_set() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    put(&qless, 1.0, "q", "c").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    qless.put(2.0, b).await.unwrap();
    qless
        .depends_on(3.0, "b", &strs(&["c", "nope"]))
        .await
        .unwrap();
    assert_eq!(
        set(&get(&qless, "b").await.dependencies),
        set(&strs(&["a", "c"]))
    );
    assert_eq!(get(&qless, "c").await.dependents, strs(&["b"]));
    qless
        .depends_off(4.0, "b", Some(&strs(&["a"])))
        .await
        .unwrap();
    let job = get(&qless, "b").await;
    assert_eq!(job.state, "depends");
    assert_eq!(job.dependencies, strs(&["c"]));
    assert!(get(&qless, "a").await.dependents.is_empty());
    qless
        .depends_off(5.0, "b", Some(&strs(&["c"])))
        .await
        .unwrap();
    assert_eq!(state(&qless, "b").await, "waiting");
    assert_error(
        qless.depends_on(6.0, "b", &strs(&["a"])).await,
        "in the depends state",
    );
}

#[tokio::test]
async fn depends_off_all_moves_the_job_to_waiting() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    put(&qless, 1.0, "q", "c").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a", "c"]));
    qless.put(2.0, b).await.unwrap();
    qless.depends_off(3.0, "b", None).await.unwrap();
    let job = get(&qless, "b").await;
    assert_eq!(job.state, "waiting");
    assert!(job.dependencies.is_empty());
    assert!(get(&qless, "a").await.dependents.is_empty());
    assert!(get(&qless, "c").await.dependents.is_empty());
    assert_eq!(
        qless
            .jobs(4.0, qlessd::core::Listing::Depends, "q", 0, 10)
            .await
            .unwrap()
            .len(),
        0
    );
}

#[tokio::test]
async fn a_delayed_put_with_dependencies_is_scheduled_after_release() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    b.delay = 100.0;
    qless.put(0.0, b).await.unwrap();
    assert_eq!(state(&qless, "b").await, "depends");
    assert_eq!(pop(&qless, 1.0, "q", "w", 5).await, strs(&["a"]));
    complete(&qless, 2.0, "a", "w", "q").await;
    assert_eq!(state(&qless, "b").await, "scheduled");
    assert!(pop(&qless, 50.0, "q", "w", 5).await.is_empty());
    assert_eq!(pop(&qless, 100.0, "q", "w", 5).await, strs(&["b"]));
}

#[tokio::test]
async fn a_delayed_put_whose_dependency_is_missing_is_scheduled() {
    let (_redis, qless) = start().await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["nope"]));
    b.delay = 10.0;
    qless.put(0.0, b).await.unwrap();
    assert_eq!(state(&qless, "b").await, "scheduled");
}

#[tokio::test]
async fn a_re_put_without_depends_keeps_existing_dependencies() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    qless.put(1.0, b).await.unwrap();
    qless.put(2.0, job("q2", "b")).await.unwrap();
    let job = get(&qless, "b").await;
    assert_eq!(job.state, "depends");
    assert_eq!(job.dependencies, strs(&["a"]));
}

// ---- complete ---------------------------------------------------------------------------

#[tokio::test]
async fn complete_without_next_is_final() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut args = finish("a", "w", "q");
    args.data = "[]".into();
    assert_eq!(qless.complete(2.0, args).await.unwrap(), "complete");
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "complete");
    assert_eq!(job.queue, "");
    assert_eq!(job.worker, "");
    assert_eq!(job.expires, 0.0);
    assert_eq!(raw_job(&qless, "a").await["data"], json!("[]"));
    assert_eq!(
        history(&job),
        vec![
            (0, "put".to_owned()),
            (1, "popped".to_owned()),
            (2, "done".to_owned())
        ]
    );
    assert_eq!(qless.jobs_complete(3.0, 0, 10).await.unwrap(), strs(&["a"]));
    assert!(qless.worker(3.0, "w").await.unwrap().jids.is_empty());
    assert_eq!(qless.length(3.0, "q").await.unwrap(), 0);
}

#[tokio::test]
async fn complete_with_next_moves_the_job_and_resets_its_retries() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(3);
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    qless
        .retry(
            2.0,
            RetryArgs {
                jid: "a".into(),
                queue: "q".into(),
                worker: "w".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    pop(&qless, 3.0, "q", "w", 1).await;
    assert_eq!(get(&qless, "a").await.remaining, 2);
    let mut next = finish("a", "w", "q");
    next.next = Some("q2".into());
    assert_eq!(qless.complete(4.0, next).await.unwrap(), "waiting");
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "waiting");
    assert_eq!(job.queue, "q2");
    assert_eq!(job.worker, "");
    assert_eq!(job.remaining, 3);
    let tail: Vec<_> = history(&job).into_iter().rev().take(2).collect();
    assert_eq!(tail, vec![(4, "put".to_owned()), (4, "done".to_owned())]);
    assert_eq!(job.history.last().unwrap().extra["q"], json!("q2"));
    assert_eq!(pop(&qless, 5.0, "q2", "w", 1).await, strs(&["a"]));
    let names: Vec<_> = qless
        .queues(6.0)
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, strs(&["q", "q2"]));
}

#[tokio::test]
async fn complete_with_next_and_delay_schedules_it_there() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut next = finish("a", "w", "q");
    next.next = Some("q2".into());
    next.delay = Some(10.0);
    assert_eq!(qless.complete(2.0, next).await.unwrap(), "scheduled");
    assert_eq!(
        qless
            .jobs(3.0, qlessd::core::Listing::Scheduled, "q2", 0, 10)
            .await
            .unwrap(),
        strs(&["a"])
    );
    assert!(pop(&qless, 11.0, "q2", "w", 1).await.is_empty());
    assert_eq!(pop(&qless, 12.0, "q2", "w", 1).await, strs(&["a"]));
}

#[tokio::test]
async fn complete_with_next_and_depends_waits_there() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "other", "x").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut next = finish("a", "w", "q");
    next.next = Some("q2".into());
    next.depends = Some(strs(&["x"]));
    assert_eq!(qless.complete(2.0, next).await.unwrap(), "depends");
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "depends");
    assert_eq!(job.dependencies, strs(&["x"]));
    pop(&qless, 3.0, "other", "w", 1).await;
    complete(&qless, 4.0, "x", "w", "other").await;
    assert_eq!(state(&qless, "a").await, "waiting");
    assert_eq!(pop(&qless, 5.0, "q2", "w", 1).await, strs(&["a"]));
}

#[tokio::test]
async fn complete_refuses_strangers_and_jobs_that_are_not_running() {
    let (_redis, qless) = start().await;
    assert_error(
        qless.complete(0.0, finish("a", "w", "q")).await,
        "does not exist",
    );
    put(&qless, 0.0, "q", "a").await;
    let text = message(qless.complete(1.0, finish("a", "w", "q")).await);
    assert!(
        text.contains("not currently running") && text.contains("waiting"),
        "{text}"
    );
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_error(
        qless.complete(2.0, finish("a", "w2", "q")).await,
        "another worker",
    );
    assert_error(
        qless.complete(2.0, finish("a", "w", "q2")).await,
        "another queue",
    );
    let mut bad = finish("a", "w", "q");
    bad.delay = Some(5.0);
    assert_error(
        qless.complete(2.0, bad).await,
        "cannot be used without a \"next\"",
    );
    assert_eq!(state(&qless, "a").await, "running");
}

// ---- fail and retry -----------------------------------------------------------------------

#[tokio::test]
async fn fail_records_the_failure_and_keeps_the_queue() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_eq!(
        qless
            .fail(2.7, "a", "w", "grp", "boom", None)
            .await
            .unwrap(),
        "a"
    );
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "failed");
    assert_eq!(job.queue, "q");
    assert_eq!(job.worker, "");
    let failure = job.failure.clone().unwrap();
    assert_eq!(failure.group, "grp");
    assert_eq!(failure.message, "boom");
    assert_eq!(failure.when, 2.0);
    assert_eq!(failure.worker, "w");
    assert_eq!(job.history.last().unwrap().what, "failed");
    assert_eq!(job.history.last().unwrap().extra["group"], json!("grp"));
    assert_eq!(job.history.last().unwrap().extra["worker"], json!("w"));
    assert_eq!(
        qless.failed_group(3.0, "grp", 0, 10).await.unwrap().jids,
        strs(&["a"])
    );
    assert!(qless.worker(3.0, "w").await.unwrap().jids.is_empty());
    assert_eq!(qless.length(3.0, "q").await.unwrap(), 0);
}

#[tokio::test]
async fn fail_refuses_missing_idle_and_foreign_jobs() {
    let (_redis, qless) = start().await;
    assert_error(
        qless.fail(0.0, "a", "w", "g", "m", None).await,
        "does not exist",
    );
    put(&qless, 0.0, "q", "a").await;
    assert_error(qless.fail(0.0, "a", "w", "g", "m", None).await, "waiting");
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_error(
        qless.fail(1.0, "a", "x", "g", "m", None).await,
        "another worker",
    );
}

#[tokio::test]
async fn a_re_put_of_a_failed_job_clears_its_group_but_keeps_the_failure() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    qless
        .fail(2.0, "a", "w", "grp", "boom", None)
        .await
        .unwrap();
    put(&qless, 3.0, "q", "a").await;
    assert!(qless.failed(4.0).await.unwrap().is_empty());
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "waiting");
    assert_eq!(job.failure.unwrap().group, "grp");
}

fn retry_args(jid: &str, worker: &str, queue: &str) -> RetryArgs {
    RetryArgs {
        jid: jid.into(),
        queue: queue.into(),
        worker: worker.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn retry_gives_the_job_back_and_uses_one_retry() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_eq!(
        qless.retry(2.0, retry_args("a", "w", "q")).await.unwrap(),
        4
    );
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "waiting");
    assert_eq!(job.remaining, 4);
    assert!(qless.worker(3.0, "w").await.unwrap().jids.is_empty());
    assert_eq!(pop(&qless, 3.0, "q", "w2", 1).await, strs(&["a"]));
}

#[tokio::test]
async fn retry_with_a_delay_schedules_the_job() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut args = retry_args("a", "w", "q");
    args.delay = Some(30.0);
    qless.retry(2.0, args).await.unwrap();
    assert_eq!(state(&qless, "a").await, "scheduled");
    assert!(pop(&qless, 31.0, "q", "w", 1).await.is_empty());
    assert_eq!(pop(&qless, 32.0, "q", "w", 1).await, strs(&["a"]));
}

#[tokio::test]
async fn retry_past_the_last_retry_fails_the_job() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(0);
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_eq!(
        qless.retry(2.0, retry_args("a", "w", "q")).await.unwrap(),
        -1
    );
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "failed");
    assert_eq!(job.remaining, -1);
    let failure = job.failure.unwrap();
    assert_eq!(failure.group, "failed-retries-q");
    assert_eq!(failure.message, "Job exhausted retries in queue \"q\"");
    assert_eq!(failure.worker, "");
    assert_eq!(
        qless.failed(3.0).await.unwrap().get("failed-retries-q"),
        Some(&1)
    );
}

#[tokio::test]
async fn retry_exhaustion_with_a_group_and_message_records_them() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(0);
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut args = retry_args("a", "w", "q");
    args.group = Some("grp".into());
    args.message = Some("oops".into());
    assert_eq!(qless.retry(2.5, args).await.unwrap(), -1);
    let failure = get(&qless, "a").await.failure.unwrap();
    assert_eq!(failure.group, "grp");
    assert_eq!(failure.message, "oops");
    assert_eq!(failure.when, 2.0);
    assert_eq!(failure.worker, "w");
}

#[tokio::test]
async fn retry_refuses_missing_idle_and_foreign_jobs() {
    let (_redis, qless) = start().await;
    assert_error(
        qless.retry(0.0, retry_args("a", "w", "q")).await,
        "does not exist",
    );
    put(&qless, 0.0, "q", "a").await;
    assert_error(
        qless.retry(0.0, retry_args("a", "w", "q")).await,
        "not currently running",
    );
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_error(
        qless.retry(1.0, retry_args("a", "x", "q")).await,
        "another worker",
    );
}

// ---- lock expiry ---------------------------------------------------------------------------

#[tokio::test]
async fn an_expired_lock_is_first_noticed_then_handed_over_after_the_grace_period() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    assert_eq!(pop(&qless, 0.0, "q", "w1", 1).await, strs(&["a"]));
    // expires at 60: the first pop after that only warns
    assert!(pop(&qless, 60.0, "q", "w2", 1).await.is_empty());
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "running");
    assert_eq!(job.worker, "w1");
    assert_eq!(job.remaining, 5);
    assert_eq!(job.history.last().unwrap().what, "timed-out");
    assert!(qless.worker(60.0, "w1").await.unwrap().jids.is_empty());
    assert!(pop(&qless, 69.0, "q", "w2", 1).await.is_empty());
    // expiry + grace (10) hands it over
    let jobs = qless.pop(70.0, "q", "w2", 1).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].worker, "w2");
    assert_eq!(jobs[0].remaining, 4);
    assert_eq!(jobs[0].expires, 130.0);
    assert_eq!(qless.stats(70.0, "q", 70.0).await.unwrap().retries, 1);
}

#[tokio::test]
async fn a_lock_that_expires_with_no_retries_left_fails_the_job() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(0);
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 0.0, "q", "w1", 1).await;
    assert!(pop(&qless, 60.0, "q", "w2", 1).await.is_empty());
    assert!(pop(&qless, 70.5, "q", "w2", 1).await.is_empty());
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "failed");
    assert_eq!(job.worker, "");
    assert_eq!(job.remaining, -1);
    let failure = job.failure.clone().unwrap();
    assert_eq!(failure.group, "failed-retries-q");
    assert_eq!(failure.message, "Job exhausted retries in queue \"q\"");
    assert_eq!(failure.worker, "");
    assert_eq!(failure.when, 70.5);
    let last = job.history.last().unwrap();
    assert_eq!(last.what, "failed");
    assert_eq!(last.extra["group"], json!("failed-retries-q"));
    assert_eq!(
        qless
            .failed_group(71.0, "failed-retries-q", 0, 10)
            .await
            .unwrap()
            .jids,
        strs(&["a"])
    );
    assert_eq!(qless.length(71.0, "q").await.unwrap(), 0);
    let stats = qless.stats(71.0, "q", 71.0).await.unwrap();
    assert_eq!((stats.failures, stats.failed), (1, 1));
}

#[tokio::test]
async fn a_zero_grace_period_hands_over_on_the_first_pop_after_expiry() {
    let (_redis, qless) = start().await;
    config(&qless, "grace-period", "0").await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w1", 1).await;
    assert_eq!(pop(&qless, 60.0, "q", "w2", 1).await, strs(&["a"]));
    assert_eq!(get(&qless, "a").await.remaining, 4);
}

#[tokio::test]
async fn heartbeat_extends_the_lock_and_refuses_everyone_else() {
    let (_redis, qless) = start().await;
    assert_error(qless.heartbeat(0.0, "a", "w", None).await, "does not exist");
    put(&qless, 0.0, "q", "a").await;
    assert_error(
        qless.heartbeat(0.0, "a", "w", None).await,
        "not currently running",
    );
    pop(&qless, 0.0, "q", "w", 1).await;
    assert_error(
        qless.heartbeat(1.0, "a", "other", None).await,
        "given out to another",
    );
    assert_eq!(qless.heartbeat(30.9, "a", "w", None).await.unwrap(), 90);
    assert_eq!(get(&qless, "a").await.expires, 90.9);
    // the old expiry no longer counts
    assert!(pop(&qless, 60.0, "q", "w2", 1).await.is_empty());
    assert_eq!(
        get(&qless, "a").await.history.last().unwrap().what,
        "popped"
    );
    assert_eq!(
        qless
            .heartbeat(40.0, "a", "w", Some("[1, 2]"))
            .await
            .unwrap(),
        100
    );
    assert_eq!(get(&qless, "a").await.data, json!([1, 2]));
}

#[tokio::test]
async fn an_exact_heartbeat_answers_the_expiry_as_stored_and_a_plain_one_the_whole_seconds() {
    let (_redis, qless) = start().await;
    config(&qless, "heartbeat", "0.5").await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w", 1).await;
    // The spec's reply: an integer, truncated.
    assert_eq!(qless.heartbeat(30.25, "a", "w", None).await.unwrap(), 30);
    // The extension: the job's `expires` to the last digit, with progress and data too.
    let exact = qless
        .heartbeat_progress(40.25, "a", "w", Some("[3]"), Some("{\"done\":1}"))
        .await
        .unwrap();
    assert_eq!(exact, 40.75);
    let job = get(&qless, "a").await;
    assert_eq!(job.expires, 40.75);
    assert_eq!(job.data, json!([3]));
    config(&qless, "heartbeat", "60").await;
    let exact = qless
        .heartbeat_progress(50.125, "a", "w", None, None)
        .await
        .unwrap();
    assert_eq!(exact, 110.125);
    assert_eq!(get(&qless, "a").await.expires, 110.125);
}

#[tokio::test]
async fn a_heartbeat_after_lock_loss_is_refused() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w1", 1).await;
    pop(&qless, 60.0, "q", "w2", 1).await;
    assert_eq!(pop(&qless, 70.0, "q", "w2", 1).await, strs(&["a"]));
    assert_error(
        qless.heartbeat(71.0, "a", "w1", None).await,
        "given out to another",
    );
    assert_error(
        qless.complete(71.0, finish("a", "w1", "q")).await,
        "another worker",
    );
}

#[tokio::test]
async fn per_queue_heartbeat_sets_the_lock_length() {
    let (_redis, qless) = start().await;
    config(&qless, "q-heartbeat", "5").await;
    config(&qless, "heartbeat", "100").await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "other", "b").await;
    assert_eq!(qless.pop(1.0, "q", "w", 1).await.unwrap()[0].expires, 6.0);
    assert_eq!(
        qless.pop(1.0, "other", "w", 1).await.unwrap()[0].expires,
        101.0
    );
    assert_eq!(qless.heartbeat(2.0, "a", "w", None).await.unwrap(), 7);
}

// ---- timeout ---------------------------------------------------------------------------------

#[tokio::test]
async fn timeout_stalls_the_job_at_the_front_of_its_queue() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut urgent = job("q", "b");
    urgent.priority = Some(100.0);
    qless.put(2.0, urgent).await.unwrap();
    qless.timeout(3.0, &strs(&["a"])).await.unwrap();
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "stalled");
    assert_eq!(job.expires, 0.0);
    assert_eq!(job.remaining, 5);
    assert_eq!(job.history.last().unwrap().what, "timed-out");
    assert_eq!(pop(&qless, 4.0, "q", "w2", 1).await, strs(&["a"]));
    assert_eq!(get(&qless, "a").await.worker, "w2");
}

#[tokio::test]
async fn timeout_refuses_missing_and_idle_jobs() {
    let (_redis, qless) = start().await;
    assert_error(qless.timeout(0.0, &strs(&["a"])).await, "does not exist");
    put(&qless, 0.0, "q", "a").await;
    assert_error(qless.timeout(0.0, &strs(&["a"])).await, "not running");
}

// ---- cancel ------------------------------------------------------------------------------------

#[tokio::test]
async fn cancel_deletes_the_job_everywhere() {
    let (redis, qless) = start().await;
    let mut args = job("q", "a");
    args.tags = Some(strs(&["t"]));
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    assert_eq!(
        qless.cancel(2.0, &strs(&["a", "ghost"])).await.unwrap(),
        strs(&["a", "ghost"])
    );
    assert!(qless.get(3.0, "a").await.unwrap().is_none());
    assert_eq!(qless.length(3.0, "q").await.unwrap(), 0);
    assert!(qless.worker(3.0, "w").await.unwrap().jids.is_empty());
    assert_eq!(qless.tag_get(3.0, "t", 0, 10).await.unwrap().total, 0);
    let mut conn = raw(&redis);
    let keys: Vec<String> = redis::cmd("KEYS").arg("ql:j:a*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn cancel_of_a_missing_job_is_not_an_error() {
    let (_redis, qless) = start().await;
    assert_eq!(
        qless.cancel(0.0, &strs(&["nope"])).await.unwrap(),
        strs(&["nope"])
    );
}

#[tokio::test]
async fn cancel_leaves_completed_jobs_alone() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    complete(&qless, 2.0, "a", "w", "q").await;
    qless.cancel(3.0, &strs(&["a"])).await.unwrap();
    assert_eq!(state(&qless, "a").await, "complete");
    assert_eq!(qless.jobs_complete(3.0, 0, 10).await.unwrap(), strs(&["a"]));
}

#[tokio::test]
async fn cancel_refuses_to_break_a_dependency() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    qless.put(1.0, b).await.unwrap();
    assert_error(qless.cancel(2.0, &strs(&["a"])).await, "is a dependency");
    assert_eq!(state(&qless, "a").await, "waiting");
    // canceling the dependent first is fine, then the job it waited on
    qless.cancel(3.0, &strs(&["b", "a"])).await.unwrap();
    assert!(qless.get(4.0, "a").await.unwrap().is_none());
    assert!(qless.get(4.0, "b").await.unwrap().is_none());
}

#[tokio::test]
async fn canceling_a_dependency_of_a_dependent_removes_the_link() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    qless.put(1.0, b).await.unwrap();
    qless.cancel(2.0, &strs(&["b"])).await.unwrap();
    assert!(get(&qless, "a").await.dependents.is_empty());
}

#[tokio::test]
async fn cancel_of_a_failed_job_clears_its_failure_group() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    qless.fail(2.0, "a", "w", "grp", "m", None).await.unwrap();
    qless.cancel(3.0, &strs(&["a"])).await.unwrap();
    assert!(qless.failed(4.0).await.unwrap().is_empty());
    assert_eq!(qless.stats(4.0, "q", 2.0).await.unwrap().failed, 0);
    assert_eq!(qless.stats(4.0, "q", 2.0).await.unwrap().failures, 1);
}

// ---- history -----------------------------------------------------------------------------------

#[tokio::test]
async fn history_is_capped_keeping_the_first_entry() {
    let (_redis, qless) = start().await;
    config(&qless, "max-job-history", "5").await;
    for t in 0..100 {
        put(&qless, t as f64, "q", "a").await;
    }
    let job = get(&qless, "a").await;
    let expected: Vec<(i64, String)> = [0, 96, 97, 98, 99]
        .into_iter()
        .map(|t| (t, "put".to_owned()))
        .collect();
    assert_eq!(history(&job), expected);
}

/// Bytes of JSON text in the history list of `jid`, and its entries' `what`s.
fn history_list(redis: &RedisServer, jid: &str) -> (usize, Vec<String>) {
    let mut conn = redis.client().get_connection().unwrap();
    let entries: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("ql:j:{jid}-history"))
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let whats = entries
        .iter()
        .map(|entry| {
            let entry: serde_json::Value = serde_json::from_str(entry).unwrap();
            entry[1].as_str().unwrap().chars().take(8).collect()
        })
        .collect();
    (entries.iter().map(String::len).sum(), whats)
}

#[tokio::test]
async fn logs_keep_a_jobs_history_within_its_byte_budget_keeping_the_first_entry() {
    let (redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    // By default (no option set) the budget is 1 MiB: three logs of 600 KB leave the
    // first entry and the newest log.
    for (t, mark) in [(1.0, "one"), (2.0, "two"), (3.0, "three")] {
        let message = format!("{mark} {}", "x".repeat(600 * 1024));
        qless.log(t, "a", &message, None).await.unwrap();
    }
    let (bytes, whats) = history_list(&redis, "a");
    assert_eq!(whats, ["put", "three xx"]);
    assert!(bytes <= 1024 * 1024, "{bytes} bytes");

    // With the option set, the budget is the option; small entries stay up to it.
    config(&qless, "max-job-history-bytes", "2000").await;
    put(&qless, 10.0, "q", "b").await;
    for t in 0..40 {
        let message = format!("log-{t:02} {}", "y".repeat(90));
        qless
            .log(11.0 + f64::from(t), "b", &message, None)
            .await
            .unwrap();
    }
    let (bytes, whats) = history_list(&redis, "b");
    assert!(bytes <= 2000, "{bytes} bytes");
    assert_eq!(whats.first().map(String::as_str), Some("put"));
    assert_eq!(whats.last().map(String::as_str), Some("log-39 y"));
    assert!(whats.len() > 10, "{whats:?}");
    // A log whose own entry is over the budget still shows.
    qless.log(60.0, "b", &"z".repeat(3000), None).await.unwrap();
    let (_, whats) = history_list(&redis, "b");
    assert_eq!(whats, ["put", "zzzzzzzz"]);

    // 0 turns the byte budget off, as for the entry cap.
    config(&qless, "max-job-history-bytes", "0").await;
    for t in 0..3 {
        qless
            .log(70.0 + f64::from(t), "b", &"w".repeat(3000), None)
            .await
            .unwrap();
    }
    assert_eq!(history_list(&redis, "b").1.len(), 5);
}

#[tokio::test]
async fn history_timestamps_are_rounded_down() {
    let (_redis, qless) = start().await;
    put(&qless, 1_700_000_000.75, "q", "a").await;
    assert_eq!(
        raw_job(&qless, "a").await["history"],
        json!([{"when": 1_700_000_000i64, "what": "put", "q": "q"}])
    );
}

#[tokio::test]
async fn log_appends_an_entry_merged_with_its_data() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    qless
        .log(5.0, "a", "note", Some(r#"{"x": 1, "what": "ignored"}"#))
        .await
        .unwrap();
    qless.log(6.0, "a", "plain", None).await.unwrap();
    let history = raw_job(&qless, "a").await["history"].clone();
    assert_eq!(history[1], json!({"when": 5, "what": "note", "x": 1}));
    assert_eq!(history[2], json!({"when": 6, "what": "plain"}));
    assert_error(qless.log(7.0, "nope", "m", None).await, "does not exist");
}

/// A job written by a very old qless: its history in the hash field `history` as a
/// JSON list of {q, put, popped, worker, failed, done} objects, and no history list.
fn put_legacy_job(redis: &RedisServer, jid: &str, state: &str) {
    let legacy = json!([
        {"q": "old", "put": 10.9, "popped": 20.2, "worker": "w1", "failed": 30.5},
        {"q": "q", "put": 40.0, "popped": 50.7, "worker": "w2", "done": 60.1},
        {"q": "q", "put": 70.0}
    ]);
    let _: () = redis::cmd("HSET")
        .arg(format!("ql:j:{jid}"))
        .arg(&[
            ("jid", jid),
            ("klass", "K"),
            ("data", "{}"),
            ("priority", "0"),
            ("tags", "[]"),
            ("state", state),
            ("worker", if state == "running" { "w" } else { "" }),
            ("expires", "0"),
            ("queue", "q"),
            ("retries", "5"),
            ("remaining", "5"),
            ("time", "70"),
            ("history", &legacy.to_string()),
        ])
        .query(&mut raw(redis))
        .unwrap();
}

/// The history the legacy list of `put_legacy_job` stands for.
fn legacy_entries() -> Vec<Value> {
    vec![
        json!({"when": 10, "what": "put", "q": "old"}),
        json!({"when": 20, "what": "popped", "worker": "w1"}),
        json!({"when": 30, "what": "failed"}),
        json!({"when": 40, "what": "put", "q": "q"}),
        json!({"when": 50, "what": "popped", "worker": "w2"}),
        json!({"when": 60, "what": "done"}),
        json!({"when": 70, "what": "put", "q": "q"}),
    ]
}

fn legacy_field_is_gone(redis: &RedisServer, jid: &str) -> bool {
    let field: Option<String> = redis::cmd("HGET")
        .arg(format!("ql:j:{jid}"))
        .arg("history")
        .query(&mut raw(redis))
        .unwrap();
    field.is_none()
}

#[tokio::test]
async fn get_shows_a_legacy_history_field_as_its_entries_without_rewriting_it() {
    let (redis, qless) = start().await;
    put_legacy_job(&redis, "a", "waiting");
    let history = raw_job(&qless, "a").await["history"].clone();
    assert_eq!(history, Value::Array(legacy_entries()));
    // A read stays a read (qlessd's own compact history uses the same field, see
    // lua/README.md): the next write converts it.
    assert!(!legacy_field_is_gone(&redis, "a"));
    assert_eq!(raw_job(&qless, "a").await["history"], history);
    qless.log(80.0, "a", "note", None).await.unwrap();
    assert!(legacy_field_is_gone(&redis, "a"));
    let mut expected = legacy_entries();
    expected.push(json!({"when": 80, "what": "note"}));
    assert_eq!(
        raw_job(&qless, "a").await["history"],
        Value::Array(expected)
    );
}

#[tokio::test]
async fn appending_to_a_legacy_history_converts_it_first() {
    let (redis, qless) = start().await;
    put_legacy_job(&redis, "a", "running");
    qless.log(80.0, "a", "note", None).await.unwrap();
    let mut expected = legacy_entries();
    expected.push(json!({"when": 80, "what": "note"}));
    assert!(legacy_field_is_gone(&redis, "a"));
    assert_eq!(
        raw_job(&qless, "a").await["history"],
        Value::Array(expected)
    );

    put_legacy_job(&redis, "b", "running");
    complete(&qless, 90.0, "b", "w", "q").await;
    let history = raw_job(&qless, "b").await["history"].clone();
    assert_eq!(history.as_array().unwrap().len(), 8);
    assert_eq!(history[0], legacy_entries()[0]);
    assert_eq!(history[7], json!({"when": 90, "what": "done"}));

    put_legacy_job(&redis, "c", "waiting");
    put(&qless, 95.0, "q2", "c").await;
    let history = raw_job(&qless, "c").await["history"].clone();
    assert_eq!(history.as_array().unwrap().len(), 8);
    assert_eq!(history[7], json!({"when": 95, "what": "put", "q": "q2"}));
}

#[tokio::test]
async fn pop_converts_a_legacy_history_before_its_own_entry() {
    let (redis, qless) = start().await;
    put_legacy_job(&redis, "a", "waiting");
    let _: () = redis::cmd("ZADD")
        .arg("ql:q:q-work")
        .arg(0)
        .arg("a")
        .query(&mut raw(&redis))
        .unwrap();
    let popped = qless.pop(100.0, "q", "w", 1).await.unwrap();
    assert_eq!(popped.len(), 1);
    let mut expected: Vec<(i64, String)> = legacy_entries()
        .iter()
        .map(|e| {
            (
                e["when"].as_i64().unwrap(),
                e["what"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    expected.push((100, "popped".to_owned()));
    assert_eq!(history(&popped[0]), expected);
    assert!(legacy_field_is_gone(&redis, "a"));
}

// ---- purging completed jobs -----------------------------------------------------------------------

#[tokio::test]
async fn completed_jobs_older_than_jobs_history_are_purged() {
    let (redis, qless) = start().await;
    config(&qless, "jobs-history", "100").await;
    let mut a = job("q", "a");
    a.tags = Some(strs(&["t"]));
    qless.put(0.0, a).await.unwrap();
    pop(&qless, 0.0, "q", "w", 1).await;
    complete(&qless, 0.0, "a", "w", "q").await;
    put(&qless, 1.0, "q", "b").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    complete(&qless, 99.0, "b", "w", "q").await;
    assert!(qless.get(99.0, "a").await.unwrap().is_some());
    put(&qless, 100.0, "q", "c").await;
    pop(&qless, 100.0, "q", "w", 1).await;
    complete(&qless, 100.0, "c", "w", "q").await;
    assert!(qless.get(100.0, "a").await.unwrap().is_none());
    assert_eq!(
        qless.jobs_complete(100.0, 0, 10).await.unwrap(),
        strs(&["c", "b"])
    );
    assert_eq!(qless.tag_get(100.0, "t", 0, 10).await.unwrap().total, 0);
    let mut conn = raw(&redis);
    let keys: Vec<String> = redis::cmd("KEYS").arg("ql:j:a*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg("ql:tags")
        .arg("t")
        .query(&mut conn)
        .unwrap();
    assert!(score.unwrap_or(0.0) <= 0.0, "{score:?}");
}

#[tokio::test]
async fn only_the_newest_jobs_history_count_completed_jobs_are_kept() {
    let (_redis, qless) = start().await;
    config(&qless, "jobs-history-count", "2").await;
    for (i, jid) in ["a", "b", "c"].into_iter().enumerate() {
        let mut args = job("q", jid);
        args.tags = Some(strs(&["t"]));
        qless.put(i as f64, args).await.unwrap();
        pop(&qless, i as f64, "q", "w", 1).await;
        complete(&qless, i as f64 + 0.5, jid, "w", "q").await;
    }
    assert!(qless.get(5.0, "a").await.unwrap().is_none());
    assert_eq!(
        qless.jobs_complete(5.0, 0, 10).await.unwrap(),
        strs(&["c", "b"])
    );
    assert_eq!(
        qless.tag_get(5.0, "t", 0, 10).await.unwrap().jids,
        strs(&["b", "c"])
    );
}

#[tokio::test]
async fn jobs_history_of_minus_one_deletes_even_the_job_just_completed() {
    let (_redis, qless) = start().await;
    config(&qless, "jobs-history", "-1").await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w", 1).await;
    complete(&qless, 1.0, "a", "w", "q").await;
    assert!(qless.get(1.0, "a").await.unwrap().is_none());
    assert!(qless.jobs_complete(1.0, 0, 10).await.unwrap().is_empty());
}

// ---- tags --------------------------------------------------------------------------------------------

#[tokio::test]
async fn tags_are_added_in_order_without_duplicates_and_removed() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    assert_eq!(
        qless
            .tag_add(1.0, "a", &strs(&["x", "y", "x"]))
            .await
            .unwrap(),
        strs(&["x", "y"])
    );
    assert_eq!(
        qless.tag_add(2.0, "a", &strs(&["z", "y"])).await.unwrap(),
        strs(&["x", "y", "z"])
    );
    assert_eq!(
        qless
            .tag_remove(3.0, "a", &strs(&["y", "nope"]))
            .await
            .unwrap(),
        strs(&["x", "z"])
    );
    assert_eq!(get(&qless, "a").await.tags, strs(&["x", "z"]));
    assert_eq!(qless.tag_get(4.0, "y", 0, 10).await.unwrap().total, 0);
    let reply = qless
        .call("tag", 5.0, &strs(&["remove", "a", "x", "z"]))
        .await
        .unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    assert_error(
        qless.tag_add(6.0, "nope", &strs(&["x"])).await,
        "does not exist",
    );
}

#[tokio::test]
async fn tag_get_lists_jobs_by_tagging_time() {
    let (_redis, qless) = start().await;
    for (t, jid) in [(3.0, "a"), (1.0, "b"), (2.0, "c")] {
        let mut args = job("q", jid);
        args.tags = Some(strs(&["t"]));
        qless.put(t, args).await.unwrap();
    }
    let page = qless.tag_get(5.0, "t", 0, 10).await.unwrap();
    assert_eq!(page.total, 3);
    assert_eq!(page.jids, strs(&["b", "c", "a"]));
    let page = qless.tag_get(5.0, "t", 1, 1).await.unwrap();
    assert_eq!(page.jids, strs(&["c"]));
    let empty = qless
        .call("tag", 5.0, &strs(&["get", "none"]))
        .await
        .unwrap();
    let empty: Value =
        serde_json::from_str(&redis::from_redis_value::<String>(empty).unwrap()).unwrap();
    assert_eq!(empty, json!({"total": 0, "jobs": {}}));
}

#[tokio::test]
async fn tag_top_lists_only_tags_used_at_least_twice() {
    let (_redis, qless) = start().await;
    for (jid, tags) in [
        ("a", vec!["pop", "rare"]),
        ("b", vec!["pop", "mid"]),
        ("c", vec!["pop", "mid"]),
    ] {
        let mut args = job("q", jid);
        args.tags = Some(strs(&tags));
        qless.put(0.0, args).await.unwrap();
    }
    assert_eq!(
        qless.tag_top(1.0, 0, 10).await.unwrap(),
        strs(&["pop", "mid"])
    );
    let none = qless
        .call("tag", 1.0, &strs(&["top", "5", "10"]))
        .await
        .unwrap();
    assert_eq!(redis::from_redis_value::<String>(none).unwrap(), "{}");
    // every argument bumps the counter, even a duplicate
    put(&qless, 0.0, "q", "d").await;
    qless
        .tag_add(2.0, "d", &strs(&["dup", "dup"]))
        .await
        .unwrap();
    assert!(
        qless
            .tag_top(2.0, 0, 10)
            .await
            .unwrap()
            .contains(&"dup".to_owned())
    );
}

// ---- tracking ------------------------------------------------------------------------------------------

#[tokio::test]
async fn tracked_jobs_are_listed_and_gone_ones_are_expired() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    let empty = qless.call("track", 0.0, &[]).await.unwrap();
    let empty: Value =
        serde_json::from_str(&redis::from_redis_value::<String>(empty).unwrap()).unwrap();
    assert_eq!(empty, json!({"jobs": {}, "expired": {}}));
    assert!(qless.track(1.0, "b").await.unwrap());
    assert!(qless.track(2.0, "a").await.unwrap());
    assert!(!qless.track(3.0, "a").await.unwrap());
    assert!(get(&qless, "a").await.tracked);
    let tracked = qless.tracked(4.0).await.unwrap();
    let jids: Vec<_> = tracked.jobs.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(jids, ["b", "a"]);
    assert!(tracked.expired.is_empty());
    qless.cancel(5.0, &strs(&["b"])).await.unwrap();
    let tracked = qless.tracked(6.0).await.unwrap();
    assert_eq!(tracked.jobs.len(), 1);
    assert_eq!(tracked.expired, strs(&["b"]));
    assert!(qless.untrack(7.0, "a").await.unwrap());
    assert!(!get(&qless, "a").await.tracked);
    assert_error(qless.track(8.0, "nope").await, "does not exist");
}

// ---- more edges --------------------------------------------------------------------------------------

#[tokio::test]
async fn pop_and_peek_of_zero_jobs_return_nothing() {
    let (_redis, qless) = start().await;
    for jid in ["a", "b", "c"] {
        put(&qless, 0.0, "q", jid).await;
    }
    for (command, args) in [("pop", strs(&["q", "w", "0"])), ("peek", strs(&["q", "0"]))] {
        let reply = qless.call(command, 1.0, &args).await.unwrap();
        assert_eq!(
            redis::from_redis_value::<String>(reply).unwrap(),
            "{}",
            "{command}"
        );
    }
    let reply = qless
        .call("pop", 1.0, &strs(&["empty", "w", "5"]))
        .await
        .unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    let reply = qless.call("multiget", 1.0, &strs(&["nope"])).await.unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    assert_eq!(qless.length(1.0, "q").await.unwrap(), 3);
}

#[tokio::test]
async fn peek_leases_nothing_and_writes_no_history() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    let peeked = qless.peek(1.0, "q", 5).await.unwrap();
    assert_eq!(peeked[0].state, "waiting");
    let job = get(&qless, "a").await;
    assert_eq!(job.history.len(), 1);
    assert_eq!(job.worker, "");
    assert!(qless.workers(1.0).await.unwrap().is_empty());
    assert_eq!(pop(&qless, 2.0, "q", "w", 5).await, strs(&["a"]));
}

#[tokio::test]
async fn peek_lists_expired_locks_first_without_invalidating_them() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 0.0, "q", "w", 1).await;
    put(&qless, 1.0, "q", "b").await;
    let peeked = qless.peek(61.0, "q", 5).await.unwrap();
    let jids: Vec<_> = peeked.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(jids, ["a", "b"]);
    let a = get(&qless, "a").await;
    assert_eq!((a.state.as_str(), a.worker.as_str()), ("running", "w"));
    assert_eq!(a.history.last().unwrap().what, "popped");
}

#[tokio::test]
async fn a_job_is_handed_over_once_per_retry_then_fails() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(1);
    qless.put(0.0, args).await.unwrap();
    assert_eq!(pop(&qless, 0.0, "q", "w1", 1).await, strs(&["a"]));
    assert!(pop(&qless, 60.0, "q", "w2", 1).await.is_empty());
    assert_eq!(pop(&qless, 70.0, "q", "w2", 1).await, strs(&["a"]));
    assert_eq!(get(&qless, "a").await.remaining, 0);
    // w2's lock expires at 130
    assert!(pop(&qless, 130.0, "q", "w3", 1).await.is_empty());
    assert_eq!(state(&qless, "a").await, "running");
    assert!(pop(&qless, 140.0, "q", "w3", 1).await.is_empty());
    assert_eq!(state(&qless, "a").await, "failed");
}

#[tokio::test]
async fn a_put_takes_a_running_job_away_from_its_worker() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    put(&qless, 2.0, "q2", "a").await;
    let job = get(&qless, "a").await;
    assert_eq!((job.state.as_str(), job.worker.as_str()), ("waiting", ""));
    assert!(qless.worker(3.0, "w").await.unwrap().jids.is_empty());
    assert_eq!(qless.length(3.0, "q").await.unwrap(), 0);
    assert_error(qless.complete(3.0, finish("a", "w", "q")).await, "waiting");
}

#[tokio::test]
async fn a_re_put_with_new_dependencies_replaces_the_old_ones() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "c").await;
    let mut b = job("q", "b");
    b.depends = Some(strs(&["a"]));
    qless.put(1.0, b).await.unwrap();
    let mut b = job("q", "b");
    b.depends = Some(strs(&["c"]));
    qless.put(2.0, b).await.unwrap();
    assert_eq!(get(&qless, "b").await.dependencies, strs(&["c"]));
    assert!(get(&qless, "a").await.dependents.is_empty());
    assert_eq!(get(&qless, "c").await.dependents, strs(&["b"]));
}

#[tokio::test]
async fn priority_of_a_running_job_does_not_requeue_it() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    qless.priority(2.0, "a", 9.0).await.unwrap();
    assert_eq!(qless.queue(2.0, "q").await.unwrap().waiting, 0);
    assert_eq!(get(&qless, "a").await.priority, 9.0);
    complete(&qless, 3.0, "a", "w", "q").await;
    qless.priority(4.0, "a", 1.0).await.unwrap();
    assert_eq!(state(&qless, "a").await, "complete");
}

#[tokio::test]
async fn purged_tracked_jobs_show_up_as_expired() {
    let (_redis, qless) = start().await;
    config(&qless, "jobs-history-count", "0").await;
    put(&qless, 0.0, "q", "a").await;
    qless.track(0.0, "a").await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    complete(&qless, 2.0, "a", "w", "q").await;
    assert!(qless.get(3.0, "a").await.unwrap().is_none());
    let tracked = qless.tracked(3.0).await.unwrap();
    assert!(tracked.jobs.is_empty());
    assert_eq!(tracked.expired, strs(&["a"]));
}

#[tokio::test]
async fn unfail_resets_remaining_but_keeps_the_failure() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.retries = Some(2);
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    qless
        .retry(
            2.0,
            RetryArgs {
                jid: "a".into(),
                queue: "q".into(),
                worker: "w".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    pop(&qless, 3.0, "q", "w", 1).await;
    qless.fail(4.0, "a", "w", "g", "m", None).await.unwrap();
    assert_eq!(qless.unfail(5.0, "q", "g", 10).await.unwrap(), 1);
    let job = get(&qless, "a").await;
    assert_eq!((job.state.as_str(), job.remaining), ("waiting", 2));
    assert_eq!(job.failure.unwrap().group, "g");
}

#[tokio::test]
async fn the_wait_of_a_delayed_job_includes_its_delay() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.delay = 10.0;
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 15.0, "q", "w", 1).await;
    complete(&qless, 18.0, "a", "w", "q").await;
    let stats = qless.stats(20.0, "q", 0.0).await.unwrap();
    assert_eq!((stats.wait.count, stats.wait.mean), (1, 15.0));
    assert_eq!(stats.wait.histogram[15], 1);
    assert_eq!((stats.run.count, stats.run.mean), (1, 3.0));
    assert_eq!(stats.run.histogram[3], 1);
}

#[tokio::test]
async fn only_complete_clears_a_failure() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    qless.fail(2.0, "a", "w", "g", "m", None).await.unwrap();
    put(&qless, 3.0, "q", "a").await;
    pop(&qless, 4.0, "q", "w", 1).await;
    assert!(get(&qless, "a").await.failure.is_some());
    complete(&qless, 5.0, "a", "w", "q").await;
    assert_eq!(raw_job(&qless, "a").await["failure"], json!({}));
}

#[tokio::test]
async fn a_retry_with_a_group_and_message_records_the_failure_but_requeues() {
    let (_redis, qless) = start().await;
    put(&qless, 0.0, "q", "a").await;
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut args = retry_args("a", "w", "q");
    args.group = Some("flaky".into());
    args.message = Some("try again".into());
    assert_eq!(qless.retry(2.9, args).await.unwrap(), 4);
    let job = get(&qless, "a").await;
    assert_eq!(job.state, "waiting");
    let failure = job.failure.unwrap();
    assert_eq!(
        (
            failure.group.as_str(),
            failure.message.as_str(),
            failure.when,
            failure.worker.as_str()
        ),
        ("flaky", "try again", 2.0, "w")
    );
    assert!(qless.failed(3.0).await.unwrap().is_empty());
}

#[tokio::test]
async fn fractional_times_and_priorities_survive_in_the_job_object() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.priority = Some(1.5);
    qless.put(0.0, args).await.unwrap();
    qless.pop(1.25, "q", "w", 1).await.unwrap();
    let raw = raw_job(&qless, "a").await;
    assert_eq!(raw["expires"], json!(61.25));
    assert_eq!(raw["priority"], json!(1.5));
}

#[tokio::test]
async fn history_holds_a_hundred_entries_by_default_and_is_unbounded_at_zero() {
    let (_redis, qless) = start().await;
    for t in 0..150 {
        put(&qless, t as f64, "q", "a").await;
        put(&qless, t as f64, "q", "b").await;
    }
    let a = get(&qless, "a").await;
    assert_eq!(a.history.len(), 100);
    assert_eq!(a.history[0].when, 0.0);
    assert_eq!(a.history[1].when, 51.0);
    assert_eq!(a.history[99].when, 149.0);
    config(&qless, "max-job-history", "0").await;
    for t in 150..160 {
        put(&qless, t as f64, "q", "b").await;
    }
    assert_eq!(get(&qless, "b").await.history.len(), 110);
}

#[tokio::test]
async fn complete_with_the_keep_data_extension_leaves_the_data_alone() {
    let (_redis, qless) = start().await;
    let mut args = job("q", "a");
    args.data = r#"{"kept":true}"#.into();
    qless.put(0.0, args).await.unwrap();
    pop(&qless, 1.0, "q", "w", 1).await;
    let mut done = finish("a", "w", "q");
    done.data = r#"{"ignored":1}"#.into();
    done.keep_data = true;
    assert_eq!(qless.complete(2.0, done).await.unwrap(), "complete");
    let raw = qless.call("get", 3.0, &["a".into()]).await.unwrap();
    let text = String::from_utf8(match raw {
        redis::Value::BulkString(bytes) => bytes,
        other => panic!("{other:?}"),
    })
    .unwrap();
    let object: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(object["data"], r#"{"kept":true}"#);
    assert_eq!(object["state"], "complete");
}
