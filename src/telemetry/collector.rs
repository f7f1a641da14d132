//! The collector's OTLP/HTTP endpoint, as the exporter posts to it: `hyper-util`'s
//! client (already in the build through axum's hyper), keeping one connection alive
//! between batches, each export request's answer read whole and only its status kept.
//!
//! A post costs the gateway about 32,000 instructions (the pool, the request and header
//! maps, the streamed body, the response's; the `gateway-instructions` dumps,
//! 2026-11-27), about 60 per span of a full batch of 512. A client of our own did it
//! in about 5,300, 50 instructions a span less, on a path only `--otlp-endpoint` takes:
//! far below the 3% that owning an HTTP client would have to save.

use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The most an answer's body may take: a collector answers a few bytes.
const MAX_ANSWER: usize = 1 << 20;

/// An export request's body: the parts of an `ExportTraceServiceRequest`, sent one
/// after the other without being copied together (a batch is up to hundreds of
/// kilobytes), its length given in `Content-Length`.
type Parts = StreamBody<
    futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::convert::Infallible>>>,
>;

/// Where export requests go, and the client that keeps a connection to it.
#[derive(Debug)]
pub(super) struct Collector {
    uri: Uri,
    client: Client<HttpConnector, Parts>,
}

impl Collector {
    /// The collector at `uri` (`http://host[:port]/path`).
    pub(super) fn new(uri: &Uri) -> Result<Collector, String> {
        if uri.host().is_none() {
            return Err("the endpoint has no host".to_owned());
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        // One exporter task, one request at a time: one connection is all it uses.
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1)
            .build(connector);
        Ok(Collector {
            uri: without_user_info(uri)?,
            client,
        })
    }

    /// Posts one export request whose body is `parts`, in order; `Err` says why it was
    /// not accepted. A request that fails after its connection was made (the collector
    /// closed a kept-alive connection meanwhile) is sent once more, on a new
    /// connection; a refusal, or no collector to connect to, is not retried.
    pub(super) async fn post(&self, parts: &[Bytes]) -> Result<(), String> {
        let status = match self.exchange(parts).await {
            Err(err) if !err.is_connect() => {
                tracing::debug!(error = %chain(&err), "the collector's connection failed; reconnecting");
                self.exchange(parts).await
            }
            outcome => outcome,
        }
        .map_err(|err| self.describe(&err))?;
        let status = status?;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the collector answered {}", status.as_u16()))
        }
    }

    /// Sends the request and reads its answer whole (so that the connection can be
    /// used again); the answer's status, or, when the body was not read, why.
    async fn exchange(
        &self,
        parts: &[Bytes],
    ) -> Result<Result<hyper::StatusCode, String>, hyper_util::client::legacy::Error> {
        let length: usize = parts.iter().map(Bytes::len).sum();
        let frames: Vec<_> = parts
            .iter()
            .map(|part| Ok(Frame::data(part.clone())))
            .collect();
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-protobuf"),
            )
            .header(CONTENT_LENGTH, length)
            .body(StreamBody::new(futures_util::stream::iter(frames)))
            .expect("a request from a checked URI");
        let answer = self.client.request(request).await?;
        let status = answer.status();
        Ok(Limited::new(answer.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map(|_| status)
            .map_err(|err| format!("cannot read the collector's answer: {err}")))
    }

    /// Why a post failed, naming the collector's address when none was reached.
    fn describe(&self, err: &hyper_util::client::legacy::Error) -> String {
        if err.is_connect() {
            let address = self.uri.authority().map_or("", |a| a.as_str());
            let address = match self.uri.port_u16() {
                Some(_) => address.to_owned(),
                None => format!("{address}:80"),
            };
            format!("cannot connect to {address}: {}", chain(err))
        } else {
            chain(err)
        }
    }
}

/// An error with its causes, `error: cause: cause`.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `uri` without user information (`user:password@`), which a request's URI must not
/// carry (it would be sent in `Host`).
fn without_user_info(uri: &Uri) -> Result<Uri, String> {
    let Some(authority) = uri.authority() else {
        return Ok(uri.clone());
    };
    let bare = authority.as_str().rsplit('@').next().unwrap_or_default();
    if bare.len() == authority.as_str().len() {
        return Ok(uri.clone());
    }
    let mut parts = uri.clone().into_parts();
    parts.authority = Some(
        bare.parse()
            .map_err(|err| format!("the endpoint's host: {err}"))?,
    );
    Uri::from_parts(parts).map_err(|err| format!("the endpoint: {err}"))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use hyper::body::Bytes;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::Collector;

    /// What the fake collector received: per request, the connection it came on
    /// (numbered from 0), its `Host` and its body.
    type Received = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

    /// A collector answering each request with the next of `answers` (and closing
    /// the connection after it when its flag says so); its URL and what it received.
    async fn fake_collector(answers: Vec<(&'static str, bool)>) -> (String, Received) {
        let (url, received, _) = fake_collector_with_hosts(answers).await;
        (url, received)
    }

    /// [`fake_collector`], also keeping each request's `Host`.
    async fn fake_collector_with_hosts(
        answers: Vec<(&'static str, bool)>,
    ) -> (String, Received, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
        let received = Received::default();
        let hosts = Arc::new(Mutex::new(Vec::new()));
        let (seen, seen_hosts) = (received.clone(), hosts.clone());
        tokio::spawn(async move {
            for connection in 0.. {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(
                    stream,
                    connection,
                    answers.clone(),
                    seen.clone(),
                    seen_hosts.clone(),
                ));
            }
        });
        (url, received, hosts)
    }

    async fn serve(
        mut stream: TcpStream,
        connection: usize,
        answers: Arc<Mutex<VecDeque<(&'static str, bool)>>>,
        received: Received,
        hosts: Arc<Mutex<Vec<String>>>,
    ) {
        let mut read = Vec::new();
        loop {
            let (head_len, length) = loop {
                let mut headers = [httparse::EMPTY_HEADER; 16];
                let mut request = httparse::Request::new(&mut headers);
                if let httparse::Status::Complete(len) = request.parse(&read).unwrap() {
                    assert_eq!(request.method, Some("POST"));
                    assert_eq!(request.path, Some("/v1/traces"));
                    let header = |name: &str| {
                        request
                            .headers
                            .iter()
                            .find(|h| h.name.eq_ignore_ascii_case(name))
                            .map(|h| std::str::from_utf8(h.value).unwrap().to_owned())
                    };
                    assert_eq!(
                        header("content-type").as_deref(),
                        Some("application/x-protobuf")
                    );
                    assert_eq!(header("transfer-encoding"), None);
                    hosts.lock().unwrap().push(header("host").unwrap());
                    let length = header("content-length").unwrap().parse::<usize>().unwrap();
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

    fn parts(parts: &[&'static [u8]]) -> Vec<Bytes> {
        parts.iter().map(|part| Bytes::from_static(part)).collect()
    }

    #[tokio::test]
    async fn batches_go_whole_on_one_kept_connection() {
        let (url, received) = fake_collector(vec![(OK, false), (OK, false)]).await;
        let collector = Collector::new(&url.parse().unwrap()).unwrap();
        collector.post(&parts(&[b"head", b"-first"])).await.unwrap();
        collector.post(&parts(&[b"", b"second"])).await.unwrap();
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
        let collector = Collector::new(&url.parse().unwrap()).unwrap();
        for body in [&b"one"[..], b"two", b"three"] {
            collector.post(&parts(&[body])).await.unwrap();
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
        let collector = Collector::new(&url.parse().unwrap()).unwrap();
        collector.post(&parts(&[b"first"])).await.unwrap();
        let err = collector.post(&parts(&[b"second"])).await.unwrap_err();
        assert_eq!(err, "the collector answered 503");
        collector.post(&parts(&[b"third"])).await.unwrap();
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
        let collector = Collector::new(&url.parse().unwrap()).unwrap();
        collector.post(&parts(&[b"first"])).await.unwrap();
        collector.post(&parts(&[b"second"])).await.unwrap();
        assert_eq!(
            *received.lock().unwrap(),
            [(0, b"first".to_vec()), (1, b"second".to_vec())]
        );
    }

    /// An answer longer than any collector's is an error, not read to its end.
    #[tokio::test]
    async fn an_overlong_answer_is_an_error() {
        let long: &'static str = Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}",
                super::MAX_ANSWER + 1,
                "x".repeat(super::MAX_ANSWER + 1)
            )
            .into_boxed_str(),
        );
        let (url, _) = fake_collector(vec![(long, false)]).await;
        let collector = Collector::new(&url.parse().unwrap()).unwrap();
        let err = collector.post(&parts(&[b"spans"])).await.unwrap_err();
        assert!(
            err.starts_with("cannot read the collector's answer"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn user_information_is_not_sent() {
        let (url, received, hosts) = fake_collector_with_hosts(vec![(OK, false)]).await;
        let url = url.replace("http://", "http://someone:secret@");
        let collector = Collector::new(&url.parse().unwrap()).unwrap();
        assert!(!format!("{collector:?}").contains("secret"));
        collector.post(&parts(&[b"spans"])).await.unwrap();
        assert_eq!(received.lock().unwrap().len(), 1);
        let host = hosts.lock().unwrap()[0].clone();
        assert!(host.starts_with("127.0.0.1:"), "{host}");
    }

    #[tokio::test]
    async fn no_collector_is_an_error_naming_the_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let collector =
            Collector::new(&format!("http://{address}/v1/traces").parse().unwrap()).unwrap();
        let err = collector.post(&parts(&[b"spans"])).await.unwrap_err();
        assert!(
            err.starts_with(&format!("cannot connect to {address}")),
            "{err}"
        );
    }
}
