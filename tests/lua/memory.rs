//! Out of memory: with `maxmemory` reached under `noeviction`, Redis refuses every
//! script call whole before it starts (the script's `#!lua` shebang asks for that
//! check), so no call half-applies: a pop leases nothing, a grouped call changes
//! nothing, and the gateway reports a stable "out of memory". Reads still answer.

use qlessd::core::{Error, Qless};
use redis::Value;

use super::jobs::{pop, put, raw, state, strs};
use crate::support::{RedisServer, connect};

fn memory(redis: &RedisServer, field: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut raw(redis))
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in INFO memory"))
}

/// Puts small jobs (one call each, so no large request buffer is involved) until
/// Redis refuses one, and returns that refusal.
async fn fill(qless: &Qless) -> Error {
    let data = format!("\"{}\"", "x".repeat(200));
    for i in 0..100_000 {
        let args = strs(&["w", "fill", &format!("fill-{i}"), "K", &data, "0"]);
        if let Err(err) = qless.call("put", 0.0, args).await {
            return err;
        }
    }
    panic!("Redis never ran out of memory");
}

fn is_out_of_memory(err: &Error) -> bool {
    matches!(err, Error::Unavailable(message) if message.contains("out of memory"))
}

/// What a pop could change, read with plain commands (script calls are refused):
/// the queue's waiting and running sets, and the state of `a`.
fn lease_state(redis: &RedisServer) -> (u64, u64, Option<String>) {
    let mut conn = raw(redis);
    let card = |conn: &mut redis::Connection, key: &str| -> u64 {
        redis::cmd("ZCARD").arg(key).query(conn).unwrap()
    };
    let waiting = card(&mut conn, "ql:q:q-work");
    let running = card(&mut conn, "ql:q:q-locks");
    let a = redis::cmd("HGET")
        .arg("ql:j:a")
        .arg("state")
        .query(&mut conn)
        .unwrap();
    (waiting, running, a)
}

#[tokio::test]
async fn out_of_memory_a_pop_leases_nothing_and_a_grouped_call_changes_nothing() {
    let redis = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let qless = connect(&redis, None).await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    assert_eq!(pop(&qless, 1.0, "q", "w", 1).await, ["b"]);
    let namespaced = connect(&redis, Some("t")).await;
    put(&namespaced, 0.0, "q", "n").await;
    // A megabyte of room from here: an empty server's own use differs between Redis
    // versions (8.0 starts above 2 MB).
    let limit = memory(&redis, "used_memory") + (1 << 20);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query::<()>(&mut raw(&redis))
        .unwrap();

    let refused = fill(&qless).await;
    assert!(is_out_of_memory(&refused), "{refused:?}");
    assert!(memory(&redis, "used_memory") > memory(&redis, "maxmemory"));
    let before = lease_state(&redis);
    assert_eq!(before, (1, 1, Some("waiting".to_owned())));

    // A pop alone: refused with the stable message, nothing leased.
    let err = qless.pop(2.0, "q", "w2", 5).await.unwrap_err();
    assert!(is_out_of_memory(&err), "{err:?}");
    assert_eq!(
        err.to_string(),
        "redis unavailable: Redis is out of memory and refuses writes; nothing was changed"
    );
    assert_eq!(lease_state(&redis), before);

    // A cancel and a pop grouped into one `batch` invocation (as the gateway groups
    // concurrent calls): before the shebang, the cancel's deletions let the pop's
    // writes through. Now the whole invocation is refused.
    let reply = redis::cmd("EVALSHA")
        .arg(qless.script().sha())
        .arg(0)
        .arg(&[
            "batch", "2", "cancel", "1", "fill-0", "pop", "3", "q", "w3", "1",
        ])
        .query::<Value>(&mut raw(&redis));
    let err = reply.unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    assert_eq!(lease_state(&redis), before);
    let fill0: bool = redis::cmd("EXISTS")
        .arg("ql:j:fill-0")
        .query(&mut raw(&redis))
        .unwrap();
    assert!(fill0, "the grouped cancel ran");

    // Calls the gateway groups itself get the same answer, each.
    let results = qless
        .call_many(
            2.0,
            &[
                ("cancel", strs(&["fill-1"])),
                ("pop", strs(&["q", "w4", "1"])),
            ],
        )
        .await;
    match results {
        Err(err) => assert!(is_out_of_memory(&err), "{err:?}"),
        Ok(each) => assert!(
            each.iter()
                .all(|r| matches!(r, Err(e) if is_out_of_memory(e)))
        ),
    }
    assert_eq!(lease_state(&redis), before);

    // Reads still answer (as the `no-writes` script, which Redis runs when full)...
    assert_eq!(state(&qless, "a").await, "waiting");
    let q = qless.queue(2.0, "q").await.unwrap();
    assert_eq!((q.waiting, q.running), (1, 1));
    assert_eq!(qless.peek(2.0, "q", 1).await.unwrap()[0].jid, "a");
    assert_eq!(qless.worker(2.0, "w").await.unwrap().jids, ["b"]);
    assert_eq!(state(&namespaced, "n").await, "waiting");
    // a read the script refuses is answered with the script's own error
    let bad = qless.get(2.0, "a-history").await.unwrap_err();
    assert_eq!(bad.script_code(), Some(qlessd::core::ScriptCode::Argument));
    // ...unless they need a write after all: then it is the same refusal.
    let tagged = qless.tag_add(2.0, "a", &strs(&["t"])).await.unwrap_err();
    assert!(is_out_of_memory(&tagged), "{tagged:?}");
    assert_eq!(lease_state(&redis), before);

    // Once there is room again, the same pop leases the job.
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query::<()>(&mut raw(&redis))
        .unwrap();
    assert_eq!(pop(&qless, 3.0, "q", "w2", 1).await, ["a"]);
    assert_eq!(state(&qless, "a").await, "running");
}

/// The `allow-oom` copy of the script, which Redis runs over `maxmemory` and lets
/// write, runs the commands that only delete and refuses every other one (a put, a
/// `batch` that could hold a pop) before anything runs: loaded by hand, it is no way
/// around the memory limit.
#[tokio::test]
async fn out_of_memory_the_allow_oom_copy_deletes_and_refuses_anything_else() {
    let redis = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let qless = connect(&redis, None).await;
    put(&qless, 0.0, "q", "a").await;
    put(&qless, 0.0, "q", "b").await;
    let copy = qlessd::core::Script::qless_allow_oom();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(copy.source())
        .query(&mut raw(&redis))
        .unwrap();
    assert_eq!(sha, copy.sha());
    let limit = memory(&redis, "used_memory") + (1 << 20);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query::<()>(&mut raw(&redis))
        .unwrap();
    assert!(is_out_of_memory(&fill(&qless).await));

    let run = |args: &[&str]| {
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(0)
            .arg(args)
            .query::<Value>(&mut raw(&redis))
    };
    for refused in [
        &["put", "1", "w", "q", "c", "K", "{}", "0"][..],
        &["batch", "1", "cancel", "1", "a", "pop", "3", "q", "w", "1"],
        &["pop", "1", "q", "w", "1"],
    ] {
        let err = run(refused).unwrap_err();
        assert_eq!(err.code(), Some("QL_COMMAND"), "{refused:?}: {err}");
    }
    assert_eq!(state(&qless, "a").await, "waiting");
    let c: bool = redis::cmd("EXISTS")
        .arg("ql:j:c")
        .query(&mut raw(&redis))
        .unwrap();
    assert!(!c, "the refused put wrote");

    // The deleting commands run, though Redis refuses the main script.
    assert!(is_out_of_memory(
        &qless.call("cancel", 1.0, strs(&["a"])).await.unwrap_err()
    ));
    run(&["cancel", "1", "a"]).unwrap();
    run(&["queue.forget", "1", "q"]).unwrap();
    let a: bool = redis::cmd("EXISTS")
        .arg("ql:j:a")
        .query(&mut raw(&redis))
        .unwrap();
    assert!(!a, "a was not canceled");
    // Through the gateway's typed call, the fallback to the copy is automatic.
    assert_eq!(qless.cancel(1.0, &strs(&["b"])).await.unwrap(), ["b"]);
}
