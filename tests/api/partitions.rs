//! Fair queues over HTTP: `partition` on puts, batch puts, `/v1/batches`, requeue and
//! recurring templates; pops served in turn; `PUT`/`GET
//! /v1/queues/{queue}/partitions`; the 400s.

use serde_json::{Value, json};

use crate::support::TestApp;

async fn pop(app: &TestApp, queue: &str, count: u32) -> Vec<String> {
    let response = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": "w", "count": count}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    let jobs = match &response.body {
        Value::Array(jobs) => jobs.clone(),
        other => other["jobs"].as_array().cloned().unwrap_or_default(),
    };
    jobs.iter()
        .map(|job| job["jid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn partitioned_puts_are_popped_in_turn_and_counted_as_waiting() {
    let app = TestApp::start().await;
    let jobs: Vec<Value> = (0..50)
        .map(|i| json!({"jid": format!("a{i}"), "klass": "K", "partition": "acme"}))
        .collect();
    let response = app
        .post("/v1/queues/q/jobs/batch", json!({"jobs": jobs}))
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    app.clock.advance(1.0);
    let response = app
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "b0", "klass": "K", "partition": "bolt"}),
        )
        .await;
    assert_eq!(response.status, 201, "{}", response.text);
    let response = app
        .post(
            "/v1/batches",
            json!({"jobs": [{"queue": "q", "jid": "c0", "klass": "K", "partition": "cog"}]}),
        )
        .await;
    assert_eq!(response.status, 201, "{}", response.text);
    assert_eq!(app.get("/v1/jobs/b0").await.body["partition"], "bolt");
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], json!(52));
    let listed = app.get("/v1/queues/q/partitions").await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let names: Vec<&str> = listed.body["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["acme", "bolt", "cog"]);
    assert_eq!(listed.body["partitions"][0]["waiting"], json!(50));
    assert_eq!(listed.body["cursor"], Value::Null);
    let jids = pop(&app, "q", 4).await;
    assert_eq!(&jids[1..], ["b0", "c0", jids[3].as_str()]);
    assert!(
        jids[0].starts_with('a') && jids[3].starts_with('a'),
        "{jids:?}"
    );
}

#[tokio::test]
async fn partition_limits_are_set_listed_and_checked() {
    let app = TestApp::start().await;
    let response = app
        .request(
            axum::http::Method::PUT,
            "/v1/queues/q/partitions",
            Some(json!({"concurrency": 1, "rate": {"jobs": 10, "seconds": 60}})),
        )
        .await;
    assert_eq!(response.status, 204, "{}", response.text);
    for jid in ["a1", "a2"] {
        app.post(
            "/v1/queues/q/jobs",
            json!({"jid": jid, "klass": "K", "partition": "acme"}),
        )
        .await;
    }
    assert_eq!(pop(&app, "q", 5).await.len(), 1);
    let listed = app.get("/v1/queues/q/partitions?count=1").await;
    assert_eq!(listed.body["concurrency"], json!(1));
    assert_eq!(listed.body["rate"], json!({"jobs": 10, "seconds": 60}));
    let acme = &listed.body["partitions"][0];
    assert_eq!(acme["name"], "acme");
    assert_eq!(acme["running"], json!(1));
    assert!(acme["limited"].is_number(), "{}", listed.text);
    for (body, field) in [
        (json!({"concurrency": 0}), "concurrency"),
        (json!({"rate": {"jobs": 0, "seconds": 1}}), "rate.jobs"),
        (json!({"rate": {"jobs": 1, "seconds": 0}}), "rate.seconds"),
        (json!({"bogus": 1}), "bogus"),
    ] {
        let response = app
            .request(
                axum::http::Method::PUT,
                "/v1/queues/q/partitions",
                Some(body),
            )
            .await;
        response.assert_problem(400, "bad_request");
        assert!(response.text.contains(field), "{}", response.text);
    }
    for uri in [
        "/v1/queues/q/partitions?count=0",
        "/v1/queues/q/partitions?cursor=x",
    ] {
        app.get(uri).await.assert_problem(400, "bad_request");
    }
    // Still the limits set first.
    assert_eq!(
        app.get("/v1/queues/q/partitions").await.body["concurrency"],
        json!(1)
    );
}

#[tokio::test]
async fn requeue_and_recurring_templates_take_a_partition() {
    let app = TestApp::start().await;
    app.post("/v1/queues/q/jobs", json!({"jid": "a", "klass": "K"}))
        .await;
    let response = app
        .post(
            "/v1/jobs/a/requeue",
            json!({"queue": "q2", "partition": "acme"}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(app.get("/v1/jobs/a").await.body["partition"], "acme");
    // A requeue without one drops it.
    app.post("/v1/jobs/a/requeue", json!({"queue": "q2"})).await;
    assert!(app.get("/v1/jobs/a").await.body.get("partition").is_none());
    let response = app
        .post(
            "/v1/queues/q3/recurring",
            json!({"jid": "r", "klass": "K", "interval": 60, "partition": "acme"}),
        )
        .await;
    assert_eq!(response.status, 201, "{}", response.text);
    assert_eq!(app.get("/v1/recurring/r").await.body["partition"], "acme");
    app.get("/v1/queues/q3/peek").await;
    assert_eq!(app.get("/v1/jobs/r-1").await.body["partition"], "acme");
    let response = app
        .request(
            axum::http::Method::PATCH,
            "/v1/recurring/r",
            Some(json!({"partition": null})),
        )
        .await;
    assert_eq!(response.status, 204, "{}", response.text);
    assert!(
        app.get("/v1/recurring/r")
            .await
            .body
            .get("partition")
            .is_none()
    );
    // A bad name is a 400 naming the field, and writes nothing.
    let response = app
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "bad", "klass": "K", "partition": ""}),
        )
        .await;
    response.assert_problem(400, "bad_request");
    assert!(response.text.contains("partition"), "{}", response.text);
    assert_eq!(app.get("/v1/jobs/bad").await.status, 404);
}
