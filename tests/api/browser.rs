//! What a web page can make a visitor's browser do to qlessd: requests it could forge
//! are refused (`src/browser.rs`), configured CORS origins are served.

use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::json;

use crate::support::{TestApp, TestResponse};

const DASHBOARD: &str = "https://dash.example";

/// Sends `method uri` with these headers and, when `json` says so, a JSON body.
async fn send(
    app: &TestApp,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> TestResponse {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    app.send(request.body(Body::from(body.to_owned())).unwrap())
        .await
}

async fn paused(app: &TestApp) -> bool {
    app.get("/v1/queues/q").await.body["paused"] == json!(true)
}

#[tokio::test]
async fn requests_a_web_page_could_forge_change_nothing() {
    let app = TestApp::start().await;
    app.post("/v1/queues/q/jobs", json!({"klass": "K", "data": {}}))
        .await;
    let json = ("content-type", "application/json");
    type Case<'a> = (
        &'a str,
        Method,
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a str,
        u16,
        &'a str,
    );
    let cases: &[Case] = &[
        (
            "a bodiless POST without a type from another origin",
            Method::POST,
            "/v1/queues/q/pause",
            &[
                ("origin", "https://evil.example"),
                ("host", "127.0.0.1:5858"),
            ],
            "",
            403,
            "forbidden",
        ),
        (
            "a POST with a body but without a type",
            Method::POST,
            "/v1/queues/q/pause",
            &[],
            "{}",
            415,
            "unsupported_media_type",
        ),
        (
            "a bodiless text/plain POST",
            Method::POST,
            "/v1/queues/q/pause",
            &[("content-type", "text/plain")],
            "",
            415,
            "unsupported_media_type",
        ),
        (
            "a form post",
            Method::POST,
            "/v1/queues/q/pause",
            &[("content-type", "application/x-www-form-urlencoded")],
            "a=b",
            415,
            "unsupported_media_type",
        ),
        (
            "a multipart post",
            Method::POST,
            "/v1/queues/q/pause",
            &[("content-type", "multipart/form-data; boundary=x")],
            "",
            415,
            "unsupported_media_type",
        ),
        (
            "a text/plain DELETE",
            Method::DELETE,
            "/v1/queues/q",
            &[("content-type", "text/plain")],
            "",
            415,
            "unsupported_media_type",
        ),
        (
            "JSON from a foreign origin",
            Method::POST,
            "/v1/queues/q/pause",
            &[
                json,
                ("origin", "https://evil.example"),
                ("host", "127.0.0.1:5858"),
            ],
            "",
            403,
            "forbidden",
        ),
        (
            "JSON from an opaque origin",
            Method::POST,
            "/v1/queues/q/pause",
            &[json, ("origin", "null")],
            "",
            403,
            "forbidden",
        ),
        (
            "JSON from the same host on another port",
            Method::POST,
            "/v1/queues/q/pause",
            &[
                json,
                ("origin", "http://127.0.0.1:8080"),
                ("host", "127.0.0.1:5858"),
            ],
            "",
            403,
            "forbidden",
        ),
        (
            "a rebound host name",
            Method::POST,
            "/v1/queues/q/pause",
            &[
                json,
                ("host", "attacker.example:5858"),
                ("origin", "http://attacker.example:5858"),
            ],
            "",
            421,
            "misdirected_request",
        ),
        (
            "a rebound host name reading",
            Method::GET,
            "/v1/queues/q",
            &[("host", "attacker.example")],
            "",
            421,
            "misdirected_request",
        ),
    ];
    for (what, method, uri, headers, body, status, code) in cases {
        let response = send(&app, method.clone(), uri, headers, body).await;
        assert_eq!(
            response.status.as_u16(),
            *status,
            "{what}: {}",
            response.text
        );
        response.assert_problem(*status, code);
        assert!(!paused(&app).await, "{what} paused the queue");
        assert!(response.headers.contains_key("x-request-id"), "{what}");
    }
    let refused = send(&app, Method::POST, "/v1/queues/q/pause", &[], "{}").await;
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("Content-Type: application/json"),
        "{detail}"
    );
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 1);
}

#[tokio::test]
async fn a_write_without_a_body_needs_no_content_type() {
    // What clients generated from the OpenAPI document send for an operation without
    // a request body: no Content-Type at all.
    let app = TestApp::start().await;
    app.post("/v1/queues/q/jobs", json!({"jid": "j", "klass": "K"}))
        .await;
    let host = ("host", "127.0.0.1:5858");
    let paused_now = send(&app, Method::POST, "/v1/queues/q/pause", &[host], "").await;
    assert!(paused_now.status.is_success(), "{}", paused_now.text);
    assert!(paused(&app).await);
    // From the server's own pages (their Origin is its own), too.
    let own = [host, ("origin", "http://127.0.0.1:5858")];
    let resumed = send(&app, Method::POST, "/v1/queues/q/unpause", &own, "").await;
    assert!(resumed.status.is_success(), "{}", resumed.text);
    assert!(!paused(&app).await);
    let cancelled = send(&app, Method::DELETE, "/v1/jobs/j", &[host], "").await;
    assert!(cancelled.status.is_success(), "{}", cancelled.text);
    assert_eq!(app.get("/v1/queues/q").await.body["waiting"], 0);
    // An operation that takes a body still needs it, as JSON.
    let put = send(&app, Method::POST, "/v1/queues/q/jobs", &[host], "").await;
    put.assert_problem(415, "unsupported_media_type");
}

#[tokio::test]
async fn same_origin_and_configured_origins_may_change_things() {
    let app = TestApp::start_configured(None, |settings| {
        settings.cors_origins = vec![DASHBOARD.to_owned()];
    })
    .await;
    let json = ("content-type", "application/json; charset=utf-8");
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("a client that is not a browser", &[json]),
        (
            "the server's own page",
            &[
                json,
                ("origin", "http://127.0.0.1:5858"),
                ("host", "127.0.0.1:5858"),
            ],
        ),
        (
            "the server's own page by name",
            &[
                json,
                ("origin", "http://localhost:5858"),
                ("host", "localhost:5858"),
            ],
        ),
        (
            "the server's own page over IPv6",
            &[
                json,
                ("origin", "http://[::1]:5858"),
                ("host", "[::1]:5858"),
            ],
        ),
        (
            "the configured dashboard",
            &[json, ("origin", DASHBOARD), ("host", "127.0.0.1:5858")],
        ),
    ];
    for (what, headers) in cases {
        let response = send(&app, Method::POST, "/v1/queues/q/pause", headers, "").await;
        assert_eq!(response.status.as_u16(), 204, "{what}: {}", response.text);
        assert!(paused(&app).await, "{what}");
        let response = send(&app, Method::POST, "/v1/queues/q/unpause", headers, "").await;
        assert_eq!(response.status.as_u16(), 204, "{what}: {}", response.text);
    }
    let response = send(
        &app,
        Method::POST,
        "/v1/queues/q/pause",
        &[json, ("origin", DASHBOARD)],
        "",
    )
    .await;
    assert_eq!(
        response.headers.get("access-control-allow-origin").unwrap(),
        DASHBOARD
    );
}

#[tokio::test]
async fn preflights_are_answered_for_configured_origins_only() {
    let app = TestApp::start_configured(None, |settings| {
        settings.cors_origins = vec![DASHBOARD.to_owned(), "http://other.example:8080".to_owned()];
    })
    .await;
    let preflight = |origin: &'static str| {
        [
            ("origin", origin),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ]
    };
    let allowed = send(
        &app,
        Method::OPTIONS,
        "/v1/queues/q/pause",
        &preflight(DASHBOARD),
        "",
    )
    .await;
    assert!(allowed.status.is_success(), "{}", allowed.text);
    assert_eq!(allowed.headers["access-control-allow-origin"], DASHBOARD);
    let methods = allowed.headers["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(methods.contains("POST"), "{methods}");
    let headers = allowed.headers["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(headers.contains("content-type"), "{headers}");

    let foreign = send(
        &app,
        Method::OPTIONS,
        "/v1/queues/q/pause",
        &preflight("https://evil.example"),
        "",
    )
    .await;
    assert!(
        !foreign.headers.contains_key("access-control-allow-origin"),
        "{:?}",
        foreign.headers
    );

    let plain = TestApp::start().await;
    let off = send(
        &plain,
        Method::OPTIONS,
        "/v1/queues/q/pause",
        &preflight(DASHBOARD),
        "",
    )
    .await;
    assert!(
        !off.headers.contains_key("access-control-allow-origin"),
        "{:?}",
        off.headers
    );
    assert!(!off.status.is_success(), "{}", off.status);
}

#[tokio::test]
async fn reads_are_unaffected_by_origin_and_content_type() {
    let app = TestApp::start().await;
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("no headers", &[]),
        ("a foreign origin", &[("origin", "https://evil.example")]),
        ("a text/plain type", &[("content-type", "text/plain")]),
        ("a loopback host", &[("host", "localhost:5858")]),
    ];
    for (what, headers) in cases {
        for uri in ["/v1/queues", "/healthz", "/v1/queues/q"] {
            let response = send(&app, Method::GET, uri, headers, "").await;
            assert_eq!(
                response.status.as_u16(),
                200,
                "{what} {uri}: {}",
                response.text
            );
        }
    }
}

#[tokio::test]
async fn any_host_is_answered_when_not_listening_on_loopback() {
    let app = TestApp::start_configured(None, |settings| {
        settings.listen = "0.0.0.0:5858".parse().unwrap();
    })
    .await;
    let response = send(
        &app,
        Method::GET,
        "/v1/queues",
        &[("host", "queues.internal:5858")],
        "",
    )
    .await;
    assert_eq!(response.status.as_u16(), 200, "{}", response.text);
    let response = send(
        &app,
        Method::POST,
        "/v1/queues/q/pause",
        &[
            ("host", "queues.internal:5858"),
            ("content-type", "application/json"),
        ],
        "",
    )
    .await;
    assert_eq!(response.status.as_u16(), 204, "{}", response.text);
}

#[test]
fn cors_origins_are_repeated_or_separated_by_commas() {
    use clap::Parser;
    let settings = qlessd::settings::Settings::try_parse_from([
        "qlessd",
        "--cors-origin",
        "https://a.example,http://b.example:8080/",
        "--cors-origin",
        "https://C.example",
    ])
    .unwrap();
    assert_eq!(
        settings.cors_origins,
        [
            "https://a.example",
            "http://b.example:8080",
            "https://c.example"
        ]
    );
    for bad in ["a.example", "https://a.example/path", "ftp://a.example"] {
        assert!(
            qlessd::settings::Settings::try_parse_from(["qlessd", "--cors-origin", bad]).is_err(),
            "{bad} accepted"
        );
    }
}
