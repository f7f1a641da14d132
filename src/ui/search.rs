//! The search page (`/ui/search`) and its bulk actions.
//!
//! The page's URL takes the query parameters of `GET /v1/search`, read by the API's
//! own reader (`routes::SearchPlan`), so a search is shared by its address, a bad one
//! shows the API's 400 message, and its "next page" cursor is the API's. The search
//! box of the page frame sends `?q=` instead: a jid goes to its job (or recurring
//! template), anything else to its tag.
//!
//! "Apply to all matching" is an admin's POST form per action (`/ui/search/{action}`)
//! carrying the filter as a query string: it first answers a confirmation page with a
//! dry run's count, then, confirmed, acts chunk by chunk through the API's reader
//! (`routes::ActionPlan`) and `core::Qless::search_act`, a bounded number of chunks per
//! request, offering "continue" with the cursor when the walk is not over. Unlike the
//! other actions these answer with a page, not a redirect: the counts and the cursor
//! are what the operator needs next, and a resent form meets a cursor past the jobs it
//! already changed, which no longer match.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::actions::Form;
use super::pages::{history, pretty};
use super::{Can, Path, Ui, UiError, UiResult, csrf_field, layout, name, names, refused, seg};
use crate::auth::ActingToken;
use crate::core::Acted;
use crate::error::ApiError;
use crate::model::{
    Jid, Job, QueueName, SearchAction, SearchActionRequest, SearchActionResponse, Tag,
};
use crate::routes::{ActionPlan, SearchPlan, log_action};

/// The filter's fields, in the order the form shows them.
const FILTERS: [&str; 10] = [
    "queue", "state", "klass", "tag", "worker", "group", "since", "until", "data", "text",
];

/// The states a search takes (the select's options after "any").
const STATES: [&str; 7] = [
    "waiting",
    "running",
    "scheduled",
    "stalled",
    "depends",
    "failed",
    "complete",
];

/// The actions offered on what a search matches, with their buttons' verbs.
const ACTIONS: [(SearchAction, &str); 7] = [
    (SearchAction::Retry, "Retry"),
    (SearchAction::Cancel, "Cancel"),
    (SearchAction::Move, "Move"),
    (SearchAction::Unfail, "Unfail"),
    (SearchAction::Priority, "Set priority of"),
    (SearchAction::Tag, "Tag"),
    (SearchAction::Untag, "Untag"),
];

/// Jobs one chunk of a bulk action looks at and acts on (the API's most).
const CHUNK: u32 = 500;

/// Chunks a confirmation counts over before it says "at least".
const COUNT_CHUNKS: usize = 20;

/// Chunks one confirmed request runs before it offers "continue", so no request runs
/// long whatever the number of matches.
const RUN_CHUNKS: usize = 10;

/// `GET /ui/search`: the filters, and a page of the jobs they match; `?q=` jumps to a
/// jid or tag.
pub(super) async fn page(
    State(ui): State<Ui>,
    can: Can,
    RawQuery(query): RawQuery,
) -> UiResult<Response> {
    let query = query.unwrap_or_default();
    let Ok(pairs) = serde_urlencoded::from_str::<Vec<(String, String)>>(&query) else {
        let err = ApiError::BadRequest("malformed query string".to_owned());
        return Ok(search_page(&[], Err(err), can).into_response());
    };
    if let Some((_, q)) = pairs.iter().find(|(key, _)| key == "q") {
        return jump(&ui, q.trim()).await;
    }
    // The form sends every field, the empty ones too: the page's address keeps only
    // those filled in, the parameters `GET /v1/search` takes.
    let given: Vec<(String, String)> = pairs
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .cloned()
        .collect();
    if given.len() != pairs.len() {
        return Ok(Redirect::to(&address(&given, None)).into_response());
    }
    if given.is_empty() {
        return Ok(layout("Search", search_page(&[], Ok(None), can)).into_response());
    }
    let found = match find(&ui, &query).await {
        // Redis away is the dashboard's error page (and its log line), not the form's.
        Err(err) if err.status().is_server_error() => return Err(err.into()),
        found => found,
    };
    let status = found
        .as_ref()
        .err()
        .map_or(StatusCode::OK, ApiError::status);
    let page = layout("Search", search_page(&given, found.map(Some), can));
    Ok((status, page).into_response())
}

/// A page of the search `query` asks for, with the cursor of the next one.
async fn find(ui: &Ui, query: &str) -> Result<Found, ApiError> {
    let plan = SearchPlan::read(Some(query), &ui.app)?;
    let now = ui.app.clock.now();
    let found = ui
        .app
        .qless
        .search(now, &plan.filter, plan.bounds, plan.cursor.as_deref())
        .await?;
    Ok(Found {
        next: plan.seal(found.cursor.as_deref()),
        from_start: plan.cursor.is_none(),
        jobs: found.jobs,
        examined: found.examined,
        done: found.done,
    })
}

/// What the page shows of a search's answer.
struct Found {
    jobs: Vec<Job>,
    /// The (client's) cursor of the next page.
    next: Option<String>,
    /// Whether this page is the first.
    from_start: bool,
    examined: u64,
    done: bool,
}

/// The search box's jump: a jid to its job (or recurring template), anything else to
/// its tag; nothing typed to the search page.
async fn jump(ui: &Ui, term: &str) -> UiResult<Response> {
    if term.is_empty() {
        return Ok(Redirect::to("/ui/search").into_response());
    }
    let term = String::from(term.parse::<Jid>()?);
    let term = term.as_str();
    let now = ui.app.clock.now();
    if ui.app.qless.get(now, term).await?.is_some() {
        return Ok(Redirect::to(&format!("/ui/jobs/{}", seg(term))).into_response());
    }
    if ui.app.qless.recur_get(now, term).await?.is_some() {
        return Ok(Redirect::to(&format!("/ui/recurring/{}", seg(term))).into_response());
    }
    Ok(Redirect::to(&format!("/ui/tags?tag={}", seg(term))).into_response())
}

/// `/ui/search` with `pairs` (and `cursor`) as its query string.
fn address(pairs: &[(String, String)], cursor: Option<&str>) -> String {
    let mut pairs: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(key, _)| key != "cursor")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(cursor) = cursor {
        pairs.push(("cursor", cursor));
    }
    if pairs.is_empty() {
        return "/ui/search".to_owned();
    }
    let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    format!("/ui/search?{query}")
}

/// The filter of `pairs` alone (no limit, no cursor), as the query string the bulk
/// actions' forms carry.
fn filter_query(pairs: &[(String, String)]) -> String {
    let filter: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(key, _)| FILTERS.contains(&key.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    serde_urlencoded::to_string(&filter).unwrap_or_default()
}

/// The first value of `key` among `pairs` (the form shows what the URL says).
fn value<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

/// The search page: the form, then the search's error, or its results and (for an
/// admin) the actions on everything it matches.
fn search_page(
    pairs: &[(String, String)],
    found: Result<Option<Found>, ApiError>,
    can: Can,
) -> Markup {
    let v = |key| value(pairs, key);
    html! {
        h1 { "Search" }
        form #search-form method="get" action="/ui/search" {
            div.filters {
                label { "Queue " input type="text" name="queue" value=(v("queue")); }
                label { "State "
                    select name="state" {
                        option value="" { "any" }
                        @for state in STATES {
                            option value=(state) selected[v("state") == state] { (state) }
                        }
                    }
                }
                label { "Class " input type="text" name="klass" value=(v("klass")); }
                label { "Tag " input type="text" name="tag" value=(v("tag")); }
                label { "Worker " input type="text" name="worker" value=(v("worker")); }
                label { "Failure group " input type="text" name="group" value=(v("group")); }
                label { "Since " input type="number" name="since" step="any" min="0"
                    placeholder="Unix seconds" value=(v("since")); }
                label { "Until " input type="number" name="until" step="any" min="0"
                    placeholder="Unix seconds" value=(v("until")); }
                label.wide { "Data " input type="text" name="data"
                    placeholder=r#"{"user.id": 42}"# value=(v("data")); }
                label.wide { "Text " input type="text" name="text"
                    placeholder="in the data or the failure message" value=(v("text")); }
                label { "Per page " input type="number" name="limit" min="1" max="500"
                    placeholder="25" value=(v("limit")); }
            }
            p.muted { "Give a queue, tag, worker or failure group (or the state failed or \
                complete): the search walks that index, a bounded stretch per page." }
            button.primary type="submit" { "Search" }
        }
        @match found {
            Err(err) => p.error #search-error { (err.problem().detail) },
            Ok(None) => {},
            Ok(Some(found)) => {
                (results(pairs, &found))
                @if can.admin { (bulk_forms(pairs, &found)) }
            }
        }
    }
}

/// A page of results, each job with its data and history folded, and the pager.
fn results(pairs: &[(String, String)], found: &Found) -> Markup {
    html! {
        p.muted #search-summary {
            (found.jobs.len()) " found, " (found.examined) " looked at"
            @if found.done { ", the search is complete." } @else { ", more may match further on." }
        }
        div #results {
            @for job in &found.jobs {
                div.card.result data-jid=(job.jid) {
                    div {
                        a.jid href=(format!("/ui/jobs/{}", seg(&job.jid))) { (name(&job.jid)) } " "
                        span class=(format!("badge {}", job.state.as_str())) { (job.state.as_str()) } " "
                        @if !job.queue.is_empty() {
                            "in " a href=(format!("/ui/queues/{}", seg(&job.queue))) { (name(&job.queue)) } " "
                        }
                        span.muted { "class " } (name(&job.klass))
                        @if !job.tags.is_empty() { " " span.muted { "tags " } (names(&job.tags)) }
                    }
                    @if let Some(f) = &job.failure {
                        p.failure {
                            a href=(format!("/ui/failures/{}", seg(&f.group))) { (name(&f.group)) } ": "
                            span.message { (f.message) }
                        }
                    }
                    details.data { summary { "Data" } pre { (pretty(job.data.get())) } }
                    details.history {
                        summary { "History (" (job.history.len()) ")" }
                        (history(&job.history))
                    }
                }
            }
        }
        div.pager {
            @if !found.from_start { a #first-page href=(address(pairs, None)) { "← first page" } }
            @if let Some(next) = &found.next {
                a #next-page rel="next" href=(address(pairs, Some(next))) { "next page →" }
            }
        }
    }
}

/// The bulk actions' forms: each posts the filter to its confirmation.
fn bulk_forms(pairs: &[(String, String)], found: &Found) -> Markup {
    let filter = filter_query(pairs);
    // The number of matches is known when the whole search fit on its first page.
    let known = (found.from_start && found.done).then_some(found.jobs.len());
    html! {
        div #bulk {
            h2 { "Apply to all " @if let Some(n) = known { (n) " " } "matching" }
            p.muted { "Each asks for confirmation first, with the number of jobs it would change." }
            div.actions {
                @for (action, verb) in ACTIONS {
                    form.inline method="post" action=(format!("/ui/search/{}", action.as_str())) {
                        (csrf_field())
                        input type="hidden" name="filter" value=(filter);
                        (argument_field(action, None))
                        button type="submit" { (verb) " all matching…" }
                    }
                }
            }
        }
    }
}

/// The input of an action's own argument (`queue`, `priority`, `tags`), filled with
/// `given` (hidden once given, on the confirmation and continue forms).
fn argument_field(action: SearchAction, given: Option<&str>) -> Markup {
    let (field, kind, hint) = match action {
        SearchAction::Move => ("queue", "text", "queue"),
        SearchAction::Priority => ("priority", "number", "priority"),
        SearchAction::Tag | SearchAction::Untag => ("tags", "text", "tags, comma-separated"),
        _ => return html! {},
    };
    html! {
        @if let Some(given) = given {
            input type="hidden" name=(field) value=(given);
        } @else {
            input type=(kind) name=(field) step=[(kind == "number").then_some("any")]
                placeholder=(hint) aria-label=(hint) required;
        }
    }
}

/// The action's request as the API reads it, from the form's `filter` (a query
/// string), its argument, and `cursor`.
fn request(
    action: SearchAction,
    form: &Form,
    ui: &Ui,
    dry_run: bool,
) -> Result<(SearchActionRequest, ActionPlan), ApiError> {
    let filter = SearchPlan::read(Some(form.get("filter").unwrap_or("")), &ui.app)?.filter;
    let given = |field: &str| form.get(field).filter(|v| !v.is_empty());
    let queue = given("queue").map(str::parse::<QueueName>).transpose()?;
    let priority = given("priority")
        .map(|p| {
            p.parse::<f64>()
                .map_err(|_| ApiError::BadRequest("priority must be a number".to_owned()))
        })
        .transpose()?;
    let tags = given("tags")
        .map(|tags| {
            tags.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::parse::<Tag>)
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let body = SearchActionRequest {
        filter,
        queue,
        priority,
        tags,
        dry_run,
        limit: Some(CHUNK),
        cursor: given("cursor").map(str::to_owned),
    };
    let plan = ActionPlan::read(action, &body, &ui.app)?;
    Ok((body, plan))
}

/// Counts over the chunks of one request.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    matched: u64,
    changed: u64,
    skipped: u64,
    examined: u64,
}

impl Totals {
    fn add(&mut self, acted: &Acted) {
        self.matched += acted.matched;
        self.changed += acted.changed;
        self.skipped += acted.skipped;
        self.examined += acted.examined;
    }
}

/// Runs `body`'s action (or its dry run) chunk by chunk from its cursor, at most
/// `chunks` chunks: the counts, and the script's cursor when the walk is not done.
async fn walk(
    ui: &Ui,
    body: &SearchActionRequest,
    plan: &ActionPlan,
    chunks: usize,
) -> Result<(Totals, Option<String>), UiError> {
    let mut totals = Totals::default();
    let mut cursor = plan.cursor.clone();
    for _ in 0..chunks {
        let now = ui.app.clock.now();
        let acted = ui
            .app
            .qless
            .search_act(
                now,
                &plan.bulk,
                &body.filter,
                plan.bounds,
                body.dry_run,
                cursor.as_deref(),
            )
            .await?;
        totals.add(&acted);
        cursor = acted.cursor;
        if acted.done || cursor.is_none() {
            return Ok((totals, None));
        }
    }
    Ok((totals, cursor))
}

/// `POST /ui/search/{action}`: with `step=run`, acts on the jobs matching `filter`
/// (from `cursor`, a bounded number of chunks) and shows the counts; otherwise shows
/// the dry run's count and asks for confirmation.
pub(super) async fn act(
    State(ui): State<Ui>,
    Path(action): Path<String>,
    token: Option<Extension<ActingToken>>,
    body: Bytes,
) -> UiResult<Response> {
    let form = Form::parse(&body)?;
    let Some((action, verb)) = ACTIONS.into_iter().find(|(a, _)| a.as_str() == action) else {
        return Err(refused(StatusCode::NOT_FOUND, "no such action"));
    };
    let run = form.get("step") == Some("run");
    let (body, plan) = request(action, &form, &ui, !run)?;
    let (totals, cursor) = walk(
        &ui,
        &body,
        &plan,
        if run { RUN_CHUNKS } else { COUNT_CHUNKS },
    )
    .await?;
    let filter = form.get("filter").unwrap_or("");
    let argument = ["queue", "priority", "tags"]
        .into_iter()
        .find_map(|field| form.get(field).filter(|v| !v.is_empty()));
    // The counts so far (of the earlier requests of a continued run) and this one's.
    let before = |field: &str| form.get(field).and_then(|v| v.parse::<u64>().ok());
    let carried = Totals {
        matched: before("matched").unwrap_or(0) + totals.matched,
        changed: before("changed").unwrap_or(0) + totals.changed,
        skipped: before("skipped").unwrap_or(0) + totals.skipped,
        examined: totals.examined,
    };
    let answer = SearchActionResponse {
        matched: totals.matched,
        changed: totals.changed,
        skipped: totals.skipped,
        examined: totals.examined,
        cursor: plan.seal(cursor.as_deref()),
        done: cursor.is_none(),
    };
    let token = token.as_ref().map(|Extension(ActingToken(name))| &**name);
    log_action(token, &plan.bulk, &body, &answer);
    let back = if filter.is_empty() {
        "/ui/search".to_owned()
    } else {
        format!("/ui/search?{filter}")
    };
    let form_to = format!("/ui/search/{}", action.as_str());
    let title = format!("{verb} all matching");
    let page = if run {
        html! {
            h1 { (title) }
            p { "Filter: " code #bulk-filter { (filter) } }
            dl.facts #bulk-result {
                dt { "Matched" } dd #matched { (carried.matched) }
                dt { "Changed" } dd #changed { (carried.changed) }
                dt { "Skipped" } dd #skipped { (carried.skipped) }
            }
            @if let Some(next) = &answer.cursor {
                p #bulk-more { "Not done yet: this request stopped after " (RUN_CHUNKS)
                    " chunks of up to " (CHUNK) " jobs." }
                form method="post" action=(form_to) {
                    (csrf_field())
                    input type="hidden" name="filter" value=(filter);
                    (argument_field(action, argument))
                    input type="hidden" name="step" value="run";
                    input type="hidden" name="cursor" value=(next);
                    input type="hidden" name="matched" value=(carried.matched);
                    input type="hidden" name="changed" value=(carried.changed);
                    input type="hidden" name="skipped" value=(carried.skipped);
                    button.primary type="submit" { "Continue" }
                }
            } @else {
                p #bulk-done { "Done: every matching job was looked at." }
            }
            p { a href=(back) { "Back to the search" } }
        }
    } else {
        let at_least = cursor.is_some();
        html! {
            h1 { (title) "?" }
            p { "Filter: " code #bulk-filter { (filter) } }
            @if let Some(argument) = argument { p { "With: " code #bulk-argument { (argument) } } }
            p #dry-run {
                @if at_least { "At least " } span #dry-matched { (totals.matched) }
                " jobs match: " span #dry-changed { (totals.changed) } " would change, "
                (totals.skipped) " would be left alone"
                @if at_least { " (counted over the first " (COUNT_CHUNKS) " chunks; the rest \
                    is counted as the action runs)" }
                "."
            }
            @if totals.matched > 0 || at_least {
                form method="post" action=(form_to) {
                    (csrf_field())
                    input type="hidden" name="filter" value=(filter);
                    (argument_field(action, argument))
                    input type="hidden" name="step" value="run";
                    button.primary #confirm type="submit" {
                        (verb) " all " @if at_least { "(at least) " } (totals.matched) " matching"
                    }
                }
            }
            p { a href=(back) { "Back to the search" } }
        }
    };
    Ok(layout(&title, page).into_response())
}
