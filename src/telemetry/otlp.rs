//! The span exporter: a span is encoded as it ends into a bounded buffer (when that is
//! full, new ones are dropped and counted, `qless_spans_dropped`: a request never
//! waits for tracing), and a task sends the buffer in batches as OTLP/HTTP
//! `ExportTraceServiceRequest`s (protobuf) to the collector, every
//! `OTEL_BSP_SCHEDULE_DELAY`, as soon as a batch is full, and once more on shutdown.
//!
//! The batching knobs are the OpenTelemetry SDK's `OTEL_BSP_*` variables, with their
//! defaults: `SCHEDULE_DELAY` 5000 ms, `MAX_QUEUE_SIZE` 2048 spans,
//! `MAX_EXPORT_BATCH_SIZE` 512 spans, `EXPORT_TIMEOUT` 30000 ms.
//!
//! # Why the protobuf is written by hand
//!
//! The maintained way is `opentelemetry-proto`'s prost messages. qlessd writes the few
//! messages it sends itself (the field numbers are those of
//! `opentelemetry/proto/trace/v1/trace.proto`; tests decode the result with
//! `opentelemetry-proto` and check the written keys) because of a measurement, on
//! 2026-11-26 with callgrind: building a heartbeat's request span and script-call
//! span as prost messages (`Span`, `KeyValue`, `AnyValue` ...), encoding them in
//! batches of 512 and dropping the messages cost 5,670 instructions per span (a
//! scratch program, mimalloc, `--toggle-collect` on that work alone): a `String` or
//! `Vec` per id, name, attribute key and value, and an `encoded_len` walk per level of
//! nesting. Written here in one pass from the fixed record, encoding a span and adding
//! it to the buffer costs 400 to 500 (`push` in the `gateway-instructions` dumps,
//! 2026-11-27; a few tens more since the room is zeroed before it is written). The whole budget for tracing a request is 5% of it: about 1,450
//! instructions on `GET /healthz` and 2,300 on a heartbeat. (The crate would also
//! have kept the OpenTelemetry SDK, which `opentelemetry-proto` depends on, in the
//! build.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hyper::body::Bytes;
use tokio::sync::{Notify, oneshot};

use super::collector::Collector;
use super::{Record, SERVICE_NAME, What};

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

/// Ended spans, already encoded (as `ScopeSpans.spans` fields), waiting for the
/// exporter.
#[derive(Debug)]
struct Pending {
    bytes: Vec<u8>,
    spans: usize,
    /// Where each full batch ends in `bytes`.
    batches: Vec<usize>,
}

impl Pending {
    const fn new() -> Pending {
        Pending {
            bytes: Vec::new(),
            spans: 0,
            batches: Vec::new(),
        }
    }

    fn with_capacity(bytes: usize) -> Pending {
        Pending {
            bytes: Vec::with_capacity(bytes),
            spans: 0,
            batches: Vec::new(),
        }
    }

    /// Encodes one more span; `true` when it completes a batch of `max_batch`.
    fn add(&mut self, record: &Record<'_>, max_batch: usize) -> bool {
        span(&mut self.bytes, record);
        self.spans += 1;
        let full = self.spans.is_multiple_of(max_batch);
        if full {
            self.batches.push(self.bytes.len());
        }
        full
    }

    /// Takes the spans buffered (all of them, or with `full_only` those of the full
    /// batches, each `max_batch` spans), leaving the rest in a buffer with room for
    /// `capacity` bytes; `None` when there is nothing to take.
    fn take(&mut self, full_only: bool, max_batch: usize, capacity: usize) -> Option<Pending> {
        let taken_end = if full_only {
            *self.batches.last()?
        } else {
            self.bytes.len()
        };
        if taken_end == 0 {
            return None;
        }
        let mut kept = Pending::with_capacity(capacity);
        if full_only {
            kept.spans = self.spans - self.batches.len() * max_batch;
            kept.bytes.extend_from_slice(&self.bytes[taken_end..]);
        }
        let mut taken = std::mem::replace(self, kept);
        taken.bytes.truncate(taken_end);
        taken.spans -= self.spans;
        Some(taken)
    }
}

static PENDING: Mutex<Pending> = Mutex::new(Pending::new());
/// Wakes the exporter when a batch is full.
static FULL: Notify = Notify::const_new();
/// Most spans [`PENDING`] holds (0 until the exporter starts: nothing is kept).
static MAX_QUEUE: AtomicUsize = AtomicUsize::new(0);
/// Spans in a full batch.
static MAX_BATCH: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Hands an ended span to the exporter, or drops it if the buffer is full. The span is
/// encoded here, on the request's thread, straight into the buffer: keeping records
/// for the exporter to encode cost more (moving each into and out of a queue, and
/// dropping it on another thread) than the encoding itself.
pub(super) fn push(record: &Record<'_>) {
    let mut pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    if pending.spans >= MAX_QUEUE.load(Ordering::Relaxed) {
        drop(pending);
        crate::metrics::METRICS.span_dropped();
        return;
    }
    if pending.add(record, MAX_BATCH.load(Ordering::Relaxed)) {
        drop(pending);
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
                    "--otlp-endpoint must be an http:// URL (a collector's OTLP/HTTP port): {:?}",
                    super::without_user_info(url)
                )
            })?;
        let collector = Collector::new(&uri)?;
        MAX_BATCH.store(batching.max_batch, Ordering::Relaxed);
        MAX_QUEUE.store(batching.max_queue, Ordering::Relaxed);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(export(collector, batching, stopped));
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
async fn export(collector: Collector, batching: Batching, mut stopped: oneshot::Receiver<()>) {
    let mut failing = false;
    let mut capacity = 0;
    loop {
        let (stopping, full) = tokio::select! {
            _ = tokio::time::sleep(batching.delay) => (false, false),
            _ = FULL.notified() => (false, true),
            _ = &mut stopped => (true, false),
        };
        // Woken by a full batch, only the full batches are sent: the few spans ended
        // since are kept for the next one (or the next tick) rather than sent in an
        // export request of their own: a request costs the gateway much the same
        // whatever it carries (see `collector.rs`), and that one doubled the
        // requests sent.
        let Some(taken) = take_pending(&mut capacity, full && !stopping) else {
            if stopping {
                return;
            }
            continue;
        };
        let ends: Vec<usize> = taken
            .batches
            .iter()
            .copied()
            .chain([taken.bytes.len()])
            .collect();
        // The batches are slices of one buffer, not copies.
        let bytes = Bytes::from(taken.bytes);
        let mut start = 0;
        for end in ends {
            let batch = bytes.slice(start..end);
            start = end;
            if batch.is_empty() {
                continue;
            }
            let head = Bytes::from(request_start(batch.len()));
            let outcome =
                tokio::time::timeout(batching.timeout, collector.post(&[head, batch])).await;
            let outcome = outcome.unwrap_or_else(|_| Err("timed out".to_owned()));
            // One line when the collector stops answering and one when it is back,
            // rather than one per batch.
            match outcome {
                Err(err) if !failing => {
                    failing = true;
                    tracing::warn!(error = %err, "cannot export spans");
                }
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("exporting spans again");
                }
                _ => {}
            }
        }
        if stopping {
            return;
        }
    }
}

/// Takes the buffered spans (see [`Pending::take`]), leaving a buffer as large as the
/// largest taken so far, so that it seldom grows. The taken buffer is sent as it is:
/// copying a batch (to put the request's header before it, or to keep its buffer)
/// cost as much as encoding it.
fn take_pending(capacity: &mut usize, full_only: bool) -> Option<Pending> {
    let mut pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    // Its capacity, not its length: a span is written into room for its longest
    // form, so a buffer just as long would grow (copying every span in it) for the
    // last span of the round.
    *capacity = (*capacity).max(pending.bytes.capacity());
    pending.take(full_only, MAX_BATCH.load(Ordering::Relaxed), *capacity)
}

/// `Span.SpanKind` values.
const KIND_SERVER: u8 = 2;
const KIND_CLIENT: u8 = 3;
const KIND_CONSUMER: u8 = 5;
/// `SpanFlags`: the W3C sampled flag, then whether the parent is known to be remote
/// (`HAS_IS_REMOTE`) and is (`IS_REMOTE`).
const FLAG_SAMPLED: u32 = 0x1;
const FLAG_HAS_IS_REMOTE: u32 = 0x100;
const FLAG_IS_REMOTE: u32 = 0x200;

/// Tags (field number << 3 | wire type) of the fields written. Wire types: 0 varint,
/// 1 fixed64, 2 length-delimited, 5 fixed32.
mod tag {
    /// `Span`: trace_id = 1, span_id = 2, parent_span_id = 4, name = 5, kind = 6,
    /// start_time_unix_nano = 7, end_time_unix_nano = 8, attributes = 9, links = 13,
    /// status = 15, flags = 16 (two bytes: 16 << 3 | 5 is past 127).
    pub const TRACE_ID: u8 = 1 << 3 | 2;
    pub const SPAN_ID: u8 = 2 << 3 | 2;
    pub const PARENT_SPAN_ID: u8 = 4 << 3 | 2;
    pub const NAME: u8 = 5 << 3 | 2;
    pub const KIND: u8 = 6 << 3;
    pub const START: u8 = 7 << 3 | 1;
    pub const END: u8 = 8 << 3 | 1;
    pub const ATTRIBUTE: u8 = 9 << 3 | 2;
    pub const LINK: u8 = 13 << 3 | 2;
    pub const STATUS: u8 = 15 << 3 | 2;
    pub const FLAGS: [u8; 2] = [(16 << 3 | 5) | 0x80, 1];
    /// `Link`: trace_id = 1, span_id = 2, flags = 6.
    pub const LINK_FLAGS: u8 = 6 << 3 | 5;
    /// `KeyValue.value` = 2; `AnyValue`: string_value = 1, int_value = 3.
    pub const VALUE: u8 = 2 << 3 | 2;
    pub const STRING: u8 = 1 << 3 | 2;
    pub const INT: u8 = 3 << 3;
    /// `ExportTraceServiceRequest.resource_spans` = 1, `ResourceSpans`: resource = 1,
    /// scope_spans = 2; `ScopeSpans`: scope = 1, spans = 2; `Resource.attributes` = 1;
    /// `InstrumentationScope`: name = 1, version = 2; `Status.code` = 3.
    pub const FIELD_1: u8 = 1 << 3 | 2;
    pub const FIELD_2: u8 = 2 << 3 | 2;
    pub const STATUS_CODE: u8 = 3 << 3;
}

/// A script call's two constant attributes, `db.system.name = "redis"` and
/// `db.operation.name = "EVALSHA"`, as written (a test checks them).
const CALL_ATTRIBUTES: &[u8; 59] =
    b"\x4a\x19\x0a\x0edb.system.name\x12\x07\x0a\x05redis\x4a\x1e\x0a\x11db.operation.name\x12\x09\x0a\x07EVALSHA";

/// `Status { code: STATUS_CODE_ERROR }`, as a span's status field.
const STATUS_ERROR: [u8; 4] = [tag::STATUS, 2, tag::STATUS_CODE, 2];

/// Attribute keys as written: `KeyValue.key` (field 1), its length, the key. Written
/// out rather than built per span (a test checks each against its key).
mod key {
    pub const METHOD: &[u8; 21] = b"\x0a\x13http.request.method";
    pub const ROUTE: &[u8; 12] = b"\x0a\x0ahttp.route";
    pub const STATUS: &[u8; 27] = b"\x0a\x19http.response.status_code";
    pub const REQUEST_ID: &[u8; 12] = b"\x0a\x0arequest_id";
    pub const TOKEN: &[u8; 13] = b"\x0a\x0bqless.token";
    // Only in `CALL_ATTRIBUTES`, which a test builds from these.
    #[cfg(test)]
    pub const DB_SYSTEM: &[u8; 16] = b"\x0a\x0edb.system.name";
    #[cfg(test)]
    pub const DB_OPERATION: &[u8; 19] = b"\x0a\x11db.operation.name";
    pub const COMMAND: &[u8; 15] = b"\x0a\x0dqless.command";
    pub const QUEUE: &[u8; 13] = b"\x0a\x0bqless.queue";
    pub const JID: &[u8; 11] = b"\x0a\x09qless.jid";
    pub const WORKER: &[u8; 14] = b"\x0a\x0cqless.worker";
    pub const SERVICE_NAME: &[u8; 14] = b"\x0a\x0cservice.name";
}

/// The start of an `ExportTraceServiceRequest` whose encoded spans, `spans` bytes of
/// them, follow: one resource (`service.name`), one instrumentation scope.
fn request_start(spans: usize) -> Vec<u8> {
    let mut resource = Vec::with_capacity(32);
    attribute(
        &mut resource,
        tag::FIELD_1,
        key::SERVICE_NAME,
        SERVICE_NAME.as_bytes(),
    );
    let mut scope = Vec::with_capacity(32);
    field(&mut scope, tag::FIELD_1, SERVICE_NAME.as_bytes());
    field(
        &mut scope,
        tag::FIELD_2,
        env!("CARGO_PKG_VERSION").as_bytes(),
    );
    let scope_spans_len = field_len(scope.len()) + spans;
    let resource_spans_len = field_len(resource.len()) + field_len(scope_spans_len);
    let mut out = Vec::with_capacity(64);
    header(&mut out, tag::FIELD_1, resource_spans_len);
    field(&mut out, tag::FIELD_1, &resource);
    header(&mut out, tag::FIELD_2, scope_spans_len);
    field(&mut out, tag::FIELD_1, &scope);
    out
}

/// Writes into room made beforehand (zeroed bytes at the end of the buffer, cut back to
/// what was written afterwards).
///
/// Every method is inlined so the position stays in a register: with `header` called
/// (33 call sites in `push`), the position and the slice were stored to and reloaded
/// from the stack around each of a span's thirty-odd writes (8 or 9 instructions a
/// write, now 4). A write past the room panics (a bounds check each).
struct Cursor<'a> {
    room: &'a mut [u8],
    at: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn byte(&mut self, byte: u8) {
        self.room[self.at] = byte;
        self.at += 1;
    }

    /// A fixed number of bytes (copied without a call to `memcpy`).
    #[inline(always)]
    fn array<const N: usize>(&mut self, bytes: &[u8; N]) {
        self.room[self.at..self.at + N].copy_from_slice(bytes);
        self.at += N;
    }

    #[inline(always)]
    fn bytes(&mut self, bytes: &[u8]) {
        self.room[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    #[inline(always)]
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte(value as u8 | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    /// The tag and length of a length-delimited field whose contents follow.
    #[inline(always)]
    fn header(&mut self, tag: u8, len: usize) {
        if len < 128 {
            self.array(&[tag, len as u8]);
        } else {
            self.byte(tag);
            self.varint(len as u64);
        }
    }

    #[inline(always)]
    fn field(&mut self, tag: u8, contents: &[u8]) {
        self.header(tag, contents.len());
        self.bytes(contents);
    }

    /// A `Span.attributes` field: `KeyValue { key, AnyValue { string_value } }`.
    ///
    /// Keys are arrays, so they are copied without a call to `memcpy`; inlined (it
    /// was called, at about 90 instructions a call, eight times a pop).
    #[inline(always)]
    fn attribute<const K: usize>(&mut self, key: &[u8; K], value: &[u8]) {
        // The usual case: every length fits in one byte, so the tags and lengths go
        // in two fixed-size writes.
        if key.len() + value.len() < 120 {
            let any = 2 + value.len();
            self.array(&[tag::ATTRIBUTE, (key.len() + 2 + any) as u8]);
            self.array(key);
            self.array(&[tag::VALUE, any as u8, tag::STRING, value.len() as u8]);
            self.bytes(value);
            return;
        }
        let any = field_len(value.len());
        self.header(tag::ATTRIBUTE, key.len() + field_len(any));
        self.array(key);
        self.header(tag::VALUE, any);
        self.field(tag::STRING, value);
    }

    /// A `Span.attributes` field: `KeyValue { key, AnyValue { int_value } }`.
    #[inline(always)]
    fn int_attribute<const K: usize>(&mut self, key: &[u8; K], value: u64) {
        let any = 1 + varint_len(value);
        self.header(tag::ATTRIBUTE, key.len() + 2 + any);
        self.array(key);
        self.array(&[tag::VALUE, any as u8, tag::INT]);
        self.varint(value);
    }
}

/// Appends one `ScopeSpans.spans` field to `out`: the span's fields in one pass, behind
/// its length, filled in afterwards.
fn span(out: &mut Vec<u8>, record: &Record<'_>) {
    // The variable parts, written at most twice each (a route is in the name and an
    // attribute), bound the span's length; the rest takes fewer than 256 bytes (a
    // request's at most 214, with every length in three bytes; a link 35).
    let variable = match &record.what {
        What::Request {
            method,
            route,
            request_id,
            token,
            ..
        } => method.len() + route.len() + request_id.len() + token.map_or(0, str::len),
        What::Call {
            command,
            queue,
            jid,
        } => {
            command.len()
                + queue.as_ref().map_or(0, |queue| queue.as_bytes().len())
                + jid.as_ref().map_or(0, |jid| jid.as_bytes().len())
        }
        What::Leased { jid, queue, worker } => jid.len() + queue.len() + worker.len(),
        What::Delivery { queue, jid, .. } => queue.as_bytes().len() + jid.as_bytes().len(),
    };
    let bound = 256 + 2 * variable + 40 * record.links.iter().count();
    // The length goes first, in as many bytes as the bound's would take.
    let width = varint_len(bound as u64);
    let start = out.len();
    out.resize(start + 1 + width + bound, 0);
    let room = &mut out[start..];
    let len = write_span(room, 1 + width, record) - 1 - width;
    // When shorter than its bound's width, the span moves back to fit.
    let len_width = varint_len(len as u64);
    if len_width < width {
        room.copy_within(1 + width..1 + width + len, 1 + len_width);
    }
    let mut head = Cursor { room, at: 0 };
    head.byte(tag::FIELD_2);
    head.varint(len as u64);
    out.truncate(start + 1 + len_width + len);
}

/// Writes the fields of one `Span` into `room` from `at`; returns where they end.
///
/// The cursor is this function's own, not a caller's borrowed one: behind a reference,
/// its position was stored to memory and the room's length reloaded around every
/// write (the compiler cannot tell the bytes written from the cursor's fields).
fn write_span(room: &mut [u8], at: usize, record: &Record<'_>) -> usize {
    let mut cursor = Cursor { room, at };
    let out = &mut cursor;
    let context = &record.context;
    out.array(&[tag::TRACE_ID, 16]);
    out.array(&context.trace);
    out.array(&[tag::SPAN_ID, 8]);
    out.array(&context.span);
    if record.parent != [0; 8] {
        out.array(&[tag::PARENT_SPAN_ID, 8]);
        out.array(&record.parent);
    }
    let kind = match &record.what {
        What::Request { method, route, .. } => {
            // "<method> <route>", without building it first.
            out.header(tag::NAME, method.len() + 1 + route.len());
            out.bytes(method.as_bytes());
            out.byte(b' ');
            out.bytes(route.as_bytes());
            KIND_SERVER
        }
        What::Call { command, .. } => {
            out.field(tag::NAME, command.as_bytes());
            KIND_CLIENT
        }
        What::Leased { .. } => {
            out.field(tag::NAME, b"qless leased");
            KIND_CONSUMER
        }
        What::Delivery { .. } => {
            out.field(tag::NAME, b"qless push");
            KIND_CLIENT
        }
    };
    out.array(&[tag::KIND, kind, tag::START]);
    out.array(&record.start.to_le_bytes());
    out.byte(tag::END);
    out.array(&record.end.to_le_bytes());
    match &record.what {
        What::Request {
            method,
            route,
            request_id,
            status,
            token,
        } => {
            out.attribute(key::METHOD, method.as_bytes());
            out.attribute(key::ROUTE, route.as_bytes());
            if *status != 0 {
                out.int_attribute(key::STATUS, u64::from(*status));
            }
            if !request_id.is_empty() {
                out.attribute(key::REQUEST_ID, request_id);
            }
            if let Some(token) = token {
                out.attribute(key::TOKEN, token.as_bytes());
            }
        }
        What::Call {
            command,
            queue,
            jid,
        } => {
            out.array(CALL_ATTRIBUTES);
            out.attribute(key::COMMAND, command.as_bytes());
            if let Some(queue) = queue {
                out.attribute(key::QUEUE, queue.as_bytes());
            }
            if let Some(jid) = jid {
                out.attribute(key::JID, jid.as_bytes());
            }
        }
        What::Delivery { queue, jid, status } => {
            out.attribute(key::QUEUE, queue.as_bytes());
            out.attribute(key::JID, jid.as_bytes());
            if *status != 0 {
                out.int_attribute(key::STATUS, u64::from(*status));
            }
        }
        What::Leased { jid, queue, worker } => {
            out.attribute(key::JID, jid.as_bytes());
            out.attribute(key::QUEUE, queue.as_bytes());
            out.attribute(key::WORKER, worker.as_bytes());
        }
    }
    for link in record.links.iter() {
        // Link { trace_id = 1, span_id = 2, flags = 6 }: 18 + 10 + 5 bytes.
        out.array(&[tag::LINK, 33, tag::TRACE_ID, 16]);
        out.array(&link.trace);
        out.array(&[tag::SPAN_ID, 8]);
        out.array(&link.span);
        out.byte(tag::LINK_FLAGS);
        let flags = u32::from(link.sampled) | FLAG_HAS_IS_REMOTE | FLAG_IS_REMOTE;
        out.array(&flags.to_le_bytes());
    }
    if record.error {
        out.array(&STATUS_ERROR);
    }
    let mut flags = FLAG_SAMPLED | FLAG_HAS_IS_REMOTE;
    if record.remote_parent {
        flags |= FLAG_IS_REMOTE;
    }
    out.array(&tag::FLAGS);
    out.array(&flags.to_le_bytes());
    cursor.at
}

/// Writes an attribute, a `KeyValue` as the field tagged `as_field` (`Span.attributes`,
/// `Resource.attributes`): the written `key` (see [`key`]) and
/// `value = 2: AnyValue { string_value = 1 }`.
fn attribute(out: &mut Vec<u8>, as_field: u8, key: &[u8], value: &[u8]) {
    let any = field_len(value.len());
    header(out, as_field, key.len() + field_len(any));
    out.extend_from_slice(key);
    header(out, tag::VALUE, any);
    field(out, tag::STRING, value);
}

/// The bytes a length-delimited field (of a number below 16) of `len` bytes takes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
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

/// The tag and length of a length-delimited field whose contents follow.
fn header(out: &mut Vec<u8>, tag: u8, len: usize) {
    if len < 128 {
        out.extend_from_slice(&[tag, len as u8]);
    } else {
        out.push(tag);
        varint(out, len as u64);
    }
}

/// A length-delimited field: tag, length, contents.
fn field(out: &mut Vec<u8>, tag: u8, contents: &[u8]) {
    header(out, tag, contents.len());
    out.extend_from_slice(contents);
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    use prost::Message;

    use super::*;
    use crate::telemetry::{Links, Text, TraceParent};

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
                    request_id: b"req-1",
                    status: 503,
                    token: Some("ci"),
                },
                links: {
                    let mut links = Links::default();
                    links.push(context(4, 5));
                    links.push(context(6, 7));
                    links
                },
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
                    queue: Some(Text::new("mail")),
                    // Long enough that its length takes three bytes.
                    jid: Some(Text::new(&"j".repeat(20_000))),
                },
                links: Links::default(),
            },
            Record {
                context: context(9, 10),
                parent: [0; 8],
                remote_parent: false,
                start: 7,
                end: 7,
                error: false,
                what: What::Leased {
                    jid: "j1",
                    queue: "mail",
                    worker: "w1",
                },
                links: Links::default(),
            },
            // Short enough that its length takes one byte.
            Record {
                context: context(11, 12),
                parent: [0; 8],
                remote_parent: false,
                start: 8,
                end: 8,
                error: false,
                what: What::Leased {
                    jid: "",
                    queue: "",
                    worker: "",
                },
                links: Links::default(),
            },
        ];
        let mut spans = Vec::new();
        for record in &batch {
            span(&mut spans, record);
        }
        let mut bytes = request_start(spans.len());
        bytes.extend_from_slice(&spans);
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
        let [request, call, leased, short] = scope.spans.as_slice() else {
            panic!("four spans: {scope:?}");
        };
        assert_eq!(short.span_id, vec![12; 8]);
        assert_eq!(
            attributes(short)[0],
            ("qless.jid".to_owned(), String::new())
        );

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
        assert!(call_attributes.contains(&("qless.jid".into(), "j".repeat(20_000))));

        assert_eq!(leased.name, "qless leased");
        assert_eq!(leased.kind, SpanKind::Consumer as i32);
        assert!(leased.parent_span_id.is_empty());
        assert_eq!(
            attributes(leased)[2],
            ("qless.worker".to_owned(), "w1".to_owned())
        );
    }

    /// The span ids of the spans in `bytes` (encoded `ScopeSpans.spans` fields), in
    /// order: read as the collector reads an export request carrying them.
    fn span_ids(bytes: &[u8]) -> Vec<u8> {
        let mut request = request_start(bytes.len());
        request.extend_from_slice(bytes);
        let decoded = ExportTraceServiceRequest::decode(request.as_slice()).expect("protobuf");
        decoded.resource_spans[0].scope_spans[0]
            .spans
            .iter()
            .map(|span| span.span_id[0])
            .collect()
    }

    fn leased_span(id: u8) -> Record<'static> {
        Record {
            context: context(1, id),
            parent: [0; 8],
            remote_parent: false,
            start: 1,
            end: 2,
            error: false,
            what: What::Leased {
                jid: "j",
                queue: "q",
                worker: "w",
            },
            links: Links::default(),
        }
    }

    /// Texts of every length from none to 40 bytes are written whole.
    #[test]
    fn texts_of_every_short_length_are_written_whole() {
        let texts: Vec<String> = (0..=40)
            .map(|len| {
                (0..len)
                    .map(|at| char::from(b'a' + (at % 26) as u8))
                    .collect()
            })
            .collect();
        let mut spans = Vec::new();
        for text in &texts {
            let mut record = leased_span(1);
            record.what = What::Leased {
                jid: text,
                queue: &text[..text.len() / 2],
                worker: "w",
            };
            span(&mut spans, &record);
        }
        let mut request = request_start(spans.len());
        request.extend_from_slice(&spans);
        let decoded = ExportTraceServiceRequest::decode(request.as_slice()).expect("protobuf");
        let written = &decoded.resource_spans[0].scope_spans[0].spans;
        assert_eq!(written.len(), texts.len());
        for (span, text) in written.iter().zip(&texts) {
            assert_eq!(
                attributes(span)[..2],
                [
                    ("qless.jid".to_owned(), text.clone()),
                    ("qless.queue".to_owned(), text[..text.len() / 2].to_owned())
                ]
            );
        }
    }

    /// Woken by a full batch, the exporter takes only the full batches; the spans
    /// ended since wait for the next batch (or the next tick, which takes everything),
    /// rather than going out in an export request of their own.
    #[test]
    fn a_full_batch_is_taken_without_the_spans_after_it() {
        let mut pending = Pending::new();
        assert!(pending.take(true, 4, 0).is_none(), "nothing buffered");
        let full: Vec<bool> = (1..=6).map(|id| pending.add(&leased_span(id), 4)).collect();
        assert_eq!(full, [false, false, false, true, false, false]);

        let taken = pending.take(true, 4, 1024).expect("a full batch");
        assert_eq!(span_ids(&taken.bytes), [1, 2, 3, 4]);
        assert_eq!((taken.spans, taken.batches.len()), (4, 1));
        assert_eq!(span_ids(&pending.bytes), [5, 6]);
        assert_eq!(pending.spans, 2);
        assert!(pending.bytes.capacity() >= 1024);
        assert!(pending.take(true, 4, 0).is_none(), "no full batch yet");

        // The two kept make the next batch with two more.
        let full: Vec<bool> = (7..=9).map(|id| pending.add(&leased_span(id), 4)).collect();
        assert_eq!(full, [false, true, false]);
        let taken = pending.take(true, 4, 0).expect("a full batch");
        assert_eq!(span_ids(&taken.bytes), [5, 6, 7, 8]);

        // A tick takes what is left, however few.
        let taken = pending.take(false, 4, 0).expect("one span");
        assert_eq!(span_ids(&taken.bytes), [9]);
        assert_eq!(taken.spans, 1);
        assert_eq!((pending.spans, pending.bytes.len()), (0, 0));
        assert!(pending.take(false, 4, 0).is_none());
    }

    #[test]
    fn written_keys_are_field_one_with_their_length() {
        let keys: [&[u8]; 12] = [
            key::METHOD,
            key::ROUTE,
            key::STATUS,
            key::REQUEST_ID,
            key::TOKEN,
            key::DB_SYSTEM,
            key::DB_OPERATION,
            key::COMMAND,
            key::QUEUE,
            key::JID,
            key::WORKER,
            key::SERVICE_NAME,
        ];
        for key in keys {
            assert_eq!(key[0], 0x0a, "{key:?}");
            assert_eq!(usize::from(key[1]), key.len() - 2, "{key:?}");
        }
    }

    #[test]
    fn the_constant_call_attributes_are_written_as_any_other() {
        let mut written = Vec::new();
        attribute(&mut written, tag::ATTRIBUTE, key::DB_SYSTEM, b"redis");
        attribute(&mut written, tag::ATTRIBUTE, key::DB_OPERATION, b"EVALSHA");
        assert_eq!(written, CALL_ATTRIBUTES);
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
