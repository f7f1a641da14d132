//! Batch routes are all or nothing for malformed items: every item is checked, as the
//! script would check it, before the first write, so a 400 means nothing was written,
//! whichever item is bad and however many came before it.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, Request, header};
use serde_json::{Value, json};

use crate::support::{RedisServer, TestApp, TestResponse};

/// Every key with its `DUMP` serialization: what "nothing was written" compares.
fn snapshot(redis: &RedisServer) -> BTreeMap<String, Vec<u8>> {
    let mut conn = redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut conn).unwrap();
            (key, dump)
        })
        .collect()
}

/// JSON text nested `levels` deep in arrays.
fn nested(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// POSTs a JSON body given as text (some bad items cannot be built as a `Value`).
async fn post_text(app: &TestApp, uri: &str, body: String) -> TestResponse {
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    app.send(request).await
}

/// Items the gateway used to pass on and the script refuses, each as a put item's JSON
/// text, with what the 400's detail says.
fn bad_put_items() -> Vec<(String, &'static str)> {
    vec![
        // cjson refuses more than 1,000 levels.
        (
            format!(r#"{{"klass":"K","data":{}}}"#, nested(1001)),
            "nested deeper than 100",
        ),
        // Within cjson's limit, over the gateway's documented one.
        (
            format!(r#"{{"klass":"K","data":{}}}"#, nested(101)),
            "nested deeper than 100",
        ),
        // serde_json keeps a lone surrogate escape in raw text; cjson refuses it.
        (
            r#"{"klass":"K","data":{"s":"\ud800"}}"#.to_owned(),
            "lone UTF-16 surrogate",
        ),
        // The script refuses a jid that ends like a job's side keys.
        (r#"{"jid":"x-history","klass":"K"}"#.to_owned(), "reserved"),
        (
            r#"{"klass":"K","depends":["y-dependents"]}"#.to_owned(),
            "reserved",
        ),
    ]
}

#[tokio::test]
async fn a_batch_put_whose_last_item_the_script_would_refuse_is_a_400_and_puts_nothing() {
    let app = TestApp::start().await;
    let before = snapshot(&app.redis);
    for (bad, expected) in bad_put_items() {
        let mut items: Vec<String> = (0..999)
            .map(|i| format!(r#"{{"jid":"job-{i}","klass":"K","data":{{"i":{i}}}}}"#))
            .collect();
        items.push(bad);
        let body = format!(r#"{{"jobs":[{}]}}"#, items.join(","));
        let response = post_text(&app, "/v1/queues/q/jobs/batch", body).await;
        assert_eq!(snapshot(&app.redis), before, "{expected}: jobs were put");
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(
            detail.contains("jobs[999]") && detail.contains(expected),
            "{detail}"
        );
    }
}

/// The number of keys and their names: what "nothing was written" compares, besides
/// the contents [`snapshot`] compares.
fn keyspace(redis: &RedisServer) -> (u64, Vec<String>) {
    let mut conn = redis.client().get_connection().unwrap();
    let size: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.sort();
    (size, keys)
}

/// Data the script would refuse, as JSON text, with what the 400's detail says.
fn bad_data() -> Vec<(String, &'static str)> {
    vec![
        (nested(1001), "nested deeper than 100"),
        (nested(101), "nested deeper than 100"),
        (r#"{"s":"\ud800"}"#.to_owned(), "lone UTF-16 surrogate"),
    ]
}

#[tokio::test]
async fn batch_and_workflow_puts_whose_last_item_the_script_would_refuse_are_400s_and_write_nothing()
 {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/batches",
            json!({"jobs": [{"queue": "q", "klass": "K", "jid": "first"}]}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let bid = created.body["bid"].as_str().unwrap().to_owned();
    let before = (snapshot(&app.redis), keyspace(&app.redis));
    assert!(before.1.0 > 0, "the batch wrote no key");
    let good = |i: usize| format!(r#"{{"queue":"q","klass":"K","jid":"job-{i}","data":{{}}}}"#);
    for (data, expected) in bad_data() {
        let bad = format!(r#"{{"queue":"q","klass":"K","jid":"last","data":{data}}}"#);
        let mut jobs: Vec<String> = (0..20).map(good).collect();
        jobs.push(bad.clone());
        let jobs = format!(r#"{{"jobs":[{}]}}"#, jobs.join(","));
        // Tasks are kept in name order: `zz` is the last.
        let mut tasks: Vec<String> = (0..20)
            .map(|i| format!(r#""t{i:02}":{}"#, good(i)))
            .collect();
        tasks.push(format!(r#""zz":{bad}"#));
        let workflow = format!(r#"{{"tasks":{{{}}}}}"#, tasks.join(","));
        let cases = [
            ("/v1/batches".to_owned(), jobs.clone(), "jobs[20]"),
            (format!("/v1/batches/{bid}/jobs"), jobs, "jobs[20]"),
            ("/v1/workflows".to_owned(), workflow, "zz"),
        ];
        for (uri, body, at) in cases {
            let response = post_text(&app, &uri, body).await;
            assert_eq!(
                (snapshot(&app.redis), keyspace(&app.redis)),
                before,
                "{uri}, {expected}: something was written"
            );
            response.assert_problem(400, "bad_request");
            let detail = response.body["detail"].as_str().unwrap();
            assert!(
                detail.contains(at) && detail.contains(expected),
                "{uri}: {detail}"
            );
        }
    }
}

/// An app with jobs `a`, `b` and `c` running for worker `w` in queue `q`.
async fn running() -> TestApp {
    let app = TestApp::start().await;
    for jid in ["a", "b", "c"] {
        let response = app
            .post("/v1/queues/q/jobs", json!({"jid": jid, "klass": "K"}))
            .await;
        assert_eq!(response.status, 201, "{}", response.text);
    }
    let response = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "count": 3}))
        .await;
    assert_eq!(response.body.as_array().map(Vec::len), Some(3));
    app
}

#[tokio::test]
async fn a_batch_complete_heartbeat_or_cancel_with_one_bad_item_is_a_400_and_writes_nothing() {
    let deep = nested(101);
    let item = |jid: &str, extra: &str| format!(r#"{{"jid":"{jid}","worker":"w"{extra}}}"#);
    let completes = |extra: &str| {
        format!(
            r#"{{"jobs":[{},{},{}]}}"#,
            item("a", r#","queue":"q""#),
            item("b", r#","queue":"q""#),
            item("c", &format!(r#","queue":"q"{extra}"#))
        )
    };
    let heartbeats = |extra: &str| {
        format!(
            r#"{{"jobs":[{},{},{}]}}"#,
            item("a", ""),
            item("b", ""),
            item("c", extra)
        )
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "/v1/jobs/complete",
            completes(&format!(r#","data":{deep}"#)),
            "jobs[2]: the job's data is nested deeper than 100",
        ),
        (
            "/v1/jobs/complete",
            completes(&format!(r#","result":{deep}"#)),
            "jobs[2]: the job's data is nested deeper than 100",
        ),
        (
            "/v1/jobs/complete",
            completes(r#","data":["\udfff"]"#),
            "jobs[2]: the job's data holds a lone UTF-16 surrogate",
        ),
        (
            "/v1/jobs/heartbeat",
            heartbeats(&format!(r#","data":{deep}"#)),
            "jobs[2]: the job's data is nested deeper than 100",
        ),
        (
            "/v1/jobs/heartbeat",
            heartbeats(&format!(r#","progress":{deep}"#)),
            "jobs[2]: the job's data is nested deeper than 100",
        ),
        (
            "/v1/jobs/cancel",
            r#"{"jids":["a","b","c-history"]}"#.to_owned(),
            "reserved",
        ),
    ];
    for (uri, body, expected) in cases {
        let app = running().await;
        let before = snapshot(&app.redis);
        let response = post_text(&app, uri, body).await;
        assert_eq!(snapshot(&app.redis), before, "{uri}: {expected}");
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(detail.contains(expected), "{uri}: {detail}");
    }
}

#[tokio::test]
async fn data_nested_as_deep_as_the_documented_limit_is_stored_and_read_back() {
    let app = running().await;
    let data: Value = {
        let mut value = json!(1);
        for _ in 0..100 {
            value = Value::Array(vec![value]);
        }
        value
    };
    let response = app
        .post(
            "/v1/queues/q/jobs/batch",
            json!({"jobs": [{"jid": "deep", "klass": "K", "data": data}]}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    let response = app.get("/v1/jobs/deep").await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["data"], data);
}
