//! The OpenAPI document: the top-level description (`openapi_description.md`: errors,
//! the naming rule, the status-code rule), the paths and schemas gathered from the
//! routes that declare them (utoipa-axum), then one pass giving each operation's error
//! responses an example. Every error response's body is a `$ref` to the one `Problem`
//! schema, so a generated client has a single error type.

use utoipa::OpenApi;

use crate::routes;

/// Document-level metadata; the paths come from [`routes::router`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "qlessd",
        description = include_str!("openapi_description.md"),
        license(name = "MIT", identifier = "MIT"),
    ),
    components(
        responses(
            crate::model::PayloadTooLarge,
            crate::model::UnsupportedMediaType,
            crate::model::Unavailable,
        ),
        // Referenced by parameters and fields that keep a plain `String` type.
        schemas(crate::model::Name, crate::model::Text),
    ),
    tags(
        (name = "queues", description = "Queues: counts, putting jobs, leasing (pop), \
            peeking, listings by state, pausing, statistics"),
        (name = "jobs", description = "Jobs: inspection and the worker lifecycle \
            (heartbeat, complete, fail, retry), cancellation, priority, dependencies, \
            tags, tracking, history"),
        (name = "recurring", description = "Recurring jobs: templates spawning a job \
            every interval"),
        (name = "tags", description = "Tags: the most used tags and the jobs carrying one"),
        (name = "throttles", description = "Throttles: concurrency and rate limits \
            shared by the jobs that name them"),
        (name = "failures", description = "Failure groups and putting failed jobs back"),
        (name = "workers", description = "Workers and the jobs they hold"),
        (name = "config", description = "Server-wide options stored in Redis \
            (heartbeat, grace-period, jobs-history, ...)"),
        (name = "events", description = "Server-Sent Events: job transitions, lost \
            locks and cancellations as they happen"),
        (name = "operations", description = "Health and readiness"),
    )
)]
pub struct ApiDoc;

/// The complete document, as served at `/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = routes::router().split_for_parts();
    let mut base = ApiDoc::openapi();
    base.merge(doc);
    problem_examples(&mut base);
    base
}

/// Gives every operation's own error response (a problem whose description says what
/// went wrong there) an example: its status, its `code`, and the description as the
/// detail. The shared responses (413, 415, 503) carry theirs already. A 409 that names
/// `lock_lost` gets both of its codes as named examples.
fn problem_examples(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::example::ExampleBuilder;

    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            for (status, response) in operation.responses.responses.iter_mut() {
                let (RefOr::T(response), Ok(status)) = (response, status.parse::<u16>()) else {
                    continue;
                };
                let Some(RefOr::T(content)) = response.content.get_mut("application/problem+json")
                else {
                    continue;
                };
                let detail = response.description.replace('\n', " ");
                let title = code_of(status).1;
                let example =
                    |code: &str| crate::model::problem_example(status, title, code, &detail);
                if status == 409 && detail.contains("lock_lost") {
                    for code in ["conflict", "lock_lost"] {
                        let named = ExampleBuilder::new().value(Some(example(code))).build();
                        content.examples.insert(code.to_owned(), named.into());
                    }
                } else {
                    content.example = Some(example(code_of(status).0));
                }
            }
        }
    }
}

/// The `code` and title a status carries when only one code is possible (see
/// `ApiError::code`).
fn code_of(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("bad_request", "Bad Request"),
        401 => ("unauthorized", "Unauthorized"),
        403 => ("forbidden", "Forbidden"),
        404 => ("not_found", "Not Found"),
        405 => ("method_not_allowed", "Method Not Allowed"),
        409 => ("conflict", "Conflict"),
        413 => ("payload_too_large", "Payload Too Large"),
        415 => ("unsupported_media_type", "Unsupported Media Type"),
        429 => ("too_many_requests", "Too Many Requests"),
        500 => ("internal", "Internal Server Error"),
        503 => ("unavailable", "Service Unavailable"),
        _ => ("error", "Error"),
    }
}
