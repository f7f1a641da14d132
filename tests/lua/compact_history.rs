//! Compact history: a new job's first history entries live in its hash, in the spec's
//! legacy field form, until another kind of entry converts them into the list. Every
//! reader sees the same entries either way; only the storage differs. Only in a
//! namespace: the plain `ql:` prefix, shared with stock qless clients, keeps the spec's
//! list from the first entry.

use qlessd::core::Qless;
use qlessd::model::Job;
use redis::Commands;

use super::jobs::{complete, config, get, put, raw};
use crate::support::{RedisServer, connect};

/// The namespace these tests run in, and its key prefix.
const NAMESPACE: &str = "t";
const PREFIX: &str = "ql:{t}:";

/// A private Redis and a handle in [`NAMESPACE`].
async fn start() -> (RedisServer, Qless) {
    let redis = RedisServer::start();
    let qless = connect(&redis, Some(NAMESPACE)).await;
    (redis, qless)
}

/// The job's `history` hash field and its history list, as stored under `prefix`.
fn stored_under(redis: &RedisServer, prefix: &str, jid: &str) -> (Option<String>, Vec<String>) {
    let mut conn = raw(redis);
    let field: Option<String> = conn.hget(format!("{prefix}j:{jid}"), "history").unwrap();
    let list: Vec<String> = conn
        .lrange(format!("{prefix}j:{jid}-history"), 0, -1)
        .unwrap();
    (field, list)
}

/// [`stored_under`] the namespace's prefix.
fn stored(redis: &RedisServer, jid: &str) -> (Option<String>, Vec<String>) {
    stored_under(redis, PREFIX, jid)
}

fn entries(job: &Job) -> Vec<(i64, String)> {
    job.history
        .iter()
        .map(|h| (h.when as i64, h.what.clone()))
        .collect()
}

async fn pop_one(qless: &Qless, now: f64, jid: &str) -> Job {
    let mut jobs = qless.pop(now, "q", "w", 1).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let job = jobs.remove(0);
    assert_eq!(job.jid, jid);
    job
}

#[tokio::test]
async fn put_pop_and_complete_keep_the_history_in_the_hash_and_reads_do_not_convert_it() {
    let (redis, qless) = start().await;
    put(&qless, 1.5, "q", "a").await;
    assert_eq!(
        stored(&redis, "a"),
        (Some(r#"[{"q":"q","put":1}]"#.to_owned()), vec![])
    );
    assert_eq!(entries(&get(&qless, "a").await), [(1, "put".to_owned())]);
    // A read shows the entries without writing them out.
    assert_eq!(stored(&redis, "a").1, Vec::<String>::new());

    let leased = pop_one(&qless, 2.5, "a").await;
    assert_eq!(
        entries(&leased),
        [(1, "put".to_owned()), (2, "popped".to_owned())]
    );
    assert_eq!(
        stored(&redis, "a"),
        (
            Some(r#"[{"q":"q","put":1},{"popped":2,"worker":"w"}]"#.to_owned()),
            vec![]
        )
    );

    complete(&qless, 3.0, "a", "w", "q").await;
    assert_eq!(
        stored(&redis, "a").0.as_deref(),
        Some(r#"[{"q":"q","put":1},{"popped":2,"worker":"w"},{"done":3}]"#)
    );
    let done = get(&qless, "a").await;
    assert_eq!(
        entries(&done),
        [
            (1, "put".to_owned()),
            (2, "popped".to_owned()),
            (3, "done".to_owned())
        ]
    );
    // The entries carry their details, as list entries would.
    let json = serde_json::to_value(&done.history).unwrap();
    assert_eq!(json[0]["q"], "q");
    assert_eq!(json[1]["worker"], "w");
}

#[tokio::test]
async fn any_other_history_write_converts_the_field_into_the_list_first() {
    let (redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    pop_one(&qless, 2.0, "a").await;
    qless.fail(3.0, "a", "w", "g", "broke", None).await.unwrap();
    assert_eq!(
        stored(&redis, "a"),
        (
            None,
            vec![
                r#"[1,"put",{"q":"q"}]"#.to_owned(),
                r#"[2,"popped",{"worker":"w"}]"#.to_owned(),
                r#"[3,"failed",{"worker":"w","group":"g"}]"#.to_owned(),
            ]
        )
    );
    assert_eq!(
        entries(&get(&qless, "a").await),
        [
            (1, "put".to_owned()),
            (2, "popped".to_owned()),
            (3, "failed".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_small_history_cap_applies_as_it_does_to_the_list() {
    let (redis, qless) = start().await;
    config(&qless, "max-job-history", "2").await;
    put(&qless, 1.0, "q", "a").await;
    pop_one(&qless, 2.0, "a").await;
    complete(&qless, 3.0, "a", "w", "q").await;
    // The first entry and the newest: the third entry converted the field first.
    assert_eq!(
        stored(&redis, "a"),
        (
            None,
            vec![
                r#"[1,"put",{"q":"q"}]"#.to_owned(),
                r#"[3,"done"]"#.to_owned()
            ]
        )
    );
    assert_eq!(
        entries(&get(&qless, "a").await),
        [(1, "put".to_owned()), (3, "done".to_owned())]
    );
}

#[tokio::test]
async fn the_plain_prefix_keeps_every_entry_in_the_list_for_stock_clients() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    put(&qless, 1.5, "q", "a").await;
    pop_one(&qless, 2.5, "a").await;
    complete(&qless, 3.0, "a", "w", "q").await;
    assert_eq!(
        stored_under(&redis, "ql:", "a"),
        (
            None,
            vec![
                r#"[1,"put",{"q":"q"}]"#.to_owned(),
                r#"[2,"popped",{"worker":"w"}]"#.to_owned(),
                r#"[3,"done"]"#.to_owned(),
            ]
        )
    );
}
