//! The collector's OTLP/HTTP endpoint, as the exporter posts to it: one HTTP/1.1
//! connection, kept alive between batches, on which each export request is written
//! and its answer read (its head parsed by `httparse`, its body read and dropped).
//!
//! Why not hyper's client: a batch posted through `hyper_util`'s pooled client cost
//! the gateway about 32,000 instructions (the `gateway-instructions` dumps,
//! 2026-11-27: the pool, the request and header maps, the streamed body, the
//! response's), 60 for each of the 512 spans it carried, over a tenth of what a
//! request's tracing may cost. Posting here costs about 5,300 (the whole export round
//! about 8,700, taking the batch from the buffer included). The exporter needs only
//! this: one endpoint, `POST` with a known length, the answer's status.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most an answer's head or body may take: a collector answers a few bytes.
const MAX_ANSWER: usize = 1 << 20;

/// Where export requests go, and the connection they go on while it lasts.
#[derive(Debug)]
pub(super) struct Collector {
    /// `host:port`, to connect to.
    address: String,
    /// The request's head up to its length: request line, `Host`, content type.
    head: String,
    /// The kept-alive connection, with what was read past the last answer (nothing,
    /// from a collector that answers one request at a time).
    connection: Option<(TcpStream, Vec<u8>)>,
}

impl Collector {
    /// The collector at `uri` (`http://host[:port]/path`).
    pub(super) fn new(uri: &axum::http::Uri) -> Result<Collector, String> {
        // An IPv6 host keeps its brackets, as both the address and `Host` want it.
        let host = uri.host().ok_or("the endpoint has no host")?;
        // `Host` names the host and any port given, never user information.
        let host_header = match uri.port_u16() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let path = uri.path_and_query().map_or("/", |path| path.as_str());
        Ok(Collector {
            address: format!("{host}:{}", uri.port_u16().unwrap_or(80)),
            head: format!(
                "POST {path} HTTP/1.1\r\nHost: {host_header}\r\n\
                 Content-Type: application/x-protobuf\r\nContent-Length: "
            ),
            connection: None,
        })
    }

    /// Posts one export request whose body is `parts`, in order; `Err` says why it was
    /// not accepted. When a kept-alive connection fails (the collector closed it
    /// meanwhile), a new one is opened and the request sent once more; a refusal is
    /// not retried.
    pub(super) async fn post(&mut self, parts: &[&[u8]]) -> Result<(), String> {
        let reused = self.connection.is_some();
        let status = match self.exchange(parts).await {
            Err(err) if reused => {
                tracing::debug!(error = %err, "the collector's connection failed; reconnecting");
                self.exchange(parts).await?
            }
            outcome => outcome?,
        };
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(format!("the collector answered {status}"))
        }
    }

    /// Sends the request and reads the answer, on the kept connection or a new one;
    /// the answer's status, or why there is none. The connection is kept again only
    /// once its answer is read whole: a post abandoned halfway (its timeout) leaves
    /// none behind.
    async fn exchange(&mut self, parts: &[&[u8]]) -> Result<u16, String> {
        let (mut stream, mut read) = match self.connection.take() {
            Some(connection) => connection,
            None => {
                let stream = TcpStream::connect(&self.address)
                    .await
                    .map_err(|err| format!("cannot connect to {}: {err}", self.address))?;
                stream.set_nodelay(true).map_err(|err| err.to_string())?;
                (stream, Vec::with_capacity(1024))
            }
        };
        let length: usize = parts.iter().map(|part| part.len()).sum();
        let head = format!("{}{length}\r\n\r\n", self.head);
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|err| format!("cannot send: {err}"))?;
        for part in parts {
            stream
                .write_all(part)
                .await
                .map_err(|err| format!("cannot send: {err}"))?;
        }
        let answer = read_answer(&mut stream, &mut read).await?;
        if answer.keep_alive {
            read.clear();
            self.connection = Some((stream, read));
        }
        Ok(answer.status)
    }
}

/// What matters of an answer once it is read.
struct Answer {
    status: u16,
    keep_alive: bool,
}

/// How an answer's body ends.
enum BodyEnd {
    Length(usize),
    Chunked,
    /// At the end of the connection (no length given).
    Close,
}

/// Reads more of the answer into `read`; an error at its end.
async fn read_more(stream: &mut TcpStream, read: &mut Vec<u8>) -> Result<(), String> {
    if read.len() > MAX_ANSWER {
        return Err("the collector's answer is too long".to_owned());
    }
    read.reserve(1024);
    let count = stream
        .read_buf(read)
        .await
        .map_err(|err| format!("cannot read the answer: {err}"))?;
    if count == 0 {
        return Err("the collector closed the connection before answering".to_owned());
    }
    Ok(())
}

/// Reads one answer (after any `1xx` interim ones) from `stream`, `read` holding what
/// was read of it already; leaves in `read` whatever follows it.
async fn read_answer(stream: &mut TcpStream, read: &mut Vec<u8>) -> Result<Answer, String> {
    loop {
        let (head_len, status, end, close) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(read) {
                Ok(httparse::Status::Complete(head_len)) => {
                    let status = response.code.unwrap_or(0);
                    let (end, close) = body_end(&response)?;
                    break (head_len, status, end, close);
                }
                Ok(httparse::Status::Partial) => read_more(stream, read).await?,
                Err(err) => return Err(format!("the collector's answer is not HTTP: {err}")),
            }
        };
        read.drain(..head_len);
        if (100..200).contains(&status) {
            continue;
        }
        let keep_alive = match end {
            BodyEnd::Length(length) => {
                if length > MAX_ANSWER {
                    return Err("the collector's answer is too long".to_owned());
                }
                while read.len() < length {
                    read_more(stream, read).await?;
                }
                read.drain(..length);
                !close
            }
            BodyEnd::Chunked => {
                skip_chunks(stream, read).await?;
                !close
            }
            BodyEnd::Close => {
                // Everything up to the end of the connection is the body.
                let mut body = read.len();
                loop {
                    if body > MAX_ANSWER {
                        return Err("the collector's answer is too long".to_owned());
                    }
                    read.clear();
                    if read_more(stream, read).await.is_err() {
                        break;
                    }
                    body += read.len();
                }
                false
            }
        };
        return Ok(Answer { status, keep_alive });
    }
}

/// How the body of `response` ends, and whether the connection closes after it.
fn body_end(response: &httparse::Response<'_, '_>) -> Result<(BodyEnd, bool), String> {
    let mut end = None;
    let mut close = response.version == Some(0);
    for header in response.headers.iter() {
        let value = std::str::from_utf8(header.value).unwrap_or_default().trim();
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if !value.eq_ignore_ascii_case("chunked") {
                return Err(format!("the collector's answer is encoded {value:?}"));
            }
            end = Some(BodyEnd::Chunked);
        } else if header.name.eq_ignore_ascii_case("content-length")
            && !matches!(end, Some(BodyEnd::Chunked))
        {
            let length = value
                .parse()
                .map_err(|_| format!("the collector's answer has a bad length: {value:?}"))?;
            end = Some(BodyEnd::Length(length));
        } else if header.name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    let status = response.code.unwrap_or(0);
    // These have no body, whatever their headers say.
    if status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok((BodyEnd::Length(0), close));
    }
    Ok((end.unwrap_or(BodyEnd::Close), close))
}

/// Reads past a chunked body: chunks up to the empty one, then the trailer section.
async fn skip_chunks(stream: &mut TcpStream, read: &mut Vec<u8>) -> Result<(), String> {
    let mut skipped = 0usize;
    loop {
        let (size_len, size) = match httparse::parse_chunk_size(read) {
            Ok(httparse::Status::Complete(found)) => found,
            Ok(httparse::Status::Partial) => {
                read_more(stream, read).await?;
                continue;
            }
            Err(_) => return Err("the collector's answer has a bad chunk".to_owned()),
        };
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        skipped = skipped.saturating_add(size);
        if skipped > MAX_ANSWER {
            return Err("the collector's answer is too long".to_owned());
        }
        if size == 0 {
            read.drain(..size_len);
            break;
        }
        // The chunk and the line break after it.
        while read.len() < size_len + size + 2 {
            read_more(stream, read).await?;
        }
        read.drain(..size_len + size + 2);
    }
    // Trailer fields, if any, up to an empty line.
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        match httparse::parse_headers(read, &mut headers) {
            Ok(httparse::Status::Complete((len, _))) => {
                read.drain(..len);
                return Ok(());
            }
            Ok(httparse::Status::Partial) => read_more(stream, read).await?,
            Err(err) => return Err(format!("the collector's answer has bad trailers: {err}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::Collector;

    /// What the fake collector received: per request, the connection it came on
    /// (numbered from 0) and its body.
    type Received = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

    /// A collector answering each request with the next of `answers` (and closing
    /// the connection after it when its flag says so); its URL and what it received.
    async fn fake_collector(answers: Vec<(&'static str, bool)>) -> (String, Received) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
        let received = Received::default();
        let seen = received.clone();
        tokio::spawn(async move {
            for connection in 0.. {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(stream, connection, answers.clone(), seen.clone()));
            }
        });
        (url, received)
    }

    async fn serve(
        mut stream: TcpStream,
        connection: usize,
        answers: Arc<Mutex<VecDeque<(&'static str, bool)>>>,
        received: Received,
    ) {
        let mut read = Vec::new();
        loop {
            let (head_len, length) = loop {
                let mut headers = [httparse::EMPTY_HEADER; 16];
                let mut request = httparse::Request::new(&mut headers);
                if let httparse::Status::Complete(len) = request.parse(&read).unwrap() {
                    assert_eq!(request.method, Some("POST"));
                    assert_eq!(request.path, Some("/v1/traces"));
                    let length = request
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .map(|h| {
                            std::str::from_utf8(h.value)
                                .unwrap()
                                .parse::<usize>()
                                .unwrap()
                        })
                        .unwrap();
                    break (len, length);
                }
                if stream.read_buf(&mut read).await.unwrap() == 0 {
                    return;
                }
            };
            while read.len() < head_len + length {
                assert!(stream.read_buf(&mut read).await.unwrap() > 0);
            }
            let body = read[head_len..head_len + length].to_vec();
            read.drain(..head_len + length);
            received.lock().unwrap().push((connection, body));
            let (answer, close) = answers.lock().unwrap().pop_front().expect("an answer");
            stream.write_all(answer.as_bytes()).await.unwrap();
            if close {
                return;
            }
        }
    }

    const OK: &str =
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 2\r\n\r\nok";

    #[tokio::test]
    async fn batches_go_whole_on_one_kept_connection() {
        let (url, received) = fake_collector(vec![(OK, false), (OK, false)]).await;
        let mut collector = Collector::new(&url.parse().unwrap()).unwrap();
        collector.post(&[b"head", b"-first"]).await.unwrap();
        collector.post(&[b"", b"second"]).await.unwrap();
        assert_eq!(
            *received.lock().unwrap(),
            [(0, b"head-first".to_vec()), (0, b"second".to_vec())]
        );
    }

    #[tokio::test]
    async fn interim_chunked_and_close_delimited_answers_are_read_whole() {
        let chunked = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                       3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: yes\r\n\r\n";
        let until_closed = "HTTP/1.0 200 OK\r\n\r\nthe body ends with the connection";
        let (url, received) =
            fake_collector(vec![(chunked, false), (until_closed, true), (OK, false)]).await;
        let mut collector = Collector::new(&url.parse().unwrap()).unwrap();
        for body in [&b"one"[..], b"two", b"three"] {
            collector.post(&[body]).await.unwrap();
        }
        // The chunked answer left the connection usable; the HTTP/1.0 one ended it.
        let connections: Vec<usize> = received.lock().unwrap().iter().map(|r| r.0).collect();
        assert_eq!(connections, [0, 0, 1]);
    }

    /// A refusal is reported, not sent again, and leaves the connection usable.
    #[tokio::test]
    async fn a_refusal_is_an_error_naming_the_status() {
        let refused = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy";
        let (url, received) =
            fake_collector(vec![(OK, false), (refused, false), (OK, false)]).await;
        let mut collector = Collector::new(&url.parse().unwrap()).unwrap();
        collector.post(&[b"first"]).await.unwrap();
        let err = collector.post(&[b"second"]).await.unwrap_err();
        assert_eq!(err, "the collector answered 503");
        collector.post(&[b"third"]).await.unwrap();
        assert_eq!(
            *received.lock().unwrap(),
            [
                (0, b"first".to_vec()),
                (0, b"second".to_vec()),
                (0, b"third".to_vec())
            ]
        );
    }

    /// A collector that drops a kept-alive connection between batches does not lose
    /// the next one: it is sent again on a new connection.
    #[tokio::test]
    async fn a_connection_the_collector_closed_is_opened_again() {
        let (url, received) = fake_collector(vec![(OK, true), (OK, false)]).await;
        let mut collector = Collector::new(&url.parse().unwrap()).unwrap();
        collector.post(&[b"first"]).await.unwrap();
        collector.post(&[b"second"]).await.unwrap();
        assert_eq!(
            *received.lock().unwrap(),
            [(0, b"first".to_vec()), (1, b"second".to_vec())]
        );
    }

    #[test]
    fn the_address_and_host_come_from_the_endpoint_without_user_information() {
        let collector = Collector::new(&"http://[::1]:4318/v1/traces".parse().unwrap()).unwrap();
        assert_eq!(collector.address, "[::1]:4318");
        assert!(
            collector
                .head
                .starts_with("POST /v1/traces HTTP/1.1\r\nHost: [::1]:4318\r\n")
        );
        let collector = Collector::new(
            &"http://someone:secret@collector.test/v1/traces"
                .parse()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(collector.address, "collector.test:80");
        assert!(collector.head.contains("\r\nHost: collector.test\r\n"));
        assert!(!collector.head.contains("secret"));
    }

    #[tokio::test]
    async fn no_collector_is_an_error_naming_the_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let mut collector =
            Collector::new(&format!("http://{address}/v1/traces").parse().unwrap()).unwrap();
        let err = collector.post(&[b"spans"]).await.unwrap_err();
        assert!(
            err.starts_with(&format!("cannot connect to {address}")),
            "{err}"
        );
    }
}
