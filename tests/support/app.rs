//! `TestApp`: the real router over a private Redis, with a manual clock, driven in
//! process (no socket) through `tower::ServiceExt::oneshot`.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use qlessd::clock::Clock;
use qlessd::core::{ConnectOptions, Qless};
use qlessd::server::{self, App, AppState, Limits};
use qlessd::settings::Settings;
use serde_json::Value;
use tower::ServiceExt;

use super::redis::RedisServer;

/// The logical time every test app starts at.
pub const START: f64 = 1_700_000_000.0;

/// A router wired to its own Redis and a manual clock.
pub struct TestApp {
    pub redis: RedisServer,
    pub qless: Qless,
    pub clock: Clock,
    pub router: App,
    /// The state behind the router (event bus, leasing service).
    pub state: AppState,
}

/// A response, read whole.
#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl TestApp {
    /// A fresh app on a fresh Redis, legacy `ql:` namespace.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// A fresh app whose keys live in `namespace`.
    pub async fn start_with(namespace: Option<&str>) -> Self {
        Self::start_configured(namespace, |_| {}).await
    }

    /// A fresh app whose limits come from the default settings as `configure` changes
    /// them (the Redis URL is this app's own).
    pub async fn start_configured(
        namespace: Option<&str>,
        configure: impl FnOnce(&mut Settings),
    ) -> Self {
        let redis = RedisServer::start();
        let qless = connect(&redis, namespace).await;
        let clock = Clock::manual(START);
        let mut settings = Settings::for_redis(redis.url());
        configure(&mut settings);
        let state = AppState::new(
            qless.clone(),
            clock.clone(),
            Limits::from_settings(&settings),
        );
        let router = server::router(state.clone());
        TestApp {
            redis,
            qless,
            clock,
            router,
            state,
        }
    }

    /// A fresh app whose keys live in `namespace` and whose every request is checked
    /// against the tokens of the auth file `toml`.
    #[allow(dead_code)]
    pub async fn start_with_auth(namespace: Option<&str>, toml: &str) -> Self {
        let mut app = Self::start_with(namespace).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, toml).expect("write the auth file");
        let auth = qlessd::auth::Auth::load(&file, namespace).expect("a valid auth file");
        app.router = server::authenticated_router(app.state.clone(), &auth);
        app
    }

    /// Stops this app's Redis for good (the router keeps pointing at it), to test
    /// what clients see when Redis is unreachable.
    pub fn kill_redis(&mut self) {
        self.redis = RedisServer::start();
    }

    /// Sends a request with an optional JSON body. Every POST, PUT, PATCH and DELETE
    /// says `Content-Type: application/json`, with a body or without, as qlessd
    /// requires of them (see `browser.rs`).
    pub async fn request(&self, method: Method, uri: &str, body: Option<Value>) -> TestResponse {
        let changes = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
        let mut builder = Request::builder().method(method).uri(uri);
        if changes || body.is_some() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        let body = match body {
            Some(json) => Body::from(json.to_string()),
            None => Body::empty(),
        };
        self.send(builder.body(body).expect("request")).await
    }

    /// Sends a prepared request.
    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        TestResponse {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn get(&self, uri: &str) -> TestResponse {
        self.request(Method::GET, uri, None).await
    }

    #[allow(dead_code)]
    pub async fn post(&self, uri: &str, body: Value) -> TestResponse {
        self.request(Method::POST, uri, Some(body)).await
    }
}

/// A `Qless` handle on `redis`.
pub async fn connect(redis: &RedisServer, namespace: Option<&str>) -> Qless {
    Qless::connect(ConnectOptions {
        url: redis.url(),
        redis_ca_file: None,
        namespace: namespace.map(str::to_owned),
        connect_timeout: Duration::from_secs(5),
        response_timeout: Duration::from_secs(60),
        external: false,
        group_calls: qlessd::core::BATCH_CALLS,
        replicas: Default::default(),
    })
    .await
    .expect("connect to the test redis")
}

impl TestResponse {
    /// Asserts the response is a problem document with this status and code.
    #[allow(dead_code)]
    pub fn assert_problem(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text);
        assert_eq!(
            self.headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some("application/problem+json"),
            "body: {}",
            self.text
        );
        assert_eq!(self.body["status"], status, "body: {}", self.text);
        assert_eq!(self.body["code"], code, "body: {}", self.text);
        for field in ["type", "title", "detail"] {
            assert!(
                self.body[field].is_string(),
                "problem lacks {field}: {}",
                self.text
            );
        }
    }
}
