//! `pop` on complete, fail and retry (single and batch): a worker ends its job and
//! leases the next ones in one request.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

async fn put(app: &TestApp, queue: &str, jid: &str) {
    let response = app
        .post(
            &format!("/v1/queues/{queue}/jobs"),
            json!({"jid": jid, "klass": "K"}),
        )
        .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
}

async fn lease(app: &TestApp, queue: &str, worker: &str, count: u32) -> Vec<String> {
    let response = app
        .post(
            &format!("/v1/queues/{queue}/pop"),
            json!({"worker": worker, "count": count}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    jids(&response.body)
}

fn jids(body: &Value) -> Vec<String> {
    let mut jids: Vec<String> = body
        .as_array()
        .expect("a list of jobs")
        .iter()
        .map(|job| job["jid"].as_str().unwrap().to_owned())
        .collect();
    jids.sort();
    jids
}

async fn job_state(app: &TestApp, jid: &str) -> Value {
    app.get(&format!("/v1/jobs/{jid}")).await.body["state"].clone()
}

#[tokio::test]
async fn complete_with_pop_answers_the_next_jobs_leased_to_the_worker() {
    let app = TestApp::start().await;
    for jid in ["a", "b", "c"] {
        put(&app, "q", jid).await;
    }
    let first = lease(&app, "q", "w", 1).await;
    let response = app
        .post(
            &format!("/v1/jobs/{}/complete", first[0]),
            json!({"worker": "w", "queue": "q", "pop": {"count": 5}}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body["state"], "complete");
    let popped = jids(&response.body["popped"]);
    assert_eq!(popped.len(), 2, "{}", response.text);
    for job in response.body["popped"].as_array().unwrap() {
        assert_eq!(job["worker"], "w");
        assert_eq!(job["state"], "running");
    }
    assert_eq!(job_state(&app, &first[0]).await, "complete");
}

#[tokio::test]
async fn complete_without_pop_has_no_popped_field() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    lease(&app, "q", "w", 1).await;
    let response = app
        .post("/v1/jobs/a/complete", json!({"worker": "w", "queue": "q"}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"state": "complete"}));
}

#[tokio::test]
async fn a_completion_refused_for_a_lost_lock_leases_nothing() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    put(&app, "q", "b").await;
    let held = lease(&app, "q", "w", 1).await;
    let response = app
        .post(
            &format!("/v1/jobs/{}/complete", held[0]),
            json!({"worker": "thief", "queue": "q", "pop": {"count": 1}}),
        )
        .await;
    response.assert_problem(409, "lock_lost");
    let other = if held[0] == "a" { "b" } else { "a" };
    assert_eq!(job_state(&app, other).await, "waiting");
}

#[tokio::test]
async fn a_bad_pop_is_refused_before_anything_is_completed() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    lease(&app, "q", "w", 1).await;
    for pop in [
        json!({"count": 0}),
        json!({"count": 1001}),
        json!({"wait": -1}),
        json!({"count": 1, "queue": "q"}),
    ] {
        let response = app
            .post(
                "/v1/jobs/a/complete",
                json!({"worker": "w", "queue": "q", "pop": pop}),
            )
            .await;
        assert_eq!(
            response.status,
            StatusCode::BAD_REQUEST,
            "{pop}: {}",
            response.text
        );
    }
    assert_eq!(job_state(&app, "a").await, "running");
}

#[tokio::test]
async fn complete_with_pop_and_wait_long_polls_for_the_next_job() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    lease(&app, "q", "w", 1).await;
    let router_app = app.router.clone();
    let waiter = tokio::spawn(async move {
        use axum::body::Body;
        use http_body_util::BodyExt;
        use tower::ServiceExt;
        let request = axum::http::Request::post("/v1/jobs/a/complete")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"worker": "w", "queue": "q", "pop": {"count": 1, "wait": 10}}).to_string(),
            ))
            .unwrap();
        let response = router_app.oneshot(request).await.unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while app.state.leasing.waiting() != 1 {
        assert!(
            Instant::now() < deadline,
            "the completion never started waiting"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(job_state(&app, "a").await, "complete");
    put(&app, "q", "b").await;
    let body = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiting completion answered")
        .unwrap();
    assert_eq!(body["state"], "complete");
    assert_eq!(jids(&body["popped"]), ["b"]);
}

#[tokio::test]
async fn fail_with_pop_leases_from_the_queue_the_job_ran_in() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    put(&app, "q", "b").await;
    let held = lease(&app, "q", "w", 1).await;
    let response = app
        .post(
            &format!("/v1/jobs/{}/fail", held[0]),
            json!({"worker": "w", "group": "g", "message": "m", "pop": {}}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body["state"], "failed");
    let other = if held[0] == "a" { "b" } else { "a" };
    assert_eq!(jids(&response.body["popped"]), [other]);
}

#[tokio::test]
async fn retry_with_pop_answers_remaining_and_popped() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    lease(&app, "q", "w", 1).await;
    let response = app
        .post(
            "/v1/jobs/a/retry",
            json!({"worker": "w", "queue": "q", "delay": 60, "pop": {"count": 1}}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body["remaining"], 4);
    assert_eq!(response.body["popped"], json!([]));
    assert_eq!(job_state(&app, "a").await, "scheduled");
}

#[tokio::test]
async fn batch_complete_with_pop_leases_after_completing_every_job() {
    let app = TestApp::start().await;
    for jid in ["a", "b", "c", "d"] {
        put(&app, "q", jid).await;
    }
    let held = lease(&app, "q", "w", 2).await;
    let jobs: Vec<Value> = held
        .iter()
        .map(|jid| json!({"jid": jid, "worker": "w", "queue": "q"}))
        .collect();
    let response = app
        .post(
            "/v1/jobs/complete",
            json!({"jobs": jobs, "pop": {"count": 10}}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    for outcome in response.body["jobs"].as_array().unwrap() {
        assert_eq!(outcome["state"], "complete", "{}", response.text);
    }
    let mut rest: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|s| s.to_string())
        .filter(|jid| !held.contains(jid))
        .collect();
    rest.sort();
    assert_eq!(jids(&response.body["popped"]), rest);
}

#[tokio::test]
async fn batch_complete_with_pop_leases_nothing_when_a_job_was_refused() {
    let app = TestApp::start().await;
    for jid in ["a", "b", "c"] {
        put(&app, "q", jid).await;
    }
    let held = lease(&app, "q", "w", 1).await;
    let response = app
        .post(
            "/v1/jobs/complete",
            json!({"jobs": [
                {"jid": held[0], "worker": "w", "queue": "q"},
                {"jid": "missing", "worker": "w", "queue": "q"},
            ], "pop": {"count": 10}}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body["jobs"][0]["state"], "complete");
    assert_eq!(response.body["jobs"][1]["problem"]["status"], 404);
    assert_eq!(response.body["popped"], json!([]));
    assert_eq!(lease(&app, "q", "w", 10).await.len(), 2);
}

#[tokio::test]
async fn batch_complete_with_pop_needs_one_worker_and_one_queue() {
    let app = TestApp::start().await;
    put(&app, "q", "a").await;
    put(&app, "q", "b").await;
    lease(&app, "q", "w", 2).await;
    for (second_worker, second_queue) in [("w2", "q"), ("w", "q2")] {
        let response = app
            .post(
                "/v1/jobs/complete",
                json!({"jobs": [
                    {"jid": "a", "worker": "w", "queue": "q"},
                    {"jid": "b", "worker": second_worker, "queue": second_queue},
                ], "pop": {"count": 1}}),
            )
            .await;
        response.assert_problem(400, "bad_request");
    }
    assert_eq!(job_state(&app, "a").await, "running");
}
