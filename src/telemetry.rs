//! Logging and tracing setup: text or JSON log lines, filtered by `RUST_LOG` (default
//! `info`), stamped by a per-second cached timer (`timestamps.rs`) and written to stdout
//! by a thread of their own (`tracing-appender`'s non-blocking writer, see [`init_log`]),
//! and, with `--otlp-endpoint`, OpenTelemetry spans exported over OTLP/HTTP
//! (protobuf): one per request and a child per script call.
//!
//! The spans are not `tracing` spans: a request made two of those through
//! `tracing-opentelemetry` and the OpenTelemetry SDK's batch processor, which more than
//! doubled the gateway's instructions per request (+105% on `GET /healthz`, +142% on a
//! heartbeat; `docs/archive/benchmarks-2026-11.md`). qlessd makes only a few kinds of span, so each is
//! a small fixed [`Span`] (ids, times, `&'static str` names, the few values it
//! carries), encoded when it ends into a bounded buffer that a background task posts
//! (`otlp.rs`). The ids come from a per-thread generator seeded from the
//! operating system. Without an endpoint a request pays one relaxed atomic load
//! ([`tracing_on`]) for all of this.
//!
//! The request's span is the current one while its handler runs (a thread-local set
//! around each poll of the request's future, as `tracing` does for its spans), so the
//! script calls it makes are its children wherever in `core` they are made.
//!
//! Sampling follows the parent: a request continuing a `traceparent` whose sampled
//! flag is clear is not exported (nor are its calls), yet it still gets ids of its own,
//! which it passes on. A new trace is exported as `--otlp-sample-ratio` says (by
//! default, every one).
//!
//! A job carries its trace as a W3C `traceparent` (see [`TraceParent`]): the request
//! that puts it continues the caller's trace, the job stores the put's span, and the
//! requests that pop it, and a worker's requests naming its `traceparent`, continue
//! that trace, so a job's whole life reads as one trace.

mod collector;
mod otlp;
mod timestamps;

use std::cell::{Cell, RefCell};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// The service name spans are exported under.
const SERVICE_NAME: &str = "qlessd";

/// Whether spans are exported (set once, at start-up, by [`init`]).
static TRACING: AtomicBool = AtomicBool::new(false);

/// A new trace is sampled when the low 64 bits of its id are below this (`u64::MAX`:
/// every trace), as OpenTelemetry's `TraceIdRatioBased` sampler decides.
static SAMPLED_BELOW: AtomicU64 = AtomicU64::new(u64::MAX);

/// The [`SAMPLED_BELOW`] of a ratio from 0 to 1.
fn sampled_below(ratio: f64) -> u64 {
    // Saturating: a ratio of 1 is `u64::MAX`, every trace.
    (ratio * 2f64.powi(64)) as u64
}

/// Whether a new trace is exported (`--otlp-sample-ratio`).
fn sample_new(trace: &[u8; 16]) -> bool {
    sampled(trace, SAMPLED_BELOW.load(Ordering::Relaxed))
}

fn sampled(trace: &[u8; 16], below: u64) -> bool {
    let low = u64::from_be_bytes(trace[8..].try_into().expect("8 bytes"));
    below == u64::MAX || low < below
}

/// Whether spans are being exported: the request path makes them only then.
#[inline]
pub fn tracing_on() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// The exporter, kept by `main` to flush the spans still buffered on the way out.
#[derive(Debug)]
pub struct Tracing(otlp::Exporter);

impl Tracing {
    /// Exports the spans still buffered (within the export timeout) and stops.
    pub async fn shutdown(self) {
        self.0.shutdown().await;
    }
}

/// Log lines waiting for the log's thread, at most: past that a line waits for room
/// (about 1 to 2 MiB of the access log's lines).
const MAX_BUFFERED_LINES: usize = 8192;

/// The log's writer thread, kept by `main` until the process exits: dropping it writes
/// out the lines still buffered (waiting up to a second), then stops the thread.
#[derive(Debug)]
#[must_use = "dropping the guard stops the log"]
pub struct LogGuard {
    _worker: tracing_appender::non_blocking::WorkerGuard,
}

/// Installs the global subscriber: the log, on stdout. Call once per process.
///
/// Lines go through `tracing-appender`'s non-blocking writer: a request's thread puts
/// its formatted line in a bounded queue and a thread of the writer's writes them
/// out, so a `write` system call (about a third of what logging a request cost) is
/// not made on the request's thread. When [`MAX_BUFFERED_LINES`] are waiting (stdout
/// is not keeping up: a full pipe, a stalled log collector), a new line waits for
/// room, as a direct write would have waited for the pipe: nothing is dropped, so
/// there is no count of dropped lines. (A process killed outright loses the lines
/// still queued, as it would lose those in any pipe's buffer.)
///
/// A writer thread of our own (a shared buffer swapped every 5 ms) cost 2.0% fewer of
/// the gateway's instructions per job: 115,721 against 118,036, most of it the
/// crate's allocation, channel and wake-up per line
/// (`benches/worker_path_instructions.py --jobs 3000`, 2026-11-29): below the 3% that
/// owning one has to pay for.
pub fn init_log(format: LogFormat) -> LogGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes help a person at a terminal and litter a file, a pipe or a
    // container's log with escape sequences (and `NO_COLOR` asks for none at all).
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // Lines that gather while the thread writes go out in one `write` (stdout alone
    // writes each line as it ends); the thread flushes once the queue is empty.
    let stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout());
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(MAX_BUFFERED_LINES)
        .thread_name("qlessd-log")
        .finish(stdout);
    let log = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .fmt_fields(crate::log_fields::TextFields)
            .with_timer(timestamps::Timestamps)
            .with_writer(writer)
            .with_ansi(colour)
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_timer(timestamps::Timestamps)
            .with_writer(writer)
            .with_filter(filter)
            .boxed(),
    };
    tracing_subscriber::registry().with(log).init();
    LogGuard { _worker: guard }
}

/// With `otlp_endpoint`, starts the span exporter. Call once per process, after
/// [`init_log`] and inside the Tokio runtime (the exporter's batches are sent by a
/// task of it).
pub fn init_tracing(
    otlp_endpoint: Option<&str>,
    sample_ratio: f64,
) -> Result<Option<Tracing>, String> {
    let Some(endpoint) = otlp_endpoint else {
        return Ok(None);
    };
    let url = traces_url(endpoint);
    let exporter = otlp::Exporter::start(&url, otlp::Batching::from_env())?;
    SAMPLED_BELOW.store(sampled_below(sample_ratio), Ordering::Relaxed);
    TRACING.store(true, Ordering::Relaxed);
    tracing::info!(endpoint = %without_user_info(&url), "exporting spans over OTLP/HTTP");
    Ok(Some(Tracing(exporter)))
}

/// `url` without any user information (`user:password@`), to be logged or shown.
fn without_user_info(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
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

/// A W3C Trace Context `traceparent` (`00-<trace id>-<parent id>-<flags>`), checked
/// when parsed: lowercase hex, ids not all zeros, a known layout. It is also the
/// context of a span of ours: its trace, its own id, whether it is exported.
///
/// A malformed header is ignored, as the W3C recommendation asks of a receiver (a new
/// trace starts), rather than refused: a tracing mistake in a producer must not stop
/// its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace: [u8; 16],
    span: [u8; 8],
    sampled: bool,
}

impl TraceParent {
    /// The header's value as the request carries it; `None` when absent or malformed.
    pub fn from_headers(headers: &HeaderMap) -> Option<TraceParent> {
        TraceParent::parse(headers.get("traceparent")?.to_str().ok()?)
    }

    /// Parses `text`; `None` unless it is a valid `traceparent`. A later version's
    /// value is read by its version-00 prefix, as the recommendation says.
    ///
    /// The ids are read eight digits at a time ([`hex8`]): a pop parses the
    /// `traceparent` of every job it leases, and reading them a digit at a time
    /// through a table cost 432 instructions a header (the `gateway-instructions`
    /// dumps).
    pub fn parse(text: &str) -> Option<TraceParent> {
        TraceParent::parse_bytes(text.as_bytes())
    }

    /// [`TraceParent::parse`] of a header's bytes: every byte it reads is checked as
    /// it is read, so the header needs no text check first (`HeaderValue::to_str`
    /// checks each byte: about 160 instructions a `traceparent`).
    fn parse_bytes(bytes: &[u8]) -> Option<TraceParent> {
        if bytes.len() < 55 {
            return None;
        }
        let version = hex_byte(bytes[0], bytes[1])?;
        if version == 0xff
            || (version == 0 && bytes.len() != 55)
            || (bytes.len() > 55 && bytes[55] != b'-')
        {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let digits: &[u8; 55] = bytes[..55].try_into().expect("55 bytes");
        let trace = u128::from(hex8_at(digits, 3)?) << 96
            | u128::from(hex8_at(digits, 11)?) << 64
            | u128::from(hex8_at(digits, 19)?) << 32
            | u128::from(hex8_at(digits, 27)?);
        let span = u64::from(hex8_at(digits, 36)?) << 32 | u64::from(hex8_at(digits, 44)?);
        let sampled = hex_byte(bytes[53], bytes[54])? & 1 == 1;
        if trace == 0 || span == 0 {
            return None;
        }
        Some(TraceParent {
            trace: trace.to_be_bytes(),
            span: span.to_be_bytes(),
            sampled,
        })
    }

    /// The trace id, as 32 hex digits.
    pub fn trace_id(&self) -> String {
        let mut text = [0; 32];
        write_hex(&mut text, &self.trace);
        ascii_string(&text)
    }

    /// The header's text (version 00), written into an array first: pushed a
    /// character at a time (each push checking the capacity and encoding a `char`)
    /// it cost 600 instructions a put (the `gateway-instructions` dumps).
    pub fn to_header(&self) -> String {
        let mut text = [0; 55];
        text[..3].copy_from_slice(b"00-");
        write_hex(&mut text[3..35], &self.trace);
        text[35] = b'-';
        write_hex(&mut text[36..52], &self.span);
        text[52..].copy_from_slice(if self.sampled { b"-01" } else { b"-00" });
        ascii_string(&text)
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_header())
    }
}

/// The value of each lowercase hex digit; 0x80 for any other byte.
static HEX: [u8; 256] = {
    let mut table = [0x80; 256];
    let mut digit = 0;
    while digit < 16 {
        table[b"0123456789abcdef"[digit] as usize] = digit as u8;
        digit += 1;
    }
    table
};

/// [`hex8`] of the eight digits of `header` from `at`.
#[inline(always)]
fn hex8_at(header: &[u8; 55], at: usize) -> Option<u32> {
    let mut digits = [0; 8];
    digits.copy_from_slice(&header[at..at + 8]);
    hex8(u64::from_be_bytes(digits))
}

/// The 32 bits eight lowercase hex digits write, the digits given as a big-endian word
/// (the first digit its highest byte); `None` if any byte is not such a digit. All
/// eight bytes are read at once, in the word's lanes.
#[inline(always)]
fn hex8(word: u64) -> Option<u32> {
    const LANES: u64 = 0x0101_0101_0101_0101;
    // Each byte read as the digit it would be: its low half, plus 9 for a letter (bit
    // 6 set: 'a' is 0x61). That gives 0 to 24 whatever the byte ...
    let letters = (word >> 6) & LANES;
    let values = (word & (0x0f * LANES)) + 9 * letters;
    // ... and a byte is a digit exactly when its value is below 16 and, written
    // back as a lowercase digit, it is the byte again. No lane carries
    // into the next: a lane never exceeds 111.
    let tens = ((values + 6 * LANES) >> 4) & LANES;
    let written = values + 0x30 * LANES + 39 * tens;
    if written != word || values & (0x10 * LANES) != 0 {
        return None;
    }
    // The pairs of lanes as bytes, then the bytes side by side.
    let bytes = ((values >> 4) | values) & 0x00ff_00ff_00ff_00ff;
    let pairs = (bytes | (bytes >> 8)) & 0x0000_ffff_0000_ffff;
    Some(((pairs >> 16) | pairs) as u32)
}

/// The byte two lowercase hex digits write; `None` if either is not one.
fn hex_byte(high: u8, low: u8) -> Option<u8> {
    let (high, low) = (HEX[usize::from(high)], HEX[usize::from(low)]);
    ((high | low) & 0x80 == 0).then_some(high << 4 | low)
}

/// Writes `bytes` as lowercase hex digits into `out`, two per byte, each byte's pair
/// from a table: a put writes its span's `traceparent` (24 bytes), and converting
/// each half-byte on the way cost 214 instructions a put (the `gateway-instructions`
/// dumps).
fn write_hex(out: &mut [u8], bytes: &[u8]) {
    for (at, byte) in bytes.iter().enumerate() {
        out[2 * at..2 * at + 2].copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
    }
}

/// The two lowercase hex digits of each byte.
static HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 15]];
        byte += 1;
    }
    pairs
};

/// A `String` of ASCII bytes (hex digits and dashes).
fn ascii_string(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("hex digits and dashes are ASCII")
}

thread_local! {
    /// The span of the request whose handler this thread is polling, if any.
    static CURRENT: Cell<Option<TraceParent>> = const { Cell::new(None) };
    /// The first link for the current request's span added while its handler runs
    /// (a pop links the trace of each job it leased): checked after every poll, so a
    /// value without a destructor, whose thread-local is not checked for registration
    /// on each access (with the links in a `RefCell<Vec<_>>`, a pop cost about 90
    /// instructions more).
    static FIRST_LINK: Cell<Option<TraceParent>> = const { Cell::new(None) };
    /// Links after the first (a pop leasing several jobs) ...
    static MORE_LINKS: RefCell<Vec<TraceParent>> = const { RefCell::new(Vec::new()) };
    /// ... and whether it holds any.
    static MORE_LINKED: Cell<bool> = const { Cell::new(false) };
    /// The state of this thread's id generator (0: not seeded yet).
    static RANDOM: Cell<u64> = const { Cell::new(0) };
}

/// The current request's span context, when spans are exported and a request is being
/// handled on this thread.
pub fn current() -> Option<TraceParent> {
    CURRENT.get()
}

/// 64 random bits: wyrand, per thread, seeded once from the operating system. Span
/// ids need to be unique, not secret, and a system call per id would cost more than
/// the rest of the span.
fn random() -> u64 {
    let mixed = random_wide();
    (mixed >> 64) as u64 ^ mixed as u64
}

/// One step of [`random`] before its halves are folded: 128 bits, one draw.
fn random_wide() -> u128 {
    let mut state = RANDOM.get();
    if state == 0 {
        state = getrandom::u64().unwrap_or_else(|_| {
            // No entropy source: the clock and the thread still tell threads and
            // processes apart.
            let on_this_stack = 0u8;
            let thread = std::ptr::addr_of!(on_this_stack) as u64;
            unix_nanos() ^ thread.rotate_left(32) ^ u64::from(std::process::id())
        }) | 1;
    }
    state = state.wrapping_add(0xa076_1d64_78bd_642f);
    RANDOM.set(state);
    u128::from(state) * u128::from(state ^ 0xe703_7ed1_a0b4_28db)
}

/// A span id: 8 random bytes, never all zeros.
fn new_span_id() -> [u8; 8] {
    loop {
        let id = random();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

/// A trace id: 16 random bytes, never all zeros, from one draw. Its halves swapped:
/// the product's high half, the better mixed, is the low one that sampling reads.
fn new_trace_id() -> [u8; 16] {
    let id = random_wide().rotate_left(64);
    (id | u128::from(id == 0)).to_be_bytes()
}

/// Nanoseconds since the Unix epoch, as OTLP wants span times (0 for a clock set
/// before 1970).
fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// A short text kept inline (request ids, jids, queue and worker names are short), a
/// longer one on the heap: no allocation per span in the usual case, and nothing for
/// the exporter's thread to free. Only ever made from a `&str`, so its bytes are UTF-8.
#[derive(Clone)]
enum Text {
    Inline { len: u8, bytes: [u8; 46] },
    Heap(Box<[u8]>),
}

impl Text {
    fn new(text: &str) -> Text {
        Text::from_ascii(text.as_bytes())
    }

    /// From bytes that are UTF-8 (ASCII, or a `&str`'s).
    fn from_ascii(from: &[u8]) -> Text {
        let mut bytes = [0; 46];
        match bytes.get_mut(..from.len()) {
            Some(inline) => {
                inline.copy_from_slice(from);
                Text::Inline {
                    len: from.len() as u8,
                    bytes,
                }
            }
            None => Text::Heap(from.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Text::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Text::Heap(bytes) => bytes,
        }
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        String::from_utf8_lossy(self.as_bytes()).fmt(f)
    }
}

/// A span's links: usually none or one (a pop leasing one job), kept inline.
#[derive(Debug, Default)]
struct Links {
    first: Option<TraceParent>,
    more: Vec<TraceParent>,
}

impl Links {
    fn push(&mut self, link: TraceParent) {
        if self.first.is_none() {
            self.first = Some(link);
        } else {
            self.more.push(link);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &TraceParent> {
        self.first.iter().chain(&self.more)
    }
}

/// What a span is about: its name and attributes follow from it. Texts known only as
/// a span ends (a request's id and token, a lease's names) are borrowed (`'a`) for its
/// encoding, not copied into the record; a script call's are copied when it starts.
#[derive(Debug)]
enum What<'a> {
    /// A request: `<method> <route>`, a server span.
    Request {
        method: &'static str,
        route: &'static str,
        /// Given as the request ends (empty until then).
        request_id: &'a [u8],
        /// The response's status (0: no response, the client went away).
        status: u16,
        token: Option<&'a str>,
    },
    /// A script call, named by its command: a client span.
    Call {
        command: &'static str,
        queue: Option<Text>,
        jid: Option<Text>,
    },
    /// A push delivery of a job (`qless push`), in the job's own trace: a client span,
    /// whose context is the `traceparent` the delivery carries.
    Delivery {
        queue: Text,
        jid: Text,
        /// The answer's status (0: none came).
        status: u16,
    },
    /// A job leased by a pop, in the job's own trace: a consumer span. Encoded as it
    /// is made, so its texts are borrowed, not copied into the record.
    Leased {
        jid: &'a str,
        queue: &'a str,
        worker: &'a str,
    },
}

/// What is exported of a span, once it ends.
#[derive(Debug)]
struct Record<'a> {
    context: TraceParent,
    /// The parent's span id (all zeros: a root span).
    parent: [u8; 8],
    /// Whether the parent is another process's (a `traceparent` we were sent).
    remote_parent: bool,
    start: u64,
    end: u64,
    error: bool,
    what: What<'a>,
    links: Links,
}

/// A span being recorded, exported when it ends (by [`Span::end`] or when dropped: a
/// request abandoned by its client still leaves its span). One that is not sampled
/// has a context to pass on and records nothing.
#[derive(Debug)]
pub struct Span {
    context: TraceParent,
    record: Option<Record<'static>>,
}

impl Span {
    /// Starts a span, a child of `parent` (a new trace without one) if that is sampled.
    fn start(
        parent: Option<TraceParent>,
        remote: bool,
        what: impl FnOnce() -> What<'static>,
    ) -> Span {
        let (trace, parent_id, sampled) = match parent {
            Some(parent) => (parent.trace, parent.span, parent.sampled),
            None => {
                let trace = new_trace_id();
                (trace, [0; 8], sample_new(&trace))
            }
        };
        let context = TraceParent {
            trace,
            span: new_span_id(),
            sampled,
        };
        let record = sampled.then(|| Record {
            context,
            parent: parent_id,
            remote_parent: remote && parent.is_some(),
            start: unix_nanos(),
            end: 0,
            error: false,
            what: what(),
            links: Links::default(),
        });
        Span { context, record }
    }

    /// Whether the span is sampled and not ended yet.
    pub fn is_recording(&self) -> bool {
        self.record.is_some()
    }

    /// The span's context, as a `traceparent` to hand on.
    pub fn context(&self) -> TraceParent {
        self.context
    }

    /// Makes this the current span until the guard is dropped (around each poll of the
    /// request's future): script calls made meanwhile are its children.
    pub fn enter(&mut self) -> Entered<'_> {
        let outer = CURRENT.replace(Some(self.context));
        Entered { span: self, outer }
    }

    /// Ends the span now and hands it to the exporter.
    pub fn end(mut self) {
        self.export();
    }

    /// Encodes the span for the exporter, in place (a record is a few hundred bytes,
    /// not worth moving), and marks it exported.
    fn export(&mut self) {
        if let Some(record) = &mut self.record {
            if record.end == 0 {
                record.end = unix_nanos().max(record.start);
            }
            otlp::push(record);
            self.record = None;
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.export();
    }
}

/// The guard of [`Span::enter`]: puts the outer current span back, and keeps the links
/// added meanwhile.
#[derive(Debug)]
pub struct Entered<'a> {
    span: &'a mut Span,
    outer: Option<TraceParent>,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        CURRENT.set(self.outer);
        let Some(first) = FIRST_LINK.take() else {
            return;
        };
        if let Some(record) = &mut self.span.record {
            record.links.push(first);
        }
        if MORE_LINKED.replace(false) {
            MORE_LINKS.with_borrow_mut(|more| {
                if let Some(record) = &mut self.span.record {
                    for link in more.iter() {
                        record.links.push(*link);
                    }
                }
                more.clear();
            });
        }
    }
}

/// The span of one request (a server span): named by its method and route template,
/// continuing the caller's `traceparent` if any.
pub fn request_span(method: &'static str, route: &'static str, headers: &HeaderMap) -> Span {
    static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
    // By a ready-made name: looking a header up by `&str` parses the name first. A
    // request's few headers are scanned rather than hashed (152 instructions a
    // lookup): a standard header's name differs from ours at its representation.
    let value = if headers.len() <= 12 {
        headers
            .iter()
            .find_map(|(name, value)| (*name == TRACEPARENT).then_some(value))
    } else {
        headers.get(&TRACEPARENT)
    };
    let parent = value.and_then(|value| TraceParent::parse_bytes(value.as_bytes()));
    Span::start(parent, true, || What::Request {
        method,
        route,
        request_id: b"",
        status: 0,
        token: None,
    })
}

/// Ends a request's span with its answer (a 5xx marks the span as an error; 0: the
/// client went away first), `took` after it started, its id, and the name of the token
/// it was let through with. The middleware calls it when the request is answered or
/// abandoned.
pub fn end_request(
    span: &mut Span,
    status: u16,
    took: Duration,
    id: &HeaderValue,
    token: Option<&Arc<str>>,
) {
    let Some(record) = span.record.take() else {
        return;
    };
    // The same record, borrowing the id and the token's name for its encoding.
    let mut record: Record<'_> = record;
    record.end = record.start + took.as_nanos() as u64;
    record.error = status >= 500;
    if let What::Request {
        request_id,
        status: answered,
        token: name,
        ..
    } = &mut record.what
    {
        // A request id is usually visible ASCII (ours are UUIDs); one that is not
        // UTF-8 cannot be a string attribute.
        *request_id = if id.as_bytes().is_ascii() {
            id.as_bytes()
        } else {
            b"-"
        };
        *answered = status;
        *name = token.map(|name| &**name);
    }
    otlp::push(&record);
}

/// The span of one script call (a client span), a child of the current request's.
pub fn call_span(command: &'static str, queue: Option<&str>, jid: Option<&str>) -> Span {
    Span::start(current(), false, || What::Call {
        command,
        queue: queue.map(Text::new),
        jid: jid.map(Text::new),
    })
}

/// Ends a script call's span, marked as an error if the call failed.
pub fn end_call(span: &mut Span, failed: bool) {
    if let Some(record) = &mut span.record {
        record.error = failed;
    }
    span.export();
}

/// The span of a push delivery (a client span) in the job's trace: a child of the span
/// that put the job (`traceparent`, the job's), or the root of a new trace when the
/// job has none. Its context is what the delivery sends as `traceparent`.
pub fn delivery_span(traceparent: Option<&str>, queue: &str, jid: &str) -> Span {
    let parent = traceparent.and_then(TraceParent::parse);
    Span::start(parent, true, || What::Delivery {
        queue: Text::new(queue),
        jid: Text::new(jid),
        status: 0,
    })
}

/// Ends a delivery's span with the answer's status (none: no answer, an error, as a
/// 5xx is).
pub fn end_delivery(mut span: Span, status: Option<u16>) {
    if let Some(record) = &mut span.record {
        record.error = status.is_none_or(|status| status >= 500);
        if let What::Delivery {
            status: answered, ..
        } = &mut record.what
        {
            *answered = status.unwrap_or(0);
        }
    }
    span.end();
}

/// A span in a popped job's trace (its parent: the span that put the job), linked to
/// the pop request's span, which is linked back: the job's trace shows when and by
/// whom it was leased.
pub fn leased(job: &TraceParent, jid: &str, queue: &str, worker: &str) {
    let pop = current();
    if pop.is_some() {
        match FIRST_LINK.get() {
            None => FIRST_LINK.set(Some(*job)),
            Some(_) => {
                MORE_LINKS.with_borrow_mut(|more| more.push(*job));
                MORE_LINKED.set(true);
            }
        }
    }
    // Sampled as its parent, the put's span, was (nothing to export otherwise: its id
    // is passed on to no one).
    if !job.sampled {
        return;
    }
    let start = unix_nanos();
    let mut record = Record {
        context: TraceParent {
            trace: job.trace,
            span: new_span_id(),
            sampled: true,
        },
        parent: job.span,
        remote_parent: true,
        start,
        end: start,
        error: false,
        what: What::Leased { jid, queue, worker },
        links: Links::default(),
    };
    if let Some(pop) = pop {
        record.links.push(pop);
    }
    otlp::push(&record);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pop leasing several jobs links each one's trace from its span, in order,
    /// and leaves none behind for the next request polled on the thread.
    #[test]
    fn a_pop_links_every_job_it_leased() {
        let mut pop = Span::start(None, true, || What::Request {
            method: "POST",
            route: "/v1/queues/{queue}/pop",
            request_id: b"",
            status: 0,
            token: None,
        });
        let jobs: Vec<TraceParent> = (1..=3)
            .map(|n| TraceParent {
                trace: [n; 16],
                span: [n; 8],
                sampled: n != 2,
            })
            .collect();
        {
            let _entered = pop.enter();
            for job in &jobs {
                leased(job, "j", "q", "w");
            }
        }
        let links = |span: &Span| -> Vec<TraceParent> {
            span.record
                .as_ref()
                .unwrap()
                .links
                .iter()
                .copied()
                .collect()
        };
        assert_eq!(links(&pop), jobs);
        let mut next = Span::start(None, true, || What::Request {
            method: "GET",
            route: "/healthz",
            request_id: b"",
            status: 0,
            token: None,
        });
        drop(next.enter());
        assert!(links(&next).is_empty());
        assert_eq!(links(&pop).len(), 3);
    }

    #[test]
    fn an_endpoint_is_shown_without_its_user_information() {
        assert_eq!(
            without_user_info("http://someone:secret@collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            without_user_info("http://collector:4318/v1/traces?a=b@c"),
            "http://collector:4318/v1/traces?a=b@c"
        );
        assert_eq!(without_user_info("collector:4318"), "collector:4318");
    }

    #[test]
    fn traceparents_are_read_as_the_recommendation_says() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(good).expect("valid");
        assert_eq!(parsed.to_string(), good);
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        // A later version is read by its version-00 prefix.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(TraceParent::parse(later).unwrap().to_string(), good);
        // Flags other than sampled are not passed on.
        let flagged = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03";
        assert_eq!(TraceParent::parse(flagged).unwrap().to_string(), good);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert_eq!(
            TraceParent::parse(unsampled).unwrap().to_string(),
            unsampled
        );
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
    fn eight_digits_are_read_as_the_table_reads_them() {
        // Every byte in every position, among valid digits, against the table.
        let by_table = |digits: &[u8; 8]| -> Option<u32> {
            digits.iter().try_fold(0u32, |value, &digit| {
                let nibble = HEX[usize::from(digit)];
                (nibble & 0x80 == 0).then_some(value << 4 | u32::from(nibble))
            })
        };
        let mut digits = *b"0a1b2c3f";
        assert_eq!(hex8(u64::from_be_bytes(digits)), Some(0x0a1b_2c3f));
        for at in 0..8 {
            for byte in 0..=255u8 {
                let original = digits[at];
                digits[at] = byte;
                let word = u64::from_be_bytes(digits);
                assert_eq!(hex8(word), by_table(&digits), "{digits:?}");
                digits[at] = original;
            }
        }
        for digits in [
            b"00000000",
            b"ffffffff",
            b"99999999",
            b"aaaaaaaa",
            b"09af90fa",
        ] {
            assert_eq!(hex8(u64::from_be_bytes(*digits)), by_table(digits));
        }
    }

    #[test]
    fn hex_is_written_as_formatting_writes_it() {
        for bytes in [
            [0u8; 4],
            [0xff; 4],
            [0x01, 0x23, 0xab, 0xcd],
            [0x9a, 0xf0, 0x0f, 0x5e],
        ] {
            let mut out = [0; 8];
            write_hex(&mut out, &bytes);
            let expected: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
            assert_eq!(std::str::from_utf8(&out).unwrap(), expected);
        }
        for byte in 0..=255u8 {
            let mut out = [0; 8];
            write_hex(&mut out, &[byte, 0, byte, 7]);
            assert_eq!(
                std::str::from_utf8(&out).unwrap(),
                format!("{byte:02x}00{byte:02x}07")
            );
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

    #[test]
    fn a_sample_ratio_decides_by_the_trace_ids_low_half() {
        let trace = |low: u64| {
            let mut id = [7; 16];
            id[8..].copy_from_slice(&low.to_be_bytes());
            id
        };
        assert_eq!(sampled_below(1.0), u64::MAX);
        assert_eq!(sampled_below(0.0), 0);
        assert_eq!(sampled_below(0.5), 1 << 63);
        // Every trace with a ratio of 1, even the one whose low half is all ones.
        assert!(sampled(&trace(u64::MAX), sampled_below(1.0)));
        assert!(!sampled(&trace(0), sampled_below(0.0)));
        let half = sampled_below(0.5);
        assert!(sampled(&trace(half - 1), half));
        assert!(!sampled(&trace(half), half));
    }

    #[test]
    fn ids_are_fresh_and_never_zero() {
        let spans: std::collections::HashSet<_> = (0..1000).map(|_| new_span_id()).collect();
        assert_eq!(spans.len(), 1000);
        assert!(!spans.contains(&[0; 8]));
        assert_ne!(new_trace_id(), new_trace_id());
    }

    #[test]
    fn a_span_continues_its_parent_and_an_unsampled_parent_is_passed_on_unexported() {
        let parent =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        let mut child = Span::start(Some(parent), true, || unreachable!("not sampled"));
        assert_eq!(child.context().trace, parent.trace);
        assert_ne!(child.context().span, parent.span);
        assert!(!child.context().sampled);
        assert!(child.record.is_none());
        let context = child.context();
        {
            let _entered = child.enter();
            assert_eq!(current(), Some(context));
        }
        assert_eq!(current(), None);
        let root = Span::start(None, false, || What::Call {
            command: "get",
            queue: None,
            jid: None,
        });
        assert!(root.context().sampled);
        assert_eq!(root.record.as_ref().unwrap().parent, [0; 8]);
        std::mem::forget(root);
    }
}
