//! A workflow's graph drawn as SVG on the server, like the charts (`charts`): no
//! script, no external asset. Tasks stand in layers by depth (a task with no parent
//! in the first column, every other one column right of its deepest parent), edges
//! run from a parent's right side to a child's left side with an arrow, and each task
//! is a link to its job's page, coloured by its state through the stylesheet's
//! `.graph .task.<state>` rules (the badges' and the charts' colours).
//!
//! A graph past [`Limits`] (the API allows 1,000 tasks) is not drawn: a drawing
//! thousands of pixels each way reads worse than the table the page shows anyway, so
//! the page says why and shows the table alone.

use std::collections::HashMap;
use std::fmt::Write;

use super::charts::escape;
use super::seg;
use crate::model::WorkflowTask;

/// The states a task can show, in the legend's order (the script's words).
pub const STATES: [&str; 8] = [
    "waiting",
    "scheduled",
    "depends",
    "running",
    "stalled",
    "complete",
    "failed",
    "canceled",
];

/// How big a graph is still drawn. Past any of them the drawing would need scrolling
/// both ways over several screens (or hold more edges than anyone can follow).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub tasks: usize,
    /// Columns (the longest chain of tasks).
    pub layers: usize,
    /// Tasks in one column.
    pub widest: usize,
    pub edges: usize,
}

/// The dashboard's limits: at most about 8,000 x 3,000 pixels.
pub const LIMITS: Limits = Limits {
    tasks: 300,
    layers: 40,
    widest: 60,
    edges: 1500,
};

/// Why a graph was not drawn: its size against [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    pub tasks: usize,
    pub layers: usize,
    pub widest: usize,
    pub edges: usize,
}

const BOX_W: f64 = 150.0;
const BOX_H: f64 = 34.0;
const COL_GAP: f64 = 56.0;
const ROW_GAP: f64 = 14.0;
const MARGIN: f64 = 8.0;
/// The legend's row above the graph.
const LEGEND_H: f64 = 26.0;
const LEGEND_STEP: f64 = 92.0;
/// Characters of a task's name shown in its box (the whole name is its hover text).
const LABEL_CHARS: usize = 20;

/// Each task's layer (its depth), and the layers' tasks in drawing order.
struct Layout<'a> {
    /// Task name -> its position in the list.
    index: HashMap<&'a str, usize>,
    layer: Vec<usize>,
    layers: Vec<Vec<usize>>,
    edges: usize,
}

/// Lays the tasks out. `tasks` come parents first (as `workflow.get` lists them); a
/// parent named later or not at all counts as depth 0, so a stray record still draws.
fn layout(tasks: &[WorkflowTask]) -> Layout<'_> {
    let index: HashMap<&str, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut layer = vec![0usize; tasks.len()];
    let mut edges = 0;
    for (i, task) in tasks.iter().enumerate() {
        for parent in &task.after {
            if let Some(&p) = index.get(parent.as_str()).filter(|&&p| p < i) {
                layer[i] = layer[i].max(layer[p] + 1);
                edges += 1;
            }
        }
    }
    let depth = layer.iter().max().map_or(0, |d| d + 1);
    let mut layers: Vec<Vec<usize>> = vec![Vec::new(); depth];
    // Each column is ordered by the mean row of the task's parents (the barycenter
    // heuristic, one sweep left to right): children sit next to their parents, which
    // removes most crossings at no real cost.
    let mut row = vec![0usize; tasks.len()];
    for (d, column) in layers.iter_mut().enumerate() {
        let mut members: Vec<(f64, usize)> = (0..tasks.len())
            .filter(|&i| layer[i] == d)
            .map(|i| {
                let rows: Vec<f64> = tasks[i]
                    .after
                    .iter()
                    .filter_map(|p| index.get(p.as_str()))
                    .filter(|&&p| p < i)
                    .map(|&p| row[p] as f64)
                    .collect();
                let center = if rows.is_empty() {
                    i as f64
                } else {
                    rows.iter().sum::<f64>() / rows.len() as f64
                };
                (center, i)
            })
            .collect();
        members.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (r, &(_, i)) in members.iter().enumerate() {
            row[i] = r;
        }
        *column = members.into_iter().map(|(_, i)| i).collect();
    }
    Layout {
        index,
        layer,
        layers,
        edges,
    }
}

/// The workflow's graph as an SVG document, or its size when it is past `limits`.
pub fn workflow(tasks: &[WorkflowTask], limits: Limits) -> Result<String, TooLarge> {
    let Layout {
        index,
        layer,
        layers,
        edges,
    } = layout(tasks);
    let widest = layers.iter().map(Vec::len).max().unwrap_or(0);
    let size = TooLarge {
        tasks: tasks.len(),
        layers: layers.len(),
        widest,
        edges,
    };
    if size.tasks > limits.tasks
        || size.layers > limits.layers
        || size.widest > limits.widest
        || size.edges > limits.edges
    {
        return Err(size);
    }
    // Where each box's top left corner is; each column centred on the tallest.
    let mut at = vec![(0.0, 0.0); tasks.len()];
    for (d, column) in layers.iter().enumerate() {
        let shift = (widest - column.len()) as f64 * (BOX_H + ROW_GAP) / 2.0;
        for (r, &i) in column.iter().enumerate() {
            at[i] = (
                MARGIN + d as f64 * (BOX_W + COL_GAP),
                MARGIN + LEGEND_H + shift + r as f64 * (BOX_H + ROW_GAP),
            );
        }
    }
    let width = (MARGIN * 2.0 + layers.len() as f64 * (BOX_W + COL_GAP) - COL_GAP)
        .max(MARGIN * 2.0 + STATES.len() as f64 * LEGEND_STEP);
    let height = MARGIN * 2.0 + LEGEND_H + widest as f64 * (BOX_H + ROW_GAP) - ROW_GAP;
    let mut svg = String::with_capacity(1024 + tasks.len() * 420 + edges * 120);
    let _ = write!(
        svg,
        r#"<svg class="graph" id="workflow-graph" viewBox="0 0 {width:.0} {height:.0}" width="{width:.0}" height="{height:.0}" role="img" aria-label="{} tasks in {} layers">"#,
        tasks.len(),
        layers.len(),
    );
    svg.push_str(r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>"#);
    svg.push_str(r#"<g class="legend">"#);
    for (k, state) in STATES.iter().enumerate() {
        let x = MARGIN + k as f64 * LEGEND_STEP;
        let _ = write!(
            svg,
            r#"<g class="task {state}"><rect x="{x:.0}" y="{MARGIN:.0}" width="14" height="14" rx="3"/><text x="{:.0}" y="{:.0}" class="key">{state}</text></g>"#,
            x + 19.0,
            MARGIN + 11.0,
        );
    }
    svg.push_str("</g>");
    // Edges first, so that boxes are drawn over any edge passing behind them.
    svg.push_str(r#"<g class="edges">"#);
    for (i, task) in tasks.iter().enumerate() {
        for parent in &task.after {
            let Some(&p) = index.get(parent.as_str()).filter(|&&p| p < i) else {
                continue;
            };
            let (x1, y1) = (at[p].0 + BOX_W, at[p].1 + BOX_H / 2.0);
            let (x2, y2) = (at[i].0, at[i].1 + BOX_H / 2.0);
            let bend = (x2 - x1) / 2.0;
            let _ = write!(
                svg,
                r#"<path d="M{x1:.1},{y1:.1} C{:.1},{y1:.1} {:.1},{y2:.1} {x2:.1},{y2:.1}" marker-end="url(#arrow)"><title>{} → {}</title></path>"#,
                x1 + bend,
                x2 - bend,
                isolated(parent),
                isolated(&task.name),
            );
        }
    }
    svg.push_str("</g>");
    for (i, task) in tasks.iter().enumerate() {
        let (x, y) = at[i];
        // An unknown word gets no colour of its own, only the default box.
        let state = if STATES.contains(&task.state.as_str()) {
            task.state.as_str()
        } else {
            "other"
        };
        let label: String = if task.name.chars().count() > LABEL_CHARS {
            let mut cut: String = task.name.chars().take(LABEL_CHARS - 1).collect();
            cut.push('…');
            cut
        } else {
            task.name.clone()
        };
        let _ = write!(
            svg,
            r#"<a href="/ui/jobs/{}" class="task-link" data-task="{}"><g class="task {state}" data-layer="{}"><title>{} ({}, job {})</title><rect x="{x:.1}" y="{y:.1}" width="{BOX_W:.0}" height="{BOX_H:.0}" rx="5"/><text x="{:.1}" y="{:.1}" class="name" {NAME_BIDI}>{}</text><text x="{:.1}" y="{:.1}" class="state">{}</text></g></a>"#,
            seg(&task.jid),
            escape(&task.name),
            layer[i],
            isolated(&task.name),
            escape(&task.state),
            isolated(&task.jid),
            x + 8.0,
            y + 14.0,
            escape(&label),
            x + 8.0,
            y + 28.0,
            escape(&task.state),
        );
    }
    svg.push_str("</svg>");
    Ok(svg)
}

/// The presentation attributes of a box's name (SVG has no `<bdi>`): the name is laid
/// out as a run of its own, so letters that run right to left stay within it and
/// cannot carry the ellipsis of a cut name, or anything else, across it.
const NAME_BIDI: &str = r#"direction="ltr" unicode-bidi="isolate""#;

/// `text`, escaped, between U+2068 FIRST STRONG ISOLATE and U+2069 POP DIRECTIONAL
/// ISOLATE. Hover text (`<title>`) is plain text, where no attribute applies: these
/// characters isolate a name there as `<bdi>` does in HTML (its direction taken from
/// its first letter), so a right-to-left name cannot reorder the words around it.
/// A name cannot close the isolate early: the name types refuse format characters
/// such as U+2069 (`model::names`).
fn isolated(text: &str) -> String {
    format!("\u{2068}{}\u{2069}", escape(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, state: &str, after: &[&str]) -> WorkflowTask {
        WorkflowTask {
            name: name.into(),
            jid: format!("j-{name}"),
            state: state.into(),
            after: after.iter().map(|a| (*a).to_owned()).collect(),
            policy: "cancel".into(),
            queue: "q".into(),
        }
    }

    #[test]
    fn tasks_stand_in_layers_by_their_deepest_parent() {
        let tasks = [
            task("a", "complete", &[]),
            task("b", "running", &["a"]),
            task("c", "depends", &["a", "b"]),
            task("d", "waiting", &[]),
        ];
        let layout = layout(&tasks);
        assert_eq!(layout.layer, [0, 1, 2, 0]);
        assert_eq!(layout.layers, [vec![0, 3], vec![1], vec![2]]);
        assert_eq!(layout.edges, 3);
    }

    #[test]
    fn children_sit_beside_their_parents() {
        // y's child is listed first but goes where y is, below x's child.
        let tasks = [
            task("x", "waiting", &[]),
            task("y", "waiting", &[]),
            task("child-of-y", "depends", &["y"]),
            task("child-of-x", "depends", &["x"]),
        ];
        assert_eq!(layout(&tasks).layers[1], [3, 2]);
    }

    #[test]
    fn the_drawing_links_each_box_to_its_job_and_colours_it_by_state() {
        let tasks = [
            task("fetch", "complete", &[]),
            task("<b>&\"", "failed", &["fetch"]),
        ];
        let svg = workflow(&tasks, LIMITS).unwrap();
        assert!(svg.contains(r#"<a href="/ui/jobs/j-fetch" class="task-link""#));
        assert!(svg.contains(r#"<g class="task complete" data-layer="0">"#));
        assert!(svg.contains(r#"<g class="task failed" data-layer="1">"#));
        assert!(svg.contains(r#"href="/ui/jobs/j-%3Cb%3E%26%22""#));
        assert!(svg.contains("&lt;b&gt;&amp;&quot;"));
        assert!(!svg.contains("<b>"));
        assert_eq!(svg.matches("marker-end").count(), 1);
        // The legend names every state.
        for state in STATES {
            assert!(svg.contains(&format!(r#"class="key">{state}<"#)), "{state}");
        }
    }

    #[test]
    fn a_graph_past_the_limits_is_not_drawn() {
        let chain: Vec<WorkflowTask> = (0..50)
            .map(|i| {
                let parent = format!("t{}", i.max(1) - 1);
                let after: Vec<&str> = if i == 0 { vec![] } else { vec![&parent] };
                task(&format!("t{i}"), "depends", &after)
            })
            .collect();
        let too = workflow(&chain, LIMITS).unwrap_err();
        assert_eq!(
            (too.tasks, too.layers, too.widest, too.edges),
            (50, 50, 1, 49)
        );
        let wide: Vec<WorkflowTask> = (0..61)
            .map(|i| task(&format!("t{i}"), "waiting", &[]))
            .collect();
        assert_eq!(workflow(&wide, LIMITS).unwrap_err().widest, 61);
        assert!(workflow(&wide[..60], LIMITS).is_ok());
    }

    #[test]
    fn long_names_are_cut_in_their_box_and_whole_in_the_hover_text() {
        let name = "a-task-with-a-rather-long-name";
        let svg = workflow(&[task(name, "waiting", &[])], LIMITS).unwrap();
        assert!(
            svg.contains(&format!(
                r#"class="name" {NAME_BIDI}>a-task-with-a-rathe…<"#
            )),
            "{svg}"
        );
        assert!(svg.contains(&format!("<title>\u{2068}{name}\u{2069} (waiting")));
    }

    #[test]
    fn names_are_isolated_so_that_none_reorders_the_text_around_it() {
        // Hebrew letters run right to left.
        let tasks = [
            task("שלום", "complete", &[]),
            task("next", "waiting", &["שלום"]),
        ];
        let svg = workflow(&tasks, LIMITS).unwrap();
        // Drawn: every name in a text of its own, isolated.
        let names: Vec<&str> = svg.split(r#"class="name""#).skip(1).collect();
        assert_eq!(names.len(), 2);
        for name in names {
            assert!(name.starts_with(&format!(" {NAME_BIDI}>")), "{name}");
        }
        // Hover text: the name and the jid between isolates, the words around them
        // outside.
        assert!(
            svg.contains(
                "<title>\u{2068}שלום\u{2069} (complete, job \u{2068}j-שלום\u{2069})</title>"
            ),
            "{svg}"
        );
        assert!(
            svg.contains("<title>\u{2068}שלום\u{2069} → \u{2068}next\u{2069}</title>"),
            "{svg}"
        );
        // Every isolate opened is closed, so nothing after the names is affected.
        assert_eq!(
            svg.matches('\u{2068}').count(),
            svg.matches('\u{2069}').count()
        );
    }
}
