//! The batch and workflow pages (GET), read with the same `core` calls as
//! `GET /v1/batches/{bid}` and `GET /v1/workflows/{wid}`. Neither offers an action:
//! canceling a batch or a workflow is the API's (`admin`) alone.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use maud::{Markup, html};

use serde::Deserialize;

use super::graph::{self, TooLarge};
use super::{
    PAGE, Path, Ui, UiResult, charts, layout, name, names, pager, refused, seg, trusted, when,
};
use crate::model::{BatchId, WorkflowId, WorkflowTask};

/// `?offset=` of a batch's page of jobs.
#[derive(Debug, Default, Deserialize)]
pub(super) struct JobsPage {
    #[serde(default)]
    offset: u32,
}

/// Callbacks, in the order they fire when one call fires several.
const CALLBACK_KINDS: [&str; 3] = ["on_death", "on_complete", "on_success"];

/// Child batches listed on a batch's page; the rest are counted.
const CHILDREN_SHOWN: usize = 100;

/// The progress bar's size in pixels.
const BAR: (u32, u32) = (480, 14);

/// A bar of how much of `total` has finished (completed, failed, canceled), and the
/// same in words.
fn finished_bar(completed: u64, failed: u64, canceled: u64, total: u64) -> Markup {
    let finished = completed + failed + canceled;
    // Nothing to do is all done.
    let percent = (finished * 100).checked_div(total).unwrap_or(100);
    html! {
        div.progress #finished {
            (trusted(charts::progress(
                &[("ok", "completed", completed), ("bad", "failed", failed),
                  ("canceled", "canceled", canceled)],
                total, BAR.0, BAR.1,
            )))
            " " span #finished-text { (finished) " of " (total) " finished (" (percent) "%)" }
        }
    }
}

/// A link to a job's page, its jid isolated.
fn job_link(jid: &str) -> Markup {
    html! { a.jid href=(format!("/ui/jobs/{}", seg(jid))) { (name(jid)) } }
}

/// A link to a batch's page.
fn batch_link(bid: &str) -> Markup {
    html! { a href=(format!("/ui/batches/{}", seg(bid))) { (name(bid)) } }
}

/// `GET /ui/batches/{bid}`: description, state, counts, progress, callbacks, parent
/// and children, and a page of its jobs.
pub(super) async fn batch(
    State(ui): State<Ui>,
    Path(bid): Path<BatchId>,
    Query(p): Query<JobsPage>,
) -> UiResult {
    let bid = String::from(bid);
    let offset = p.offset;
    let Some(batch) = ui
        .app
        .qless
        .batch_get(ui.app.clock.now(), &bid, offset as usize, PAGE as usize)
        .await?
    else {
        return Err(refused(StatusCode::NOT_FOUND, "no such batch"));
    };
    let c = &batch.counts;
    let counts = [
        ("total", c.total),
        ("waiting", c.waiting),
        ("running", c.running),
        ("scheduled", c.scheduled),
        ("depends", c.depends),
        ("completed", c.completed),
        ("failed", c.failed),
        ("canceled", c.canceled),
    ];
    let base = format!("/ui/batches/{}", seg(&bid));
    Ok(layout(
        &bid,
        html! {
            h1 { "Batch " bdi #bid { (batch.bid) } }
            dl.facts {
                dt { "Description" } dd #description {
                    @if batch.description.is_empty() { "—" } @else { (name(&batch.description)) }
                }
                dt { "State" } dd { span #batch-state class=(format!("badge {}", batch.state)) { (batch.state) } }
                dt { "Created" } dd { (when(batch.created)) }
                dt { "Settled" } dd { (batch.settled.map_or_else(|| "—".to_owned(), when)) }
                dt { "Succeeded" } dd { (batch.succeeded.map_or_else(|| "—".to_owned(), when)) }
                dt { "Parent" } dd #parent {
                    @if let Some(parent) = &batch.parent { (batch_link(parent)) } @else { "—" }
                }
                dt { "Children" } dd #children {
                    @for child in batch.children.iter().take(CHILDREN_SHOWN) { (batch_link(child)) " " }
                    @if batch.children.is_empty() { "—" }
                    @if batch.children.len() > CHILDREN_SHOWN {
                        span.muted { "and " (batch.children.len() - CHILDREN_SHOWN) " more" }
                    }
                }
            }
            div.cards #counts {
                @for (label, n) in counts {
                    div.card { div.big id=(format!("count-{label}")) { (n) } div.muted { (label) } }
                }
            }
            (finished_bar(c.completed, c.failed, c.canceled, c.total))
            h2 { "Callbacks" }
            @if batch.callbacks.is_empty() { p.muted #no-callbacks { "No callbacks." } } @else {
                table #callbacks {
                    tr { th { "When" } th { "State" } th { "Job" } th { "Queue" } }
                    @for kind in CALLBACK_KINDS {
                        @if let Some(cb) = batch.callbacks.get(kind) {
                            tr id=(format!("callback-{kind}")) {
                                td { code { (kind) } }
                                td { span class=(format!("badge {}", cb.state)) { (cb.state) } }
                                // A pending callback's job does not exist yet: no link
                                // to a page that would say so.
                                td { @if cb.state == "fired" { (job_link(&cb.jid)) } @else { (name(&cb.jid)) } }
                                td { a href=(format!("/ui/queues/{}", seg(&cb.queue))) { (name(&cb.queue)) } }
                            }
                        }
                    }
                }
            }
            h2 { "Jobs" }
            table.jobs #batch-jobs {
                tr { th { "Job" } th { "State" } }
                @for job in &batch.jobs {
                    tr {
                        td { (job_link(&job.jid)) }
                        td { span class=(format!("badge {}", job.state)) { (job.state) } }
                    }
                }
            }
            (pager(&base, offset, batch.jobs.len(), Some(c.total as i64)))
        },
    ))
}

/// What the page says instead of a graph too large to draw.
fn too_large(size: TooLarge) -> Markup {
    let limits = graph::LIMITS;
    html! {
        p.muted #graph-note {
            "This graph (" (size.tasks) " tasks, " (size.layers) " layers, up to " (size.widest)
            " tasks in a layer, " (size.edges) " edges) is too large to draw readably: "
            "graphs are drawn up to " (limits.tasks) " tasks, " (limits.layers) " layers, "
            (limits.widest) " tasks in a layer and " (limits.edges) " edges. "
            "The table below lists every task."
        }
    }
}

/// How many tasks stand in each state, in the legend's order (unknown words last).
fn state_counts(tasks: &[WorkflowTask]) -> Vec<(&str, u64)> {
    let mut counts: Vec<(&str, u64)> = graph::STATES.iter().map(|s| (*s, 0)).collect();
    for task in tasks {
        match counts.iter_mut().find(|(s, _)| *s == task.state) {
            Some(entry) => entry.1 += 1,
            None => counts.push((task.state.as_str(), 1)),
        }
    }
    counts
}

/// `GET /ui/workflows/{wid}`: the graph (SVG, each task linked to its job and
/// coloured by its state) and the table of its tasks. The whole workflow is one
/// page: the API bounds it at 1,000 tasks.
pub(super) async fn workflow(State(ui): State<Ui>, Path(wid): Path<WorkflowId>) -> UiResult {
    let wid = String::from(wid);
    let Some(workflow) = ui.app.qless.workflow_get(ui.app.clock.now(), &wid).await? else {
        return Err(refused(StatusCode::NOT_FOUND, "no such workflow"));
    };
    let tasks = &workflow.tasks;
    let counts = state_counts(tasks);
    let count = |state: &str| counts.iter().find(|(s, _)| *s == state).map_or(0, |c| c.1);
    let drawing = graph::workflow(tasks, graph::LIMITS);
    Ok(layout(
        &wid,
        html! {
            h1 { "Workflow " bdi #wid { (workflow.wid) } }
            dl.facts {
                dt { "Name" } dd #workflow-name {
                    @if workflow.name.is_empty() { "—" } @else { (name(&workflow.name)) }
                }
                dt { "Created" } dd { (when(workflow.created)) }
                dt { "Tasks" } dd #task-count { (tasks.len()) }
            }
            div.cards #counts {
                @for (state, n) in &counts {
                    div.card { div.big id=(format!("count-{state}")) { (n) } div.muted { (state) } }
                }
            }
            (finished_bar(count("complete"), count("failed"), count("canceled"), tasks.len() as u64))
            h2 { "Graph" }
            @match drawing {
                Ok(svg) => div.graph-scroll { (trusted(svg)) },
                Err(size) => (too_large(size)),
            }
            h2 { "Tasks" }
            table #tasks {
                tr { th { "Task" } th { "State" } th { "On parent failure" } th { "After" } th { "Queue" } }
                @for task in tasks {
                    tr {
                        td { a.task href=(format!("/ui/jobs/{}", seg(&task.jid))) { (name(&task.name)) } }
                        td { span class=(format!("badge {}", task.state)) { (task.state) } }
                        td { (task.policy) }
                        td { @if task.after.is_empty() { "—" } @else { (names(&task.after)) } }
                        td { @if !task.queue.is_empty() { a href=(format!("/ui/queues/{}", seg(&task.queue))) { (name(&task.queue)) } } }
                    }
                }
            }
        },
    ))
}
