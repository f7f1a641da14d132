//! What a receiver's answer (or the lack of one) does to the job it was about: the
//! rules of push delivery as a plain function, so that each is a row of a table test.
//!
//! | answer | the job |
//! |---|---|
//! | 2xx | completed; a JSON body within `--max-job-size` becomes its `result` |
//! | 429 or 503 with `Retry-After` (seconds or an HTTP date) | retried after that delay, using none of its retries |
//! | 429 without it, another 5xx, 408 | retried with its backoff; when its retries are used up it fails into `push-http-<status>` |
//! | a timeout, a refused or reset connection, a TLS error | the same, into `push-timeout`, `push-connect`, `push-tls` |
//! | another 4xx (and 1xx, 3xx: no redirect is followed) | failed at once into `push-http-<status>`, with the start of the body as its message |

use std::time::SystemTime;

/// The longest delay a `Retry-After` may ask for (a day): a receiver cannot park a
/// job for longer than that.
const MOST_RETRY_AFTER: f64 = 86_400.0;

/// How much of a refusing answer's body becomes the failure message.
const MESSAGE_CHARS: usize = 200;

/// A delivery that got no answer, by why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the queue's `timeout`.
    Timeout,
    /// The connection was refused, reset, or never made (no address allowed).
    Connect,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
}

/// What becomes of the job.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Completed, with this JSON text as its result.
    Complete { result: Option<String> },
    /// Retried after `seconds` (the receiver's `Retry-After`), or after its backoff.
    Retry {
        after: Option<f64>,
        group: String,
        message: String,
    },
    /// Failed at once.
    Fail { group: String, message: String },
}

/// The verdict on an answer: its status, its `Retry-After` header, its body (read up
/// to `max_result` bytes and one more, so that a longer body is known to be longer).
pub fn on_answer(
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    max_result: usize,
    now: SystemTime,
) -> Verdict {
    let group = format!("push-http-{status}");
    match status {
        200..=299 => Verdict::Complete {
            result: (body.len() <= max_result
                && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok())
            .then(|| String::from_utf8_lossy(body).into_owned()),
        },
        429 | 503 => Verdict::Retry {
            after: retry_after.and_then(|value| retry_after_seconds(value, now)),
            group,
            message: format!("HTTP {status}{}", excerpt(body)),
        },
        408 | 500..=599 => Verdict::Retry {
            after: None,
            group,
            message: format!("HTTP {status}{}", excerpt(body)),
        },
        _ => Verdict::Fail {
            group,
            message: format!("HTTP {status}{}", excerpt(body)),
        },
    }
}

/// The verdict on a delivery that got no answer.
pub fn on_failure(failure: Failure, detail: &str) -> Verdict {
    let group = match failure {
        Failure::Timeout => "push-timeout",
        Failure::Connect => "push-connect",
        Failure::Tls => "push-tls",
    };
    Verdict::Retry {
        after: None,
        group: group.to_owned(),
        message: detail.chars().take(MESSAGE_CHARS).collect(),
    }
}

/// `Retry-After` in seconds from `now`: a number of seconds, or an HTTP date in any
/// of the three forms a recipient must read (RFC 9110, 5.6.7: IMF-fixdate and the
/// obsolete RFC 850 and asctime forms; a date in the past is 0). Capped at a day;
/// None when unreadable.
fn retry_after_seconds(value: &str, now: SystemTime) -> Option<f64> {
    let value = value.trim();
    let seconds = if let Ok(seconds) = value.parse::<u64>() {
        seconds as f64
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now)
            .map_or(0.0, |left| left.as_secs_f64())
    };
    Some(seconds.min(MOST_RETRY_AFTER))
}

/// `: ` and the start of a body as readable text (control characters as spaces), or
/// nothing for an empty body.
fn excerpt(body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .take(MESSAGE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn at() -> SystemTime {
        // Sun, 06 Nov 1994 08:49:37 GMT
        UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    fn retry(after: Option<f64>, group: &str, message: &str) -> Verdict {
        Verdict::Retry {
            after,
            group: group.into(),
            message: message.into(),
        }
    }

    #[test]
    fn each_answer_decides_as_the_table_says() {
        let complete = |result: Option<&str>| Verdict::Complete {
            result: result.map(str::to_owned),
        };
        let cases: &[(u16, Option<&str>, &[u8], Verdict)] = &[
            (
                200,
                None,
                br#"{"sent":true}"#,
                complete(Some(r#"{"sent":true}"#)),
            ),
            (204, None, b"", complete(None)),
            (200, None, b"ok, thanks", complete(None)),
            (201, None, b"[1,2]", complete(Some("[1,2]"))),
            (200, None, b"\"a very long answer\"", complete(None)),
            (
                429,
                Some("7"),
                b"",
                retry(Some(7.0), "push-http-429", "HTTP 429"),
            ),
            (
                503,
                Some("Sun, 06 Nov 1994 08:50:07 GMT"),
                b"",
                retry(Some(30.0), "push-http-503", "HTTP 503"),
            ),
            (
                503,
                Some("Sunday, 06-Nov-94 08:50:07 GMT"),
                b"",
                retry(Some(30.0), "push-http-503", "HTTP 503"),
            ),
            (
                429,
                Some("Sun Nov  6 08:50:17 1994"),
                b"",
                retry(Some(40.0), "push-http-429", "HTTP 429"),
            ),
            (
                503,
                Some("Sun, 06 Nov 1994 08:00:00 GMT"),
                b"",
                retry(Some(0.0), "push-http-503", "HTTP 503"),
            ),
            (
                503,
                Some("999999999"),
                b"",
                retry(Some(86_400.0), "push-http-503", "HTTP 503"),
            ),
            (
                503,
                Some("soon"),
                b"",
                retry(None, "push-http-503", "HTTP 503"),
            ),
            (429, None, b"", retry(None, "push-http-429", "HTTP 429")),
            (
                500,
                None,
                b"boom\n",
                retry(None, "push-http-500", "HTTP 500: boom"),
            ),
            (502, None, b"", retry(None, "push-http-502", "HTTP 502")),
            (408, None, b"", retry(None, "push-http-408", "HTTP 408")),
            (
                400,
                None,
                b"missing field \"email\"",
                Verdict::Fail {
                    group: "push-http-400".into(),
                    message: "HTTP 400: missing field \"email\"".into(),
                },
            ),
            (
                404,
                None,
                b"",
                Verdict::Fail {
                    group: "push-http-404".into(),
                    message: "HTTP 404".into(),
                },
            ),
            (
                301,
                None,
                b"",
                Verdict::Fail {
                    group: "push-http-301".into(),
                    message: "HTTP 301".into(),
                },
            ),
        ];
        for (status, retry_after, body, expected) in cases {
            assert_eq!(
                &on_answer(*status, *retry_after, body, 16, at()),
                expected,
                "{status} {retry_after:?} {:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_refusal_keeps_only_the_start_of_its_body() {
        let body = "x".repeat(10_000);
        let Verdict::Fail { message, .. } = on_answer(422, None, body.as_bytes(), 16, at()) else {
            panic!("a 422 fails");
        };
        assert_eq!(message.len(), "HTTP 422: ".len() + 200);
    }

    #[test]
    fn no_answer_retries_into_a_group_naming_why() {
        assert_eq!(
            on_failure(Failure::Timeout, "no answer within 30 s"),
            retry(None, "push-timeout", "no answer within 30 s")
        );
        assert_eq!(
            on_failure(Failure::Connect, "connection refused"),
            retry(None, "push-connect", "connection refused")
        );
        assert_eq!(
            on_failure(Failure::Tls, "invalid certificate"),
            retry(None, "push-tls", "invalid certificate")
        );
    }
}
