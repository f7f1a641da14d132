//! HTTP contract tests (jobs): `/v1/jobs/...`, `/v1/tracked` and `/v1/completed`,
//! through the router, in logical time. Jobs are set up through `core` (put, pop)
//! unless the test is about the HTTP worker lifecycle itself.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use qlessd::core::PutArgs;
use qlessd::model::{Job, JobState};
use serde_json::{Value, json};

use crate::support::{START, TestApp, TestResponse};

// ---- helpers ----------------------------------------------------------------------

/// A put of `jid` into `queue` (class `K`, data `{"n":1}`).
fn job(queue: &str, jid: &str) -> PutArgs {
    PutArgs {
        queue: queue.into(),
        jid: jid.into(),
        klass: "K".into(),
        data: r#"{"n":1}"#.into(),
        ..Default::default()
    }
}

async fn put(app: &TestApp, args: PutArgs) {
    app.qless.put(app.clock.now(), args).await.unwrap();
}

/// Puts `jid` in `queue` and pops it for `worker`.
async fn running(app: &TestApp, queue: &str, jid: &str, worker: &str) {
    put(app, job(queue, jid)).await;
    let popped = app
        .qless
        .pop(app.clock.now(), queue, worker, 1)
        .await
        .unwrap();
    assert_eq!(popped.len(), 1, "{jid} was not popped");
    assert_eq!(popped[0].jid, jid);
}

/// The job as the script has it now; panics when it does not exist.
async fn stored(app: &TestApp, jid: &str) -> Job {
    app.qless
        .get(app.clock.now(), jid)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{jid} does not exist"))
}

async fn exists(app: &TestApp, jid: &str) -> bool {
    app.qless.get(app.clock.now(), jid).await.unwrap().is_some()
}

/// A DELETE: no body (its parameters are in the query), but the JSON content type
/// every state-changing request carries.
async fn delete(app: &TestApp, uri: &str) -> TestResponse {
    let request = Request::builder()
        .method(Method::DELETE)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::empty())
        .unwrap();
    app.send(request).await
}

async fn put_json(app: &TestApp, uri: &str, body: Option<Value>) -> TestResponse {
    app.request(Method::PUT, uri, body).await
}

/// Sends `text` with `Content-Type: text/plain`.
async fn send_text(app: &TestApp, method: Method, uri: &str, text: &str) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(text.to_owned()))
        .unwrap();
    app.send(request).await
}

/// Sends a body that is not JSON at all, labelled as JSON.
async fn send_malformed(app: &TestApp, method: Method, uri: &str) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    app.send(request).await
}

fn ok(response: &TestResponse) {
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
}

fn no_content(response: &TestResponse) {
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
}

/// Every body route answers 415 to a non-JSON body and 400 to malformed JSON.
async fn assert_rejects_non_json(app: &TestApp, method: Method, uri: &str) {
    send_text(app, method.clone(), uri, "worker=w")
        .await
        .assert_problem(415, "unsupported_media_type");
    send_malformed(app, method, uri)
        .await
        .assert_problem(400, "bad_request");
}

// ---- GET /v1/jobs/{jid} -----------------------------------------------------------

#[tokio::test]
async fn get_job_returns_the_job_with_typed_data_and_regular_lists() {
    let app = TestApp::start().await;
    put(
        &app,
        PutArgs {
            tags: Some(vec!["t1".into()]),
            data: r#"{"to":"a@example.com","n":[1,2]}"#.into(),
            ..job("q", "j1")
        },
    )
    .await;

    let response = app.get("/v1/jobs/j1").await;
    ok(&response);
    let body = &response.body;
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "data",
            "dependencies",
            "dependents",
            "expires",
            "failure",
            "history",
            "jid",
            "klass",
            "priority",
            "queue",
            "remaining",
            "retries",
            "spawned_from_jid",
            "state",
            "tags",
            "tracked",
            "worker",
        ]
    );
    assert_eq!(body["jid"], "j1");
    assert_eq!(body["klass"], "K");
    assert_eq!(body["state"], "waiting");
    assert_eq!(body["queue"], "q");
    assert_eq!(body["worker"], "");
    assert_eq!(body["tracked"], false);
    assert_eq!(body["retries"], 5.0);
    assert_eq!(body["remaining"], 5.0);
    // data is the JSON value itself, not a string holding JSON.
    assert_eq!(body["data"], json!({"to": "a@example.com", "n": [1, 2]}));
    assert_eq!(body["tags"], json!(["t1"]));
    // Empty lists are [] (never the script's {}), absent values null.
    assert_eq!(body["dependents"], json!([]));
    assert_eq!(body["dependencies"], json!([]));
    assert_eq!(body["failure"], Value::Null);
    assert_eq!(body["spawned_from_jid"], Value::Null);
    assert_eq!(
        body["history"],
        json!([{"when": START as i64, "what": "put", "q": "q"}])
    );
}

#[tokio::test]
async fn get_job_of_an_unknown_jid_is_a_404_problem() {
    let app = TestApp::start().await;
    app.get("/v1/jobs/nope")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn get_job_with_a_jid_that_is_not_a_name_is_a_400() {
    let app = TestApp::start().await;
    for uri in ["/v1/jobs/a%20b", "/v1/jobs/a%7Bb%7D", "/v1/jobs/tab%09"] {
        app.get(uri).await.assert_problem(400, "bad_request");
    }
}

// ---- GET /v1/jobs?jid= ------------------------------------------------------------

#[tokio::test]
async fn get_jobs_returns_the_existing_jobs_in_the_order_asked() {
    let app = TestApp::start().await;
    for jid in ["a", "b", "c"] {
        put(&app, job("q", jid)).await;
    }
    let response = app.get("/v1/jobs?jid=c&jid=missing&jid=a&jid=b").await;
    ok(&response);
    let jids: Vec<&str> = response
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["jid"].as_str().unwrap())
        .collect();
    assert_eq!(jids, ["c", "a", "b"]);
    assert_eq!(response.body[0]["data"], json!({"n": 1}));
}

#[tokio::test]
async fn get_jobs_of_only_unknown_jids_is_an_empty_list() {
    let app = TestApp::start().await;
    let response = app.get("/v1/jobs?jid=x&jid=y").await;
    ok(&response);
    assert_eq!(response.body, json!([]));
}

#[tokio::test]
async fn get_jobs_refuses_a_bad_query() {
    let app = TestApp::start().await;
    put(&app, job("q", "a")).await;
    let too_many = (0..1001)
        .map(|i| format!("jid=j{i}"))
        .collect::<Vec<_>>()
        .join("&");
    let cases = [
        "/v1/jobs".to_owned(),
        "/v1/jobs?".to_owned(),
        "/v1/jobs?jid=a&state=waiting".to_owned(),
        "/v1/jobs?jids=a".to_owned(),
        "/v1/jobs?jid=".to_owned(),
        "/v1/jobs?jid=a%20b".to_owned(),
        format!("/v1/jobs?{too_many}"),
    ];
    for uri in cases {
        let response = app.get(&uri).await;
        assert_eq!(response.status, 400, "{uri}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
}

// ---- heartbeat --------------------------------------------------------------------

#[tokio::test]
async fn heartbeat_extends_the_lock_from_now() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.clock.advance(30.0);

    let response = app
        .post("/v1/jobs/j1/heartbeat", json!({"worker": "w1"}))
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"expires": START as i64 + 90}));
    let job = stored(&app, "j1").await;
    assert_eq!(job.expires, START + 90.0);
    // Without data the job keeps its data.
    assert_eq!(job.data, json!({"n": 1}));
}

#[tokio::test]
async fn heartbeat_answers_the_jobs_expires_fraction_and_all() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.clock.advance(30.25);

    let response = app
        .post("/v1/jobs/j1/heartbeat", json!({"worker": "w1"}))
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"expires": START + 90.25}));
    let job = app.get("/v1/jobs/j1").await;
    assert_eq!(job.body["expires"], response.body["expires"]);
    // The batch heartbeat too.
    app.clock.advance(0.5);
    let response = app
        .post(
            "/v1/jobs/heartbeat",
            json!({"jobs": [{"jid": "j1", "worker": "w1"}]}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body["jobs"][0]["expires"], START + 90.75);
    let job = app.get("/v1/jobs/j1").await;
    assert_eq!(job.body["expires"], START + 90.75);
}

#[tokio::test]
async fn heartbeat_with_data_replaces_the_jobs_data() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/heartbeat",
            json!({"worker": "w1", "data": ["progress", 40]}),
        )
        .await;
    ok(&response);
    assert_eq!(stored(&app, "j1").await.data, json!(["progress", 40]));
}

#[tokio::test]
async fn heartbeat_by_another_worker_is_a_lock_lost_conflict() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.post("/v1/jobs/j1/heartbeat", json!({"worker": "w2"}))
        .await
        .assert_problem(409, "lock_lost");
    assert_eq!(stored(&app, "j1").await.worker, "w1");
}

#[tokio::test]
async fn heartbeat_of_a_job_that_is_not_running_is_a_conflict() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    app.post("/v1/jobs/j1/heartbeat", json!({"worker": "w1"}))
        .await
        .assert_problem(409, "conflict");
}

#[tokio::test]
async fn heartbeat_of_an_unknown_job_is_a_404() {
    let app = TestApp::start().await;
    app.post("/v1/jobs/nope/heartbeat", json!({"worker": "w1"}))
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn heartbeat_refuses_bad_input_and_changes_nothing() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.clock.advance(30.0);
    let cases = [
        json!({}),
        json!({"worker": ""}),
        json!({"worker": "w 1"}),
        json!({"worker": 7}),
        json!({"worker": "w1", "extra": true}),
        json!({"worker": "w1", "dat": {"typo": true}}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/heartbeat", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    app.post("/v1/jobs/a%20b/heartbeat", json!({"worker": "w1"}))
        .await
        .assert_problem(400, "bad_request");
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/heartbeat").await;
    let job = stored(&app, "j1").await;
    assert_eq!(job.expires, START + 60.0, "the lock was renewed");
    assert_eq!(job.data, json!({"n": 1}));
}

// ---- complete ---------------------------------------------------------------------

#[tokio::test]
async fn complete_without_next_finishes_the_job() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/complete",
            json!({"worker": "w1", "queue": "q", "data": {"done": true}}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"state": "complete"}));
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "complete");
    assert_eq!(job.queue, "");
    assert_eq!(job.worker, "");
    assert_eq!(job.data, json!({"done": true}));
}

#[tokio::test]
async fn complete_without_data_keeps_the_jobs_data() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let before = stored(&app, "j1").await.data;
    let response = app
        .post(
            "/v1/jobs/j1/complete",
            json!({"worker": "w1", "queue": "q"}),
        )
        .await;
    ok(&response);
    let after = stored(&app, "j1").await;
    assert_eq!(after.state, "complete");
    assert_eq!(after.data, before);
    assert_ne!(
        after.data,
        json!({}),
        "the fixture's data must not be empty"
    );

    running(&app, "q", "j2", "w1").await;
    let before = stored(&app, "j2").await.data;
    let body = json!({"worker": "w1", "queue": "q", "next": "q2"});
    ok(&app.post("/v1/jobs/j2/complete", body).await);
    assert_eq!(stored(&app, "j2").await.data, before);
}

#[tokio::test]
async fn complete_with_data_replaces_it_even_with_null() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let body = json!({"worker": "w1", "queue": "q", "data": null});
    ok(&app.post("/v1/jobs/j1/complete", body).await);
    assert_eq!(stored(&app, "j1").await.data, json!(null));
}

#[tokio::test]
async fn complete_with_next_moves_the_job_on() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/complete",
            json!({"worker": "w1", "queue": "q", "next": "q2", "data": {"n": 2}}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"state": "waiting"}));
    let job = stored(&app, "j1").await;
    assert_eq!((job.state.as_str(), job.queue.as_str()), ("waiting", "q2"));
    assert_eq!(job.data, json!({"n": 2}));
}

#[tokio::test]
async fn complete_with_next_and_delay_schedules_the_job() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/complete",
            json!({"worker": "w1", "queue": "q", "next": "q2", "delay": 30}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"state": "scheduled"}));
    assert!(
        app.qless
            .peek(app.clock.now(), "q2", 5)
            .await
            .unwrap()
            .is_empty()
    );
    app.clock.advance(30.0);
    let due = app.qless.peek(app.clock.now(), "q2", 5).await.unwrap();
    assert_eq!(due.len(), 1);
}

#[tokio::test]
async fn complete_with_next_and_open_depends_waits_for_them() {
    let app = TestApp::start().await;
    put(&app, job("other", "blocker")).await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/complete",
            json!({"worker": "w1", "queue": "q", "next": "q2", "depends": ["blocker"]}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"state": "depends"}));
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "depends");
    assert_eq!(job.dependencies, ["blocker"]);
}

#[tokio::test]
async fn complete_refuses_delay_or_depends_without_next_and_changes_nothing() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let cases = [
        json!({"worker": "w1", "queue": "q", "delay": 5}),
        json!({"worker": "w1", "queue": "q", "depends": ["x"]}),
        json!({"worker": "w1", "queue": "q", "next": "q2", "delay": -1}),
        json!({"worker": "w1", "queue": "q", "next": "q 2"}),
        json!({"worker": "w1", "queue": "q", "next": "q2", "depends": ["a b"]}),
        json!({"worker": "w1"}),
        json!({"queue": "q"}),
        json!({"worker": "w1", "queue": ""}),
        json!({"worker": "w1", "queue": "q", "nxt": "q2"}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/complete", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/complete").await;
    let job = stored(&app, "j1").await;
    assert_eq!((job.state.as_str(), job.worker.as_str()), ("running", "w1"));
    assert_eq!(job.data, json!({"n": 1}));
}

#[tokio::test]
async fn complete_by_another_worker_is_a_lock_lost_conflict() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.post(
        "/v1/jobs/j1/complete",
        json!({"worker": "w2", "queue": "q"}),
    )
    .await
    .assert_problem(409, "lock_lost");
    assert_eq!(stored(&app, "j1").await.state, "running");
}

#[tokio::test]
async fn complete_in_another_queue_is_a_conflict() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.post(
        "/v1/jobs/j1/complete",
        json!({"worker": "w1", "queue": "other"}),
    )
    .await
    .assert_problem(409, "conflict");
    assert_eq!(stored(&app, "j1").await.state, "running");
}

#[tokio::test]
async fn complete_of_a_waiting_job_is_a_conflict_and_of_an_unknown_job_a_404() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    app.post(
        "/v1/jobs/j1/complete",
        json!({"worker": "w1", "queue": "q"}),
    )
    .await
    .assert_problem(409, "conflict");
    app.post(
        "/v1/jobs/nope/complete",
        json!({"worker": "w1", "queue": "q"}),
    )
    .await
    .assert_problem(404, "not_found");
}

// ---- fail -------------------------------------------------------------------------

#[tokio::test]
async fn fail_lists_the_job_in_its_failure_group() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/fail",
            json!({"worker": "w1", "group": "smtp", "message": "timed out",
                   "data": {"attempt": 1}}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"jid": "j1", "state": "failed"}));

    let job = app.get("/v1/jobs/j1").await.body;
    assert_eq!(job["state"], "failed");
    assert_eq!(job["queue"], "q");
    assert_eq!(job["data"], json!({"attempt": 1}));
    assert_eq!(
        job["failure"],
        json!({"group": "smtp", "message": "timed out", "when": START as i64, "worker": "w1"})
    );
    let groups = app.qless.failed(app.clock.now()).await.unwrap();
    assert_eq!(groups.get("smtp"), Some(&1));
    let page = app
        .qless
        .failed_group(app.clock.now(), "smtp", 0, 25)
        .await
        .unwrap();
    assert_eq!(page.jids, ["j1"]);
}

#[tokio::test]
async fn fail_by_another_worker_is_lock_lost_and_of_a_waiting_job_a_conflict() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    put(&app, job("q", "j2")).await;
    let body = |worker: &str| json!({"worker": worker, "group": "g", "message": "m"});
    app.post("/v1/jobs/j1/fail", body("w2"))
        .await
        .assert_problem(409, "lock_lost");
    app.post("/v1/jobs/j2/fail", body("w1"))
        .await
        .assert_problem(409, "conflict");
    app.post("/v1/jobs/nope/fail", body("w1"))
        .await
        .assert_problem(404, "not_found");
    assert_eq!(stored(&app, "j1").await.state, "running");
}

#[tokio::test]
async fn fail_refuses_bad_input_and_changes_nothing() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let cases = [
        json!({"worker": "w1", "group": "g"}),
        json!({"worker": "w1", "message": "m"}),
        json!({"group": "g", "message": "m"}),
        json!({"worker": "w1", "group": "a group", "message": "m"}),
        json!({"worker": "w1", "group": "", "message": "m"}),
        json!({"worker": "w1", "group": "g", "message": "m", "queue": "q"}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/fail", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/fail").await;
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "running");
    assert!(app.qless.failed(app.clock.now()).await.unwrap().is_empty());
}

// ---- retry ------------------------------------------------------------------------

#[tokio::test]
async fn retry_puts_the_job_back_and_uses_one_retry() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post("/v1/jobs/j1/retry", json!({"worker": "w1", "queue": "q"}))
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"remaining": 4}));
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "waiting");
    assert_eq!(job.remaining, 4);
    let popped = app.qless.pop(app.clock.now(), "q", "w2", 1).await.unwrap();
    assert_eq!(popped[0].jid, "j1");
}

#[tokio::test]
async fn retry_with_a_delay_schedules_the_job_and_records_the_failure() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/retry",
            json!({"worker": "w1", "queue": "q", "delay": 60, "group": "net",
                   "message": "reset"}),
        )
        .await;
    ok(&response);
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "scheduled");
    let failure = job.failure.expect("the failure is recorded");
    assert_eq!(
        (failure.group.as_str(), failure.message.as_str()),
        ("net", "reset")
    );
}

#[tokio::test]
async fn retry_without_retries_left_fails_the_job() {
    let app = TestApp::start().await;
    put(
        &app,
        PutArgs {
            retries: Some(0),
            ..job("q", "j1")
        },
    )
    .await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    let response = app
        .post("/v1/jobs/j1/retry", json!({"worker": "w1", "queue": "q"}))
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"remaining": -1}));
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "failed");
    assert_eq!(job.failure.unwrap().group, "failed-retries-q");
    let groups = app.qless.failed(app.clock.now()).await.unwrap();
    assert_eq!(groups.get("failed-retries-q"), Some(&1));
}

#[tokio::test]
async fn retry_refuses_bad_input_and_keeps_the_job_running() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let cases = [
        json!({"worker": "w1", "queue": "q", "group": "g"}),
        json!({"worker": "w1", "queue": "q", "message": "m"}),
        json!({"worker": "w1", "queue": "q", "delay": -5}),
        json!({"worker": "w1", "queue": "q", "delay": "soon"}),
        json!({"worker": "w1", "queue": "q", "group": "a b", "message": "m"}),
        json!({"worker": "w1"}),
        json!({"worker": "w1", "queue": "q", "retries": 3}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/retry", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/retry").await;
    let job = stored(&app, "j1").await;
    assert_eq!((job.state.as_str(), job.remaining), ("running", 5));
}

#[tokio::test]
async fn retry_by_another_worker_is_lock_lost_and_of_an_unknown_job_a_404() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    app.post("/v1/jobs/j1/retry", json!({"worker": "w2", "queue": "q"}))
        .await
        .assert_problem(409, "lock_lost");
    app.post("/v1/jobs/nope/retry", json!({"worker": "w1", "queue": "q"}))
        .await
        .assert_problem(404, "not_found");
    put(&app, job("q", "j2")).await;
    app.post("/v1/jobs/j2/retry", json!({"worker": "w1", "queue": "q"}))
        .await
        .assert_problem(409, "conflict");
}

// ---- requeue ----------------------------------------------------------------------

#[tokio::test]
async fn requeue_moves_an_existing_job_to_another_queue() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app
        .post(
            "/v1/jobs/j1/requeue",
            json!({"queue": "q2", "klass": "K2", "data": {"again": true}, "priority": 7,
                   "tags": ["x"]}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"jid": "j1"}));
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "waiting");
    assert_eq!(job.queue, "q2");
    assert_eq!(job.klass, "K2");
    assert_eq!(job.worker, "");
    assert_eq!(job.priority, 7.0);
    assert_eq!(job.tags, ["x"]);
    assert_eq!(job.data, json!({"again": true}));
}

#[tokio::test]
async fn requeue_keeps_every_field_it_is_not_given() {
    let app = TestApp::start().await;
    put(
        &app,
        PutArgs {
            priority: Some(4.0),
            tags: Some(vec!["t".into()]),
            retries: Some(2),
            ..job("q", "j1")
        },
    )
    .await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    let response = app
        .post("/v1/jobs/j1/requeue", json!({"queue": "q2"}))
        .await;
    ok(&response);
    let job = stored(&app, "j1").await;
    assert_eq!(
        (job.queue.as_str(), job.state, job.klass.as_str()),
        ("q2", JobState::Waiting, "K")
    );
    assert_eq!(job.data, json!({"n": 1}));
    assert_eq!((job.priority, job.retries, job.remaining), (4.0, 2, 2));
    assert_eq!(job.tags, ["t"]);
}

#[tokio::test]
async fn requeue_with_null_data_stores_null() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    let response = app
        .post("/v1/jobs/j1/requeue", json!({"queue": "q", "data": null}))
        .await;
    ok(&response);
    assert_eq!(stored(&app, "j1").await.data, Value::Null);
}

#[tokio::test]
async fn requeue_of_an_unknown_job_is_a_404_and_creates_nothing() {
    let app = TestApp::start().await;
    app.post("/v1/jobs/nope/requeue", json!({"queue": "q", "klass": "K"}))
        .await
        .assert_problem(404, "not_found");
    assert!(!exists(&app, "nope").await);
}

#[tokio::test]
async fn requeue_refuses_bad_input_and_leaves_the_job_where_it_is() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    let cases = [
        json!({"klass": "K"}),
        json!({}),
        json!({"queue": "q 2", "klass": "K"}),
        json!({"queue": "q2", "klass": ""}),
        json!({"queue": "q2", "klass": "K", "delay": -1}),
        json!({"queue": "q2", "klass": "K", "retries": -1}),
        json!({"queue": "q2", "klass": "K", "retries": 1.5}),
        json!({"queue": "q2", "klass": "K", "priority": "high"}),
        json!({"queue": "q2", "klass": "K", "tags": ["ok", "not ok"]}),
        json!({"queue": "q2", "klass": "K", "depends": [""]}),
        json!({"queue": "q2", "klass": "K", "jid": "j9"}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/requeue", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/requeue").await;
    let job = stored(&app, "j1").await;
    assert_eq!((job.queue.as_str(), job.history.len()), ("q", 1));
}

// ---- timeout ----------------------------------------------------------------------

#[tokio::test]
async fn timeout_stalls_a_running_job_so_the_next_pop_takes_it() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    let response = app.request(Method::POST, "/v1/jobs/j1/timeout", None).await;
    no_content(&response);
    assert_eq!(response.text, "");
    assert_eq!(stored(&app, "j1").await.state, "stalled");
    let popped = app.qless.pop(app.clock.now(), "q", "w2", 1).await.unwrap();
    assert_eq!(
        (popped[0].jid.as_str(), popped[0].worker.as_str()),
        ("j1", "w2")
    );
}

#[tokio::test]
async fn timeout_of_a_waiting_job_is_a_conflict_and_of_an_unknown_job_a_404() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    app.request(Method::POST, "/v1/jobs/j1/timeout", None)
        .await
        .assert_problem(409, "conflict");
    assert_eq!(stored(&app, "j1").await.state, "waiting");
    app.request(Method::POST, "/v1/jobs/nope/timeout", None)
        .await
        .assert_problem(404, "not_found");
    app.request(Method::POST, "/v1/jobs/a%20b/timeout", None)
        .await
        .assert_problem(400, "bad_request");
}

// ---- cancel -----------------------------------------------------------------------

#[tokio::test]
async fn cancel_job_deletes_the_job_and_is_idempotent() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    no_content(&delete(&app, "/v1/jobs/j1").await);
    assert!(!exists(&app, "j1").await);
    app.get("/v1/jobs/j1")
        .await
        .assert_problem(404, "not_found");
    no_content(&delete(&app, "/v1/jobs/j1").await);
    no_content(&delete(&app, "/v1/jobs/never-existed").await);
    delete(&app, "/v1/jobs/a%20b")
        .await
        .assert_problem(400, "bad_request");
}

#[tokio::test]
async fn cancel_of_a_job_others_depend_on_is_a_conflict_and_keeps_it() {
    let app = TestApp::start().await;
    put(&app, job("q", "a")).await;
    put(
        &app,
        PutArgs {
            depends: Some(vec!["a".into()]),
            ..job("q", "b")
        },
    )
    .await;
    delete(&app, "/v1/jobs/a")
        .await
        .assert_problem(409, "conflict");
    assert!(exists(&app, "a").await);
    let response = app.post("/v1/jobs/cancel", json!({"jids": ["a"]})).await;
    response.assert_problem(409, "conflict");
    assert!(exists(&app, "a").await && exists(&app, "b").await);
}

#[tokio::test]
async fn cancel_jobs_cancels_a_job_together_with_its_dependents() {
    let app = TestApp::start().await;
    put(&app, job("q", "a")).await;
    put(
        &app,
        PutArgs {
            depends: Some(vec!["a".into()]),
            ..job("q", "b")
        },
    )
    .await;
    let response = app
        .post("/v1/jobs/cancel", json!({"jids": ["a", "b", "ghost"]}))
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"canceled": ["a", "b", "ghost"]}));
    assert!(!exists(&app, "a").await && !exists(&app, "b").await);
}

#[tokio::test]
async fn cancel_jobs_refuses_bad_input_and_cancels_nothing() {
    let app = TestApp::start().await;
    put(&app, job("q", "a")).await;
    let too_many: Vec<String> = (0..1001).map(|i| format!("j{i}")).collect();
    let cases = [
        json!({"jids": []}),
        json!({}),
        json!({"jids": ["a", ""]}),
        json!({"jids": ["a", "b c"]}),
        json!({"jids": "a"}),
        json!({"jids": ["a"], "force": true}),
        json!({"jids": too_many}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/cancel", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/cancel").await;
    assert!(exists(&app, "a").await);
}

// ---- priority ---------------------------------------------------------------------

#[tokio::test]
async fn set_job_priority_reorders_waiting_jobs() {
    let app = TestApp::start().await;
    put(&app, job("q", "first")).await;
    app.clock.advance(1.0);
    put(&app, job("q", "second")).await;
    let response = put_json(
        &app,
        "/v1/jobs/second/priority",
        Some(json!({"priority": 5})),
    )
    .await;
    ok(&response);
    assert_eq!(response.body, json!({"priority": 5.0}));
    assert_eq!(stored(&app, "second").await.priority, 5.0);
    let peeked = app.qless.peek(app.clock.now(), "q", 2).await.unwrap();
    let order: Vec<&str> = peeked.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(order, ["second", "first"]);
}

#[tokio::test]
async fn set_job_priority_refuses_bad_input_and_unknown_jobs() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    let cases = [
        json!({}),
        json!({"priority": "high"}),
        json!({"priority": null}),
        json!({"priority": 1, "queue": "q"}),
    ];
    for body in cases {
        let response = put_json(&app, "/v1/jobs/j1/priority", Some(body.clone())).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::PUT, "/v1/jobs/j1/priority").await;
    assert_eq!(stored(&app, "j1").await.priority, 0.0);
    put_json(&app, "/v1/jobs/nope/priority", Some(json!({"priority": 1})))
        .await
        .assert_problem(404, "not_found");
}

// ---- dependencies -----------------------------------------------------------------

/// `blocked` waits for `first`; `second` exists too, unlinked.
async fn dependency_fixture(app: &TestApp) {
    put(app, job("q", "first")).await;
    put(app, job("q", "second")).await;
    put(
        app,
        PutArgs {
            depends: Some(vec!["first".into()]),
            ..job("q", "blocked")
        },
    )
    .await;
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

#[tokio::test]
async fn add_job_dependencies_makes_a_depends_job_wait_for_more() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    let response = app
        .post(
            "/v1/jobs/blocked/dependencies",
            json!({"depends": ["second"]}),
        )
        .await;
    no_content(&response);
    let job = stored(&app, "blocked").await;
    assert_eq!(sorted(job.dependencies), ["first", "second"]);
    assert_eq!(stored(&app, "second").await.dependents, ["blocked"]);
}

#[tokio::test]
async fn add_job_dependencies_to_a_job_not_in_the_depends_state_is_a_conflict() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    app.post(
        "/v1/jobs/second/dependencies",
        json!({"depends": ["first"]}),
    )
    .await
    .assert_problem(409, "conflict");
    assert!(stored(&app, "second").await.dependencies.is_empty());
    assert_eq!(stored(&app, "second").await.state, "waiting");
}

#[tokio::test]
async fn add_job_dependencies_refuses_bad_input() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    let cases = [
        json!({"depends": []}),
        json!({}),
        json!({"depends": ["a b"]}),
        json!({"add": ["second"]}),
        json!({"depends": ["second"], "remove": ["first"]}),
    ];
    for body in cases {
        let response = app
            .post("/v1/jobs/blocked/dependencies", body.clone())
            .await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/blocked/dependencies").await;
    assert_eq!(stored(&app, "blocked").await.dependencies, ["first"]);
}

#[tokio::test]
async fn remove_job_dependencies_releases_the_job_when_none_are_left() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    app.qless
        .depends_on(app.clock.now(), "blocked", &["second".to_owned()])
        .await
        .unwrap();

    let response = delete(&app, "/v1/jobs/blocked/dependencies?dependency=first").await;
    no_content(&response);
    let job = stored(&app, "blocked").await;
    assert_eq!(
        (job.state.as_str(), job.dependencies.clone()),
        ("depends", vec!["second".to_owned()])
    );

    no_content(
        &delete(
            &app,
            "/v1/jobs/blocked/dependencies?dependency=second&dependency=unknown",
        )
        .await,
    );
    let job = stored(&app, "blocked").await;
    assert_eq!(job.state, "waiting");
    assert!(job.dependencies.is_empty());
    assert!(stored(&app, "second").await.dependents.is_empty());
}

#[tokio::test]
async fn remove_job_dependencies_still_takes_the_deprecated_jid_parameter() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    app.qless
        .depends_on(app.clock.now(), "blocked", &["second".to_owned()])
        .await
        .unwrap();
    no_content(&delete(&app, "/v1/jobs/blocked/dependencies?jid=first").await);
    assert_eq!(stored(&app, "blocked").await.dependencies, ["second"]);
    // Both spellings at once name one list.
    no_content(
        &delete(
            &app,
            "/v1/jobs/blocked/dependencies?jid=second&dependency=unknown",
        )
        .await,
    );
    assert_eq!(stored(&app, "blocked").await.state, "waiting");
}

#[tokio::test]
async fn remove_job_dependencies_with_all_drops_every_one() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    let response = delete(&app, "/v1/jobs/blocked/dependencies?all=true").await;
    no_content(&response);
    let job = stored(&app, "blocked").await;
    assert_eq!(job.state, "waiting");
    assert!(job.dependencies.is_empty());
    assert!(stored(&app, "first").await.dependents.is_empty());
}

#[tokio::test]
async fn remove_job_dependencies_needs_exactly_one_of_jids_and_all() {
    let app = TestApp::start().await;
    dependency_fixture(&app).await;
    let too_many = vec!["dependency=x"; 1001].join("&");
    let too_many_mixed = format!("{}&jid=y", vec!["dependency=x"; 1000].join("&"));
    let cases = [
        String::new(),
        "?all=false".to_owned(),
        "?all=1".to_owned(),
        "?all=true&all=true".to_owned(),
        "?dependency=first&all=true".to_owned(),
        "?jid=first&all=true".to_owned(),
        "?dependency=".to_owned(),
        "?jid=".to_owned(),
        "?dependency=a%20b".to_owned(),
        "?remove=first".to_owned(),
        "?dependency=first&tag=x".to_owned(),
        format!("?{too_many}"),
        format!("?{too_many_mixed}"),
    ];
    for query in cases {
        let uri = format!("/v1/jobs/blocked/dependencies{query}");
        let response = delete(&app, &uri).await;
        assert_eq!(response.status, 400, "{query}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    let job = stored(&app, "blocked").await;
    assert_eq!(
        (job.state.as_str(), job.dependencies.clone()),
        ("depends", vec!["first".to_owned()])
    );
    // Off a job that is not waiting on anything: the script's state conflict.
    delete(&app, "/v1/jobs/second/dependencies?all=true")
        .await
        .assert_problem(409, "conflict");
}

// ---- tags -------------------------------------------------------------------------

#[tokio::test]
async fn add_and_remove_job_tags_return_the_jobs_tags() {
    let app = TestApp::start().await;
    put(
        &app,
        PutArgs {
            tags: Some(vec!["a".into()]),
            ..job("q", "j1")
        },
    )
    .await;
    let response = app
        .post("/v1/jobs/j1/tags", json!({"tags": ["b", "a", "c"]}))
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"tags": ["a", "b", "c"]}));
    let tagged = app
        .qless
        .tag_get(app.clock.now(), "c", 0, 25)
        .await
        .unwrap();
    assert_eq!(tagged.jids, ["j1"]);

    let response = delete(&app, "/v1/jobs/j1/tags?tag=a&tag=c&tag=zz").await;
    ok(&response);
    assert_eq!(response.body, json!({"tags": ["b"]}));
    let response = delete(&app, "/v1/jobs/j1/tags?tag=b").await;
    ok(&response);
    // An empty tag list is [], not the script's {}.
    assert_eq!(response.body, json!({"tags": []}));
    assert!(stored(&app, "j1").await.tags.is_empty());
}

#[tokio::test]
async fn job_tags_refuse_bad_input_and_unknown_jobs() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    let cases = [
        json!({"tags": []}),
        json!({}),
        json!({"tags": ["a b"]}),
        json!({"tags": ["{x}"]}),
        json!({"tags": "a"}),
        json!({"tags": ["a"], "jid": "j1"}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/tags", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    let too_many = vec!["tag=x"; 1001].join("&");
    let queries = [
        String::new(),
        "?tag=".to_owned(),
        "?tag=a%20b".to_owned(),
        "?tag=%7Bx%7D".to_owned(),
        "?tags=a".to_owned(),
        "?tag=a&jid=j1".to_owned(),
        format!("?{too_many}"),
    ];
    for query in queries {
        let response = delete(&app, &format!("/v1/jobs/j1/tags{query}")).await;
        assert_eq!(response.status, 400, "{query}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/tags").await;
    assert!(stored(&app, "j1").await.tags.is_empty());
    app.post("/v1/jobs/nope/tags", json!({"tags": ["a"]}))
        .await
        .assert_problem(404, "not_found");
    delete(&app, "/v1/jobs/nope/tags?tag=a")
        .await
        .assert_problem(404, "not_found");
}

// ---- tracking ---------------------------------------------------------------------

#[tokio::test]
async fn track_and_untrack_a_job() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    let response = put_json(&app, "/v1/jobs/j1/tracked", None).await;
    ok(&response);
    assert_eq!(response.body, json!({"tracked": true}));
    // Tracking twice is fine.
    ok(&put_json(&app, "/v1/jobs/j1/tracked", None).await);
    assert!(stored(&app, "j1").await.tracked);

    let response = delete(&app, "/v1/jobs/j1/tracked").await;
    ok(&response);
    assert_eq!(response.body, json!({"tracked": false}));
    assert!(!stored(&app, "j1").await.tracked);
    let response = app.get("/v1/tracked").await;
    ok(&response);
    assert_eq!(response.body, json!({"jobs": [], "expired": []}));
}

#[tokio::test]
async fn list_tracked_jobs_shows_tracked_jobs_and_expired_jids() {
    let app = TestApp::start().await;
    put(&app, job("q", "kept")).await;
    put(&app, job("q", "gone")).await;
    put(&app, job("q", "untracked")).await;
    ok(&put_json(&app, "/v1/jobs/kept/tracked", None).await);
    ok(&put_json(&app, "/v1/jobs/gone/tracked", None).await);
    no_content(&delete(&app, "/v1/jobs/gone").await);

    let response = app.get("/v1/tracked").await;
    ok(&response);
    let jobs = response.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["jid"], "kept");
    assert_eq!(jobs[0]["tracked"], true);
    assert_eq!(jobs[0]["data"], json!({"n": 1}));
    assert_eq!(response.body["expired"], json!(["gone"]));
}

#[tokio::test]
async fn tracking_an_unknown_job_is_a_404() {
    let app = TestApp::start().await;
    put_json(&app, "/v1/jobs/nope/tracked", None)
        .await
        .assert_problem(404, "not_found");
    delete(&app, "/v1/jobs/nope/tracked")
        .await
        .assert_problem(404, "not_found");
    put_json(&app, "/v1/jobs/a%20b/tracked", None)
        .await
        .assert_problem(400, "bad_request");
    let response = app.get("/v1/tracked").await;
    assert_eq!(response.body, json!({"jobs": [], "expired": []}));
}

// ---- log --------------------------------------------------------------------------

#[tokio::test]
async fn log_job_event_appends_a_history_entry_with_the_data_merged() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    app.clock.advance(5.0);
    let response = app
        .post(
            "/v1/jobs/j1/log",
            json!({"message": "resized", "data": {"width": 640, "what": "ignored", "worker": "w"}}),
        )
        .await;
    no_content(&response);
    no_content(
        &app.post("/v1/jobs/j1/log", json!({"message": "plain"}))
            .await,
    );

    let history = app.get("/v1/jobs/j1").await.body["history"].clone();
    assert_eq!(
        history,
        json!([
            {"when": START as i64, "what": "put", "q": "q"},
            {"when": START as i64 + 5, "what": "resized", "width": 640, "worker": "w"},
            {"when": START as i64 + 5, "what": "plain"},
        ])
    );
}

#[tokio::test]
async fn log_job_event_refuses_bad_input_and_unknown_jobs() {
    let app = TestApp::start().await;
    put(&app, job("q", "j1")).await;
    let cases = [
        json!({}),
        json!({"message": ""}),
        json!({"message": "m", "data": [1, 2]}),
        json!({"message": "m", "data": "text"}),
        json!({"message": "m", "when": 5}),
        // The fields a history entry declares keep their type (strings).
        json!({"message": "m", "data": {"q": 5}}),
        json!({"message": "m", "data": {"worker": null}}),
        json!({"message": "m", "data": {"group": ["a"]}}),
    ];
    for body in cases {
        let response = app.post("/v1/jobs/j1/log", body.clone()).await;
        assert_eq!(response.status, 400, "{body}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
    assert_rejects_non_json(&app, Method::POST, "/v1/jobs/j1/log").await;
    assert_eq!(stored(&app, "j1").await.history.len(), 1);
    app.post("/v1/jobs/nope/log", json!({"message": "m"}))
        .await
        .assert_problem(404, "not_found");
}

// ---- completed --------------------------------------------------------------------

#[tokio::test]
async fn list_completed_jobs_is_newest_first_and_paged() {
    let app = TestApp::start().await;
    for jid in ["c1", "c2", "c3"] {
        running(&app, "q", jid, "w").await;
        let response = app
            .post(
                &format!("/v1/jobs/{jid}/complete"),
                json!({"worker": "w", "queue": "q"}),
            )
            .await;
        ok(&response);
        app.clock.advance(1.0);
    }
    let response = app.get("/v1/completed").await;
    ok(&response);
    assert_eq!(response.body, json!({"jids": ["c3", "c2", "c1"]}));
    let response = app.get("/v1/completed?offset=1&count=1").await;
    ok(&response);
    assert_eq!(response.body, json!({"jids": ["c2"]}));
    let response = app.get("/v1/completed?offset=10").await;
    assert_eq!(response.body, json!({"jids": []}));
}

#[tokio::test]
async fn list_completed_jobs_refuses_bad_pages() {
    let app = TestApp::start().await;
    for uri in [
        "/v1/completed?count=0",
        "/v1/completed?count=1001",
        "/v1/completed?count=many",
        "/v1/completed?offset=-1",
    ] {
        let response = app.get(uri).await;
        assert_eq!(response.status, 400, "{uri}: {}", response.text);
        response.assert_problem(400, "bad_request");
    }
}

// ---- whole worker lifecycles over HTTP --------------------------------------------

#[tokio::test]
async fn a_worker_puts_pops_heartbeats_and_completes_a_job_over_http() {
    let app = TestApp::start().await;
    let response = app
        .post(
            "/v1/queues/emails/jobs",
            json!({"jid": "mail-1", "klass": "email.Send", "data": {"to": "a@example.com"}}),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);

    let response = app
        .post("/v1/queues/emails/pop", json!({"worker": "w1"}))
        .await;
    ok(&response);
    let popped = response.body.as_array().unwrap();
    assert_eq!(popped.len(), 1);
    assert_eq!(popped[0]["jid"], "mail-1");
    assert_eq!(popped[0]["state"], "running");
    assert_eq!(popped[0]["expires"], START + 60.0);

    app.clock.advance(45.0);
    let response = app
        .post("/v1/jobs/mail-1/heartbeat", json!({"worker": "w1"}))
        .await;
    ok(&response);
    assert_eq!(response.body["expires"], START as i64 + 105);

    app.clock.advance(10.0);
    let response = app
        .post(
            "/v1/jobs/mail-1/complete",
            json!({"worker": "w1", "queue": "emails", "data": {"to": "a@example.com", "sent": true}}),
        )
        .await;
    ok(&response);
    assert_eq!(response.body, json!({"state": "complete"}));

    let job = app.get("/v1/jobs/mail-1").await.body;
    assert_eq!(job["state"], "complete");
    assert_eq!(job["data"], json!({"to": "a@example.com", "sent": true}));
    let whats: Vec<&str> = job["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["what"].as_str().unwrap())
        .collect();
    assert_eq!(whats, ["put", "popped", "done"]);
    assert_eq!(
        app.get("/v1/completed").await.body,
        json!({"jids": ["mail-1"]})
    );
}

#[tokio::test]
async fn completing_a_dependency_releases_the_job_waiting_on_it() {
    let app = TestApp::start().await;
    running(&app, "q", "parent", "w1").await;
    put(
        &app,
        PutArgs {
            depends: Some(vec!["parent".into()]),
            ..job("q", "child")
        },
    )
    .await;
    assert_eq!(app.get("/v1/jobs/child").await.body["state"], "depends");
    // Moving the parent on to another queue does not release the child...
    let response = app
        .post(
            "/v1/jobs/parent/complete",
            json!({"worker": "w1", "queue": "q", "next": "q2"}),
        )
        .await;
    assert_eq!(response.body, json!({"state": "waiting"}));
    assert_eq!(app.get("/v1/jobs/child").await.body["state"], "depends");
    // ...completing it for good does.
    app.qless.pop(app.clock.now(), "q2", "w1", 1).await.unwrap();
    let response = app
        .post(
            "/v1/jobs/parent/complete",
            json!({"worker": "w1", "queue": "q2"}),
        )
        .await;
    assert_eq!(response.body, json!({"state": "complete"}));
    let child = app.get("/v1/jobs/child").await.body;
    assert_eq!(child["state"], "waiting");
    assert_eq!(child["dependencies"], json!([]));
    let popped = app.qless.pop(app.clock.now(), "q", "w2", 1).await.unwrap();
    assert_eq!(popped[0].jid, "child");
}

#[tokio::test]
async fn a_worker_whose_lock_expired_and_was_handed_over_gets_lock_lost() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;

    // Past the 60 s heartbeat the first pop only sends the lock-expiry notice...
    app.clock.advance(61.0);
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w2"})).await;
    ok(&response);
    assert_eq!(response.body, json!([]));
    // ...and once the 10 s grace period is over the job goes to the next worker.
    app.clock.advance(10.0);
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w2"})).await;
    ok(&response);
    assert_eq!(response.body[0]["jid"], "j1");
    assert_eq!(response.body[0]["worker"], "w2");

    app.post("/v1/jobs/j1/heartbeat", json!({"worker": "w1"}))
        .await
        .assert_problem(409, "lock_lost");
    app.post(
        "/v1/jobs/j1/complete",
        json!({"worker": "w1", "queue": "q"}),
    )
    .await
    .assert_problem(409, "lock_lost");
    app.post(
        "/v1/jobs/j1/fail",
        json!({"worker": "w1", "group": "g", "message": "m"}),
    )
    .await
    .assert_problem(409, "lock_lost");
    // The new holder carries on.
    ok(&app
        .post("/v1/jobs/j1/heartbeat", json!({"worker": "w2"}))
        .await);
    let response = app
        .post(
            "/v1/jobs/j1/complete",
            json!({"worker": "w2", "queue": "q"}),
        )
        .await;
    assert_eq!(response.body, json!({"state": "complete"}));
}

#[tokio::test]
async fn a_failed_job_is_listed_in_its_group_until_requeued() {
    let app = TestApp::start().await;
    running(&app, "q", "j1", "w1").await;
    ok(&app
        .post(
            "/v1/jobs/j1/fail",
            json!({"worker": "w1", "group": "boom", "message": "it broke"}),
        )
        .await);
    assert_eq!(
        app.qless.failed(app.clock.now()).await.unwrap().get("boom"),
        Some(&1)
    );
    ok(&app
        .post("/v1/jobs/j1/requeue", json!({"queue": "q", "klass": "K"}))
        .await);
    assert!(app.qless.failed(app.clock.now()).await.unwrap().is_empty());
    let job = stored(&app, "j1").await;
    assert_eq!(job.state, "waiting");
    // The failure stays on the job until it completes.
    assert_eq!(job.failure.unwrap().group, "boom");
}
