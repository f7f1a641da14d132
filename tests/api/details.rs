//! What problem details may say (`src/error.rs`): input echoed only as a short
//! prefix, Redis's own messages replaced by a stable word, and a readiness probe that
//! answers quickly when Redis is gone.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, header};
use serde_json::json;

use crate::support::TestApp;

/// The prefix a detail keeps of a long input.
const ECHOED: usize = qlessd::error::ECHO_LIMIT;

#[tokio::test]
async fn long_input_comes_back_as_a_short_prefix_in_the_detail() {
    let app = TestApp::start().await;
    let long = "z".repeat(250);
    let cases = [
        (
            "a jid that does not exist",
            app.get(&format!("/v1/jobs/{long}")).await,
            404,
        ),
        (
            "a string where a number belongs",
            app.post(
                "/v1/queues/q/jobs",
                json!({"klass": "K", "data": {}, "priority": long}),
            )
            .await,
            400,
        ),
        (
            "an unknown field name",
            app.post(
                "/v1/queues/q/jobs",
                json!({"klass": "K", "data": {}, long.clone(): 1}),
            )
            .await,
            400,
        ),
    ];
    for (what, response, status) in cases {
        assert_eq!(
            response.status.as_u16(),
            status,
            "{what}: {}",
            response.text
        );
        let detail = response.body["detail"].as_str().unwrap();
        assert!(
            !detail.contains(&"z".repeat(ECHOED + 1)),
            "{what}: {detail}"
        );
        assert!(
            detail.contains(&format!("{}…", "z".repeat(ECHOED - 2))),
            "{what}: {detail}"
        );
    }
}

#[tokio::test]
async fn a_redis_failure_is_answered_with_a_stable_word() {
    let mut app = TestApp::start().await;
    app.kill_redis();
    let put = app
        .post("/v1/queues/q/jobs", json!({"klass": "K", "data": {}}))
        .await;
    put.assert_problem(503, "unavailable");
    assert_eq!(put.body["detail"], "Redis is unavailable", "{}", put.text);
    let readyz = app.get("/readyz").await;
    readyz.assert_problem(503, "unavailable");
    assert_eq!(
        readyz.body["detail"], "Redis is unavailable",
        "{}",
        readyz.text
    );
    for response in [&put, &readyz] {
        assert!(!response.text.contains("redis.sock"), "{}", response.text);
        assert!(!response.text.contains("os error"), "{}", response.text);
    }
}

#[tokio::test]
async fn readyz_answers_within_a_second_when_redis_is_down() {
    let mut app = TestApp::start().await;
    assert_eq!(app.get("/readyz").await.status.as_u16(), 200);
    app.kill_redis();
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let started = Instant::now();
        let response = app.get("/readyz").await;
        let took = started.elapsed();
        response.assert_problem(503, "unavailable");
        slowest = slowest.max(took);
    }
    eprintln!("readyz with Redis down: slowest of 3 answers took {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "readyz took {slowest:?}");
}

#[tokio::test]
async fn a_bad_name_is_refused_with_a_detail_naming_the_field_and_the_rule() {
    let app = TestApp::start().await;
    let long = "q".repeat(257);
    let good = json!({"jid": "g", "klass": "K"});
    // (what, method, uri, body, what the detail must say)
    let cases = [
        (
            "a name in a body",
            Method::POST,
            "/v1/queues/q/jobs".to_owned(),
            Some(json!({"klass": "K", "tags": ["ok", "a b"]})),
            vec![
                "tags[1]",
                "tag contains the character ' ', which is not allowed in names",
            ],
        ),
        (
            "a name in a batch item",
            Method::POST,
            "/v1/queues/q/jobs/batch".to_owned(),
            Some(json!({"jobs": [good, {"jid": "a{b", "klass": "K"}]})),
            vec![
                "jobs[1].jid",
                "jid contains the character '{', which is not allowed in names",
            ],
        ),
        (
            "an empty name",
            Method::POST,
            "/v1/queues/q/pop".to_owned(),
            Some(json!({"worker": ""})),
            vec!["worker: worker must not be empty"],
        ),
        (
            "a long name in the path",
            Method::GET,
            format!("/v1/queues/{long}"),
            None,
            vec!["queue is longer than 256 characters"],
        ),
        (
            "a name in the path",
            Method::GET,
            "/v1/throttles/a%09b".to_owned(),
            None,
            vec!["throttle contains the character '\\t'"],
        ),
        (
            "a name in the query",
            Method::GET,
            "/v1/events?worker=a%20b".to_owned(),
            None,
            vec!["worker: worker contains the character ' '"],
        ),
        (
            "a name in a repeated query parameter",
            Method::GET,
            "/v1/jobs?jid=a&jid=%EF%BB%BFb".to_owned(),
            None,
            vec!["jid contains the character '\\u{feff}'"],
        ),
    ];
    for (what, method, uri, body, said) in cases {
        let response = app.request(method, &uri, body).await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        for words in said {
            assert!(detail.contains(words), "{what}: {detail}");
        }
    }
    let header = Request::builder()
        .method(Method::POST)
        .uri("/v1/queues/q/jobs")
        .header(header::CONTENT_TYPE, "application/json")
        .header("idempotency-key", "a b")
        .body(Body::from(json!({"klass": "K"}).to_string()))
        .unwrap();
    let response = app.send(header).await;
    response.assert_problem(400, "bad_request");
    let detail = response.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("idempotency key contains the character ' '"),
        "{detail}"
    );
    // Nothing was written by any of them.
    let queues = app.get("/v1/queues").await;
    assert_eq!(queues.body, json!([]), "{}", queues.text);
}

#[tokio::test]
async fn invisible_and_direction_changing_characters_are_refused_in_every_name() {
    let app = TestApp::start().await;
    // (method, uri, body, the character the detail names)
    let cases = [
        // A right-to-left override: `pay<RLO>cod.exe` shows as `payexe.doc`.
        (
            Method::POST,
            "/v1/queues/pay%E2%80%AEcod.exe/jobs",
            Some(json!({"klass": "K"})),
            r"'\u{202e}'",
        ),
        (
            Method::POST,
            "/v1/queues/q/jobs",
            Some(json!({"klass": "K", "tags": ["zero\u{200b}width"]})),
            r"'\u{200b}'",
        ),
        (
            Method::POST,
            "/v1/queues/q/jobs",
            Some(json!({"klass": "K", "jid": "\u{feff}j"})),
            r"'\u{feff}'",
        ),
        (
            Method::POST,
            "/v1/queues/q/jobs/batch",
            Some(
                json!({"jobs": [{"klass": "K", "jid": "ok"}, {"klass": "K", "throttles": ["t\u{e000}"]}]}),
            ),
            r"'\u{e000}'",
        ),
        (
            Method::POST,
            "/v1/queues/q/pop",
            Some(json!({"worker": "w\u{fffe}"})),
            r"'\u{fffe}'",
        ),
        (Method::GET, "/v1/events?worker=w%CD%B8", None, r"'\u{378}'"),
        (
            Method::GET,
            "/v1/failures/%CC%81group",
            None,
            r"starts with the combining mark '\u{301}'",
        ),
        (
            Method::PUT,
            "/v1/config/a%E2%81%A6b",
            Some(json!({"value": 1})),
            r"'\u{2066}'",
        ),
        (Method::GET, "/v1/jobs/a%E2%80%A9b", None, r"'\u{2029}'"),
    ];
    for (method, uri, body, said) in cases {
        let response = app.request(method, uri, body).await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(detail.contains(said), "{uri}: {detail}");
        assert!(
            !detail.contains('\u{202e}'),
            "the detail holds the raw character"
        );
    }
    // Nothing was written by any of them; names in scripts the user reads are fine.
    let queues = app.get("/v1/queues").await;
    assert_eq!(queues.body, json!([]), "{}", queues.text);
    let put = app
        .post(
            "/v1/queues/%D7%AA%D7%95%D7%A8/jobs",
            json!({"klass": "K", "jid": "cafe\u{301}", "tags": ["क्षत्रिय"]}),
        )
        .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
}
