//! `/v1/tags` resources: the most used tags, and the jobs carrying one tag.

use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path, Query};
use super::validate;
use crate::error::ApiError;
use crate::model::{JidPage, PageQuery, Problem, Tag, TopTags, Unavailable};
use crate::server::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_top_tags))
        .routes(routes!(list_tagged_jobs))
}

/// List the most used tags.
///
/// Only tags used at least twice appear, most used first. The usage count goes up each
/// time a tag is given to a job and down each time it is removed or its job is
/// canceled or purged, so it approximates how many jobs carry the tag. Tags of
/// recurring templates are not counted until their children are spawned.
#[utoipa::path(get, path = "/v1/tags", tag = "tags", operation_id = "list_top_tags",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the most used tags (`[]` when none is \
            used twice)", body = TopTags),
        (status = 400, description = "offset or count is not a number, or count is not \
            between 1 and 1000", body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn list_top_tags(
    State(state): State<AppState>,
    Query(page): Query<PageQuery>,
) -> Result<Json<TopTags>, ApiError> {
    let count = validate::page_count(page.count)?;
    let tags = state
        .qless
        .tag_top(state.clock.now(), page.offset, count)
        .await?;
    Ok(Json(TopTags { tags }))
}

/// List the jobs carrying a tag.
///
/// Jids in the order they were tagged, oldest first (ties by jid), with the total
/// number of jobs carrying the tag. An unknown tag is an empty page with total 0.
#[utoipa::path(get, path = "/v1/tags/{tag}/jobs", tag = "tags",
    operation_id = "list_tagged_jobs",
    params(("tag" = crate::model::Tag, Path, description = "Tag"), PageQuery),
    responses(
        (status = 200, description = "A page of jids carrying the tag", body = JidPage),
        (status = 400, description = "A bad tag name, offset or count not a number, or \
            count not between 1 and 1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn list_tagged_jobs(
    State(state): State<AppState>,
    Path(tag): Path<Tag>,
    Query(page): Query<PageQuery>,
) -> Result<Json<JidPage>, ApiError> {
    let count = validate::page_count(page.count)?;
    let jobs = state
        .qless
        .tag_get(state.clock.now(), tag.as_str(), page.offset, count)
        .await?;
    Ok(Json(jobs))
}
