//! The dashboard's pages (GET). Each reads what it shows with the same `core` calls
//! as the API's handlers, one page of rows at a time.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::charts;
use super::{
    Can, PAGE, Path, Ui, UiResult, action_button, csrf_field, layout, name, names, pager, refused,
    seg, trusted, when,
};
use crate::core::{Listing, Minute, RATE_MINUTES};
use crate::model::{
    FailureSummary, GroupName, Jid, Job, QueueCounts, QueueName, Tag, TimingStats, WorkerName,
};

/// `?offset=` of a paged listing.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Paging {
    #[serde(default)]
    offset: u32,
}

/// The queue page's `?state=&offset=`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct QueuePaging {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    offset: u32,
}

/// `?tag=&offset=` of the tags page.
#[derive(Debug, Default, Deserialize)]
pub(super) struct TagQuery {
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    offset: u32,
}

/// `GET /ui`: queues, throughput, failure groups and workers, refreshed live.
pub(super) async fn overview(State(ui): State<Ui>, Query(p): Query<Paging>) -> UiResult {
    let body = overview_body(&ui, p.offset).await?;
    Ok(layout(
        "Overview",
        html! {
            h1 { "Overview" }
            (body)
            // The live stream says when something changed; htmx then fetches the
            // overview's body again (and every 30 s in case the stream is down).
            script {
                (maud::PreEscaped("document.addEventListener('DOMContentLoaded',function(){\
                var s=new EventSource('/ui/live');\
                s.addEventListener('changed',function(){htmx.trigger(document.body,'qless-changed')});});"))
            }
        },
    ))
}

/// `GET /ui/partials/overview`: the overview's body alone, for live refreshes.
pub(super) async fn overview_partial(State(ui): State<Ui>, Query(p): Query<Paging>) -> UiResult {
    overview_body(&ui, p.offset).await
}

async fn overview_body(ui: &Ui, offset: u32) -> UiResult {
    let now = ui.app.clock.now();
    let qless = &ui.app.qless;
    let (queues, failed, workers, pushed) = tokio::try_join!(
        qless.queues(now),
        qless.failed(now),
        qless.workers(now),
        qless.push_list(now)
    )?;
    let start = (offset as usize).min(queues.len());
    let shown = &queues[start..(start + PAGE as usize).min(queues.len())];
    let mut groups: Vec<(&String, &i64)> = failed.iter().collect();
    groups.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let failed_total: i64 = failed.values().sum();
    let totals = queues.iter().fold((0, 0, 0), |t, q| {
        (t.0 + q.waiting, t.1 + q.running, t.2 + q.stalled)
    });
    let series = ui.throughput.series();
    let (done, bad) = series.iter().fold((0, 0), |t, s| (t.0 + s.0, t.1 + s.1));
    Ok(html! {
        div #overview hx-get=(format!("/ui/partials/overview?offset={offset}"))
            hx-trigger="qless-changed from:body, every 30s" hx-swap="outerHTML" {
            div.cards {
                div.card { div.big #total-queues { (queues.len()) } div.muted { "queues" } }
                div.card { div.big { (totals.0) } div.muted { "waiting" } }
                div.card { div.big { (totals.1) } div.muted { "running" } }
                div.card { div.big { (totals.2) } div.muted { "stalled" } }
                div.card { div.big { a href="/ui/failures" { (failed_total) } } div.muted { "failed" } }
                div.card { div.big { a href="/ui/workers" { (workers.len()) } } div.muted { "workers" } }
                div.card {
                    div.muted { "Last 30 min: " (done) " completed, " (bad) " failed (per minute)" }
                    (trusted(charts::stacked(&series, 360, 60)))
                }
            }
            h2 { "Queues" }
            (queue_table(shown, &pushed))
            (pager("/ui", offset, shown.len(), Some(queues.len() as i64)))
            h2 { "Failure groups" }
            @if groups.is_empty() { p.muted { "No failures." } } @else {
                table #failure-groups {
                    tr { th { "Group" } th.n { "Jobs" } }
                    @for (group, count) in groups.iter().take(PAGE as usize) {
                        tr { td { a href=(format!("/ui/failures/{}", seg(group))) { (name(group)) } } td.n { (count) } }
                    }
                }
                @if groups.len() > PAGE as usize { p { a href="/ui/failures" { "All " (groups.len()) " groups" } } }
            }
            h2 { "Workers" }
            @if workers.is_empty() { p.muted { "No workers." } } @else {
                table {
                    tr { th { "Worker" } th.n { "Running" } th.n { "Stalled" } }
                    @for w in workers.iter().take(PAGE as usize) {
                        tr {
                            td { a href=(format!("/ui/workers/{}", seg(&w.name))) { (name(&w.name)) } }
                            td.n { (w.running) } td.n { (w.stalled) }
                        }
                    }
                }
                @if workers.len() > PAGE as usize { p { a href="/ui/workers" { "All " (workers.len()) " workers" } } }
            }
        }
    })
}

/// The queues' counts; `pushed` names the queues delivered to an endpoint, marked
/// with a badge linking to their push page.
fn queue_table(queues: &[QueueCounts], pushed: &[String]) -> Markup {
    html! {
        table #queues {
            tr {
                th { "Queue" } th.n { "Waiting" } th.n { "Running" } th.n { "Scheduled" }
                th.n { "Stalled" } th.n { "Depends" } th.n { "Recurring" } th.n { "Throttled" }
                th { "State" }
            }
            @for q in queues {
                tr {
                    td { a.queue href=(format!("/ui/queues/{}", seg(&q.name))) { (name(&q.name)) } }
                    td.n { (q.waiting) } td.n { (q.running) } td.n { (q.scheduled) }
                    td.n { (q.stalled) } td.n { (q.depends) } td.n { (q.recurring) }
                    td.n.throttled { (q.throttled) }
                    td {
                        @if q.paused { span.badge.paused { "paused" } " " }
                        @if pushed.contains(&q.name) {
                            a.badge.push href=(format!("/ui/queues/{}/push", seg(&q.name))) { "push" }
                        }
                    }
                }
            }
        }
    }
}

const STATES: [&str; 6] = [
    "waiting",
    "running",
    "scheduled",
    "stalled",
    "depends",
    "recurring",
];

/// `GET /ui/queues/{queue}`: counts, jobs by state, pause, statistics.
pub(super) async fn queue(
    State(ui): State<Ui>,
    can: Can,
    Path(queue): Path<QueueName>,
    Query(p): Query<QueuePaging>,
) -> UiResult {
    let queue = String::from(queue);
    let state = p.state.as_deref().unwrap_or("waiting");
    let listing = match state {
        "waiting" => None,
        "running" => Some(Listing::Running),
        "scheduled" => Some(Listing::Scheduled),
        "stalled" => Some(Listing::Stalled),
        "depends" => Some(Listing::Depends),
        "recurring" => Some(Listing::Recurring),
        _ => {
            return Err(refused(
                axum::http::StatusCode::BAD_REQUEST,
                "unknown state",
            ));
        }
    };
    let now = ui.app.clock.now();
    let qless = &ui.app.qless;
    let jids = async {
        match listing {
            None => qless.jobs_waiting(now, &queue, p.offset, PAGE).await,
            Some(l) => qless.jobs(now, l, &queue, p.offset, PAGE).await,
        }
    };
    let (counts, jids, stats, pushed, minutes, partitions) = tokio::try_join!(
        qless.queue(now, &queue),
        jids,
        qless.stats(now, &queue, now),
        qless.push_list(now),
        qless.rates(now, &queue, RATE_MINUTES),
        qless.partitions_get(now, &queue, 0, PAGE)
    )?;
    let pushed = pushed.contains(&queue);
    let total = match state {
        "waiting" => counts.waiting,
        "running" => counts.running,
        "scheduled" => counts.scheduled,
        "stalled" => counts.stalled,
        "depends" => counts.depends,
        _ => counts.recurring,
    };
    let rows = if listing == Some(Listing::Recurring) {
        let mut templates = Vec::with_capacity(jids.len());
        for jid in &jids {
            if let Some(t) = qless.recur_get(now, jid).await? {
                templates.push(t);
            }
        }
        html! {
            table #recurring {
                tr { th { "Template" } th { "Class" } th.n { "Schedule" } th.n { "Priority" } th { "Tags" } th.n { "Spawned" } }
                @for t in &templates {
                    tr {
                        td { a href=(format!("/ui/recurring/{}", seg(&t.jid))) { (name(&t.jid)) } }
                        td { (name(&t.klass)) }
                        td.n { @if let Some(cron) = &t.cron { code { (cron) } " " (t.timezone.as_deref().unwrap_or("UTC")) } @else { "every " (t.interval) " s" } }
                        td.n { (t.priority) }
                        td { (names(&t.tags)) } td.n { (t.count) }
                    }
                }
            }
        }
    } else {
        job_table(&qless.multiget(now, &jids).await?)
    };
    let base = format!("/ui/queues/{}?state={state}", seg(&queue));
    let action = format!("/ui/queues/{}", seg(&queue));
    Ok(layout(
        &queue,
        html! {
            h1 { "Queue " bdi #queue-name { (queue) } " "
                @if counts.paused { span.badge.paused #paused { "paused" } } }
            @if pushed {
                p #pushed { span.badge.push { "push" } " Its jobs are delivered to an endpoint: "
                    a href=(format!("/ui/queues/{}/push", seg(&queue))) { "push delivery" } }
            }
            @if can.admin { div.actions {
                @if counts.paused {
                    (action_button(&format!("{action}/unpause"), "Unpause", "primary", &[]))
                } @else {
                    (action_button(&format!("{action}/pause"), "Pause", "danger", &[]))
                }
            } }
            div.tabs {
                @for s in STATES {
                    @let n = match s { "waiting" => counts.waiting, "running" => counts.running,
                        "scheduled" => counts.scheduled, "stalled" => counts.stalled,
                        "depends" => counts.depends, _ => counts.recurring };
                    a class=(if s == state { "on" } else { "" })
                        href=(format!("/ui/queues/{}?state={s}", seg(&queue))) { (s) " (" (n) ")" }
                }
            }
            p.muted #throttled { "Throttled: " (counts.throttled)
                " (waiting for room in a full "
                a href="/ui/throttles" { "throttle" } ")" }
            (rows)
            (pager(&base, p.offset, jids.len(), Some(total)))
            (queue_partitions(&queue, &partitions))
            (last_hour(&minutes))
            h2 { "Today" }
            p.muted { (stats.failures) " failures, " (stats.failed) " still failed, "
                (stats.retries) " lock expiries" }
            div.cards {
                div.card { h3 { "Wait time" } (timing(&stats.wait)) }
                div.card { h3 { "Run time" } (timing(&stats.run)) }
            }
        },
    ))
}

/// A fair queue's partitions with jobs waiting (the first page, next served first) and
/// their limits; nothing for a queue without partitions.
fn queue_partitions(queue: &str, partitions: &crate::model::QueuePartitions) -> Markup {
    let limited = partitions.concurrency.is_some() || partitions.rate.is_some();
    if partitions.partitions.is_empty() && !limited {
        return html! {};
    }
    html! {
        h2 { "Partitions" }
        p.muted #partition-limits {
            "Per partition: "
            @match partitions.concurrency { Some(k) => { "at most " (k) " running" }, None => { "no concurrency limit" } }
            ", "
            @match &partitions.rate { Some(r) => { "at most " (r.jobs) " started per " (r.seconds) " s" }, None => { "no rate limit" } }
            " (" a href=(format!("/v1/queues/{}/partitions", seg(queue))) { "API" } ")."
        }
        table #partitions {
            tr { th { "Partition" } th.n { "Waiting" } th.n { "Running" } th { "Limited until" } }
            @for part in &partitions.partitions {
                tr {
                    td { @if part.name.is_empty() { span.muted { "(no partition)" } } @else { (name(&part.name)) } }
                    td.n { (part.waiting) }
                    td.n { @match part.running { Some(n) => { (n) }, None => { "—" } } }
                    td { @match part.limited { Some(at) => { (when(at)) }, None => { "—" } } }
                }
            }
        }
        @if partitions.cursor.is_some() {
            p.muted { "The first " (partitions.partitions.len()) " partitions, next served first; "
                "the API lists them all." }
        }
    }
}

/// A queue's last hour, minute by minute: jobs put, completed and failed, and the
/// median and 95th percentile wait of the jobs popped.
fn last_hour(minutes: &[Minute]) -> Markup {
    let jobs: Vec<(u64, u64, u64)> = minutes
        .iter()
        .map(|m| (m.put, m.completed, m.failed))
        .collect();
    let waits: Vec<Option<(u64, u64, u64)>> = minutes
        .iter()
        .map(|m| Some((m.wait_quantile(0.5)?, m.wait_quantile(0.95)?, m.popped())))
        .collect();
    let total = jobs
        .iter()
        .fold((0, 0, 0), |t, j| (t.0 + j.0, t.1 + j.1, t.2 + j.2));
    html! {
        h2 { "Last hour" }
        div.cards #last-hour {
            div.card {
                h3 { "Jobs per minute" }
                p.muted.legend #hour-totals {
                    span.put {} (total.0) " put" span.ok {} (total.1) " completed"
                    span.bad {} (total.2) " failed"
                }
                (trusted(charts::jobs_per_minute(&jobs, 480, 90)))
            }
            div.card {
                h3 { "Wait per minute" }
                // (Each value is the start of its histogram bucket: `5s` is 5 to 6 s.)
                p.muted.legend title="each the start of its histogram bucket: 5s is 5 to 6 s" {
                    span.p50 {} "median" span.p95 {} "95th percentile" }
                (trusted(charts::waits_per_minute(&waits, 480, 90)))
            }
        }
    }
}

fn timing(stats: &TimingStats) -> Markup {
    // The histogram's used part: up to the last non-empty bucket (at least a minute).
    let last = stats
        .histogram
        .iter()
        .rposition(|&n| n > 0)
        .map_or(59, |i| i.max(59));
    let series: Vec<(String, u64)> = stats.histogram
        [..=last.min(stats.histogram.len().saturating_sub(1))]
        .iter()
        .enumerate()
        .map(|(i, &n)| (charts::bucket_label(i), n.max(0) as u64))
        .collect();
    html! {
        p.muted { (stats.count) " jobs, mean " (format!("{:.2}", stats.mean)) " s, std "
            (format!("{:.2}", stats.std)) " s" }
        @if !series.is_empty() { (trusted(charts::bars(&series, 440, 80, "histogram"))) }
        p.muted { "0s … " (series.last().map_or("", |s| s.0.as_str())) }
    }
}

/// A table of jobs with links.
fn job_table(jobs: &[Job]) -> Markup {
    html! {
        table.jobs {
            tr { th { "Job" } th { "Class" } th { "State" } th { "Queue" } th { "Worker" } th.n { "Priority" } th { "Tags" } }
            @for job in jobs {
                tr {
                    td { a.jid href=(format!("/ui/jobs/{}", seg(&job.jid))) { (name(&job.jid)) } }
                    td { (name(&job.klass)) }
                    td { span class=(format!("badge {}", job.state.as_str())) { (job.state.as_str()) } }
                    td { @if !job.queue.is_empty() { a href=(format!("/ui/queues/{}", seg(&job.queue))) { (name(&job.queue)) } } }
                    td { (name(&job.worker)) }
                    td.n { (job.priority) }
                    td { (names(&job.tags)) }
                }
            }
        }
    }
}

/// `GET /ui/jobs/{jid}`: everything about one job, and what can be done to it.
pub(super) async fn job(
    State(ui): State<Ui>,
    can: Can,
    Path(jid): Path<Jid>,
) -> UiResult<Response> {
    let jid = String::from(jid);
    let now = ui.app.clock.now();
    let Some(job) = ui.app.qless.get(now, &jid).await? else {
        if ui.app.qless.recur_get(now, &jid).await?.is_some() {
            return Ok(Redirect::to(&format!("/ui/recurring/{}", seg(&jid))).into_response());
        }
        return Err(refused(axum::http::StatusCode::NOT_FOUND, "no such job"));
    };
    let base = format!("/ui/jobs/{}", seg(&jid));
    let data = serde_json::from_str::<serde_json::Value>(job.data.get())
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| job.data.get().to_owned());
    Ok(layout(
        &jid,
        html! {
            h1 { "Job " bdi #jid { (job.jid) } }
            dl.facts {
                dt { "State" } dd { span #state class=(format!("badge {}", job.state.as_str())) { (job.state.as_str()) } }
                dt { "Class" } dd { (name(&job.klass)) }
                dt { "Queue" } dd #queue { @if job.queue.is_empty() { "—" } @else { a href=(format!("/ui/queues/{}", seg(&job.queue))) { (name(&job.queue)) } } }
                dt { "Worker" } dd { @if job.worker.is_empty() { "—" } @else { a href=(format!("/ui/workers/{}", seg(&job.worker))) { (name(&job.worker)) } } }
                dt { "Priority" } dd #priority { (job.priority) }
                dt { "Retries left" } dd { (job.remaining) " of " (job.retries) }
                dt { "Lock expires" } dd { (when(job.expires)) }
                dt { "Tracked" } dd #tracked { (if job.tracked { "yes" } else { "no" }) }
                dt { "Tags" } dd #tags {
                    @for tag in &job.tags {
                        span.badge { a href=(format!("/ui/tags?tag={}", seg(tag))) { (name(tag)) } }
                        @if can.admin { (action_button(&format!("{base}/untag"), "×", "", &[("tag", tag)])) }
                    }
                }
                @if let Some(throttles) = &job.throttles {
                    dt { "Throttles" } dd #throttles {
                        @for t in throttles { span.badge { (name(t)) } " " }
                        @if let Some(t) = &job.throttled { span.badge.paused { "waiting on " (name(t)) } }
                    }
                }
                @if let Some(backoff) = &job.backoff {
                    dt { "Backoff" } dd #backoff { code { (backoff) } }
                }
                @if let Some(partition) = &job.partition {
                    dt { "Partition" } dd #partition { (name(partition)) }
                }
                @if let Some(start_by) = job.start_by {
                    dt { "Start by" } dd #start_by { (when(start_by)) " (else it fails as expired)" }
                }
                @if let Some(max_run) = job.max_run {
                    dt { "Max run" } dd #max_run { (max_run) " s from its pop" }
                }
                @if let Some(parent) = &job.spawned_from_jid {
                    dt { "Spawned from" } dd { a href=(format!("/ui/recurring/{}", seg(parent))) { (name(parent)) } }
                }
                dt { "Depends on" } dd {
                    @for d in &job.dependencies { a href=(format!("/ui/jobs/{}", seg(d))) { (name(d)) } " " }
                    @if job.dependencies.is_empty() { "—" }
                }
                dt { "Dependents" } dd {
                    @for d in &job.dependents { a href=(format!("/ui/jobs/{}", seg(d))) { (name(d)) } " " }
                    @if job.dependents.is_empty() { "—" }
                }
                @if let Some(bid) = &job.batch {
                    dt { "Batch" } dd #batch { a href=(format!("/ui/batches/{}", seg(bid))) { (name(bid)) } }
                }
                @if let Some(wid) = &job.workflow {
                    dt { "Workflow" } dd #workflow { a href=(format!("/ui/workflows/{}", seg(wid))) { (name(wid)) } }
                }
                @if let Some(parents) = &job.parents {
                    dt { "Parents" } dd #parents { (workflow_parents(parents)) }
                }
            }
            @if let Some(f) = &job.failure {
                h2 { "Failure" }
                dl.facts #failure {
                    dt { "Group" } dd { a href=(format!("/ui/failures/{}", seg(&f.group))) { (name(&f.group)) } }
                    dt { "When" } dd { (when(f.when)) }
                    dt { "Worker" } dd { @if f.worker.is_empty() { "—" } @else { (name(&f.worker)) } }
                    dt { "Message" } dd { pre { (f.message) } }
                }
            }
            @if can.admin {
            h2 { "Actions" }
            div.actions {
                @if !job.queue.is_empty() {
                    (action_button(&format!("{base}/retry"), "Retry", "primary", &[]))
                }
                @if job.state != "complete" {
                    (action_button(&format!("{base}/cancel"), "Cancel", "danger", &[]))
                }
                @if job.tracked {
                    (action_button(&format!("{base}/untrack"), "Untrack", "", &[]))
                } @else {
                    (action_button(&format!("{base}/track"), "Track", "", &[]))
                }
            }
            div.actions {
                form.inline method="post" action=(format!("{base}/move")) {
                    (csrf_field())
                    input type="text" name="queue" placeholder="queue" required aria-label="Move to queue";
                    button type="submit" { "Move" }
                }
                form.inline method="post" action=(format!("{base}/priority")) {
                    (csrf_field())
                    input type="number" name="priority" step="any" value=(job.priority) aria-label="Priority";
                    button type="submit" { "Set priority" }
                }
                form.inline method="post" action=(format!("{base}/tag")) {
                    (csrf_field())
                    input type="text" name="tag" placeholder="tag" required aria-label="Add tag";
                    button type="submit" { "Add tag" }
                }
            }
            }
            h2 { "Data" }
            pre #data { (data) }
            @if let Some(progress) = &job.progress {
                h2 { "Progress" }
                pre #progress { (pretty(progress.get())) }
            }
            @if let Some(result) = &job.result {
                h2 { "Result" }
                pre #result { (pretty(result.get())) }
            }
            h2 { "History" }
            (history(&job.history))
        },
    )
    .into_response())
}

/// A job's history, oldest first: what happened, when, and its details.
pub(super) fn history(entries: &[crate::model::HistoryEntry]) -> Markup {
    html! {
        ol.timeline {
            @for h in entries {
                li {
                    strong { (h.what) } " "
                    span.muted { (when(h.when)) }
                    @for (k, v) in &h.extra {
                        " " span.muted { (k) "=" } (name(&v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                    }
                }
            }
        }
    }
}

/// A workflow task's parents as its job carries them (`{task: {jid, state, result}}`):
/// each task's name linked to its job, with the state it ended in.
fn workflow_parents(parents: &crate::model::wire::JsonData) -> Markup {
    let value = parents.to_value();
    let Some(map) = value.as_object().filter(|m| !m.is_empty()) else {
        return html! { "—" };
    };
    html! {
        @for (task, parent) in map {
            @let jid = parent.get("jid").and_then(|v| v.as_str()).unwrap_or_default();
            @let state = parent.get("state").and_then(|v| v.as_str()).unwrap_or_default();
            span.parent {
                a href=(format!("/ui/jobs/{}", seg(jid))) { (name(task)) }
                " " span class=(format!("badge {state}")) { (state) }
            }
            " "
        }
    }
}

/// Jobs of each group the failures page looks at for its most common message.
const LISTING_SAMPLE: u32 = 20;

/// Jobs a failure group's page looks at for its most common message.
const GROUP_SAMPLE: u32 = 100;

/// `GET /ui/failures`: failure groups, largest first, a page at a time, each with
/// when its jobs failed first and last and its most common message.
pub(super) async fn failures(State(ui): State<Ui>, Query(p): Query<Paging>) -> UiResult {
    let now = ui.app.clock.now();
    let failed = ui.app.qless.failed(now).await?;
    let mut groups: Vec<(&String, &i64)> = failed.iter().collect();
    groups.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let start = (p.offset as usize).min(groups.len());
    let shown: Vec<String> = groups[start..(start + PAGE as usize).min(groups.len())]
        .iter()
        .map(|(group, _)| (*group).clone())
        .collect();
    let summaries = if shown.is_empty() {
        Vec::new()
    } else {
        ui.app
            .qless
            .failed_summary(now, &shown, LISTING_SAMPLE)
            .await?
    };
    Ok(layout(
        "Failures",
        html! {
            h1 { "Failures" }
            @if groups.is_empty() { p.muted #no-failures { "No failures." } } @else {
                table #failure-groups {
                    tr { th { "Group" } th.n { "Jobs" } th { "First failure" } th { "Last failure" }
                        th { "Most common message" } }
                    @for s in &summaries {
                        tr {
                            td { a href=(format!("/ui/failures/{}", seg(&s.group))) { (name(&s.group)) } }
                            td.n { (s.total) }
                            td.first { (when(s.first.unwrap_or(0.0))) }
                            td.last { (when(s.last.unwrap_or(0.0))) }
                            td.message { (common_message(s, 120)) }
                        }
                    }
                }
                (pager("/ui/failures", p.offset, shown.len(), Some(groups.len() as i64)))
            }
        },
    ))
}

/// A group's most common message (its first `chars` characters) and how many of the
/// jobs looked at carry it.
fn common_message(summary: &FailureSummary, chars: usize) -> Markup {
    html! {
        @if let Some(message) = &summary.message {
            @let shown: String = message.chars().take(chars).collect();
            (shown) @if shown.len() < message.len() { "…" }
            " " span.muted { "(" (summary.count) " of the latest " (summary.sampled) ")" }
        } @else { "—" }
    }
}

/// `GET /ui/failures/{group}`: a page of one group's jobs, with unfail and cancel.
pub(super) async fn failure_group(
    State(ui): State<Ui>,
    can: Can,
    Path(group): Path<GroupName>,
    Query(p): Query<Paging>,
) -> UiResult {
    let group = String::from(group);
    let now = ui.app.clock.now();
    let groups = std::slice::from_ref(&group);
    let (page, summary) = tokio::try_join!(
        ui.app.qless.failed_group(now, &group, p.offset, PAGE),
        ui.app.qless.failed_summary(now, groups, GROUP_SAMPLE)
    )?;
    let jobs = ui.app.qless.multiget(now, &page.jids).await?;
    let base = format!("/ui/failures/{}", seg(&group));
    let page_fields: Vec<(&str, &str)> = std::iter::once(("scope", "jobs"))
        .chain(jobs.iter().map(|j| ("jid", j.jid.as_str())))
        .collect();
    Ok(layout(
        &group,
        html! {
            h1 { "Failure group " (name(&group)) }
            p { span #group-total { (page.total) } " jobs" }
            @if let Some(s) = summary.first().filter(|s| s.total > 0) {
                dl.facts #group-summary {
                    dt { "First failure" } dd #first-failure { (when(s.first.unwrap_or(0.0))) }
                    dt { "Last failure" } dd #last-failure { (when(s.last.unwrap_or(0.0))) }
                    dt { "Most common message" } dd #common-message { (common_message(s, 1000)) }
                }
            }
            div.actions {
                @if !jobs.is_empty() && can.admin {
                    (action_button(&format!("{base}/unfail"), "Unfail this page", "", &page_fields))
                    (action_button(&format!("{base}/cancel"), "Cancel this page", "danger", &page_fields))
                    (action_button(&format!("{base}/unfail"), "Unfail all", "primary", &[("scope", "all")]))
                    (action_button(&format!("{base}/cancel"), "Cancel all", "danger", &[("scope", "all")]))
                }
            }
            table.jobs {
                tr { th { "Job" } th { "Class" } th { "Queue" } th { "Worker" } th { "When" } th { "Message" } th { "" } }
                @for job in &jobs {
                    tr {
                        td { a.jid href=(format!("/ui/jobs/{}", seg(&job.jid))) { (name(&job.jid)) } }
                        td { (name(&job.klass)) }
                        td { (name(&job.queue)) }
                        @if let Some(f) = &job.failure {
                            td { (name(&f.worker)) } td { (when(f.when)) }
                            td { (f.message.chars().take(200).collect::<String>()) }
                        } @else { td {} td {} td {} }
                        td { @if can.admin {
                            (action_button(&format!("{base}/unfail"), "Unfail", "", &[("scope", "jobs"), ("jid", &job.jid)]))
                            (action_button(&format!("{base}/cancel"), "Cancel", "danger", &[("scope", "jobs"), ("jid", &job.jid)]))
                        } }
                    }
                }
            }
            (pager(&base, p.offset, jobs.len(), Some(page.total)))
        },
    ))
}

/// `GET /ui/workers`.
pub(super) async fn workers(State(ui): State<Ui>, Query(p): Query<Paging>) -> UiResult {
    let workers = ui.app.qless.workers(ui.app.clock.now()).await?;
    let start = (p.offset as usize).min(workers.len());
    let shown = &workers[start..(start + PAGE as usize).min(workers.len())];
    Ok(layout(
        "Workers",
        html! {
            h1 { "Workers" }
            table {
                tr { th { "Worker" } th.n { "Running" } th.n { "Stalled" } }
                @for w in shown {
                    tr {
                        td { a href=(format!("/ui/workers/{}", seg(&w.name))) { (name(&w.name)) } }
                        td.n { (w.running) } td.n { (w.stalled) }
                    }
                }
            }
            (pager("/ui/workers", p.offset, shown.len(), Some(workers.len() as i64)))
        },
    ))
}

/// `GET /ui/workers/{worker}`: the jobs a worker holds (the first pages' worth).
pub(super) async fn worker(State(ui): State<Ui>, Path(worker): Path<WorkerName>) -> UiResult {
    let worker = String::from(worker);
    let now = ui.app.clock.now();
    let held = ui.app.qless.worker(now, &worker).await?;
    let running: Vec<String> = held.jids.iter().take(PAGE as usize).cloned().collect();
    let stalled: Vec<String> = held.stalled.iter().take(PAGE as usize).cloned().collect();
    let (running_jobs, stalled_jobs) = tokio::try_join!(
        ui.app.qless.multiget(now, &running),
        ui.app.qless.multiget(now, &stalled)
    )?;
    Ok(layout(
        &worker,
        html! {
            h1 { "Worker " (name(&worker)) }
            h2 { "Running (" (held.jids.len()) ")" }
            (job_table(&running_jobs))
            h2 { "Stalled (" (held.stalled.len()) ")" }
            (job_table(&stalled_jobs))
        },
    ))
}

/// `GET /ui/tags`: the most used tags, or the jobs with `?tag=`.
pub(super) async fn tags(State(ui): State<Ui>, Query(q): Query<TagQuery>) -> UiResult {
    let now = ui.app.clock.now();
    match q.tag.as_deref().filter(|t| !t.is_empty()) {
        Some(tag) => {
            let tag = String::from(tag.parse::<Tag>()?);
            let tag = tag.as_str();
            let page = ui.app.qless.tag_get(now, tag, q.offset, PAGE).await?;
            let jobs = ui.app.qless.multiget(now, &page.jids).await?;
            let base = format!("/ui/tags?tag={}", seg(tag));
            Ok(layout(
                tag,
                html! {
                    h1 { "Tag " (name(tag)) }
                    (job_table(&jobs))
                    (pager(&base, q.offset, jobs.len(), Some(page.total)))
                },
            ))
        }
        None => {
            let top = ui.app.qless.tag_top(now, q.offset, PAGE).await?;
            Ok(layout(
                "Tags",
                html! {
                    h1 { "Tags" }
                    form method="get" action="/ui/tags" {
                        input type="text" name="tag" placeholder="tag" aria-label="Tag";
                        button type="submit" { "Show jobs" }
                    }
                    ul { @for t in &top { li { a href=(format!("/ui/tags?tag={}", seg(t))) { (name(t)) } } } }
                    (pager("/ui/tags", q.offset, top.len(), None))
                },
            ))
        }
    }
}

/// `GET /ui/tracked`.
pub(super) async fn tracked(State(ui): State<Ui>) -> UiResult {
    let tracked = ui.app.qless.tracked(ui.app.clock.now()).await?;
    Ok(layout(
        "Tracked",
        html! {
            h1 { "Tracked jobs" }
            (job_table(&tracked.jobs[..tracked.jobs.len().min(4 * PAGE as usize)]))
            @if tracked.jobs.len() > 4 * PAGE as usize { p.muted { "and " (tracked.jobs.len() - 4 * PAGE as usize) " more" } }
        },
    ))
}

/// `GET /ui/recurring`: the queues holding recurring templates (each links to its
/// paged listing).
pub(super) async fn recurring_list(State(ui): State<Ui>, Query(p): Query<Paging>) -> UiResult {
    let queues = ui.app.qless.queues(ui.app.clock.now()).await?;
    let with: Vec<&QueueCounts> = queues.iter().filter(|q| q.recurring > 0).collect();
    let start = (p.offset as usize).min(with.len());
    let shown = &with[start..(start + PAGE as usize).min(with.len())];
    Ok(layout(
        "Recurring",
        html! {
            h1 { "Recurring jobs" }
            table {
                tr { th { "Queue" } th.n { "Templates" } }
                @for q in shown {
                    tr {
                        td { a href=(format!("/ui/queues/{}?state=recurring", seg(&q.name))) { (name(&q.name)) } }
                        td.n { (q.recurring) }
                    }
                }
            }
            (pager("/ui/recurring", p.offset, shown.len(), Some(with.len() as i64)))
        },
    ))
}

/// `GET /ui/recurring/{jid}`: one template, editable.
pub(super) async fn recurring(State(ui): State<Ui>, can: Can, Path(jid): Path<Jid>) -> UiResult {
    let jid = String::from(jid);
    let Some(t) = ui.app.qless.recur_get(ui.app.clock.now(), &jid).await? else {
        return Err(refused(
            axum::http::StatusCode::NOT_FOUND,
            "no such recurring job",
        ));
    };
    let base = format!("/ui/recurring/{}", seg(&jid));
    Ok(layout(
        &jid,
        html! {
            h1 { "Recurring job " (name(&t.jid)) }
            dl.facts {
                dt { "Class" } dd { (name(&t.klass)) }
                dt { "Queue" } dd { a href=(format!("/ui/queues/{}?state=recurring", seg(&t.queue))) { (name(&t.queue)) } }
                dt { "Spawned" } dd { (t.count) }
                dt { "Retries" } dd { (t.retries) }
                dt { "Backlog" } dd { (t.backlog) }
                @if let Some(cron) = &t.cron {
                    @let zone = t.timezone.as_deref().unwrap_or("UTC");
                    dt { "Cron" } dd #cron { code { (cron) } }
                    dt { "Time zone" } dd #timezone { (zone) }
                    dt { "Next runs" } dd { ol #next { @for n in &t.next { li { (crate::cron::local_time(*n, zone)) } } } }
                } @else {
                    dt { "Every (s)" } dd { (t.interval) }
                    dt { "Next runs" } dd { ol #next { @for n in &t.next { li { (when(*n)) } } } }
                }
            }
            @if can.admin {
            h2 { "Edit" }
            form method="post" action=(format!("{base}/update")) {
                (csrf_field())
                @if let Some(cron) = &t.cron {
                    p { label { "Cron " input type="text" name="cron" value=(cron); } }
                    p { label { "Time zone " input type="text" name="timezone" value=(t.timezone.as_deref().unwrap_or("UTC")); } }
                } @else {
                    p { label { "Interval (s) " input type="number" name="interval" min="1" step="any" value=(t.interval); } }
                }
                p { label { "Priority " input type="number" name="priority" step="any" value=(t.priority); } }
                p { label { "Tags (comma-separated) " input type="text" name="tags" value=(t.tags.join(", ")); } }
                button.primary type="submit" { "Save" }
            }
            div.actions { (action_button(&format!("{base}/delete"), "Delete", "danger", &[])) }
            }
            h2 { "Data" }
            pre { (t.data.get()) }
        },
    ))
}

/// `GET /ui/throttles`: the throttles with limits, by name, with their jobs running
/// and waiting.
pub(super) async fn throttles(State(ui): State<Ui>, Query(p): Query<Paging>) -> UiResult {
    let now = ui.app.clock.now();
    let throttles = ui.app.qless.throttle_list(now, p.offset, PAGE).await?;
    Ok(layout(
        "Throttles",
        html! {
            h1 { "Throttles" }
            table #throttles {
                tr { th { "Throttle" } th.n { "Maximum" } th { "Rate" } th.n { "Running" } th.n { "Waiting" } th { "Waiting jobs" } }
                @for t in &throttles {
                    tr {
                        td { (name(&t.name)) }
                        td.n { @if let Some(m) = t.maximum { (m) } @else { "—" } }
                        td { @if let Some(r) = &t.rate { (r.jobs) " per " (r.seconds) " s (" (t.recent) " recent)" } @else { "—" } }
                        td.n { (t.running.len()) }
                        td.n { (t.waiting.len()) }
                        td { @for jid in t.waiting.iter().take(5) { a href=(format!("/ui/jobs/{}", seg(jid))) { (name(jid)) } " " } }
                    }
                }
            }
            (pager("/ui/throttles", p.offset, throttles.len(), None))
        },
    ))
}

/// JSON text pretty-printed, or as it is when it does not parse.
pub(super) fn pretty(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_owned())
}

/// `GET /ui/config`: every option, each editable.
pub(super) async fn config(State(ui): State<Ui>, can: Can) -> UiResult {
    let options = ui.app.qless.config_get_all(ui.app.clock.now()).await?;
    Ok(layout(
        "Config",
        html! {
            h1 { "Configuration" }
            table #config {
                tr { th { "Option" } th { "Value" } }
                @for (option, value) in &options {
                    tr {
                        td { (name(option)) }
                        @let text = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                        td { @if !can.admin { (text) } @else {
                            form.inline method="post" action="/ui/config" {
                                (csrf_field())
                                input type="hidden" name="option" value=(option);
                                input type="text" name="value" aria-label=(option) value=(text);
                                button type="submit" { "Set" }
                            }
                        } }
                    }
                }
            }
        },
    ))
}

/// `GET /ui/login`: asks for a token once; it is kept in an HttpOnly cookie.
pub(super) async fn login() -> Markup {
    login_form(None)
}

/// The login form, with what was wrong with the last try.
pub(super) fn login_form(error: Option<&str>) -> Markup {
    layout(
        "Log in",
        html! {
            h1 { "Log in" }
            p.muted { "This server needs a token (made with " code { "qlessd token" } "). \
                A read token shows everything; an admin token can also act." }
            @if let Some(error) = error { p.error #login-error { (error) } }
            form method="post" action="/ui/login" {
                (csrf_field())
                input type="password" name="token" placeholder="token" required
                    autocomplete="current-password" aria-label="Token";
                " "
                button.primary type="submit" { "Log in" }
            }
        },
    )
}
