//! A pushed queue as it may be shown, by the API (`GET /v1/queues/{queue}/push`) and
//! the dashboard alike: the script's state holds the signing secrets and the headers'
//! values, which neither may reveal.

use reqwest::Url;

use super::signature;
use crate::core::push::PushState;
use crate::model::{PushSettings, SecretInfo, ThrottleRate};

/// A pushed queue as the API shows it: fingerprints for secrets, credentials in
/// headers hidden.
pub fn settings(pushed: PushState) -> PushSettings {
    let secrets = pushed
        .secrets
        .iter()
        .enumerate()
        .map(|(i, secret)| SecretInfo {
            fingerprint: signature::fingerprint(secret),
            expires: if i == 0 { None } else { pushed.old_until },
        })
        .collect();
    let headers = pushed
        .headers
        .into_iter()
        .map(|(name, value)| {
            let value = if sensitive(&name) {
                "***".to_owned()
            } else {
                value
            };
            (name, value)
        })
        .collect();
    PushSettings {
        queue: pushed.queue,
        url: pushed.url,
        timeout: pushed.timeout,
        concurrency: pushed.concurrency,
        rate: pushed.rate.map(|rate| ThrottleRate {
            jobs: rate.jobs,
            seconds: rate.seconds,
        }),
        headers,
        secrets,
        delivered: pushed.delivered,
        retried: pushed.retried,
        failed: pushed.failed,
        in_flight: pushed.in_flight,
        recent: pushed.recent,
    }
}

/// An endpoint without what may carry a credential: `scheme://host[:port]/path`,
/// no query string, no fragment (and no user information, which a subscribed URL
/// never has). A URL that does not parse shows as nothing of it.
pub fn endpoint(url: &str) -> String {
    let Ok(parsed) = Url::parse(url) else {
        return "(unreadable URL)".to_owned();
    };
    let host = parsed.host_str().unwrap_or_default();
    match parsed.port() {
        Some(port) => format!("{}://{host}:{port}{}", parsed.scheme(), parsed.path()),
        None => format!("{}://{host}{}", parsed.scheme(), parsed.path()),
    }
}

/// Whether a header's value should not be shown: its name suggests a credential.
fn sensitive(name: &str) -> bool {
    name == "cookie"
        || ["auth", "token", "secret", "key", "password", "session"]
            .iter()
            .any(|word| name.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_headers_are_never_shown() {
        for name in [
            "authorization",
            "x-api-key",
            "x-auth-token",
            "cookie",
            "x-client-secret",
        ] {
            assert!(sensitive(name), "{name}");
        }
        assert!(!sensitive("x-team"));
    }

    #[test]
    fn an_endpoint_is_shown_without_its_query_or_fragment() {
        assert_eq!(
            endpoint("https://hooks.example.com/in/q?token=abc#frag"),
            "https://hooks.example.com/in/q"
        );
        assert_eq!(
            endpoint("http://10.0.0.1:8080/?sig=x"),
            "http://10.0.0.1:8080/"
        );
        assert_eq!(endpoint("https://u:p@h.example/x"), "https://h.example/x");
        assert_eq!(endpoint("not a url ?token=abc"), "(unreadable URL)");
    }
}
