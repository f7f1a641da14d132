//! `/v1/jobs` resources: reading jobs, the worker lifecycle (heartbeat, complete,
//! fail, retry), moving, timing out and canceling jobs, and a job's priority,
//! dependencies, tags, tracking and history. Also `/v1/tracked` and `/v1/completed`,
//! the two listings that are about jobs rather than queues.
//!
//! Every handler validates its input (400 before any Redis call), makes one call into
//! the script with the server's clock, and maps the reply. The script decides
//! everything else: a missing job is its 404, a job in the wrong state its 409, a job
//! held by another worker its 409 `lock_lost`.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

use axum::extract::DefaultBodyLimit;

use super::extract::{BatchJson, Json, Path, Query};
use super::validate::{self, JobData};
use crate::core::{CompleteArgs, FailArgs, PutArgs, RequeueKeep, RetryArgs};
use crate::error::ApiError;
use crate::model::wire::RawJson;
use crate::model::{
    AddJobDependenciesRequest, CancelJobsRequest, CancelJobsResponse, CompleteJobRequest,
    CompleteJobResponse, CompleteJobsOutcome, CompleteJobsRequest, CompleteJobsResponse,
    CompletedJobsResponse, FailJobRequest, FailJobResponse, HeartbeatJobRequest,
    HeartbeatJobResponse, HeartbeatJobsOutcome, HeartbeatJobsRequest, HeartbeatJobsResponse, Jid,
    Job, JobPriorityRequest, JobPriorityResponse, JobState, JobTagsRequest, JobTagsResponse,
    JobTrackedResponse, LogJobEventRequest, PageQuery, PayloadTooLarge, PopNext, Problem,
    RequeueJobRequest, RequeueJobResponse, RetryJobRequest, RetryJobResponse, Tag,
    TrackedJobsResponse, Unavailable,
};
use crate::state::AppState;

/// The query parameter `remove_job_dependencies` once named the dependency by.
const DEPRECATED_DEPENDENCY: &str = "jid";

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    let batches = OpenApiRouter::new()
        .routes(routes!(complete_jobs))
        .routes(routes!(heartbeat_jobs))
        .layer(DefaultBodyLimit::disable());
    OpenApiRouter::new()
        .merge(batches)
        .routes(routes!(get_jobs))
        .routes(routes!(get_job, cancel_job))
        .routes(routes!(cancel_jobs))
        .routes(routes!(heartbeat_job))
        .routes(routes!(complete_job))
        .routes(routes!(fail_job))
        .routes(routes!(retry_job))
        .routes(routes!(requeue_job))
        .routes(routes!(timeout_job))
        .routes(routes!(set_job_priority))
        .routes(routes!(add_job_dependencies, remove_job_dependencies))
        .routes(routes!(add_job_tags, remove_job_tags))
        .routes(routes!(track_job, untrack_job))
        .routes(routes!(list_tracked_jobs))
        .routes(routes!(log_job_event))
        .routes(routes!(list_completed_jobs))
}

/// A job by id.
///
/// The job as it is now, whatever its state: its `data` is the JSON value it was put
/// with, `history` lists what happened to it, oldest first.
#[utoipa::path(get, path = "/v1/jobs/{jid}", tag = "jobs", operation_id = "get_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job", body = Job),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No job has this jid (never put, canceled, or \
         purged after completion)", body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<Json<Job>, ApiError> {
    match state.qless.get(state.clock.now(), jid.as_str()).await? {
        Some(job) => Ok(Json(job)),
        None => Err(ApiError::NotFound(format!("Job {jid} does not exist"))),
    }
}

/// Several jobs by id.
///
/// Repeat `jid` for each job (`?jid=a&jid=b`, 1 to 1000 of them). The jobs that exist
/// come back in the order asked; jids without a job are left out, so the list can be
/// shorter than the request (or empty).
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", operation_id = "get_jobs",
    params(("jid" = Vec<crate::model::Jid>, Query, min_items = 1, max_items = 1000, description = "A job id; repeat the parameter \
        for each job (1 to 1000)", style = Form, explode)),
    responses(
        (status = 200, description = "The jobs that exist, in the order asked", body = [Job]),
        (status = 400, description = "No jid, more than 1000, a jid that is not a valid \
         name, or a query parameter other than `jid`", body = Problem,
         content_type = "application/problem+json"),
        (status = 414, description = "The URI is longer than the HTTP server reads \
         (64 KB: many long jids): ask in several requests", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_jobs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Vec<Job>>, ApiError> {
    let jids = jids_from_query(query.as_deref())?;
    Ok(Json(state.qless.multiget(state.clock.now(), &jids).await?))
}

/// Renew a worker's lease on a job.
///
/// Extends the lock by the queue's heartbeat (`<queue>-heartbeat`, else `heartbeat`,
/// default 60 s) from now and returns the new expiry. With `data` the job's data is
/// replaced; without it the data is kept.
#[utoipa::path(post, path = "/v1/jobs/{jid}/heartbeat", tag = "jobs",
    operation_id = "heartbeat_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = HeartbeatJobRequest,
    responses(
        (status = 200, description = "The lock was renewed", body = HeartbeatJobResponse),
        (status = 400, description = "Malformed body, unknown field, or a bad jid or \
         worker name", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "`conflict`: the job is not running; `lock_lost`: \
         another worker holds it (the lock expired and the job was handed over); \
         `timed_out`: the job ran longer than its `max_run` (it is retried or failed by \
         its retries: stop working on it)",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn heartbeat_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<HeartbeatJobRequest>,
) -> Result<Json<HeartbeatJobResponse>, ApiError> {
    let data = job_data(body.data.as_ref(), &state)?;
    let progress = job_data(body.progress.as_ref(), &state)?;
    let expires = state
        .qless
        .heartbeat_progress(
            state.clock.now(),
            jid.as_str(),
            body.worker.as_str(),
            data.as_deref(),
            progress.as_deref(),
        )
        .await?;
    Ok(Json(HeartbeatJobResponse { expires }))
}

/// Complete a job, or move it on to its next queue.
///
/// Without `next` the job is finished (`complete`): it is kept until purged by the
/// `jobs-history` / `jobs-history-count` options, and the jobs waiting on it are
/// released. With `next` it is put in that queue (`waiting`, `scheduled` with a
/// `delay`, or `depends` when some of `depends` are still open) with its retry budget
/// reset; its own dependents stay blocked. `delay` and `depends` need `next`. The
/// job's data is replaced by `data` (kept as it is when absent).
#[utoipa::path(post, path = "/v1/jobs/{jid}/complete", tag = "jobs",
    operation_id = "complete_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = CompleteJobRequest,
    responses(
        (status = 200, description = "Completed, or moved to `next`", body = CompleteJobResponse),
        (status = 400, description = "Malformed body, unknown field, a bad name, a \
         negative delay, or `delay`/`depends` without `next`", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "`conflict`: the job is not running, or runs in \
         another queue than `queue`; `lock_lost`: another worker holds it; \
         `timed_out`: the job ran longer than its `max_run` (it is retried or failed by \
         its retries)",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn complete_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<CompleteJobRequest>,
) -> Result<Json<CompleteJobResponse>, ApiError> {
    let pop = body.pop.map(|pop| pop_next(pop, &state)).transpose()?;
    let worker = body.worker.clone();
    let args = complete_args(jid, body, state.limits.max_job_size)?;
    let now = state.clock.now();
    let Some((count, wait)) = pop else {
        let completion = state.qless.complete(now, args).await?;
        return Ok(Json(CompleteJobResponse {
            state: completion_state(completion)?,
            popped: None,
        }));
    };
    let (completion, leased) = state.qless.complete_and_pop(now, args, count).await?;
    let popped = state
        .leasing
        .after_end(leased, worker.as_str(), count, wait)
        .await?;
    super::trace_leases(&popped);
    Ok(Json(CompleteJobResponse {
        state: completion_state(completion)?,
        popped: Some(popped),
    }))
}

/// Checks the `pop` of a complete, fail or retry: (count, wait).
fn pop_next(pop: PopNext, state: &AppState) -> Result<(u32, std::time::Duration), ApiError> {
    Ok((
        validate::page_count(pop.count)?,
        validate::wait(pop.wait, state.limits.max_wait)?,
    ))
}

/// Checks a completion and turns it into script arguments.
fn complete_args(
    jid: Jid,
    body: CompleteJobRequest,
    max_job_size: u64,
) -> Result<CompleteArgs, ApiError> {
    let CompleteJobRequest {
        worker,
        queue,
        data,
        next,
        delay,
        depends,
        pop: _,
        result,
    } = body;
    if next.is_none() && delay.is_some() {
        return Err(bad("delay cannot be used without next"));
    }
    if next.is_none() && depends.is_some() {
        return Err(bad("depends cannot be used without next"));
    }
    let delay = delay.map(|d| validate::seconds("delay", d)).transpose()?;
    if let Some(depends) = &depends {
        validate::at_most_list("jid", depends)?;
    }
    Ok(CompleteArgs {
        jid: jid.into(),
        worker: worker.into(),
        queue: queue.into(),
        keep_data: data.is_none(),
        data: data_or_empty(data.as_ref(), max_job_size)?,
        next: next.map(String::from),
        delay,
        depends: depends.map(Jid::into_strings),
        result: JobData::optional(result.as_ref(), max_job_size)?.map(JobData::into_text),
    })
}

/// The state `complete` replied: `complete`, `waiting`, `scheduled` or `depends`.
fn completion_state(word: String) -> Result<JobState, ApiError> {
    match serde_json::from_value::<JobState>(Value::String(word)) {
        Ok(
            state @ (JobState::Complete
            | JobState::Waiting
            | JobState::Scheduled
            | JobState::Depends),
        ) => Ok(state),
        other => Err(ApiError::Internal(format!(
            "complete replied a state it cannot leave a job in: {other:?}"
        ))),
    }
}

/// Complete many jobs in one request.
///
/// One script invocation per 100 jobs. Each job is completed (or refused) on its own, exactly as `POST /v1/jobs/{jid}/complete` would: the reply lists, in
/// request order, the new `state` of each job or the `problem` that stopped it (for
/// example `lock_lost` when another worker holds it now). Malformed items are refused
/// up front with a 400 naming the first one, and then nothing is completed.
#[utoipa::path(post, path = "/v1/jobs/complete", tag = "jobs", operation_id = "complete_jobs",
    request_body = CompleteJobsRequest,
    responses(
        (status = 200, description = "One outcome per job, in request order",
         body = CompleteJobsResponse),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid name, \
            `delay`/`depends` without `next`, or not 1 to 1000 jobs; nothing is completed",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn complete_jobs(
    State(state): State<AppState>,
    BatchJson(body): BatchJson<CompleteJobsRequest>,
) -> Result<Json<CompleteJobsResponse>, ApiError> {
    batch_size(body.jobs.len())?;
    let pop = body.pop.map(|pop| pop_next(pop, &state)).transpose()?;
    let worker = body.jobs[0].worker.clone();
    if pop.is_some()
        && body
            .jobs
            .iter()
            .any(|job| job.worker != worker || job.queue != body.jobs[0].queue)
    {
        return Err(bad(
            "with pop, every job must be held by one worker in one queue",
        ));
    }
    let jids: Vec<String> = body
        .jobs
        .iter()
        .map(|job| job.jid.as_str().to_owned())
        .collect();
    let args = body
        .jobs
        .into_iter()
        .enumerate()
        .map(|(index, job)| {
            let body = CompleteJobRequest {
                worker: job.worker,
                queue: job.queue,
                data: job.data,
                next: job.next,
                delay: job.delay,
                depends: job.depends,
                pop: None,
                result: job.result,
            };
            complete_args(job.jid, body, state.limits.max_job_size)
                .map_err(|err| at_item(index, err))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let now = state.clock.now();
    let (results, leased) = match pop {
        None => (state.qless.complete_many(now, args).await?, None),
        Some((count, _)) => state.qless.complete_many_and_pop(now, args, count).await?,
    };
    let jobs = jids
        .into_iter()
        .zip(results)
        .map(|(jid, result)| match result.map_err(ApiError::from) {
            Ok(completion) => Ok(CompleteJobsOutcome {
                jid,
                state: Some(completion_state(completion)?),
                problem: None,
            }),
            Err(err) => outcome_problem(err).map(|problem| CompleteJobsOutcome {
                jid,
                state: None,
                problem: Some(problem),
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let popped = match (pop, leased) {
        (None, _) => None,
        (Some(_), None) => Some(Vec::new()),
        (Some((count, wait)), Some(leased)) => Some(
            state
                .leasing
                .after_end(leased, worker.as_str(), count, wait)
                .await?,
        ),
    };
    if let Some(popped) = &popped {
        super::trace_leases(popped);
    }
    Ok(Json(CompleteJobsResponse { jobs, popped }))
}

/// Renew the locks of many jobs in one request.
///
/// One script invocation per 100 jobs. Each lock is renewed (or refused) on its own, exactly as `POST /v1/jobs/{jid}/heartbeat` would: the reply lists, in
/// request order, the new `expires` of each job or the `problem` that stopped it
/// (`lock_lost` when the job was handed to another worker: stop working on it).
/// Malformed items are refused up front with a 400, and then nothing is renewed.
#[utoipa::path(post, path = "/v1/jobs/heartbeat", tag = "jobs", operation_id = "heartbeat_jobs",
    request_body = HeartbeatJobsRequest,
    responses(
        (status = 200, description = "One outcome per job, in request order",
         body = HeartbeatJobsResponse),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid name, or \
            not 1 to 1000 jobs; nothing is renewed", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn heartbeat_jobs(
    State(state): State<AppState>,
    BatchJson(body): BatchJson<HeartbeatJobsRequest>,
) -> Result<Json<HeartbeatJobsResponse>, ApiError> {
    batch_size(body.jobs.len())?;
    let mut calls = Vec::with_capacity(body.jobs.len());
    for (index, job) in body.jobs.into_iter().enumerate() {
        let data = job_data(job.data.as_ref(), &state).map_err(|err| at_item(index, err))?;
        let progress =
            job_data(job.progress.as_ref(), &state).map_err(|err| at_item(index, err))?;
        calls.push((
            String::from(job.jid),
            String::from(job.worker),
            data,
            progress,
        ));
    }
    let jids: Vec<String> = calls.iter().map(|(jid, ..)| jid.clone()).collect();
    let results = state.qless.heartbeat_many(state.clock.now(), calls).await?;
    let jobs = jids
        .into_iter()
        .zip(results)
        .map(|(jid, result)| match result.map_err(ApiError::from) {
            Ok(expires) => Ok(HeartbeatJobsOutcome {
                jid,
                expires: Some(expires),
                problem: None,
            }),
            Err(err) => outcome_problem(err).map(|problem| HeartbeatJobsOutcome {
                jid,
                expires: None,
                problem: Some(problem),
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(HeartbeatJobsResponse { jobs }))
}

fn batch_size(len: usize) -> Result<(), ApiError> {
    if len == 0 || len > validate::MAX_LIST {
        return Err(bad(&format!(
            "jobs must hold between 1 and {} jobs, not {len}",
            validate::MAX_LIST
        )));
    }
    Ok(())
}

/// Prefixes an item's error with its position in the batch.
fn at_item(index: usize, err: ApiError) -> ApiError {
    match err {
        ApiError::BadRequest(message) => ApiError::BadRequest(format!("jobs[{index}]: {message}")),
        ApiError::PayloadTooLarge(message) => {
            ApiError::PayloadTooLarge(format!("jobs[{index}]: {message}"))
        }
        other => other,
    }
}

/// A per-job refusal becomes that job's problem; trouble that is not about the job
/// (a bug) fails the whole request.
fn outcome_problem(err: ApiError) -> Result<Problem, ApiError> {
    match err {
        ApiError::Internal(_) | ApiError::Unavailable(_) => Err(err),
        refusal => Ok(refusal.problem()),
    }
}

/// Fail a job.
///
/// The job leaves its worker and is listed in its failure `group` (see
/// `/v1/failures`) until it is put back (unfail, requeue) or canceled. The failure is
/// kept on the job until it completes. With `data` the job's data is replaced.
#[utoipa::path(post, path = "/v1/jobs/{jid}/fail", tag = "jobs", operation_id = "fail_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = FailJobRequest,
    responses(
        (status = 200, description = "The job is failed", body = FailJobResponse),
        (status = 400, description = "Malformed body, unknown field, or a bad jid, \
         worker or group name", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "`conflict`: the job is not running; `lock_lost`: \
         another worker holds it", body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn fail_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<FailJobRequest>,
) -> Result<Json<FailJobResponse>, ApiError> {
    validate::job_text("message", &body.message, state.limits.max_job_size)?;
    let data = job_data(body.data.as_ref(), &state)?;
    let pop = body.pop.map(|pop| pop_next(pop, &state)).transpose()?;
    let now = state.clock.now();
    let Some((count, wait)) = pop else {
        let jid = state
            .qless
            .fail(
                now,
                jid.as_str(),
                body.worker.as_str(),
                body.group.as_str(),
                &body.message,
                data.as_deref(),
            )
            .await?;
        return Ok(Json(FailJobResponse {
            jid,
            state: JobState::Failed,
            popped: None,
        }));
    };
    let args = FailArgs {
        jid: jid.into(),
        worker: body.worker.as_str().to_owned(),
        group: body.group.into(),
        message: body.message,
        data,
    };
    let (jid, leased) = state.qless.fail_and_pop(now, args, count).await?;
    let popped = state
        .leasing
        .after_end(leased, body.worker.as_str(), count, wait)
        .await?;
    Ok(Json(FailJobResponse {
        jid,
        state: JobState::Failed,
        popped: Some(popped),
    }))
}

/// Give a job back to be tried again, using one retry.
///
/// The job goes back to `queue` (`waiting`, or `scheduled` after `delay` seconds) and
/// its `remaining` retries drop by one. When none were left it fails instead: its
/// group is `group`, or `failed-retries-<queue>`, and the reply is negative. `group`
/// and `message` go together; with them the failure is recorded on the job.
#[utoipa::path(post, path = "/v1/jobs/{jid}/retry", tag = "jobs", operation_id = "retry_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = RetryJobRequest,
    responses(
        (status = 200, description = "Retried, or failed when `remaining` is negative",
         body = RetryJobResponse),
        (status = 400, description = "Malformed body, unknown field, a bad name, a \
         negative delay, or `group` without `message` (or the reverse)", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "`conflict`: the job is not running; `lock_lost`: \
         another worker holds it", body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn retry_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<RetryJobRequest>,
) -> Result<Json<RetryJobResponse>, ApiError> {
    let delay = body
        .delay
        .map(|delay| validate::seconds("delay", delay))
        .transpose()?;
    if body.group.is_some() != body.message.is_some() {
        return Err(bad("group and message must be given together"));
    }
    if let Some(message) = &body.message {
        validate::job_text("message", message, state.limits.max_job_size)?;
    }
    let pop = body.pop.map(|pop| pop_next(pop, &state)).transpose()?;
    let args = RetryArgs {
        jid: jid.into(),
        queue: body.queue.into(),
        worker: body.worker.as_str().to_owned(),
        delay,
        group: body.group.map(String::from),
        message: body.message,
    };
    let now = state.clock.now();
    let (remaining, leased) = match pop {
        None => (state.qless.retry(now, args).await?, None),
        Some((count, _)) => {
            let (remaining, leased) = state.qless.retry_and_pop(now, args, count).await?;
            (remaining, Some(leased))
        }
    };
    let popped = match (pop, leased) {
        (Some((count, wait)), Some(leased)) => Some(
            state
                .leasing
                .after_end(leased, body.worker.as_str(), count, wait)
                .await?,
        ),
        _ => None,
    };
    Ok(Json(RetryJobResponse { remaining, popped }))
}

/// Move an existing job to a queue.
///
/// Like putting a job, but the job must exist. Whatever its state, it is taken from
/// where it is (a worker holding it loses it) and put in `queue` with a fresh retry
/// budget. Every field left out keeps the job's own: `klass`, `data`, `priority`,
/// `tags`, `retries` and `depends` (an empty `depends` also keeps them). `delay` is
/// part of the move: absent, the job is waiting at once. Its history and last failure
/// are kept.
#[utoipa::path(post, path = "/v1/jobs/{jid}/requeue", tag = "jobs",
    operation_id = "requeue_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = RequeueJobRequest,
    responses(
        (status = 200, description = "The job is in `queue`", body = RequeueJobResponse),
        (status = 400, description = "Malformed body, unknown field, a bad name, a \
         negative delay or retries, or a priority that is not finite", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn requeue_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<RequeueJobRequest>,
) -> Result<Json<RequeueJobResponse>, ApiError> {
    if let Some(klass) = &body.klass {
        validate::text("klass", klass)?;
    }
    let delay = validate::seconds("delay", body.delay.unwrap_or(0.0))?;
    let priority = body
        .priority
        .map(|p| validate::finite("priority", p))
        .transpose()?;
    if body.retries.is_some_and(|r| r < 0) {
        return Err(bad("retries must not be negative"));
    }
    if let Some(tags) = &body.tags {
        validate::at_most_list("tag", tags)?;
    }
    if let Some(depends) = &body.depends {
        validate::at_most_list("jid", depends)?;
    }
    let (start_by, max_run) = super::queues::deadlines(
        body.start_by,
        body.start_within,
        body.max_run,
        state.clock.now(),
    )?;
    let keep = RequeueKeep {
        klass: body.klass.is_none(),
        data: body.data.is_none(),
    };
    let args = PutArgs {
        worker: String::new(),
        queue: body.queue.into(),
        jid: jid.into(),
        klass: body.klass.unwrap_or_default(),
        data: data_or_empty(body.data.as_ref(), state.limits.max_job_size)?,
        delay,
        priority,
        tags: body.tags.map(Tag::into_strings),
        retries: body.retries,
        depends: body.depends.map(Jid::into_strings),
        start_by,
        max_run,
        partition: body.partition.map(String::from),
        ..PutArgs::default()
    };
    let jid = state
        .qless
        .requeue_keeping(state.clock.now(), args, keep)
        .await?;
    Ok(Json(RequeueJobResponse { jid }))
}

/// Time out a running job now.
///
/// Its worker loses the lock at once (and is told so); the job is `stalled` at the
/// front of its queue, so the next pop hands it out. No retry is used.
#[utoipa::path(post, path = "/v1/jobs/{jid}/timeout", tag = "jobs",
    operation_id = "timeout_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    responses(
        (status = 204, description = "The job is stalled"),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "The job is not running", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn timeout_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<StatusCode, ApiError> {
    state
        .qless
        .timeout(state.clock.now(), &[jid.into()])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Cancel a job.
///
/// Deletes the job with its history, whatever its state, and tells the worker holding
/// it. Idempotent: an unknown jid is a success too. A completed job is left alone
/// (it goes when purged). Refused while other jobs still depend on it: cancel those
/// together with it (`POST /v1/jobs/cancel`).
#[utoipa::path(delete, path = "/v1/jobs/{jid}", tag = "jobs", operation_id = "cancel_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    responses(
        (status = 204, description = "The job is gone (or never existed)"),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "Other jobs depend on this one", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn cancel_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<StatusCode, ApiError> {
    state.qless.cancel(state.clock.now(), &[jid.into()]).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Cancel several jobs together.
///
/// All or nothing: when a listed job is a dependency of a job that is not listed,
/// nothing is canceled. Otherwise each job goes as with `DELETE /v1/jobs/{jid}`
/// (unknown jids included, completed jobs left alone).
#[utoipa::path(post, path = "/v1/jobs/cancel", tag = "jobs", operation_id = "cancel_jobs",
    request_body = CancelJobsRequest,
    responses(
        (status = 200, description = "The jobs are gone", body = CancelJobsResponse),
        (status = 400, description = "Malformed body, unknown field, no jid, more than \
         1000, or a jid that is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "A listed job is a dependency of a job that is not \
         listed; nothing was canceled", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn cancel_jobs(
    State(state): State<AppState>,
    Json(body): Json<CancelJobsRequest>,
) -> Result<Json<CancelJobsResponse>, ApiError> {
    validate::list("jid", &body.jids)?;
    let jids = Jid::into_strings(body.jids);
    let canceled = state.qless.cancel(state.clock.now(), &jids).await?;
    Ok(Json(CancelJobsResponse { canceled }))
}

/// Change a job's priority.
///
/// Higher pops first. A waiting job is reordered at once: it goes ahead of the other
/// waiting jobs with the same priority.
#[utoipa::path(put, path = "/v1/jobs/{jid}/priority", tag = "jobs",
    operation_id = "set_job_priority",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = JobPriorityRequest,
    responses(
        (status = 200, description = "The new priority", body = JobPriorityResponse),
        (status = 400, description = "Malformed body, unknown field, a bad jid, or a \
         priority that is not a finite number", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn set_job_priority(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<JobPriorityRequest>,
) -> Result<Json<JobPriorityResponse>, ApiError> {
    let priority = validate::finite("priority", body.priority)?;
    // The script stores the number as given but replies with it truncated to an
    // integer, so the stored value is the one to report.
    state
        .qless
        .priority(state.clock.now(), jid.as_str(), priority)
        .await?;
    Ok(Json(JobPriorityResponse { priority }))
}

/// Make a job wait for more jobs.
///
/// Only for a job in the `depends` state. Jids of jobs that do not exist or are
/// already complete are ignored.
#[utoipa::path(post, path = "/v1/jobs/{jid}/dependencies", tag = "jobs",
    operation_id = "add_job_dependencies",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = AddJobDependenciesRequest,
    responses(
        (status = 204, description = "The dependencies were added"),
        (status = 400, description = "Malformed body, unknown field, no jid, more than \
         1000, or a jid that is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "The job is not in the `depends` state (or does \
         not exist)", body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn add_job_dependencies(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<AddJobDependenciesRequest>,
) -> Result<StatusCode, ApiError> {
    validate::list("jid", &body.depends)?;
    let depends = Jid::into_strings(body.depends);
    state
        .qless
        .depends_on(state.clock.now(), jid.as_str(), &depends)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Stop a job waiting for some (or all) of its dependencies.
///
/// Only for a job in the `depends` state. The query names what to drop, as a DELETE
/// takes no body: `?dependency=a&dependency=b` (1 to 1000 jids, the parameter
/// repeated) or `?all=true`, not both. When no dependency is left the job becomes
/// `waiting` at once (a delay it was put with is not applied on this path).
///
/// Deprecated: `?jid=` for `?dependency=`, the name it had before, is still accepted
/// until a later release. It is not listed as a parameter: a query parameter named
/// like the path's `jid` is what made generated clients rename one of them or send
/// the request to the wrong job.
#[utoipa::path(delete, path = "/v1/jobs/{jid}/dependencies", tag = "jobs",
    operation_id = "remove_job_dependencies",
    params(
        ("jid" = crate::model::Jid, Path, description = "The job id"),
        ("dependency" = Option<Vec<crate::model::Jid>>, Query, max_items = 1000,
         description = "A dependency to drop; repeat the parameter for each (1 to 1000)",
         style = Form, explode),
        ("all" = Option<bool>, Query, description = "`true`: drop every dependency"),
    ),
    responses(
        (status = 204, description = "The dependencies were dropped"),
        (status = 400, description = "Neither or both of `dependency` and `all=true`, \
         `all` other than `true`, more than 1000 jids, a jid that is not a valid name, or \
         an unknown parameter", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job is not in the `depends` state (or does \
         not exist)", body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn remove_job_dependencies(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    RawQuery(query): RawQuery,
) -> Result<StatusCode, ApiError> {
    let pairs = validate::query_pairs(
        query.as_deref(),
        &["dependency", DEPRECATED_DEPENDENCY, "all"],
    )?;
    let mut jids = Jid::into_strings(validate::query_values::<Jid>(&pairs, "dependency")?);
    jids.extend(Jid::into_strings(validate::query_values::<Jid>(
        &pairs,
        DEPRECATED_DEPENDENCY,
    )?));
    let all: Vec<&str> = pairs
        .iter()
        .filter(|(key, _)| key == "all")
        .map(|(_, value)| value.as_str())
        .collect();
    let off = match (jids.is_empty(), all.as_slice()) {
        (false, []) => {
            validate::list("dependency", &jids)?;
            Some(jids.as_slice())
        }
        (true, ["true"]) => None,
        _ => {
            return Err(bad(
                "give either ?dependency=<jid> (repeated for each dependency) or ?all=true",
            ));
        }
    };
    state
        .qless
        .depends_off(state.clock.now(), jid.as_str(), off)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Tag a job.
///
/// Tags the job does not have yet are appended, in the order given; the job is then
/// listed under `/v1/tags/{tag}/jobs`.
#[utoipa::path(post, path = "/v1/jobs/{jid}/tags", tag = "jobs", operation_id = "add_job_tags",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = JobTagsRequest,
    responses(
        (status = 200, description = "The job's tags", body = JobTagsResponse),
        (status = 400, description = "Malformed body, unknown field, no tag, more than \
         1000, or a tag that is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn add_job_tags(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<JobTagsRequest>,
) -> Result<Json<JobTagsResponse>, ApiError> {
    validate::list("tag", &body.tags)?;
    let tags = Tag::into_strings(body.tags);
    let tags = state
        .qless
        .tag_add(state.clock.now(), jid.as_str(), &tags)
        .await?;
    Ok(Json(JobTagsResponse { tags }))
}

/// Untag a job.
///
/// The tags to remove are in the query, as a DELETE takes no body: `?tag=a&tag=b`
/// (1 to 1000, the parameter repeated). Removing a tag the job does not have is not an
/// error.
#[utoipa::path(delete, path = "/v1/jobs/{jid}/tags", tag = "jobs",
    operation_id = "remove_job_tags",
    params(
        ("jid" = crate::model::Jid, Path, description = "The job id"),
        ("tag" = Vec<crate::model::Tag>, Query, min_items = 1, max_items = 1000,
         description = "A tag to remove; repeat the parameter for each (1 to 1000)",
         style = Form, explode),
    ),
    responses(
        (status = 200, description = "The job's remaining tags", body = JobTagsResponse),
        (status = 400, description = "No tag, more than 1000, a tag that is not a valid \
         name, or an unknown parameter", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn remove_job_tags(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    RawQuery(query): RawQuery,
) -> Result<Json<JobTagsResponse>, ApiError> {
    let tags = tags_from_query(query.as_deref())?;
    let tags = state
        .qless
        .tag_remove(state.clock.now(), jid.as_str(), &tags)
        .await?;
    Ok(Json(JobTagsResponse { tags }))
}

/// Track a job.
///
/// A tracked job's transitions (put, popped, completed, failed, stalled, canceled) are
/// published as events, and it is listed under `/v1/tracked`. Idempotent.
#[utoipa::path(put, path = "/v1/jobs/{jid}/tracked", tag = "jobs", operation_id = "track_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job is tracked", body = JobTrackedResponse),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn track_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<Json<JobTrackedResponse>, ApiError> {
    state.qless.track(state.clock.now(), jid.as_str()).await?;
    Ok(Json(JobTrackedResponse { tracked: true }))
}

/// Stop tracking a job.
///
/// Idempotent for an existing job.
#[utoipa::path(delete, path = "/v1/jobs/{jid}/tracked", tag = "jobs",
    operation_id = "untrack_job",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job is not tracked", body = JobTrackedResponse),
        (status = 400, description = "The jid is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn untrack_job(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
) -> Result<Json<JobTrackedResponse>, ApiError> {
    state.qless.untrack(state.clock.now(), jid.as_str()).await?;
    Ok(Json(JobTrackedResponse { tracked: false }))
}

/// The tracked jobs.
///
/// `jobs` holds the tracked jobs that exist; `expired` the tracked jids whose job is
/// gone (canceled, or purged after completion).
#[utoipa::path(get, path = "/v1/tracked", tag = "jobs", operation_id = "list_tracked_jobs",
    responses(
        (status = 200, description = "Tracked jobs and expired jids", body = TrackedJobsResponse),
        (status = 503, response = Unavailable),
    ))]
async fn list_tracked_jobs(
    State(state): State<AppState>,
) -> Result<Json<TrackedJobsResponse>, ApiError> {
    let tracked = state.qless.tracked(state.clock.now()).await?;
    Ok(Json(TrackedJobsResponse {
        jobs: tracked.jobs,
        expired: tracked.expired,
    }))
}

/// Add an entry to a job's history.
///
/// The entry's `what` is `message` and its `when` is now; the keys of `data` (an
/// object) are merged into it, except `when` and `what`; `q`, `worker` and `group`, which
/// name a queue, a worker and a failure group in the entries the server writes, must be
/// strings here too. `message` and `data` are each at most `--max-job-size` bytes. The
/// history is capped by the `max-job-history` option (entries) and by
/// `max-job-history-bytes` (bytes of JSON, 1 MiB by default): the oldest entries go,
/// but the first and the newest are always kept.
#[utoipa::path(post, path = "/v1/jobs/{jid}/log", tag = "jobs", operation_id = "log_job_event",
    params(("jid" = crate::model::Jid, Path, description = "The job id")),
    request_body = LogJobEventRequest,
    responses(
        (status = 204, description = "The entry was appended"),
        (status = 400, description = "Malformed body, unknown field, an empty message, \
         `data` that is not an object, or a `q`, `worker` or `group` in it that is not a \
         string", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "The job does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn log_job_event(
    State(state): State<AppState>,
    Path(jid): Path<Jid>,
    Json(body): Json<LogJobEventRequest>,
) -> Result<StatusCode, ApiError> {
    validate::text("message", &body.message)?;
    validate::job_text("message", &body.message, state.limits.max_job_size)?;
    // The history entry's declared fields keep their declared type (`HistoryEntry`).
    if let Some(data) = &body.data
        && let Some(field) = ["q", "worker", "group"]
            .into_iter()
            .find(|field| data.get(*field).is_some_and(|value| !value.is_string()))
    {
        return Err(bad(&format!(
            "data.{field} must be a string: it names a queue, worker or group in history entries"
        )));
    }
    let data = body
        .data
        .map(|map| JobData::encode(&Value::Object(map), state.limits.max_job_size))
        .transpose()?
        .map(JobData::into_text);
    state
        .qless
        .log(
            state.clock.now(),
            jid.as_str(),
            &body.message,
            data.as_deref(),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Completed jobs, most recently completed first.
///
/// Completed jobs are kept until purged by the `jobs-history` (seconds) and
/// `jobs-history-count` options.
#[utoipa::path(get, path = "/v1/completed", tag = "jobs", operation_id = "list_completed_jobs",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of completed jids", body = CompletedJobsResponse),
        (status = 400, description = "`offset` or `count` is not a number, or `count` is \
         0 or over 1000", body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn list_completed_jobs(
    State(state): State<AppState>,
    Query(page): Query<PageQuery>,
) -> Result<Json<CompletedJobsResponse>, ApiError> {
    let count = validate::page_count(page.count)?;
    let jids = state
        .qless
        .jobs_complete(state.clock.now(), page.offset, count)
        .await?;
    Ok(Json(CompletedJobsResponse { jids }))
}

/// The jids of `?jid=a&jid=b`: 1 to [`validate::MAX_LIST`] valid names, and no other parameter.
fn jids_from_query(query: Option<&str>) -> Result<Vec<String>, ApiError> {
    let jids = validate::query_values::<Jid>(&validate::query_pairs(query, &["jid"])?, "jid")?;
    validate::list("jid", &jids)?;
    Ok(Jid::into_strings(jids))
}

/// The tags of `?tag=a&tag=b`: 1 to [`validate::MAX_LIST`] valid names, and no other
/// parameter.
pub(super) fn tags_from_query(query: Option<&str>) -> Result<Vec<String>, ApiError> {
    let tags = validate::query_values::<Tag>(&validate::query_pairs(query, &["tag"])?, "tag")?;
    validate::list("tag", &tags)?;
    Ok(Tag::into_strings(tags))
}

/// A job's data as the JSON text the script stores; `{}` when the client sent none.
fn data_or_empty(data: Option<&RawJson>, max_job_size: u64) -> Result<String, ApiError> {
    Ok(JobData::optional(data, max_job_size)?.map_or_else(|| "{}".to_owned(), JobData::into_text))
}

/// Optional data to write, within `--max-job-size`.
fn job_data(data: Option<&RawJson>, state: &AppState) -> Result<Option<String>, ApiError> {
    Ok(JobData::optional(data, state.limits.max_job_size)?.map(JobData::into_text))
}

fn bad(message: &str) -> ApiError {
    ApiError::BadRequest(message.to_owned())
}
