//! The connection behind the event bridge: a pattern subscription read straight off
//! the socket. Every write command of the script publishes at least one event, so this
//! connection parses one message per put, pop or completion; redis-rs's general
//! reply parser and pub/sub machinery cost several times more CPU per message than
//! the whole rest of the bridge. Pattern messages, nearly all that arrives, are read
//! in place; anything else goes through the general parser of `resp.rs`, whose
//! [`Connection`] this rides on (a subscribed connection can carry nothing else).

use std::io;
use std::time::Duration;

use redis::Value;
use tokio::io::AsyncWriteExt;

use super::resp::{self, Connection, Endpoint, protocol};

/// How long opening the subscription may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A message published on a channel matching the subscription's pattern.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    /// The full channel name.
    pub channel: Vec<u8>,
    /// The payload as published.
    pub payload: Vec<u8>,
}

/// A connection subscribed to the script's channels.
pub struct Subscription {
    conn: Connection,
}

/// What a subscription listens to.
#[derive(Debug, Clone)]
pub enum Channels {
    /// Every channel matching one of these patterns (`PSUBSCRIBE`): the plain `ql:`
    /// prefix and qlessd's own `qlessd:`, where the script publishes with `PUBLISH` as
    /// stock qless clients expect.
    Patterns(Vec<String>),
    /// These shard channels (`SSUBSCRIBE`): a namespaced prefix, where the script
    /// publishes with `SPUBLISH`, so events stay on the namespace's shard.
    Sharded(Vec<String>),
}

impl Subscription {
    /// Connects to the Redis at `endpoint` (its primary), authenticates as its URL
    /// says and subscribes to `channels`. Returns once Redis has confirmed it.
    pub async fn open(endpoint: &Endpoint, channels: &Channels) -> io::Result<Self> {
        let (conn, _node) = Connection::open(endpoint, false, CONNECT_TIMEOUT).await?;
        Self::over(conn, channels).await
    }

    /// Subscribes to `channels` over `conn`, open and authenticated.
    pub async fn over(conn: Connection, channels: &Channels) -> io::Result<Self> {
        let mut subscription = Subscription { conn };
        let (command, confirm, names): (&str, &[u8], Vec<&str>) = match channels {
            Channels::Patterns(patterns) => (
                "PSUBSCRIBE",
                b"psubscribe",
                patterns.iter().map(String::as_str).collect(),
            ),
            Channels::Sharded(names) => (
                "SSUBSCRIBE",
                b"ssubscribe",
                names.iter().map(String::as_str).collect(),
            ),
        };
        let mut words = vec![command];
        words.extend(&names);
        subscription.send(&words).await?;
        // One confirmation per channel or pattern.
        for _ in &names {
            let conn = &mut subscription.conn;
            match conn.reader.next_value(&mut conn.socket).await? {
                Value::Array(items) if matches!(items.first(), Some(Value::BulkString(kind)) if kind == confirm) =>
                    {}
                Value::ServerError(err) => {
                    return Err(io::Error::other(format!("{command}: {err}")));
                }
                other => return Err(protocol(format!("unexpected {command} reply {other:?}"))),
            }
        }
        Ok(subscription)
    }

    /// What Redis sent next: a published message, or `None` for anything else (the
    /// answer to a [`ping`](Self::ping), say). Fails when the connection breaks.
    /// Cancel-safe: bytes already read stay buffered for the next call.
    pub async fn next(&mut self) -> io::Result<Option<Message>> {
        loop {
            let data = self.conn.reader.pending();
            // Nearly every frame is a message (a pattern one under `ql:`, a shard one
            // under a namespace): read those without building the general value tree
            // (four allocations and a copy per message).
            let head = [PMESSAGE_HEAD, SMESSAGE_HEAD]
                .into_iter()
                .find(|head| data.starts_with(head) || head.starts_with(data));
            let parsed = if let Some(head) = head {
                fast_message(data, head)?.map(|(message, used)| (Some(message), used))
            } else {
                resp::parse(data)?
                    .map(|(value, used)| as_message(value).map(|message| (message, used)))
                    .transpose()?
            };
            if let Some((message, used)) = parsed {
                self.conn.reader.consume(used);
                return Ok(message);
            }
            self.conn.fill().await?;
        }
    }

    /// Asks Redis for an answer (a subscribed connection may PING): a connection that
    /// died without closing (a vanished host, a dropped route) is otherwise silent.
    pub async fn ping(&mut self) -> io::Result<()> {
        self.send(&["PING"]).await
    }

    async fn send(&mut self, words: &[&str]) -> io::Result<()> {
        let mut request = Vec::new();
        resp::put_command(&mut request, words);
        self.conn.socket.write_all(&request).await
    }
}

/// How every pattern message begins: an array of four, the first `pmessage`.
const PMESSAGE_HEAD: &[u8] = b"*4\r\n$8\r\npmessage\r\n";

/// How every shard message begins: an array of three, the first `smessage`.
const SMESSAGE_HEAD: &[u8] = b"*3\r\n$8\r\nsmessage\r\n";

/// A pattern message at the start of `data` (which begins with [`PMESSAGE_HEAD`] or
/// a part of it): the message and the bytes it takes, or `None` while incomplete.
#[cfg(test)]
fn pattern_message(data: &[u8]) -> io::Result<Option<(Message, usize)>> {
    fast_message(data, PMESSAGE_HEAD)
}

/// A message at the start of `data`, which begins with `head` ([`PMESSAGE_HEAD`] or
/// [`SMESSAGE_HEAD`]) or a part of it: the message and the bytes it takes, or `None`
/// while incomplete. A pattern message has the pattern before the channel.
fn fast_message(data: &[u8], head: &[u8]) -> io::Result<Option<(Message, usize)>> {
    if data.len() < head.len() {
        return Ok(None);
    }
    let mut at = head.len();
    let mut fields = [0..0, 0..0, 0..0];
    let skip = usize::from(head == SMESSAGE_HEAD);
    for field in &mut fields[skip..] {
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

/// `pmessage <pattern> <channel> <payload>` or `smessage <channel> <payload>` as a
/// [`Message`]; anything else (the confirmations of subscribe commands, the answer to
/// a PING) is `None`. A shard channel unsubscribed by Redis (its slot moved to another
/// node) is an error: the subscription must be opened again where the slot is now.
fn as_message(value: Value) -> io::Result<Option<Message>> {
    let Value::Array(items) = value else {
        return Ok(None);
    };
    let mut items = items.into_iter();
    Ok(
        match (items.next(), items.next(), items.next(), items.next()) {
            (
                Some(Value::BulkString(kind)),
                Some(_pattern),
                Some(Value::BulkString(channel)),
                Some(Value::BulkString(payload)),
            ) if kind == b"pmessage" => Some(Message { channel, payload }),
            (
                Some(Value::BulkString(kind)),
                Some(Value::BulkString(channel)),
                Some(Value::BulkString(payload)),
                None,
            ) if kind == b"smessage" => Some(Message { channel, payload }),
            (Some(Value::BulkString(kind)), ..) if kind == b"sunsubscribe" => {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "Redis ended the shard subscription (the slot moved)",
                ));
            }
            _ => None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::resp::parse;
    use super::*;

    const PMESSAGE: &[u8] =
        b"*4\r\n$8\r\npmessage\r\n$4\r\nql:*\r\n$6\r\nql:log\r\n$14\r\n{\"jid\":\"a\r\nb\"}\r\n";

    #[test]
    fn a_pattern_message_is_read_whole_even_with_crlf_in_the_payload() {
        let (frame, used) = parse(PMESSAGE).unwrap().unwrap();
        assert_eq!(used, PMESSAGE.len());
        assert_eq!(
            as_message(frame).unwrap(),
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
        assert_eq!(Some(message), as_message(frame).unwrap());
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
            conn: Connection::over(Box::new(client)),
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
    fn a_shard_message_is_read_whole_by_the_fast_path_and_the_general_parser() {
        let frame: &[u8] = b"*3\r\n$8\r\nsmessage\r\n$10\r\nql:{a}:log\r\n$2\r\n{}\r\n";
        let (message, used) = fast_message(frame, SMESSAGE_HEAD).unwrap().unwrap();
        assert_eq!(used, frame.len());
        assert_eq!(
            (message.channel.as_slice(), message.payload.as_slice()),
            (&b"ql:{a}:log"[..], &b"{}"[..])
        );
        let (value, _) = parse(frame).unwrap().unwrap();
        assert_eq!(as_message(value).unwrap(), Some(message));
        for cut in 0..frame.len() {
            assert!(
                fast_message(&frame[..cut], SMESSAGE_HEAD)
                    .unwrap()
                    .is_none()
            );
        }
        let moved: &[u8] = b"*3\r\n$12\r\nsunsubscribe\r\n$10\r\nql:{a}:log\r\n:0\r\n";
        let (value, _) = parse(moved).unwrap().unwrap();
        assert!(as_message(value).is_err());
    }

    #[test]
    fn confirmations_and_errors_are_not_messages() {
        let confirm = b"*3\r\n$10\r\npsubscribe\r\n$4\r\nql:*\r\n:1\r\n";
        let (frame, used) = parse(confirm).unwrap().unwrap();
        assert_eq!(used, confirm.len());
        assert_eq!(as_message(frame).unwrap(), None);
        let (frame, _) = parse(b"-NOAUTH Authentication required.\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(frame, Value::ServerError(_)));
        assert_eq!(as_message(frame).unwrap(), None);
    }
}
