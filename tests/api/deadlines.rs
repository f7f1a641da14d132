//! Deadlines over HTTP: `start_by` / `start_within` and `max_run` on puts, batch puts
//! and requeue; the job's fields; the 400s; the 409 `timed_out`.

use serde_json::json;

use crate::support::{START, TestApp};

#[tokio::test]
async fn a_put_with_deadlines_shows_them_on_the_job() {
    let app = TestApp::start().await;
    let response = app
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "a", "klass": "K", "start_by": START + 100.0, "max_run": 30}),
        )
        .await;
    assert_eq!(response.status, 201, "{}", response.text);
    let job = app.get("/v1/jobs/a").await;
    assert_eq!(job.body["start_by"], json!(START + 100.0));
    assert_eq!(job.body["max_run"], json!(30.0));
    // start_within is counted from the server's clock.
    app.clock.advance(5.0);
    let response = app
        .post(
            "/v1/queues/q/jobs/batch",
            json!({"jobs": [{"jid": "b", "klass": "K", "start_within": 60}]}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    let job = app.get("/v1/jobs/b").await;
    assert_eq!(job.body["start_by"], json!(START + 65.0));
    assert!(job.body.get("max_run").is_none(), "{}", job.text);
    // A plain job has neither.
    app.post("/v1/queues/q/jobs", json!({"jid": "c", "klass": "K"}))
        .await;
    let job = app.get("/v1/jobs/c").await;
    assert!(job.body.get("start_by").is_none(), "{}", job.text);
}

#[tokio::test]
async fn bad_deadlines_are_400s_and_write_nothing() {
    let app = TestApp::start().await;
    let cases = [
        (json!({"start_by": -1}), "start_by"),
        (json!({"start_within": -5}), "start_within"),
        (
            json!({"start_by": START, "start_within": 10}),
            "start_within",
        ),
        (json!({"max_run": 0}), "max_run"),
        (json!({"max_run": -3}), "max_run"),
        (json!({"max_run": "10"}), "max_run"),
    ];
    for (fields, name) in cases {
        let mut body = json!({"jid": "a", "klass": "K"});
        for (key, value) in fields.as_object().unwrap() {
            body[key] = value.clone();
        }
        for (uri, body) in [
            ("/v1/queues/q/jobs", body.clone()),
            ("/v1/queues/q/jobs/batch", json!({"jobs": [body.clone()]})),
        ] {
            let response = app.post(uri, body.clone()).await;
            response.assert_problem(400, "bad_request");
            assert!(
                response.body["detail"].as_str().unwrap().contains(name),
                "{uri} {body}: {}",
                response.text
            );
        }
    }
    assert_eq!(app.get("/v1/jobs/a").await.status, 404);
}

#[tokio::test]
async fn a_requeue_takes_deadlines_and_drops_an_old_start_by() {
    let app = TestApp::start().await;
    app.post(
        "/v1/queues/q/jobs",
        json!({"jid": "a", "klass": "K", "start_within": 10, "max_run": 30}),
    )
    .await;
    let response = app.post("/v1/jobs/a/requeue", json!({"queue": "q2"})).await;
    assert_eq!(response.status, 200, "{}", response.text);
    let job = app.get("/v1/jobs/a").await;
    assert!(job.body.get("start_by").is_none(), "{}", job.text);
    assert_eq!(job.body["max_run"], json!(30.0));
    let response = app
        .post(
            "/v1/jobs/a/requeue",
            json!({"queue": "q2", "start_within": 20}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(
        app.get("/v1/jobs/a").await.body["start_by"],
        json!(START + 20.0)
    );
    let response = app
        .post(
            "/v1/jobs/a/requeue",
            json!({"queue": "q2", "start_by": 5, "start_within": 20}),
        )
        .await;
    response.assert_problem(400, "bad_request");
}

#[tokio::test]
async fn a_job_not_popped_by_its_start_by_fails_as_expired() {
    let app = TestApp::start().await;
    app.post(
        "/v1/queues/q/jobs",
        json!({"jid": "a", "klass": "K", "start_within": 10}),
    )
    .await;
    app.clock.advance(11.0);
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(response.body, json!([]), "{}", response.text);
    let job = app.get("/v1/jobs/a").await;
    assert_eq!(job.body["state"], "failed");
    assert_eq!(job.body["failure"]["group"], "expired");
}

#[tokio::test]
async fn heartbeat_and_complete_past_max_run_are_409_timed_out() {
    let app = TestApp::start().await;
    app.post(
        "/v1/queues/q/jobs",
        json!({"jid": "a", "klass": "K", "max_run": 30}),
    )
    .await;
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(response.body[0]["expires"], json!(START as i64 + 30));
    app.clock.advance(20.0);
    let response = app
        .post("/v1/jobs/a/heartbeat", json!({"worker": "w"}))
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["expires"], json!(START as i64 + 30));
    app.clock.advance(10.0);
    let response = app
        .post("/v1/jobs/a/heartbeat", json!({"worker": "w"}))
        .await;
    response.assert_problem(409, "timed_out");
    let response = app
        .post("/v1/jobs/a/complete", json!({"worker": "w", "queue": "q"}))
        .await;
    response.assert_problem(409, "timed_out");
    assert_eq!(app.get("/v1/jobs/a").await.body["state"], "running");
}
