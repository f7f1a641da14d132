//! The gateway's own features, through the router in logical time: progress and
//! results beside a job's data, idempotent puts, retry backoff and throttles. The
//! once-only rules are also driven through two gateways (two routers on one Redis).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use qlessd::server::{self, App, AppState, Limits};
use qlessd::settings::Settings;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{TestApp, TestResponse, connect};

// ---- helpers ----------------------------------------------------------------------

/// A second gateway: its own router, connection and leasing, on the same Redis and
/// the same clock as `app`.
async fn second_gateway(app: &TestApp) -> App {
    let qless = connect(&app.redis, None).await;
    let settings = Settings::for_redis(app.redis.url());
    let state = AppState::new(qless, app.clock.clone(), Limits::from_settings(&settings));
    server::router(state)
}

/// Sends a JSON request with extra headers to `router`.
async fn send(
    router: &App,
    method: Method,
    uri: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = router
        .clone()
        .oneshot(builder.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn put(app: &TestApp, queue: &str, body: Value) -> TestResponse {
    let response = app.post(&format!("/v1/queues/{queue}/jobs"), body).await;
    assert!(response.status.is_success(), "{}", response.text);
    response
}

async fn pop(app: &TestApp, queue: &str, worker: &str, count: u32) -> Vec<String> {
    let response = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": worker, "count": count}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    jids(&response.body)
}

fn jids(jobs: &Value) -> Vec<String> {
    jobs.as_array()
        .unwrap()
        .iter()
        .map(|job| job["jid"].as_str().unwrap().to_owned())
        .collect()
}

async fn complete(app: &TestApp, jid: &str, worker: &str, queue: &str, extra: Value) {
    let mut body = json!({"worker": worker, "queue": queue});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let response = app.post(&format!("/v1/jobs/{jid}/complete"), body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
}

async fn job(app: &TestApp, jid: &str) -> Value {
    let response = app.get(&format!("/v1/jobs/{jid}")).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    response.body
}

// ---- progress and results ---------------------------------------------------------

#[tokio::test]
async fn progress_and_result_are_kept_beside_the_data_and_shown_with_the_job() {
    let app = TestApp::start().await;
    put(
        &app,
        "q",
        json!({"jid": "a", "klass": "K", "data": {"input": 1}}),
    )
    .await;
    assert_eq!(pop(&app, "q", "w", 1).await, ["a"]);
    let fresh = job(&app, "a").await;
    assert!(fresh.get("progress").is_none() && fresh.get("result").is_none());

    let beat = app
        .post(
            "/v1/jobs/a/heartbeat",
            json!({"worker": "w", "progress": {"done": 40}}),
        )
        .await;
    assert_eq!(beat.status, StatusCode::OK, "{}", beat.text);
    let running = job(&app, "a").await;
    assert_eq!(running["progress"], json!({"done": 40}));
    assert_eq!(
        running["data"],
        json!({"input": 1}),
        "progress must not erase data"
    );

    complete(&app, "a", "w", "q", json!({"result": [1, "two"]})).await;
    let done = job(&app, "a").await;
    assert_eq!(done["state"], "complete");
    assert_eq!(done["result"], json!([1, "two"]));
    assert_eq!(done["progress"], json!({"done": 40}));
    assert_eq!(done["data"], json!({"input": 1}));
}

#[tokio::test]
async fn progress_and_results_in_batches_are_stored_per_job() {
    let app = TestApp::start().await;
    for jid in ["a", "b"] {
        put(&app, "q", json!({"jid": jid, "klass": "K"})).await;
    }
    pop(&app, "q", "w", 2).await;
    let beats = app
        .post(
            "/v1/jobs/heartbeat",
            json!({"jobs": [{"jid": "a", "worker": "w", "progress": 1},
                            {"jid": "b", "worker": "w", "progress": 2}]}),
        )
        .await;
    assert_eq!(beats.status, StatusCode::OK, "{}", beats.text);
    let done = app
        .post(
            "/v1/jobs/complete",
            json!({"jobs": [{"jid": "a", "worker": "w", "queue": "q", "result": "ok-a"},
                            {"jid": "b", "worker": "w", "queue": "q"}]}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    let (a, b) = (job(&app, "a").await, job(&app, "b").await);
    assert_eq!((&a["progress"], &a["result"]), (&json!(1), &json!("ok-a")));
    assert_eq!(b["progress"], json!(2));
    assert!(b.get("result").is_none());
}

#[tokio::test]
async fn a_result_over_the_job_size_limit_is_refused_and_nothing_is_completed() {
    let app = TestApp::start().await;
    put(&app, "q", json!({"jid": "a", "klass": "K"})).await;
    pop(&app, "q", "w", 1).await;
    let huge = "x".repeat(2 * 1024 * 1024);
    let response = app
        .post(
            "/v1/jobs/a/complete",
            json!({"worker": "w", "queue": "q", "result": huge}),
        )
        .await;
    assert!(response.status.is_client_error(), "{}", response.text);
    assert_eq!(job(&app, "a").await["state"], "running");
}

// ---- idempotent puts --------------------------------------------------------------

#[tokio::test]
async fn a_repeated_idempotency_key_answers_the_first_jid_until_it_expires() {
    let app = TestApp::start().await;
    let body = json!({"klass": "K", "data": {"n": 1}});
    let headers = [("idempotency-key", "order-17")];
    let (status, first) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs",
        body.clone(),
        &headers,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(first["created"], true);
    let (status, again) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs",
        body.clone(),
        &headers,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, json!({"jid": first["jid"], "created": false}));
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 1);

    // A day later (the default --idempotency-ttl) the key is free again.
    app.clock.advance(86_400.0);
    let (status, later) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs",
        body,
        &headers,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(later["jid"], first["jid"]);
}

#[tokio::test]
async fn batch_items_carry_their_own_idempotency_keys() {
    let app = TestApp::start().await;
    let body = json!({"jobs": [
        {"klass": "K", "idempotency_key": "k1"},
        {"klass": "K", "idempotency_key": "k1"},
        {"klass": "K", "idempotency_key": "k2"},
        {"klass": "K"}
    ]});
    let response = app.post("/v1/queues/q/jobs/batch", body).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let jobs = response.body["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["created"], true);
    assert_eq!(jobs[1], json!({"jid": jobs[0]["jid"], "created": false}));
    assert_eq!(jobs[2]["created"], true);
    assert_eq!(jobs[3]["created"], true);
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 3);
}

#[tokio::test]
async fn two_gateways_given_the_same_idempotency_key_make_one_job() {
    let app = TestApp::start().await;
    let other = second_gateway(&app).await;
    let body = json!({"klass": "K"});
    let headers = [("idempotency-key", "same")];
    let ((s1, a), (s2, b)) = tokio::join!(
        send(
            &app.router,
            Method::POST,
            "/v1/queues/q/jobs",
            body.clone(),
            &headers
        ),
        send(
            &other,
            Method::POST,
            "/v1/queues/q/jobs",
            body.clone(),
            &headers
        ),
    );
    assert_eq!(a["jid"], b["jid"]);
    let mut statuses = [s1, s2];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CREATED]);
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 1);
}

#[tokio::test]
async fn a_bad_idempotency_key_is_refused_and_nothing_is_put() {
    let app = TestApp::start().await;
    let (status, _) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs",
        json!({"klass": "K", "idempotency_key": "x"}),
        &[("idempotency-key", "y")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs",
        json!({"klass": "K", "idempotency_key": ""}),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(app.get("/v1/queues/q").await.status, StatusCode::OK);
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 0);
}

// ---- backoff ----------------------------------------------------------------------

#[tokio::test]
async fn a_retry_without_a_delay_waits_for_the_backoff_of_its_attempt() {
    let app = TestApp::start().await;
    put(
        &app,
        "q",
        json!({"jid": "a", "klass": "K", "backoff": {"initial": 10, "factor": 3, "max": 50}}),
    )
    .await;
    // Attempt 1 waits 10 s, attempt 2 30 s, attempt 3 50 s (the max, not 90).
    for wait in [10.0, 30.0, 50.0] {
        assert_eq!(pop(&app, "q", "w", 1).await, ["a"]);
        let retry = app
            .post("/v1/jobs/a/retry", json!({"worker": "w", "queue": "q"}))
            .await;
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
        assert_eq!(job(&app, "a").await["state"], "scheduled");
        app.clock.advance(wait - 1.0);
        assert!(
            pop(&app, "q", "w", 1).await.is_empty(),
            "too early after {wait}"
        );
        app.clock.advance(1.0);
    }
    assert_eq!(pop(&app, "q", "w", 1).await, ["a"]);
}

#[tokio::test]
async fn an_explicit_delay_and_jobs_without_backoff_keep_the_old_retry() {
    let app = TestApp::start().await;
    put(
        &app,
        "q",
        json!({"jid": "a", "klass": "K", "backoff": {"initial": 100}}),
    )
    .await;
    put(&app, "q", json!({"jid": "b", "klass": "K"})).await;
    pop(&app, "q", "w", 2).await;
    app.post(
        "/v1/jobs/a/retry",
        json!({"worker": "w", "queue": "q", "delay": 0}),
    )
    .await;
    app.post("/v1/jobs/b/retry", json!({"worker": "w", "queue": "q"}))
        .await;
    assert_eq!(job(&app, "a").await["state"], "waiting");
    assert_eq!(job(&app, "b").await["state"], "waiting");
}

#[tokio::test]
async fn a_queue_backoff_applies_to_its_jobs_and_to_lock_expiry() {
    let app = TestApp::start().await;
    let set = app
        .request(
            Method::PUT,
            "/v1/config/q-backoff",
            Some(json!({"value": "{\"initial\": 20}"})),
        )
        .await;
    assert!(set.status.is_success(), "{}", set.text);
    app.request(
        Method::PUT,
        "/v1/config/grace-period",
        Some(json!({"value": 0})),
    )
    .await;
    put(&app, "q", json!({"jid": "a", "klass": "K"})).await;
    assert_eq!(pop(&app, "q", "w1", 1).await, ["a"]);
    // The lock expires (heartbeat 60 s): the next pop schedules it 20 s out instead
    // of handing it over.
    app.clock.advance(61.0);
    assert!(pop(&app, "q", "w2", 1).await.is_empty());
    let stalled = job(&app, "a").await;
    assert_eq!(stalled["state"], "scheduled");
    assert_eq!(stalled["remaining"], 4);
    app.clock.advance(20.0);
    assert_eq!(pop(&app, "q", "w2", 1).await, ["a"]);
}

#[tokio::test]
async fn bad_backoff_policies_are_refused() {
    let app = TestApp::start().await;
    for backoff in [
        json!({"initial": -1}),
        json!({"initial": 1, "factor": 0.5}),
        json!({"initial": 1, "jitter": 2}),
        json!({"initial": 1, "max": -3}),
        json!({"factor": 2}),
    ] {
        let response = app
            .post(
                "/v1/queues/q/jobs",
                json!({"klass": "K", "backoff": backoff}),
            )
            .await;
        response.assert_problem(400, "bad_request");
    }
    let response = app
        .request(
            Method::PUT,
            "/v1/config/q-backoff",
            Some(json!({"value": "{\"initial\": -1}"})),
        )
        .await;
    assert_eq!(
        response.status,
        StatusCode::BAD_REQUEST,
        "{}",
        response.text
    );
}

// ---- throttles --------------------------------------------------------------------

async fn set_throttle(app: &TestApp, name: &str, body: Value) {
    let response = app
        .request(Method::PUT, &format!("/v1/throttles/{name}"), Some(body))
        .await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
}

#[tokio::test]
async fn a_full_throttle_holds_its_jobs_back_without_blocking_the_queue() {
    let app = TestApp::start().await;
    set_throttle(&app, "smtp", json!({"maximum": 1})).await;
    for (jid, priority) in [("t1", 30), ("t2", 20), ("free", 10)] {
        put(
            &app,
            "q",
            json!({"jid": jid, "klass": "K", "priority": priority,
                   "throttles": if jid == "free" { json!([]) } else { json!(["smtp"]) }}),
        )
        .await;
    }
    assert_eq!(pop(&app, "q", "w", 3).await, ["t1", "free"]);
    let throttle = app.get("/v1/throttles/smtp").await;
    assert_eq!(throttle.status, StatusCode::OK, "{}", throttle.text);
    assert_eq!(throttle.body["maximum"], 1);
    assert_eq!(throttle.body["running"], json!(["t1"]));
    assert_eq!(throttle.body["waiting"], json!(["t2"]));
    assert_eq!(job(&app, "t2").await["state"], "waiting");
    // The queue counts it as throttled, apart from the jobs ready to pop.
    let counts = app.get("/v1/queues/q").await.body;
    assert_eq!(
        (counts["throttled"].clone(), counts["waiting"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(app.get("/v1/queues").await.body[0]["throttled"], 1);
    assert!(pop(&app, "q", "w", 1).await.is_empty());

    complete(&app, "t1", "w", "q", json!({})).await;
    assert_eq!(
        app.get("/v1/throttles/smtp").await.body["waiting"],
        json!([])
    );
    assert_eq!(app.get("/v1/queues/q").await.body["throttled"], 0);
    assert_eq!(pop(&app, "q", "w", 1).await, ["t2"]);
}

#[tokio::test]
async fn slots_free_on_fail_retry_and_cancel() {
    let app = TestApp::start().await;
    set_throttle(&app, "x", json!({"maximum": 1})).await;
    for jid in ["a", "b", "c", "d"] {
        put(
            &app,
            "q",
            json!({"jid": jid, "klass": "K", "throttles": ["x"]}),
        )
        .await;
        app.clock.advance(1.0);
    }
    assert_eq!(pop(&app, "q", "w", 4).await, ["a"]);
    let fail = app
        .post(
            "/v1/jobs/a/fail",
            json!({"worker": "w", "group": "g", "message": "m"}),
        )
        .await;
    assert_eq!(fail.status, StatusCode::OK, "{}", fail.text);
    assert_eq!(pop(&app, "q", "w", 4).await, ["b"]);
    app.post(
        "/v1/jobs/b/retry",
        json!({"worker": "w", "queue": "q", "delay": 100}),
    )
    .await;
    assert_eq!(pop(&app, "q", "w", 4).await, ["c"]);
    let cancel = app.request(Method::DELETE, "/v1/jobs/c", None).await;
    assert!(cancel.status.is_success(), "{}", cancel.text);
    assert_eq!(pop(&app, "q", "w", 4).await, ["d"]);
}

#[tokio::test]
async fn a_waiting_long_poll_is_woken_when_a_slot_frees() {
    let app = TestApp::start().await;
    set_throttle(&app, "x", json!({"maximum": 1})).await;
    put(
        &app,
        "q",
        json!({"jid": "a", "klass": "K", "throttles": ["x"]}),
    )
    .await;
    put(
        &app,
        "q",
        json!({"jid": "b", "klass": "K", "throttles": ["x"]}),
    )
    .await;
    assert_eq!(pop(&app, "q", "w", 2).await.len(), 1);
    let held = app.get("/v1/throttles/x").await.body["running"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let waiter = {
        let router = app.router.clone();
        tokio::spawn(async move {
            send(
                &router,
                Method::POST,
                "/v1/queues/q/pop",
                json!({"worker": "w2", "wait": 10}),
                &[],
            )
            .await
        })
    };
    // The waiter registers, then the slot frees.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while app.state.leasing.waiting() == 0 {
        assert!(std::time::Instant::now() < deadline, "the pop never waited");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    complete(&app, &held, "w", "q", json!({})).await;
    let (status, jobs) = waiter.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(jids(&jobs).len(), 1, "{jobs}");
}

#[tokio::test]
async fn a_rate_limit_schedules_jobs_for_when_the_window_has_room() {
    let app = TestApp::start().await;
    set_throttle(&app, "api", json!({"rate": {"jobs": 2, "seconds": 10}})).await;
    for jid in ["a", "b", "c"] {
        put(
            &app,
            "q",
            json!({"jid": jid, "klass": "K", "throttles": ["api"]}),
        )
        .await;
    }
    assert_eq!(pop(&app, "q", "w", 3).await.len(), 2);
    let held = app.get("/v1/throttles/api").await.body;
    assert_eq!(held["recent"], 2);
    assert_eq!(held["rate"], json!({"jobs": 2, "seconds": 10}));
    app.clock.advance(9.0);
    assert!(pop(&app, "q", "w", 3).await.is_empty());
    app.clock.advance(1.0);
    assert_eq!(pop(&app, "q", "w", 3).await.len(), 1);
}

#[tokio::test]
async fn two_gateways_popping_at_once_never_exceed_a_maximum() {
    let app = TestApp::start().await;
    let other = second_gateway(&app).await;
    set_throttle(&app, "x", json!({"maximum": 3})).await;
    for i in 0..20 {
        put(
            &app,
            "q",
            json!({"jid": format!("j{i}"), "klass": "K", "throttles": ["x"]}),
        )
        .await;
    }
    let pops = (0..10).map(|i| {
        let router = if i % 2 == 0 {
            app.router.clone()
        } else {
            other.clone()
        };
        async move {
            send(
                &router,
                Method::POST,
                "/v1/queues/q/pop",
                json!({"worker": format!("w{i}"), "count": 2}),
                &[],
            )
            .await
        }
    });
    let leased: usize = futures_util::future::join_all(pops)
        .await
        .into_iter()
        .map(|(_, jobs)| jids(&jobs).len())
        .sum();
    assert_eq!(leased, 3);
    let throttle = app.get("/v1/throttles/x").await.body;
    assert_eq!(throttle["running"].as_array().unwrap().len(), 3);
    assert_eq!(throttle["waiting"].as_array().unwrap().len(), 17);
}

#[tokio::test]
async fn deleting_a_throttle_releases_its_waiting_jobs() {
    let app = TestApp::start().await;
    set_throttle(&app, "x", json!({"maximum": 1})).await;
    for jid in ["a", "b"] {
        put(
            &app,
            "q",
            json!({"jid": jid, "klass": "K", "throttles": ["x"]}),
        )
        .await;
    }
    assert_eq!(pop(&app, "q", "w", 2).await.len(), 1);
    let deleted = app.request(Method::DELETE, "/v1/throttles/x", None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    assert_eq!(pop(&app, "q", "w", 2).await.len(), 1);
    app.request(Method::DELETE, "/v1/throttles/x", None)
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn bad_throttle_limits_are_refused() {
    let app = TestApp::start().await;
    for body in [
        json!({}),
        json!({"maximum": 0}),
        json!({"rate": {"jobs": 0, "seconds": 1}}),
        json!({"rate": {"jobs": 1, "seconds": 0}}),
        json!({"maximum": 1, "extra": 1}),
    ] {
        app.request(Method::PUT, "/v1/throttles/x", Some(body))
            .await
            .assert_problem(400, "bad_request");
    }
    app.get("/v1/throttles/x")
        .await
        .assert_problem(404, "not_found");
}

// ---- what stock qless clients see ---------------------------------------------------

#[tokio::test]
async fn stock_clients_see_the_plain_job_object_and_counts() {
    let app = TestApp::start().await;
    set_throttle(&app, "x", json!({"maximum": 1})).await;
    for jid in ["a", "b"] {
        put(
            &app,
            "q",
            json!({"jid": jid, "klass": "K", "throttles": ["x"], "backoff": {"initial": 1}}),
        )
        .await;
    }
    let running = pop(&app, "q", "w", 2).await;
    assert_eq!(running.len(), 1);
    let (held, parked) = if running[0] == "a" {
        ("a", "b")
    } else {
        ("b", "a")
    };
    let beat = app
        .post(
            &format!("/v1/jobs/{held}/heartbeat"),
            json!({"worker": "w", "progress": 5}),
        )
        .await;
    assert_eq!(beat.status, StatusCode::OK, "{}", beat.text);
    // The script's own `get` (what qless clients call) keeps the spec's 17 keys.
    let raw = app
        .qless
        .call("get", app.clock.now(), &[held.to_owned()])
        .await
        .unwrap();
    let redis::Value::BulkString(bytes) = raw else {
        panic!("get answered {raw:?}")
    };
    let object: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(object.as_object().unwrap().len(), 17, "{object}");
    // The job held back by the throttle still reads `waiting`.
    let raw = app
        .qless
        .call("get", app.clock.now(), &[parked.to_owned()])
        .await
        .unwrap();
    let redis::Value::BulkString(bytes) = raw else {
        panic!("get answered {raw:?}")
    };
    let object: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(object["state"], "waiting");
}

// ---- a job's trace ------------------------------------------------------------------

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn a_put_traceparent_is_kept_with_the_job_and_handed_back_on_pop_and_get() {
    let app = TestApp::start().await;
    let (status, _) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs",
        json!({"jid": "traced", "klass": "K"}),
        &[("traceparent", TRACE)],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, popped) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/pop",
        json!({"worker": "w"}),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{popped}");
    assert_eq!(popped[0]["traceparent"], TRACE, "{popped}");
    let got = app.get("/v1/jobs/traced").await;
    assert_eq!(got.body["traceparent"], TRACE, "{}", got.text);
    // Stored in the job's hash, beside what stock clients read: their `get` keeps the
    // spec's 17 keys.
    let raw = app
        .qless
        .call("get", app.clock.now(), &["traced".to_owned()])
        .await
        .unwrap();
    let redis::Value::BulkString(bytes) = raw else {
        panic!("get answered {raw:?}")
    };
    let object: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(object.as_object().unwrap().len(), 17, "{object}");
}

#[tokio::test]
async fn every_job_of_a_batch_put_keeps_the_requests_traceparent() {
    let app = TestApp::start().await;
    let (status, body) = send(
        &app.router,
        Method::POST,
        "/v1/queues/q/jobs/batch",
        json!({"jobs": [{"jid": "a", "klass": "K"}, {"jid": "b", "klass": "K"}]}),
        &[("traceparent", TRACE)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for jid in ["a", "b"] {
        let got = app.get(&format!("/v1/jobs/{jid}")).await;
        assert_eq!(got.body["traceparent"], TRACE, "{}", got.text);
    }
}

#[tokio::test]
async fn a_malformed_traceparent_is_ignored_and_the_job_has_no_trace() {
    let app = TestApp::start().await;
    let bad = [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "garbage",
    ];
    for (i, value) in bad.iter().enumerate() {
        let jid = format!("j{i}");
        let (status, _) = send(
            &app.router,
            Method::POST,
            "/v1/queues/q/jobs",
            json!({"jid": jid, "klass": "K"}),
            &[("traceparent", value)],
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{value}");
        let got = app.get(&format!("/v1/jobs/{jid}")).await;
        assert!(
            got.body.get("traceparent").is_none(),
            "{value}: {}",
            got.text
        );
    }
    // A job put without one has none either.
    put(&app, "q", json!({"jid": "plain", "klass": "K"})).await;
    let popped = app
        .post("/v1/queues/q/pop", json!({"worker": "w", "count": 10}))
        .await;
    for job in popped.body.as_array().unwrap() {
        assert!(job.get("traceparent").is_none(), "{job}");
    }
}

#[tokio::test]
async fn the_script_refuses_a_malformed_traceparent_and_writes_nothing() {
    let app = TestApp::start().await;
    let now = app.clock.now();
    let args = |trace: &str| {
        ["", "q", "x", "K", "{}", "0", "traceparent", trace]
            .map(str::to_owned)
            .to_vec()
    };
    for bad in [
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
    ] {
        let err = app.qless.call("put", now, args(bad)).await.unwrap_err();
        assert!(err.to_string().contains("traceparent"), "{bad}: {err}");
        let got = app.qless.call("get", now, &["x".to_owned()]).await.unwrap();
        assert_eq!(got, redis::Value::Nil, "{bad}: nothing written");
    }
    app.qless.call("put", now, args(TRACE)).await.unwrap();
    let got = app.get("/v1/jobs/x").await;
    assert_eq!(got.body["traceparent"], TRACE, "{}", got.text);
}
