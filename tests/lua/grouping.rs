//! Concurrent calls leaving together as one `batch` invocation (`core/group.rs`):
//! each call keeps its own reply or error, and a call whose caller has gone is not sent.
//!
//! Redis holds every write while a test lines its calls up (`CLIENT PAUSE ... WRITE`,
//! released by `CLIENT UNPAUSE`), and the test waits for what Redis shows of them
//! (`CLIENT LIST`) rather than for time to pass: the first call held at Redis, then a
//! second behind it, which fills the invocations the gateway keeps in flight, so the
//! calls made next queue in the gateway until Redis lets go. What Redis then ran is
//! read back from `MONITOR`, invocation by invocation, so each test asserts the
//! groups that formed: with grouping off, every call would be an invocation of its
//! own and the tests fail.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use qlessd::core::{BATCH_CALLS, Error, PutArgs, Qless, ScriptCode};

use crate::support::{RedisServer, START, connect};

/// How long Redis may take to show what the gateway sent it.
const WITHIN: Duration = Duration::from_secs(10);

/// A plain put of `jid` into queue `q`.
fn job(jid: &str) -> PutArgs {
    super::jobs::job("q", jid)
}

/// `call`, polled once: it is on its way to Redis or queued in the gateway (nothing
/// in a script call's path waits before it is handed to the connection's task), and
/// its answer comes when it is awaited.
fn started<F: Future>(call: F) -> Pin<Box<F>> {
    let mut call = Box::pin(call);
    assert!(
        (&mut call).now_or_never().is_none(),
        "answered while Redis holds writes"
    );
    call
}

/// Redis holding every write, script calls among them, until released, while it
/// still answers the test's own commands: what a long script does to the calls
/// behind it, for as long as the test needs and no longer.
struct Held {
    admin: redis::Connection,
}

impl Held {
    fn writes(redis: &RedisServer) -> Held {
        let mut admin = redis.client().get_connection().unwrap();
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(WITHIN.as_millis() as u64 * 6)
            .arg("WRITE")
            .query::<()>(&mut admin)
            .unwrap();
        Held { admin }
    }

    /// Waits until the gateway's script connection has `invocations` (1 or 2) at
    /// Redis: the first one held by the pause, and with 2 the next one arriving
    /// behind it (in the connection's query buffer), which means it left the
    /// gateway by itself.
    async fn until_in_flight(&mut self, invocations: usize) {
        let deadline = Instant::now() + WITHIN;
        loop {
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query(&mut self.admin)
                .unwrap();
            let held = clients.lines().find_map(|client| {
                let field = |name: &str| {
                    client
                        .split(' ')
                        .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
                };
                let blocked = field("flags")?.contains('b');
                (blocked && field("cmd")? == "evalsha").then(|| field("qbuf"))?
            });
            let behind = held.is_some_and(|queued| queued != "0");
            if held.is_some() && (invocations == 1 || behind) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Redis was not sent {invocations} invocations: {clients}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Lets Redis run what it held.
    fn release(mut self) {
        redis::cmd("CLIENT")
            .arg("UNPAUSE")
            .query::<()>(&mut self.admin)
            .unwrap();
    }
}

/// One script invocation Redis ran: a call alone or a `batch` of calls, each as its
/// command and its arguments after `now`.
#[derive(Debug)]
struct Invocation {
    batch: bool,
    calls: Vec<Vec<String>>,
}

/// The script invocations Redis runs from now on, in order, as `MONITOR` shows them.
struct Monitor {
    lines: BufReader<UnixStream>,
}

impl Monitor {
    fn start(redis: &RedisServer) -> Monitor {
        let mut socket = UnixStream::connect(redis.socket()).unwrap();
        socket.set_read_timeout(Some(WITHIN)).unwrap();
        socket.write_all(b"MONITOR\r\n").unwrap();
        let mut lines = BufReader::new(socket);
        let mut ok = String::new();
        lines.read_line(&mut ok).unwrap();
        assert_eq!(ok, "+OK\r\n");
        Monitor { lines }
    }

    /// Every invocation Redis ran since [`start`](Self::start): read up to a command
    /// sent after all of them were answered, so none is missing.
    fn invocations(mut self, redis: &RedisServer) -> Vec<Invocation> {
        let mut conn = redis.client().get_connection().unwrap();
        let end = "end of the test's invocations";
        let _: String = redis::cmd("ECHO").arg(end).query(&mut conn).unwrap();
        let mut invocations = Vec::new();
        loop {
            let mut line = String::new();
            self.lines
                .read_line(&mut line)
                .expect("MONITOR shows the end");
            // `+<time> [<db> <client>] "<word>" "<word>" ...`: the script's own
            // commands come from the client `lua`.
            let (client, words) = line.split_once("] ").expect("a MONITOR line");
            // Only EVALSHA and the closing ECHO matter here; the rest are skipped
            // before they are read (Valkey writes some words, a script's text for
            // one, without escaping their quotes).
            let first = words.get(..9).unwrap_or("").to_ascii_uppercase();
            if client.ends_with(" lua")
                || !(first == "\"EVALSHA\"" || first.starts_with("\"ECHO\""))
            {
                continue;
            }
            let words = unquote(words.trim_end());
            match words[0].to_ascii_uppercase().as_str() {
                "ECHO" if words[1] == end => return invocations,
                "EVALSHA" => {
                    invocations.push(invocation(&words));
                }
                _ => {}
            }
        }
    }
}

/// `EVALSHA sha <numkeys> [key] <command> <now> <args...>` as the calls it carries.
fn invocation(words: &[String]) -> Invocation {
    let keys: usize = words[2].parse().unwrap();
    let (command, args) = (&words[3 + keys], &words[5 + keys..]);
    if command != "batch" {
        let mut call = vec![command.clone()];
        call.extend_from_slice(args);
        return Invocation {
            batch: false,
            calls: vec![call],
        };
    }
    let mut calls = Vec::new();
    let mut rest = args;
    while let [name, count, more @ ..] = rest {
        let count: usize = count.parse().unwrap();
        let mut call = vec![name.clone()];
        call.extend_from_slice(&more[..count]);
        calls.push(call);
        rest = &more[count..];
    }
    Invocation { batch: true, calls }
}

/// The words of a MONITOR line, each quoted and escaped as Redis writes them.
fn unquote(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars();
    while let Some(quote) = chars.next() {
        if quote == ' ' {
            continue;
        }
        assert_eq!(quote, '"', "{line}");
        let mut word = Vec::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next().unwrap() {
                    'n' => word.push(b'\n'),
                    'r' => word.push(b'\r'),
                    't' => word.push(b'\t'),
                    'a' => word.push(7),
                    'b' => word.push(8),
                    'x' => {
                        let hex: String = chars.by_ref().take(2).collect();
                        word.push(u8::from_str_radix(&hex, 16).unwrap());
                    }
                    other => word.extend_from_slice(other.to_string().as_bytes()),
                },
                other => word.extend_from_slice(other.to_string().as_bytes()),
            }
        }
        words.push(String::from_utf8(word).unwrap());
    }
    words
}

/// The invocations, each as what `label` makes of each of its calls: a group shows
/// as several labels, a call alone as one.
fn shapes(invocations: &[Invocation], label: impl Fn(&[String]) -> String) -> Vec<Vec<String>> {
    invocations
        .iter()
        .map(|invocation| invocation.calls.iter().map(|call| label(call)).collect())
        .collect()
}

/// A put's jid, or any other call's command.
fn jid_or_command(call: &[String]) -> String {
    match call[0].as_str() {
        "put" => call[3].clone(),
        _ => call[0].clone(),
    }
}

/// `names`, as a group's labels.
fn group(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| name.to_string()).collect()
}

/// Puts `j0`..`j<count>` while Redis holds writes: `j0` and `j1` leave alone, one
/// after the other, and the rest queue behind them and leave in groups when Redis
/// lets go. Returns each put's reply in jid order, and the invocations Redis ran.
async fn put_while_held(
    redis: &RedisServer,
    qless: &Qless,
    count: usize,
) -> (Vec<String>, Vec<Invocation>) {
    let monitor = Monitor::start(redis);
    let mut held = Held::writes(redis);
    let first = started(qless.put(START, job("j0")));
    held.until_in_flight(1).await;
    let second = started(qless.put(START, job("j1")));
    held.until_in_flight(2).await;
    let queued: Vec<_> = (2..count)
        .map(|i| started(qless.put(START, job(&format!("j{i}")))))
        .collect();
    held.release();
    let mut replies = vec![first.await.unwrap(), second.await.unwrap()];
    for reply in futures_util::future::join_all(queued).await {
        replies.push(reply.unwrap());
    }
    (replies, monitor.invocations(redis))
}

/// The jids `j<from>`..`j<to>`, as a group's labels.
fn jids(from: usize, to: usize) -> Vec<String> {
    (from..to).map(|i| format!("j{i}")).collect()
}

#[tokio::test]
async fn calls_queued_behind_invocations_in_flight_share_one_and_each_gets_its_own_reply() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let (replies, invocations) = put_while_held(&redis, &qless, 200).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply, format!("j{i}"));
    }
    // The two alone, then the 198 queued behind them in groups of at most BATCH_CALLS.
    let split = 2 + BATCH_CALLS;
    assert_eq!(
        shapes(&invocations, jid_or_command),
        [jids(0, 1), jids(1, 2), jids(2, split), jids(split, 200)]
    );
    assert!(invocations[2].batch && invocations[3].batch);
    assert_each_put_once(&qless, 200).await;
}

#[tokio::test]
async fn groups_are_bounded_by_the_jobs_their_calls_lease_not_by_their_number() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    put_while_held(&redis, &qless, 400).await;
    // 40 pops of ten: counted in calls, the 38 queued would leave as one group;
    // counted in jobs (BATCH_CALLS a group), they leave ten pops at a time.
    let workers: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let monitor = Monitor::start(&redis);
    let mut held = Held::writes(&redis);
    let pop = |i: usize| started(qless.pop(START, "q", &workers[i], 10));
    let first = pop(0);
    held.until_in_flight(1).await;
    let second = pop(1);
    held.until_in_flight(2).await;
    let queued: Vec<_> = (2..40).map(pop).collect();
    held.release();
    let mut pops = vec![first.await, second.await];
    pops.extend(futures_util::future::join_all(queued).await);
    let mut leased = Vec::new();
    for pop in pops {
        let jobs = pop.unwrap();
        assert_eq!(jobs.len(), 10, "a pop of ten leased {}", jobs.len());
        leased.extend(jobs.into_iter().map(|job| job.jid));
    }
    leased.sort();
    leased.dedup();
    assert_eq!(leased.len(), 400, "a job was leased twice");
    let workers =
        |from: usize, to: usize| -> Vec<String> { (from..to).map(|i| format!("w{i}")).collect() };
    assert_eq!(
        shapes(&monitor.invocations(&redis), |call| call[2].clone()),
        [
            workers(0, 1),
            workers(1, 2),
            workers(2, 12),
            workers(12, 22),
            workers(22, 32),
            workers(32, 40),
        ]
    );
}

/// Jobs `j0`..`j<count>` exist, each put exactly once (one history entry).
async fn assert_each_put_once(qless: &Qless, count: usize) {
    for i in 0..count {
        let stored = qless.get(START, &format!("j{i}")).await.unwrap();
        let stored = stored.unwrap_or_else(|| panic!("j{i} missing"));
        assert_eq!(stored.history.len(), 1, "j{i} put more than once");
    }
}

#[tokio::test]
async fn a_refused_call_in_a_group_fails_alone_and_writes_nothing() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let monitor = Monitor::start(&redis);
    let mut held = Held::writes(&redis);
    let first = started(qless.put(START, job("first")));
    held.until_in_flight(1).await;
    let second = started(qless.put(START, job("second")));
    held.until_in_flight(2).await;
    // These three queue behind the two in flight and leave as one group.
    let before = started(qless.put(START, job("before")));
    // An unknown jid to complete: the script refuses it.
    let args: [String; 4] = ["nobody".into(), "w".into(), "q".into(), "{}".into()];
    let refused = started(qless.call("complete", START, &args));
    let after = started(qless.put(START, job("after")));
    held.release();
    assert_eq!(first.await.unwrap(), "first");
    assert_eq!(second.await.unwrap(), "second");
    assert_eq!(before.await.unwrap(), "before");
    assert_eq!(after.await.unwrap(), "after");
    match refused.await {
        Err(Error::Script { code, .. }) => assert_eq!(code, ScriptCode::NotFound),
        other => panic!("expected a script error, got {other:?}"),
    }
    assert_eq!(
        shapes(&monitor.invocations(&redis), jid_or_command),
        [
            group(&["first"]),
            group(&["second"]),
            group(&["before", "complete", "after"]),
        ]
    );
    assert!(qless.get(START, "nobody").await.unwrap().is_none());
}

#[tokio::test]
async fn a_call_whose_caller_gave_up_before_it_left_is_not_sent() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let monitor = Monitor::start(&redis);
    let mut held = Held::writes(&redis);
    let first = started(qless.put(START, job("first")));
    held.until_in_flight(1).await;
    let second = started(qless.put(START, job("second")));
    held.until_in_flight(2).await;
    // These three queue behind the two in flight; the middle one's caller stops
    // waiting before a slot frees, and the other two leave as a group without it.
    let before = started(qless.put(START, job("before")));
    let gone = started(qless.put(START, job("gone")));
    let after = started(qless.put(START, job("after")));
    drop(gone);
    held.release();
    assert_eq!(first.await.unwrap(), "first");
    assert_eq!(second.await.unwrap(), "second");
    assert_eq!(before.await.unwrap(), "before");
    assert_eq!(after.await.unwrap(), "after");
    assert_eq!(
        shapes(&monitor.invocations(&redis), jid_or_command),
        [
            group(&["first"]),
            group(&["second"]),
            group(&["before", "after"]),
        ]
    );
    assert!(qless.get(START, "gone").await.unwrap().is_none());
}

#[tokio::test]
async fn concurrent_batch_calls_are_never_nested_in_a_group() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let args: Vec<Vec<String>> = (0..4)
        .map(|i| {
            ["put", "6", "", "q", &format!("j{i}"), "K", "{}", "0"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
        .collect();
    let monitor = Monitor::start(&redis);
    let mut held = Held::writes(&redis);
    let batch = |i: usize| started(qless.call("batch", START, &args[i]));
    let first = batch(0);
    held.until_in_flight(1).await;
    let second = batch(1);
    held.until_in_flight(2).await;
    let queued = [batch(2), batch(3)];
    held.release();
    let mut replies = vec![first.await, second.await];
    replies.extend(futures_util::future::join_all(queued).await);
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(
            reply.unwrap(),
            redis::Value::Array(vec![redis::Value::BulkString(format!("j{i}").into_bytes())])
        );
    }
    // The two queued together still leave one by one, each the batch it was.
    let invocations = monitor.invocations(&redis);
    assert!(invocations.iter().all(|invocation| invocation.batch));
    assert_eq!(
        shapes(&invocations, jid_or_command),
        [jids(0, 1), jids(1, 2), jids(2, 3), jids(3, 4)]
    );
}

#[tokio::test]
async fn grouped_calls_stay_in_their_namespace() {
    let redis = RedisServer::start();
    let tenant = connect(&redis, Some("tenant")).await;
    let (replies, invocations) = put_while_held(&redis, &tenant, 20).await;
    assert_eq!(replies, jids(0, 20));
    assert_eq!(
        shapes(&invocations, jid_or_command),
        [jids(0, 1), jids(1, 2), jids(2, 20)]
    );
    let mut conn = redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.iter().any(|k| k == "ql:{tenant}:j:j7"), "{keys:?}");
    assert!(
        keys.iter().all(|k| k.starts_with("ql:{tenant}:")),
        "a key outside the namespace: {keys:?}"
    );
}

#[tokio::test]
async fn an_unknown_command_in_a_group_fails_alone() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let monitor = Monitor::start(&redis);
    let mut held = Held::writes(&redis);
    let first = started(qless.put(START, job("first")));
    held.until_in_flight(1).await;
    let second = started(qless.put(START, job("second")));
    held.until_in_flight(2).await;
    // These three queue behind the two in flight and leave as one group.
    let before = started(qless.put(START, job("before")));
    let unknown = started(qless.call("no.such.command", START, &[]));
    let after = started(qless.put(START, job("after")));
    held.release();
    for (answer, jid) in [
        (first.await, "first"),
        (second.await, "second"),
        (before.await, "before"),
        (after.await, "after"),
    ] {
        assert_eq!(answer.unwrap(), jid);
    }
    match unknown.await {
        Err(Error::Script { code, message }) => {
            assert_eq!(code, ScriptCode::Command);
            assert!(
                message.contains("Unknown command no.such.command"),
                "{message}"
            );
        }
        other => panic!("expected a script error, got {other:?}"),
    }
    // The script refuses the group whole for the command it does not know, before
    // any call ran; each call then goes again alone.
    assert_eq!(
        shapes(&monitor.invocations(&redis), jid_or_command),
        [
            group(&["first"]),
            group(&["second"]),
            group(&["before", "no.such.command", "after"]),
            group(&["before"]),
            group(&["no.such.command"]),
            group(&["after"]),
        ]
    );
}

#[tokio::test]
async fn groups_that_meet_noscript_are_sent_again_and_each_call_runs_once() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.forget_scripts();
    let (replies, invocations) = put_while_held(&redis, &qless, 100).await;
    assert_eq!(replies, jids(0, 100));
    // The two alone meet NOSCRIPT and go again after the script is loaded; the
    // group queued behind them leaves once a slot is free, and runs once.
    assert_eq!(
        shapes(&invocations, jid_or_command),
        [jids(0, 1), jids(1, 2), jids(0, 1), jids(1, 2), jids(2, 100)]
    );
    assert_each_put_once(&qless, 100).await;
}
