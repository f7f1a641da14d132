//! `/v1/queues` resources: counts, putting jobs (one or a batch), leasing (pop),
//! peeking, listings by state, pausing, statistics, and creating recurring jobs.
//! Every handler validates its input, makes one call into the script with the server
//! clock, and maps the reply.

use std::fmt::Write as _;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{BatchJson, JobTrace, Json, Path, Query};
use super::validate::{self, JobData};
use crate::core::{self, Idempotency, Listing, PutArgs, PutOutcome, RecurArgs};
use crate::error::ApiError;
use crate::model::{
    Backoff, CreateRecurringJobRequest, CreatedRecurringJob, IdempotencyKey, Jid, Job,
    PayloadTooLarge, PeekJobsQuery, PopJobsRequest, Problem, PutJobRequest, PutJobResponse,
    PutJobsRequest, PutJobsResponse, QueueCounts, QueueJids, QueueJobState, QueueJobsQuery,
    QueueName, QueueStats, QueueStatsQuery, Tag, ThrottleName, Unavailable,
};
use crate::state::AppState;

/// Most jobs one batch put accepts.
pub const MAX_BATCH: usize = 1000;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    // The batch route reads its body itself, under the (larger) batch limit, so the
    // router-wide single-request limit is lifted for it alone.
    let batch = OpenApiRouter::new()
        .routes(routes!(put_jobs))
        .layer(DefaultBodyLimit::disable());
    OpenApiRouter::new()
        .routes(routes!(list_queues))
        .routes(routes!(get_queue, forget_queue))
        .routes(routes!(put_job))
        .merge(batch)
        .routes(routes!(pop_jobs))
        .routes(routes!(peek_jobs))
        .routes(routes!(list_queue_jobs))
        .routes(routes!(pause_queue))
        .routes(routes!(unpause_queue))
        .routes(routes!(get_queue_stats))
        .routes(routes!(create_recurring_job))
}

/// List every queue with its job counts.
///
/// A queue is known from the first time a job is put in it (or a recurring job or a
/// completed job's `next` names it) until it is forgotten. Oldest queue first.
#[utoipa::path(get, path = "/v1/queues", tag = "queues", operation_id = "list_queues",
    responses(
        (status = 200, description = "Counts of every known queue, oldest first \
            (`[]` when there is none)", body = [QueueCounts]),
        (status = 503, response = Unavailable),
    ))]
async fn list_queues(State(state): State<AppState>) -> Result<Json<Vec<QueueCounts>>, ApiError> {
    Ok(Json(state.qless.queues(state.clock.now()).await?))
}

/// Get the job counts of one queue.
///
/// A queue that was never used (or was forgotten and holds nothing) reports zeros
/// rather than 404: a queue exists as soon as something is put in it.
#[utoipa::path(get, path = "/v1/queues/{queue}", tag = "queues", operation_id = "get_queue",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    responses(
        (status = 200, description = "The queue's counts (all zero for an unknown \
            queue)", body = QueueCounts),
        (status = 400, description = "The queue name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_queue(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
) -> Result<Json<QueueCounts>, ApiError> {
    Ok(Json(
        state.qless.queue(state.clock.now(), queue.as_str()).await?,
    ))
}

/// Forget a queue.
///
/// Removes the queue from the listing of `GET /v1/queues`. Its jobs are kept and stay
/// reachable by jid; putting a job in the queue again makes it known again. Forgetting
/// an unknown queue is not an error.
#[utoipa::path(delete, path = "/v1/queues/{queue}", tag = "queues",
    operation_id = "forget_queue",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    responses(
        (status = 204, description = "The queue is no longer listed"),
        (status = 400, description = "The queue name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn forget_queue(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
) -> Result<StatusCode, ApiError> {
    state
        .qless
        .queue_forget(state.clock.now(), &[queue.into()])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Put a job in a queue.
///
/// Creates the job, or moves and resets an existing job with the same jid (its lease,
/// if any, is lost by its worker). A missing `jid` is generated. With a `delay` the
/// job is scheduled; with `depends` on unfinished jobs it waits for them. Priority,
/// tags and retries not given are kept from an existing job.
///
/// With `"if_absent": true` nothing changes when the jid already exists: the answer is
/// `200` with `created: false` (the unique add of work queues). With an
/// `Idempotency-Key` header a repeated put answers the first one's jid (`200`,
/// `created: false`). `throttles` and `backoff` are described with the body.
#[utoipa::path(post, path = "/v1/queues/{queue}/jobs", tag = "queues",
    operation_id = "put_job",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name"),
        ("Idempotency-Key" = Option<crate::model::IdempotencyKey>, Header, description = "A key \
         of the producer's choosing: a put repeating a key used less than \
         `--idempotency-ttl` ago (default a day) answers the first put's jid with \
         `created: false` and writes nothing, so a producer may retry after a timeout \
         without making a duplicate. Checked and recorded by the script: safe with many \
         gateways."),
        ("traceparent" = Option<String>, Header, description = TRACEPARENT_DOC)),
    request_body = PutJobRequest,
    responses(
        (status = 201, description = "The job was put (created, or moved and reset)",
         body = PutJobResponse,
         headers(("Location" = String, description = "`/v1/jobs/{jid}`"))),
        (status = 200, description = "`if_absent` was set and the job already existed: \
            nothing changed", body = PutJobResponse),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid \
            queue/jid/tag/dependency name, an empty klass, a negative or non-finite \
            delay, a non-finite priority, or negative retries", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn put_job(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    headers: HeaderMap,
    JobTrace(trace): JobTrace,
    Json(mut body): Json<PutJobRequest>,
) -> Result<Response, ApiError> {
    if let Some(key) = headers.get("idempotency-key") {
        let key = key
            .to_str()
            .map_err(|_| ApiError::BadRequest("Idempotency-Key must be visible ASCII".into()))?;
        if body.idempotency_key.is_some() {
            return Err(ApiError::BadRequest(
                "give the idempotency key in the Idempotency-Key header or in \
                 idempotency_key, not both"
                    .into(),
            ));
        }
        body.idempotency_key = Some(key.parse::<IdempotencyKey>()?);
    }
    let (job, if_absent, idem) = put_args(&queue, body, &state, trace)?;
    let jid = job.jid.clone();
    let now = state.clock.now();
    let (jid, created) = match idem {
        Some(idem) => {
            let outcome = state
                .qless
                .put_idempotent(now, job, if_absent, idem)
                .await?;
            (outcome.jid, outcome.created)
        }
        None if if_absent => (jid, state.qless.put_if_absent(now, job).await?.is_some()),
        None => {
            state.qless.put(now, job).await?;
            (jid, true)
        }
    };
    let body = Json(PutJobResponse { jid, created });
    // The house rule (see the document's description): a put that creates the job at
    // its own URL is a 201 with `Location`; an `if_absent` put that found it is a 200.
    if !created {
        return Ok(body.into_response());
    }
    let location = location("/v1/jobs/", &body.0.jid)?;
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], body).into_response())
}

/// Put many jobs in a queue in one request.
///
/// Each item is the body of `put_job` (including `if_absent`). Every item is validated
/// before anything is written, as completely as the script checks it (data JSON
/// nested at most 100 deep, jids not ending in `-history`, ...): a bad item is a 400
/// naming its index (`jobs[3]: ...`) and no job is put, whichever item it is. The jobs
/// are then put in order, one script invocation per 100 jobs, and the script also
/// checks every item of the request before the first invocation writes (a request of
/// more than 100 is checked part by part first); the answer lists one outcome per
/// item, in the same order. A jid that appears twice is put twice (with `if_absent`,
/// the second reports `created: false`). Should Redis become unreachable
/// part-way through a batch of more than 100 jobs, the answer is a 503 whose detail
/// names the first item that may not have been put; the items before it were (with
/// `if_absent` and jids of your own, sending the whole batch again is safe).
///
/// This route accepts bodies up to the batch size limit (16 MiB by default), larger
/// than the limit of single-request bodies.
#[utoipa::path(post, path = "/v1/queues/{queue}/jobs/batch", tag = "queues",
    operation_id = "put_jobs",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name"),
        ("traceparent" = Option<String>, Header, description = TRACEPARENT_DOC)),
    request_body = PutJobsRequest,
    responses(
        (status = 200, description = "Every job was put; one outcome per item, in \
            order", body = PutJobsResponse),
        (status = 400, description = "Malformed JSON, no jobs or more than 1000, or an \
            invalid item (the detail names its index); nothing was written",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn put_jobs(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    JobTrace(trace): JobTrace,
    BatchJson(body): BatchJson<PutJobsRequest>,
) -> Result<Json<PutJobsResponse>, ApiError> {
    if body.jobs.is_empty() || body.jobs.len() > MAX_BATCH {
        return Err(ApiError::BadRequest(format!(
            "jobs must hold between 1 and {MAX_BATCH} jobs, not {}",
            body.jobs.len()
        )));
    }
    let jobs = body
        .jobs
        .into_iter()
        .enumerate()
        .map(|(index, job)| {
            put_args(&queue, job, &state, trace.clone()).map_err(|err| at_item(index, err))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let results = state.qless.put_batch(state.clock.now(), jobs).await?;
    let jobs = outcomes(results)?;
    Ok(Json(PutJobsResponse { jobs }))
}

/// Lease jobs of a queue to a worker.
///
/// Leases up to `count` jobs (stalled jobs whose lock expired first, then waiting jobs
/// by priority and age) and returns them `running` for `worker`, with their lock
/// expiry in `expires`. The worker must heartbeat before then. Returns `[]` when
/// nothing is available or the queue is paused.
///
/// With `wait`, this is a long poll: when nothing is available the request waits
/// and returns as soon as a job can be leased (a put, a scheduled job falling due, a
/// recurring spawn, a stalled job's grace period ending, a completion releasing a
/// dependent, a retry or unfail), or `[]` after `wait`
/// seconds. Waiting requests are served oldest first, one job goes to one waiter, and
/// a client that disconnects stops waiting at once. While `--max-long-polls` requests
/// are waiting already, a pop with `wait` does not wait: it answers at once with what
/// there is (maybe `[]`).
#[utoipa::path(post, path = "/v1/queues/{queue}/pop", tag = "queues",
    operation_id = "pop_jobs",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    request_body = PopJobsRequest,
    responses(
        (status = 200, description = "The leased jobs (`[]` when none)", body = [Job]),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid \
            queue or worker name, or a count outside 1..=1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn pop_jobs(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Json(body): Json<PopJobsRequest>,
) -> Result<Json<Vec<Job>>, ApiError> {
    let count = validate::page_count(body.count)?;
    let wait = validate::wait(body.wait, state.limits.max_wait)?;
    let jobs = state
        .leasing
        .pop(queue.as_str(), body.worker.as_str(), count, wait)
        .await?;
    super::trace_leases(&jobs);
    Ok(Json(jobs))
}

/// Show the next jobs of a queue without leasing them.
///
/// The jobs a pop would hand out next, in that order (jobs with an expired lock first).
/// Nothing is leased and no worker is registered, but due scheduled jobs are promoted
/// and due recurring jobs spawned on the way, as a pop would. Ignores pausing.
#[utoipa::path(get, path = "/v1/queues/{queue}/peek", tag = "queues",
    operation_id = "peek_jobs",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name"), PeekJobsQuery),
    responses(
        (status = 200, description = "The next jobs (`[]` when none)", body = [Job]),
        (status = 400, description = "An invalid queue name, an unknown parameter, or a \
            count outside 1..=1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn peek_jobs(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Query(query): Query<PeekJobsQuery>,
) -> Result<Json<Vec<Job>>, ApiError> {
    let count = validate::page_count(query.count)?;
    Ok(Json(
        state
            .qless
            .peek(state.clock.now(), queue.as_str(), count)
            .await?,
    ))
}

/// List the jids of a queue's jobs in one state.
///
/// `waiting` lists in pop order (highest priority first, then oldest) without leasing
/// anything; `running` and `stalled` by lock expiry; `scheduled` by due time (jobs now
/// due are promoted to waiting first); `depends` by the time they started waiting;
/// `recurring` lists the jids of the recurring templates attached to the queue.
#[utoipa::path(get, path = "/v1/queues/{queue}/jobs", tag = "queues",
    operation_id = "list_queue_jobs",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name"), QueueJobsQuery),
    responses(
        (status = 200, description = "A page of jids (`[]` when none)", body = QueueJids),
        (status = 400, description = "A missing or unknown state, an unknown parameter, \
            an invalid queue name, or a count outside 1..=1000", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn list_queue_jobs(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Query(query): Query<QueueJobsQuery>,
) -> Result<Json<QueueJids>, ApiError> {
    let count = validate::page_count(query.count)?;
    let now = state.clock.now();
    let (qless, offset) = (&state.qless, query.offset);
    let jids = match listing(query.state) {
        None => {
            qless
                .jobs_waiting(now, queue.as_str(), offset, count)
                .await?
        }
        Some(listing) => {
            qless
                .jobs(now, listing, queue.as_str(), offset, count)
                .await?
        }
    };
    Ok(Json(QueueJids { jids }))
}

/// Pause a queue.
///
/// A paused queue leases nothing: pops answer `[]`. Jobs can still be put, peeked and
/// listed, and jobs already running are unaffected. Pausing twice is harmless.
#[utoipa::path(post, path = "/v1/queues/{queue}/pause", tag = "queues",
    operation_id = "pause_queue",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    responses(
        (status = 204, description = "The queue is paused"),
        (status = 400, description = "The queue name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn pause_queue(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
) -> Result<StatusCode, ApiError> {
    state
        .qless
        .pause(state.clock.now(), &[queue.into()])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Resume a paused queue.
///
/// Unpausing a queue that is not paused is harmless.
#[utoipa::path(post, path = "/v1/queues/{queue}/unpause", tag = "queues",
    operation_id = "unpause_queue",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    responses(
        (status = 204, description = "The queue leases jobs again"),
        (status = 400, description = "The queue name is invalid", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn unpause_queue(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
) -> Result<StatusCode, ApiError> {
    state
        .qless
        .unpause(state.clock.now(), &[queue.into()])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Get a queue's wait and run statistics for one day.
///
/// Statistics are kept per UTC day: `date` picks the day containing that time (default:
/// today). `wait` covers the time from put (or the end of a delay) to pop, `run` the
/// time from pop to completion; each has a count, mean, standard deviation and a
/// 148-bucket histogram (seconds 0-59, minutes 1-59, hours 1-23, days 1-6). A day
/// without activity reports zeros.
#[utoipa::path(get, path = "/v1/queues/{queue}/stats", tag = "queues",
    operation_id = "get_queue_stats",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name"), QueueStatsQuery),
    responses(
        (status = 200, description = "The statistics of that day", body = QueueStats),
        (status = 400, description = "An invalid queue name, an unknown parameter, or a \
            date that is not a finite number", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_queue_stats(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Query(query): Query<QueueStatsQuery>,
) -> Result<Json<QueueStats>, ApiError> {
    let now = state.clock.now();
    let date = validate::finite("date", query.date.unwrap_or(now))?;
    Ok(Json(state.qless.stats(now, queue.as_str(), date).await?))
}

/// Create a recurring job in a queue.
///
/// The template spawns a job (`<jid>-1`, `<jid>-2`, ...) into the queue every
/// `interval` seconds, the first `offset` seconds from now; or, with `cron` (and
/// `timezone`, default UTC) instead of `interval`, at each fire time of the cron
/// expression in that zone. Daylight saving time follows Vixie cron: a time skipped
/// by spring-forward fires once at the first instant after the gap; a time repeated
/// by fall-back fires once (expressions stepping through every hour, minute or
/// second fire on real time). Ticks missed while nothing ran fire once (the latest),
/// or up to `backlog` of them. A missing `jid` is generated. An existing template with
/// the same jid is replaced: every attribute is set anew, its next run is reset to
/// now + offset (or the schedule's next tick), and it moves to this queue; its spawn
/// count is kept.
#[utoipa::path(post, path = "/v1/queues/{queue}/recurring", tag = "queues",
    operation_id = "create_recurring_job",
    params(("queue" = crate::model::QueueName, Path, description = "Queue name")),
    request_body = CreateRecurringJobRequest,
    responses(
        (status = 201, description = "The recurring job was created or replaced",
         body = CreatedRecurringJob,
         headers(("Location" = String, description = "`/v1/recurring/{jid}`"))),
        (status = 400, description = "Malformed JSON, an unknown field, an invalid \
            queue/jid/tag name, an empty klass, an interval that is not above 0, both or \
            neither of interval and cron, a bad cron expression or unknown timezone \
            (named in the detail), a negative offset, a non-finite priority, or \
            negative retries or backlog; nothing is written",
         body = Problem, content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn create_recurring_job(
    State(state): State<AppState>,
    Path(queue): Path<QueueName>,
    Json(body): Json<CreateRecurringJobRequest>,
) -> Result<Response, ApiError> {
    let now = state.clock.now();
    let args = recur_args(&queue, body, state.limits.max_job_size, now)?;
    let jid = state.qless.recur(now, args).await?;
    let location = location("/v1/recurring/", &jid)?;
    let body = Json(CreatedRecurringJob { jid });
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], body).into_response())
}

/// The `traceparent` header of a put, as the OpenAPI document describes it.
const TRACEPARENT_DOC: &str = "A W3C Trace Context `traceparent` \
    (`00-<trace id>-<parent id>-<flags>`): the job keeps it (every job of a batch) and \
    hands it back as its `traceparent` field on pop and `GET /v1/jobs/{jid}`, so the \
    worker continues the producer's trace. With `--otlp-endpoint` the put's own span \
    continues this trace and the job keeps that span's `traceparent`. A malformed value \
    is ignored, as the W3C recommendation asks (the job then has no trace, or the \
    put's own).";

/// Checks a put request and turns it into script arguments; the flag is `if_absent`.
pub(super) fn put_args(
    queue: &QueueName,
    job: PutJobRequest,
    state: &AppState,
    traceparent: Option<String>,
) -> Result<(PutArgs, bool, Option<Idempotency>), ApiError> {
    let max_job_size = state.limits.max_job_size;
    let jid = jid_or_new(job.jid);
    validate::text("klass", &job.klass)?;
    let priority = job
        .priority
        .map(|value| validate::finite("priority", value))
        .transpose()?;
    let delay = validate::seconds("delay", job.delay.unwrap_or(0.0))?;
    whole("retries", job.retries)?;
    let backoff = job.backoff.as_ref().map(backoff_text).transpose()?;
    let (start_by, max_run) = deadlines(
        job.start_by,
        job.start_within,
        job.max_run,
        state.clock.now(),
    )?;
    let idem = job.idempotency_key.map(|key| Idempotency {
        key: key.into(),
        ttl: state.limits.idempotency_ttl,
    });
    let args = PutArgs {
        // No worker puts through the API: a previous holder is told it lost the job.
        worker: String::new(),
        queue: queue.as_str().to_owned(),
        jid,
        klass: job.klass,
        data: JobData::new(&job.data, max_job_size)?.into_text(),
        delay,
        priority,
        tags: job.tags.map(Tag::into_strings),
        retries: job.retries,
        depends: job.depends.map(Jid::into_strings),
        throttles: job.throttles.map(ThrottleName::into_strings),
        backoff,
        traceparent,
        start_by,
        max_run,
        partition: job.partition.map(String::from),
    };
    Ok((args, job.if_absent, idem))
}

/// A put's deadlines, checked: `start_by` (or `start_within` from `now`, not both) at
/// least 0, `max_run` more than 0, all finite. Returns `start_by` and `max_run`.
pub(super) fn deadlines(
    start_by: Option<f64>,
    start_within: Option<f64>,
    max_run: Option<f64>,
    now: f64,
) -> Result<(Option<f64>, Option<f64>), ApiError> {
    let start_by = match (start_by, start_within) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give start_by or start_within, not both".into(),
            ));
        }
        (Some(at), None) => Some(validate::seconds("start_by", at)?),
        (None, Some(within)) => Some(now + validate::seconds("start_within", within)?),
        (None, None) => None,
    };
    if let Some(limit) = max_run
        && !(limit.is_finite() && limit > 0.0)
    {
        return Err(ApiError::BadRequest(
            "max_run must be a finite number of seconds, more than 0".into(),
        ));
    }
    Ok((start_by, max_run))
}

/// A backoff policy, checked, as the JSON text the script stores.
pub(super) fn backoff_text(backoff: &Backoff) -> Result<String, ApiError> {
    let bad = |what: &str| Err(ApiError::BadRequest(format!("backoff: {what}")));
    if !(backoff.initial.is_finite() && backoff.initial >= 0.0) {
        return bad("initial must be a finite number of seconds, at least 0");
    }
    if let Some(factor) = backoff.factor
        && !(factor.is_finite() && factor >= 1.0)
    {
        return bad("factor must be a finite number, at least 1");
    }
    if let Some(max) = backoff.max
        && !(max.is_finite() && max >= 0.0)
    {
        return bad("max must be a finite number of seconds, at least 0");
    }
    if let Some(jitter) = backoff.jitter
        && !(0.0..=1.0).contains(&jitter)
    {
        return bad("jitter must be between 0 and 1");
    }
    serde_json::to_string(backoff).map_err(|err| ApiError::Internal(format!("backoff: {err}")))
}

/// Checks a recurring-job request and turns it into script arguments.
fn recur_args(
    queue: &QueueName,
    body: CreateRecurringJobRequest,
    max_job_size: u64,
    now: f64,
) -> Result<RecurArgs, ApiError> {
    let jid = jid_or_new(body.jid);
    validate::text("klass", &body.klass)?;
    let (interval, cron) = match (body.interval, body.cron) {
        (Some(interval), None) if interval.is_finite() && interval > 0.0 => {
            if body.timezone.is_some() {
                return Err(ApiError::BadRequest(
                    "timezone goes with cron, not with interval".to_owned(),
                ));
            }
            (interval, None)
        }
        (Some(_), None) => {
            return Err(ApiError::BadRequest(
                "interval must be a finite number of seconds above 0".to_owned(),
            ));
        }
        (None, Some(expression)) => {
            if body.offset != 0.0 {
                return Err(ApiError::BadRequest(
                    "offset goes with interval, not with cron".to_owned(),
                ));
            }
            let timezone = body.timezone.unwrap_or_else(|| "UTC".to_owned());
            (0.0, Some(cron_spec(expression, timezone, now)?))
        }
        _ => {
            return Err(ApiError::BadRequest(
                "give exactly one of interval and cron".to_owned(),
            ));
        }
    };
    let offset = validate::seconds("offset", body.offset)?;
    let priority = body
        .priority
        .map(|value| validate::finite("priority", value))
        .transpose()?;
    whole("retries", body.retries)?;
    whole("backlog", body.backlog)?;
    // (Checked as a put's are: start_within from 0 is start_within itself.)
    let (start_within, max_run) = deadlines(None, body.start_within, body.max_run, 0.0)?;
    Ok(RecurArgs {
        queue: queue.as_str().to_owned(),
        jid,
        klass: body.klass,
        data: JobData::new(&body.data, max_job_size)?.into_text(),
        interval,
        offset,
        cron,
        priority,
        tags: body.tags.map(Tag::into_strings),
        retries: body.retries,
        backlog: body.backlog,
        start_within,
        max_run,
        partition: body.partition.map(String::from),
    })
}

/// A cron schedule checked and turned into the script's form (a 400 naming what is
/// wrong).
pub(super) fn cron_spec(
    expression: String,
    timezone: String,
    now: f64,
) -> Result<core::CronSpec, ApiError> {
    crate::cron::spec(expression, &timezone, now)
        .map_err(|err| ApiError::BadRequest(err.to_string()))
}

/// The given jid, or a new one: a UUID v4 as 32 lowercase hex digits, the form qless
/// clients generate.
pub(super) fn jid_or_new(jid: Option<Jid>) -> String {
    match jid {
        Some(jid) => jid.into(),
        None => uuid::Uuid::new_v4().simple().to_string(),
    }
}

fn whole(kind: &str, value: Option<i64>) -> Result<(), ApiError> {
    match value {
        Some(value) if value < 0 => Err(ApiError::BadRequest(format!(
            "{kind} must be a whole number, at least 0"
        ))),
        _ => Ok(()),
    }
}

/// The listing behind a state; `None` is `waiting`, which has its own command.
fn listing(state: QueueJobState) -> Option<Listing> {
    match state {
        QueueJobState::Waiting => None,
        QueueJobState::Running => Some(Listing::Running),
        QueueJobState::Stalled => Some(Listing::Stalled),
        QueueJobState::Scheduled => Some(Listing::Scheduled),
        QueueJobState::Depends => Some(Listing::Depends),
        QueueJobState::Recurring => Some(Listing::Recurring),
    }
}

/// `prefix` followed by `jid` as one percent-encoded path segment.
pub(super) fn location(prefix: &str, jid: &str) -> Result<HeaderValue, ApiError> {
    let unreserved = |byte: u8| byte.is_ascii_alphanumeric() || b"-._~".contains(&byte);
    let mut path = String::with_capacity(prefix.len() + 3 * jid.len());
    path.push_str(prefix);
    // Usually (generated jids, UUIDs) nothing needs encoding: one copy, not a push
    // per byte.
    if jid.bytes().all(unreserved) {
        path.push_str(jid);
    } else {
        for byte in jid.bytes() {
            if unreserved(byte) {
                path.push(char::from(byte));
            } else {
                let _ = write!(path, "%{byte:02X}");
            }
        }
    }
    HeaderValue::try_from(path).map_err(|err| ApiError::Internal(format!("location: {err}")))
}

/// The outcome of each batch item, or the error of the first item the script refused.
fn outcomes(
    results: Vec<Result<PutOutcome, core::Error>>,
) -> Result<Vec<PutJobResponse>, ApiError> {
    results
        .into_iter()
        .enumerate()
        .map(|(index, result)| match result {
            Ok(PutOutcome { jid, created }) => Ok(PutJobResponse { jid, created }),
            Err(err) => Err(at_item(index, err.into())),
        })
        .collect()
}

/// Prefixes an error about one batch item with the item's index.
pub(super) fn at_item(index: usize, err: ApiError) -> ApiError {
    let at = |message: String| format!("jobs[{index}]: {message}");
    match err {
        ApiError::BadRequest(message) => ApiError::BadRequest(at(message)),
        ApiError::NotFound(message) => ApiError::NotFound(at(message)),
        ApiError::Conflict(message) => ApiError::Conflict(at(message)),
        ApiError::LockLost(message) => ApiError::LockLost(at(message)),
        ApiError::PayloadTooLarge(message) => ApiError::PayloadTooLarge(at(message)),
        ApiError::Internal(message) => ApiError::Internal(at(message)),
        ApiError::Unavailable(message) => ApiError::Unavailable(format!(
            "jobs[{index}] and the items after it may not have been put (the items before \
             it were): {message}"
        )),
        ApiError::RedisUnavailable(cause) => {
            tracing::warn!(error = %cause, "Redis is unavailable");
            ApiError::Unavailable(format!(
                "jobs[{index}] and the items after it may not have been put (the items \
                 before it were): Redis is unavailable"
            ))
        }
        other => other,
    }
}
