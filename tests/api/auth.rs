//! Authentication and authorization through the real router: who gets a 401, who a
//! 403, who gets through; and the route table against the OpenAPI document.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tower::ServiceExt;

use crate::support::{TestApp, TestResponse};

/// The namespace every app of these tests serves.
const NAMESPACE: &str = "prod";

/// A token of the test file: (name, scopes, namespaces); its secret is
/// `secret-<name>`.
type TestToken = (
    &'static str,
    &'static [&'static str],
    Option<&'static [&'static str]>,
);

const TOKENS: &[TestToken] = &[
    ("reader", &["read"], None),
    ("producer", &["produce"], None),
    ("worker", &["work"], None),
    ("ops", &["admin"], None),
    ("pipeline", &["produce", "work"], Some(&["prod", "staging"])),
    ("elsewhere", &["admin"], Some(&["billing", "shipping"])),
];

fn hex_sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn auth_file() -> String {
    let mut file = String::new();
    for (name, scopes, namespaces) in TOKENS {
        file.push_str(&format!(
            "[[tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = {scopes:?}\n",
            hex_sha256(&format!("secret-{name}"))
        ));
        if let Some(namespaces) = namespaces {
            file.push_str(&format!("namespaces = {namespaces:?}\n"));
        }
    }
    file
}

async fn start() -> TestApp {
    TestApp::start_with_auth(Some(NAMESPACE), &auth_file()).await
}

/// Sends `method uri` with `authorization` as the header (none when `None`).
async fn call(
    app: &TestApp,
    authorization: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> TestResponse {
    let mut request = Request::builder().method(method.clone()).uri(uri);
    if let Some(value) = authorization {
        // From bytes, so a test can send what `to_str` refuses (obs-text).
        let value = header::HeaderValue::from_bytes(value.as_bytes()).unwrap();
        request = request.header(header::AUTHORIZATION, value);
    }
    // Every write says it is JSON (the browser checks follow the token check).
    if method != Method::GET {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let body = body.map_or_else(Body::empty, |json| Body::from(json.to_string()));
    app.send(request.body(body).unwrap()).await
}

async fn as_token(
    app: &TestApp,
    token: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> TestResponse {
    call(
        app,
        Some(&format!("Bearer secret-{token}")),
        method,
        uri,
        body,
    )
    .await
}

fn assert_unauthorized(response: &TestResponse) {
    response.assert_problem(401, "unauthorized");
    let challenge = response.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
}

#[tokio::test]
async fn without_a_token_a_write_hears_401_before_anything_else_about_it() {
    let app = start().await;
    // A body that is not JSON, and a write from a foreign page: neither is told more
    // than that it needs a token.
    let plain = Request::post("/v1/queues/q/jobs")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    assert_unauthorized(&app.send(plain).await);
    let foreign = Request::post("/v1/queues/q/pause")
        .header("origin", "https://evil.example")
        .body(Body::empty())
        .unwrap();
    assert_unauthorized(&app.send(foreign).await);
    // With the token, the same requests are refused for what they are.
    let plain = Request::post("/v1/queues/q/jobs")
        .header(header::AUTHORIZATION, "Bearer secret-ops")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    app.send(plain)
        .await
        .assert_problem(415, "unsupported_media_type");
}

#[tokio::test]
async fn missing_unknown_and_malformed_tokens_are_401s_with_a_bearer_challenge() {
    let app = start().await;
    let headers = [
        None,
        Some("Bearer not-a-known-secret"),
        Some("Bearer"),
        Some("Bearer "),
        Some("Basic c2VjcmV0LW9wcw=="),
        Some("secret-ops"),
        Some("Bearer secret-ops trailing"),
        Some("Bearer secret-\u{e9}ops"),
    ];
    for header in headers {
        let response = call(&app, header, Method::GET, "/v1/queues", None).await;
        assert_unauthorized(&response);
        assert!(
            !response.text.contains("secret"),
            "{header:?}: {}",
            response.text
        );
    }
    // The scheme is case-insensitive (RFC 9110).
    let response = call(
        &app,
        Some("bearer secret-ops"),
        Method::GET,
        "/v1/queues",
        None,
    )
    .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
}

#[tokio::test]
async fn each_scope_reaches_its_routes_and_no_others() {
    let app = start().await;
    let job = |jid: &str| json!({"jid": jid, "klass": "K"});
    // (token, method, uri, body, allowed): allowed means neither 401 nor 403.
    let cases: Vec<(&str, Method, &str, Option<Value>, bool)> = vec![
        (
            "producer",
            Method::POST,
            "/v1/queues/q/jobs",
            Some(job("p1")),
            true,
        ),
        (
            "producer",
            Method::POST,
            "/v1/queues/b/jobs/batch",
            Some(json!({"jobs": [job("p2")]})),
            true,
        ),
        (
            "producer",
            Method::POST,
            "/v1/queues/q/pop",
            Some(json!({"worker": "w"})),
            false,
        ),
        ("producer", Method::GET, "/v1/queues", None, false),
        (
            "producer",
            Method::PUT,
            "/v1/config/heartbeat",
            Some(json!({"value": 60})),
            false,
        ),
        ("reader", Method::GET, "/v1/queues", None, true),
        ("reader", Method::GET, "/v1/jobs/p1", None, true),
        ("reader", Method::GET, "/v1/workers", None, true),
        ("reader", Method::GET, "/v1/config", None, true),
        (
            "reader",
            Method::POST,
            "/v1/queues/q/jobs",
            Some(job("r1")),
            false,
        ),
        ("reader", Method::POST, "/v1/queues/q/pause", None, false),
        (
            "reader",
            Method::POST,
            "/v1/pop",
            Some(json!({"worker": "w", "queues": [{"name": "q"}]})),
            false,
        ),
        (
            "worker",
            Method::POST,
            "/v1/queues/q/pop",
            Some(json!({"worker": "w"})),
            true,
        ),
        (
            "worker",
            Method::POST,
            "/v1/jobs/p1/heartbeat",
            Some(json!({"worker": "w"})),
            true,
        ),
        (
            "worker",
            Method::POST,
            "/v1/jobs/p1/log",
            Some(json!({"message": "half"})),
            true,
        ),
        (
            "worker",
            Method::POST,
            "/v1/jobs/p1/complete",
            Some(json!({"worker": "w", "queue": "q"})),
            true,
        ),
        (
            "worker",
            Method::POST,
            "/v1/queues/q/jobs",
            Some(job("w1")),
            false,
        ),
        ("worker", Method::DELETE, "/v1/jobs/p2", None, false),
        (
            "worker",
            Method::PUT,
            "/v1/jobs/p2/priority",
            Some(json!({"priority": 5})),
            false,
        ),
        (
            "pipeline",
            Method::POST,
            "/v1/queues/q/jobs",
            Some(job("x1")),
            true,
        ),
        (
            "pipeline",
            Method::POST,
            "/v1/pop",
            Some(json!({"worker": "w", "queues": [{"name": "q"}]})),
            true,
        ),
        ("pipeline", Method::GET, "/v1/jobs/x1", None, false),
        ("ops", Method::GET, "/v1/queues", None, true),
        (
            "ops",
            Method::POST,
            "/v1/queues/q/jobs",
            Some(job("o1")),
            true,
        ),
        (
            "ops",
            Method::POST,
            "/v1/queues/q/pop",
            Some(json!({"worker": "w"})),
            true,
        ),
        ("ops", Method::POST, "/v1/queues/q/pause", None, true),
        (
            "ops",
            Method::PUT,
            "/v1/config/heartbeat",
            Some(json!({"value": 60})),
            true,
        ),
        ("ops", Method::DELETE, "/v1/jobs/p2", None, true),
        ("elsewhere", Method::GET, "/v1/queues", None, false),
        (
            "elsewhere",
            Method::POST,
            "/v1/queues/q/jobs",
            Some(job("e1")),
            false,
        ),
    ];
    for (token, method, uri, body, allowed) in cases {
        let what = format!("{token} {method} {uri}");
        let response = as_token(&app, token, method, uri, body).await;
        if allowed {
            assert!(
                response.status.is_success(),
                "{what}: {} {}",
                response.status,
                response.text
            );
        } else {
            response.assert_problem(403, "forbidden");
            assert!(
                response.body["detail"].as_str().unwrap().contains(token),
                "{what}"
            );
        }
    }
}

#[tokio::test]
async fn a_refused_request_changes_nothing() {
    let app = start().await;
    let put = json!({"jid": "j", "klass": "K"});
    let refused = as_token(&app, "reader", Method::POST, "/v1/queues/q/jobs", Some(put)).await;
    refused.assert_problem(403, "forbidden");
    let nobody = call(&app, None, Method::POST, "/v1/queues/q/pause", None).await;
    assert_unauthorized(&nobody);
    let queue = as_token(&app, "reader", Method::GET, "/v1/queues/q", None).await;
    assert_eq!(queue.body["waiting"], 0, "{}", queue.text);
    assert_eq!(queue.body["paused"], false, "{}", queue.text);
}

#[tokio::test]
async fn a_read_token_streams_events_and_a_work_token_does_not() {
    let app = start().await;
    let stream = |token: &str| {
        Request::get("/v1/events")
            .header(header::AUTHORIZATION, format!("Bearer secret-{token}"))
            .body(Body::empty())
            .unwrap()
    };
    // The stream never ends by itself: only its head is read.
    let response = app.router.clone().oneshot(stream("reader")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    drop(response);
    let response = app.send(stream("worker")).await;
    response.assert_problem(403, "forbidden");
}

#[tokio::test]
async fn probes_and_documentation_need_no_token() {
    let app = start().await;
    for uri in ["/healthz", "/readyz", "/openapi.json", "/docs/"] {
        let response = call(&app, None, Method::GET, uri, None).await;
        assert_eq!(response.status, StatusCode::OK, "{uri}: {}", response.text);
    }
    // A probe with a wrong token is still answered: open routes ignore the header.
    let response = call(&app, Some("Bearer wrong"), Method::GET, "/healthz", None).await;
    assert_eq!(response.status, StatusCode::OK);
    // The root sends a browser on to the dashboard, which asks for a token itself.
    let response = call(&app, None, Method::GET, "/", None).await;
    assert_eq!(response.status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(response.headers[axum::http::header::LOCATION], "/ui");
}

#[tokio::test]
async fn unknown_routes_need_a_token_before_they_are_404s() {
    let app = start().await;
    assert_unauthorized(&call(&app, None, Method::GET, "/v1/nothing-here", None).await);
    as_token(&app, "reader", Method::GET, "/v1/nothing-here", None)
        .await
        .assert_problem(404, "not_found");
    assert_unauthorized(&call(&app, None, Method::PATCH, "/v1/queues", None).await);
    as_token(&app, "reader", Method::PATCH, "/v1/queues", None)
        .await
        .assert_problem(405, "method_not_allowed");
}

#[tokio::test]
async fn every_route_in_the_openapi_document_has_exactly_one_table_entry() {
    let document = serde_json::to_value(qlessd::openapi::document()).unwrap();
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in [
            "get", "put", "post", "delete", "patch", "head", "options", "trace",
        ] {
            if item.get(method).is_some() {
                operations.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    assert!(operations.len() > 50, "{operations:?}");
    for (method, path) in &operations {
        let rows = qlessd::auth::ROUTES
            .iter()
            .filter(|route| route.method == method && route.path == path)
            .count();
        assert_eq!(
            rows, 1,
            "{method} {path} has {rows} entries in auth::ROUTES"
        );
    }
    // And the table lists no API route that does not exist.
    for route in qlessd::auth::ROUTES
        .iter()
        .filter(|route| route.path.starts_with("/v1/"))
    {
        assert!(
            operations
                .iter()
                .any(|(method, path)| method == route.method && path == route.path),
            "{} {} is in auth::ROUTES but not in the OpenAPI document",
            route.method,
            route.path
        );
    }
}

#[tokio::test]
async fn the_openapi_document_states_each_operations_scope() {
    let document = serde_json::to_value(qlessd::openapi::document()).unwrap();
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer"})
    );
    for route in qlessd::auth::ROUTES {
        let Some(operation) = document["paths"][route.path].get(route.method.to_lowercase()) else {
            continue;
        };
        let description = operation["description"].as_str().unwrap_or_default();
        match route.access {
            qlessd::auth::Access::Open => {
                assert!(description.ends_with("No token needed."), "{}", route.path);
                // `[]`: no requirement, so a generated client sends no token.
                assert_eq!(operation["security"], json!([]), "{}", route.path);
            }
            qlessd::auth::Access::Needs(scope) => {
                let what = format!("{} {}", route.method, route.path);
                let word = scope.word();
                assert!(
                    description.ends_with(&format!("Scope: `{word}`.")),
                    "{what}"
                );
                assert_eq!(operation["security"], json!([{"bearer": [word]}]), "{what}");
                for status in ["401", "403"] {
                    assert!(operation["responses"][status]["$ref"].is_string(), "{what}");
                }
            }
        }
    }
}
