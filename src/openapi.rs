//! The OpenAPI document: the top-level description here, the paths and schemas
//! gathered from the routes that declare them (utoipa-axum).

use utoipa::OpenApi;

use crate::routes;

/// Document-level metadata; the paths come from [`routes::router`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "qlessd",
        description = "An HTTP/JSON job queue speaking the qless protocol over Redis. \
            Every error is an `application/problem+json` document with a stable `code`.",
        license(name = "MIT"),
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
    base
}
