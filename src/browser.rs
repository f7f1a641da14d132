//! What keeps a web page from using qlessd on its visitor's behalf.
//!
//! A page on any site can make the visitor's browser send requests to
//! `http://127.0.0.1:5858`: it cannot read the answers (the same-origin policy), but
//! without these checks a "simple" request (a form post, or `fetch` with a
//! `text/plain` body or none) would still pause queues or cancel jobs. So:
//!
//! * A request that may change something (any method but GET, HEAD and OPTIONS) and
//!   carries a body must say `Content-Type: application/json`: browsers only send that
//!   type across origins after a CORS preflight, which qlessd refuses unless
//!   configured. Without a body it may say nothing (generated API clients send no
//!   type when there is no body), since the next rule covers what a page could send.
//! * Such a request carrying an `Origin` header must come from this server's own
//!   origin or one allowed with `--cors-origin`. Browsers add `Origin` to every
//!   cross-origin POST and preflight every cross-origin PUT, PATCH and DELETE, so a
//!   body-less write a page could forge always names its foreign origin.
//! * When qlessd listens on a loopback address, the `Host` header must name a loopback
//!   host: a DNS-rebinding page (`attacker.example` re-pointed at 127.0.0.1) is the
//!   browser's "same origin" for itself, and only its `Host` header gives it away.
//!
//! Clients that are not browsers send JSON anyway and are unaffected.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use axum::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, Method};

use crate::error::ApiError;

/// The browser checks as configured: the listening address and the CORS origins.
#[derive(Debug, Clone, Default)]
pub struct BrowserPolicy {
    /// Origins allowed across origins (`--cors-origin`), lower-case.
    cors_origins: Arc<[String]>,
    /// Whether the server listens on a loopback address (the `Host` check applies).
    loopback: bool,
}

impl BrowserPolicy {
    /// A policy for a server listening on a loopback address (`loopback`) or not,
    /// allowing `cors_origins` (as `scheme://host[:port]`) across origins.
    pub fn new(loopback: bool, cors_origins: &[String]) -> Self {
        BrowserPolicy {
            cors_origins: cors_origins
                .iter()
                .map(|origin| origin.to_ascii_lowercase())
                .collect(),
            loopback,
        }
    }

    /// The configured CORS origins (empty: CORS is off).
    pub fn cors_origins(&self) -> &[String] {
        &self.cors_origins
    }

    /// Refuses the request when a browser on another site could have sent it (see the
    /// module documentation); `bodiless`: the request is known to carry no body.
    pub fn check(
        &self,
        method: &Method,
        headers: &HeaderMap,
        bodiless: bool,
    ) -> Result<(), ApiError> {
        let host = headers.get(HOST);
        if self.loopback
            && let Some(host) = host
            && !is_loopback_host(host.as_bytes())
        {
            return Err(ApiError::Misdirected(
                "this server listens on a loopback address and answers only requests for \
                 localhost, 127.0.0.1 or [::1] (the Host header), which keeps pages on \
                 other sites from reaching it through DNS rebinding"
                    .to_owned(),
            ));
        }
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return Ok(());
        }
        if let Some(origin) = headers.get(ORIGIN)
            && !self.allows_origin(origin, host)
        {
            return Err(ApiError::Forbidden(
                "requests from a web page of another origin (the Origin header) may not \
                 change anything here; allow the origin with --cors-origin"
                    .to_owned(),
            ));
        }
        match headers.get(CONTENT_TYPE) {
            Some(value) if is_json(value) => Ok(()),
            None if bodiless => Ok(()),
            _ => Err(ApiError::UnsupportedMediaType(
                "a POST, PUT, PATCH or DELETE with a body must say Content-Type: \
                 application/json (one without a body may send no Content-Type): browsers \
                 never send that type from another site without asking first, so it shows \
                 the request is not a forged one"
                    .to_owned(),
            )),
        }
    }

    /// [`check`](Self::check), except for the dashboard's form posts (under `/ui`):
    /// those are HTML forms, so not JSON; they carry the dashboard's form token
    /// instead, and an `Origin` header, when sent, must be this server's own (the
    /// `--cors-origin` list is for the API).
    pub fn check_request(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        bodiless: bool,
    ) -> Result<(), ApiError> {
        let dashboard = path == "/ui" || path.starts_with("/ui/");
        if !dashboard || matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return self.check(method, headers, bodiless);
        }
        // The Host check, as for any GET.
        self.check(&Method::GET, headers, bodiless)?;
        let host = headers.get(HOST);
        if let Some(origin) = headers.get(ORIGIN)
            && !BrowserPolicy::default().allows_origin(origin, host)
        {
            return Err(ApiError::Forbidden(
                "the dashboard's forms are only accepted from its own pages (the Origin \
                 header)"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// This server's own origin (`http(s)://` and the request's `Host`), or an origin
    /// allowed by `--cors-origin`.
    fn allows_origin(&self, origin: &HeaderValue, host: Option<&HeaderValue>) -> bool {
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        let same = match (authority, host.and_then(|host| host.to_str().ok())) {
            (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host),
            _ => false,
        };
        same || self
            .cors_origins
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(origin))
    }
}

/// `application/json`, with parameters (`; charset=utf-8`) or none.
fn is_json(value: &HeaderValue) -> bool {
    let essence = value.as_bytes().split(|&b| b == b';').next().unwrap_or(b"");
    essence
        .trim_ascii()
        .eq_ignore_ascii_case(b"application/json")
}

/// `localhost`, a loopback IPv4 address or `[::1]`, each with or without a port.
fn is_loopback_host(host: &[u8]) -> bool {
    let Ok(host) = std::str::from_utf8(host) else {
        return false;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else {
            return false;
        };
        if !is_port_suffix(after) {
            return false;
        }
        return address.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
    } else {
        match host.find(':') {
            Some(colon) if is_port_suffix(&host[colon..]) => &host[..colon],
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// Empty, or `:` and a port number.
fn is_port_suffix(text: &str) -> bool {
    match text.strip_prefix(':') {
        None => text.is_empty(),
        Some(digits) => {
            (1..=5).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised_with_or_without_a_port() {
        for good in [
            "localhost",
            "LOCALHOST:5858",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.1.2.3:5858",
            "[::1]",
            "[::1]:5858",
        ] {
            assert!(is_loopback_host(good.as_bytes()), "{good} refused");
        }
        for bad in [
            "attacker.example",
            "attacker.example:5858",
            "localhost.attacker.example",
            "10.0.0.1:5858",
            "[::2]:5858",
            "[::1]x",
            "localhost:",
            "localhost:99999999",
            "::1",
            "",
        ] {
            assert!(!is_loopback_host(bad.as_bytes()), "{bad} accepted");
        }
    }

    #[test]
    fn json_content_types_may_carry_parameters() {
        for good in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
        ] {
            assert!(is_json(&HeaderValue::from_static(good)), "{good}");
        }
        for bad in ["text/plain", "application/jsonx", "multipart/form-data", ""] {
            assert!(!is_json(&HeaderValue::from_static(bad)), "{bad}");
        }
    }
}
