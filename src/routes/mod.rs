//! HTTP handlers, one module per resource. Handlers are thin: extract and validate,
//! make one `core` call with the server's clock, map the result.

mod batches;
mod config;
mod events;
pub mod extract;
mod failures;
mod health;
mod jobs;
mod leasing;
pub mod metrics;
mod partitions;
mod push;
mod queues;
mod recurring;
mod search;
mod tags;
mod throttles;
pub mod validate;
mod workers;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// The API's validation of a config value, shared with the dashboard's config form.
pub(crate) use config::stored_text as config_text;

/// The API's reading of a search and of a bulk action, shared with the dashboard's
/// search page.
pub(crate) use search::{ActionPlan, SearchPlan, log_action};

/// Every route with its OpenAPI description.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(health::router())
        .merge(queues::router())
        .merge(batches::router())
        .merge(leasing::router())
        .merge(jobs::router())
        .merge(events::router())
        .merge(recurring::router())
        .merge(tags::router())
        .merge(throttles::router())
        .merge(push::router())
        .merge(failures::router())
        .merge(workers::router())
        .merge(config::router())
        .merge(search::router())
        .merge(partitions::router())
}

/// Leased `jobs` appear in their own traces (with spans exported): a span per job that
/// carries a `traceparent`, linked with the pop's request span.
fn trace_leases(jobs: &[crate::model::Job]) {
    if !crate::telemetry::tracing_on() {
        return;
    }
    for job in jobs {
        let trace = job
            .traceparent
            .as_deref()
            .and_then(crate::telemetry::TraceParent::parse);
        if let Some(trace) = trace {
            crate::telemetry::leased(&trace, &job.jid, &job.queue, &job.worker);
        }
    }
}
