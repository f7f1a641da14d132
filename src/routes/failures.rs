//! `/v1/failures` resources: failure groups, the failed jobs in a group, and putting
//! them back into a queue.

use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path, Query};
use super::validate;
use crate::error::ApiError;
use crate::model::{
    FailedJobs, FailureGroups, GroupName, PageQuery, Problem, Unavailable, UnfailRequest,
    UnfailResult,
};

/// How many of a group's newest jobs its most common message is counted over.
const MESSAGE_SAMPLE: u32 = 100;
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_failure_groups))
        .routes(routes!(list_failed_jobs))
        .routes(routes!(unfail_jobs))
}

/// Count the failed jobs of every failure group.
///
/// A job fails into the group named by the worker (`POST /v1/jobs/{jid}/fail`) or, when
/// it runs out of retries, into `failed-retries-<queue>`. Groups without failed jobs
/// are not listed; with no failures at all the object is empty.
#[utoipa::path(get, path = "/v1/failures", tag = "failures",
    operation_id = "list_failure_groups",
    responses(
        (status = 200, description = "Failed jobs per group", body = FailureGroups),
        (status = 503, response = Unavailable),
    ))]
async fn list_failure_groups(
    State(state): State<AppState>,
) -> Result<Json<FailureGroups>, ApiError> {
    let groups = state.qless.failed(state.clock.now()).await?;
    Ok(Json(FailureGroups(groups)))
}

/// List the failed jobs of a failure group.
///
/// Jids, newest failure first, with the total number of jobs in the group, when its
/// oldest and newest job failed, and its most common failure message (counted over its
/// newest 100 jobs). An unknown group is an empty page with total 0.
#[utoipa::path(get, path = "/v1/failures/{group}", tag = "failures",
    operation_id = "list_failed_jobs",
    params(("group" = crate::model::GroupName, Path, description = "Failure group"), PageQuery),
    responses(
        (status = 200, description = "A page of the group's jids, and the group described",
         body = FailedJobs),
        (status = 400, description = "A bad group name, offset or count not a number, or \
            count not between 1 and 1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn list_failed_jobs(
    State(state): State<AppState>,
    Path(group): Path<GroupName>,
    Query(page): Query<PageQuery>,
) -> Result<Json<FailedJobs>, ApiError> {
    let count = validate::page_count(page.count)?;
    let now = state.clock.now();
    let groups = [String::from(group)];
    let (jobs, summary) = tokio::try_join!(
        state
            .qless
            .failed_group(now, &groups[0], page.offset, count),
        state.qless.failed_summary(now, &groups, MESSAGE_SAMPLE)
    )?;
    Ok(Json(FailedJobs::new(jobs, summary.into_iter().next())))
}

/// Put failed jobs back into a queue.
///
/// Moves the oldest `count` jobs of the group (default 25) into `queue` as waiting
/// jobs with their full retry budget. The job keeps its last `failure` record for
/// reference. An empty or unknown group moves nothing (`moved: 0`).
#[utoipa::path(post, path = "/v1/failures/{group}/unfail", tag = "failures",
    operation_id = "unfail_jobs",
    params(("group" = crate::model::GroupName, Path, description = "Failure group")),
    request_body = UnfailRequest,
    responses(
        (status = 200, description = "How many jobs were moved", body = UnfailResult),
        (status = 400, description = "Malformed body, a missing queue, an unknown field, \
            a bad group or queue name, or count not between 1 and 1000; nothing is moved",
         body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn unfail_jobs(
    State(state): State<AppState>,
    Path(group): Path<GroupName>,
    Json(body): Json<UnfailRequest>,
) -> Result<Json<UnfailResult>, ApiError> {
    let count = validate::page_count(body.count)?;
    let moved = state
        .qless
        .unfail(
            state.clock.now(),
            body.queue.as_str(),
            group.as_str(),
            count,
        )
        .await?;
    Ok(Json(UnfailResult { moved }))
}
