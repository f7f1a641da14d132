//! Several namespaces in one gateway: two tenants using the same queue names never see
//! each other's queues, jobs, workers, events or long polls; the header, the token and
//! the default decide the namespace.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use qlessd::server::{self, AppState, Limits};
use qlessd::settings::Settings;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tower::ServiceExt;

use crate::support::{TestApp, TestResponse, connect};

/// An app serving `a` (the default) and `b`, with the tokens of `auth` if given.
async fn start(auth: Option<&str>) -> TestApp {
    start_with_b(auth).await.0
}

/// [`start`], and the state of namespace `b`.
async fn start_with_b(auth: Option<&str>) -> (TestApp, AppState) {
    let mut app = TestApp::start_with(Some("a")).await;
    let settings = Settings::for_redis(app.redis.url());
    let b = AppState::new(
        connect(&app.redis, Some("b")).await,
        app.clock.clone(),
        Limits::from_settings(&settings),
    );
    let dir = tempfile::tempdir().unwrap();
    let auth = auth.map(|toml| {
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, toml).unwrap();
        qlessd::auth::Auth::load(&file, Some("a")).unwrap()
    });
    app.router = server::tenant_router(
        app.state.clone(),
        vec![("b".to_owned(), b.clone())],
        auth.as_ref(),
    );
    (app, b)
}

fn request(
    namespace: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<&Value>,
) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(namespace) = namespace {
        request = request.header("qless-namespace", namespace);
    }
    match body {
        Some(json) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json.to_string())),
        None => request.body(Body::empty()),
    }
    .unwrap()
}

async fn call(
    app: &TestApp,
    namespace: Option<&str>,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> TestResponse {
    app.send(request(namespace, method, uri, body.as_ref()))
        .await
}

async fn put(app: &TestApp, namespace: &str, jid: &str) {
    let body = json!({"jid": jid, "klass": "K"});
    let response = call(
        app,
        Some(namespace),
        Method::POST,
        "/v1/queues/q/jobs",
        Some(body),
    )
    .await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn two_tenants_never_see_each_others_queues_jobs_or_workers() {
    let app = start(None).await;
    put(&app, "a", "job-a").await;
    put(&app, "b", "job-b").await;
    for (namespace, worker, jid) in [("a", "worker-a", "job-a"), ("b", "worker-b", "job-b")] {
        let popped = call(
            &app,
            Some(namespace),
            Method::POST,
            "/v1/queues/q/pop",
            Some(json!({"worker": worker})),
        )
        .await;
        assert_eq!(
            names(&popped.body, "jid"),
            [jid],
            "{namespace}: {}",
            popped.text
        );
    }
    for (namespace, mine, theirs) in [("a", "job-a", "job-b"), ("b", "job-b", "job-a")] {
        let ns = Some(namespace);
        let queue = call(&app, ns, Method::GET, "/v1/queues/q", None).await;
        assert_eq!(queue.body["running"], 1, "{namespace}: {}", queue.text);
        assert_eq!(
            call(&app, ns, Method::GET, &format!("/v1/jobs/{mine}"), None)
                .await
                .status,
            StatusCode::OK
        );
        call(&app, ns, Method::GET, &format!("/v1/jobs/{theirs}"), None)
            .await
            .assert_problem(404, "not_found");
        let workers = call(&app, ns, Method::GET, "/v1/workers", None).await;
        assert_eq!(
            names(&workers.body, "name"),
            [format!("worker-{namespace}")],
            "{}",
            workers.text
        );
    }
    // Without a header, the default namespace.
    let job = call(&app, None, Method::GET, "/v1/jobs/job-a", None).await;
    assert_eq!(job.status, StatusCode::OK, "{}", job.text);
}

#[tokio::test]
async fn events_and_long_polls_stay_in_their_namespace() {
    let (app, b) = start_with_b(None).await;
    let stream = app
        .router
        .clone()
        .oneshot(request(
            Some("b"),
            Method::GET,
            "/v1/events?events=put",
            None,
        ))
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut stream = stream.into_body();
    let waiter = {
        let router = app.router.clone();
        let body = json!({"worker": "w", "wait": 10});
        tokio::spawn(async move {
            let response = router
                .oneshot(request(
                    Some("b"),
                    Method::POST,
                    "/v1/queues/q/pop",
                    Some(&body),
                ))
                .await
                .unwrap();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.leasing.waiting() == 0 {
        assert!(Instant::now() < deadline, "the long poll never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        app.state.leasing.waiting(),
        0,
        "the default namespace has no waiter"
    );
    put(&app, "a", "job-a").await;
    put(&app, "b", "job-b").await;
    let popped = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(names(&popped, "jid"), ["job-b"]);
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen.contains("job-b") {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = tokio::time::timeout(left, stream.frame())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(!seen.contains("job-a"), "{seen}");
}

#[tokio::test]
async fn an_unserved_namespace_is_a_404_and_a_malformed_one_a_400() {
    let app = start(None).await;
    call(&app, Some("c"), Method::GET, "/v1/queues", None)
        .await
        .assert_problem(404, "not_found");
    call(&app, Some("a:b"), Method::GET, "/v1/queues", None)
        .await
        .assert_problem(400, "bad_request");
}

#[tokio::test]
async fn a_token_reaches_only_its_namespaces_and_addresses_its_only_one_by_default() {
    let digest = |secret: &str| -> String {
        Sha256::digest(secret.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let toml = format!(
        "[[tokens]]\nname = \"tenant-b\"\nsha256 = \"{}\"\nscopes = [\"admin\"]\nnamespaces = [\"b\"]\n\
         [[tokens]]\nname = \"ops\"\nsha256 = \"{}\"\nscopes = [\"admin\"]\n",
        digest("secret-b"),
        digest("secret-ops")
    );
    let app = start(Some(&toml)).await;
    let send = |namespace: Option<&'static str>,
                secret: &str,
                method: Method,
                uri: &str,
                body: Option<Value>| {
        let mut request = request(namespace, method, uri, body.as_ref());
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {secret}").parse().unwrap(),
        );
        app.send(request)
    };
    let job = json!({"jid": "mine", "klass": "K"});
    let put = send(
        None,
        "secret-b",
        Method::POST,
        "/v1/queues/q/jobs",
        Some(job),
    )
    .await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    // It went to `b`, the token's only namespace, not to the default `a`.
    let in_b = send(Some("b"), "secret-ops", Method::GET, "/v1/jobs/mine", None).await;
    assert_eq!(in_b.status, StatusCode::OK, "{}", in_b.text);
    send(None, "secret-ops", Method::GET, "/v1/jobs/mine", None)
        .await
        .assert_problem(404, "not_found");
    let refused = send(Some("a"), "secret-b", Method::GET, "/v1/queues", None).await;
    refused.assert_problem(403, "forbidden");
    assert!(
        refused.body["detail"].as_str().unwrap().contains("`a`"),
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn a_scrape_shows_a_token_only_the_series_of_its_namespaces() {
    let digest = |secret: &str| -> String {
        Sha256::digest(secret.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let toml = format!(
        "[[tokens]]\nname = \"reader-b\"\nsha256 = \"{}\"\nscopes = [\"read\"]\nnamespaces = [\"b\"]\n\
         [[tokens]]\nname = \"ops\"\nsha256 = \"{}\"\nscopes = [\"admin\"]\n",
        digest("secret-reader-b"),
        digest("secret-ops")
    );
    let app = start(Some(&toml)).await;
    let send = |namespace: Option<&'static str>, secret: &str, method: Method, uri: &str, body| {
        let mut request = request(namespace, method, uri, body);
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {secret}").parse().unwrap(),
        );
        app.send(request)
    };
    // A queue of each tenant's, whose names only a scrape could leak.
    let job = json!({"klass": "K"});
    for (namespace, queue) in [("a", "payroll-of-a"), ("b", "orders-of-b")] {
        let uri = format!("/v1/queues/{queue}/jobs");
        let put = send(
            Some(namespace),
            "secret-ops",
            Method::POST,
            &uri,
            Some(&job),
        )
        .await;
        assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    }
    let tenant = send(None, "secret-reader-b", Method::GET, "/metrics", None).await;
    assert_eq!(tenant.status, StatusCode::OK, "{}", tenant.text);
    assert!(tenant.text.contains("orders-of-b"), "{}", tenant.text);
    assert!(!tenant.text.contains("payroll-of-a"), "{}", tenant.text);
    assert!(!tenant.text.contains("namespace=\"a\""), "{}", tenant.text);
    // Figures of no namespace (HTTP, Redis calls) are for tokens of every namespace.
    assert!(
        !tenant.text.contains("http_server_request_duration_seconds"),
        "{}",
        tenant.text
    );
    let ops = send(Some("a"), "secret-ops", Method::GET, "/metrics", None).await;
    assert_eq!(ops.status, StatusCode::OK, "{}", ops.text);
    for seen in [
        "payroll-of-a",
        "orders-of-b",
        "http_server_request_duration_seconds",
    ] {
        assert!(ops.text.contains(seen), "{seen}: {}", ops.text);
    }
}
