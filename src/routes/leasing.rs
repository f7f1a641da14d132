//! `POST /v1/pop`: leasing from several queues at once, with a strategy.

use std::collections::HashSet;

use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::Json;
use super::validate;
use crate::error::ApiError;
use crate::leasing::{Strategy, WeightedQueue};
use crate::model::{Job, MultiPopRequest, PayloadTooLarge, PopStrategy, Problem, Unavailable};
use crate::state::AppState;

/// Most queues one multi-queue pop may serve.
const MAX_QUEUES: usize = 64;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(pop_from_queues))
}

/// Lease jobs from several queues.
///
/// One call into the script tries the queues in an order chosen by `strategy`:
/// `ordered` takes from the first non-empty queue in the order given (then the next);
/// `round_robin` takes one job from each queue in turn, successive pops starting at
/// the next queue; `weighted` draws a queue for each job with probability
/// proportional to its `weight`, skipping queues found empty and drawing again among
/// the rest, so higher weights win more often and lower ones are never starved.
/// Queues found empty cost nothing extra. With `wait`, the request waits until any of
/// the queues has a job (or `[]` after `wait` seconds), like the single-queue pop
/// (and like it, answers at once while `--max-long-polls` requests are waiting).
/// Each job's `queue` field tells which queue it came from.
#[utoipa::path(post, path = "/v1/pop", tag = "queues", operation_id = "pop_jobs_from_queues",
    request_body = MultiPopRequest,
    responses(
        (status = 200, description = "The leased jobs (`[]` when none)", body = [Job]),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid or \
            repeated queue name, a weight that is not a positive number, 0 or more than \
            64 queues, or a count outside 1..=1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn pop_from_queues(
    State(state): State<AppState>,
    Json(body): Json<MultiPopRequest>,
) -> Result<Json<Vec<Job>>, ApiError> {
    let count = validate::page_count(body.count)?;
    let wait = validate::wait(body.wait, state.limits.max_wait)?;
    let queues = weighted_queues(body.queues)?;
    let strategy = match body.strategy {
        PopStrategy::Ordered => Strategy::Ordered,
        PopStrategy::RoundRobin => Strategy::RoundRobin,
        PopStrategy::Weighted => Strategy::Weighted,
    };
    let jobs = state
        .leasing
        .pop_multi(&queues, strategy, body.worker.as_str(), count, wait)
        .await?;
    super::trace_leases(&jobs);
    Ok(Json(jobs))
}

fn weighted_queues(queues: Vec<crate::model::PopQueue>) -> Result<Vec<WeightedQueue>, ApiError> {
    if queues.is_empty() || queues.len() > MAX_QUEUES {
        return Err(ApiError::BadRequest(format!(
            "queues must list between 1 and {MAX_QUEUES} queues"
        )));
    }
    let mut seen = HashSet::new();
    queues
        .into_iter()
        .map(|queue| {
            if !seen.insert(queue.name.clone()) {
                return Err(ApiError::BadRequest(format!(
                    "queue {:?} is listed twice",
                    queue.name.as_str()
                )));
            }
            if !(queue.weight.is_finite() && queue.weight > 0.0) {
                return Err(ApiError::BadRequest(format!(
                    "the weight of {:?} must be a positive number",
                    queue.name.as_str()
                )));
            }
            Ok(WeightedQueue {
                name: queue.name.into(),
                weight: queue.weight,
            })
        })
        .collect()
}
