//! Extractors that reject bad input with a problem document instead of axum's
//! plain-text defaults: a malformed body, path or query is always a 4xx
//! `application/problem+json`.

use axum::body::Body;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;

use crate::error::ApiError;
use crate::server::AppState;

/// A JSON body (`Content-Type: application/json`).
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
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
        let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
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
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
                "expected a body with Content-Type: application/json".to_owned(),
            ),
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
