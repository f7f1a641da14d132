//! The crate's module graph has no cycle: imports run one way, from the HTTP layers
//! down to `core`, `model`, `telemetry` and the metrics registry.
//!
//! Each file of `src/` is a module. A file *uses* another when it names a path into
//! it (`crate::metrics::METRICS`, `super::Qless`, `use crate::{core, model::Job}`);
//! an item named through a module that re-exports it (`pub use error::Error`) is a
//! use of the file that defines it. A module naming its own submodules is how Rust
//! assembles a module from its files, not a dependency, so those edges are left out;
//! every other edge counts, and the test fails on any cycle, naming its files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One file of the crate: its module path (`core::jobs`) and its code without
/// comments and string literals.
struct Module {
    file: String,
    code: String,
}

#[test]
fn the_module_graph_has_no_cycle() {
    let modules = modules();
    let graph = uses(&modules);
    let cycles = cycles(&graph);
    let described: Vec<String> = cycles
        .iter()
        .map(|files| {
            let edges: Vec<String> = files
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| files.contains(to))
                        .map(move |to| format!("{from} -> {to}"))
                })
                .collect();
            edges.join(", ")
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles among {} files:\n{}",
        cycles.iter().map(Vec::len).sum::<usize>(),
        described.join("\n")
    );
    // The figure the closing notes quote: what was checked, not only that it passed.
    println!(
        "module graph of src/: {} files, {} imports between them, no cycle",
        graph.len(),
        graph.values().map(BTreeSet::len).sum::<usize>()
    );
}

#[test]
fn the_lower_layers_import_nothing_from_the_http_layers() {
    const LOWER: &[&str] = &["core", "model", "telemetry", "metrics"];
    const HIGHER: &[&str] = &["routes", "server", "ui", "middleware"];
    let graph = uses(&modules());
    for (from, targets) in &graph {
        let top = |path: &str| path.split("::").next().unwrap_or_default().to_owned();
        if !LOWER.contains(&top(from).as_str()) {
            continue;
        }
        for to in targets {
            assert!(
                !HIGHER.contains(&top(to).as_str()),
                "{from} imports {to}: the lower layers must not import the HTTP layers"
            );
        }
    }
}

#[test]
fn the_check_sees_a_cycle_when_there_is_one() {
    let modules = vec![
        module("a", "use crate::b::thing; fn f() { crate::c::x(); }"),
        module("b", "pub fn thing() {} use super::a::other;"),
        module("c", "pub fn x() {}"),
        module("d", "mod e; pub use e::Item; use crate::c;"),
        module("d::e", "pub struct Item; use super::super::a;"),
    ];
    let graph = uses(&modules);
    assert_eq!(graph["a"], set(&["b", "c"]));
    assert_eq!(
        graph["d"],
        set(&["c"]),
        "a module's own submodules are not uses"
    );
    assert_eq!(graph["d::e"], set(&["a"]));
    assert_eq!(cycles(&graph), vec![vec!["a".to_owned(), "b".to_owned()]]);
    // An item re-exported by a module is a use of the file defining it.
    let modules = vec![
        module("core", "mod error; pub use error::{Error, Code};"),
        module("core::error", "pub enum Error {} use crate::http::Answer;"),
        module("http", "use crate::core::Error; pub struct Answer;"),
    ];
    let graph = uses(&modules);
    assert_eq!(graph["http"], set(&["core::error"]));
    assert_eq!(cycles(&graph).len(), 1);
}

fn module(file: &str, code: &str) -> Module {
    Module {
        file: file.to_owned(),
        code: code.to_owned(),
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// Every file of `src/`, as a module.
fn modules() -> Vec<Module> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&root).ok()?.to_str()?.to_owned();
            let relative = relative.strip_suffix(".rs")?;
            let file = match relative {
                "lib" | "main" => return None,
                other => other
                    .strip_suffix("/mod")
                    .unwrap_or(other)
                    .replace('/', "::"),
            };
            let text = std::fs::read_to_string(&path).ok()?;
            // A file's unit tests (`#[cfg(test)] mod tests`, at its end) belong to no
            // layer: they may reach whatever they test with.
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => &text[..at],
                None => &text,
            };
            Some(Module {
                file,
                code: without_comments_and_strings(code),
            })
        })
        .collect()
}

fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            walk(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// `text` with comments, string and character literals blanked out, so that a path
/// in prose or in a message is not taken for a use.
fn without_comments_and_strings(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        let rest = &text[at..];
        if rest.starts_with("//") {
            at += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            at += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if let Some(raw) = raw_string_end(rest) {
            out.push_str("\"\"");
            at += raw;
        } else if rest.starts_with('"') {
            let mut end = 1;
            while end < rest.len() {
                match rest.as_bytes()[end] {
                    b'\\' => end += 2,
                    b'"' => break,
                    _ => end += 1,
                }
            }
            out.push_str("\"\"");
            at += (end + 1).min(rest.len());
        } else if let Some(length) = char_literal(rest) {
            out.push_str("' '");
            at += length;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            at += c.len_utf8();
        }
    }
    out
}

/// The length of a raw string literal (`r"..."`, `r#"..."#`) at the start of `text`.
fn raw_string_end(text: &str) -> Option<usize> {
    let after_r = text.strip_prefix('r').or_else(|| text.strip_prefix("br"))?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    let body = after_r[hashes..].strip_prefix('"')?;
    let closing = format!("\"{}", "#".repeat(hashes));
    let end = body.find(&closing)?;
    Some(text.len() - body.len() + end + closing.len())
}

/// The length of a character literal at the start of `text` (not a lifetime).
fn char_literal(text: &str) -> Option<usize> {
    let body = text.strip_prefix('\'')?;
    let mut chars = body.char_indices();
    let (_, first) = chars.next()?;
    if first == '\\' {
        return body
            .find('\'')
            .map(|end| end + 2)
            .filter(|_| body.len() > 2);
    }
    let (next, close) = chars.next()?;
    (close == '\'').then_some(1 + next + 1)
}

/// For each file, the files it uses.
fn uses(modules: &[Module]) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<&str> = modules.iter().map(|m| m.file.as_str()).collect();
    let code: BTreeMap<&str, &str> = modules
        .iter()
        .map(|m| (m.file.as_str(), m.code.as_str()))
        .collect();
    modules
        .iter()
        .map(|module| {
            let mut targets = BTreeSet::new();
            for path in paths(&module.code) {
                let Some(absolute) = absolute(&module.file, &path) else {
                    continue;
                };
                let Some(target) = resolve(&absolute, &known, &code) else {
                    continue;
                };
                let own_part =
                    target == module.file || target.starts_with(&format!("{}::", module.file));
                if !own_part {
                    targets.insert(target);
                }
            }
            (module.file.clone(), targets)
        })
        .collect()
}

/// The paths `code` names: those of its `use` declarations, braces expanded, and
/// every `crate::…` or `super::…` path in expressions and types.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = next_use(rest) {
        let statement = &rest[at + 4..];
        let end = statement.find(';').unwrap_or(statement.len());
        expand(&statement[..end], &mut Vec::new(), &mut found);
        rest = &statement[end..];
    }
    let words: Vec<char> = code.chars().collect();
    let text: String = words.iter().collect();
    for (at, _) in text
        .match_indices("crate::")
        .chain(text.match_indices("super::"))
    {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let path: Vec<String> = text[at..]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap_or_default()
            .split("::")
            .filter(|segment| !segment.is_empty())
            .map(str::to_owned)
            .collect();
        found.push(path);
    }
    found
}

/// Where the next `use ` declaration starts (a whole word).
fn next_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        let before = code[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// Expands one `use` tree (`crate::{a, b::{c, d}}`) into its paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = segments(&tree[..open]);
        let close = tree.rfind('}').unwrap_or(tree.len());
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top_level(&tree[open + 1..close]) {
            expand(part, prefix, out);
        }
        prefix.truncate(depth);
    } else if !tree.is_empty() {
        let name = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.clone();
        path.extend(segments(name));
        out.push(path);
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|segment| !segment.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The comma-separated parts of a brace group's inside, nested groups kept whole.
fn split_top_level(inside: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, c) in inside.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inside[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inside[start..]);
    parts
}

/// `path` as seen from the module `file`, from the crate root; `None` for paths into
/// other crates.
fn absolute(file: &str, path: &[String]) -> Option<Vec<String>> {
    let mut here: Vec<String> = file.split("::").map(str::to_owned).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            here.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                here.pop()?;
                rest = &rest[1..];
            }
        }
        Some("self") => rest = &rest[1..],
        _ => return None,
    }
    here.extend(rest.iter().cloned());
    Some(here)
}

/// The file that `path` (from the crate root) lands in: the longest prefix that is a
/// module, followed through that module's `pub use` of the next name.
fn resolve(path: &[String], known: &BTreeSet<&str>, code: &BTreeMap<&str, &str>) -> Option<String> {
    let mut depth = path.len();
    let module = loop {
        if depth == 0 {
            return None;
        }
        let candidate = path[..depth].join("::");
        if known.contains(candidate.as_str()) {
            break candidate;
        }
        depth -= 1;
    };
    let Some(item) = path.get(depth) else {
        return Some(module);
    };
    // An item the module re-exports from one of its submodules (`pub use x::Item`).
    let mut exports = Vec::new();
    for (at, _) in code[module.as_str()].match_indices("pub use ") {
        let statement = &code[module.as_str()][at + 8..];
        let end = statement.find(';').unwrap_or(statement.len());
        expand(&statement[..end], &mut Vec::new(), &mut exports);
    }
    for export in exports {
        let name = export.last().map(|last| last.as_str());
        if name == Some(item.as_str()) && export.first().is_some_and(|first| first != "crate") {
            let mut inner: Vec<String> = module.split("::").map(str::to_owned).collect();
            inner.extend(export);
            if let Some(found) = resolve(&inner[..inner.len() - 1], known, code)
                && found != module
            {
                return Some(found);
            }
        }
    }
    Some(module)
}

/// The graph's cycles: its strongly connected components of more than one file.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative over the (small) graph.
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        if let Some(targets) = state.graph.get(node) {
            for target in targets {
                let target = target.as_str();
                if !state.graph.contains_key(target) {
                    continue;
                }
                if !state.index.contains_key(target) {
                    visit(state, target);
                    let low = state.low[node].min(state.low[target]);
                    state.low.insert(node, low);
                } else if state.on_stack.contains(target) {
                    let low = state.low[node].min(state.index[target]);
                    state.low.insert(node, low);
                }
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}
