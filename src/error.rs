//! `ApiError`: the one HTTP-facing error type. Every failure, from a malformed body to
//! an unreachable Redis, leaves the server as `application/problem+json` (RFC 9457)
//! with a stable machine-readable `code`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::core::{self, ScriptCode};
use crate::model::Problem;

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
    /// the namespace the request addresses.
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
    /// 413 `payload_too_large`: the body is over the configured limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415 `unsupported_media_type`: the body is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 503 `unavailable` (with `Retry-After`): Redis unreachable, pool exhausted,
    /// Redis out of memory, or the request took too long.
    #[error("{0}")]
    Unavailable(String),
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
            ApiError::Conflict(_) | ApiError::LockLost(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
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
            ApiError::Conflict(_) => "conflict",
            ApiError::LockLost(_) => "lock_lost",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    /// The problem document sent to the client.
    pub fn problem(&self) -> Problem {
        let status = self.status();
        let detail = match self {
            ApiError::Internal(_) => "an internal error occurred; it has been logged".to_owned(),
            other => other.to_string(),
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
            ApiError::Unavailable(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::Unauthorized(_) => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"qlessd\""),
                );
            }
            _ => {}
        }
        response
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
                ScriptCode::Command | ScriptCode::Keys => {
                    ApiError::Internal(format!("{code} {message}"))
                }
            },
            core::Error::Unavailable(why) => ApiError::Unavailable(why),
            core::Error::Redis(why) if is_capacity_error(&why) => ApiError::Unavailable(why),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// Redis refusing writes (out of memory, read-only replica, busy script) is a
/// temporary condition for the client, not a bug.
fn is_capacity_error(message: &str) -> bool {
    ["OOM", "READONLY", "BUSY", "MISCONF", "NOREPLICAS"]
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
    fn internal_details_are_not_leaked() {
        let problem = ApiError::Internal("secret stack".into()).problem();
        assert!(!problem.detail.contains("secret"));
        assert_eq!(problem.status, 500);
    }
}
