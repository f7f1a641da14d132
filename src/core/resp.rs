//! The one transport to Redis: RESP2 by hand over a [`Connection`], the only kind of
//! connection qlessd opens. Per namespace, script calls ride on one with group commit
//! as a layer above it (`group.rs`), the other commands (start-up checks, readiness,
//! script loading, `TIME`, `INFO`) on a second driven by the same code, and the event
//! subscription on a third (`subscription.rs`). Commands are encoded straight
//! into the outgoing buffer and replies parsed straight into redis-rs [`Value`]s
//! (once each, when a scan of the bytes read says all of the reply is in: [`Reader`]),
//! so the rest of `core` decodes them as it would redis-rs's own; redis-rs's general
//! connection (a driver task, a parser built from combinators) cost the gateway more
//! instructions per request than its whole script-call logic. Addresses and
//! credentials still come from redis-rs's URL parsing, and Sentinel's answer from
//! redis-rs's sentinel client; [`Connection::to_node`] is the one place a socket is
//! opened (TCP, TLS or Unix).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Error;
use super::topology::{self, Topology};

/// A connection to Redis (TCP, TLS over TCP or a Unix socket; an in-memory pipe in
/// tests).
pub trait Socket: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Socket for T {}

/// Where Redis is and how to reach it: its [`Topology`] (one server, a Sentinel-managed
/// primary, or the cluster primary of the namespace's slot), and for TLS the client
/// settings, built once (the system's roots are read from disk). Every connection
/// (script calls and commands, the event subscription) opens through one of these.
#[derive(Clone)]
pub struct Endpoint {
    url: String,
    topology: Arc<Topology>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &super::redacted(&self.url))
            .field("topology", &self.topology)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Endpoint {
    /// The Redis at `url`; TLS trusts the CA certificates in `ca_file` (PEM), or the
    /// system's roots when there is none. `namespace_key` picks the slot in a cluster.
    pub fn new(
        url: &str,
        ca_file: Option<&Path>,
        namespace_key: Option<&str>,
    ) -> Result<Self, Error> {
        let ca_pem = match ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|err| {
                Error::Startup(format!(
                    "cannot read CA certificates from {}: {err}",
                    path.display()
                ))
            })?),
            None => None,
        };
        let topology = Topology::parse(url, ca_pem.as_deref(), namespace_key)?;
        let tls = if topology::is_multi(url) {
            url.starts_with("rediss+")
        } else {
            let client = redis::Client::open(url).map_err(|err| {
                Error::Startup(format!("invalid Redis URL {}: {err}", super::redacted(url)))
            })?;
            match client.get_connection_info().addr() {
                ConnectionAddr::TcpTls { insecure: true, .. } => {
                    return Err(Error::Startup(
                        "unverified TLS (#insecure) is not supported: pass the server's CA \
                         with --redis-ca-file"
                            .to_owned(),
                    ));
                }
                ConnectionAddr::TcpTls { .. } => true,
                _ => false,
            }
        };
        let tls = if tls {
            Some(Arc::new(tls_config(ca_file, "--redis-ca-file")?))
        } else {
            None
        };
        Ok(Endpoint {
            url: url.to_owned(),
            topology: Arc::new(topology),
            tls,
        })
    }

    /// The Redis at `url`, without TLS settings (a `rediss://` URL then fails to
    /// open): for callers that only know a URL.
    pub fn plain(url: impl Into<String>) -> Self {
        let url = url.into();
        Endpoint {
            topology: Arc::new(Topology::Direct(url.clone())),
            url,
            tls: None,
        }
    }

    /// The URL, password included: never log it (see [`super::redacted`]).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the primary is now (asking the sentinels or the cluster, if need be),
    /// with the credentials and database to use on it.
    pub(super) async fn primary(&self) -> io::Result<ConnectionInfo> {
        match &*self.topology {
            Topology::Direct(url) => topology::direct(url),
            Topology::Sentinel(client) => topology::elected(client).await,
            Topology::Cluster { seeds, key } => {
                let mut last = None;
                for seed in seeds {
                    match self.slot_owner(seed, key).await {
                        Ok(info) => return Ok(info),
                        Err(err) => last = Some(err),
                    }
                }
                Err(last.unwrap_or_else(|| io::Error::other("no cluster seed")))
            }
        }
    }

    /// Asks the cluster node `seed` which primary owns the slot of `key`.
    async fn slot_owner(&self, seed: &ConnectionInfo, key: &str) -> io::Result<ConnectionInfo> {
        // A seed that is down or slow must not hold up the others.
        bounded(SEED_TIMEOUT, "no answer from a cluster seed", async {
            let mut conn = Connection::to_node(self, seed, false).await?;
            let slot = match conn.query(&["CLUSTER", "KEYSLOT", key]).await? {
                Value::Int(slot) => slot,
                other => return Err(protocol(format!("CLUSTER KEYSLOT answered {other:?}"))),
            };
            let ranges = conn.query(&["CLUSTER", "SLOTS"]).await?;
            topology::slot_owner(seed, slot, ranges)
        })
        .await
    }

    /// Whether connections check that their node is a primary (Sentinel, Cluster).
    pub(super) fn checks_role(&self) -> bool {
        self.topology.checks_role()
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.topology.is_cluster()
    }
}

/// How long a cluster seed may take to say where a slot is.
const SEED_TIMEOUT: Duration = Duration::from_secs(1);

/// TLS client settings trusting `ca_file`'s certificates, or the system's roots;
/// `flag` is the option that names such a file, for the error when the system has
/// none. Shared by the connections to Redis and push deliveries.
pub fn tls_config(ca_file: Option<&Path>, flag: &str) -> Result<rustls::ClientConfig, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let unreadable = |err: &dyn std::fmt::Display| {
                Error::Startup(format!(
                    "cannot read CA certificates from {}: {err}",
                    path.display()
                ))
            };
            let certs = CertificateDer::pem_file_iter(path).map_err(|err| unreadable(&err))?;
            for cert in certs {
                let cert = cert.map_err(|err| unreadable(&err))?;
                roots.add(cert).map_err(|err| unreadable(&err))?;
            }
            if roots.is_empty() {
                return Err(unreadable(&"no certificate in the file"));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for err in &found.errors {
                tracing::warn!(%err, "could not load some of the system's CA certificates");
            }
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::Startup(format!(
                    "no CA certificates found on this system; pass {flag}"
                )));
            }
        }
    }
    Ok(rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// One connection to Redis, the only kind qlessd opens: the script calls' (with group
/// commit above it, `group.rs`), the other commands' (start-up checks, readiness,
/// script loading, `TIME`, `INFO`), the event subscription's (`subscription.rs`), and
/// short ones (a cluster seed asked where a
/// slot is, the node an `ASK` names, the embedded server told to stop).
pub struct Connection {
    pub(super) socket: Box<dyn Socket>,
    pub(super) reader: Reader,
}

impl Connection {
    /// A connection over `socket`, already open and set up (an in-memory pipe in
    /// tests).
    pub fn over(socket: Box<dyn Socket>) -> Self {
        Connection {
            socket,
            reader: Reader::new(),
        }
    }

    /// Opens a connection to wherever `endpoint`'s primary is now, within `timeout`:
    /// authenticated as the URL says, on its database when `select_db` (pub/sub
    /// ignores databases, script calls do not), and for Sentinel and Cluster checked
    /// to be a primary. Returns the node it reached too, with its credentials (an
    /// `ASK` names another node of the same cluster).
    pub async fn open(
        endpoint: &Endpoint,
        select_db: bool,
        timeout: Duration,
    ) -> io::Result<(Self, ConnectionInfo)> {
        bounded(timeout, "no connection to Redis", async {
            // Boxed: finding a cluster primary opens a connection of its own, and the
            // nested futures would otherwise make every caller's future deeper than
            // the compiler lays out by default.
            let node = Box::pin(endpoint.primary()).await?;
            let mut conn = Self::to_node(endpoint, &node, select_db).await?;
            if endpoint.checks_role() {
                conn.check_primary().await?;
            }
            Ok((conn, node))
        })
        .await
    }

    /// Opens a connection to `node` (an address and its credentials), TLS as
    /// `endpoint` says, authenticated and on the node's database when `select_db`.
    /// Unbounded: callers bound it.
    pub(super) async fn to_node(
        endpoint: &Endpoint,
        node: &ConnectionInfo,
        select_db: bool,
    ) -> io::Result<Self> {
        let socket: Box<dyn Socket> = match node.addr() {
            ConnectionAddr::Tcp(host, port) => Box::new(tcp(host, *port).await?),
            ConnectionAddr::TcpTls { host, port, .. } => {
                let config = endpoint.tls.clone().ok_or_else(|| {
                    io::Error::other("a rediss:// URL needs an endpoint built for TLS")
                })?;
                let name = rustls_pki_types::ServerName::try_from(host.clone())
                    .map_err(|err| io::Error::new(io::ErrorKind::InvalidInput, err))?;
                let stream = tcp(host, *port).await?;
                let tls = tokio_rustls::TlsConnector::from(config)
                    .connect(name, stream)
                    .await?;
                Box::new(tls)
            }
            ConnectionAddr::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
            _ => return Err(io::Error::other("unsupported Redis address")),
        };
        let mut conn = Connection::over(socket);
        let settings = node.redis_settings();
        if let Some(password) = settings.password() {
            let mut auth = vec!["AUTH"];
            auth.extend(settings.username());
            auth.push(password);
            conn.expect_ok(&auth).await?;
        }
        if select_db && settings.db() != 0 {
            conn.expect_ok(&["SELECT", &settings.db().to_string()])
                .await?;
        }
        Ok(conn)
    }

    /// Sends one command and reads its answer; an error reply is a value.
    pub async fn query<T: AsRef<[u8]>>(&mut self, words: &[T]) -> io::Result<Value> {
        let mut request = Vec::new();
        put_command(&mut request, words);
        self.socket.write_all(&request).await?;
        self.reader.next_value(&mut self.socket).await
    }

    /// Sends one command, failing on an error reply (naming only the command: `AUTH`
    /// carries a password).
    async fn expect_ok(&mut self, words: &[&str]) -> io::Result<Value> {
        match self.query(words).await? {
            Value::ServerError(err) => Err(io::Error::other(format!("{}: {err}", words[0]))),
            value => Ok(value),
        }
    }

    /// Asks the node its `ROLE` and fails unless it is a primary: a Sentinel or
    /// cluster connection must never write to a replica (the sentinels may still name
    /// a demoted primary for a moment after a failover).
    pub(super) async fn check_primary(&mut self) -> io::Result<()> {
        if is_primary(&self.expect_ok(&["ROLE"]).await?) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "READONLY: the node is not the primary (yet); looking again",
            ))
        }
    }

    /// Reads more bytes after those not parsed yet. Cancel-safe.
    pub(super) async fn fill(&mut self) -> io::Result<()> {
        self.reader.fill(&mut self.socket).await
    }
}

/// Whether `role` (a `ROLE` reply) is a primary's.
pub(super) fn is_primary(role: &Value) -> bool {
    matches!(role, Value::Array(items) if matches!(items.first(), Some(Value::BulkString(role)) if role == b"master"))
}

/// `work`, given up with a timeout error saying `what` after `timeout`.
pub(super) async fn bounded<T>(
    timeout: Duration,
    what: &str,
    work: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} within {}s", timeout.as_secs_f64()),
        )
    })?
}

async fn tcp(host: &str, port: u16) -> io::Result<tokio::net::TcpStream> {
    let stream = tokio::net::TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Appends a command of plain words.
pub fn put_command<T: AsRef<[u8]>>(buffer: &mut Vec<u8>, words: &[T]) {
    put_array(buffer, words.len());
    for word in words {
        put_bulk(buffer, word.as_ref());
    }
}

/// Appends the header of an array of `count` items.
pub fn put_array(buffer: &mut Vec<u8>, count: usize) {
    buffer.push(b'*');
    put_decimal(buffer, count);
    buffer.extend_from_slice(b"\r\n");
}

/// Appends one bulk string.
pub fn put_bulk(buffer: &mut Vec<u8>, bytes: &[u8]) {
    buffer.push(b'$');
    put_decimal(buffer, bytes.len());
    buffer.extend_from_slice(b"\r\n");
    buffer.extend_from_slice(bytes);
    buffer.extend_from_slice(b"\r\n");
}

/// Appends a number as a bulk string.
pub fn put_bulk_number(buffer: &mut Vec<u8>, number: usize) {
    let mut digits = [0u8; 20];
    put_bulk(buffer, decimal(&mut digits, number));
}

fn put_decimal(buffer: &mut Vec<u8>, number: usize) {
    let mut digits = [0u8; 20];
    buffer.extend_from_slice(decimal(&mut digits, number));
}

/// `number` in decimal, written at the end of `digits`.
fn decimal(digits: &mut [u8; 20], mut number: usize) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (number % 10) as u8;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    &digits[at..]
}

/// Bytes read from a connection and not parsed yet.
///
/// A reply is parsed once, when all of it has arrived: until then each read only
/// extends a scan ([`Frame`]) that finds where the reply ends, picking up where the
/// last read left it, so a large reply (a pop of a thousand jobs) arriving in many
/// pieces costs one pass over its bytes and one parse, not a parse (and its
/// allocations) per piece.
#[derive(Debug, Default)]
pub struct Reader {
    buffer: Vec<u8>,
    /// Where unparsed data starts in `buffer`.
    start: usize,
    /// How far the scan of the reply at `start` got.
    frame: Frame,
    /// How many replies were parsed (tests count them).
    #[cfg(test)]
    parses: usize,
}

impl Reader {
    pub fn new() -> Self {
        Reader {
            buffer: Vec::with_capacity(16 * 1024),
            ..Reader::default()
        }
    }

    /// The bytes not parsed yet.
    pub fn pending(&self) -> &[u8] {
        &self.buffer[self.start..]
    }

    /// Marks `used` bytes of [`pending`](Self::pending) as parsed.
    pub fn consume(&mut self, used: usize) {
        self.start += used;
        self.frame = Frame::default();
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
    }

    /// The next whole reply already read, if any.
    pub fn parsed(&mut self) -> io::Result<Option<Value>> {
        let Some(end) = self.frame.scan(&self.buffer[self.start..])? else {
            return Ok(None);
        };
        #[cfg(test)]
        {
            self.parses += 1;
        }
        match parse(&self.buffer[self.start..self.start + end])? {
            Some((value, used)) if used == end => {
                self.consume(used);
                Ok(Some(value))
            }
            _ => Err(protocol(format!(
                "a reply of {end} bytes that does not parse as one"
            ))),
        }
    }

    /// Reads more bytes from `socket` after those not parsed yet. Cancel-safe: a read
    /// that did not complete took nothing.
    pub async fn fill<S: AsyncRead + Unpin + ?Sized>(&mut self, socket: &mut S) -> io::Result<()> {
        if self.start > 0 {
            // The scan's offsets count from `start`, so they hold after the move.
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        if self.buffer.capacity() - self.buffer.len() < 4096 {
            self.buffer.reserve(16 * 1024);
        }
        if socket.read_buf(&mut self.buffer).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "Redis closed the connection",
            ));
        }
        Ok(())
    }

    /// Reads until one whole reply is in, and returns it.
    pub async fn next_value<S: AsyncRead + Unpin + ?Sized>(
        &mut self,
        socket: &mut S,
    ) -> io::Result<Value> {
        loop {
            if let Some(value) = self.parsed()? {
                return Ok(value);
            }
            self.fill(socket).await?;
        }
    }
}

/// How far the scan of a reply not wholly read yet got: it reads the type and the
/// line of each element, skips bulk strings' contents by their length, and counts
/// the elements still to come (an array's count adds its items), so it needs no
/// stack and allocates nothing. Offsets count from the reply's first byte.
///
/// Lengths and counts are read by [`length`] (a reply of leased jobs is mostly such
/// lines: a field's length, then the field); a line cut short is read again from its
/// start on the next call, which costs at most its twenty-odd bytes. Other lines
/// (simple strings, errors, integers) are searched for their CR once, picking up
/// where the search stopped.
#[derive(Debug)]
struct Frame {
    /// Where the element being scanned starts.
    at: usize,
    /// Where the search for the CR ending a simple line resumes (what came before
    /// holds none).
    probe: usize,
    /// Where its contents end when it is a bulk string whose line was read.
    body_end: Option<usize>,
    /// Elements still to come, this one included.
    remaining: u64,
    /// Bytes looked at, for tests: a reply arriving in pieces costs about one pass.
    #[cfg(test)]
    looked_at: usize,
}

impl Default for Frame {
    fn default() -> Self {
        Frame {
            at: 0,
            probe: 0,
            body_end: None,
            remaining: 1,
            #[cfg(test)]
            looked_at: 0,
        }
    }
}

impl Frame {
    /// Scans `data` (the reply's bytes read so far, the earlier ones unchanged since
    /// the last call) on from where the last call stopped: how many bytes the reply
    /// takes once it is all there, `None` until then. Malformed lengths and unknown
    /// types fail as [`parse`] would fail on them.
    fn scan(&mut self, data: &[u8]) -> io::Result<Option<usize>> {
        while self.remaining > 0 {
            if self.body_end.is_some() {
                if !self.bulk_end(data)? {
                    return Ok(None);
                }
                continue;
            }
            let Some(&kind) = data.get(self.at) else {
                return Ok(None);
            };
            match kind {
                b'$' | b'*' => {
                    let line = &data[self.at + 1..];
                    let read = length(line)?;
                    #[cfg(test)]
                    {
                        self.looked_at += read.map_or(line.len(), |(_, used)| used);
                    }
                    let Some((length, used)) = read else {
                        return Ok(None);
                    };
                    let after_line = self.at + 1 + used;
                    match (kind, length) {
                        // A null.
                        (_, None) => self.next(after_line),
                        (b'$', Some(length)) => {
                            let end = usize::try_from(length)
                                .ok()
                                .and_then(|length| after_line.checked_add(length))
                                .ok_or_else(|| {
                                    protocol(format!("a bulk string of {length} bytes"))
                                })?;
                            // Usually all there: checked at once.
                            self.body_end = Some(end);
                            self.bulk_end(data)?;
                        }
                        (_, Some(count)) => {
                            self.next(after_line);
                            self.remaining = self
                                .remaining
                                .checked_add(count)
                                .ok_or_else(|| protocol(format!("an array of {count} items")))?;
                        }
                    }
                }
                b'+' | b'-' | b':' => {
                    // The type byte is never the CR sought.
                    let from = self.probe.max(self.at + 1);
                    let rest = data.get(from..).unwrap_or_default();
                    let found = memchr::memchr(b'\r', rest);
                    #[cfg(test)]
                    {
                        self.looked_at += found.map_or(rest.len(), |cr| cr + 1);
                    }
                    let Some(cr) = found.map(|cr| from + cr) else {
                        self.probe = data.len();
                        return Ok(None);
                    };
                    // As in `line`: the CR and one byte after it end the line.
                    if data.len() < cr + 2 {
                        self.probe = cr;
                        return Ok(None);
                    }
                    self.next(cr + 2);
                }
                other => {
                    return Err(protocol(format!(
                        "unknown reply type {:?}",
                        char::from(other)
                    )));
                }
            }
        }
        Ok(Some(self.at))
    }

    /// Whether the contents of the bulk string being scanned are all there, with
    /// their CRLF (the element is then done).
    fn bulk_end(&mut self, data: &[u8]) -> io::Result<bool> {
        let Some(end) = self.body_end else {
            return Ok(true);
        };
        let Some(crlf) = data.get(end..end + 2) else {
            return Ok(false);
        };
        if crlf != b"\r\n" {
            return Err(protocol("a bulk string without its CRLF".to_owned()));
        }
        self.body_end = None;
        self.next(end + 2);
        Ok(true)
    }

    /// One element done; the next starts at `at`.
    fn next(&mut self, at: usize) {
        self.at = at;
        self.probe = at;
        self.remaining -= 1;
    }
}

pub fn protocol(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// The line at the front of `data` (without its CRLF) and where the next one starts,
/// or `None` while incomplete.
fn line(data: &[u8]) -> Option<(&[u8], usize)> {
    let end = memchr::memchr(b'\r', data)?;
    (data.len() > end + 1).then(|| (&data[..end], end + 2))
}

/// A length or integer line.
fn number(line: &[u8]) -> io::Result<i64> {
    let (negative, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    let bad = || protocol(format!("bad number {:?}", String::from_utf8_lossy(line)));
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    // Accumulated negatively, so that i64::MIN (whose magnitude i64 cannot hold) reads.
    let value = digits.iter().try_fold(0i64, |n, digit| {
        n.checked_mul(10)?.checked_sub(i64::from(digit - b'0'))
    });
    match (value, negative) {
        (Some(value), true) => Ok(value),
        (Some(value), false) => value.checked_neg().ok_or_else(bad),
        (None, _) => Err(bad()),
    }
}

/// The length or count at the front of `line` (what follows a `$` or `*`): `None`
/// when negative (a null), and how many bytes the line takes with its CRLF; or
/// `None` while the line is cut short. Fails where [`number`] would. The usual line
/// (a few digits) is read digit by digit in the loop that finds its end, rather than
/// found, then read: a reply of leased jobs is mostly such lines.
fn length(line: &[u8]) -> io::Result<Option<(Option<u64>, usize)>> {
    // The null that Redis writes (an absent field of a leased job, say).
    if let [b'-', b'1', b'\r', _, ..] = line {
        return Ok(Some((None, 4)));
    }
    let mut value: u64 = 0;
    for (at, &byte) in line.iter().enumerate() {
        match byte {
            b'0'..=b'9' if value <= i64::MAX as u64 / 10 => {
                value = value * 10 + u64::from(byte - b'0');
            }
            // As in `line`: the CR and one byte after it end the line.
            b'\r' if at > 0 && value <= i64::MAX as u64 => {
                return Ok((line.len() > at + 1).then_some((Some(value), at + 2)));
            }
            _ => break,
        }
    }
    // Cut short, or not a small non-negative number: read as `number` reads it.
    match self::line(line) {
        Some((text, used)) => Ok(Some((u64::try_from(number(text)?).ok(), used))),
        None => Ok(None),
    }
}

/// Parses one reply from the front of `data`: `None` when more bytes are needed,
/// otherwise the value (as redis-rs would have made it) and how many bytes it took.
pub fn parse(data: &[u8]) -> io::Result<Option<(Value, usize)>> {
    let Some((&kind, rest)) = data.split_first() else {
        return Ok(None);
    };
    if let b'$' | b'*' = kind {
        let Some((length, used)) = length(rest)? else {
            return Ok(None);
        };
        let after_line = 1 + used;
        // Negative: a null.
        let Some(length) = length else {
            return Ok(Some((Value::Nil, after_line)));
        };
        // At most `i64::MAX`.
        let length = length as usize;
        if kind == b'$' {
            let end = after_line + length;
            if data.len() < end + 2 {
                return Ok(None);
            }
            if &data[end..end + 2] != b"\r\n" {
                return Err(protocol("a bulk string without its CRLF".to_owned()));
            }
            return Ok(Some((
                Value::BulkString(data[after_line..end].to_vec()),
                end + 2,
            )));
        }
        // Each item takes at least three bytes: a count beyond that is not trusted
        // for the allocation before the items have arrived.
        let mut items = Vec::with_capacity(length.min(data.len() / 3));
        let mut at = after_line;
        for _ in 0..length {
            match parse(&data[at..])? {
                Some((item, used)) => {
                    items.push(item);
                    at += used;
                }
                None => return Ok(None),
            }
        }
        return Ok(Some((Value::Array(items), at)));
    }
    let Some((text, used)) = line(rest) else {
        return Ok(None);
    };
    let after_line = 1 + used;
    let value = match kind {
        b'+' if text == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(String::from_utf8_lossy(text).into_owned()),
        // Error replies are rare: redis-rs builds them, so they carry its error kinds.
        b'-' => redis::parse_redis_value(&data[..after_line])
            .map_err(|err| protocol(format!("error reply: {err}")))?,
        b':' => Value::Int(number(text)?),
        other => {
            return Err(protocol(format!(
                "unknown reply type {:?}",
                char::from(other)
            )));
        }
    };
    Ok(Some((value, after_line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(data: &[u8]) -> Value {
        let (value, used) = parse(data).unwrap().expect("a whole reply");
        assert_eq!(used, data.len(), "all of {data:?} used");
        value
    }

    #[test]
    fn replies_parse_as_redis_rs_parses_them() {
        let cases: [&[u8]; 9] = [
            b"+OK\r\n",
            b"+PONG\r\n",
            b":-42\r\n",
            b"$5\r\nhe\r\no\r\n",
            b"$0\r\n\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*3\r\n$1\r\na\r\n*1\r\n:1\r\n-QL_ARG Put(): bad\r\n",
        ];
        for case in cases {
            assert_eq!(
                parsed(case),
                redis::parse_redis_value(case).unwrap(),
                "{case:?}"
            );
        }
        for extreme in [i64::MIN, i64::MAX, 0] {
            assert_eq!(
                parsed(format!(":{extreme}\r\n").as_bytes()),
                Value::Int(extreme)
            );
        }
        assert!(parse(b":9223372036854775808\r\n").is_err());
        assert!(parse(b":-9223372036854775809\r\n").is_err());
        let Value::ServerError(err) = parsed(b"-NOSCRIPT No matching script.\r\n") else {
            panic!("an error value");
        };
        assert_eq!(err.kind(), Some(redis::ServerErrorKind::NoScript));
    }

    #[test]
    fn a_reply_cut_anywhere_waits_for_more_bytes() {
        let whole: &[u8] = b"*2\r\n$12\r\nhello\r\nworld\r\n*1\r\n:7\r\n";
        for cut in 0..whole.len() {
            assert!(parse(&whole[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        let mut two = whole.to_vec();
        two.extend_from_slice(b"+OK\r\n");
        assert_eq!(parse(&two).unwrap().unwrap().1, whole.len());
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b"$abc\r\n").is_err());
        assert!(parse(b":\r\n").is_err());
        assert!(parse(b"$1\r\nabc\r\n").is_err());
    }

    #[test]
    fn commands_are_encoded_as_arrays_of_bulk_strings() {
        let mut buffer = Vec::new();
        put_command(&mut buffer, &["SET", "k", ""]);
        put_bulk_number(&mut buffer, 1205);
        put_array(&mut buffer, 0);
        assert_eq!(
            buffer,
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$4\r\n1205\r\n*0\r\n"
        );
    }

    /// Every kind of reply the reader handles, as redis-rs parses it.
    const EVERY_KIND: [&[u8]; 14] = [
        b"+OK\r\n",
        b"+PONG\r\n",
        b"-QL_ARG Put(): bad\r\n",
        b"-ASK 3999 10.0.0.2:7001\r\n",
        b":0\r\n",
        b":-9223372036854775808\r\n",
        b"$5\r\nhe\r\no\r\n",
        b"$0\r\n\r\n",
        b"$-1\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*3\r\n$1\r\na\r\n*1\r\n:1\r\n-QL_ARG Put(): bad\r\n",
        b"*2\r\n*0\r\n*2\r\n$-1\r\n*-1\r\n",
        b"*2\r\n*1\r\n*1\r\n+deep\r\n$3\r\n\r\n\r\r\n",
    ];

    /// Hands `bytes` to `reader` as one read.
    async fn arrive(reader: &mut Reader, mut bytes: &[u8]) {
        reader.fill(&mut bytes).await.unwrap();
        assert!(bytes.is_empty(), "one read took it all");
    }

    #[tokio::test]
    async fn every_kind_of_reply_split_at_every_byte_parses_once_whole() {
        for whole in EVERY_KIND {
            let expected = redis::parse_redis_value(whole).unwrap();
            for cut in 1..whole.len() {
                let mut reader = Reader::new();
                arrive(&mut reader, &whole[..cut]).await;
                assert_eq!(reader.parsed().unwrap(), None, "{whole:?} cut at {cut}");
                arrive(&mut reader, &whole[cut..]).await;
                assert_eq!(reader.parsed().unwrap().as_ref(), Some(&expected));
                assert_eq!(reader.parses, 1, "{whole:?} cut at {cut}");
                assert!(reader.pending().is_empty());
            }
        }
    }

    #[tokio::test]
    async fn pipelined_replies_split_at_every_byte_each_parse_once() {
        let whole: Vec<u8> = EVERY_KIND.concat();
        let expected: Vec<Value> = EVERY_KIND
            .iter()
            .map(|one| redis::parse_redis_value(one).unwrap())
            .collect();
        for cut in 0..=whole.len() {
            let mut reader = Reader::new();
            let mut values = Vec::new();
            for part in [&whole[..cut], &whole[cut..]] {
                if !part.is_empty() {
                    arrive(&mut reader, part).await;
                }
                while let Some(value) = reader.parsed().unwrap() {
                    values.push(value);
                }
            }
            assert_eq!(values, expected, "cut at {cut}");
            assert_eq!(reader.parses, EVERY_KIND.len());
        }
    }

    /// A `batch` reply carrying a pop of `jobs` jobs, laid out as the script returns
    /// it: an array per call, each job an array of its jid, its JSON and a number.
    fn big_pop_reply(jobs: usize) -> Vec<u8> {
        let mut reply = Vec::new();
        put_array(&mut reply, 1);
        put_array(&mut reply, jobs);
        for n in 0..jobs {
            let jid = format!("{n:032x}");
            let json = format!(
                r#"{{"jid":"{jid}","klass":"Mailer","queue":"mail","data":"{{\"to\":\"user{n}@example.com\",\"subject\":\"hello\"}}","priority":0,"tags":["a","b"],"state":"running","worker":"w1","expires":1700000060.5,"retries":5,"remaining":5}}"#
            );
            put_array(&mut reply, 3);
            put_bulk(&mut reply, jid.as_bytes());
            put_bulk(&mut reply, json.as_bytes());
            reply.extend_from_slice(format!(":{n}\r\n").as_bytes());
        }
        reply
    }

    #[tokio::test]
    async fn a_thousand_job_pop_arriving_a_byte_at_a_time_is_parsed_once() {
        let whole = big_pop_reply(1000);
        assert!(whole.len() > 250_000, "{} bytes", whole.len());
        let mut reader = Reader::new();
        for (at, byte) in whole.iter().enumerate() {
            arrive(&mut reader, std::slice::from_ref(byte)).await;
            let value = reader.parsed().unwrap();
            if at + 1 < whole.len() {
                assert_eq!(value, None, "whole after {} bytes", at + 1);
                continue;
            }
            assert_eq!(value, Some(redis::parse_redis_value(&whole).unwrap()));
        }
        assert_eq!(reader.parses, 1);
        assert!(reader.pending().is_empty());
    }

    #[test]
    fn the_scan_of_a_reply_arriving_a_byte_at_a_time_costs_about_one_pass() {
        let whole = big_pop_reply(1000);
        let mut frame = Frame::default();
        for end in 1..whole.len() {
            assert_eq!(frame.scan(&whole[..end]).unwrap(), None);
        }
        assert_eq!(frame.scan(&whole).unwrap(), Some(whole.len()));
        let mut at_once = Frame::default();
        assert_eq!(at_once.scan(&whole).unwrap(), Some(whole.len()));
        // Bulk strings' contents are skipped by their length, never looked at; lines
        // cut short are read again, each costing a few bytes more.
        assert!(
            at_once.looked_at < whole.len() / 10,
            "{}",
            at_once.looked_at
        );
        assert!(
            frame.looked_at < whole.len() / 2,
            "{} bytes looked at for a reply of {}",
            frame.looked_at,
            whole.len()
        );
    }

    #[test]
    fn lengths_read_as_numbers_read() {
        for (line, read) in [
            ("0\r\n", Some(0)),
            ("12\r\n", Some(12)),
            ("9223372036854775807\r\n", Some(i64::MAX as u64)),
            ("-1\r\n", None),
            ("-9223372036854775808\r\n", None),
        ] {
            let (length, used) = length(line.as_bytes()).unwrap().unwrap();
            assert_eq!((length, used), (read, line.len()), "{line:?}");
        }
        for bad in [
            "\r\n",
            "-\r\n",
            "1a\r\n",
            "9223372036854775808\r\n",
            "+1\r\n",
        ] {
            assert!(length(bad.as_bytes()).is_err(), "{bad:?}");
            assert!(number(bad.trim_end().as_bytes()).is_err(), "{bad:?}");
        }
        for cut in ["", "1", "12\r", "-"] {
            assert!(length(cut.as_bytes()).unwrap().is_none(), "{cut:?}");
        }
    }

    #[tokio::test]
    async fn garbage_fails_before_the_reply_is_whole() {
        for garbage in [
            &b"?what\r\n"[..],
            b"$abc\r\n",
            b"*x\r\n",
            b"$1\r\nabc\r\n",
            b"*3\r\n:1\r\n!3\r\n",
            b"*3\r\n$1\r\na\r\n$z\r\n",
        ] {
            let mut reader = Reader::new();
            arrive(&mut reader, garbage).await;
            assert!(reader.parsed().is_err(), "{garbage:?}");
            assert_eq!(reader.parses, 0, "{garbage:?}");
        }
        // A bad integer is found by the parse, once the reply is whole.
        let mut reader = Reader::new();
        arrive(&mut reader, b"*2\r\n:1\r\n:\r\n").await;
        assert!(reader.parsed().is_err());
    }

    #[tokio::test]
    async fn replies_split_across_reads_arrive_whole() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            for chunk in b"*2\r\n$3\r\nabc\r\n:5\r\n+OK\r\n".chunks(3) {
                server.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut reader = Reader::new();
        let first = reader.next_value(&mut client).await.unwrap();
        assert_eq!(
            first,
            Value::Array(vec![Value::BulkString(b"abc".to_vec()), Value::Int(5)])
        );
        assert_eq!(reader.next_value(&mut client).await.unwrap(), Value::Okay);
        writer.await.unwrap();
        assert!(reader.next_value(&mut client).await.is_err());
    }
}
