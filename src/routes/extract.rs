//! Extractors that reject bad input with a problem document instead of axum's
//! plain-text defaults: a malformed body, path or query is always a 4xx
//! `application/problem+json`.

use axum::body::{Body, Bytes};
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use crate::connections::BodyTimeout;
use crate::error::ApiError;
use crate::state::AppState;

/// A JSON body (`Content-Type: application/json` or `application/*+json`).
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers()) {
            return Err(unsupported_media_type());
        }
        let bytes = body_bytes(request, state).await?;
        // A valid body is decoded directly. Only a refused one is decoded again by
        // axum, whose path-tracking decoder names the offending field in the message;
        // tracking the path of every body would cost each request for the rare error.
        match serde_json::from_slice(&bytes) {
            Ok(value) => Ok(Json(value)),
            Err(_) => match axum::Json::<T>::from_bytes(&bytes) {
                Ok(axum::Json(value)) => Ok(Json(value)),
                Err(rejection) => Err(rejection.into()),
            },
        }
    }
}

/// An optional JSON body (`Option<Json<T>>`): none when the request has no body at
/// all; a body there must be JSON as for [`Json`].
impl<T: DeserializeOwned, S: Send + Sync> axum::extract::OptionalFromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Option<Self>, ApiError> {
        if is_json(request.headers()) {
            return <Json<T> as FromRequest<S>>::from_request(request, state)
                .await
                .map(Some);
        }
        let bytes = body_bytes(request, state).await?;
        if bytes.is_empty() {
            Ok(None)
        } else {
            Err(unsupported_media_type())
        }
    }
}

/// The whole body of a single-item request, bounded by the body limit and the body
/// timeout.
async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if BodyTimeout::caused(&rejection) {
                body_timeout()
            } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge("the request body is over the size limit".to_owned())
            } else {
                ApiError::BadRequest(rejection.body_text())
            }
        })
}

/// A body that did not arrive in time (`connections.rs` ends its reading).
fn body_timeout() -> ApiError {
    ApiError::RequestTimeout(BodyTimeout.to_string())
}

fn unsupported_media_type() -> ApiError {
    ApiError::UnsupportedMediaType("expected a body with Content-Type: application/json".to_owned())
}

/// `application/json`, or any `application/<name>+json`, parameters aside.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    // What nearly every client sends, compared at once.
    if value.eq_ignore_ascii_case("application/json") {
        return true;
    }
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json")
            || subtype.len() > 5
                && subtype.is_char_boundary(subtype.len() - 5)
                && subtype[subtype.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// Room a JSON answer is written into at first: a leased job takes about 500 bytes.
/// axum's `Json` starts at 128 and doubles, so a pop's answer was copied two or three
/// times while it was written: 81.4k instructions a pop against 74.4k now
/// (`docs/archive/benchmarks-2026-11.md`).
const ANSWER_ROOM: usize = 1024;

/// Written by serde_json. A serializer of our own (strings checked for escapes eight
/// bytes at a time) saved 1.0% of the gateway's instructions per job: 114,615 against
/// 115,721 (`benches/worker_path_instructions.py --jobs 3000`, 2026-11-29), below the
/// 3% that owning a serializer has to pay for.
impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        let mut body = Vec::with_capacity(ANSWER_ROOM);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => (
                [(header::CONTENT_TYPE, "application/json")],
                Body::from(body),
            )
                .into_response(),
            Err(err) => {
                ApiError::Internal(format!("cannot encode the answer: {err}")).into_response()
            }
        }
    }
}

/// A JSON body of a batch endpoint, bounded by the configured batch limit rather than
/// the single-request one. Routes using it disable `DefaultBodyLimit`.
#[derive(Debug)]
pub struct BatchJson<T>(pub T);

impl<T: serde::de::DeserializeOwned> FromRequest<AppState> for BatchJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let limit = state.limits.batch_body_limit;
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, limit).await.map_err(|err| {
            if BodyTimeout::caused(&err) {
                return body_timeout();
            }
            ApiError::PayloadTooLarge(format!(
                "the request body is over the batch limit of {limit} bytes"
            ))
        })?;
        let request = Request::from_parts(parts, Body::from(bytes));
        let Json(value) = Json::<T>::from_request(request, state).await?;
        Ok(BatchJson(value))
    }
}

/// Path parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

/// Query-string parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => unsupported_media_type(),
            JsonRejection::JsonDataError(err) => ApiError::BadRequest(err.body_text()),
            JsonRejection::JsonSyntaxError(err) => ApiError::BadRequest(err.body_text()),
            other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge("the request body is over the size limit".to_owned())
            }
            other => ApiError::BadRequest(other.body_text()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_type(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
        headers
    }

    #[test]
    fn json_media_types_are_recognised() {
        for good in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/problem+json",
            "application/vnd.api+json ; q=1",
        ] {
            assert!(is_json(&with_type(good)), "{good}");
        }
        for bad in [
            "text/json",
            "application/xml",
            "application/+jsonx",
            "json",
            "",
        ] {
            assert!(!is_json(&with_type(bad)), "{bad}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }
}

/// The trace a put gives its jobs: with spans exported, the put request's span (which
/// continues the request's `traceparent`); else the request's `traceparent` as sent.
/// A malformed header is ignored (see `telemetry::TraceParent`).
#[derive(Debug)]
pub struct JobTrace(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for JobTrace {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        use crate::telemetry::{self, TraceParent};
        let own = telemetry::current();
        let trace = own.or_else(|| TraceParent::from_headers(&parts.headers));
        Ok(JobTrace(trace.map(|trace| trace.to_header())))
    }
}
