//! The connection layer alone, over the scripted fake's in-memory pipes: what is
//! written and in which order, each reply paired with the request it answers (whole,
//! or once all its pieces are in), the time the response timeout counts from, a
//! write Redis does not take, and a connection given up (its callers told) and
//! opened anew. What a reply means is not tested here (`recovery.rs`), nor how the
//! driver uses the layer (`group/tests.rs`).

use std::time::Duration;

use redis::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::super::fake::{FakeRedis, Server};
use super::super::recovery::Kind;
use super::super::tests::{KEY, array, bulk, expect_batch, expect_call, get, put, target, text};
use super::super::{AloneKind, Call, Error, Script, ScriptCall, Target};
use super::*;

/// Where a caller's answer comes.
type Answer = oneshot::Receiver<Result<Value, Error>>;

/// `script` as the driver sends it alone, and where its answer comes.
fn one(script: ScriptCall) -> (Sent, Answer) {
    let (reply, answer) = oneshot::channel();
    (Sent::One(Call { script, reply }), answer)
}

/// `scripts` as one group, and where each answer comes.
fn group(scripts: Vec<ScriptCall>) -> (Sent, Vec<Answer>) {
    let (calls, answers) = scripts
        .into_iter()
        .map(|script| {
            let (reply, answer) = oneshot::channel();
            (Call { script, reply }, answer)
        })
        .unzip();
    (Sent::Group(calls), answers)
}

/// The plain command `words`, and where its answer comes.
fn command(words: &[&str]) -> (Sent, Answer) {
    let (reply, answer) = oneshot::channel();
    let mut request = Vec::new();
    resp::put_command(&mut request, words);
    let kind = AloneKind::Command;
    (
        Sent::Alone {
            request,
            reply,
            kind,
        },
        answer,
    )
}

/// A link to `target` over a fake whose pipes hold `capacity` bytes, and the far
/// end of its connection.
async fn open(target: &Target, capacity: usize) -> (Link, Server, FakeRedis) {
    let (mut fake, connector) = FakeRedis::new(capacity);
    let link = Link::open(&*connector, target)
        .await
        .expect("the fake opens");
    let server = fake.accept().await;
    (link, server, fake)
}

/// Reads until the next reply is whole, and returns it with what it answers.
async fn next_reply(link: &mut Link) -> (InFlight, Value) {
    loop {
        if let Some(answered) = link.reply().expect("a readable reply") {
            return answered;
        }
        link.readable().await.expect("the connection stays");
    }
}

/// The error a caller was told.
fn told(answer: &mut Answer) -> Error {
    match answer.try_recv() {
        Ok(Err(err)) => err,
        other => panic!("not told an error: {other:?}"),
    }
}

#[tokio::test]
async fn requests_are_written_in_the_order_staged_and_each_reply_is_paired_with_its_own() {
    let target = target(0);
    let (mut link, mut server, _fake) = open(&target, 1 << 20).await;
    assert_eq!((link.in_flight(), link.slots_taken()), (0, 0));
    let (lone, _) = one(put("a"));
    link.stage(&target, lone, true, true);
    let (both, _) = group(vec![put("b"), get("c")]);
    link.stage(&target, both, false, false);
    let (echo, _) = command(&["ECHO", "d"]);
    link.stage(&target, echo, false, false);
    // The script load, the call, the group and the command; only the call and the
    // group count against the invocations grouping allows in flight.
    assert_eq!((link.in_flight(), link.slots_taken()), (4, 2));
    // Nothing is written before the flush.
    assert!(server.quiet());
    link.flush(Duration::from_secs(1)).await.unwrap();
    server
        .expect(&["SCRIPT", "LOAD", Script::qless().source()])
        .await;
    expect_call(&mut server, "put", "a").await;
    let calls = expect_batch(&mut server).await;
    assert_eq!(calls, [vec!["put", "q", "b"], vec!["get", "c"]]);
    server.expect(&["ECHO", "d"]).await;
    assert!(server.quiet());

    let mut replies = bulk(Script::qless().sha());
    for reply in [bulk("a"), array(&[bulk("b"), bulk("c")]), bulk("d")] {
        replies.extend_from_slice(&reply);
    }
    server.reply(&replies).await;
    let mut answered = Vec::new();
    for slots in [2, 1, 0, 0] {
        let (call, value) = next_reply(&mut link).await;
        assert_eq!(link.slots_taken(), slots);
        answered.push((call.sent.kind(), call.again, value));
    }
    let sha = Value::BulkString(Script::qless().sha().as_bytes().to_vec());
    let word = |text: &str| Value::BulkString(text.as_bytes().to_vec());
    assert_eq!(
        answered,
        [
            (Kind::Load, true, sha),
            (Kind::Script, true, word("a")),
            (Kind::Group, false, Value::Array(vec![word("b"), word("c")])),
            (Kind::Command, false, word("d")),
        ]
    );
    assert_eq!((link.in_flight(), link.slots_taken()), (0, 0));
    assert!(link.reply().unwrap().is_none());
}

#[tokio::test]
async fn a_write_that_replicas_must_acknowledge_is_followed_by_wait_and_a_read_is_not() {
    let target = target(1);
    let (mut link, mut server, _fake) = open(&target, 1 << 20).await;
    let (write, _) = one(put("a"));
    link.stage(&target, write, false, false);
    let (read, _) = one(get("b"));
    link.stage(&target, read, false, false);
    assert_eq!((link.in_flight(), link.slots_taken()), (3, 2));
    link.flush(Duration::from_secs(1)).await.unwrap();
    expect_call(&mut server, "put", "a").await;
    server.expect(&["WAIT", "1", "250"]).await;
    expect_call(&mut server, "get", "b").await;
    assert!(server.quiet());

    server.reply(&bulk("a")).await;
    server.reply(b":1\r\n").await;
    server.reply(&bulk("b")).await;
    let (call, _) = next_reply(&mut link).await;
    assert_eq!(call.sent.kind(), Kind::Script);
    assert!(link.waiting_for_replicas(), "the WAIT comes next");
    let (call, ack) = next_reply(&mut link).await;
    assert_eq!((call.sent.kind(), ack), (Kind::Wait, Value::Int(1)));
    assert!(!link.waiting_for_replicas());
    let (call, _) = next_reply(&mut link).await;
    assert_eq!(call.sent.kind(), Kind::Script);
    assert!(!link.waiting_for_replicas());
}

#[tokio::test]
async fn a_reply_split_anywhere_is_paired_only_once_all_of_it_is_in() {
    let target = target(0);
    let (mut link, mut server, _fake) = open(&target, 1 << 20).await;
    let reply = array(&[
        bulk("j0"),
        b"-QL_ARG user_script:1: Put(): bad\r\n".to_vec(),
        bulk("j\r\n2"),
    ]);
    for cut in 1..reply.len() {
        let (sent, _) = group(vec![put("j0"), put("j1"), put("j2")]);
        link.stage(&target, sent, false, false);
        link.flush(Duration::from_secs(1)).await.unwrap();
        expect_batch(&mut server).await;
        server.reply(&reply[..cut]).await;
        link.readable().await.unwrap();
        assert!(link.reply().unwrap().is_none(), "paired at byte {cut}");
        assert_eq!(link.in_flight(), 1);
        server.reply(&reply[cut..]).await;
        let (call, value) = next_reply(&mut link).await;
        assert_eq!(call.sent.kind(), Kind::Group, "cut at byte {cut}");
        let Value::Array(items) = value else {
            panic!("cut at byte {cut}: {value:?}");
        };
        assert_eq!(items.len(), 3, "cut at byte {cut}");
        assert_eq!(text(Ok(items[2].clone())), "j\r\n2");
        assert_eq!(link.in_flight(), 0);
    }
}

#[tokio::test]
async fn the_response_timeout_counts_from_when_the_oldest_unanswered_request_was_written() {
    let target = target(0);
    let (mut link, mut server, _fake) = open(&target, 1 << 20).await;
    assert_eq!(link.oldest(), None);
    let before = Instant::now();
    let (first, _) = one(put("a"));
    link.stage(&target, first, false, false);
    let between = Instant::now();
    assert!((before..=between).contains(&link.oldest().unwrap()));
    // The clock moves on (without sleeping) before the second is written.
    while Instant::now() == between {
        std::hint::spin_loop();
    }
    let (second, _) = one(put("b"));
    link.stage(&target, second, false, false);
    // The first is still the oldest: a second request does not extend its time.
    assert!(link.oldest().unwrap() <= between);
    link.flush(Duration::from_secs(1)).await.unwrap();
    server.reply(&bulk("a")).await;
    next_reply(&mut link).await;
    assert!(link.oldest().unwrap() > between, "now the second's");
    server.reply(&bulk("b")).await;
    next_reply(&mut link).await;
    assert_eq!(link.oldest(), None);
}

#[tokio::test]
async fn a_write_redis_does_not_take_within_the_timeout_gives_the_connection_up() {
    let target = target(0);
    // Redis reads nothing, and the pipe holds less than the request.
    let (mut link, _server, _fake) = open(&target, 64).await;
    let mut script = put("a");
    script.args.push("x".repeat(1024));
    let (sent, _) = one(script);
    link.stage(&target, sent, false, false);
    let why = link.flush(Duration::from_millis(50)).await.unwrap_err();
    assert_eq!(why, "Redis took no data for 0.05s");
}

#[tokio::test]
async fn a_connection_given_up_tells_every_caller_in_flight_and_a_new_one_starts_empty() {
    let target = target(1);
    let (mut fake, connector) = FakeRedis::new(1 << 20);
    let mut link = Link::open(&*connector, &target).await.unwrap();
    let mut server = fake.accept().await;
    let (answered, mut answered_caller) = one(put("a"));
    link.stage(&target, answered, false, false);
    let (lost, mut lost_callers) = group(vec![put("b"), put("c")]);
    link.stage(&target, lost, false, false);
    let (echo, mut echo_caller) = command(&["ECHO", "d"]);
    link.stage(&target, echo, false, false);
    link.flush(Duration::from_secs(1)).await.unwrap();
    // The first write is answered, its replicas' acknowledgement is not; then the
    // connection is gone.
    server.reply(&bulk("a")).await;
    let (call, value) = next_reply(&mut link).await;
    assert!(link.waiting_for_replicas());
    link.acknowledging = Some((call, value));
    drop(server);
    let lost = loop {
        match link.reply() {
            Ok(None) => {}
            other => panic!("{:?}", other.map(|answered| answered.map(|(_, v)| v))),
        }
        if let Err(err) = link.readable().await {
            break err;
        }
    };
    assert_eq!(lost.kind(), io::ErrorKind::UnexpectedEof);
    link.close(&Error::Unavailable(format!(
        "the Redis connection failed: {lost}"
    )));
    // Whether Redis ran them is unknown: each caller hears why.
    let callers = [&mut answered_caller, &mut echo_caller]
        .into_iter()
        .chain(lost_callers.iter_mut());
    for caller in callers {
        let err = told(caller);
        assert!(
            matches!(&err, Error::Unavailable(why) if why.contains("closed the connection")),
            "{err:?}"
        );
    }

    // A connection opened after it carries nothing of the old one's.
    let mut link = Link::open(&*connector, &target).await.unwrap();
    let mut server = fake.accept().await;
    assert_eq!(
        (link.in_flight(), link.slots_taken(), link.oldest()),
        (0, 0, None)
    );
    let (read, _) = one(get("e"));
    link.stage(&target, read, false, false);
    link.flush(Duration::from_secs(1)).await.unwrap();
    expect_call(&mut server, "get", "e").await;
    server.reply(&bulk("e")).await;
    let (call, value) = next_reply(&mut link).await;
    assert_eq!(
        (call.sent.kind(), text(Ok(value))),
        (Kind::Script, "e".to_owned())
    );

    // One that cannot be opened says why.
    fake.refuse_next();
    let refused = Link::open(&*connector, &target).await.err().unwrap();
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
}

#[tokio::test]
async fn a_reply_nobody_asked_for_or_one_that_does_not_parse_gives_the_connection_up() {
    let target = target(0);
    for (reply, why) in [
        (&b"+OK\r\n"[..], "Redis sent a reply nobody asked for"),
        (b"?what\r\n", "unreadable reply from Redis"),
    ] {
        let (mut link, mut server, _fake) = open(&target, 1 << 20).await;
        server.reply(reply).await;
        link.readable().await.unwrap();
        let err = link.reply().err().unwrap();
        assert!(err.starts_with(why), "{err}");
    }
}

#[tokio::test]
async fn ask_sends_asking_first_and_a_refused_asking_is_an_error() {
    let target = target(0);
    let (fake, connector) = FakeRedis::new(1 << 20);
    let node = super::super::super::topology::direct("redis://10.0.0.2:7001/0").unwrap();
    let mut request = Vec::new();
    let (sent, _) = one(get("a"));
    encode(&mut request, &target, &sent);
    let mut fake = fake;
    for (asking, answer) in [
        (&b"+OK\r\n"[..], Ok("a")),
        (b"-ERR not in cluster mode\r\n", Err("ASKING: ")),
    ] {
        let exchange = ask(&*connector, &target, &node, &request, |_| false, false);
        let server = async {
            let mut server = fake.accept().await;
            assert_eq!(server.node, "10.0.0.2:7001");
            server.expect(&["ASKING"]).await;
            let words = server.expect(&["EVALSHA"]).await;
            assert_eq!(words[3..6], [KEY, "get", "1.5"]);
            server.reply(asking).await;
            server.reply(&bulk("a")).await;
            server
        };
        let (answered, _server) = tokio::join!(exchange, server);
        match (answered, answer) {
            (Ok((value, None)), Ok(want)) => assert_eq!(text(Ok(value)), want),
            (Err(err), Err(want)) => assert!(err.to_string().starts_with(want), "{err}"),
            (answered, want) => panic!("{:?} instead of {want:?}", answered.map(|(v, _)| v)),
        }
    }
}
