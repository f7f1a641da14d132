//! Shared response documents: problems (errors) and health reports.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An error, as `application/problem+json` (RFC 9457).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "type": "urn:qlessd:problem:not_found",
    "title": "Not Found",
    "status": 404,
    "detail": "Complete(): Job 4bd1... does not exist",
    "code": "not_found"
}))]
pub struct Problem {
    /// A URI naming the kind of problem: `urn:qlessd:problem:<code>`.
    pub r#type: String,
    /// The HTTP reason phrase.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong, for humans.
    pub detail: String,
    /// A stable machine word: `bad_request`, `not_found`, `conflict`, `lock_lost`,
    /// `payload_too_large`, `unsupported_media_type`, `unavailable`, `internal`, ...
    pub code: String,
}

/// Liveness or readiness report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` (process up) or `ready` (Redis reachable and script loaded).
    #[schema(example = "ok")]
    pub status: String,
}

/// 413: the body is over the configured size limit.
#[derive(Debug, Clone, utoipa::ToResponse)]
#[response(
    description = "The body is over the configured size limit",
    content_type = "application/problem+json"
)]
pub struct PayloadTooLarge(#[to_schema] pub Problem);

/// 415: the body is not `application/json`.
#[derive(Debug, Clone, utoipa::ToResponse)]
#[response(
    description = "The body is not `application/json`",
    content_type = "application/problem+json"
)]
pub struct UnsupportedMediaType(#[to_schema] pub Problem);

/// 503: Redis is unreachable, out of memory, or no connection was free in time; the
/// `Retry-After` header says when to try again.
#[derive(Debug, Clone, utoipa::ToResponse)]
#[response(
    description = "Redis is unreachable, out of memory, or every connection is busy; \
        retry after `Retry-After` seconds",
    content_type = "application/problem+json",
    headers(("Retry-After" = u32, description = "Seconds to wait before retrying"))
)]
pub struct Unavailable(#[to_schema] pub Problem);
