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
    /// A stable machine word: `bad_request`, `not_found`, `conflict`, `lock_lost`, `timed_out`,
    /// `payload_too_large`, `unsupported_media_type`, `unavailable`, `out_of_memory`,
    /// `internal`, ...
    pub code: String,
}

/// Liveness or readiness report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` (process up) or `ready` (Redis reachable and script loaded).
    #[schema(example = "ok")]
    pub status: String,
}

/// The example problem of an error response: `status` with its machine word `code`.
pub fn problem_example(status: u16, title: &str, code: &str, detail: &str) -> serde_json::Value {
    serde_json::json!({
        "type": format!("urn:qlessd:problem:{code}"),
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    })
}

/// A shared error response: an `application/problem+json` body whose schema is a
/// reference to the one [`Problem`] schema (so a generated client has one error type),
/// with an example of its own.
fn shared_problem(
    description: &str,
    example: serde_json::Value,
) -> utoipa::openapi::response::ResponseBuilder {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .example(Some(example))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", content)
}

/// 413: the body (or a job's data) is over the configured size limit.
pub struct PayloadTooLarge;

impl<'r> utoipa::ToResponse<'r> for PayloadTooLarge {
    fn response() -> (&'r str, utoipa::openapi::RefOr<utoipa::openapi::Response>) {
        let example = problem_example(
            413,
            "Payload Too Large",
            "payload_too_large",
            "the job's data is 2000000 bytes, over the limit of 1048576 bytes (--max-job-size)",
        );
        let response = shared_problem(
            "The body is over the configured size limit, or a job's `data` is over \
             `--max-job-size`; nothing was written",
            example,
        );
        ("PayloadTooLarge", response.build().into())
    }
}

/// 415: a body that is not `application/json`. Every POST, PUT, PATCH and DELETE can
/// answer it, also those that take no body (a body sent to them must still be JSON).
pub struct UnsupportedMediaType;

impl<'r> utoipa::ToResponse<'r> for UnsupportedMediaType {
    fn response() -> (&'r str, utoipa::openapi::RefOr<utoipa::openapi::Response>) {
        let example = problem_example(
            415,
            "Unsupported Media Type",
            "unsupported_media_type",
            "a POST, PUT, PATCH or DELETE with a body must say Content-Type: \
             application/json (one without a body may send no Content-Type)",
        );
        let response = shared_problem(
            "The request carries a body without `Content-Type: application/json` (a \
             request without a body needs no `Content-Type`); nothing was written",
            example,
        );
        ("UnsupportedMediaType", response.build().into())
    }
}

/// 503: Redis is unreachable or no connection was free in time (`unavailable`), or
/// Redis is out of memory and refused a write (`out_of_memory`); the `Retry-After`
/// header says when to try again.
pub struct Unavailable;

impl<'r> utoipa::ToResponse<'r> for Unavailable {
    fn response() -> (&'r str, utoipa::openapi::RefOr<utoipa::openapi::Response>) {
        use utoipa::openapi::{HeaderBuilder, ObjectBuilder, Type};
        let example = problem_example(
            503,
            "Service Unavailable",
            "unavailable",
            "redis: connection refused",
        );
        let retry_after = HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            ))
            .description(Some("Seconds to wait before retrying"))
            .build();
        let response = shared_problem(
            "Redis is unreachable or every connection is busy (`unavailable`), or Redis \
             is out of memory and refused a write (`out_of_memory`: nothing was written; \
             reads and the calls that only delete still work); retry after \
             `Retry-After` seconds",
            example,
        )
        .header("Retry-After", retry_after);
        ("Unavailable", response.build().into())
    }
}
