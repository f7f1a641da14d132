//! `/v1/throttles`: concurrency and rate limits shared by the jobs that name them at
//! put (`"throttles": [...]`), one by one and all of them.

use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path, Query};
use super::validate;
use crate::core::ThrottleLimits;
use crate::error::ApiError;
use crate::model::{
    PageQuery, PayloadTooLarge, Problem, SetThrottleRequest, Throttle, ThrottleName, Unavailable,
};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_throttles))
        .routes(routes!(get_throttle, set_throttle, delete_throttle))
}

/// List the throttles.
///
/// Every throttle with limits, by name, `count` from `offset` (page on until a page is
/// shorter than `count`), each as `GET /v1/throttles/{name}` shows it.
#[utoipa::path(get, path = "/v1/throttles", tag = "throttles",
    operation_id = "list_throttles",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the throttles, by name (`[]` when there \
            is none)", body = [Throttle]),
        (status = 400, description = "offset or count is not a number, or count is not \
            between 1 and 1000", body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn list_throttles(
    State(state): State<AppState>,
    Query(page): Query<PageQuery>,
) -> Result<Json<Vec<Throttle>>, ApiError> {
    let count = validate::page_count(page.count)?;
    let now = state.clock.now();
    Ok(Json(
        state.qless.throttle_list(now, page.offset, count).await?,
    ))
}

/// A throttle's limits, holders and waiting jobs.
///
/// `running` lists the jobs holding it, `waiting` the jobs waiting for room (they are
/// out of their queues' waiting lists until a slot frees), `recent` the leases in
/// the current rate window.
#[utoipa::path(get, path = "/v1/throttles/{name}", tag = "throttles",
    operation_id = "get_throttle",
    params(("name" = crate::model::ThrottleName, Path, description = "Throttle name")),
    responses(
        (status = 200, description = "The throttle", body = Throttle),
        (status = 400, description = "The name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No limits, no holder and no waiting job",
         body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_throttle(
    State(state): State<AppState>,
    Path(name): Path<ThrottleName>,
) -> Result<Json<Throttle>, ApiError> {
    match state
        .qless
        .throttle_get(state.clock.now(), name.as_str())
        .await?
    {
        Some(throttle) => Ok(Json(throttle)),
        None => Err(ApiError::NotFound(format!(
            "Throttle {name} does not exist"
        ))),
    }
}

/// Set a throttle's limits.
///
/// `maximum`: at most that many jobs holding the throttle run at once. `rate`: at
/// most `jobs` leases per `seconds`. The body replaces earlier limits (a limit left
/// out is removed). A pop never leases a job one of whose throttles is full: such a
/// job waits apart (see `GET`) without blocking the other jobs of its queue, and
/// goes back to its queue when a job holding the throttle completes, fails, is
/// retried, canceled or requeued, or fails by lock expiry; waiting workers are woken.
/// A job held back by the rate limit is scheduled for when the window has room.
/// Checked in the script, so the limits hold across any number of gateways.
#[utoipa::path(put, path = "/v1/throttles/{name}", tag = "throttles",
    operation_id = "set_throttle",
    params(("name" = crate::model::ThrottleName, Path, description = "Throttle name")),
    request_body = SetThrottleRequest,
    responses(
        (status = 204, description = "The limits are set"),
        (status = 400, description = "Malformed body, no limit, a maximum of 0, a rate \
         of 0 jobs or a window that is not a positive number of seconds, or an invalid \
         name", body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn set_throttle(
    State(state): State<AppState>,
    Path(name): Path<ThrottleName>,
    Json(body): Json<SetThrottleRequest>,
) -> Result<StatusCode, ApiError> {
    let limits = throttle_limits(&body)?;
    state
        .qless
        .throttle_set(state.clock.now(), name.as_str(), limits)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Remove a throttle's limits.
///
/// Its waiting jobs go back to their queues; the jobs holding it keep running.
#[utoipa::path(delete, path = "/v1/throttles/{name}", tag = "throttles",
    operation_id = "delete_throttle",
    params(("name" = crate::model::ThrottleName, Path, description = "Throttle name")),
    responses(
        (status = 204, description = "The throttle has no limits now"),
        (status = 400, description = "The name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The throttle had no limits", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn delete_throttle(
    State(state): State<AppState>,
    Path(name): Path<ThrottleName>,
) -> Result<StatusCode, ApiError> {
    if state
        .qless
        .throttle_delete(state.clock.now(), name.as_str())
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(format!("Throttle {name} has no limits")))
    }
}

/// The checked limits of a request.
fn throttle_limits(body: &SetThrottleRequest) -> Result<ThrottleLimits, ApiError> {
    let bad = |message: &str| Err(ApiError::BadRequest(message.to_owned()));
    let mut limits = ThrottleLimits::default();
    match body.maximum {
        Some(0) => return bad("maximum must be at least 1"),
        Some(maximum) => limits.maximum = maximum,
        None => {}
    }
    if let Some(rate) = body.rate {
        if rate.jobs == 0 {
            return bad("rate.jobs must be at least 1");
        }
        if !(rate.seconds.is_finite() && rate.seconds > 0.0) {
            return bad("rate.seconds must be a finite number above 0");
        }
        limits.rate_jobs = rate.jobs;
        limits.rate_seconds = rate.seconds;
    }
    if body.maximum.is_none() && body.rate.is_none() {
        return bad("give a maximum, a rate, or both");
    }
    Ok(limits)
}
