//! `qlessd healthcheck`: asks the qlessd serving on the configured address whether it
//! is ready, for container health checks in images that have no curl.
//!
//! One plain HTTP/1.1 request on a fresh connection is all it takes, so this speaks
//! the protocol by hand rather than carrying an HTTP client in the binary.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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
        let mut stream = connected.map_err(|err| format!("cannot connect to {target}: {err}"))?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|err| format!("cannot send to {target}: {err}"))?;
        // The status line is all we need, and it comes first.
        let mut head = [0u8; 64];
        let mut read = 0;
        while read < head.len() {
            match stream.read(&mut head[read..]).await {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(err) => return Err(format!("cannot read from {target}: {err}")),
            }
            if head[..read].contains(&b'\n') {
                break;
            }
        }
        status_of(&head[..read]).ok_or_else(|| format!("{target} did not answer HTTP"))
    };
    let status = tokio::time::timeout(Duration::from_secs(args.timeout), check)
        .await
        .map_err(|_| format!("{target}{path} did not answer within {}s", args.timeout))??;
    if status == 200 {
        Ok(())
    } else {
        Err(format!("{target}{path} answered {status}"))
    }
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

/// `HTTP/1.1 200 OK` -> 200.
fn status_of(head: &[u8]) -> Option<u16> {
    let line = std::str::from_utf8(head).ok()?.lines().next()?;
    let mut words = line.split_whitespace();
    words.next()?.strip_prefix("HTTP/")?;
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_read_from_the_status_line() {
        assert_eq!(status_of(b"HTTP/1.1 200 OK\r\ncontent-type"), Some(200));
        assert_eq!(
            status_of(b"HTTP/1.1 503 Service Unavailable\r\n"),
            Some(503)
        );
        assert_eq!(status_of(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status_of(b""), None);
    }

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
