//! Deadlines over HTTP: `start_by` / `start_within` and `max_run` on puts, batch puts,
//! `/v1/batches` jobs, workflow tasks, requeue and recurring templates; the job's
//! fields; the 400s; the 409 `timed_out`.

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

#[tokio::test]
async fn batch_jobs_and_workflow_tasks_take_deadlines() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/batches",
            json!({"jobs": [
                {"queue": "q", "jid": "b1", "klass": "K", "start_within": 60, "max_run": 30},
                {"queue": "q", "jid": "b2", "klass": "K", "start_by": START + 9.0}
            ]}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let job = app.get("/v1/jobs/b1").await;
    assert_eq!(job.body["start_by"], json!(START + 60.0));
    assert_eq!(job.body["max_run"], json!(30.0));
    let job = app.get("/v1/jobs/b2").await;
    assert_eq!(job.body["start_by"], json!(START + 9.0));
    assert!(job.body.get("max_run").is_none(), "{}", job.text);
    let created = app
        .post(
            "/v1/workflows",
            json!({"tasks": {
                "fetch": {"queue": "io", "jid": "w1", "klass": "Fetch", "max_run": 5},
                "store": {"queue": "io", "jid": "w2", "klass": "Store", "after": ["fetch"],
                          "start_within": 600}
            }}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(app.get("/v1/jobs/w1").await.body["max_run"], json!(5.0));
    assert_eq!(
        app.get("/v1/jobs/w2").await.body["start_by"],
        json!(START + 600.0)
    );
}

#[tokio::test]
async fn bad_batch_deadlines_are_400s_naming_the_item_and_write_nothing() {
    let app = TestApp::start().await;
    let cases = [
        (
            json!({"jobs": [{"queue": "q", "jid": "a", "klass": "K"},
                            {"queue": "q", "jid": "b", "klass": "K", "max_run": 0}]}),
            "jobs[1]",
            "max_run",
        ),
        (
            json!({"jobs": [{"queue": "q", "jid": "a", "klass": "K", "start_within": -1}]}),
            "jobs[0]",
            "start_within",
        ),
        (
            json!({"jobs": [{"queue": "q", "jid": "a", "klass": "K"}],
                   "on_success": {"queue": "q", "klass": "Done", "max_run": 10}}),
            "on_success",
            "max_run",
        ),
    ];
    for (body, item, field) in cases {
        let response = app.post("/v1/batches", body.clone()).await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(
            detail.contains(item) && detail.contains(field),
            "{body}: {detail}"
        );
    }
    let response = app
        .post(
            "/v1/workflows",
            json!({"tasks": {"t": {"queue": "q", "jid": "a", "klass": "K",
                                    "start_by": START, "start_within": 1}}}),
        )
        .await;
    response.assert_problem(400, "bad_request");
    assert_eq!(app.get("/v1/jobs/a").await.status, 404);
}

#[tokio::test]
async fn recurring_templates_take_deadlines_and_their_children_get_them() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/queues/q/recurring",
            json!({"jid": "r", "klass": "K", "interval": 60, "start_within": 5, "max_run": 30}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let template = app.get("/v1/recurring/r").await;
    assert_eq!(template.body["start_within"], json!(5));
    assert_eq!(template.body["max_run"], json!(30));
    // The first child spawns now: start_by now + 5.
    let peeked = app.get("/v1/queues/q/peek").await;
    assert_eq!(peeked.status, 200, "{}", peeked.text);
    let child = app.get("/v1/jobs/r-1").await;
    assert_eq!(child.status, 200, "{}", child.text);
    assert_eq!(child.body["start_by"], json!(START + 5.0));
    assert_eq!(child.body["max_run"], json!(30.0));
    // PATCH: null removes start_within, a number sets max_run.
    let response = app
        .request(
            axum::http::Method::PATCH,
            "/v1/recurring/r",
            Some(json!({"start_within": null, "max_run": 12})),
        )
        .await;
    assert_eq!(response.status, 204, "{}", response.text);
    let template = app.get("/v1/recurring/r").await;
    assert!(
        template.body.get("start_within").is_none(),
        "{}",
        template.text
    );
    assert_eq!(template.body["max_run"], json!(12));
    // Bad values are 400s naming the field, and change nothing.
    for (body, field) in [
        (json!({"max_run": 0}), "max_run"),
        (json!({"start_within": -1}), "start_within"),
    ] {
        let response = app
            .request(axum::http::Method::PATCH, "/v1/recurring/r", Some(body))
            .await;
        response.assert_problem(400, "bad_request");
        assert!(response.text.contains(field), "{}", response.text);
        let response = app
            .post(
                "/v1/queues/q/recurring",
                json!({"jid": "r2", "klass": "K", "interval": 60, field: -1}),
            )
            .await;
        response.assert_problem(400, "bad_request");
        assert!(response.text.contains(field), "{}", response.text);
    }
    assert_eq!(app.get("/v1/recurring/r").await.body["max_run"], json!(12));
    assert_eq!(app.get("/v1/recurring/r2").await.status, 404);
}
