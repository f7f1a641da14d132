//! HTTP contract of the `/v1/queues` resources: counts, putting jobs (one or a batch),
//! leasing, peeking, listings by state, pausing, statistics, recurring jobs.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use qlessd::model::{Job, RecurringJob};
use serde_json::{Value, json};

use crate::support::{START, TestApp, TestResponse};

/// Puts `{"jid": jid, "klass": "K"}` plus `extra` in `queue`, expecting a 201.
async fn put(app: &TestApp, queue: &str, jid: &str, extra: Value) -> TestResponse {
    let mut body = json!({"jid": jid, "klass": "K"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let response = app.post(&format!("/v1/queues/{queue}/jobs"), body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response
}

async fn job(app: &TestApp, jid: &str) -> Option<Job> {
    app.qless.get(app.clock.now(), jid).await.unwrap()
}

async fn queue_names(app: &TestApp) -> Vec<String> {
    let response = app.get("/v1/queues").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    response
        .body
        .as_array()
        .expect("a list")
        .iter()
        .map(|queue| queue["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Sends `body` as-is with the given content type.
async fn post_raw(app: &TestApp, uri: &str, content_type: &str, body: String) -> TestResponse {
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap();
    app.send(request).await
}

fn jids(response: &TestResponse) -> Vec<String> {
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    serde_json::from_value(response.body["jids"].clone()).expect("jids is a list")
}

fn popped(response: &TestResponse) -> Vec<String> {
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let jobs: Vec<Job> = serde_json::from_value(response.body.clone()).expect("a job list");
    jobs.into_iter().map(|job| job.jid).collect()
}

// ---------------------------------------------------------------------------------
// Counts and forgetting

#[tokio::test]
async fn list_queues_is_an_empty_list_when_nothing_was_put() {
    let app = TestApp::start().await;
    let response = app.get("/v1/queues").await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.body, json!([]));
}

#[tokio::test]
async fn list_queues_reports_every_queue_oldest_first() {
    let app = TestApp::start().await;
    put(&app, "zebra", "a", json!({})).await;
    app.clock.advance(1.0);
    put(&app, "aardvark", "b", json!({})).await;
    put(&app, "aardvark", "c", json!({})).await;
    let response = app.get("/v1/queues").await;
    assert_eq!(
        response.body,
        json!([
            {"name": "zebra", "waiting": 1, "running": 0, "stalled": 0, "scheduled": 0,
             "depends": 0, "recurring": 0, "paused": false, "throttled": 0},
            {"name": "aardvark", "waiting": 2, "running": 0, "stalled": 0, "scheduled": 0,
             "depends": 0, "recurring": 0, "paused": false, "throttled": 0},
        ])
    );
}

#[tokio::test]
async fn get_queue_counts_jobs_in_every_state() {
    let app = TestApp::start().await;
    put(&app, "q", "a", json!({})).await;
    app.clock.advance(1.0);
    put(&app, "q", "b", json!({})).await;
    put(&app, "q", "c", json!({"delay": 60})).await;
    put(&app, "q", "d", json!({"depends": ["b"]})).await;
    let recur = json!({"jid": "r", "klass": "K", "interval": 60, "offset": 600});
    let response = app.post("/v1/queues/q/recurring", recur).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    let pop = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&pop), ["a"]);
    app.request(Method::POST, "/v1/queues/q/pause", None).await;

    let response = app.get("/v1/queues/q").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!({"name": "q", "waiting": 1, "running": 1, "stalled": 0, "scheduled": 1,
               "depends": 1, "recurring": 1, "paused": true, "throttled": 0})
    );

    app.clock.advance(61.0);
    let response = app.get("/v1/queues/q").await;
    assert_eq!(response.body["running"], 0);
    assert_eq!(response.body["stalled"], 1);
}

#[tokio::test]
async fn get_queue_reports_zeros_for_an_unknown_queue() {
    let app = TestApp::start().await;
    let response = app.get("/v1/queues/never-used").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!({"name": "never-used", "waiting": 0, "running": 0, "stalled": 0,
               "scheduled": 0, "depends": 0, "recurring": 0, "paused": false,
               "throttled": 0})
    );
    assert!(
        queue_names(&app).await.is_empty(),
        "a read registered the queue"
    );
}

#[tokio::test]
async fn forget_queue_removes_it_from_the_listing_but_keeps_its_jobs() {
    let app = TestApp::start().await;
    put(&app, "old", "a", json!({})).await;
    put(&app, "kept", "b", json!({})).await;
    let response = app.request(Method::DELETE, "/v1/queues/old", None).await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert!(response.text.is_empty());
    assert_eq!(queue_names(&app).await, ["kept"]);
    let kept = job(&app, "a").await.expect("the job survives");
    assert_eq!(
        (kept.queue.as_str(), kept.state.as_str()),
        ("old", "waiting")
    );
    assert_eq!(app.get("/v1/queues/old").await.body["waiting"], 1);
}

#[tokio::test]
async fn forgetting_an_unknown_queue_is_not_an_error() {
    let app = TestApp::start().await;
    let response = app.request(Method::DELETE, "/v1/queues/ghost", None).await;
    assert_eq!(response.status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn bad_queue_names_are_400_on_every_route_and_write_nothing() {
    let app = TestApp::start().await;
    let long = "q".repeat(257);
    for queue in ["a%20b", "a%7Bb%7D", "tab%09", long.as_str()] {
        let base = format!("/v1/queues/{queue}");
        let job = json!({"klass": "K"});
        let cases = [
            (Method::GET, base.clone(), None),
            (Method::DELETE, base.clone(), None),
            (Method::POST, format!("{base}/jobs"), Some(job.clone())),
            (
                Method::POST,
                format!("{base}/jobs/batch"),
                Some(json!({"jobs": [job.clone()]})),
            ),
            (
                Method::POST,
                format!("{base}/pop"),
                Some(json!({"worker": "w"})),
            ),
            (Method::GET, format!("{base}/peek"), None),
            (Method::GET, format!("{base}/jobs?state=waiting"), None),
            (Method::POST, format!("{base}/pause"), None),
            (Method::POST, format!("{base}/unpause"), None),
            (Method::GET, format!("{base}/stats"), None),
            (
                Method::POST,
                format!("{base}/recurring"),
                Some(json!({"klass": "K", "interval": 60})),
            ),
        ];
        for (method, uri, body) in cases {
            let response = app.request(method.clone(), &uri, body).await;
            assert_eq!(response.status, StatusCode::BAD_REQUEST, "{method} {uri}");
            response.assert_problem(400, "bad_request");
        }
    }
    assert!(queue_names(&app).await.is_empty());
    let mut conn = app.redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "bad input wrote {keys:?}");
}

// ---------------------------------------------------------------------------------
// Putting one job

#[tokio::test]
async fn put_job_creates_the_job_and_points_at_it() {
    let app = TestApp::start().await;
    let body = json!({
        "jid": "j1", "klass": "email.Send", "data": {"to": "a@example.com", "n": [1, 2]},
        "priority": 7, "tags": ["signup", "eu"], "retries": 2
    });
    let response = app.post("/v1/queues/emails/jobs", body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert_eq!(response.body, json!({"jid": "j1", "created": true}));
    assert_eq!(response.headers[header::LOCATION], "/v1/jobs/j1");

    let job = job(&app, "j1").await.expect("the job exists");
    assert_eq!(job.klass, "email.Send");
    assert_eq!(job.queue, "emails");
    assert_eq!(job.state, "waiting");
    assert_eq!(job.data, json!({"to": "a@example.com", "n": [1, 2]}));
    assert_eq!(job.priority, 7.0);
    assert_eq!(job.tags, ["signup", "eu"]);
    assert_eq!((job.retries, job.remaining), (2, 2));
    assert_eq!(job.history[0].what, "put");
    assert_eq!(job.history[0].when, START);
}

#[tokio::test]
async fn put_job_without_a_jid_generates_a_hex_uuid() {
    let app = TestApp::start().await;
    let first = app.post("/v1/queues/q/jobs", json!({"klass": "K"})).await;
    let second = app.post("/v1/queues/q/jobs", json!({"klass": "K"})).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let jid = first.body["jid"].as_str().unwrap();
    assert_eq!(jid.len(), 32, "{jid}");
    assert!(
        jid.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
        "{jid}"
    );
    assert_eq!(jid.as_bytes()[12], b'4', "a version 4 UUID: {jid}");
    assert_ne!(first.body["jid"], second.body["jid"]);
    assert_eq!(first.headers[header::LOCATION], format!("/v1/jobs/{jid}"));
    assert!(job(&app, jid).await.is_some());
}

#[tokio::test]
async fn put_job_defaults_data_to_an_empty_object_and_keeps_any_json_value() {
    let app = TestApp::start().await;
    put(&app, "q", "none", json!({})).await;
    assert_eq!(job(&app, "none").await.unwrap().data, json!({}));
    for (jid, data) in [
        ("list", json!([1, "two", {"three": 3}])),
        ("text", json!("just text")),
        ("number", json!(12.5)),
        ("null", Value::Null),
        ("unicode", json!({"name": "café ☕", "slash": "a/b"})),
    ] {
        put(&app, "q", jid, json!({"data": data})).await;
        assert_eq!(job(&app, jid).await.unwrap().data, data, "{jid}");
    }
}

#[tokio::test]
async fn put_job_with_a_delay_is_scheduled_and_with_live_dependencies_waits() {
    let app = TestApp::start().await;
    put(&app, "q", "later", json!({"delay": 30})).await;
    put(&app, "q", "first", json!({})).await;
    put(
        &app,
        "q",
        "after",
        json!({"depends": ["first", "no-such-job"]}),
    )
    .await;
    assert_eq!(job(&app, "later").await.unwrap().state, "scheduled");
    let after = job(&app, "after").await.unwrap();
    assert_eq!(after.state, "depends");
    assert_eq!(after.dependencies, ["first"]);
    put(&app, "q", "free", json!({"depends": ["no-such-job"]})).await;
    assert_eq!(job(&app, "free").await.unwrap().state, "waiting");
}

#[tokio::test]
async fn put_job_with_a_jid_reserved_by_the_key_layout_is_a_400() {
    let app = TestApp::start().await;
    put(&app, "q", "b", json!({})).await;
    for jid in ["b-history", "b-dependencies", "b-dependents"] {
        let body = json!({"jid": jid, "klass": "K"});
        let response = app.post("/v1/queues/q/jobs", body).await;
        response.assert_problem(400, "bad_request");
        assert!(response.text.contains("is reserved"), "{}", response.text);
    }
    assert_eq!(job(&app, "b").await.unwrap().state, "waiting");
}

#[tokio::test]
async fn put_job_over_a_leased_job_moves_and_resets_it() {
    let app = TestApp::start().await;
    put(&app, "one", "j", json!({"priority": 3, "tags": ["t"]})).await;
    let pop = app.post("/v1/queues/one/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&pop), ["j"]);
    let response = put(&app, "two", "j", json!({"klass": "Other"})).await;
    assert_eq!(response.body, json!({"jid": "j", "created": true}));
    let job = job(&app, "j").await.unwrap();
    assert_eq!(
        (job.queue.as_str(), job.state.as_str(), job.worker.as_str()),
        ("two", "waiting", "")
    );
    assert_eq!(job.klass, "Other");
    assert_eq!(job.priority, 3.0, "priority is kept when not given");
    assert_eq!(job.tags, ["t"], "tags are kept when not given");
}

#[tokio::test]
async fn put_job_if_absent_creates_a_new_job() {
    let app = TestApp::start().await;
    let body = json!({"jid": "u", "klass": "K", "if_absent": true});
    let response = app.post("/v1/queues/q/jobs", body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert_eq!(response.body, json!({"jid": "u", "created": true}));
    assert_eq!(response.headers[header::LOCATION], "/v1/jobs/u");
    assert_eq!(job(&app, "u").await.unwrap().state, "waiting");
}

#[tokio::test]
async fn put_job_if_absent_leaves_an_existing_job_untouched() {
    let app = TestApp::start().await;
    put(&app, "q", "u", json!({"priority": 1, "data": {"v": 1}})).await;
    let pop = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&pop), ["u"]);
    let before = job(&app, "u").await.unwrap();

    app.clock.advance(5.0);
    let again = json!({"jid": "u", "klass": "Other", "priority": 9, "data": {"v": 2},
                       "if_absent": true});
    let response = app.post("/v1/queues/elsewhere/jobs", again).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"jid": "u", "created": false}));
    assert!(response.headers.get(header::LOCATION).is_none());
    assert_eq!(job(&app, "u").await.unwrap(), before, "the job changed");
    assert_eq!(queue_names(&app).await, ["q"]);
}

#[tokio::test]
async fn put_job_rejects_bad_input_and_writes_nothing() {
    let app = TestApp::start().await;
    let cases = [
        json!({"jid": "j"}),
        json!({"jid": "j", "klass": ""}),
        json!({"jid": "j", "klass": "  "}),
        json!({"jid": "j", "klass": 5}),
        json!({"jid": "j", "klass": "K", "colour": "red"}),
        json!({"jid": "j", "klass": "K", "now": 5}),
        json!({"jid": "j k", "klass": "K"}),
        json!({"jid": "", "klass": "K"}),
        json!({"jid": "j{x}", "klass": "K"}),
        json!({"jid": "j", "klass": "K", "delay": -1}),
        json!({"jid": "j", "klass": "K", "delay": "soon"}),
        json!({"jid": "j", "klass": "K", "priority": "high"}),
        json!({"jid": "j", "klass": "K", "retries": -1}),
        json!({"jid": "j", "klass": "K", "retries": 1.5}),
        json!({"jid": "j", "klass": "K", "tags": "t"}),
        json!({"jid": "j", "klass": "K", "tags": ["ok", "not ok"]}),
        json!({"jid": "j", "klass": "K", "tags": [""]}),
        json!({"jid": "j", "klass": "K", "depends": ["a\nb"]}),
        json!({"jid": "j", "klass": "K", "depends": [1]}),
        json!({"jid": "j", "klass": "K", "if_absent": "yes"}),
    ];
    for body in cases {
        let response = app.post("/v1/queues/q/jobs", body.clone()).await;
        assert_eq!(
            response.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            response.text
        );
        response.assert_problem(400, "bad_request");
    }
    for text in ["{", "", r#"{"jid": "j", "klass": "K", "priority": 1e999}"#] {
        let response = post_raw(&app, "/v1/queues/q/jobs", "application/json", text.into()).await;
        response.assert_problem(400, "bad_request");
    }
    assert!(job(&app, "j").await.is_none());
    assert!(queue_names(&app).await.is_empty());
}

#[tokio::test]
async fn put_job_needs_a_json_content_type() {
    let app = TestApp::start().await;
    let body = json!({"jid": "j", "klass": "K"}).to_string();
    let response = post_raw(&app, "/v1/queues/q/jobs", "text/plain", body).await;
    response.assert_problem(415, "unsupported_media_type");
    assert!(job(&app, "j").await.is_none());
}

#[tokio::test]
async fn put_job_over_the_body_limit_is_413() {
    let app = TestApp::start().await;
    let body = json!({"jid": "j", "klass": "K", "data": "x".repeat(1024 * 1024 + 1)});
    let response = app.post("/v1/queues/q/jobs", body).await;
    response.assert_problem(413, "payload_too_large");
    assert!(job(&app, "j").await.is_none());
}

#[tokio::test]
async fn location_percent_encodes_the_jid() {
    let app = TestApp::start().await;
    let body = json!({"jid": "a/b?c#d%e", "klass": "K"});
    let response = app.post("/v1/queues/q/jobs", body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert_eq!(
        response.headers[header::LOCATION],
        "/v1/jobs/a%2Fb%3Fc%23d%25e"
    );
    let body = json!({"jid": "café", "klass": "K"});
    let response = app.post("/v1/queues/q/jobs", body).await;
    assert_eq!(response.headers[header::LOCATION], "/v1/jobs/caf%C3%A9");
}

// ---------------------------------------------------------------------------------
// Putting many jobs

#[tokio::test]
async fn put_jobs_puts_every_job_in_order_in_one_call() {
    let app = TestApp::start().await;
    let body = json!({"jobs": [
        {"jid": "a", "klass": "K", "priority": 1},
        {"klass": "K", "data": {"n": 2}},
        {"jid": "c", "klass": "K", "delay": 10, "tags": ["t"]},
    ]});
    let response = app.post("/v1/queues/q/jobs/batch", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let jobs = response.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[0], json!({"jid": "a", "created": true}));
    assert_eq!(jobs[2], json!({"jid": "c", "created": true}));
    let generated = jobs[1]["jid"].as_str().unwrap();
    assert_eq!(generated.len(), 32);
    assert_eq!(jobs[1]["created"], true);

    assert_eq!(job(&app, generated).await.unwrap().data, json!({"n": 2}));
    assert_eq!(job(&app, "c").await.unwrap().state, "scheduled");
    let counts = app.get("/v1/queues/q").await.body;
    assert_eq!(
        (&counts["waiting"], &counts["scheduled"]),
        (&json!(2), &json!(1))
    );
}

#[tokio::test]
async fn put_jobs_with_if_absent_reports_which_jobs_existed() {
    let app = TestApp::start().await;
    put(&app, "q", "old", json!({"priority": 4})).await;
    let body = json!({"jobs": [
        {"jid": "old", "klass": "New", "priority": 9, "if_absent": true},
        {"jid": "new", "klass": "K", "if_absent": true},
        {"jid": "new", "klass": "K", "if_absent": true},
    ]});
    let response = app.post("/v1/queues/q/jobs/batch", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!({"jobs": [
            {"jid": "old", "created": false},
            {"jid": "new", "created": true},
            {"jid": "new", "created": false},
        ]})
    );
    let old = job(&app, "old").await.unwrap();
    assert_eq!((old.klass.as_str(), old.priority), ("K", 4.0));
}

#[tokio::test]
async fn put_jobs_rejects_a_bad_item_by_index_and_writes_nothing() {
    let app = TestApp::start().await;
    let good = json!({"jid": "g", "klass": "K"});
    let cases = [
        (
            json!({"jobs": [good, good, {"jid": "b", "klass": ""}]}),
            "jobs[2]",
        ),
        (
            json!({"jobs": [good, {"jid": "b", "klass": "K", "oops": 1}]}),
            "jobs[1]",
        ),
        (
            json!({"jobs": [{"jid": "b", "klass": "K", "delay": -5}, good]}),
            "jobs[0]",
        ),
        (
            json!({"jobs": [good, {"jid": "b", "klass": "K", "tags": ["a b"]}]}),
            "jobs[1]",
        ),
        (
            json!({"jobs": [good, {"klass": "K", "retries": -2}]}),
            "jobs[1]",
        ),
    ];
    for (body, index) in cases {
        let response = app.post("/v1/queues/q/jobs/batch", body.clone()).await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(detail.contains(index), "{body}: {detail}");
    }
    let response = app
        .post(
            "/v1/queues/q/jobs/batch",
            json!({"jobs": [good], "extra": true}),
        )
        .await;
    response.assert_problem(400, "bad_request");
    assert!(job(&app, "g").await.is_none());
    assert!(queue_names(&app).await.is_empty());
}

#[tokio::test]
async fn put_jobs_needs_between_one_and_a_thousand_jobs() {
    let app = TestApp::start().await;
    let empty = app
        .post("/v1/queues/q/jobs/batch", json!({"jobs": []}))
        .await;
    empty.assert_problem(400, "bad_request");
    let missing = app.post("/v1/queues/q/jobs/batch", json!({})).await;
    missing.assert_problem(400, "bad_request");
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"jid": format!("j{i}"), "klass": "K"}))
        .collect();
    let response = app
        .post("/v1/queues/q/jobs/batch", json!({"jobs": many}))
        .await;
    response.assert_problem(400, "bad_request");
    assert!(job(&app, "j0").await.is_none());

    let thousand = &many[..1000];
    let response = app
        .post("/v1/queues/q/jobs/batch", json!({"jobs": thousand}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body["jobs"].as_array().unwrap().len(), 1000);
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 1000);
}

#[tokio::test]
async fn put_jobs_accepts_bodies_over_the_single_request_limit() {
    let app = TestApp::start().await;
    let payload = "x".repeat(4096);
    let jobs: Vec<Value> = (0..600)
        .map(|i| json!({"jid": format!("j{i}"), "klass": "K", "data": {"p": payload}}))
        .collect();
    let body = json!({"jobs": jobs});
    assert!(body.to_string().len() > 2 * 1024 * 1024);
    let response = app.post("/v1/queues/q/jobs/batch", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 600);
}

#[tokio::test]
async fn put_jobs_over_the_batch_limit_is_413() {
    let app = TestApp::start().await;
    let payload = "x".repeat(17 * 1024 * 1024);
    let body = json!({"jobs": [{"jid": "j", "klass": "K", "data": payload}]});
    let response = app.post("/v1/queues/q/jobs/batch", body).await;
    response.assert_problem(413, "payload_too_large");
    assert!(job(&app, "j").await.is_none());
}

#[tokio::test]
async fn put_jobs_needs_a_json_content_type() {
    let app = TestApp::start().await;
    let body = json!({"jobs": [{"jid": "j", "klass": "K"}]}).to_string();
    let response = post_raw(&app, "/v1/queues/q/jobs/batch", "text/plain", body).await;
    response.assert_problem(415, "unsupported_media_type");
    let response = post_raw(
        &app,
        "/v1/queues/q/jobs/batch",
        "application/json",
        "[".into(),
    )
    .await;
    response.assert_problem(400, "bad_request");
    assert!(job(&app, "j").await.is_none());
}

// ---------------------------------------------------------------------------------
// Leasing and peeking

#[tokio::test]
async fn pop_jobs_leases_the_highest_priority_then_oldest_jobs() {
    let app = TestApp::start().await;
    put(&app, "q", "low", json!({})).await;
    app.clock.advance(1.0);
    put(&app, "high", "ignored-queue", json!({})).await;
    put(&app, "q", "high", json!({"priority": 10})).await;
    put(&app, "q", "low2", json!({})).await;

    let response = app
        .post("/v1/queues/q/pop", json!({"worker": "w1", "count": 2}))
        .await;
    assert_eq!(popped(&response), ["high", "low"]);
    let first = &response.body[0];
    assert_eq!(first["state"], "running");
    assert_eq!(first["worker"], "w1");
    assert_eq!(first["queue"], "q");
    assert_eq!(
        first["expires"],
        json!(START as i64 + 61),
        "whole seconds are integers"
    );
    assert_eq!(first["data"], json!({}));
    assert_eq!(first["tags"], json!([]));
    assert_eq!(first["dependencies"], json!([]));

    let response = app.post("/v1/queues/q/pop", json!({"worker": "w2"})).await;
    assert_eq!(popped(&response), ["low2"], "count defaults to 1");
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w2"})).await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.body, json!([]));
}

#[tokio::test]
async fn pop_jobs_rejects_bad_input_and_leases_nothing() {
    let app = TestApp::start().await;
    put(&app, "q", "j", json!({})).await;
    let cases = [
        json!({}),
        json!({"worker": ""}),
        json!({"worker": "w 1"}),
        json!({"worker": 7}),
        json!({"worker": "w", "count": 0}),
        json!({"worker": "w", "count": 1001}),
        json!({"worker": "w", "count": -1}),
        json!({"worker": "w", "count": "2"}),
        json!({"worker": "w", "timeout": 5}),
    ];
    for body in cases {
        let response = app.post("/v1/queues/q/pop", body.clone()).await;
        assert_eq!(
            response.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            response.text
        );
        response.assert_problem(400, "bad_request");
    }
    let response = post_raw(
        &app,
        "/v1/queues/q/pop",
        "text/plain",
        r#"{"worker":"w"}"#.into(),
    )
    .await;
    response.assert_problem(415, "unsupported_media_type");
    let job = job(&app, "j").await.unwrap();
    assert_eq!((job.state.as_str(), job.worker.as_str()), ("waiting", ""));
}

#[tokio::test]
async fn a_paused_queue_leases_nothing_until_unpaused() {
    let app = TestApp::start().await;
    put(&app, "q", "j", json!({})).await;
    let response = app.request(Method::POST, "/v1/queues/q/pause", None).await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert_eq!(app.get("/v1/queues/q").await.body["paused"], true);
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(response.body, json!([]));
    let peek = app.get("/v1/queues/q/peek").await;
    assert_eq!(popped(&peek), ["j"], "peek ignores the pause");

    let response = app
        .request(Method::POST, "/v1/queues/q/unpause", None)
        .await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert_eq!(app.get("/v1/queues/q").await.body["paused"], false);
    let response = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&response), ["j"]);
}

#[tokio::test]
async fn peek_jobs_shows_the_next_jobs_without_leasing_them() {
    let app = TestApp::start().await;
    put(&app, "q", "a", json!({})).await;
    put(&app, "q", "b", json!({"priority": 5})).await;
    app.clock.advance(1.0);
    put(&app, "q", "c", json!({})).await;

    assert_eq!(popped(&app.get("/v1/queues/q/peek").await), ["b"]);
    let response = app.get("/v1/queues/q/peek?count=10").await;
    assert_eq!(popped(&response), ["b", "a", "c"]);
    assert_eq!(response.body[0]["state"], "waiting");
    assert_eq!(response.body[0]["worker"], "");
    let b = job(&app, "b").await.unwrap();
    assert_eq!(b.state, "waiting");
    assert_eq!(b.history.len(), 1, "peek wrote history");
    assert_eq!(app.get("/v1/queues/empty/peek").await.body, json!([]));
}

#[tokio::test]
async fn peek_jobs_rejects_bad_counts() {
    let app = TestApp::start().await;
    for query in ["count=0", "count=1001", "count=-1", "count=many", "cuont=2"] {
        let response = app.get(&format!("/v1/queues/q/peek?{query}")).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
        response.assert_problem(400, "bad_request");
    }
}

// ---------------------------------------------------------------------------------
// Listings

#[tokio::test]
async fn list_queue_jobs_lists_waiting_jobs_in_pop_order_without_leasing() {
    let app = TestApp::start().await;
    put(&app, "q", "a", json!({})).await;
    app.clock.advance(1.0);
    put(&app, "q", "b", json!({})).await;
    put(&app, "q", "c", json!({"priority": 3})).await;
    let response = app.get("/v1/queues/q/jobs?state=waiting").await;
    assert_eq!(response.body, json!({"jids": ["c", "a", "b"]}));
    let response = app
        .get("/v1/queues/q/jobs?state=waiting&offset=1&count=1")
        .await;
    assert_eq!(jids(&response), ["a"]);
    assert_eq!(job(&app, "c").await.unwrap().state, "waiting");
    let empty = app.get("/v1/queues/other/jobs?state=waiting").await;
    assert_eq!(empty.body, json!({"jids": []}));
}

#[tokio::test]
async fn list_queue_jobs_lists_every_other_state() {
    let app = TestApp::start().await;
    put(&app, "q", "stale", json!({})).await;
    let pop = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&pop), ["stale"]);
    app.clock.advance(30.0);
    put(&app, "q", "busy", json!({})).await;
    let pop = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&pop), ["busy"]);
    // stale's lock expired at START+60, busy's runs until START+90.
    app.clock.advance(31.0);
    put(&app, "q", "later", json!({"delay": 100})).await;
    put(&app, "q", "blocked", json!({"depends": ["later"]})).await;
    let recur = json!({"jid": "r", "klass": "K", "interval": 60, "offset": 1000});
    app.post("/v1/queues/q/recurring", recur).await;

    let list = |state: &'static str| {
        let app = &app;
        async move { jids(&app.get(&format!("/v1/queues/q/jobs?state={state}")).await) }
    };
    assert_eq!(list("stalled").await, ["stale"]);
    assert_eq!(list("running").await, ["busy"]);
    assert_eq!(list("scheduled").await, ["later"]);
    assert_eq!(list("depends").await, ["blocked"]);
    assert_eq!(list("recurring").await, ["r"]);
    let empty = app.get("/v1/queues/other/jobs?state=running").await;
    assert_eq!(empty.body, json!({"jids": []}));
}

#[tokio::test]
async fn list_queue_jobs_needs_a_known_state_and_a_valid_page() {
    let app = TestApp::start().await;
    put(&app, "q", "j", json!({})).await;
    for query in [
        "",
        "?state=",
        "?state=complete",
        "?state=failed",
        "?state=Waiting",
        "?state=waiting&count=0",
        "?state=waiting&count=1001",
        "?state=waiting&offset=-1",
        "?state=waiting&page=2",
    ] {
        let response = app.get(&format!("/v1/queues/q/jobs{query}")).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query:?}");
        response.assert_problem(400, "bad_request");
    }
}

// ---------------------------------------------------------------------------------
// Statistics

#[tokio::test]
async fn get_queue_stats_reports_wait_times_of_the_day() {
    let app = TestApp::start().await;
    put(&app, "q", "a", json!({})).await;
    app.clock.advance(5.0);
    let pop = app.post("/v1/queues/q/pop", json!({"worker": "w"})).await;
    assert_eq!(popped(&pop), ["a"]);

    let response = app.get("/v1/queues/q/stats").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let stats = &response.body;
    assert_eq!(stats["wait"]["count"], 1);
    assert_eq!(stats["wait"]["mean"], 5.0);
    assert_eq!(stats["wait"]["std"], 0.0);
    let histogram = stats["wait"]["histogram"].as_array().unwrap();
    assert_eq!(histogram.len(), 148);
    assert_eq!(histogram[5], 1);
    assert_eq!(histogram.iter().filter(|n| **n != 0).count(), 1);
    assert_eq!(stats["run"]["count"], 0);
    assert_eq!(stats["run"]["histogram"].as_array().unwrap().len(), 148);
    for key in ["retries", "failed", "failures"] {
        assert_eq!(stats[key], 0, "{key}");
    }

    let same_day = app.get(&format!("/v1/queues/q/stats?date={START}")).await;
    assert_eq!(same_day.body, response.body);
    let next_day = START + 86_400.0;
    let other = app
        .get(&format!("/v1/queues/q/stats?date={next_day}"))
        .await;
    assert_eq!(other.status, StatusCode::OK);
    assert_eq!(other.body["wait"]["count"], 0);
}

#[tokio::test]
async fn get_queue_stats_rejects_a_bad_date() {
    let app = TestApp::start().await;
    for query in ["date=yesterday", "date=inf", "date=NaN", "day=1"] {
        let response = app.get(&format!("/v1/queues/q/stats?{query}")).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
        response.assert_problem(400, "bad_request");
    }
}

// ---------------------------------------------------------------------------------
// Recurring jobs

#[tokio::test]
async fn create_recurring_job_stores_the_template_and_points_at_it() {
    let app = TestApp::start().await;
    let body = json!({
        "jid": "nightly", "klass": "report.Build", "data": {"kind": "daily"},
        "interval": 3600, "offset": 30, "priority": 2, "tags": ["reports"],
        "retries": 1, "backlog": 3
    });
    let response = app.post("/v1/queues/reports/recurring", body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert_eq!(response.body, json!({"jid": "nightly"}));
    assert_eq!(response.headers[header::LOCATION], "/v1/recurring/nightly");

    let template: RecurringJob = app
        .qless
        .recur_get(app.clock.now(), "nightly")
        .await
        .unwrap()
        .expect("the template exists");
    assert_eq!(template.klass, "report.Build");
    assert_eq!(template.queue, "reports");
    assert_eq!(template.data, json!({"kind": "daily"}));
    assert_eq!(template.interval, 3600.0);
    assert_eq!(template.priority, 2.0);
    assert_eq!(template.tags, ["reports"]);
    assert_eq!(template.retries, 1);
    assert_eq!(template.backlog, 3);
    assert_eq!(app.get("/v1/queues/reports").await.body["recurring"], 1);

    assert_eq!(app.get("/v1/queues/reports/peek").await.body, json!([]));
    app.clock.advance(30.0);
    let peek = app.get("/v1/queues/reports/peek").await;
    assert_eq!(popped(&peek), ["nightly-1"], "first spawn after the offset");
}

#[tokio::test]
async fn create_recurring_job_generates_a_jid_and_defaults_the_rest() {
    let app = TestApp::start().await;
    let body = json!({"klass": "K", "interval": 60});
    let response = app.post("/v1/queues/q/recurring", body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    let jid = response.body["jid"].as_str().unwrap().to_owned();
    assert_eq!(jid.len(), 32);
    assert_eq!(
        response.headers[header::LOCATION],
        format!("/v1/recurring/{jid}")
    );
    let template = app.qless.recur_get(START, &jid).await.unwrap().unwrap();
    assert_eq!(template.data, json!({}));
    assert_eq!((template.priority, template.retries), (0.0, 0));
    let peek = app.get("/v1/queues/q/peek").await;
    assert_eq!(popped(&peek), [format!("{jid}-1")], "offset defaults to 0");
}

#[tokio::test]
async fn create_recurring_job_rejects_bad_input_and_writes_nothing() {
    let app = TestApp::start().await;
    let cases = [
        json!({"jid": "r", "klass": "K"}),
        json!({"jid": "r", "klass": "K", "interval": 0}),
        json!({"jid": "r", "klass": "K", "interval": -60}),
        json!({"jid": "r", "klass": "K", "interval": "hourly"}),
        json!({"jid": "r", "klass": "", "interval": 60}),
        json!({"jid": "r", "interval": 60}),
        json!({"jid": "r r", "klass": "K", "interval": 60}),
        json!({"jid": "r", "klass": "K", "interval": 60, "offset": -1}),
        json!({"jid": "r", "klass": "K", "interval": 60, "retries": -1}),
        json!({"jid": "r", "klass": "K", "interval": 60, "backlog": -1}),
        json!({"jid": "r", "klass": "K", "interval": 60, "tags": ["a{b}"]}),
        json!({"jid": "r", "klass": "K", "interval": 60, "every": 5}),
    ];
    for body in cases {
        let response = app.post("/v1/queues/q/recurring", body.clone()).await;
        assert_eq!(
            response.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            response.text
        );
        response.assert_problem(400, "bad_request");
    }
    let body = json!({"jid": "r", "klass": "K", "interval": 60}).to_string();
    let response = post_raw(&app, "/v1/queues/q/recurring", "text/plain", body).await;
    response.assert_problem(415, "unsupported_media_type");
    assert!(app.qless.recur_get(START, "r").await.unwrap().is_none());
    assert!(queue_names(&app).await.is_empty());
}

#[tokio::test]
async fn queue_routes_answer_503_with_retry_after_when_redis_is_gone() {
    let mut app = TestApp::start().await;
    app.kill_redis();
    let responses = [
        app.get("/v1/queues").await,
        app.post("/v1/queues/q/jobs", json!({"klass": "K"})).await,
        app.post("/v1/queues/q/pop", json!({"worker": "w"})).await,
    ];
    for response in responses {
        response.assert_problem(503, "unavailable");
        assert_eq!(response.headers[header::RETRY_AFTER], "1");
    }
}

// ---------------------------------------------------------------------------------
// Over a real socket

#[tokio::test]
async fn a_job_can_be_put_and_popped_over_tcp() {
    let app = TestApp::start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(qlessd::server::serve(
        listener,
        app.router.clone(),
        std::future::pending(),
    ));
    let client = crate::support::http();
    let base = format!("http://{address}/v1/queues/tcp");

    let response = client
        .post(format!("{base}/jobs"))
        .json(&json!({"klass": "K", "data": {"over": "tcp"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let put: Value = response.json().await.unwrap();
    let jid = put["jid"].as_str().unwrap();
    assert_eq!(location, format!("/v1/jobs/{jid}"));

    let response = client
        .post(format!("{base}/pop"))
        .json(&json!({"worker": "remote"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let jobs: Vec<Job> = response.json().await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].jid, jid);
    assert_eq!(jobs[0].worker, "remote");
    assert_eq!(jobs[0].data, json!({"over": "tcp"}));

    let response = client
        .post(format!("{base}/pop"))
        .header("content-type", "text/plain")
        .body("worker=remote")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 415);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
}

#[tokio::test]
async fn job_data_is_stored_and_returned_byte_for_byte() {
    // Key order, number spelling and integers beyond 64 bits all survive: the text is
    // never re-encoded on the way in or out.
    let app = TestApp::start().await;
    let data = r#"{"z":1,"a":[1.50,2e3],"big":123456789012345678901234567890,"s":"caf\u00e9"}"#;
    let body = format!(r#"{{"jid":"exact","klass":"K","data":{data}}}"#);
    let response = post_raw(&app, "/v1/queues/q/jobs", "application/json", body).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    let mut conn = app.redis.client().get_connection().unwrap();
    let stored: String = redis::cmd("HGET")
        .arg("ql:j:exact")
        .arg("data")
        .query(&mut conn)
        .unwrap();
    assert_eq!(stored, data);
    let fetched = app.get("/v1/jobs/exact").await;
    assert!(
        fetched.text.contains(&format!(r#""data":{data}"#)),
        "{}",
        fetched.text
    );
}

#[tokio::test]
async fn names_are_measured_in_characters_and_may_not_hide_a_byte_order_mark() {
    let app = TestApp::start().await;
    // 256 three-byte characters: 768 bytes, but a name of 256 characters.
    let longest = "ж".repeat(256);
    let response = app
        .request(
            Method::POST,
            "/v1/queues/q/jobs",
            Some(json!({"jid": longest, "klass": "K"})),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert!(job(&app, &longest).await.is_some());
    for jid in ["ж".repeat(257), "a\u{feff}b".to_owned()] {
        let response = app
            .request(
                Method::POST,
                "/v1/queues/q/jobs",
                Some(json!({"jid": jid, "klass": "K"})),
            )
            .await;
        response.assert_problem(400, "bad_request");
        assert!(job(&app, &jid).await.is_none(), "{jid:?} was written");
    }
}

#[tokio::test]
async fn a_class_must_say_something_and_may_contain_spaces_on_every_route() {
    let app = TestApp::start().await;
    let response = put(&app, "q", "spaced", json!({"klass": "My Job"})).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    let requeue = |klass: &str| json!({"queue": "other", "klass": klass});
    let response = app
        .request(
            Method::POST,
            "/v1/jobs/spaced/requeue",
            Some(requeue("Other Job")),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(job(&app, "spaced").await.unwrap().klass, "Other Job");
    for blank in ["", " \t", "\u{feff}", "\u{1}"] {
        let body = json!({"jid": "blank", "klass": blank});
        let response = app.post("/v1/queues/q/jobs", body).await;
        response.assert_problem(400, "bad_request");
        let response = app
            .request(
                Method::POST,
                "/v1/jobs/spaced/requeue",
                Some(requeue(blank)),
            )
            .await;
        response.assert_problem(400, "bad_request");
    }
    assert!(job(&app, "blank").await.is_none());
    assert_eq!(job(&app, "spaced").await.unwrap().queue, "other");
}

#[tokio::test]
async fn whole_numbers_may_be_written_with_a_zero_fraction_but_not_with_another() {
    let app = TestApp::start().await;
    let response = app
        .post(
            "/v1/queues/q/jobs",
            json!({"jid": "a", "klass": "K", "retries": 3.0}),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert_eq!(job(&app, "a").await.unwrap().retries, 3);
    for retries in [json!(2.5), json!(-1.0), json!(1e19), json!("3")] {
        let body = json!({"jid": "b", "klass": "K", "retries": retries});
        let response = app.post("/v1/queues/q/jobs", body).await;
        response.assert_problem(400, "bad_request");
    }
    assert!(job(&app, "b").await.is_none());
    let response = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "count": 10.0}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body.as_array().unwrap().len(), 1);
}
