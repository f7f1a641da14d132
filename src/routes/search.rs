//! `/v1/search`: finding jobs by a filter (`GET`), and acting on every job that matches
//! (`POST /v1/search/{action}`), a bounded slice per request, resumed with a cursor.
//!
//! The handlers check the filter (a 400 naming the parameter, nothing written), seal
//! and open cursors, and shape the answer; the walk and the action run in the script
//! (`lua/search.lua`), one call per request, looking at no more than
//! `--search-scan-limit` entries of the smallest index the filter allows.
//!
//! A cursor is opaque to clients: base64url (no padding) of
//! `{"v":1,"k":<kind>,"f":<fingerprint>,"s":<the script's cursor>}`, where the kind is
//! `search` or the action (`retry`, or `retry-dry` for a dry run) and the fingerprint
//! the first 8 bytes (hex) of the SHA-256 of the kind, the filter (keys sorted) and the
//! action's argument. A cursor sent back is checked against both, so a cursor of
//! another search or action is a 400 instead of a walk through the wrong index; the
//! script checks the rest (that it is a position in an index of this filter).

use axum::extract::{RawQuery, State};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path};
use super::validate;
use crate::auth::ActingToken;
use crate::core::{Bounds, Bulk};
use crate::error::ApiError;
use crate::model::{
    GroupName, JobState, PayloadTooLarge, Problem, QueueName, SearchAction, SearchActionRequest,
    SearchActionResponse, SearchFilter, SearchResponse, Tag, Unavailable, WorkerName,
};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search_jobs))
        .routes(routes!(act_on_matching_jobs))
}

/// The query parameters of `GET /v1/search`.
const PARAMETERS: &[&str] = &[
    "queue", "state", "klass", "tag", "worker", "group", "since", "until", "data", "text", "limit",
    "cursor",
];

/// Most jobs one search answers, and its default.
const MAX_LIMIT: u32 = 500;
const SEARCH_LIMIT: u32 = 25;

/// Most jobs one request of a bulk action acts on by default.
const ACTION_LIMIT: u32 = 100;

/// Most keys of a `data` filter, and most characters of a `text` one.
const MAX_DATA_KEYS: usize = 20;
const MAX_TEXT: usize = 1000;

/// Most tags a `tag` or `untag` action names.
const MAX_TAGS: usize = 100;

/// Longest cursor accepted (the script's holds a jid and a few numbers).
const MAX_CURSOR: usize = 2048;

/// Find jobs by a filter.
///
/// Give at least one of `queue`, `tag`, `worker`, `group`, or `state` `failed` or
/// `complete`: the search walks the smallest of the indexes these name (a failure
/// group, a tag, a queue's jobs in that state, every failure group, the completed
/// jobs, a worker's jobs) and tests each job there against every parameter given.
/// One request looks at no more than the server's `--search-scan-limit` jobs (2,000 by
/// default), so it costs the same however many jobs Redis holds; it answers the jobs
/// that matched (up to `limit`) and a `cursor`: repeat the request with it to go on,
/// until `done`. A page may be short, or empty, before the search is done. The walk
/// sees the index as far as it reached when the search began: jobs joining it later
/// are not found by the same cursor.
#[utoipa::path(get, path = "/v1/search", tag = "search", operation_id = "search_jobs",
    params(
        ("queue" = Option<crate::model::QueueName>, Query, description = "Jobs in this \
            queue (completed jobs are in none)"),
        ("state" = Option<crate::model::JobState>, Query, description = "Jobs in this \
            state; `running` is a job whose lock has not expired, `stalled` one whose lock \
            expired or that was timed out"),
        ("klass" = Option<crate::model::Text>, Query, description = "Jobs of exactly this \
            class"),
        ("tag" = Option<crate::model::Tag>, Query, description = "Jobs carrying this tag"),
        ("worker" = Option<crate::model::WorkerName>, Query, description = "Jobs held by \
            this worker"),
        ("group" = Option<crate::model::GroupName>, Query, description = "Failed jobs of \
            this failure group"),
        ("since" = Option<f64>, Query, minimum = 0, description = "Jobs whose last \
            history entry is at or after this time (Unix seconds)"),
        ("until" = Option<f64>, Query, minimum = 0, description = "Jobs whose last \
            history entry is at or before this time (Unix seconds)"),
        ("data" = Option<String>, Query, description = "A JSON object: each key a dotted \
            path into the job's data (`user.id`; digits index arrays from 0), each value \
            what the data must hold there (`{\"user.id\": 42}`); at most 20 keys",
            example = "{\"user.id\":42}"),
        ("text" = Option<String>, Query, min_length = 1, max_length = 1000,
            description = "Jobs whose data (its JSON text) or failure message contains \
            this text (case-sensitive)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 500, description = "Most \
            jobs to answer (default 25)"),
        ("cursor" = Option<String>, Query, description = "The `cursor` of the previous \
            page of the same search"),
    ),
    responses(
        (status = 200, description = "The jobs found, and where to go on",
         body = SearchResponse),
        (status = 400, description = "A parameter is malformed, unknown, given twice or \
            out of bounds; the filter names no index (give `queue`, `tag`, `worker`, \
            `group`, or `state` `failed` or `complete`); or the cursor is not one of this \
            search", body = Problem, content_type = "application/problem+json"),
        (status = 414, description = "The URI is longer than the HTTP server reads",
         body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn search_jobs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<SearchResponse>, ApiError> {
    let plan = SearchPlan::read(query.as_deref(), &state)?;
    let now = state.clock.now();
    let found = state
        .qless
        .search(now, &plan.filter, plan.bounds, plan.cursor.as_deref())
        .await?;
    Ok(Json(SearchResponse {
        cursor: plan.seal(found.cursor.as_deref()),
        jobs: found.jobs,
        examined: found.examined,
        done: found.done,
    }))
}

/// A search as `GET /v1/search` reads its query string, checked, with the client's
/// cursor opened: what `core::Qless::search` takes. The dashboard's search page reads
/// its URL (the same parameters) with it too, so a search means the same in both and
/// their cursors are interchangeable.
pub(crate) struct SearchPlan {
    pub(crate) filter: SearchFilter,
    pub(crate) bounds: Bounds,
    /// The script's cursor, from the client's.
    pub(crate) cursor: Option<String>,
    fingerprint: String,
}

impl SearchPlan {
    /// Reads and checks a query string (a 400 naming the parameter).
    pub(crate) fn read(query: Option<&str>, state: &AppState) -> Result<Self, ApiError> {
        let (filter, limit, cursor) = search_query(query)?;
        check_filter(&filter)?;
        let bounds = bounds(limit, SEARCH_LIMIT, state)?;
        let fingerprint = fingerprint("search", &filter, "");
        let cursor = open(cursor.as_deref(), "search", &fingerprint)?;
        Ok(SearchPlan {
            filter,
            bounds,
            cursor,
            fingerprint,
        })
    }

    /// The client's cursor for the script's (`None` once done).
    pub(crate) fn seal(&self, script: Option<&str>) -> Option<String> {
        seal(script, "search", &self.fingerprint)
    }
}

/// Act on every job a filter matches.
///
/// `retry`: a failed, running, stalled or scheduled job goes back into its queue,
/// waiting (a worker holding it loses it). `cancel`: a job that is not complete is
/// canceled, unless a job depending on it is not canceled with it. `move` (with
/// `queue`): a job goes into that queue. `unfail`: a failed job goes back into the
/// queue it failed in. `retry`, `move` and `unfail` requeue the job as it is (class,
/// data, priority, tags, retries, dependencies), with a fresh retry budget.
/// `priority` (with `priority`): a job that is not complete gets that priority. `tag`,
/// `untag` (with `tags`): a job gets the tags it lacks, loses those it has.
///
/// One request walks the index as `GET /v1/search` does (at most
/// `--search-scan-limit` entries, at most `limit` matching jobs) and acts on the jobs
/// that matched in the same script call, so a job is changed only if it matches when
/// its slice runs: one that moved meanwhile is left alone. The answer counts what
/// matched, what changed, and what matched but was left alone (`skipped`: the action
/// does not apply to it, as above); send the `cursor` back with the same filter and
/// action to go on, until `done`. With `dry_run` nothing changes, and `changed`
/// counts what would. A job the action moves out of the index is not met again, nor
/// are jobs joining the index after the action began. Each request is logged (the
/// token's name, the action, the filter and the counts).
#[utoipa::path(post, path = "/v1/search/{action}", tag = "search",
    operation_id = "act_on_matching_jobs",
    params(("action" = inline(crate::model::SearchAction), Path, description = "What to do to \
        each job that matches")),
    request_body = SearchActionRequest,
    responses(
        (status = 200, description = "What this slice matched and changed, and where to \
            go on", body = SearchActionResponse),
        (status = 400, description = "An unknown action; a malformed body or unknown \
            field; a filter field malformed or out of bounds, or a filter naming no \
            index; the action's own field missing (`queue` for move, `priority` for \
            priority, `tags` for tag and untag) or given to another action; or a cursor \
            not of this filter and action. Nothing was changed", body = Problem,
         content_type = "application/problem+json"),
        (status = 413, response = PayloadTooLarge),
        (status = 503, response = Unavailable),
    ))]
async fn act_on_matching_jobs(
    State(state): State<AppState>,
    Path(action): Path<SearchAction>,
    token: Option<axum::Extension<ActingToken>>,
    Json(body): Json<SearchActionRequest>,
) -> Result<Json<SearchActionResponse>, ApiError> {
    let plan = ActionPlan::read(action, &body, &state)?;
    let now = state.clock.now();
    let acted = state
        .qless
        .search_act(
            now,
            &plan.bulk,
            &body.filter,
            plan.bounds,
            body.dry_run,
            plan.cursor.as_deref(),
        )
        .await?;
    let answer = SearchActionResponse {
        matched: acted.matched,
        changed: acted.changed,
        skipped: acted.skipped,
        examined: acted.examined,
        cursor: plan.seal(acted.cursor.as_deref()),
        done: acted.done,
    };
    let token = token
        .as_ref()
        .map(|axum::Extension(ActingToken(name))| &**name);
    log_action(token, &plan.bulk, &body, &answer);
    Ok(Json(answer))
}

/// A bulk action's request as `POST /v1/search/{action}` reads it, checked, with its
/// cursor opened: what `core::Qless::search_act` takes (with the body's filter and
/// `dry_run`). The dashboard's "apply to all matching" builds the same body and reads
/// it with this, so an action is checked, bound to its cursor and logged alike.
pub(crate) struct ActionPlan {
    pub(crate) bulk: Bulk,
    pub(crate) bounds: Bounds,
    /// The script's cursor, from the client's.
    pub(crate) cursor: Option<String>,
    kind: String,
    fingerprint: String,
}

impl ActionPlan {
    /// Reads and checks a request (a 400 naming the field).
    pub(crate) fn read(
        action: SearchAction,
        body: &SearchActionRequest,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        let bulk = bulk(action, body)?;
        check_filter(&body.filter)?;
        let bounds = bounds(body.limit, ACTION_LIMIT, state)?;
        let kind = if body.dry_run {
            format!("{}-dry", action.as_str())
        } else {
            action.as_str().to_owned()
        };
        let fingerprint = fingerprint(&kind, &body.filter, &bulk.value());
        let cursor = open(body.cursor.as_deref(), &kind, &fingerprint)?;
        Ok(ActionPlan {
            bulk,
            bounds,
            cursor,
            kind,
            fingerprint,
        })
    }

    /// The client's cursor for the script's (`None` once done).
    pub(crate) fn seal(&self, script: Option<&str>) -> Option<String> {
        seal(script, &self.kind, &self.fingerprint)
    }
}

/// The one log line of a bulk action's request: who (the token's name, `-` without
/// tokens), what, on which filter, and what it did.
pub(crate) fn log_action(
    token: Option<&str>,
    bulk: &Bulk,
    body: &SearchActionRequest,
    answer: &SearchActionResponse,
) {
    let filter = serde_json::to_string(&body.filter).unwrap_or_default();
    tracing::info!(
        token = token.unwrap_or("-"),
        action = bulk.action().as_str(),
        argument = %bulk.value(),
        filter = %filter,
        dry_run = body.dry_run,
        matched = answer.matched,
        changed = answer.changed,
        skipped = answer.skipped,
        examined = answer.examined,
        done = answer.done,
        "bulk action"
    );
}

/// The filter, limit and cursor of a search's query string, each parameter at most
/// once.
fn search_query(
    query: Option<&str>,
) -> Result<(SearchFilter, Option<u32>, Option<String>), ApiError> {
    let pairs = validate::query_pairs(query, PARAMETERS)?;
    let mut filter = SearchFilter::default();
    let (mut limit, mut cursor) = (None, None);
    for (key, value) in pairs {
        let key = key.as_str();
        match key {
            "queue" => once(&mut filter.queue, key, QueueName::try_from(value)?)?,
            "tag" => once(&mut filter.tag, key, Tag::try_from(value)?)?,
            "worker" => once(&mut filter.worker, key, WorkerName::try_from(value)?)?,
            "group" => once(&mut filter.group, key, GroupName::try_from(value)?)?,
            "state" => once(&mut filter.state, key, state_word(&value)?)?,
            "klass" => once(&mut filter.klass, key, value)?,
            "text" => once(&mut filter.text, key, value)?,
            "since" | "until" => {
                let seconds = value.parse::<f64>().map_err(|_| {
                    bad(format!("{key} must be a number of seconds since the epoch"))
                })?;
                let slot = if key == "since" {
                    &mut filter.since
                } else {
                    &mut filter.until
                };
                once(slot, key, seconds)?;
            }
            "data" => {
                let data = match serde_json::from_str::<Value>(&value) {
                    Ok(Value::Object(data)) => data,
                    _ => return Err(bad("data must be a JSON object, such as {\"user.id\":42}")),
                };
                once(&mut filter.data, key, data)?;
            }
            "limit" => {
                let n = value.parse::<u32>().map_err(|_| {
                    bad(format!(
                        "limit must be a whole number from 1 to {MAX_LIMIT}"
                    ))
                })?;
                once(&mut limit, key, n)?;
            }
            _ => once(&mut cursor, key, value)?,
        }
    }
    Ok((filter, limit, cursor))
}

/// Sets a parameter that may be given once.
fn once<T>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), ApiError> {
    if slot.is_some() {
        return Err(bad(format!("{key} is given more than once")));
    }
    *slot = Some(value);
    Ok(())
}

/// A state by its word.
fn state_word(word: &str) -> Result<JobState, ApiError> {
    const STATES: [JobState; 7] = [
        JobState::Waiting,
        JobState::Running,
        JobState::Scheduled,
        JobState::Stalled,
        JobState::Depends,
        JobState::Failed,
        JobState::Complete,
    ];
    STATES
        .into_iter()
        .find(|state| state.as_str() == word)
        .ok_or_else(|| {
            bad(
                "state must be one of waiting, running, scheduled, stalled, depends, failed, \
                 complete",
            )
        })
}

/// Checks what the names and numbers do not check themselves, and that the filter
/// names an index to walk.
fn check_filter(filter: &SearchFilter) -> Result<(), ApiError> {
    if let Some(klass) = &filter.klass {
        validate::text("klass", klass)?;
    }
    if let Some(text) = &filter.text
        && !(1..=MAX_TEXT).contains(&text.chars().count())
    {
        return Err(bad(format!("text must be 1 to {MAX_TEXT} characters")));
    }
    for (name, seconds) in [("since", filter.since), ("until", filter.until)] {
        if let Some(seconds) = seconds {
            validate::seconds(name, seconds)?;
        }
    }
    if let (Some(since), Some(until)) = (filter.since, filter.until)
        && since > until
    {
        return Err(bad("since must not be after until"));
    }
    if let Some(data) = &filter.data {
        check_data(data)?;
    }
    let indexed = filter.queue.is_some()
        || filter.tag.is_some()
        || filter.worker.is_some()
        || filter.group.is_some()
        || matches!(filter.state, Some(JobState::Failed | JobState::Complete));
    if !indexed {
        return Err(bad(
            "the filter has no index to search from: add queue, tag, worker or group (or \
             state failed or complete)",
        ));
    }
    Ok(())
}

/// A data filter: at most [`MAX_DATA_KEYS`] dotted paths without empty segments, and
/// values the script's JSON decoder reads.
fn check_data(data: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    if data.len() > MAX_DATA_KEYS {
        return Err(bad(format!("data holds at most {MAX_DATA_KEYS} keys")));
    }
    if let Some(path) = data.keys().find(|path| path.split('.').any(str::is_empty)) {
        return Err(bad(format!(
            "data key {:?} is not a dotted path (no segment may be empty)",
            crate::error::echo(path)
        )));
    }
    let text = Value::Object(data.clone()).to_string();
    validate::script_json(&text).map_err(|what| bad(format!("data {what}")))
}

/// The bounds of one request: its `limit` (1 to [`MAX_LIMIT`], `default` when not
/// given) and the server's scan limit.
fn bounds(limit: Option<u32>, default: u32, state: &AppState) -> Result<Bounds, ApiError> {
    let limit = limit.unwrap_or(default);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(bad(format!("limit must be between 1 and {MAX_LIMIT}")));
    }
    Ok(Bounds {
        limit,
        scan: state.limits.search_scan_limit,
    })
}

/// The action with its argument, which it must have, and no other action's field.
fn bulk(action: SearchAction, body: &SearchActionRequest) -> Result<Bulk, ApiError> {
    let only = |field: &str, owner: &str| bad(format!("{field} is only for the {owner} action"));
    if body.queue.is_some() && action != SearchAction::Move {
        return Err(only("queue", "move"));
    }
    if body.priority.is_some() && action != SearchAction::Priority {
        return Err(only("priority", "priority"));
    }
    if body.tags.is_some() && !matches!(action, SearchAction::Tag | SearchAction::Untag) {
        return Err(only("tags", "tag and untag"));
    }
    let needs = |field: &str| bad(format!("{field} is required for {}", action.as_str()));
    Ok(match action {
        SearchAction::Retry => Bulk::Retry,
        SearchAction::Cancel => Bulk::Cancel,
        SearchAction::Unfail => Bulk::Unfail,
        SearchAction::Move => {
            let queue = body.queue.as_ref().ok_or_else(|| needs("queue"))?;
            Bulk::Move(queue.as_str().to_owned())
        }
        SearchAction::Priority => {
            let priority = body.priority.ok_or_else(|| needs("priority"))?;
            Bulk::Priority(validate::finite("priority", priority)?)
        }
        SearchAction::Tag | SearchAction::Untag => {
            let tags = body.tags.as_ref().ok_or_else(|| needs("tags"))?;
            if tags.is_empty() || tags.len() > MAX_TAGS {
                return Err(bad(format!("tags must hold 1 to {MAX_TAGS} tags")));
            }
            let tags = tags.iter().map(|tag| tag.as_str().to_owned()).collect();
            if action == SearchAction::Tag {
                Bulk::Tag(tags)
            } else {
                Bulk::Untag(tags)
            }
        }
    })
}

/// What a cursor is bound to: the request's kind, its filter (keys sorted at every
/// level, so the order a client wrote them in does not matter) and the action's
/// argument.
fn fingerprint(kind: &str, filter: &SearchFilter, argument: &str) -> String {
    let filter = sorted(serde_json::to_value(filter).unwrap_or_default()).to_string();
    let digest = Sha256::digest(format!("{kind}\n{filter}\n{argument}").as_bytes());
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `value` with the keys of every object in sorted order.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// The client's cursor for the script's (`None` once done).
fn seal(script: Option<&str>, kind: &str, fingerprint: &str) -> Option<String> {
    let script = script?;
    let kind = Value::String(kind.to_owned());
    let text = format!(r#"{{"v":1,"k":{kind},"f":"{fingerprint}","s":{script}}}"#);
    Some(URL_SAFE_NO_PAD.encode(text))
}

/// A cursor as sealed, once opened.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Opened {
    v: u8,
    k: String,
    f: String,
    s: Box<RawValue>,
}

/// The script's cursor inside a client's, which must be one this server sealed for
/// the same kind of request and the same filter.
fn open(cursor: Option<&str>, kind: &str, fingerprint: &str) -> Result<Option<String>, ApiError> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    let refused = || {
        bad(
            "cursor is not a cursor this server gave: pass back the `cursor` of an answer as it came",
        )
    };
    if cursor.len() > MAX_CURSOR {
        return Err(refused());
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| refused())?;
    let opened: Opened = serde_json::from_slice(&bytes).map_err(|_| refused())?;
    if opened.v != 1 {
        return Err(refused());
    }
    if opened.k != kind || opened.f != fingerprint {
        return Err(bad(
            "cursor belongs to another search: send it with the filter (and action) it came \
             with",
        ));
    }
    Ok(Some(opened.s.get().to_owned()))
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::BadRequest(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_cursor_opens_for_its_own_search_only() {
        let filter = SearchFilter {
            group: Some("boom".parse().unwrap()),
            ..SearchFilter::default()
        };
        let print = fingerprint("retry", &filter, "");
        let sealed = seal(Some(r#"["group",1,4,"j9","12"]"#), "retry", &print).unwrap();
        assert!(
            sealed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(
            open(Some(&sealed), "retry", &print).unwrap().as_deref(),
            Some(r#"["group",1,4,"j9","12"]"#)
        );
        assert!(open(Some(&sealed), "retry-dry", &print).is_err());
        let other = fingerprint("retry", &SearchFilter::default(), "");
        assert!(open(Some(&sealed), "retry", &other).is_err());
        for forged in ["", "!!", "e30", &"A".repeat(MAX_CURSOR + 1)] {
            assert!(open(Some(forged), "retry", &print).is_err(), "{forged}");
        }
        assert_eq!(seal(None, "retry", &print), None);
    }

    #[test]
    fn the_fingerprint_ignores_the_order_of_data_keys() {
        let data = |text: &str| SearchFilter {
            queue: Some("q".parse().unwrap()),
            data: serde_json::from_str(text).unwrap(),
            ..SearchFilter::default()
        };
        let a = fingerprint("search", &data(r#"{"a":1,"b":{"x":1,"y":2}}"#), "");
        let b = fingerprint("search", &data(r#"{"b":{"y":2,"x":1},"a":1}"#), "");
        assert_eq!(a, b);
        assert_ne!(a, fingerprint("search", &data(r#"{"a":2}"#), ""));
        assert_ne!(
            a,
            fingerprint("move", &data(r#"{"a":1,"b":{"x":1,"y":2}}"#), "q2")
        );
    }
}
