//! Traces over OTLP/HTTP, received by a real OTLP/HTTP receiver: a small server in the
//! test accepting `POST /v1/traces` (protobuf) and decoding what qlessd exports.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};

use super::binary::{BINARY, free_port, wait_for_status};

/// The spans received, with the `service.name` of the resource they came under.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

impl Received {
    /// Starts the receiver; answers its base URL.
    async fn start(&self) -> String {
        let received = self.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            post(move |body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let mut spans = received.0.lock().unwrap();
                for resource in request.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref()?.value.clone())
                        .map(|value| match value {
                            AnyValue::StringValue(name) => name,
                            other => format!("{other:?}"),
                        })
                        .unwrap_or_default();
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            spans.push((service.clone(), span));
                        }
                    }
                }
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    /// The first span `matches` accepts, waiting for it up to a deadline.
    async fn wait_for(&self, what: &str, matches: impl Fn(&Span) -> bool) -> Span {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((service, span)) = self.0.lock().unwrap().iter().find(|(_, s)| matches(s)) {
                assert_eq!(service, "qlessd");
                return span.clone();
            }
            assert!(Instant::now() < deadline, "no span {what} arrived");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?;
    Some(match value.value.as_ref()? {
        AnyValue::StringValue(text) => text.clone(),
        AnyValue::IntValue(number) => number.to_string(),
        other => format!("{other:?}"),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// qlessd in embedded mode exporting to `endpoint`, batches sent every 100 ms.
struct Traced {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Traced {
    async fn start(endpoint: &str) -> Traced {
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(BINARY)
            .env("QLESSD_DATA_DIR", data.path().join("data"))
            .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
            .env("QLESSD_OTLP_ENDPOINT", endpoint)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env("QLESSD_PUSH_ALLOW_PRIVATE", "true")
            .env_remove("QLESSD_REDIS_URL")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
        Traced {
            child,
            base,
            _data: data,
        }
    }

    async fn post(&self, path: &str, traceparent: Option<&str>, body: Value) -> Value {
        let mut request = crate::support::http()
            .post(format!("{}{path}", self.base))
            .json(&body);
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let reply = request.send().await.unwrap();
        assert!(
            reply.status().is_success(),
            "POST {path}: {}",
            reply.status()
        );
        reply.json().await.unwrap()
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_jobs_put_pop_and_complete_are_one_trace_exported_over_otlp_http() {
    let received = Received::default();
    let endpoint = received.start().await;
    let qlessd = Traced::start(&endpoint).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let producer_span = "00f067aa0ba902b7";
    let producer = format!("00-{trace}-{producer_span}-01");

    qlessd
        .post(
            "/v1/queues/mail/jobs",
            Some(&producer),
            json!({"jid": "j1", "klass": "Send", "data": {}}),
        )
        .await;
    let popped = qlessd
        .post("/v1/queues/mail/pop", None, json!({"worker": "w1"}))
        .await;
    let job_trace = popped[0]["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("the popped job carries its trace: {popped}"))
        .to_owned();
    assert!(
        job_trace.starts_with(&format!("00-{trace}-")),
        "{job_trace}"
    );
    qlessd
        .post(
            "/v1/jobs/j1/complete",
            Some(&job_trace),
            json!({"worker": "w1", "queue": "mail"}),
        )
        .await;

    // The put: a server span continuing the producer's trace, with the put's call.
    let put = received
        .wait_for("for the put", |s| s.name == "POST /v1/queues/{queue}/jobs")
        .await;
    assert_eq!(hex(&put.trace_id), trace);
    assert_eq!(hex(&put.parent_span_id), producer_span);
    assert_eq!(
        attribute(&put, "http.route").as_deref(),
        Some("/v1/queues/{queue}/jobs")
    );
    assert_eq!(
        attribute(&put, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        attribute(&put, "http.response.status_code").as_deref(),
        Some("201")
    );
    assert!(attribute(&put, "request_id").is_some_and(|id| !id.is_empty()));
    // The job keeps the put span's own context: its trace, its span as the parent.
    assert_eq!(job_trace, format!("00-{trace}-{}-01", hex(&put.span_id)));
    let put_call = received
        .wait_for("for the put's script call", |s| {
            s.name == "put" && s.parent_span_id == put.span_id
        })
        .await;
    assert_eq!(hex(&put_call.trace_id), trace);
    assert_eq!(attribute(&put_call, "qless.queue").as_deref(), Some("mail"));
    assert_eq!(attribute(&put_call, "qless.jid").as_deref(), Some("j1"));

    // The pop: its own request span, linked to the job's trace, and a span in the
    // job's trace (a child of the put) linked back to it.
    let pop = received
        .wait_for("for the pop", |s| s.name == "POST /v1/queues/{queue}/pop")
        .await;
    assert!(
        pop.links.iter().any(|link| hex(&link.trace_id) == trace),
        "the pop links the job's trace: {:?}",
        pop.links
    );
    let leased = received
        .wait_for("for the lease", |s| s.name == "qless leased")
        .await;
    assert_eq!(hex(&leased.trace_id), trace);
    assert_eq!(leased.parent_span_id, put.span_id);
    assert_eq!(attribute(&leased, "qless.jid").as_deref(), Some("j1"));
    assert_eq!(attribute(&leased, "qless.worker").as_deref(), Some("w1"));
    assert!(leased.links.iter().any(|link| link.span_id == pop.span_id));
    let pop_call = received
        .wait_for("for the pop's script call", |s| {
            s.name == "pop" && s.parent_span_id == pop.span_id
        })
        .await;
    assert_eq!(attribute(&pop_call, "qless.queue").as_deref(), Some("mail"));

    // The complete, sent with the job's traceparent, continues the job's trace.
    let complete = received
        .wait_for("for the complete", |s| {
            s.name == "POST /v1/jobs/{jid}/complete"
        })
        .await;
    assert_eq!(hex(&complete.trace_id), trace);
    assert_eq!(complete.parent_span_id, put.span_id);
    let complete_call = received
        .wait_for("for the complete's script call", |s| {
            s.parent_span_id == complete.span_id
        })
        .await;
    assert_eq!(hex(&complete_call.trace_id), trace);
    assert_eq!(
        attribute(&complete_call, "qless.jid").as_deref(),
        Some("j1")
    );
}

/// A long poll whose client goes away still leaves its request span (ended from the
/// request's future as it is dropped): with its request id, and no status, since none
/// was answered.
#[tokio::test]
async fn a_request_its_client_abandons_still_leaves_its_span() {
    let received = Received::default();
    let endpoint = received.start().await;
    let qlessd = Traced::start(&endpoint).await;
    // Nothing to pop: the request waits, and the client gives up long before.
    let abandoned = crate::support::http()
        .post(format!("{}/v1/queues/idle/pop", qlessd.base))
        .header("x-request-id", "abandoned-pop-1")
        .json(&json!({"worker": "w1", "wait": 20}))
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(abandoned.is_err(), "the pop should still be waiting");
    let span = received
        .wait_for("of the abandoned pop", |span| {
            attribute(span, "request_id").as_deref() == Some("abandoned-pop-1")
        })
        .await;
    assert_eq!(span.name, "POST /v1/queues/{queue}/pop");
    assert_eq!(attribute(&span, "http.response.status_code"), None);
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano + 200_000_000);
}

/// A push delivery is a client span in the job's trace (a child of the put's span),
/// and the receiver gets that span's context as its `traceparent`.
#[tokio::test]
async fn a_push_delivery_is_a_client_span_in_the_jobs_trace() {
    let received = Received::default();
    let endpoint = received.start().await;
    let qlessd = Traced::start(&endpoint).await;
    let sent: Arc<Mutex<Vec<String>>> = Arc::default();
    let receiver = axum::Router::new().route(
        "/hook",
        post({
            let sent = sent.clone();
            move |headers: axum::http::HeaderMap| async move {
                let traceparent = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                sent.lock().unwrap().push(traceparent);
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });
    let reply = crate::support::http()
        .put(format!("{}/v1/queues/mail/push", qlessd.base))
        .json(&json!({"url": hook}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 201);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    qlessd
        .post(
            "/v1/queues/mail/jobs",
            Some(&format!("00-{trace}-00f067aa0ba902b7-01")),
            json!({"jid": "pushed", "klass": "Send", "data": {}}),
        )
        .await;
    let put = received
        .wait_for("for the put", |s| s.name == "POST /v1/queues/{queue}/jobs")
        .await;
    let delivery = received
        .wait_for("for the delivery", |s| s.name == "qless push")
        .await;
    assert_eq!(hex(&delivery.trace_id), trace);
    assert_eq!(delivery.parent_span_id, put.span_id);
    assert_eq!(delivery.kind, 3, "a client span");
    assert_eq!(attribute(&delivery, "qless.jid").as_deref(), Some("pushed"));
    assert_eq!(attribute(&delivery, "qless.queue").as_deref(), Some("mail"));
    assert_eq!(
        attribute(&delivery, "http.response.status_code").as_deref(),
        Some("200")
    );
    let headers = sent.lock().unwrap().clone();
    assert_eq!(
        headers,
        [format!("00-{trace}-{}-01", hex(&delivery.span_id))],
        "the receiver continues the delivery's span"
    );
    server.abort();
}
