//! `/v1/workers` resources: the workers the queue has seen and the jobs they hold.

use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path};
use crate::error::ApiError;
use crate::model::{Problem, Unavailable, WorkerJobs, WorkerName, WorkerSummary};
use crate::server::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_workers))
        .routes(routes!(get_worker, deregister_worker))
}

/// List the workers.
///
/// Every worker seen by a pop or a heartbeat within `max-worker-age` seconds (default
/// one day), most recently seen first, with how many jobs it holds (`jobs`: unexpired
/// locks; `stalled`: expired locks). Workers idle for longer are forgotten when this
/// list is read.
#[utoipa::path(get, path = "/v1/workers", tag = "workers", operation_id = "list_workers",
    responses(
        (status = 200, description = "The workers (`[]` when there are none)",
         body = Vec<WorkerSummary>),
        (status = 503, response = Unavailable),
    ))]
async fn list_workers(State(state): State<AppState>) -> Result<Json<Vec<WorkerSummary>>, ApiError> {
    Ok(Json(state.qless.workers(state.clock.now()).await?))
}

/// Get the jobs a worker holds.
///
/// `jobs` lists the jids whose lock is unexpired, `stalled` those whose lock expired,
/// each latest expiry first. A worker the queue does not know (never seen, idle too
/// long, or holding nothing) is not an error: both lists are empty.
#[utoipa::path(get, path = "/v1/workers/{worker}", tag = "workers",
    operation_id = "get_worker",
    params(("worker" = crate::model::WorkerName, Path, description = "Worker name")),
    responses(
        (status = 200, description = "The worker's jobs (empty lists for an unknown \
            worker)", body = WorkerJobs),
        (status = 400, description = "The worker name is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_worker(
    State(state): State<AppState>,
    Path(worker): Path<WorkerName>,
) -> Result<Json<WorkerJobs>, ApiError> {
    Ok(Json(
        state
            .qless
            .worker(state.clock.now(), worker.as_str())
            .await?,
    ))
}

/// Deregister a worker.
///
/// Removes the worker from the list of workers (idempotent: an unknown worker is also
/// a 204). The jobs it holds keep their locks; a worker that pops or heartbeats again
/// is listed again.
#[utoipa::path(delete, path = "/v1/workers/{worker}", tag = "workers",
    operation_id = "deregister_worker",
    params(("worker" = crate::model::WorkerName, Path, description = "Worker name")),
    responses(
        (status = 204, description = "The worker is no longer listed"),
        (status = 400, description = "The worker name is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn deregister_worker(
    State(state): State<AppState>,
    Path(worker): Path<WorkerName>,
) -> Result<StatusCode, ApiError> {
    state
        .qless
        .worker_deregister(state.clock.now(), &[worker.into()])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
