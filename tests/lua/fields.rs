//! Jobs leased to the gateway as their stored fields (`pop ... fields`, `pop.multi`,
//! `pop.after`) read exactly as the script's own JSON job objects show them.

use qlessd::core::{PutArgs, Qless};
use qlessd::model::Job;
use serde_json::Value;

use super::jobs::{finish, raw, start, strs};
use crate::support::RedisServer;

/// Jobs with every field away from its default: tags, a fractional priority, fewer
/// retries, data that needs escaping, a trace, log entries with data, a failure kept
/// through `unfail`, dependents, tracking, a spawning template, an odd `remaining`,
/// and a legacy history field; written the same way at the same logical times on
/// each server.
async fn varied_jobs(redis: &RedisServer, qless: &Qless) {
    let put = |jid: &str, extra: PutArgs| PutArgs {
        worker: "putter".into(),
        queue: "q".into(),
        jid: jid.into(),
        klass: "app.Klass".into(),
        data: r#"{"n":1,"s":"é \" \\ / \u0001","big":12345678901234567890,"f":2.50}"#.into(),
        ..extra
    };
    let rich = PutArgs {
        priority: Some(1.5),
        retries: Some(3),
        tags: Some(strs(&["b-tag", "a-tag"])),
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        ..Default::default()
    };
    qless.put(1.25, put("rich", rich)).await.unwrap();
    qless
        .put(1.5, put("parent", PutArgs::default()))
        .await
        .unwrap();
    let child = PutArgs {
        depends: Some(strs(&["parent"])),
        ..Default::default()
    };
    qless.put(1.75, put("child", child)).await.unwrap();
    qless
        .put(2.0, put("failed", PutArgs::default()))
        .await
        .unwrap();
    qless
        .call(
            "log",
            2.5,
            &strs(&["rich", "checked", r#"{"by":"me","when":"later"}"#]),
        )
        .await
        .unwrap();
    qless
        .call("track", 2.5, &strs(&["track", "parent"]))
        .await
        .unwrap();
    // `failed` goes first (its priority), fails, and is put back by `unfail`: it
    // keeps its failure.
    qless
        .call("priority", 2.6, &strs(&["failed", "10"]))
        .await
        .unwrap();
    let popped = qless
        .call("pop", 3.0, &strs(&["q", "w0", "1"]))
        .await
        .unwrap();
    let popped: String = redis::from_redis_value(popped).unwrap();
    assert!(popped.contains(r#""jid":"failed""#), "{popped}");
    qless
        .call(
            "fail",
            3.5,
            &strs(&["failed", "w0", "boom-group", "it broke"]),
        )
        .await
        .unwrap();
    qless
        .call("unfail", 4.0, &strs(&["q", "boom-group", "10"]))
        .await
        .unwrap();
    // Fields only another client (or an older qless) would write.
    let mut conn = raw(redis);
    let _: () = redis::cmd("HSET")
        .arg("ql:j:parent")
        .arg(&[("spawned_from_jid", "template-1"), ("remaining", "2.75")])
        .query(&mut conn)
        .unwrap();
    let legacy =
        r#"[{"q":"old","put":0.9,"popped":1.1,"worker":"w9","failed":1.2},{"q":"q","put":1.3}]"#;
    let _: () = redis::cmd("HSET")
        .arg("ql:j:legacy")
        .arg(&[
            ("jid", "legacy"),
            ("klass", "K"),
            ("data", "not json at all"),
            ("priority", "0.1234567890123456"),
            ("tags", "[]"),
            ("state", "waiting"),
            ("worker", ""),
            ("expires", "0"),
            ("queue", "q"),
            ("retries", "5"),
            ("remaining", "5"),
            ("time", "1.3"),
            ("history", legacy),
        ])
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("ql:q:q-work")
        .arg(-0.5)
        .arg("legacy")
        .query(&mut conn)
        .unwrap();
}

/// The jobs of a JSON `pop` reply.
fn from_json(reply: redis::Value) -> Vec<Job> {
    let text: String = redis::from_redis_value(reply).unwrap();
    if text == "{}" {
        return Vec::new();
    }
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{err}: {text}"))
}

/// Jobs as clients see them: the API's JSON.
fn shown(jobs: &[Job]) -> Vec<Value> {
    jobs.iter()
        .map(|job| serde_json::to_value(job).unwrap())
        .collect()
}

#[tokio::test]
async fn a_pop_of_fields_shows_each_job_as_the_json_pop_does() {
    let (json_redis, json_side) = start().await;
    let (fields_redis, fields_side) = start().await;
    varied_jobs(&json_redis, &json_side).await;
    varied_jobs(&fields_redis, &fields_side).await;

    let by_json = from_json(
        json_side
            .call("pop", 5.0, &strs(&["q", "w", "10"]))
            .await
            .unwrap(),
    );
    let by_fields = fields_side.pop(5.0, "q", "w", 10).await.unwrap();
    let jids: Vec<_> = by_json.iter().map(|job| job.jid.as_str()).collect();
    assert_eq!(
        jids,
        ["failed", "rich", "parent", "legacy"],
        "every kind of job is leased"
    );
    assert_eq!(shown(&by_fields), shown(&by_json));
    // What the test means to cover is there.
    let json = shown(&by_json);
    assert_eq!(json[0]["failure"]["group"], "boom-group");
    assert_eq!(json[1]["priority"], 1.5);
    assert_eq!(json[1]["history"][1]["by"], "me");
    assert!(json[1]["traceparent"].is_string());
    assert_eq!(json[2]["dependents"], serde_json::json!(["child"]));
    assert_eq!(json[2]["tracked"], true);
    assert_eq!(json[2]["spawned_from_jid"], "template-1");
    assert_eq!(json[2]["remaining"], 2);
    assert_eq!(json[3]["data"], "not json at all");
    assert_eq!(json[3]["history"][0]["q"], "old");
}

#[tokio::test]
async fn complete_with_a_pop_shows_the_next_jobs_as_a_json_pop_does() {
    let (json_redis, json_side) = start().await;
    let (fields_redis, fields_side) = start().await;
    for (redis, qless) in [(&json_redis, &json_side), (&fields_redis, &fields_side)] {
        varied_jobs(redis, qless).await;
        qless
            .put(4.5, super::jobs::job("q", "first"))
            .await
            .unwrap();
        qless
            .call("priority", 4.6, &strs(&["first", "100"]))
            .await
            .unwrap();
        let first = qless
            .call("pop", 4.7, &strs(&["q", "w", "1"]))
            .await
            .unwrap();
        assert!(from_json(first)[0].jid == "first");
    }
    json_side
        .complete(5.0, finish("first", "w", "q"))
        .await
        .unwrap();
    let by_json = from_json(
        json_side
            .call("pop", 5.0, &strs(&["q", "w", "10"]))
            .await
            .unwrap(),
    );
    let (_, leased) = fields_side
        .complete_and_pop(5.0, finish("first", "w", "q"), 10)
        .await
        .unwrap();
    assert_eq!(by_json.len(), 4);
    assert_eq!(shown(&leased.jobs), shown(&by_json));
}

#[tokio::test]
async fn a_multi_queue_pop_of_fields_shows_each_job_as_the_json_pop_does() {
    let (json_redis, json_side) = start().await;
    let (fields_redis, fields_side) = start().await;
    varied_jobs(&json_redis, &json_side).await;
    varied_jobs(&fields_redis, &fields_side).await;
    let by_json = from_json(
        json_side
            .call("pop", 5.0, &strs(&["q", "w", "10"]))
            .await
            .unwrap(),
    );
    let plan = [("empty".to_owned(), 10), ("q".to_owned(), 10)];
    let by_fields = fields_side.pop_multi(5.0, "w", 10, &plan).await.unwrap();
    assert_eq!(shown(&by_fields), shown(&by_json));
    assert!(
        fields_side
            .pop_multi(6.0, "w", 10, &plan)
            .await
            .unwrap()
            .is_empty(),
        "nothing left: an empty answer"
    );
}
