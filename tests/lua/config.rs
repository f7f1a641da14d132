//! Script semantics (config): the defaults map, set/get/unset and reply types.

use serde_json::{Value, json};

use super::jobs::{start, strs};

fn defaults() -> serde_json::Map<String, Value> {
    json!({
        "application": "qless",
        "heartbeat": 60,
        "grace-period": 10,
        "stats-history": 30,
        "histogram-history": 7,
        "jobs-history-count": 50000,
        "jobs-history": 604800,
    })
    .as_object()
    .unwrap()
    .clone()
}

#[tokio::test]
async fn config_get_without_a_key_returns_exactly_the_defaults() {
    let (_redis, qless) = start().await;
    assert_eq!(qless.config_get_all(0.0).await.unwrap(), defaults());
}

#[tokio::test]
async fn stored_options_overlay_the_defaults_as_strings() {
    let (_redis, qless) = start().await;
    qless.config_set(0.0, "heartbeat", "5").await.unwrap();
    qless.config_set(0.0, "custom", "x y").await.unwrap();
    let mut expected = defaults();
    expected.insert("heartbeat".into(), json!("5"));
    expected.insert("custom".into(), json!("x y"));
    assert_eq!(qless.config_get_all(1.0).await.unwrap(), expected);
    qless.config_unset(2.0, "heartbeat").await.unwrap();
    qless.config_unset(2.0, "custom").await.unwrap();
    assert_eq!(qless.config_get_all(3.0).await.unwrap(), defaults());
}

#[tokio::test]
async fn a_numeric_default_is_an_integer_reply_until_it_is_set() {
    let (_redis, qless) = start().await;
    let reply = qless
        .call("config.get", 0.0, &strs(&["heartbeat"]))
        .await
        .unwrap();
    assert_eq!(reply, redis::Value::Int(60));
    let reply = qless
        .call("config.get", 0.0, &strs(&["jobs-history"]))
        .await
        .unwrap();
    assert_eq!(reply, redis::Value::Int(604800));
    qless.config_set(1.0, "heartbeat", "30").await.unwrap();
    let reply = qless
        .call("config.get", 1.0, &strs(&["heartbeat"]))
        .await
        .unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "30");
    assert!(matches!(
        qless
            .call("config.get", 1.0, &strs(&["heartbeat"]))
            .await
            .unwrap(),
        redis::Value::BulkString(_)
    ));
    assert_eq!(
        qless.config_get(1.0, "application").await.unwrap(),
        Some(json!("qless"))
    );
    qless.config_unset(2.0, "heartbeat").await.unwrap();
    assert_eq!(
        qless.config_get(3.0, "heartbeat").await.unwrap(),
        Some(json!(60))
    );
}

#[tokio::test]
async fn an_unknown_option_is_none() {
    let (_redis, qless) = start().await;
    assert_eq!(qless.config_get(0.0, "no-such-option").await.unwrap(), None);
    // options read without a default are absent until set
    assert_eq!(
        qless.config_get(0.0, "max-job-history").await.unwrap(),
        None
    );
    assert_eq!(qless.config_get(0.0, "q-heartbeat").await.unwrap(), None);
    qless.config_set(0.0, "q-heartbeat", "15").await.unwrap();
    assert_eq!(
        qless.config_get(0.0, "q-heartbeat").await.unwrap(),
        Some(json!("15"))
    );
}

#[tokio::test]
async fn config_set_writes_the_value_as_given() {
    let (redis, qless) = start().await;
    qless.config_set(0.0, "grace-period", "2.50").await.unwrap();
    let mut conn = super::jobs::raw(&redis);
    let stored: String = redis::cmd("HGET")
        .arg("ql:config")
        .arg("grace-period")
        .query(&mut conn)
        .unwrap();
    assert_eq!(stored, "2.50");
}
