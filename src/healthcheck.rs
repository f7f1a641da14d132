//! `qlessd healthcheck`: asks the qlessd serving on the configured address whether it
//! is ready, for container health checks in images that have no curl.
//!
//! One HTTP/1.1 request on a fresh connection, sent with hyper's client connection
//! (TCP or a Unix socket alike: hyper-util's pooled client knows no Unix sockets).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper::header::HOST;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use crate::settings::{HealthcheckArgs, Listen};

/// Checks `/readyz` (or `/healthz` with `--live`) on `listen`; `Ok` when it answers
/// 200, otherwise what went wrong, in one line.
pub async fn run(listen: &Listen, args: &HealthcheckArgs) -> Result<(), String> {
    let path = if args.live { "/healthz" } else { "/readyz" };
    let (target, host) = match listen {
        Listen::Tcp(addr) => {
            let target = reachable(*addr);
            (target.to_string(), target.to_string())
        }
        Listen::Unix(_) => (listen.to_string(), "localhost".to_owned()),
    };
    let check = async {
        let connected = match listen {
            Listen::Tcp(addr) => TcpStream::connect(reachable(*addr))
                .await
                .map(|stream| Box::new(stream) as Box<dyn Stream>),
            Listen::Unix(socket) => UnixStream::connect(socket)
                .await
                .map(|stream| Box::new(stream) as Box<dyn Stream>),
        };
        let stream = connected.map_err(|err| format!("cannot connect to {target}: {err}"))?;
        status(stream, path, &host)
            .await
            .map_err(|err| format!("{target} did not answer HTTP: {err}"))
    };
    let status = tokio::time::timeout(Duration::from_secs(args.timeout), check)
        .await
        .map_err(|_| format!("{target}{path} did not answer within {}s", args.timeout))??;
    if status == StatusCode::OK {
        Ok(())
    } else {
        Err(format!("{target}{path} answered {}", status.as_u16()))
    }
}

/// The status of `GET path` sent over `stream`.
async fn status(stream: Box<dyn Stream>, path: &str, host: &str) -> hyper::Result<StatusCode> {
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection is driven beside the request; it ends when the check does.
    let driver = tokio::spawn(connection);
    let request = Request::get(path)
        .header(HOST, host)
        .body(Empty::<Bytes>::new())
        .expect("a GET of a fixed path is a valid request");
    let answered = sender.send_request(request).await;
    driver.abort();
    Ok(answered?.status())
}

/// A connection to the server, over TCP or a Unix socket.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A server listening on every address (`0.0.0.0`, `::`) is reached on loopback.
fn reachable(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), listen.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), listen.port())
        }
        _ => listen,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_on_every_address_is_checked_on_loopback() {
        let any: SocketAddr = "0.0.0.0:5858".parse().unwrap();
        assert_eq!(reachable(any).to_string(), "127.0.0.1:5858");
        let any6: SocketAddr = "[::]:5858".parse().unwrap();
        assert_eq!(reachable(any6).to_string(), "[::1]:5858");
        let one: SocketAddr = "10.0.0.2:80".parse().unwrap();
        assert_eq!(reachable(one), one);
    }
}
