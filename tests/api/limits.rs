//! `--max-job-size`: one limit on a job's data, on every path that writes it.

use axum::http::Method;
use qlessd::core::PutArgs;
use qlessd::server::{self, AppState, Limits};
use qlessd::settings::Settings;
use serde_json::{Value, json};

use crate::support::TestApp;

/// The limit the tests run with: small, so bodies stay well under the body limit.
const MAX: u64 = 64;

/// An app whose `--max-job-size` is [`MAX`], holding a running job `run` (worker `w`,
/// queue `q`) and a recurring job `rec`.
async fn app() -> TestApp {
    let mut app = TestApp::start().await;
    let mut limits = Limits::from_settings(&Settings::for_redis(app.redis.url()));
    limits.max_job_size = MAX;
    app.state = AppState::new(app.qless.clone(), app.clock.clone(), limits);
    app.router = server::router(app.state.clone());
    let job = PutArgs {
        queue: "q".into(),
        jid: "run".into(),
        klass: "K".into(),
        data: r#"{"n":1}"#.into(),
        ..Default::default()
    };
    app.qless.put(app.clock.now(), job).await.unwrap();
    app.qless.pop(app.clock.now(), "q", "w", 1).await.unwrap();
    let response = app
        .post(
            "/v1/queues/q/recurring",
            json!({"jid": "rec", "klass": "K", "interval": 60, "offset": 600}),
        )
        .await;
    assert_eq!(response.status, 201, "{}", response.text);
    app
}

/// Data whose JSON text is exactly `size` bytes: a string of `size - 2` characters.
fn data_of(size: u64) -> Value {
    Value::String("x".repeat(size as usize - 2))
}

/// Every request that writes job data, with `data` in its place.
fn writes(data: &Value) -> Vec<(Method, &'static str, Value)> {
    vec![
        (
            Method::POST,
            "/v1/queues/q/jobs",
            json!({"jid": "new", "klass": "K", "data": data}),
        ),
        (
            Method::POST,
            "/v1/queues/q/jobs/batch",
            json!({"jobs": [{"jid": "new", "klass": "K"}, {"klass": "K", "data": data}]}),
        ),
        (
            Method::POST,
            "/v1/jobs/run/requeue",
            json!({"queue": "q2", "data": data}),
        ),
        (
            Method::POST,
            "/v1/jobs/run/heartbeat",
            json!({"worker": "w", "data": data}),
        ),
        (
            Method::POST,
            "/v1/jobs/heartbeat",
            json!({"jobs": [{"jid": "run", "worker": "w", "data": data}]}),
        ),
        (
            Method::POST,
            "/v1/jobs/run/complete",
            json!({"worker": "w", "queue": "q", "data": data}),
        ),
        (
            Method::POST,
            "/v1/jobs/complete",
            json!({"jobs": [{"jid": "run", "worker": "w", "queue": "q", "data": data}]}),
        ),
        (
            Method::POST,
            "/v1/jobs/run/fail",
            json!({"worker": "w", "group": "g", "message": "m", "data": data}),
        ),
        (
            Method::POST,
            "/v1/queues/q/recurring",
            json!({"jid": "rec2", "klass": "K", "interval": 60, "data": data}),
        ),
        (Method::PATCH, "/v1/recurring/rec", json!({"data": data})),
    ]
}

#[tokio::test]
async fn data_over_the_limit_is_a_413_naming_the_limit_and_writes_nothing() {
    let app = app().await;
    for (method, uri, body) in writes(&data_of(MAX + 1)) {
        let response = app.request(method.clone(), uri, Some(body)).await;
        response.assert_problem(413, "payload_too_large");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(
            detail.contains(&MAX.to_string()) && detail.contains("--max-job-size"),
            "{method} {uri}: {detail}"
        );
    }
    let job = app
        .qless
        .get(app.clock.now(), "run")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (job.state.as_str(), job.queue.as_str(), job.data.get()),
        ("running", "q", r#"{"n":1}"#)
    );
    for jid in ["new", "rec2"] {
        assert!(app.qless.get(app.clock.now(), jid).await.unwrap().is_none());
    }
    assert!(
        app.qless
            .recur_get(app.clock.now(), "rec2")
            .await
            .unwrap()
            .is_none()
    );
    let template = app
        .qless
        .recur_get(app.clock.now(), "rec")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(template.data.get(), "{}");
}

#[tokio::test]
async fn data_of_exactly_the_limit_is_written_on_every_path() {
    let data = data_of(MAX);
    for (method, uri, body) in writes(&data) {
        // A fresh app each time: completing or failing the running job ends it.
        let app = app().await;
        let response = app.request(method.clone(), uri, Some(body)).await;
        assert!(
            response.status.is_success(),
            "{method} {uri}: {} {}",
            response.status,
            response.text
        );
        let outcomes = response.body["jobs"].as_array();
        for outcome in outcomes.into_iter().flatten() {
            assert!(
                outcome.get("problem").is_none(),
                "{method} {uri}: {outcome}"
            );
        }
    }
}

#[tokio::test]
async fn log_data_and_log_or_failure_messages_over_the_limit_are_a_413_and_write_nothing() {
    let app = app().await;
    let history = |app: &TestApp| {
        let mut conn = app.redis.client().get_connection().unwrap();
        redis::cmd("LRANGE")
            .arg("ql:j:run-history")
            .arg(0)
            .arg(-1)
            .query::<Vec<String>>(&mut conn)
            .unwrap()
    };
    let before = history(&app);
    let long = "m".repeat(MAX as usize + 1);
    let exactly = "m".repeat(MAX as usize);
    for (uri, body) in [
        ("/v1/jobs/run/log", json!({"message": long})),
        (
            "/v1/jobs/run/log",
            json!({"message": "m", "data": {"x": data_of(MAX)}}),
        ),
        (
            "/v1/jobs/run/fail",
            json!({"worker": "w", "group": "g", "message": long}),
        ),
        (
            "/v1/jobs/run/retry",
            json!({"worker": "w", "queue": "q", "group": "g", "message": long}),
        ),
    ] {
        let response = app.post(uri, body).await;
        response.assert_problem(413, "payload_too_large");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(
            detail.contains(&MAX.to_string()) && detail.contains("--max-job-size"),
            "{uri}: {detail}"
        );
    }
    assert_eq!(
        history(&app),
        before,
        "a refused log or failure wrote history"
    );
    let job = app
        .qless
        .get(app.clock.now(), "run")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((job.state.as_str(), job.worker.as_str()), ("running", "w"));

    // At the limit, both are written.
    let response = app
        .post("/v1/jobs/run/log", json!({"message": exactly}))
        .await;
    assert_eq!(response.status, 204, "{}", response.text);
    let response = app
        .post(
            "/v1/jobs/run/fail",
            json!({"worker": "w", "group": "g", "message": exactly}),
        )
        .await;
    assert_eq!(response.status, 200, "{}", response.text);
}

#[test]
fn the_limit_defaults_to_one_mebibyte_and_must_be_positive() {
    use clap::Parser;
    assert_eq!(Settings::parse_from(["qlessd"]).max_job_size, 1024 * 1024);
    let set = Settings::try_parse_from(["qlessd", "--max-job-size", "4096"]).unwrap();
    assert_eq!(set.max_job_size, 4096);
    for bad in ["0", "-1", "big"] {
        assert!(Settings::try_parse_from(["qlessd", "--max-job-size", bad]).is_err());
    }
}
