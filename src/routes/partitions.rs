//! `/v1/queues/{queue}/partitions`: fair queues. A queue's jobs put with a
//! `partition` are served in turn across partitions; these routes set the limits each
//! partition has and list the partitions with jobs waiting.

use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path, Query};
use crate::core::PartitionLimits;
use crate::error::ApiError;
use crate::model::{
    PartitionsQuery, PayloadTooLarge, Problem, QueueName, QueuePartitions, SetPartitionsRequest,
    Unavailable,
};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_partitions, set_partitions))
}

/// A queue's partitions.
///
/// The partitions with jobs waiting, in the order pops serve them (the next one
/// first), then those parked at a limit (`limited`: when pops look at them again),
/// `count` per page (page on with `cursor`), with the queue's partition limits.
#[utoipa::path(get, path = "/v1/queues/{queue}/partitions", tag = "queues",
    operation_id = "get_partitions",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name"),
        PartitionsQuery),
    responses(
        (status = 200, description = "A page of the partitions with jobs waiting",
         body = QueuePartitions),
        (status = 400, description = "An invalid queue name, a cursor that is not one \
            this route gave, or a count not between 1 and 1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_partitions(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Query(query): Query<PartitionsQuery>,
) -> Result<Json<QueuePartitions>, ApiError> {
    let count = query.count.unwrap_or(100);
    if !(1..=1000).contains(&count) {
        return Err(ApiError::BadRequest(
            "count must be between 1 and 1000".into(),
        ));
    }
    let offset = match query.cursor.as_deref() {
        None => 0,
        Some(cursor) => cursor
            .parse::<u64>()
            .map_err(|_| ApiError::BadRequest(format!("cursor {cursor:?} is not a cursor")))?,
    };
    let page = state
        .qless
        .partitions_get(state.clock.now(), queue.as_str(), offset, count)
        .await?;
    Ok(Json(page))
}

/// Set the limits of a queue's partitions.
///
/// `concurrency`: at most that many jobs of any one partition run at once. `rate`: at
/// most `jobs` jobs of any one partition start per `seconds`. The body replaces
/// earlier limits (a limit left out is removed; `{}` removes both). A partition at a
/// limit is skipped by the rotation, the others are still served; it is looked at
/// again when its rate window has room, or a second on for its concurrency. Checked
/// in the script, so the limits hold across any number of gateways. Jobs without a
/// partition have no such limits.
#[utoipa::path(put, path = "/v1/queues/{queue}/partitions", tag = "queues",
    operation_id = "set_partitions",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    request_body = SetPartitionsRequest,
    responses(
        (status = 204, description = "The limits are set"),
        (status = 400, description = "Malformed body, a concurrency of 0, a rate of 0 \
         jobs or a window that is not a positive number of seconds, or an invalid \
         queue name", body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn set_partitions(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Json(body): Json<SetPartitionsRequest>,
) -> Result<StatusCode, ApiError> {
    let bad = |message: &str| Err(ApiError::BadRequest(message.to_owned()));
    let mut limits = PartitionLimits::default();
    match body.concurrency {
        Some(0) => return bad("concurrency must be at least 1"),
        Some(concurrency) => limits.concurrency = concurrency,
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
    state
        .qless
        .partitions_set(state.clock.now(), queue.as_str(), limits)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
