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
        Ok(as_message(self.next_frame().await?))
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
                self.start += used;
                if self.start == self.buffer.len() {
                    self.buffer.clear();
                    self.start = 0;
                }
                return Ok(frame);
            }
            // Keep what is unparsed at the front, then read more after it.
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
        }
    }
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
