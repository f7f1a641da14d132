//! The whole driver against a scripted Redis (`fake.rs`): every recovery branch,
//! each applied to a whole group, replies cut at every byte, connections lost
//! mid-group, callers that gave up (before their call left, while it was in flight,
//! and while it waited to go again), and groups forming. No test sleeps to
//! synchronize: calls are queued by polling them once, and the fake answers only
//! when the test says so. (Tests of the response timeout and the backoff wait for
//! the driver's own timers, short ones.)

use std::pin::Pin;
use std::time::Duration;

use futures_util::FutureExt;
use redis::Value;

use super::super::command::{Args, BATCH};
use super::super::{Error, Replicas, Script};
use super::fake::{FakeRedis, Server};
use super::*;

/// The namespace key every invocation carries.
pub(super) const KEY: &str = "ql:{ns}";

/// How long the driver waits for an answer in these tests.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) fn target(replicas: u32) -> Target {
    Target {
        endpoint: resp::Endpoint::plain(fake::PRIMARY),
        script: Script::qless(),
        namespace_key: Some(KEY.to_owned()),
        namespace: "ns".to_owned(),
        connect_timeout: Duration::from_secs(1),
        response_timeout: RESPONSE_TIMEOUT,
        replicas: Replicas {
            count: replicas,
            timeout: Duration::from_millis(250),
        },
    }
}

/// A driver grouping up to `max_calls` jobs, over a fake whose pipes hold
/// `capacity` bytes.
fn driver(max_calls: usize, capacity: usize, replicas: u32) -> (Grouper, FakeRedis) {
    driver_to(target(replicas), max_calls, capacity)
}

fn driver_to(target: Target, max_calls: usize, capacity: usize) -> (Grouper, FakeRedis) {
    let (fake, connector) = FakeRedis::new(capacity);
    (Grouper::start_with(target, max_calls, connector), fake)
}

/// A `put` of job `jid` (a write of one job).
pub(super) fn put(jid: &str) -> ScriptCall {
    let mut args = Args::new();
    args.push("q").push(jid);
    ScriptCall {
        name: "put",
        now: 1.5,
        args,
        weight: 1,
        alone: false,
        writes: true,
    }
}

/// A `pop` of `count` jobs (weighing `count`).
fn pop(worker: &str, count: usize) -> ScriptCall {
    let mut args = Args::new();
    args.push("q").push(worker).push(count);
    ScriptCall {
        name: "pop",
        now: 1.5,
        args,
        weight: count,
        alone: false,
        writes: true,
    }
}

/// A `get` (a read: no `WAIT` after it).
pub(super) fn get(jid: &str) -> ScriptCall {
    let mut args = Args::new();
    args.push(jid);
    ScriptCall {
        name: "get",
        now: 1.5,
        args,
        weight: 1,
        alone: false,
        writes: false,
    }
}

type Answer<'a> = Pin<Box<dyn Future<Output = Result<Value, Error>> + Send + 'a>>;

/// Starts `call`: polled once, it is in the driver's queue, and its answer comes
/// when awaited.
fn start(grouper: &Grouper, call: ScriptCall) -> Answer<'_> {
    let mut answer: Answer<'_> = Box::pin(grouper.call(call));
    assert!((&mut answer).now_or_never().is_none(), "answered at once");
    answer
}

/// Reads the invocation of one call alone, checking its command and that `arg` is
/// among its arguments.
pub(super) async fn expect_call(server: &mut Server, name: &str, arg: &str) {
    let words = server.command().await;
    let sha = Script::qless().sha().to_owned();
    assert_eq!(
        words[..6],
        ["EVALSHA", &sha, "1", KEY, name, "1.5"],
        "{words:?}"
    );
    assert!(
        words[6..].iter().any(|word| word == arg),
        "{arg} in {words:?}"
    );
}

/// Two calls sent one after the other, each alone: the invocations in flight that
/// grouping allows. Returns the connection and their answers.
async fn two_in_flight<'a>(
    grouper: &'a Grouper,
    fake: &mut FakeRedis,
    first: ScriptCall,
    second: ScriptCall,
) -> (Server, Answer<'a>, Answer<'a>) {
    let (name, arg) = (first.name, arg_of(&first));
    let first = start(grouper, first);
    let mut server = fake.accept().await;
    expect_call(&mut server, name, &arg).await;
    let (name, arg) = (second.name, arg_of(&second));
    let second = start(grouper, second);
    expect_call(&mut server, name, &arg).await;
    (server, first, second)
}

/// The last argument of `call` (a jid, a count).
fn arg_of(call: &ScriptCall) -> String {
    let (mut bytes, mut last) = (call.args.bytes(), Ok(Value::Nil));
    while let Some((value, used)) = resp::parse(bytes).unwrap() {
        (bytes, last) = (&bytes[used..], Ok(value));
    }
    text(last)
}

/// Reads one `batch` invocation and returns the calls it carries, each as its
/// command and arguments.
pub(super) async fn expect_batch(server: &mut Server) -> Vec<Vec<String>> {
    let words = server.command().await;
    assert_eq!(words[4], "batch", "{words:?}");
    let mut calls = Vec::new();
    let mut rest = &words[6..];
    while let [name, count, more @ ..] = rest {
        let count: usize = count.parse().unwrap();
        let mut call = vec![name.clone()];
        call.extend(more[..count].iter().cloned());
        calls.push(call);
        rest = &more[count..];
    }
    calls
}

/// `value` as a RESP bulk string.
pub(super) fn bulk(value: &str) -> Vec<u8> {
    format!("${}\r\n{value}\r\n", value.len()).into_bytes()
}

/// An array of `items`, each already RESP.
pub(super) fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut reply = format!("*{}\r\n", items.len()).into_bytes();
    items.iter().for_each(|item| reply.extend_from_slice(item));
    reply
}

pub(super) fn text(result: Result<Value, Error>) -> String {
    match result {
        Ok(Value::BulkString(bytes)) => String::from_utf8(bytes).unwrap(),
        other => panic!("{other:?}"),
    }
}

/// Checks that nothing was left over on `server`'s connection by what went before:
/// two commands sent next each get their own reply (a request left in flight would
/// take the first one's), a call still goes straight to Redis, and the driver opened
/// no other connection.
async fn nothing_left_in_flight(grouper: &Grouper, fake: &mut FakeRedis, server: &mut Server) {
    let mut first = Box::pin(grouper.command(&["ECHO", "first"]));
    assert!((&mut first).now_or_never().is_none());
    let mut second = Box::pin(grouper.command(&["ECHO", "second"]));
    assert!((&mut second).now_or_never().is_none());
    server.expect(&["ECHO", "first"]).await;
    server.expect(&["ECHO", "second"]).await;
    server.reply(&bulk("first")).await;
    server.reply(&bulk("second")).await;
    assert_eq!(text(first.await), "first");
    assert_eq!(text(second.await), "second");
    let call = start(grouper, get("probe"));
    expect_call(server, "get", "probe").await;
    server.reply(&bulk("probe")).await;
    assert_eq!(text(call.await), "probe");
    assert!(server.quiet());
    assert!(fake.none_opened());
}

/// The word an unavailable error starts with, or the whole message.
fn unavailable(result: Result<Value, Error>) -> String {
    match result {
        Err(Error::Unavailable(why)) => why,
        other => panic!("not unavailable: {other:?}"),
    }
}

#[tokio::test]
async fn a_lone_call_goes_straight_to_redis_and_gets_its_reply() {
    let (grouper, mut fake) = driver(100, 4096, 0);
    let answer = start(&grouper, get("j1"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "get", "j1").await;
    server.reply(&bulk("{}")).await;
    assert_eq!(text(answer.await), "{}");
    assert!(server.quiet());
}

#[tokio::test]
async fn calls_queued_behind_two_in_flight_leave_as_one_batch() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    // Two invocations in flight: the next calls wait in the queue.
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let queued: Vec<_> = (0..10)
        .map(|n| start(&grouper, put(&format!("j{n}"))))
        .collect();
    assert!(server.quiet());
    server.reply(&bulk("a")).await;
    assert_eq!(text(first.await), "a");
    // The ten leave together, as one invocation.
    let calls = expect_batch(&mut server).await;
    let jids: Vec<&str> = calls.iter().map(|call| call[2].as_str()).collect();
    assert_eq!(
        jids,
        ["j0", "j1", "j2", "j3", "j4", "j5", "j6", "j7", "j8", "j9"]
    );
    assert!(calls.iter().all(|call| call[..2] == ["put", "q"]));
    server.reply(&bulk("b")).await;
    let replies: Vec<_> = (0..10).map(|n| bulk(&format!("j{n}"))).collect();
    server.reply(&array(&replies)).await;
    assert_eq!(text(second.await), "b");
    for (n, answer) in queued.into_iter().enumerate() {
        assert_eq!(text(answer.await), format!("j{n}"));
    }
    assert!(server.quiet());
}

#[tokio::test]
async fn groups_are_bounded_by_the_jobs_their_calls_work_on() {
    let (grouper, mut fake) = driver(25, 1 << 20, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, get("a"), get("b")).await;
    let pops: Vec<_> = (0..5)
        .map(|n| start(&grouper, pop(&format!("w{n}"), 10)))
        .collect();
    server.reply(&bulk("a")).await;
    // Two pops of ten (a third would make 30 > 25), then with the next free slot
    // two more, then the last alone.
    let workers = |calls: Vec<Vec<String>>| -> Vec<String> {
        calls.into_iter().map(|call| call[2].clone()).collect()
    };
    assert_eq!(workers(expect_batch(&mut server).await), ["w0", "w1"]);
    server.reply(&bulk("b")).await;
    assert_eq!(workers(expect_batch(&mut server).await), ["w2", "w3"]);
    server.reply(&array(&[bulk("0"), bulk("1")])).await;
    expect_call(&mut server, "pop", "q").await;
    server.reply(&array(&[bulk("2"), bulk("3")])).await;
    server.reply(&bulk("4")).await;
    first.await.unwrap();
    second.await.unwrap();
    for (n, answer) in pops.into_iter().enumerate() {
        assert_eq!(text(answer.await), n.to_string());
    }
}

#[tokio::test]
async fn a_call_that_must_go_alone_leaves_by_itself_between_groups() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let before: Vec<_> = (0..2)
        .map(|n| start(&grouper, put(&format!("j{n}"))))
        .collect();
    let mut batch = Args::new();
    batch.push("put").push(1usize).push("x");
    let alone = start(
        &grouper,
        ScriptCall {
            name: BATCH,
            now: 1.5,
            args: batch,
            weight: 1,
            alone: true,
            writes: true,
        },
    );
    let after = start(&grouper, put("j2"));
    server.reply(&bulk("a")).await;
    assert_eq!(expect_batch(&mut server).await.len(), 2);
    server.reply(&bulk("b")).await;
    // The batch goes as it came, its one call not nested in a group of the others.
    assert_eq!(expect_batch(&mut server).await, [["put", "x"]]);
    server.reply(&array(&[bulk("j0"), bulk("j1")])).await;
    expect_call(&mut server, "put", "j2").await;
    server.reply(&array(&[bulk("x")])).await;
    server.reply(&bulk("j2")).await;
    first.await.unwrap();
    second.await.unwrap();
    for (answer, jid) in before.into_iter().zip(["j0", "j1"]) {
        assert_eq!(text(answer.await), jid);
    }
    assert_eq!(
        alone.await.unwrap(),
        Value::Array(vec![Value::BulkString(b"x".to_vec())])
    );
    assert_eq!(text(after.await), "j2");
}

#[tokio::test]
async fn a_call_whose_caller_gave_up_is_not_sent() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let gone = start(&grouper, pop("w", 10));
    let kept = start(&grouper, put("c"));
    drop(gone);
    server.reply(&bulk("a")).await;
    // Only the call still awaited leaves (alone: the pop is not in a group with it).
    expect_call(&mut server, "put", "c").await;
    server.reply(&bulk("b")).await;
    server.reply(&bulk("c")).await;
    assert_eq!(text(first.await), "a");
    assert_eq!(text(second.await), "b");
    assert_eq!(text(kept.await), "c");
    assert!(server.quiet());
}

#[tokio::test]
async fn replies_arriving_a_byte_at_a_time_reach_their_callers() {
    // Each pipe holds one byte: the driver reads every reply in pieces, cut at every
    // byte, its groups' and its lone calls' alike.
    let (grouper, mut fake) = driver(100, 1, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let queued: Vec<_> = (0..3)
        .map(|n| start(&grouper, put(&format!("j{n}"))))
        .collect();
    server.reply(&bulk("first reply")).await;
    assert_eq!(expect_batch(&mut server).await.len(), 3);
    let group = array(&[
        bulk("j0"),
        b"-QL_ARG user_script:1: Put(): bad\r\n".to_vec(),
        bulk("j2"),
    ]);
    let mut both = bulk("second reply");
    both.extend_from_slice(&group);
    server.reply(&both).await;
    assert_eq!(text(first.await), "first reply");
    assert_eq!(text(second.await), "second reply");
    let mut queued = queued.into_iter();
    assert_eq!(text(queued.next().unwrap().await), "j0");
    let refused = queued.next().unwrap().await;
    assert!(matches!(refused, Err(Error::Script { .. })), "{refused:?}");
    assert_eq!(text(queued.next().unwrap().await), "j2");
}

#[tokio::test]
async fn noscript_loads_the_script_and_sends_the_call_again_on_the_same_connection() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let answer = start(&grouper, put("a"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "a").await;
    server.reply(b"-NOSCRIPT No matching script.\r\n").await;
    server
        .expect(&["SCRIPT", "LOAD", Script::qless().source()])
        .await;
    expect_call(&mut server, "put", "a").await;
    server.reply(&bulk(Script::qless().sha())).await;
    server.reply(&bulk("a")).await;
    assert_eq!(text(answer.await), "a");
    assert!(fake.none_opened());
}

#[tokio::test]
async fn noscript_once_more_is_the_callers_error() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let answer = start(&grouper, put("a"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "a").await;
    server.reply(b"-NOSCRIPT No matching script.\r\n").await;
    server.expect(&["SCRIPT", "LOAD"]).await;
    expect_call(&mut server, "put", "a").await;
    server.reply(b"-ERR Error compiling script\r\n").await;
    server.reply(b"-NOSCRIPT No matching script.\r\n").await;
    let err = answer.await.unwrap_err();
    assert!(
        matches!(&err, Error::Redis(why) if why.starts_with("NoScript")),
        "{err:?}"
    );
    assert!(server.quiet());
}

#[tokio::test]
async fn not_here_drops_the_connection_and_sends_the_call_again_where_the_primary_is_now() {
    for refusal in [
        &b"-MOVED 3999 10.0.0.2:7001\r\n"[..],
        b"-READONLY You can't write against a read only replica.\r\n",
        b"-MASTERDOWN Link with MASTER is down\r\n",
    ] {
        let (grouper, mut fake) = driver(100, 1 << 20, 0);
        let (mut old, refused, behind) =
            two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
        old.reply(refusal).await;
        // A new connection: the script first (a new primary may not hold it), then
        // the refused call once more.
        let mut new = fake.accept().await;
        new.expect(&["SCRIPT", "LOAD"]).await;
        expect_call(&mut new, "put", "a").await;
        old.closed().await;
        new.reply(&bulk(Script::qless().sha())).await;
        new.reply(&bulk("a")).await;
        assert_eq!(text(refused.await), "a");
        // Whether Redis ran the call behind it on the old connection is unknown.
        let word = std::str::from_utf8(&refusal[1..])
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        assert!(unavailable(behind.await).starts_with(word));
        // Told so twice, the caller hears it.
        let twice = start(&grouper, put("c"));
        expect_call(&mut new, "put", "c").await;
        new.reply(refusal).await;
        let mut newer = fake.accept().await;
        newer.expect(&["SCRIPT", "LOAD"]).await;
        expect_call(&mut newer, "put", "c").await;
        newer.reply(&bulk(Script::qless().sha())).await;
        newer.reply(refusal).await;
        assert!(unavailable(twice.await).starts_with(word));
        new.closed().await;
        newer.closed().await;
    }
}

#[tokio::test]
async fn ask_sends_the_call_once_to_the_node_named_while_the_next_calls_stay() {
    let (grouper, mut fake) = driver(100, 1 << 20, 1);
    let asked = start(&grouper, put("a"));
    let mut primary = fake.accept().await;
    expect_call(&mut primary, "put", "a").await;
    primary.expect(&["WAIT", "1", "250"]).await;
    primary.reply(b"-ASK 3999 10.0.0.2:7001\r\n").await;
    primary.reply(b":1\r\n").await;
    let mut node = fake.accept().await;
    assert_eq!(node.node, "10.0.0.2:7001");
    node.expect(&["ASKING"]).await;
    expect_call(&mut node, "put", "a").await;
    node.reply(b"+OK\r\n").await;
    // The node lacks the script: loaded there, the call goes once more.
    node.reply(b"-NOSCRIPT No matching script.\r\n").await;
    node.expect(&["SCRIPT", "LOAD"]).await;
    node.reply(&bulk(Script::qless().sha())).await;
    node.expect(&["ASKING"]).await;
    expect_call(&mut node, "put", "a").await;
    node.reply(b"+OK\r\n").await;
    node.reply(&bulk("a")).await;
    // The write is acknowledged there too.
    node.expect(&["WAIT", "1", "250"]).await;
    node.reply(b":1\r\n").await;
    assert_eq!(text(asked.await), "a");
    node.closed().await;
    // The next call goes to the slot's owner, as before.
    let next = start(&grouper, get("b"));
    expect_call(&mut primary, "get", "b").await;
    primary.reply(&bulk("b")).await;
    assert_eq!(text(next.await), "b");
}

#[tokio::test]
async fn not_now_sends_the_call_again_after_a_backoff_then_gives_up() {
    for refusal in [
        &b"-LOADING Redis is loading the dataset in memory\r\n"[..],
        b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        b"-CLUSTERDOWN The cluster is down\r\n",
        b"-NOREPLICAS Not enough good replicas to write.\r\n",
    ] {
        let word = std::str::from_utf8(&refusal[1..])
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let (grouper, mut fake) = driver(100, 1 << 20, 0);
        let answer = start(&grouper, put("a"));
        let mut server = fake.accept().await;
        expect_call(&mut server, "put", "a").await;
        let refused_at = Instant::now();
        server.reply(refusal).await;
        // On the same connection, after the backoff.
        expect_call(&mut server, "put", "a").await;
        assert!(refused_at.elapsed() >= recovery::BACKOFF, "{word}");
        server.reply(&bulk("a")).await;
        assert_eq!(text(answer.await), "a");
        // Refused twice, the caller hears it, and the connection stays.
        let twice = start(&grouper, put("b"));
        expect_call(&mut server, "put", "b").await;
        server.reply(refusal).await;
        expect_call(&mut server, "put", "b").await;
        server.reply(refusal).await;
        assert!(unavailable(twice.await).starts_with(word), "{word}");
        assert!(fake.none_opened());
    }
}

#[tokio::test]
async fn a_plain_command_told_not_now_fails_at_once_and_keeps_its_connection() {
    let (grouper, mut fake) = driver(1, 1 << 20, 0);
    let mut loading = Box::pin(grouper.command(&["TIME"]));
    assert!((&mut loading).now_or_never().is_none());
    let mut server = fake.accept().await;
    server.expect(&["TIME"]).await;
    server
        .reply(b"-LOADING Redis is loading the dataset in memory\r\n")
        .await;
    assert!(unavailable(loading.await).starts_with("LOADING"));
    let mut time = Box::pin(grouper.command(&["TIME"]));
    assert!((&mut time).now_or_never().is_none());
    server.expect(&["TIME"]).await;
    server.reply(&array(&[bulk("1700000000"), bulk("5")])).await;
    assert!(matches!(time.await, Ok(Value::Array(_))));
    assert!(fake.none_opened());
}

#[tokio::test]
async fn a_connection_lost_mid_group_fails_every_call_in_flight_and_the_next_call_reconnects() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let queued: Vec<_> = (0..4)
        .map(|n| start(&grouper, put(&format!("j{n}"))))
        .collect();
    server.reply(&bulk("a")).await;
    assert_eq!(expect_batch(&mut server).await.len(), 4);
    // Half of the second reply, then the connection is gone.
    server.reply(b"$1\r\n").await;
    drop(server);
    assert_eq!(text(first.await), "a");
    assert!(unavailable(second.await).contains("connection"));
    for answer in queued {
        assert!(unavailable(answer.await).contains("connection"));
    }
    let next = start(&grouper, put("c"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "c").await;
    server.reply(&bulk("c")).await;
    assert_eq!(text(next.await), "c");
}

#[tokio::test]
async fn a_silent_redis_is_given_up_after_the_response_timeout() {
    let timeout = Duration::from_millis(200);
    let (grouper, mut fake) = driver_to(
        Target {
            response_timeout: timeout,
            ..target(0)
        },
        100,
        1 << 20,
    );
    let started = Instant::now();
    let answer = start(&grouper, put("a"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "a").await;
    assert!(unavailable(answer.await).contains("did not answer within 0.2s"));
    assert!(started.elapsed() >= timeout);
    server.closed().await;
    // The next call opens a new connection.
    let next = start(&grouper, get("b"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "get", "b").await;
    server.reply(&bulk("b")).await;
    assert_eq!(text(next.await), "b");
}

#[tokio::test]
async fn a_refused_connection_fails_the_call_and_the_next_call_connects() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    fake.refuse_next();
    assert!(unavailable(grouper.call(put("a")).await).starts_with("cannot reach Redis"));
    let answer = start(&grouper, put("b"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "b").await;
    server.reply(&bulk("b")).await;
    assert_eq!(text(answer.await), "b");
}

#[tokio::test]
async fn a_write_fewer_replicas_acknowledged_is_unavailable_and_not_sent_again() {
    let (grouper, mut fake) = driver(100, 1 << 20, 1);
    let confirmed = start(&grouper, put("a"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "a").await;
    server.expect(&["WAIT", "1", "250"]).await;
    let unconfirmed = start(&grouper, put("b"));
    expect_call(&mut server, "put", "b").await;
    server.expect(&["WAIT", "1", "250"]).await;
    server.reply(&bulk("a")).await;
    server.reply(b":1\r\n").await;
    server.reply(&bulk("b")).await;
    server.reply(b":0\r\n").await;
    assert_eq!(text(confirmed.await), "a");
    assert!(unavailable(unconfirmed.await).starts_with("NOREPLICAS the write reached 0 of 1"));
    // A read waits for no replica.
    let read = start(&grouper, get("c"));
    expect_call(&mut server, "get", "c").await;
    server.reply(&bulk("c")).await;
    assert_eq!(text(read.await), "c");
    assert!(server.quiet());
}

#[tokio::test]
async fn a_group_refused_whole_sends_each_call_again_alone() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let queued: Vec<_> = (0..2)
        .map(|n| start(&grouper, put(&format!("j{n}"))))
        .collect();
    server.reply(&bulk("a")).await;
    assert_eq!(expect_batch(&mut server).await.len(), 2);
    server.reply(&bulk("b")).await;
    server
        .reply(b"-QL_COMMAND user_script:1: Batch(): unknown command\r\n")
        .await;
    expect_call(&mut server, "put", "j0").await;
    expect_call(&mut server, "put", "j1").await;
    server.reply(&bulk("j0")).await;
    server.reply(b"-QL_ARG user_script:1: Put(): bad\r\n").await;
    first.await.unwrap();
    second.await.unwrap();
    let mut queued = queued.into_iter();
    assert_eq!(text(queued.next().unwrap().await), "j0");
    assert!(matches!(
        queued.next().unwrap().await,
        Err(Error::Script { .. })
    ));
}

#[tokio::test]
async fn the_role_of_a_replica_fails_and_drops_the_connection() {
    let (grouper, mut fake) = driver(1, 1 << 20, 0);
    let mut role = Box::pin(grouper.role());
    assert!((&mut role).now_or_never().is_none());
    let mut server = fake.accept().await;
    server.expect(&["ROLE"]).await;
    server
        .reply(b"*5\r\n$5\r\nslave\r\n$8\r\n10.0.0.9\r\n:6379\r\n$9\r\nconnected\r\n:1\r\n")
        .await;
    assert!(unavailable(role.await).starts_with("READONLY"));
    server.closed().await;
    let mut role = Box::pin(grouper.role());
    assert!((&mut role).now_or_never().is_none());
    let mut server = fake.accept().await;
    server.expect(&["ROLE"]).await;
    server.reply(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n").await;
    assert!(matches!(role.await, Ok(Value::Array(_))));
}

#[tokio::test]
async fn a_caller_that_gives_up_while_its_call_is_in_flight_takes_no_other_callers_reply() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, gone, kept) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    drop(gone);
    server.reply(&bulk("a")).await;
    server.reply(&bulk("b")).await;
    assert_eq!(text(kept.await), "b");
    nothing_left_in_flight(&grouper, &mut fake, &mut server).await;
}

#[tokio::test]
async fn a_caller_that_gave_up_before_noscript_is_not_sent_again() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let gone = start(&grouper, put("a"));
    let mut server = fake.accept().await;
    expect_call(&mut server, "put", "a").await;
    drop(gone);
    server.reply(b"-NOSCRIPT No matching script.\r\n").await;
    // Neither the script nor the call goes: the next thing written is the probe's.
    nothing_left_in_flight(&grouper, &mut fake, &mut server).await;
}

#[tokio::test]
async fn a_caller_that_gives_up_while_its_call_is_reloaded_takes_no_other_callers_reply() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, gone, kept) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    server.reply(b"-NOSCRIPT No matching script.\r\n").await;
    server.expect(&["SCRIPT", "LOAD"]).await;
    expect_call(&mut server, "put", "a").await;
    drop(gone);
    server.reply(&bulk("b")).await;
    server.reply(&bulk(Script::qless().sha())).await;
    server.reply(&bulk("a")).await;
    assert_eq!(text(kept.await), "b");
    nothing_left_in_flight(&grouper, &mut fake, &mut server).await;
}

#[tokio::test]
async fn a_caller_that_gave_up_before_moved_opens_no_connection_for_it() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut old, gone, behind) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    drop(gone);
    old.reply(b"-MOVED 3999 10.0.0.2:7001\r\n").await;
    old.closed().await;
    assert!(unavailable(behind.await).starts_with("MOVED"));
    assert!(fake.none_opened());
    // The next call opens a connection of its own, with nothing sent before it.
    let next = start(&grouper, put("c"));
    let mut new = fake.accept().await;
    expect_call(&mut new, "put", "c").await;
    new.reply(&bulk("c")).await;
    assert_eq!(text(next.await), "c");
    nothing_left_in_flight(&grouper, &mut fake, &mut new).await;
}

#[tokio::test]
async fn a_caller_that_gives_up_while_its_call_goes_again_after_moved_takes_no_other_reply() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let gone = start(&grouper, put("a"));
    let mut old = fake.accept().await;
    expect_call(&mut old, "put", "a").await;
    old.reply(b"-MOVED 3999 10.0.0.2:7001\r\n").await;
    let mut new = fake.accept().await;
    new.expect(&["SCRIPT", "LOAD"]).await;
    expect_call(&mut new, "put", "a").await;
    drop(gone);
    let kept = start(&grouper, put("b"));
    expect_call(&mut new, "put", "b").await;
    new.reply(&bulk(Script::qless().sha())).await;
    new.reply(&bulk("a")).await;
    new.reply(&bulk("b")).await;
    assert_eq!(text(kept.await), "b");
    old.closed().await;
    nothing_left_in_flight(&grouper, &mut fake, &mut new).await;
}

#[tokio::test]
async fn a_caller_that_gives_up_during_its_backoff_is_not_sent_again() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, gone, kept) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let loading = b"-LOADING Redis is loading the dataset in memory\r\n";
    server.reply(loading).await;
    server.reply(loading).await;
    drop(gone);
    // Both waited out their backoff; only the call still awaited goes again.
    expect_call(&mut server, "put", "b").await;
    server.reply(&bulk("b")).await;
    assert_eq!(text(kept.await), "b");
    nothing_left_in_flight(&grouper, &mut fake, &mut server).await;
}

/// Where a group refused whole goes again.
#[derive(Debug, Clone, Copy)]
enum Again {
    /// On the same connection, after `SCRIPT LOAD`.
    Loaded,
    /// On a new connection, after `SCRIPT LOAD`.
    Elsewhere,
    /// On the same connection, after the backoff.
    Later,
    /// On the same connection, each call alone.
    Split,
}

#[tokio::test]
async fn a_recovery_of_a_group_applies_to_every_call_still_awaited_in_it() {
    let cases: &[(&[u8], Again)] = &[
        (b"-NOSCRIPT No matching script.\r\n", Again::Loaded),
        (b"-MOVED 3999 10.0.0.2:7001\r\n", Again::Elsewhere),
        (
            b"-READONLY You can't write against a read only replica.\r\n",
            Again::Elsewhere,
        ),
        (
            b"-LOADING Redis is loading the dataset in memory\r\n",
            Again::Later,
        ),
        (
            b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
            Again::Later,
        ),
        (
            b"-QL_COMMAND user_script:1: Batch(): unknown command\r\n",
            Again::Split,
        ),
    ];
    for &(refusal, again) in cases {
        let (grouper, mut fake) = driver(100, 1 << 20, 0);
        let (mut server, first, second) =
            two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
        let mut queued: Vec<_> = (0..4)
            .map(|n| Some(start(&grouper, put(&format!("j{n}")))))
            .collect();
        server.reply(&bulk("a")).await;
        assert_eq!(expect_batch(&mut server).await.len(), 4, "{again:?}");
        server.reply(&bulk("b")).await;
        // One caller of the group gives up before the group is refused.
        drop(queued[1].take());
        server.reply(refusal).await;
        let kept = ["j0", "j2", "j3"];
        let puts = |calls: Vec<Vec<String>>| -> Vec<String> {
            calls.into_iter().map(|call| call[2].clone()).collect()
        };
        let replies: Vec<_> = kept.iter().map(|jid| bulk(jid)).collect();
        let mut server = match again {
            Again::Loaded | Again::Elsewhere => {
                let mut to = match again {
                    Again::Elsewhere => fake.accept().await,
                    _ => server,
                };
                to.expect(&["SCRIPT", "LOAD"]).await;
                assert_eq!(puts(expect_batch(&mut to).await), kept, "{again:?}");
                to.reply(&bulk(Script::qless().sha())).await;
                to.reply(&array(&replies)).await;
                to
            }
            Again::Later => {
                assert_eq!(puts(expect_batch(&mut server).await), kept, "{again:?}");
                server.reply(&array(&replies)).await;
                server
            }
            Again::Split => {
                for jid in kept {
                    expect_call(&mut server, "put", jid).await;
                }
                for reply in &replies {
                    server.reply(reply).await;
                }
                server
            }
        };
        assert_eq!(text(first.await), "a");
        assert_eq!(text(second.await), "b");
        for (answer, jid) in queued.into_iter().flatten().zip(kept) {
            assert_eq!(text(answer.await), jid, "{again:?}");
        }
        nothing_left_in_flight(&grouper, &mut fake, &mut server).await;
    }
}

#[tokio::test]
async fn a_group_left_with_one_caller_goes_again_as_a_call_alone() {
    let (grouper, mut fake) = driver(100, 1 << 20, 0);
    let (mut server, first, second) = two_in_flight(&grouper, &mut fake, put("a"), put("b")).await;
    let gone = start(&grouper, put("j0"));
    let kept = start(&grouper, put("j1"));
    server.reply(&bulk("a")).await;
    assert_eq!(expect_batch(&mut server).await.len(), 2);
    drop(gone);
    server.reply(&bulk("b")).await;
    server.reply(b"-NOSCRIPT No matching script.\r\n").await;
    server.expect(&["SCRIPT", "LOAD"]).await;
    expect_call(&mut server, "put", "j1").await;
    server.reply(&bulk(Script::qless().sha())).await;
    server.reply(&bulk("j1")).await;
    assert_eq!(text(first.await), "a");
    assert_eq!(text(second.await), "b");
    assert_eq!(text(kept.await), "j1");
    nothing_left_in_flight(&grouper, &mut fake, &mut server).await;
}
