//! How the gateway calls the script: loading, NOSCRIPT recovery, namespaces, errors.

use std::time::Duration;

use qlessd::core::events::EventBus;
use qlessd::core::{ConnectOptions, Error, Qless, ScriptCode};

use crate::support::{RedisServer, START, connect};

#[tokio::test]
async fn the_script_is_reloaded_transparently_after_redis_forgets_it() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.forget_scripts();
    let value = qless
        .call("config.get", START, &["heartbeat".into()])
        .await
        .unwrap();
    assert_eq!(value, redis::Value::Int(60));
}

#[tokio::test]
async fn script_errors_carry_their_code_and_message() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    let err = qless.call("no.such.command", START, &[]).await.unwrap_err();
    match err {
        Error::Script { code, message } => {
            assert_eq!(code, ScriptCode::Command);
            assert!(
                message.contains("Unknown command no.such.command"),
                "{message}"
            );
        }
        other => panic!("expected a script error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_redis_url_is_a_one_line_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nobody-listens.sock");
    let err = Qless::connect(ConnectOptions {
        url: format!("unix://{}", missing.display()),
        redis_ca_file: None,
        namespace: None,
        connect_timeout: std::time::Duration::from_millis(500),
        response_timeout: std::time::Duration::from_secs(60),
        external: true,
        group_calls: 1,
        replicas: Default::default(),
    })
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Startup(_)), "{err:?}");
    assert!(text.contains("nobody-listens.sock"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[tokio::test]
async fn a_malformed_redis_url_is_refused_at_startup() {
    let err = Qless::connect(ConnectOptions {
        url: "http://not-redis".into(),
        redis_ca_file: None,
        namespace: None,
        connect_timeout: std::time::Duration::from_millis(500),
        response_timeout: std::time::Duration::from_secs(60),
        external: true,
        group_calls: 1,
        replicas: Default::default(),
    })
    .await
    .unwrap_err();
    assert!(err.to_string().contains("invalid Redis URL"), "{err}");
}

#[tokio::test]
async fn a_batch_reloads_the_script_and_runs_every_call_once() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.forget_scripts();
    let jobs = (0..3)
        .map(|i| {
            let args = qlessd::core::PutArgs {
                queue: "q".into(),
                jid: format!("j{i}"),
                klass: "K".into(),
                data: "{}".into(),
                ..Default::default()
            };
            (args, false)
        })
        .collect();
    let results = qless.put_many(START, jobs).await.unwrap();
    assert_eq!(results.len(), 3);
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(result.unwrap().as_deref(), Some(format!("j{i}").as_str()));
    }
    // Each put ran exactly once: one history entry each.
    for i in 0..3 {
        let job = qless.get(START, &format!("j{i}")).await.unwrap().unwrap();
        assert_eq!(job.history.len(), 1, "{job:?}");
    }
}

#[tokio::test]
async fn the_event_bridge_authenticates_with_the_password_in_the_url() {
    let redis = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let url = format!("{}?pass=s3cret", redis.url());
    let bus = EventBus::start(url.clone(), "ql:".to_owned());
    let mut events = bus.subscribe();
    assert!(bus.wait_subscribed(Duration::from_secs(5)).await);
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("PUBLISH")
        .arg("ql:log")
        .arg("{\"event\":\"hello\"}")
        .query::<i64>(&mut conn)
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("no event within 5s")
        .unwrap();
    assert_eq!(event.channel, "log");
    assert_eq!(event.payload, "{\"event\":\"hello\"}");
}

#[tokio::test]
async fn the_event_bridge_does_not_subscribe_with_a_wrong_password() {
    let redis = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let bus = EventBus::start(format!("{}?pass=wrong", redis.url()), "ql:".to_owned());
    assert!(!bus.wait_subscribed(Duration::from_millis(500)).await);
}

#[tokio::test]
async fn a_call_redis_answers_late_is_still_answered() {
    // redis-rs gives up on an answer after 500 ms unless told otherwise; a call that
    // Redis ran but answered later would be reported as failed.
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    redis.pause_clients(1200);
    let started = std::time::Instant::now();
    let value = qless
        .call("config.get", START, &["heartbeat".into()])
        .await
        .expect("answered after the pause");
    assert_eq!(value, redis::Value::Int(60));
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "the pause did not hold the call: {:?}",
        started.elapsed()
    );
}

/// Options for a handle on `url` with a short response timeout.
fn options(url: String, response_timeout: Duration) -> ConnectOptions {
    ConnectOptions {
        url,
        redis_ca_file: None,
        namespace: None,
        connect_timeout: Duration::from_secs(2),
        response_timeout,
        external: false,
        group_calls: qlessd::core::BATCH_CALLS,
        replicas: Default::default(),
    }
}

#[tokio::test]
async fn script_calls_authenticate_and_use_the_database_named_in_the_url() {
    let redis = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let url = format!("{}?pass=s3cret&db=3", redis.url());
    let qless = Qless::connect(options(url, Duration::from_secs(30)))
        .await
        .unwrap();
    qless
        .put(START, super::jobs::job("q", "in-db-3"))
        .await
        .unwrap();
    let client = |db: u8| {
        let url = format!("{}?pass=s3cret&db={db}", redis.url());
        redis::Client::open(url).unwrap().get_connection().unwrap()
    };
    let exists = |db: u8| -> bool {
        redis::cmd("EXISTS")
            .arg("ql:j:in-db-3")
            .query(&mut client(db))
            .unwrap()
    };
    assert!(exists(3), "the job is in database 3");
    assert!(!exists(0), "and not in database 0");
}

#[tokio::test]
async fn a_call_unanswered_past_the_response_timeout_fails_and_the_next_one_works() {
    let redis = RedisServer::start();
    let qless = Qless::connect(options(redis.url(), Duration::from_millis(300)))
        .await
        .unwrap();
    redis.pause_clients(1000);
    let started = std::time::Instant::now();
    let err = qless
        .call("config.get", START, &["heartbeat".into()])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "gave up only after {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let value = qless
        .call("config.get", START, &["heartbeat".into()])
        .await
        .expect("a new connection after the pause");
    assert_eq!(value, redis::Value::Int(60));
}

#[tokio::test]
async fn calls_go_on_over_a_new_connection_after_redis_drops_the_old_one() {
    let redis = RedisServer::start();
    let qless = connect(&redis, None).await;
    qless.put(START, super::jobs::job("q", "a")).await.unwrap();
    let mut admin = redis.client().get_connection().unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut admin)
        .unwrap();
    assert!(killed >= 1, "the script connection was dropped");
    tokio::time::sleep(Duration::from_millis(100)).await;
    qless.put(START, super::jobs::job("q", "b")).await.unwrap();
    let job = qless.get(START, "b").await.unwrap().expect("b stored");
    assert_eq!(job.queue, "q");
}

#[tokio::test]
async fn script_calls_and_events_work_over_tcp() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redis = RedisServer::start_with(&["--port", &port.to_string(), "--bind", "127.0.0.1"]);
    let url = format!("redis://127.0.0.1:{port}/0");
    let bus = EventBus::start(url.clone(), "ql:".to_owned());
    let mut events = bus.subscribe();
    assert!(bus.wait_subscribed(Duration::from_secs(5)).await);
    let qless = Qless::connect(options(url, Duration::from_secs(30)))
        .await
        .unwrap();
    qless
        .put(START, super::jobs::job("q", "over-tcp"))
        .await
        .unwrap();
    let job = qless.get(START, "over-tcp").await.unwrap().expect("stored");
    assert_eq!(job.queue, "q");
    let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("no event within 5s")
        .unwrap();
    assert_eq!(event.channel, "log");
    assert!(event.payload.contains("over-tcp"), "{}", event.payload);
    drop(redis);
}
