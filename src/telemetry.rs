//! Logging and tracing setup: text or JSON log lines, filtered by `RUST_LOG` (default
//! `info`), and, with `--otlp-endpoint`, OpenTelemetry spans exported over OTLP/HTTP
//! (protobuf): one per request and a child per script call.
//!
//! Spans for OpenTelemetry use the target [`SPANS`], which only the exporting layer
//! listens to (the log never formats them), and are made only while [`tracing_on`]:
//! without an endpoint a request pays one relaxed atomic load for all of this.
//!
//! A job carries its trace as a W3C `traceparent` (see [`TraceParent`]): the request
//! that puts it continues the caller's trace, the job stores the put's span, and the
//! requests that pop it, and a worker's requests naming its `traceparent`, continue
//! that trace, so a job's whole life reads as one trace.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::HeaderMap;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::settings::LogFormat;

/// The target of every span meant for OpenTelemetry.
pub const SPANS: &str = "qlessd::otel";

/// The service name spans are exported under.
const SERVICE_NAME: &str = "qlessd";

/// Whether spans are exported (set once, at start-up, by [`init`]).
static TRACING: AtomicBool = AtomicBool::new(false);

/// Whether spans are being exported: the request path makes them only then.
#[inline]
pub fn tracing_on() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// The exporter, kept by `main` to flush the spans still buffered on the way out.
#[derive(Debug)]
pub struct Tracing(SdkTracerProvider);

impl Tracing {
    /// Exports the spans still buffered (within the exporter's timeout) and stops.
    pub async fn shutdown(self) {
        let provider = self.0;
        // The batch processor's task runs on this runtime: its shutdown blocks until
        // that task answers, so it must wait on a thread of its own.
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

/// Installs the global subscriber: the log, and with `otlp_endpoint` the exporting
/// layer. Call once per process, inside the Tokio runtime (the exporter's batches are
/// sent by a task of it).
pub fn init(format: LogFormat, otlp_endpoint: Option<&str>) -> Result<Option<Tracing>, String> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info"))
        // The spans for OpenTelemetry are not log material (and formatting them would
        // cost every request).
        .add_directive(format!("{SPANS}=off").parse().expect("a valid directive"));
    // Colour codes help a person at a terminal and litter a file, a pipe or a
    // container's log with escape sequences (and `NO_COLOR` asks for none at all).
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let log = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .fmt_fields(crate::log_fields::TextFields)
            .with_ansi(colour)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_filter(filter)
            .boxed(),
    };
    let Some(endpoint) = otlp_endpoint else {
        tracing_subscriber::registry().with(log).init();
        return Ok(None);
    };
    let provider = provider(endpoint)?;
    let spans = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        .with_filter(Targets::new().with_target(SPANS, LevelFilter::INFO));
    tracing_subscriber::registry().with(log).with(spans).init();
    TRACING.store(true, Ordering::Relaxed);
    tracing::info!(endpoint = %traces_url(endpoint), "exporting spans over OTLP/HTTP");
    Ok(Some(Tracing(provider)))
}

/// The URL spans are posted to: the endpoint's `/v1/traces`, as OTLP/HTTP's base URL
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`) means it, unless the endpoint names that path.
fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// An OTLP/HTTP protobuf exporter to `endpoint` (over hyper, plain HTTP: a collector
/// beside the gateway), batched by a task of this runtime.
fn provider(endpoint: &str) -> Result<SdkTracerProvider, String> {
    let url = traces_url(endpoint);
    url.parse::<axum::http::Uri>()
        .ok()
        .filter(|uri| uri.scheme_str() == Some("http") && uri.host().is_some())
        .ok_or_else(|| {
            format!("--otlp-endpoint must be an http:// URL (a collector's OTLP/HTTP port): {endpoint:?}")
        })?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(
            opentelemetry_http::hyper::HyperClient::with_default_connector(
                std::time::Duration::from_secs(10),
                None,
            ),
        )
        .with_endpoint(url)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()
        .map_err(|err| format!("cannot export spans: {err}"))?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(SERVICE_NAME)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build())
}

/// A W3C Trace Context `traceparent` (`00-<trace id>-<parent id>-<flags>`), checked
/// when parsed: lowercase hex, ids not all zeros, a known layout.
///
/// A malformed header is ignored, as the W3C recommendation asks of a receiver (a new
/// trace starts), rather than refused: a tracing mistake in a producer must not stop
/// its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent(SpanContext);

impl TraceParent {
    /// The header's value as the request carries it; `None` when absent or malformed.
    pub fn from_headers(headers: &HeaderMap) -> Option<TraceParent> {
        TraceParent::parse(headers.get("traceparent")?.to_str().ok()?)
    }

    /// Parses `text`; `None` unless it is a valid `traceparent`. A later version's
    /// value is read by its version-00 prefix, as the recommendation says.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let bytes = text.as_bytes();
        let lower_hex = |part: &[u8]| {
            part.iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        };
        if bytes.len() < 55 || !lower_hex(&bytes[..2]) || &bytes[..2] == b"ff" {
            return None;
        }
        if (&bytes[..2] == b"00" && bytes.len() != 55) || (bytes.len() > 55 && bytes[55] != b'-') {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let (trace, span, flags) = (&text[3..35], &text[36..52], &text[53..55]);
        if !lower_hex(trace.as_bytes())
            || !lower_hex(span.as_bytes())
            || !lower_hex(flags.as_bytes())
        {
            return None;
        }
        let trace = TraceId::from_hex(trace).ok()?;
        let span = SpanId::from_hex(span).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace == TraceId::INVALID || span == SpanId::INVALID {
            return None;
        }
        Some(TraceParent(SpanContext::new(
            trace,
            span,
            TraceFlags::new(flags) & TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        )))
    }

    /// The `traceparent` of `span`, when it is being exported.
    pub fn of_span(span: &Span) -> Option<TraceParent> {
        let context = span.context();
        let span_context = context.span().span_context().clone();
        span_context.is_valid().then_some(TraceParent(span_context))
    }

    /// The trace id, as 32 hex digits.
    pub fn trace_id(&self) -> String {
        self.0.trace_id().to_string()
    }

    /// Makes `span` continue this trace (its parent, as a remote span).
    pub fn adopt(&self, span: &Span) {
        let parent = opentelemetry::Context::new().with_remote_span_context(self.0.clone());
        let _ = span.set_parent(parent);
    }

    /// Links `span` to this trace (a pop leasing jobs of several traces).
    pub fn link(&self, span: &Span) {
        span.add_link(self.0.clone());
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.0.trace_id(),
            self.0.span_id(),
            self.0.trace_flags().to_u8()
        )
    }
}

/// The span of one request, for OpenTelemetry (disabled unless [`tracing_on`]): named
/// by its method and route template, continuing the caller's `traceparent` if any.
pub fn request_span(method: &str, route: &'static str, id: &str, headers: &HeaderMap) -> Span {
    let span = tracing::info_span!(
        target: SPANS,
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = route,
        http.response.status_code = tracing::field::Empty,
        request_id = id,
        qless.token = tracing::field::Empty,
    );
    if let Some(parent) = TraceParent::from_headers(headers) {
        parent.adopt(&span);
    }
    span
}

/// Records a request span's answer (a 5xx marks the span as an error).
pub fn record_status(span: &Span, status: u16) {
    span.record("http.response.status_code", status);
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of one script call (a child of its request's), for OpenTelemetry.
pub fn call_span(command: &'static str, queue: Option<&str>, jid: Option<&str>) -> Span {
    tracing::info_span!(
        target: SPANS,
        "script",
        otel.name = command,
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        db.system.name = "redis",
        db.operation.name = "EVALSHA",
        qless.command = command,
        qless.queue = queue,
        qless.jid = jid,
    )
}

/// A span in a popped job's trace (its parent: the span that put the job), linked to
/// the pop request's span: the job's trace shows when and by whom it was leased.
pub fn leased(job: &TraceParent, jid: &str, queue: &str, worker: &str) {
    let request = Span::current();
    let span = tracing::info_span!(
        target: SPANS,
        parent: None,
        "leased",
        otel.name = "qless leased",
        otel.kind = "consumer",
        qless.jid = jid,
        qless.queue = queue,
        qless.worker = worker,
    );
    job.adopt(&span);
    if let Some(pop) = TraceParent::of_span(&request) {
        pop.link(&span);
    }
    job.link(&request);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_read_as_the_recommendation_says() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(good).expect("valid");
        assert_eq!(parsed.to_string(), good);
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        // A later version is read by its version-00 prefix.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(TraceParent::parse(later).unwrap().to_string(), good);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_traces_url_is_the_endpoints_v1_traces() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}
