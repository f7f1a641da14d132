//! The connection behind the event bridge: a pattern subscription read straight off
//! the socket. Every write command of the script publishes at least one event, so this
//! connection parses one message per put, pop or completion; redis-rs's general
//! reply parser and pub/sub machinery cost several times more CPU per message than
//! the whole rest of the bridge. A subscribed connection only ever receives a few
//! frame shapes (arrays of bulk strings and integers), which this reads directly.
//! Addresses and credentials still come from redis-rs's URL parsing.

use std::io;

use redis::ConnectionAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A message published on a channel matching the subscription's pattern.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    /// The full channel name.
    pub channel: Vec<u8>,
    /// The payload as published.
    pub payload: Vec<u8>,
}

/// A connection to Redis (TCP or Unix socket; an in-memory pipe in tests).
pub trait Socket: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Socket for T {}

/// A connection subscribed to one pattern (`PSUBSCRIBE`).
pub struct Subscription {
    socket: Box<dyn Socket>,
    buffer: Vec<u8>,
    /// Where unparsed data starts in `buffer`.
    start: usize,
}

impl Subscription {
    /// Connects to the Redis at `url`, authenticates as the URL says and subscribes to
    /// `pattern`. Returns once Redis has confirmed the subscription.
    pub async fn open(url: &str, pattern: &str) -> io::Result<Self> {
        let client = redis::Client::open(url).map_err(io::Error::other)?;
        let info = client.get_connection_info();
        let socket: Box<dyn Socket> = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Box::new(stream)
            }
            ConnectionAddr::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
            _ => return Err(io::Error::other("TLS Redis URLs are not supported")),
        };
        let settings = info.redis_settings();
        let mut auth = Vec::new();
        if let Some(password) = settings.password() {
            auth.push("AUTH");
            auth.extend(settings.username());
            auth.push(password);
        }
        Self::over(socket, &auth, pattern).await
    }

    /// Subscribes to `pattern` over a connected `socket`, first sending `auth` (an AUTH
    /// command, or nothing).
    pub async fn over(socket: Box<dyn Socket>, auth: &[&str], pattern: &str) -> io::Result<Self> {
        let mut subscription = Subscription {
            socket,
            buffer: Vec::with_capacity(16 * 1024),
            start: 0,
        };
        if !auth.is_empty() {
            subscription.send(auth).await?;
            if let Frame::Error(err) = subscription.next_frame().await? {
                return Err(io::Error::other(format!("AUTH: {err}")));
            }
        }
        subscription.send(&["PSUBSCRIBE", pattern]).await?;
        match subscription.next_frame().await? {
            Frame::Array(items) if matches!(items.first(), Some(Frame::Bulk(Some(kind))) if kind == b"psubscribe") =>
                {}
            Frame::Error(err) => return Err(io::Error::other(format!("PSUBSCRIBE: {err}"))),
            other => return Err(protocol(format!("unexpected PSUBSCRIBE reply {other:?}"))),
        }
        Ok(subscription)
    }

    /// What Redis sent next: a published message, or `None` for anything else (the
    /// answer to a [`ping`](Self::ping), say). Fails when the connection breaks.
    /// Cancel-safe: bytes already read stay buffered for the next call.
    pub async fn next(&mut self) -> io::Result<Option<Message>> {
        loop {
            let data = &self.buffer[self.start..];
            // Nearly every frame is a pattern message: read those without building
            // the general frame tree (four allocations and a copy per message).
            let parsed = if data.starts_with(PMESSAGE_HEAD) || PMESSAGE_HEAD.starts_with(data) {
                pattern_message(data)?.map(|(message, used)| (Some(message), used))
            } else {
                parse(data)?.map(|(frame, used)| (as_message(frame), used))
            };
            if let Some((message, used)) = parsed {
                self.consume(used);
                return Ok(message);
            }
            self.fill().await?;
        }
    }

    /// Asks Redis for an answer (a subscribed connection may PING): a connection that
    /// died without closing (a vanished host, a dropped route) is otherwise silent.
    pub async fn ping(&mut self) -> io::Result<()> {
        self.send(&["PING"]).await
    }

    async fn send(&mut self, words: &[&str]) -> io::Result<()> {
        let mut request = format!("*{}\r\n", words.len());
        for word in words {
            request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
        }
        self.socket.write_all(request.as_bytes()).await
    }

    async fn next_frame(&mut self) -> io::Result<Frame> {
        loop {
            if let Some((frame, used)) = parse(&self.buffer[self.start..])? {
                self.consume(used);
                return Ok(frame);
            }
            self.fill().await?;
        }
    }

    /// Marks `used` bytes of the buffer as read.
    fn consume(&mut self, used: usize) {
        self.start += used;
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
    }

    /// Reads more bytes after those not parsed yet (moved to the front first).
    async fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        if self.socket.read_buf(&mut self.buffer).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "Redis closed the subscription",
            ));
        }
        Ok(())
    }
}

/// How every pattern message begins: an array of four, the first `pmessage`.
const PMESSAGE_HEAD: &[u8] = b"*4\r\n$8\r\npmessage\r\n";

/// A pattern message at the start of `data` (which begins with [`PMESSAGE_HEAD`] or
/// a part of it): the message and the bytes it takes, or `None` while incomplete.
fn pattern_message(data: &[u8]) -> io::Result<Option<(Message, usize)>> {
    if data.len() < PMESSAGE_HEAD.len() {
        return Ok(None);
    }
    let mut at = PMESSAGE_HEAD.len();
    let mut fields = [0..0, 0..0, 0..0];
    for field in &mut fields {
        let Some((range, next)) = bulk_at(data, at)? else {
            return Ok(None);
        };
        *field = range;
        at = next;
    }
    let [_pattern, channel, payload] = fields;
    let message = Message {
        channel: data[channel].to_vec(),
        payload: data[payload].to_vec(),
    };
    Ok(Some((message, at)))
}

/// The bulk string starting at `data[at]`: where its bytes are and where the next
/// frame starts, or `None` while incomplete.
fn bulk_at(data: &[u8], at: usize) -> io::Result<Option<(std::ops::Range<usize>, usize)>> {
    let Some(header) = data.get(at..) else {
        return Ok(None);
    };
    let Some(line_end) = header.iter().position(|&byte| byte == b'\r') else {
        return Ok(None);
    };
    let line = &header[..line_end];
    let length = match line.split_first() {
        Some((b'$', digits))
            if (1..=18).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) =>
        {
            digits
                .iter()
                .fold(0usize, |n, digit| n * 10 + usize::from(digit - b'0'))
        }
        _ => {
            return Err(protocol(format!(
                "expected a bulk string in a pattern message, got {:?}",
                String::from_utf8_lossy(line)
            )));
        }
    };
    let start = at + line_end + 2;
    let end = start + length;
    if data.len() < end + 2 {
        return Ok(None);
    }
    Ok(Some((start..end, end + 2)))
}

/// The frames a subscribed RESP2 connection receives.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    Simple(Vec<u8>),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Frame>),
}

/// `pmessage <pattern> <channel> <payload>` as a [`Message`]; anything else (the
/// confirmations of subscribe commands) is `None`.
fn as_message(frame: Frame) -> Option<Message> {
    let Frame::Array(items) = frame else {
        return None;
    };
    let mut items = items.into_iter();
    match (items.next(), items.next(), items.next(), items.next()) {
        (
            Some(Frame::Bulk(Some(kind))),
            Some(_pattern),
            Some(Frame::Bulk(Some(channel))),
            Some(Frame::Bulk(Some(payload))),
        ) if kind == b"pmessage" => Some(Message { channel, payload }),
        _ => None,
    }
}

fn protocol(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Parses one frame from the front of `data`: `None` when more bytes are needed,
/// otherwise the frame and how many bytes it took.
fn parse(data: &[u8]) -> io::Result<Option<(Frame, usize)>> {
    let Some(end) = data.windows(2).position(|pair| pair == b"\r\n") else {
        return Ok(None);
    };
    let Some((&kind, line)) = data[..end].split_first() else {
        return Err(protocol("empty line".to_owned()));
    };
    let after_line = end + 2;
    let number = || -> io::Result<i64> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| protocol(format!("bad length {:?}", String::from_utf8_lossy(line))))
    };
    match kind {
        b'+' => Ok(Some((Frame::Simple(line.to_vec()), after_line))),
        b'-' => Ok(Some((
            Frame::Error(String::from_utf8_lossy(line).into_owned()),
            after_line,
        ))),
        b':' => Ok(Some((Frame::Integer(number()?), after_line))),
        b'$' => {
            let length = number()?;
            if length < 0 {
                return Ok(Some((Frame::Bulk(None), after_line)));
            }
            let length = length as usize;
            if data.len() < after_line + length + 2 {
                return Ok(None);
            }
            let body = data[after_line..after_line + length].to_vec();
            Ok(Some((Frame::Bulk(Some(body)), after_line + length + 2)))
        }
        b'*' => {
            let count = number()?;
            let mut items = Vec::with_capacity(count.clamp(0, 8) as usize);
            let mut used = after_line;
            for _ in 0..count.max(0) {
                match parse(&data[used..])? {
                    Some((item, taken)) => {
                        items.push(item);
                        used += taken;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Frame::Array(items), used)))
        }
        other => Err(protocol(format!(
            "unknown frame type {:?}",
            char::from(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PMESSAGE: &[u8] =
        b"*4\r\n$8\r\npmessage\r\n$4\r\nql:*\r\n$6\r\nql:log\r\n$14\r\n{\"jid\":\"a\r\nb\"}\r\n";

    #[test]
    fn a_pattern_message_is_read_whole_even_with_crlf_in_the_payload() {
        let (frame, used) = parse(PMESSAGE).unwrap().unwrap();
        assert_eq!(used, PMESSAGE.len());
        assert_eq!(
            as_message(frame),
            Some(Message {
                channel: b"ql:log".to_vec(),
                payload: b"{\"jid\":\"a\r\nb\"}".to_vec(),
            })
        );
    }

    #[test]
    fn the_pattern_message_fast_path_reads_what_the_general_parser_reads() {
        let (message, used) = pattern_message(PMESSAGE).unwrap().unwrap();
        assert_eq!(used, PMESSAGE.len());
        let (frame, _) = parse(PMESSAGE).unwrap().unwrap();
        assert_eq!(Some(message), as_message(frame));
        for cut in 0..PMESSAGE.len() {
            assert!(
                pattern_message(&PMESSAGE[..cut]).unwrap().is_none(),
                "cut at {cut}"
            );
        }
        let mut two = PMESSAGE.to_vec();
        two.extend_from_slice(PMESSAGE);
        assert_eq!(pattern_message(&two).unwrap().unwrap().1, PMESSAGE.len());
        let bad = b"*4\r\n$8\r\npmessage\r\n:4\r\n";
        assert!(pattern_message(bad).is_err());
    }

    #[tokio::test]
    async fn messages_split_across_reads_arrive_whole_and_in_order() {
        use tokio::io::AsyncWriteExt;
        let (client, mut server) = tokio::io::duplex(64);
        let mut subscription = Subscription {
            socket: Box::new(client),
            buffer: Vec::new(),
            start: 0,
        };
        let confirm = b"*3\r\n$10\r\npsubscribe\r\n$4\r\nql:*\r\n:1\r\n";
        let mut stream = confirm.to_vec();
        stream.extend_from_slice(PMESSAGE);
        stream.extend_from_slice(PMESSAGE);
        let writer = tokio::spawn(async move {
            for chunk in stream.chunks(7) {
                server.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
            server
        });
        assert_eq!(subscription.next().await.unwrap(), None);
        for _ in 0..2 {
            let message = subscription.next().await.unwrap().expect("a message");
            assert_eq!(message.channel, b"ql:log");
        }
        drop(writer.await.unwrap());
        assert!(subscription.next().await.is_err());
    }

    #[test]
    fn a_frame_cut_anywhere_waits_for_more_bytes() {
        for cut in 0..PMESSAGE.len() {
            assert!(parse(&PMESSAGE[..cut]).unwrap().is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn confirmations_and_errors_are_not_messages() {
        let confirm = b"*3\r\n$10\r\npsubscribe\r\n$4\r\nql:*\r\n:1\r\n";
        let (frame, used) = parse(confirm).unwrap().unwrap();
        assert_eq!(used, confirm.len());
        assert_eq!(as_message(frame), None);
        let (frame, _) = parse(b"-NOAUTH Authentication required.\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            frame,
            Frame::Error("NOAUTH Authentication required.".into())
        );
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b"$abc\r\n").is_err());
    }
}
