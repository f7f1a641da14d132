//! `/v1/recurring` resources: reading, changing, tagging and deleting recurring job
//! templates. Templates are created per queue (`POST /v1/queues/{queue}/recurring`).

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path};
use super::queues::deadlines;
use super::validate;
use crate::core::RecurUpdate;
use crate::error::ApiError;
use crate::model::{
    Jid, PayloadTooLarge, Problem, RecurringJob, RecurringJobUpdate, RecurringTags,
    RecurringTagsChange, Tag, Unavailable,
};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(
            get_recurring_job,
            update_recurring_job,
            delete_recurring_job
        ))
        .routes(routes!(add_recurring_job_tags, remove_recurring_job_tags))
}

/// Get a recurring job template.
///
/// The template's `count` is how many children it has spawned; children are the jobs
/// `<jid>-1`, `<jid>-2`, ... `data` is the children's payload as a JSON value.
#[utoipa::path(get, path = "/v1/recurring/{jid}", tag = "recurring",
    operation_id = "get_recurring_job",
    params(("jid" = crate::model::Jid, Path, description = "Template id")),
    responses(
        (status = 200, description = "The template", body = RecurringJob),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No recurring job has this jid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_recurring_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<Json<RecurringJob>, ApiError> {
    match state
        .qless
        .recur_get(state.clock.now(), jid.as_str())
        .await?
    {
        Some(template) => Ok(Json(template)),
        None => Err(not_found(jid.as_str())),
    }
}

/// Change a recurring job template.
///
/// Only the fields given change; at least one is required. The changes apply to the
/// children spawned from now on; children already spawned are untouched. A new
/// `interval` shifts the next spawn by the difference between the new and the old
/// interval (a cron template becomes an interval one, next spawn an interval from
/// now); a new `cron` or `timezone` makes the template spawn at the schedule's next
/// tick after now; a new `queue` moves the template there with its next spawn time. Tags are
/// changed with `POST`/`DELETE /v1/recurring/{jid}/tags`.
#[utoipa::path(patch, path = "/v1/recurring/{jid}", tag = "recurring",
    operation_id = "update_recurring_job",
    params(("jid" = crate::model::Jid, Path, description = "Template id")),
    request_body = RecurringJobUpdate,
    responses(
        (status = 204, description = "The template was changed"),
        (status = 400, description = "Malformed body, no field given, an unknown field, \
            an interval not above 0, interval with cron or timezone, a bad cron \
            expression or unknown timezone (named in the detail), a timezone for a \
            template without cron, a negative retries or backlog, a negative \
            start_within or a max_run not above 0, or a bad jid, klass or queue name; \
            nothing is changed", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No recurring job has this jid", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn update_recurring_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<RecurringJobUpdate>,
) -> Result<StatusCode, ApiError> {
    let now = state.clock.now();
    let schedule = (body.cron.clone(), body.timezone.clone());
    let mut update = recur_update(body, state.limits.max_job_size)?;
    if schedule.0.is_some() || schedule.1.is_some() {
        update.cron = Some(cron_change(&state, jid.as_str(), schedule, now).await?);
    }
    state.qless.recur_update(now, jid.as_str(), update).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete a recurring job template.
///
/// Idempotent: deleting an unknown template is also a 204. Children already spawned
/// stay where they are.
#[utoipa::path(delete, path = "/v1/recurring/{jid}", tag = "recurring",
    operation_id = "delete_recurring_job",
    params(("jid" = crate::model::Jid, Path, description = "Template id")),
    responses(
        (status = 204, description = "The template no longer exists"),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn delete_recurring_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<StatusCode, ApiError> {
    state.qless.unrecur(state.clock.now(), jid.as_str()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Add tags to a recurring job template.
///
/// Tags the template already has are not repeated; new ones are appended in the order
/// given. Children spawned from now on carry the tags. Only the template changes: the
/// tag index (`/v1/tags`) counts jobs, not templates.
#[utoipa::path(post, path = "/v1/recurring/{jid}/tags", tag = "recurring",
    operation_id = "add_recurring_job_tags",
    params(("jid" = crate::model::Jid, Path, description = "Template id")),
    request_body = RecurringTagsChange,
    responses(
        (status = 200, description = "The template's tags after the change",
         body = RecurringTags),
        (status = 400, description = "Malformed body, an empty list, an unknown field, or \
            a bad jid or tag name; nothing is changed", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No recurring job has this jid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn add_recurring_job_tags(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<RecurringTagsChange>,
) -> Result<Json<RecurringTags>, ApiError> {
    validate::list("tag", &body.tags)?;
    let tags = Tag::into_strings(body.tags);
    let tags = state
        .qless
        .recur_tag(state.clock.now(), jid.as_str(), &tags)
        .await?;
    Ok(Json(RecurringTags { tags }))
}

/// Remove tags from a recurring job template.
///
/// The tags to remove are in the query, as a DELETE takes no body: `?tag=a&tag=b`
/// (1 to 1000, the parameter repeated). Tags the template does not have are ignored.
/// Children spawned from now on no longer carry the removed tags; children already
/// spawned keep theirs.
#[utoipa::path(delete, path = "/v1/recurring/{jid}/tags", tag = "recurring",
    operation_id = "remove_recurring_job_tags",
    params(
        ("jid" = crate::model::Jid, Path, description = "Template id"),
        ("tag" = Vec<crate::model::Tag>, Query, min_items = 1, max_items = 1000,
         description = "A tag to remove; repeat the parameter for each (1 to 1000)",
         style = Form, explode),
    ),
    responses(
        (status = 200, description = "The template's tags after the change",
         body = RecurringTags),
        (status = 400, description = "No tag, more than 1000, a bad jid or tag name, or \
            an unknown parameter; nothing is changed", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No recurring job has this jid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn remove_recurring_job_tags(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    RawQuery(query): RawQuery,
) -> Result<Json<RecurringTags>, ApiError> {
    let tags = super::jobs::tags_from_query(query.as_deref())?;
    let tags = state
        .qless
        .recur_untag(state.clock.now(), jid.as_str(), &tags)
        .await?;
    Ok(Json(RecurringTags { tags }))
}

/// Checks a PATCH body and turns it into the script's update.
fn recur_update(body: RecurringJobUpdate, max_job_size: u64) -> Result<RecurUpdate, ApiError> {
    if let Some(priority) = body.priority {
        validate::finite("priority", priority)?;
    }
    if body.interval.is_some() && (body.cron.is_some() || body.timezone.is_some()) {
        return Err(ApiError::BadRequest(
            "give interval, or cron and timezone, not both".to_owned(),
        ));
    }
    if let Some(interval) = body.interval
        && !(interval.is_finite() && interval > 0.0)
    {
        return Err(ApiError::BadRequest(
            "interval must be a number of seconds greater than 0".to_owned(),
        ));
    }
    for (field, value) in [("retries", body.retries), ("backlog", body.backlog)] {
        if value.is_some_and(|n| n < 0) {
            return Err(ApiError::BadRequest(format!(
                "{field} must not be negative"
            )));
        }
    }
    if let Some(klass) = &body.klass {
        validate::text("klass", klass)?;
    }
    let data = validate::JobData::optional(body.data.as_ref(), max_job_size)?
        .map(validate::JobData::into_text);
    // (`null` removes a deadline; a number is checked as a put's.)
    let start_within = body
        .start_within
        .map(|within| deadlines(None, within, None, 0.0).map(|(at, _)| at))
        .transpose()?;
    let max_run = body
        .max_run
        .map(|limit| deadlines(None, None, limit, 0.0).map(|(_, limit)| limit))
        .transpose()?;
    let update = RecurUpdate {
        priority: body.priority,
        interval: body.interval,
        retries: body.retries,
        data,
        klass: body.klass,
        queue: body.queue.map(String::from),
        backlog: body.backlog,
        cron: None,
        start_within,
        max_run,
        partition: body
            .partition
            .map(|name| name.map(String::from).unwrap_or_default()),
    };
    if update.is_empty() && body.cron.is_none() && body.timezone.is_none() {
        return Err(ApiError::BadRequest(
            "give at least one of priority, interval, retries, data, klass, queue, backlog, \
             cron, timezone, start_within, max_run"
                .to_owned(),
        ));
    }
    Ok(update)
}

/// The new cron schedule of template `jid` from a PATCH's `cron` and `timezone`,
/// the one not given taken from the template (the zone defaulting to UTC).
async fn cron_change(
    state: &AppState,
    jid: &str,
    (cron, timezone): (Option<String>, Option<String>),
    now: f64,
) -> Result<crate::core::CronSpec, ApiError> {
    let (cron, timezone) = match (cron, timezone) {
        (Some(cron), Some(timezone)) => (cron, timezone),
        (cron, timezone) => {
            let template = state
                .qless
                .recur_get(now, jid)
                .await?
                .ok_or_else(|| not_found(jid))?;
            let cron = cron.or(template.cron).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "recurring job {jid} has no cron expression; give cron with timezone"
                ))
            })?;
            let timezone = timezone
                .or(template.timezone)
                .unwrap_or_else(|| "UTC".to_owned());
            (cron, timezone)
        }
    };
    super::queues::cron_spec(cron, timezone, now)
}

fn not_found(jid: &str) -> ApiError {
    ApiError::NotFound(format!("recurring job {jid} does not exist"))
}
