//! The span exporter: ended spans wait in a bounded buffer (when it is full, new ones
//! are dropped and counted, `qless_spans_dropped`: a request never waits for tracing),
//! and a task sends them in batches as an OTLP/HTTP `ExportTraceServiceRequest`
//! (protobuf) to the collector, every `OTEL_BSP_SCHEDULE_DELAY` or as soon as a
//! batch is full, and once more on shutdown.
//!
//! The batching knobs are the OpenTelemetry SDK's `OTEL_BSP_*` variables, with their
//! defaults: `SCHEDULE_DELAY` 5000 ms, `MAX_QUEUE_SIZE` 2048 spans,
//! `MAX_EXPORT_BATCH_SIZE` 512 spans, `EXPORT_TIMEOUT` 30000 ms.
//!
//! # Why the protobuf is written by hand
//!
//! The maintained way is `opentelemetry-proto`'s prost messages. qlessd writes the few
//! messages it sends itself (the field numbers are those of
//! `opentelemetry/proto/trace/v1/trace.proto`, and a test decodes the result with
//! `opentelemetry-proto`) because of a measurement: building and encoding a request
//! span and a script-call span as prost messages cost MEASURE_PROST instructions per
//! pair (callgrind, batches of 512, mimalloc): a `String` or `Vec` per id, name,
//! attribute key and value, and an `encoded_len` walk per level of nesting. Written
//! directly from the fixed records below, the same pair costs MEASURE_HAND. The budget
//! for tracing a whole request is 5% of it: about 1,700 instructions on `GET /healthz`
//! and 2,500 on a heartbeat.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Notify, oneshot};

use super::{Record, SERVICE_NAME, TraceParent, What};

/// How spans are batched (the `OTEL_BSP_*` variables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Batching {
    delay: Duration,
    max_queue: usize,
    max_batch: usize,
    timeout: Duration,
}

impl Batching {
    /// The SDK's defaults, overridden by the `OTEL_BSP_*` variables that are set to
    /// numbers.
    pub(super) fn from_env() -> Batching {
        Batching::from_vars(|name| std::env::var(name).ok())
    }

    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Batching {
        let number = |name: &str, default: u64| {
            var(name)
                .and_then(|value| value.trim().parse::<u64>().ok())
                .unwrap_or(default)
        };
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", 2048).max(1) as usize;
        Batching {
            delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000).max(1)),
            max_queue,
            // As the SDK does: a batch is never larger than the queue.
            max_batch: (number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512).max(1) as usize)
                .min(max_queue),
            timeout: Duration::from_millis(number("OTEL_BSP_EXPORT_TIMEOUT", 30000).max(1)),
        }
    }
}

/// The spans waiting for the exporter.
static BUFFER: Mutex<Vec<Record>> = Mutex::new(Vec::new());
/// Wakes the exporter when a batch is full.
static FULL: Notify = Notify::const_new();
/// Most spans [`BUFFER`] holds (0 until the exporter starts: nothing is kept).
static MAX_QUEUE: AtomicUsize = AtomicUsize::new(0);
/// Spans in a full batch.
static MAX_BATCH: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Hands an ended span to the exporter, or drops it if the buffer is full.
pub(super) fn push(record: Record) {
    let mut buffer = BUFFER.lock().unwrap_or_else(PoisonError::into_inner);
    if buffer.len() >= MAX_QUEUE.load(Ordering::Relaxed) {
        drop(buffer);
        crate::metrics::METRICS.span_dropped();
        return;
    }
    buffer.push(record);
    let full = buffer.len() == MAX_BATCH.load(Ordering::Relaxed);
    drop(buffer);
    if full {
        FULL.notify_one();
    }
}

/// The exporting task, stopped (after a last export) by [`Exporter::shutdown`].
#[derive(Debug)]
pub(super) struct Exporter {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    timeout: Duration,
}

impl Exporter {
    /// Starts exporting to `url` (which must be plain `http://`: a collector beside the
    /// gateway).
    pub(super) fn start(url: &str, batching: Batching) -> Result<Exporter, String> {
        let uri = url
            .parse::<axum::http::Uri>()
            .ok()
            .filter(|uri| uri.scheme_str() == Some("http") && uri.host().is_some())
            .ok_or_else(|| {
                format!(
                    "--otlp-endpoint must be an http:// URL (a collector's OTLP/HTTP port): {url:?}"
                )
            })?;
        MAX_BATCH.store(batching.max_batch, Ordering::Relaxed);
        MAX_QUEUE.store(batching.max_queue, Ordering::Relaxed);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(export(uri, batching, stopped));
        Ok(Exporter {
            stop,
            task,
            timeout: batching.timeout,
        })
    }

    /// Sends what is buffered and stops, within the export timeout.
    pub(super) async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(self.timeout, self.task).await;
    }
}

/// The exporting task: sends the buffered spans every `batching.delay`, when a batch
/// is full, and when told to stop.
async fn export(uri: axum::http::Uri, batching: Batching, mut stopped: oneshot::Receiver<()>) {
    let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let mut taken = Vec::with_capacity(batching.max_batch);
    let mut encoder = Encoder::default();
    let mut failing = false;
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(batching.delay) => false,
            _ = FULL.notified() => false,
            _ = &mut stopped => true,
        };
        // Everything buffered, swapped for the (empty) vector the last round used, so
        // neither side reallocates in the steady state.
        std::mem::swap(
            &mut *BUFFER.lock().unwrap_or_else(PoisonError::into_inner),
            &mut taken,
        );
        for batch in taken.chunks(batching.max_batch) {
            let body = encoder.request(batch);
            let outcome = tokio::time::timeout(batching.timeout, post(&client, &uri, body)).await;
            let outcome = outcome.unwrap_or_else(|_| Err("timed out".to_owned()));
            // One line when the collector stops answering and one when it is back,
            // rather than one per batch.
            match outcome {
                Err(err) if !failing => {
                    failing = true;
                    tracing::warn!(error = %err, spans = batch.len(), "cannot export spans");
                }
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("exporting spans again");
                }
                _ => {}
            }
        }
        taken.clear();
        if stopping {
            return;
        }
    }
}

/// Posts one export request; `Err` says why it was not accepted.
async fn post(
    client: &Client<HttpConnector, Body>,
    uri: &axum::http::Uri,
    body: Vec<u8>,
) -> Result<(), String> {
    let request = axum::http::Request::post(uri.clone())
        .header("content-type", "application/x-protobuf")
        .body(Body::from(body))
        .map_err(|err| err.to_string())?;
    let response = client
        .request(request)
        .await
        .map_err(|err| err.to_string())?;
    let status = response.status();
    // Read to the end, so the connection is kept for the next batch.
    let _ = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20).await;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the collector answered {status}"))
    }
}

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// `Span.SpanKind` values.
const KIND_SERVER: u64 = 2;
const KIND_CLIENT: u64 = 3;
const KIND_CONSUMER: u64 = 5;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;
/// `SpanFlags`: the W3C sampled flag, then whether the parent is known to be remote
/// (`HAS_IS_REMOTE`) and is (`IS_REMOTE`).
const FLAG_SAMPLED: u32 = 0x1;
const FLAG_HAS_IS_REMOTE: u32 = 0x100;
const FLAG_IS_REMOTE: u32 = 0x200;

/// Writes export requests, reusing its buffers from one batch to the next.
#[derive(Debug, Default)]
struct Encoder {
    /// The spans of the batch, each a `ScopeSpans.spans` field.
    spans: Vec<u8>,
    /// One span's fields, while they are written (a message's length comes first).
    span: Vec<u8>,
}

impl Encoder {
    /// The `ExportTraceServiceRequest` of `batch`: one resource (`service.name`), one
    /// instrumentation scope, the spans.
    fn request(&mut self, batch: &[Record]) -> Vec<u8> {
        self.spans.clear();
        for record in batch {
            self.span.clear();
            span(&mut self.span, record);
            message(&mut self.spans, 2, &self.span);
        }
        // Resource { attributes = 1 }
        let mut resource = Vec::with_capacity(32);
        key_value(&mut resource, 1, "service.name", SERVICE_NAME);
        let mut scope = Vec::with_capacity(32);
        string(&mut scope, 1, SERVICE_NAME);
        string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
        // ScopeSpans { scope = 1, spans = 2 }
        let scope_spans_len = field_len(1, scope.len()) + self.spans.len();
        // ResourceSpans { resource = 1, scope_spans = 2 }
        let resource_spans_len = field_len(1, resource.len()) + field_len(2, scope_spans_len);
        let mut out = Vec::with_capacity(field_len(1, resource_spans_len));
        header(&mut out, 1, resource_spans_len);
        message(&mut out, 1, &resource);
        header(&mut out, 2, scope_spans_len);
        message(&mut out, 1, &scope);
        out.extend_from_slice(&self.spans);
        out
    }
}

/// Writes the fields of one `Span`.
fn span(out: &mut Vec<u8>, record: &Record) {
    let context = &record.context;
    bytes(out, 1, &context.trace);
    bytes(out, 2, &context.span);
    if record.parent != [0; 8] {
        bytes(out, 4, &record.parent);
    }
    let kind = match &record.what {
        What::Request { method, route, .. } => {
            // "<method> <route>", without building it first.
            header(out, 5, method.len() + 1 + route.len());
            out.extend_from_slice(method.as_bytes());
            out.push(b' ');
            out.extend_from_slice(route.as_bytes());
            KIND_SERVER
        }
        What::Call { command, .. } => {
            string(out, 5, command);
            KIND_CLIENT
        }
        What::Leased { .. } => {
            string(out, 5, "qless leased");
            KIND_CONSUMER
        }
    };
    varint_field(out, 6, kind);
    tag(out, 7, FIXED64);
    out.extend_from_slice(&record.start.to_le_bytes());
    tag(out, 8, FIXED64);
    out.extend_from_slice(&record.end.to_le_bytes());
    match &record.what {
        What::Request {
            method,
            route,
            request_id,
            status,
            token,
        } => {
            string_attribute(out, "http.request.method", method);
            string_attribute(out, "http.route", route);
            if *status != 0 {
                int_attribute(out, "http.response.status_code", i64::from(*status));
            }
            string_attribute(
                out,
                "request_id",
                // Header values are visible ASCII or opaque bytes; a string attribute
                // must be UTF-8.
                std::str::from_utf8(request_id.as_bytes()).unwrap_or("-"),
            );
            if let Some(token) = token {
                string_attribute(out, "qless.token", token);
            }
        }
        What::Call {
            command,
            queue,
            jid,
        } => {
            string_attribute(out, "db.system.name", "redis");
            string_attribute(out, "db.operation.name", "EVALSHA");
            string_attribute(out, "qless.command", command);
            if let Some(queue) = queue {
                string_attribute(out, "qless.queue", queue);
            }
            if let Some(jid) = jid {
                string_attribute(out, "qless.jid", jid);
            }
        }
        What::Leased { jid, queue, worker } => {
            string_attribute(out, "qless.jid", jid);
            string_attribute(out, "qless.queue", queue);
            string_attribute(out, "qless.worker", worker);
        }
    }
    for link in &record.links {
        link_field(out, link);
    }
    if record.error {
        // Status { code = 3 }
        header(out, 15, 2);
        varint_field(out, 3, STATUS_ERROR);
    }
    let mut flags = FLAG_SAMPLED | FLAG_HAS_IS_REMOTE;
    if record.remote_parent {
        flags |= FLAG_IS_REMOTE;
    }
    tag(out, 16, FIXED32);
    out.extend_from_slice(&flags.to_le_bytes());
}

/// Writes a `Span.links` field: `Link { trace_id = 1, span_id = 2, flags = 6 }`.
fn link_field(out: &mut Vec<u8>, link: &TraceParent) {
    let len = field_len(1, 16) + field_len(2, 8) + 5;
    header(out, 13, len);
    bytes(out, 1, &link.trace);
    bytes(out, 2, &link.span);
    tag(out, 6, FIXED32);
    let flags = u32::from(link.sampled) | FLAG_HAS_IS_REMOTE | FLAG_IS_REMOTE;
    out.extend_from_slice(&flags.to_le_bytes());
}

/// Writes a `Span.attributes` field holding
/// `KeyValue { key = 1, value = 2: AnyValue { string_value = 1 } }`.
fn string_attribute(out: &mut Vec<u8>, key: &str, value: &str) {
    key_value(out, 9, key, value);
}

/// Writes field `number` holding a `KeyValue` with a string value.
fn key_value(out: &mut Vec<u8>, number: u32, key: &str, value: &str) {
    let any = field_len(1, value.len());
    header(out, number, field_len(1, key.len()) + field_len(2, any));
    string(out, 1, key);
    header(out, 2, any);
    string(out, 1, value);
}

/// Writes a `Span.attributes` field holding `KeyValue { key, AnyValue { int_value = 3 } }`.
fn int_attribute(out: &mut Vec<u8>, key: &str, value: i64) {
    let any = 1 + varint_len(value as u64);
    header(out, 9, field_len(1, key.len()) + field_len(2, any));
    string(out, 1, key);
    header(out, 2, any);
    varint_field(out, 3, value as u64);
}

/// The bytes a length-delimited field `number` of `len` bytes takes.
fn field_len(number: u32, len: usize) -> usize {
    varint_len(u64::from(number) << 3) + varint_len(len as u64) + len
}

fn varint_len(value: u64) -> usize {
    // Seven bits per byte; zero takes one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn tag(out: &mut Vec<u8>, number: u32, wire: u8) {
    varint(out, u64::from(number) << 3 | u64::from(wire));
}

/// The tag and length of a length-delimited field whose contents follow.
fn header(out: &mut Vec<u8>, number: u32, len: usize) {
    tag(out, number, LEN);
    varint(out, len as u64);
}

fn message(out: &mut Vec<u8>, number: u32, contents: &[u8]) {
    header(out, number, contents.len());
    out.extend_from_slice(contents);
}

fn bytes(out: &mut Vec<u8>, number: u32, value: &[u8]) {
    message(out, number, value);
}

fn string(out: &mut Vec<u8>, number: u32, value: &str) {
    message(out, number, value.as_bytes());
}

fn varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    tag(out, number, VARINT);
    varint(out, value);
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    use prost::Message;

    use super::*;

    fn context(trace: u8, span: u8) -> TraceParent {
        TraceParent {
            trace: [trace; 16],
            span: [span; 8],
            sampled: true,
        }
    }

    fn attributes(span: &opentelemetry_proto::tonic::trace::v1::Span) -> Vec<(String, String)> {
        span.attributes
            .iter()
            .map(|kv| {
                let value = match kv.value.as_ref().and_then(|v| v.value.clone()) {
                    Some(AnyValue::StringValue(text)) => text,
                    Some(AnyValue::IntValue(number)) => number.to_string(),
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), value)
            })
            .collect()
    }

    #[test]
    fn an_export_request_decodes_as_opentelemetry_proto_reads_it() {
        let long_route: &'static str = Box::leak("/r".repeat(100).into_boxed_str());
        let batch = vec![
            Record {
                context: context(1, 2),
                parent: [3; 8],
                remote_parent: true,
                start: 1_700_000_000_000_000_000,
                end: 1_700_000_000_000_500_000,
                error: true,
                what: What::Request {
                    method: "POST",
                    route: long_route,
                    request_id: axum::http::HeaderValue::from_static("req-1"),
                    status: 503,
                    token: Some("ci".into()),
                },
                links: vec![context(4, 5), context(6, 7)],
            },
            Record {
                context: context(1, 8),
                parent: [2; 8],
                remote_parent: false,
                start: 5,
                end: 6,
                error: false,
                what: What::Call {
                    command: "put",
                    queue: Some("mail".into()),
                    jid: Some("j".repeat(300).into()),
                },
                links: Vec::new(),
            },
            Record {
                context: context(9, 10),
                parent: [0; 8],
                remote_parent: false,
                start: 7,
                end: 7,
                error: false,
                what: What::Leased {
                    jid: "j1".into(),
                    queue: "mail".into(),
                    worker: "w1".into(),
                },
                links: Vec::new(),
            },
        ];
        let bytes = Encoder::default().request(&batch);
        let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("protobuf");
        assert_eq!(decoded.resource_spans.len(), 1);
        let resource = &decoded.resource_spans[0];
        let service = &resource.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        assert_eq!(
            service.value.as_ref().unwrap().value,
            Some(AnyValue::StringValue("qlessd".into()))
        );
        let scope = &resource.scope_spans[0];
        assert_eq!(scope.scope.as_ref().unwrap().name, "qlessd");
        let [request, call, leased] = scope.spans.as_slice() else {
            panic!("three spans: {scope:?}");
        };

        assert_eq!(request.trace_id, vec![1; 16]);
        assert_eq!(request.span_id, vec![2; 8]);
        assert_eq!(request.parent_span_id, vec![3; 8]);
        assert_eq!(request.name, format!("POST {long_route}"));
        assert_eq!(request.kind, SpanKind::Server as i32);
        assert_eq!(request.start_time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(request.end_time_unix_nano, 1_700_000_000_000_500_000);
        assert_eq!(request.status.as_ref().unwrap().code, 2);
        assert_eq!(request.flags, 0x301);
        assert_eq!(
            attributes(request),
            [
                ("http.request.method", "POST"),
                ("http.route", long_route),
                ("http.response.status_code", "503"),
                ("request_id", "req-1"),
                ("qless.token", "ci"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(request.links.len(), 2);
        assert_eq!(request.links[1].trace_id, vec![6; 16]);
        assert_eq!(request.links[1].span_id, vec![7; 8]);

        assert_eq!(call.name, "put");
        assert_eq!(call.kind, SpanKind::Client as i32);
        assert_eq!(call.parent_span_id, vec![2; 8]);
        assert_eq!(call.status, None);
        assert_eq!(call.flags, 0x101);
        let call_attributes = attributes(call);
        assert!(call_attributes.contains(&("qless.queue".into(), "mail".into())));
        assert!(call_attributes.contains(&("qless.jid".into(), "j".repeat(300))));

        assert_eq!(leased.name, "qless leased");
        assert_eq!(leased.kind, SpanKind::Consumer as i32);
        assert!(leased.parent_span_id.is_empty());
        assert_eq!(
            attributes(leased)[2],
            ("qless.worker".to_owned(), "w1".to_owned())
        );
    }

    #[test]
    fn varint_lengths_match_what_is_written() {
        for value in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
        }
    }

    #[test]
    fn batching_reads_the_sdks_variables() {
        let defaults = Batching::from_vars(|_| None);
        assert_eq!(defaults.delay, Duration::from_secs(5));
        assert_eq!((defaults.max_queue, defaults.max_batch), (2048, 512));
        let set = Batching::from_vars(|name| match name {
            "OTEL_BSP_SCHEDULE_DELAY" => Some("100".into()),
            "OTEL_BSP_MAX_QUEUE_SIZE" => Some("64".into()),
            "OTEL_BSP_EXPORT_TIMEOUT" => Some("not a number".into()),
            _ => None,
        });
        assert_eq!(set.delay, Duration::from_millis(100));
        assert_eq!((set.max_queue, set.max_batch), (64, 64));
        assert_eq!(set.timeout, Duration::from_secs(30));
    }
}
