//! `GET /ui/queues/{queue}/push`: a pushed queue's page: where and how its jobs are
//! delivered, its counts, its latest deliveries and the failures they left.
//!
//! It shows what the API's `GET /v1/queues/{queue}/push` shows (through the same
//! conversion, `push::shown`), and less: the endpoint without its query string and
//! the static headers by name only, since either may carry a credential; secrets by
//! fingerprint, never themselves.

use axum::extract::State;
use axum::http::StatusCode;
use maud::{Markup, html};

use super::{PAGE, Path, Ui, UiResult, layout, name, refused, seg, when};
use crate::model::{Job, PushDelivery, PushSettings, QueueName};
use crate::push::shown;

/// What the failure groups of deliveries start with (`push-http-500`, `push-timeout`).
const GROUP_PREFIX: &str = "push-";

/// The most failure groups whose latest jobs are searched for this queue's.
const GROUPS_SEARCHED: usize = 10;

/// `GET /ui/queues/{queue}/push`, or 404 when the queue is not pushed.
pub(super) async fn page(State(ui): State<Ui>, Path(queue): Path<QueueName>) -> UiResult {
    let queue = String::from(queue);
    let now = ui.app.clock.now();
    let qless = &ui.app.qless;
    let (pushed, failed) = tokio::try_join!(qless.push_get(now, &queue), qless.failed(now))?;
    let Some(pushed) = pushed else {
        return Err(refused(StatusCode::NOT_FOUND, "this queue is not pushed"));
    };
    let settings = shown::settings(pushed);
    let mut groups: Vec<(String, i64)> = failed
        .into_iter()
        .filter(|(group, _)| group.starts_with(GROUP_PREFIX))
        .collect();
    groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let failed_here = failed_jobs(&ui, now, &queue, &groups).await?;
    Ok(layout(
        &queue,
        html! {
            h1 { "Push delivery of queue " bdi #queue-name { (queue) } }
            p { a href=(format!("/ui/queues/{}", seg(&queue))) { "The queue's jobs" } }
            (settings_facts(&settings))
            h2 { "Counts" }
            div.cards #push-counts {
                div.card { div.big #delivered { (settings.delivered) } div.muted { "delivered" } }
                div.card { div.big #retried { (settings.retried) } div.muted { "retried" } }
                div.card { div.big #failed { (settings.failed) } div.muted { "failed" } }
                div.card { div.big #in-flight { (settings.in_flight) } div.muted { "in flight" } }
            }
            h2 { "Recent deliveries" }
            (deliveries(&settings.recent))
            h2 { "Failures" }
            (failures(&groups, &failed_here))
        },
    ))
}

/// Where and how deliveries go.
fn settings_facts(settings: &PushSettings) -> Markup {
    html! {
        dl.facts #push-settings {
            dt { "Endpoint" } dd #endpoint { code { (shown::endpoint(&settings.url)) } }
            dt { "Timeout" } dd #timeout { (settings.timeout) " s" }
            dt { "Concurrency" } dd #concurrency { (settings.concurrency) " in flight at most" }
            dt { "Rate" } dd #rate {
                @if let Some(rate) = &settings.rate { (rate.jobs) " per " (rate.seconds) " s" }
                @else { "none" }
            }
            dt { "Headers" } dd #headers {
                @if settings.headers.is_empty() { "none" }
                @for (i, header) in settings.headers.keys().enumerate() {
                    @if i > 0 { ", " }
                    code { (name(header)) }
                }
            }
            dt { "Secrets" } dd #secrets {
                @for secret in &settings.secrets {
                    div {
                        code { (secret.fingerprint) } " "
                        @if let Some(expires) = secret.expires {
                            span.muted { "rotated out, signs until " (when(expires)) }
                        } @else { span.muted { "current" } }
                    }
                }
            }
        }
    }
}

/// The latest deliveries, newest first.
fn deliveries(recent: &[PushDelivery]) -> Markup {
    html! {
        @if recent.is_empty() { p.muted #no-deliveries { "No deliveries yet." } } @else {
            table #deliveries {
                tr { th { "Job" } th.n { "Status" } th.n { "ms" } th.n { "Attempt" } th { "Outcome" } th { "When" } th { "By" } }
                @for d in recent {
                    tr {
                        td { a.jid href=(format!("/ui/jobs/{}", seg(&d.jid))) { (name(&d.jid)) } }
                        td.n { @if let Some(status) = d.status { (status) } @else { span.muted { "no answer" } } }
                        td.n { (d.ms) }
                        td.n { (d.attempt) }
                        td { span class=(format!("badge {}", outcome_class(&d.outcome))) { (d.outcome) } }
                        td { (when(d.when)) }
                        td { (name(&d.worker)) }
                    }
                }
            }
        }
    }
}

/// The badge style of an outcome (`delivered`, `retried`, `failed`, `gone`).
fn outcome_class(outcome: &str) -> &'static str {
    match outcome {
        "delivered" => "delivered",
        "retried" => "retried",
        "failed" => "failed",
        _ => "",
    }
}

/// The delivery failure groups (every queue's) and this queue's jobs among them.
fn failures(groups: &[(String, i64)], jobs: &[Job]) -> Markup {
    html! {
        @if groups.is_empty() { p.muted #no-push-failures { "No failed deliveries." } } @else {
            p.muted { "Failure groups of push deliveries (jobs of every queue); unfailing a job delivers it again." }
            table #push-failure-groups {
                tr { th { "Group" } th.n { "Jobs" } }
                @for (group, count) in groups {
                    tr { td { a href=(format!("/ui/failures/{}", seg(group))) { (name(group)) } } td.n { (count) } }
                }
            }
            h3 { "This queue's failed jobs" }
            @if jobs.is_empty() { p.muted { "None among the latest of each group." } } @else {
                table.jobs #push-failed-jobs {
                    tr { th { "Job" } th { "Group" } th { "When" } th { "Message" } }
                    @for job in jobs {
                        @if let Some(f) = &job.failure {
                            tr {
                                td { a.jid href=(format!("/ui/jobs/{}", seg(&job.jid))) { (name(&job.jid)) } }
                                td { a href=(format!("/ui/failures/{}", seg(&f.group))) { (name(&f.group)) } }
                                td { (when(f.when)) }
                                td { (f.message.chars().take(200).collect::<String>()) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// This queue's failed jobs among the latest page of each of the largest delivery
/// failure groups (a group holds every queue's jobs), at most a page of them: a
/// bounded look, whatever the size of the groups.
async fn failed_jobs(
    ui: &Ui,
    now: f64,
    queue: &str,
    groups: &[(String, i64)],
) -> UiResult<Vec<Job>> {
    let qless = &ui.app.qless;
    let pages = futures_util::future::try_join_all(
        groups
            .iter()
            .take(GROUPS_SEARCHED)
            .map(|(group, _)| qless.failed_group(now, group, 0, PAGE)),
    )
    .await?;
    let jids: Vec<String> = pages.into_iter().flat_map(|page| page.jids).collect();
    if jids.is_empty() {
        return Ok(Vec::new());
    }
    let mut jobs = qless.multiget(now, &jids).await?;
    jobs.retain(|job| job.queue == queue && job.failure.is_some());
    jobs.truncate(PAGE as usize);
    Ok(jobs)
}
