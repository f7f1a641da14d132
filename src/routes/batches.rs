//! `/v1/batches` and `/v1/workflows`: jobs put together with callbacks put once when
//! they finish, and graphs of jobs that wait for each other. Each is created in one
//! script call (every job and the record, or nothing); the script keeps them moving
//! as jobs end, whichever client ends them.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{BatchJson, JobTrace, Json, Path, Query};
use super::queues::{at_item, jid_or_new, location, put_args};
use crate::core::PutArgs;
use crate::core::batches::{CallbackKind, NewBatch, NewTask, NewWorkflow};
use crate::error::ApiError;
use crate::model::{
    AddBatchJobsRequest, AddedBatchJobs, BatchId, BatchQuery, BatchView, CanceledCount,
    CreateBatchRequest, CreateWorkflowRequest, CreatedBatch, CreatedWorkflow, Jid, PayloadTooLarge,
    Problem, PutJobRequest, QueuedJobRequest, TaskName, Unavailable, WorkflowId, WorkflowView,
};
use crate::state::AppState;

/// Most jobs one request puts into a batch.
const MAX_BATCH_JOBS: usize = 10_000;

/// Most tasks a workflow has.
const MAX_TASKS: usize = 1_000;

/// Routes of this module. Creating reads bodies under the batch size limit.
pub fn router() -> OpenApiRouter<AppState> {
    let large = OpenApiRouter::new()
        .routes(routes!(create_batch))
        .routes(routes!(add_batch_jobs))
        .routes(routes!(create_workflow))
        .layer(DefaultBodyLimit::disable());
    OpenApiRouter::new()
        .merge(large)
        .routes(routes!(get_batch, cancel_batch))
        .routes(routes!(get_workflow, cancel_workflow))
}

/// A batch or workflow job's put, checked as a put to its queue is.
fn queued_put(
    job: QueuedJobRequest,
    state: &AppState,
    trace: Option<String>,
) -> Result<PutArgs, ApiError> {
    let queue = job.queue.clone();
    let body = PutJobRequest {
        jid: job.jid,
        klass: job.klass,
        data: job.data,
        priority: job.priority,
        tags: job.tags,
        retries: job.retries,
        depends: None,
        delay: job.delay,
        if_absent: false,
        throttles: job.throttles,
        backoff: job.backoff,
        start_by: job.start_by,
        start_within: job.start_within,
        max_run: job.max_run,
        partition: job.partition,
        idempotency_key: None,
    };
    Ok(put_args(&queue, body, state, trace)?.0)
}

/// Every job of a request, checked, each error naming its index.
fn queued_puts(
    jobs: Vec<QueuedJobRequest>,
    state: &AppState,
    trace: &Option<String>,
) -> Result<Vec<PutArgs>, ApiError> {
    if jobs.len() > MAX_BATCH_JOBS {
        return Err(ApiError::BadRequest(format!(
            "jobs must hold at most {MAX_BATCH_JOBS} jobs, not {}",
            jobs.len()
        )));
    }
    let puts = jobs
        .into_iter()
        .enumerate()
        .map(|(index, job)| {
            job.no_task_fields()
                .map_err(|why| ApiError::BadRequest(why.into()))
                .and_then(|()| queued_put(job, state, trace.clone()))
                .map_err(|e| at_item(index, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = BTreeSet::new();
    for (index, put) in puts.iter().enumerate() {
        if !seen.insert(put.jid.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "jobs[{index}]: jid {} is given twice",
                put.jid
            )));
        }
    }
    Ok(puts)
}

/// A callback's put: its data must be a JSON object without a `batch` key (the
/// script adds the batch's summary there).
fn callback_put(
    kind: CallbackKind,
    job: QueuedJobRequest,
    state: &AppState,
) -> Result<(CallbackKind, PutArgs), ApiError> {
    let name = kind.as_str();
    job.no_task_fields()
        .map_err(|why| ApiError::BadRequest(format!("{name}: {why}")))?;
    // A callback is put when the batch settles, not now: no deadline counts from here.
    if job.start_by.is_some() || job.start_within.is_some() || job.max_run.is_some() {
        return Err(ApiError::BadRequest(format!(
            "{name}: a callback takes no start_by, start_within or max_run"
        )));
    }
    let data: serde_json::Value = serde_json::from_str(job.data.get())
        .map_err(|err| ApiError::BadRequest(format!("{name}.data: {err}")))?;
    match data.as_object() {
        Some(object) if object.contains_key("batch") => {
            return Err(ApiError::BadRequest(format!(
                "{name}.data must not hold a \"batch\" key: qlessd puts the batch's \
                 summary there"
            )));
        }
        Some(_) => {}
        None => {
            return Err(ApiError::BadRequest(format!(
                "{name}.data must be a JSON object"
            )));
        }
    }
    let put = queued_put(job, state, None).map_err(|err| match err {
        ApiError::BadRequest(message) => ApiError::BadRequest(format!("{name}: {message}")),
        other => other,
    })?;
    Ok((kind, put))
}

/// Create a batch.
///
/// Puts every job (each naming its queue; jids must be new) and records the batch in
/// one script call: all of it is written, or none. The callbacks are ordinary jobs,
/// each put exactly once by the call that settles the batch: `on_complete` when every
/// job (and every child batch) has completed or failed, `on_success` when every one
/// has completed (also later, should failed jobs be unfailed and complete),
/// `on_death` the first time a job fails with no retries left. A callback's data
/// gets `"batch": {"bid", "total", "completed", "failed", "canceled",
/// "failed_jids"}` beside its own keys. With `parent` the batch is a child of that
/// open batch, whose callbacks wait for this one's. A batch with no jobs (and none
/// added) settles at once.
#[utoipa::path(post, path = "/v1/batches", tag = "batches", operation_id = "create_batch",
    params(("traceparent" = Option<String>, Header, description = "A W3C `traceparent` \
        the batch's jobs carry")),
    request_body = CreateBatchRequest,
    responses(
        (status = 201, description = "The batch was created and its jobs put",
         body = CreatedBatch,
         headers(("Location" = String, description = "`/v1/batches/{bid}`"))),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid item \
            (the detail names it), a jid given twice, or a callback whose data is not \
            an object or that gives a deadline; nothing was written", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The parent batch does not exist", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "A job with one of the jids exists already, or the \
            parent batch has finished; nothing was written", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn create_batch(
    State(state): State<AppState>,
    JobTrace(trace): JobTrace,
    BatchJson(body): BatchJson<CreateBatchRequest>,
) -> Result<Response, ApiError> {
    if let Some(description) = &body.description
        && description.chars().count() > 1000
    {
        return Err(ApiError::BadRequest(
            "description must be at most 1000 characters".into(),
        ));
    }
    let jobs = queued_puts(body.jobs, &state, &trace)?;
    let callbacks = [
        (CallbackKind::OnSuccess, body.on_success),
        (CallbackKind::OnComplete, body.on_complete),
        (CallbackKind::OnDeath, body.on_death),
    ]
    .into_iter()
    .filter_map(|(kind, job)| job.map(|job| callback_put(kind, job, &state)))
    .collect::<Result<Vec<_>, _>>()?;
    let batch = NewBatch {
        bid: jid_or_new(None),
        description: body.description.unwrap_or_default(),
        parent: body.parent.map(Into::into),
        jobs,
        callbacks,
    };
    let jids = state.qless.batch_open(state.clock.now(), &batch).await?;
    let at = location("/v1/batches/", &batch.bid)?;
    Ok(created(
        at,
        CreatedBatch {
            bid: batch.bid,
            jids,
        },
    ))
}

/// A 201 answer pointing at what was created.
fn created(at: axum::http::HeaderValue, body: impl serde::Serialize) -> Response {
    (
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, at)],
        Json(body),
    )
        .into_response()
}

/// Add jobs to a batch.
///
/// Puts the jobs into the batch (all or none), as long as it has not finished: any
/// client holding the bid may, a running job of the batch included (fan-out).
#[utoipa::path(post, path = "/v1/batches/{bid}/jobs", tag = "batches",
    operation_id = "add_batch_jobs",
    params(("bid" = crate::model::BatchId, Path, description = "The batch's id")),
    request_body = AddBatchJobsRequest,
    responses(
        (status = 200, description = "The jobs were put into the batch",
         body = AddedBatchJobs),
        (status = 400, description = "Malformed JSON, no jobs, an invalid item (the \
            detail names it) or a jid given twice; nothing was written", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No such batch", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "The batch has finished, or a job with one of the \
            jids exists already; nothing was written", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn add_batch_jobs(
    State(state): State<AppState>,
    Path(bid): Path<BatchId>,
    JobTrace(trace): JobTrace,
    BatchJson(body): BatchJson<AddBatchJobsRequest>,
) -> Result<Json<AddedBatchJobs>, ApiError> {
    if body.jobs.is_empty() {
        return Err(ApiError::BadRequest(
            "jobs must hold at least one job".into(),
        ));
    }
    let jobs = queued_puts(body.jobs, &state, &trace)?;
    let jids = state
        .qless
        .batch_add(state.clock.now(), bid.as_str(), &jobs)
        .await?;
    Ok(Json(AddedBatchJobs { jids }))
}

/// Get a batch.
///
/// Its description, state, counts, callbacks, parent and children, and a page of its
/// jobs (`offset`, `count`) with where each stands.
#[utoipa::path(get, path = "/v1/batches/{bid}", tag = "batches", operation_id = "get_batch",
    params(("bid" = crate::model::BatchId, Path, description = "The batch's id"), BatchQuery),
    responses(
        (status = 200, description = "The batch", body = BatchView),
        (status = 400, description = "An invalid bid or page", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No such batch (or it finished longer ago than \
            completed jobs are kept)", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_batch(
    State(state): State<AppState>,
    Path(bid): Path<BatchId>,
    Query(query): Query<BatchQuery>,
) -> Result<Json<BatchView>, ApiError> {
    let count = query.count.unwrap_or(25);
    if !(1..=1000).contains(&count) {
        return Err(ApiError::BadRequest(
            "count must be between 1 and 1000".into(),
        ));
    }
    state
        .qless
        .batch_get(
            state.clock.now(),
            bid.as_str(),
            query.offset.unwrap_or(0),
            count,
        )
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("batch {bid} does not exist")))
}

/// Cancel a batch.
///
/// Cancels the jobs of the batch (and of its child batches) that have not started;
/// those running finish as they will. The batch is then finished: no callback fires.
#[utoipa::path(delete, path = "/v1/batches/{bid}", tag = "batches",
    operation_id = "cancel_batch",
    params(("bid" = crate::model::BatchId, Path, description = "The batch's id")),
    responses(
        (status = 200, description = "How many jobs were canceled", body = CanceledCount),
        (status = 400, description = "An invalid bid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No such batch", body = Problem,
         content_type = "application/problem+json"),
        (status = 409, description = "A job of no batch waits for one of its jobs",
         body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn cancel_batch(
    State(state): State<AppState>,
    Path(bid): Path<BatchId>,
) -> Result<Json<CanceledCount>, ApiError> {
    let canceled = state
        .qless
        .batch_cancel(state.clock.now(), bid.as_str())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("batch {bid} does not exist")))?;
    Ok(Json(CanceledCount { canceled }))
}

/// A workflow's tasks by name, as requested.
type Tasks = BTreeMap<TaskName, QueuedJobRequest>;

/// The tasks of a workflow in an order where every task comes after its parents, or
/// a 400 naming an unknown parent or a cycle.
fn task_order(tasks: &Tasks) -> Result<Vec<String>, ApiError> {
    for (name, task) in tasks {
        for parent in task.after.iter().flatten() {
            if !tasks.contains_key(parent.as_str()) {
                return Err(ApiError::BadRequest(format!(
                    "tasks.{name}.after names {parent}, which is not a task"
                )));
            }
        }
    }
    // Depth-first, parents first; a task met again while its parents are being
    // placed closes a cycle, which the error spells out.
    let mut order = Vec::with_capacity(tasks.len());
    let mut placed = BTreeSet::new();
    for name in tasks.keys() {
        let mut path = Vec::new();
        place(name.as_str(), tasks, &mut placed, &mut path, &mut order)?;
    }
    Ok(order)
}

fn place(
    name: &str,
    tasks: &Tasks,
    placed: &mut BTreeSet<String>,
    path: &mut Vec<String>,
    order: &mut Vec<String>,
) -> Result<(), ApiError> {
    if placed.contains(name) {
        return Ok(());
    }
    if let Some(start) = path.iter().position(|seen| seen == name) {
        let mut cycle = path[start..].to_vec();
        cycle.push(name.to_owned());
        return Err(ApiError::BadRequest(format!(
            "tasks form a cycle: {}",
            cycle.join(" -> ")
        )));
    }
    path.push(name.to_owned());
    for parent in tasks[name].after.iter().flatten() {
        place(parent.as_str(), tasks, placed, path, order)?;
    }
    path.pop();
    placed.insert(name.to_owned());
    order.push(name.to_owned());
    Ok(())
}

/// Create a workflow.
///
/// Puts every task (a job in its queue) in one script call, each waiting for the
/// tasks in its `after` (as `depends` does: a stock qless client completing a task
/// releases the tasks after it). What a parent's failure (no retries left, or
/// canceled) does to a waiting task is its `on_parent_failure`: `cancel` (the
/// default: it and everything after it are canceled), `fail` (it fails into
/// `workflow-parent-failed`), `ignore` (it runs once its other parents are done, as
/// if the failed one had completed) or `continue` (it runs at once). Unfailing a
/// parent before its tasks were decided lets them run as normal. A popped task
/// carries `parents`: each parent's jid, state and result.
#[utoipa::path(post, path = "/v1/workflows", tag = "workflows",
    operation_id = "create_workflow",
    request_body = CreateWorkflowRequest,
    responses(
        (status = 201, description = "The workflow was created and its tasks put",
         body = CreatedWorkflow,
         headers(("Location" = String, description = "`/v1/workflows/{wid}`"))),
        (status = 400, description = "Malformed JSON, an unknown field, no tasks or more \
            than 1000, an invalid task (the detail names it), an unknown name in \
            `after`, or a cycle (the detail spells it out); nothing was written",
         body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A job with one of the jids exists already; \
            nothing was written", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn create_workflow(
    State(state): State<AppState>,
    JobTrace(trace): JobTrace,
    BatchJson(body): BatchJson<CreateWorkflowRequest>,
) -> Result<Response, ApiError> {
    if body.tasks.is_empty() || body.tasks.len() > MAX_TASKS {
        return Err(ApiError::BadRequest(format!(
            "tasks must hold between 1 and {MAX_TASKS} tasks, not {}",
            body.tasks.len()
        )));
    }
    let order = task_order(&body.tasks)?;
    let mut requests = body.tasks;
    let mut jids: BTreeMap<String, String> = BTreeMap::new();
    let mut tasks = Vec::with_capacity(order.len());
    let mut seen = BTreeSet::new();
    for name in &order {
        let mut request = requests
            .remove(name.as_str())
            .expect("task_order lists the requested tasks");
        let after: Vec<String> = request
            .after
            .take()
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect();
        let on_parent_failure = request.on_parent_failure.take().unwrap_or_default();
        let mut put = queued_put(request, &state, trace.clone()).map_err(|err| match err {
            ApiError::BadRequest(message) => {
                ApiError::BadRequest(format!("tasks.{name}: {message}"))
            }
            other => other,
        })?;
        if !seen.insert(put.jid.clone()) {
            return Err(ApiError::BadRequest(format!(
                "tasks.{name}: jid {} is given twice",
                put.jid
            )));
        }
        let parents: Vec<String> = after.iter().map(|parent| jids[parent].clone()).collect();
        put.depends = (!parents.is_empty()).then_some(parents);
        jids.insert(name.clone(), put.jid.clone());
        tasks.push(NewTask {
            name: name.clone(),
            put,
            after,
            on_parent_failure,
        });
    }
    let workflow = NewWorkflow {
        wid: jid_or_new(None::<Jid>),
        name: body.name.map(Into::into).unwrap_or_default(),
        tasks,
    };
    state
        .qless
        .workflow_open(state.clock.now(), &workflow)
        .await?;
    let at = location("/v1/workflows/", &workflow.wid)?;
    Ok(created(
        at,
        CreatedWorkflow {
            wid: workflow.wid,
            jids,
        },
    ))
}

/// Get a workflow.
///
/// Every task with its job's jid and state, its queue, the tasks it waits for (the
/// graph's edges) and its policy, parents before children.
#[utoipa::path(get, path = "/v1/workflows/{wid}", tag = "workflows",
    operation_id = "get_workflow",
    params(("wid" = crate::model::WorkflowId, Path, description = "The workflow's id")),
    responses(
        (status = 200, description = "The workflow", body = WorkflowView),
        (status = 400, description = "An invalid wid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No such workflow", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_workflow(
    State(state): State<AppState>,
    Path(wid): Path<WorkflowId>,
) -> Result<Json<WorkflowView>, ApiError> {
    state
        .qless
        .workflow_get(state.clock.now(), wid.as_str())
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("workflow {wid} does not exist")))
}

/// Cancel a workflow.
///
/// Cancels every task that has not started (waiting, scheduled, or waiting for its
/// parents); tasks running finish as they will.
#[utoipa::path(delete, path = "/v1/workflows/{wid}", tag = "workflows",
    operation_id = "cancel_workflow",
    params(("wid" = crate::model::WorkflowId, Path, description = "The workflow's id")),
    responses(
        (status = 200, description = "How many tasks were canceled", body = CanceledCount),
        (status = 400, description = "An invalid wid", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "No such workflow", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn cancel_workflow(
    State(state): State<AppState>,
    Path(wid): Path<WorkflowId>,
) -> Result<Json<CanceledCount>, ApiError> {
    let canceled = state
        .qless
        .workflow_cancel(state.clock.now(), wid.as_str())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("workflow {wid} does not exist")))?;
    Ok(Json(CanceledCount { canceled }))
}
