//! `ApiError`: the one HTTP-facing error type. Every failure, from a malformed body to
//! an unreachable Redis, leaves the server as `application/problem+json` (RFC 9457)
//! with a stable machine-readable `code`.
//!
//! # What a detail may say
//!
//! * Input is echoed at most as a short prefix: [`echo`] cuts it to
//!   [`ECHO_LIMIT`] characters and `…`, and every detail leaving the server is cut the
//!   same way word by word (a 10,000-character name becomes its first 64), and to a
//!   few hundred characters in all, whoever wrote it (a handler, serde, the script).
//! * Redis's and Lua's own messages never reach the client: an unreachable or refusing
//!   Redis is `unavailable` "Redis is unavailable", anything unexpected is `internal`
//!   "an internal error occurred"; the cause is logged once, when the error is turned
//!   into an answer.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::core::{self, ScriptCode};
use crate::model::{NameError, Problem};

/// Errors returned by handlers. Each variant's doc names its status and `code`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `bad_request`: malformed JSON, a missing or ill-typed field, a bad name.
    #[error("{0}")]
    BadRequest(String),
    /// 401 `unauthorized` (with `WWW-Authenticate: Bearer`): no bearer token, a
    /// malformed `Authorization` header, or a token the server does not know.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `forbidden`: the token lacks the scope the route needs, or is not granted
    /// the namespace the request addresses; or a browser request from another origin
    /// (see `browser.rs`).
    #[error("{0}")]
    Forbidden(String),
    /// 404 `not_found`: the job, recurring job or route does not exist.
    #[error("{0}")]
    NotFound(String),
    /// 405 `method_not_allowed`.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 409 `conflict`: the job is not in a state that allows the action.
    #[error("{0}")]
    Conflict(String),
    /// 409 `lock_lost`: the job is held by another worker.
    #[error("{0}")]
    LockLost(String),
    /// 409 `timed_out`: the job ran longer than its `max_run`; its run is over (it is
    /// retried or failed by its retries, as on a lock expiry).
    #[error("{0}")]
    TimedOut(String),
    /// 421 `misdirected_request`: a `Host` this server does not answer for (see
    /// `browser.rs`).
    #[error("{0}")]
    Misdirected(String),
    /// 413 `payload_too_large`: the body is over the configured limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415 `unsupported_media_type`: the body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 408 `request_timeout` (with `Connection: close`): the body did not arrive
    /// within the body timeout (`--body-timeout`).
    #[error("{0}")]
    RequestTimeout(String),
    /// 414 `uri_too_long`: the URI is over the HTTP server's limit.
    #[error("{0}")]
    UriTooLong(String),
    /// 431 `request_header_fields_too_large`: a header, or the whole head, is over its
    /// limit.
    #[error("{0}")]
    HeadersTooLarge(String),
    /// 503 `unavailable` (with `Retry-After`): Redis unreachable, or the request took
    /// too long.
    #[error("{0}")]
    Unavailable(String),
    /// 503 `out_of_memory` (with `Retry-After`): Redis is over its `maxmemory` and
    /// refused the write before it started. Calls that only delete still run.
    #[error(
        "Redis is out of memory and refuses writes; nothing was changed (canceling jobs, \
         forgetting queues, deleting recurring jobs and workers still work)"
    )]
    OutOfMemory,
    /// 503 `unavailable` (with `Retry-After`), detail "Redis is unavailable", followed
    /// by the reason word when Redis said "not here" or "not now" (`(READONLY)`,
    /// `(MOVED)`, ...): Redis could not answer or refused the write. The cause is
    /// logged, never returned.
    #[error("Redis is unavailable{}", .0.reason().map(|word| format!(" ({word})")).unwrap_or_default())]
    RedisUnavailable(core::Error),
    /// 500 `internal`: a bug. The detail is logged, never returned.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Misdirected(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Conflict(_) | ApiError::LockLost(_) | ApiError::TimedOut(_) => {
                StatusCode::CONFLICT
            }
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::UriTooLong(_) => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::Unavailable(_) | ApiError::RedisUnavailable(_) | ApiError::OutOfMemory => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine word in the problem's `code`.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Misdirected(_) => "misdirected_request",
            ApiError::Conflict(_) => "conflict",
            ApiError::LockLost(_) => "lock_lost",
            ApiError::TimedOut(_) => "timed_out",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::RequestTimeout(_) => "request_timeout",
            ApiError::UriTooLong(_) => "uri_too_long",
            ApiError::HeadersTooLarge(_) => "request_header_fields_too_large",
            ApiError::Unavailable(_) | ApiError::RedisUnavailable(_) => "unavailable",
            ApiError::OutOfMemory => "out_of_memory",
            ApiError::Internal(_) => "internal",
        }
    }

    /// The problem document sent to the client.
    pub fn problem(&self) -> Problem {
        let status = self.status();
        let detail = match self {
            ApiError::Internal(_) => "an internal error occurred; it has been logged".to_owned(),
            other => bounded(&other.to_string()),
        };
        Problem {
            r#type: format!("urn:qlessd:problem:{}", self.code()),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail,
            code: self.code().to_owned(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Internal(why) => tracing::error!(error = %why, "internal error"),
            ApiError::Unavailable(why) => tracing::warn!(error = %why, "unavailable"),
            ApiError::RedisUnavailable(cause) => {
                tracing::warn!(error = %cause, "Redis is unavailable")
            }
            ApiError::OutOfMemory => tracing::warn!("Redis is out of memory: a write was refused"),
            _ => {}
        }
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut response = (self.status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        match self {
            ApiError::Unavailable(_) | ApiError::RedisUnavailable(_) | ApiError::OutOfMemory => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::Unauthorized(_) => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"qlessd\""),
                );
            }
            // The rest of the body may still be on its way: the connection cannot
            // carry another request.
            ApiError::RequestTimeout(_) => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

/// A name that breaks the rule is bad input; the detail names its kind and the rule.
impl From<NameError> for ApiError {
    fn from(err: NameError) -> Self {
        ApiError::BadRequest(err.to_string())
    }
}

impl From<core::Error> for ApiError {
    fn from(err: core::Error) -> Self {
        match err {
            core::Error::Script { code, message } => match code {
                ScriptCode::Argument => ApiError::BadRequest(message),
                ScriptCode::NotFound => ApiError::NotFound(message),
                ScriptCode::State | ScriptCode::Queue | ScriptCode::Dependency => {
                    ApiError::Conflict(message)
                }
                ScriptCode::Worker => ApiError::LockLost(message),
                ScriptCode::TimedOut => ApiError::TimedOut(message),
                ScriptCode::Command | ScriptCode::Keys => {
                    ApiError::Internal(format!("{code} {message}"))
                }
            },
            err if err.is_out_of_memory() => ApiError::OutOfMemory,
            core::Error::Redis(why) if why.starts_with("OOM ") => ApiError::OutOfMemory,
            err @ core::Error::Unavailable(_) => ApiError::RedisUnavailable(err),
            core::Error::Redis(why) if is_capacity_error(&why) => {
                ApiError::RedisUnavailable(core::Error::Redis(why))
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// The most characters of a client's input a detail repeats.
pub const ECHO_LIMIT: usize = 64;

/// The most characters of a whole detail.
const DETAIL_LIMIT: usize = 400;

/// `input` as a detail may quote it: its first [`ECHO_LIMIT`] characters, then `…`
/// when there were more.
pub fn echo(input: &str) -> String {
    cut(input, ECHO_LIMIT)
}

fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A detail with every whitespace-separated word cut to [`ECHO_LIMIT`] characters and
/// the whole to [`DETAIL_LIMIT`]: whatever quoted the input (a handler, serde's
/// messages, the script), a long input comes back as a short prefix.
fn bounded(detail: &str) -> String {
    let fits = detail.chars().count() <= DETAIL_LIMIT
        && detail
            .split_whitespace()
            .all(|word| word.chars().nth(ECHO_LIMIT).is_none());
    if fits {
        return detail.to_owned();
    }
    let mut out = String::with_capacity(detail.len().min(DETAIL_LIMIT * 4));
    let mut rest = detail;
    while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        out.push_str(&echo(&rest[..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    cut(&out, DETAIL_LIMIT)
}

/// Redis refusing writes (read-only replica, busy script) is a temporary condition
/// for the client, not a bug.
fn is_capacity_error(message: &str) -> bool {
    ["READONLY", "BUSY", "MISCONF", "NOREPLICAS"]
        .iter()
        .any(|code| message.contains(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_codes_map_to_the_documented_statuses() {
        let cases = [
            (ScriptCode::Argument, StatusCode::BAD_REQUEST, "bad_request"),
            (ScriptCode::NotFound, StatusCode::NOT_FOUND, "not_found"),
            (ScriptCode::State, StatusCode::CONFLICT, "conflict"),
            (ScriptCode::Worker, StatusCode::CONFLICT, "lock_lost"),
            (ScriptCode::Queue, StatusCode::CONFLICT, "conflict"),
            (ScriptCode::Dependency, StatusCode::CONFLICT, "conflict"),
            (ScriptCode::TimedOut, StatusCode::CONFLICT, "timed_out"),
            (
                ScriptCode::Command,
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
            ),
        ];
        for (code, status, word) in cases {
            let api = ApiError::from(core::Error::Script {
                code,
                message: "Complete(): nope".into(),
            });
            assert_eq!((api.status(), api.code()), (status, word), "{code}");
        }
    }

    #[test]
    fn long_input_comes_back_as_a_short_prefix() {
        let name = "q".repeat(10_000);
        let detail = ApiError::BadRequest(format!("queue \"{name}\" is not a valid name"))
            .problem()
            .detail;
        assert!(detail.chars().count() < 120, "{detail}");
        assert!(
            detail.contains(&format!("\"{}…", "q".repeat(ECHO_LIMIT - 1))),
            "{detail}"
        );
        assert!(detail.ends_with("is not a valid name"), "{detail}");
        let spaced = "ab ".repeat(1000);
        let detail = ApiError::BadRequest(spaced).problem().detail;
        assert!(detail.chars().count() <= DETAIL_LIMIT + 1, "{detail}");
        assert_eq!(echo("short"), "short");
        assert_eq!(echo(&"é".repeat(65)), format!("{}…", "é".repeat(64)));
    }

    #[test]
    fn redis_failures_give_a_stable_word_and_no_redis_message() {
        for err in [
            core::Error::Unavailable("Connection refused (os error 111)".into()),
            core::Error::Redis("BUSY Redis is busy running a script".into()),
        ] {
            let api = ApiError::from(err);
            let problem = api.problem();
            assert_eq!(
                (problem.status, problem.code.as_str()),
                (503, "unavailable")
            );
            assert_eq!(problem.detail, "Redis is unavailable");
        }
        // Out of memory has a word of its own, and says what still works.
        let reply = redis::parse_redis_value(
            b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
        )
        .unwrap();
        let redis::Value::ServerError(reply) = reply else {
            panic!("an error value");
        };
        for err in [
            core::Error::from(redis::RedisError::from(reply)),
            core::Error::Redis("OOM command not allowed when used memory > 'maxmemory'".into()),
        ] {
            let problem = ApiError::from(err).problem();
            assert_eq!(
                (problem.status, problem.code.as_str()),
                (503, "out_of_memory")
            );
            assert!(
                problem.detail.contains("canceling jobs"),
                "{}",
                problem.detail
            );
        }
        let problem =
            ApiError::from(core::Error::Redis("ERR user_script:12: boom".into())).problem();
        assert_eq!(problem.status, 500);
        assert!(!problem.detail.contains("boom"), "{}", problem.detail);
    }

    #[test]
    fn internal_details_are_not_leaked() {
        let problem = ApiError::Internal("secret stack".into()).problem();
        assert!(!problem.detail.contains("secret"));
        assert_eq!(problem.status, 500);
    }
}
