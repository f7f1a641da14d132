//! The dashboard's session: the token a browser logged in with (kept in the
//! [`UI_COOKIE`] cookie, or sent as a bearer header), the form token derived from it,
//! and the cookie's attributes.
//!
//! Every action form carries a form token, so that a page on another site cannot
//! trigger an action (it cannot read the dashboard's pages to learn the token). The
//! token is a keyed hash (HMAC-SHA-256, with a key drawn at random per process) of the
//! session's secret: it differs from one session to another, a visitor without the
//! cookie never sees the one of a session, and it tells nothing about the secret it
//! comes from. A request without a session (no `--auth-file`, or the login form) gets
//! the hash of nothing, which opens no action when tokens are required.
//!
//! Each dashboard request's form token is worked out once, by [`with_form_token`], and
//! read by the templates that write forms ([`current`]): the page frame and the error
//! page write a form too, and are made where no request is at hand. So is whether the
//! request was let in with a token ([`signed_in`]): the frame offers "Log out" only
//! then, since without `--auth-file` there is nothing to log out of.

use std::sync::LazyLock;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::auth::{Grants, UI_COOKIE, dashboard_secret};

/// The key of the form tokens: random per process, so tokens end with it.
static KEY: LazyLock<[u8; 32]> = LazyLock::new(|| {
    let mut key = [0; 32];
    getrandom::fill(&mut key).expect("the operating system's random numbers");
    key
});

tokio::task_local! {
    /// The session of the request being answered.
    static SESSION: Session;
}

/// What the templates need to know of the request being answered.
#[derive(Debug, Clone)]
struct Session {
    /// Its form token.
    form_token: String,
    /// Whether it was let in with a token (the auth layer then leaves its grants).
    signed_in: bool,
}

/// The form token of the session whose secret is `secret` (none: no session): 32 hex
/// digits, the first 128 bits of the HMAC.
fn form_token_of(secret: Option<&[u8]>) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_slice()).expect("any key length");
    // The purpose first, so the key can never sign anything else by mistake.
    mac.update(b"qlessd dashboard form token\0");
    if let Some(secret) = secret {
        mac.update(b"session\0");
        mac.update(secret);
    }
    let digest = mac.finalize().into_bytes();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The form token of the request with `headers`.
pub(super) fn form_token(headers: &HeaderMap) -> String {
    form_token_of(dashboard_secret(headers))
}

/// Answers the dashboard's request with its form token at hand for [`current`], and
/// whether it came with a token for [`signed_in`].
pub(super) async fn with_form_token(request: Request, next: Next) -> Response {
    let session = Session {
        form_token: form_token(request.headers()),
        signed_in: request.extensions().get::<Grants>().is_some(),
    };
    SESSION.scope(session, next.run(request)).await
}

/// The form token of the request being answered (empty outside one, which matches no
/// form).
pub(super) fn current() -> String {
    SESSION
        .try_with(|session| session.form_token.clone())
        .unwrap_or_default()
}

/// Whether the request being answered was let in with a token (`--auth-file`): only
/// then is there a session to log out of.
pub(super) fn signed_in() -> bool {
    SESSION
        .try_with(|session| session.signed_in)
        .unwrap_or(false)
}

/// Whether `given` is the form token of the request being answered (compared in
/// constant time).
pub(super) fn is_current(given: &str) -> bool {
    let expected = current();
    !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

/// Whether the browser reached the dashboard over HTTPS: qlessd serves plain HTTP, so
/// through a proxy that ends TLS, which says so with `--secure-cookies` or the
/// `X-Forwarded-Proto: https` header it adds.
fn over_https(secure_cookies: bool, headers: &HeaderMap) -> bool {
    secure_cookies
        || headers
            .get("x-forwarded-proto")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(',').next())
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// The `Set-Cookie` value keeping `secret` for `/ui` (`None`: forgetting it): never
/// readable by scripts, never sent from another site's page, and only over HTTPS when
/// the dashboard is reached that way.
pub(super) fn cookie(
    secret: Option<&str>,
    secure_cookies: bool,
    headers: &HeaderMap,
) -> Option<HeaderValue> {
    let mut cookie = format!(
        "{UI_COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict",
        secret.unwrap_or("")
    );
    if secret.is_none() {
        cookie.push_str("; Max-Age=0");
    }
    if over_https(secure_cookies, headers) {
        cookie.push_str("; Secure");
    }
    HeaderValue::from_str(&cookie).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_session_has_its_own_form_token() {
        let alice = form_token_of(Some(b"secret-alice"));
        let bob = form_token_of(Some(b"secret-bob"));
        let nobody = form_token_of(None);
        assert_ne!(alice, bob);
        assert_ne!(alice, nobody);
        assert_eq!(alice, form_token_of(Some(b"secret-alice")));
        assert_eq!(alice.len(), 32);
        assert!(alice.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!alice.contains("alice"));
    }

    #[test]
    fn the_cookie_is_secure_when_the_dashboard_is_reached_over_https() {
        let plain = HeaderMap::new();
        let mut proxied = HeaderMap::new();
        proxied.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let set = |flag, headers| cookie(Some("s"), flag, headers).unwrap();
        assert_eq!(
            set(false, &plain),
            "qlessd_token=s; Path=/ui; HttpOnly; SameSite=Strict"
        );
        assert!(set(true, &plain).to_str().unwrap().ends_with("; Secure"));
        assert!(set(false, &proxied).to_str().unwrap().ends_with("; Secure"));
        let forget = cookie(None, true, &plain).unwrap();
        assert_eq!(
            forget,
            "qlessd_token=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0; Secure"
        );
    }
}
