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
