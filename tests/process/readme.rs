//! The README's walkthrough, run as a reader runs it: every ```` ```sh ```` block
//! between a `<!-- walkthrough` comment and the next `<!-- end of walkthrough -->`
//! (the walkthrough goes on in the sections on batches and workflows), in order,
//! in one shell, against a fresh qlessd; each block's output is compared with the
//! ```` ```text ```` block that follows it (if one does) line by line, where `...`
//! matches anything. So the README cannot drift from what qlessd does.

use std::path::Path;
use std::process::Command;

use super::running::{Qlessd, toolchain};

/// One step: the commands, and what they print if the README shows it.
#[derive(Debug)]
struct Step {
    script: String,
    expected: Option<String>,
}

/// The fenced blocks of the walkthrough, paired into steps: those of every region
/// from a `<!-- walkthrough` comment to the next `<!-- end of walkthrough -->`, in
/// the README's order (the walkthrough goes on in later sections, past prose whose
/// blocks are not part of it).
fn walkthrough(readme: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut rest = readme;
    while let Some(start) = rest.find("<!-- walkthrough") {
        let end = rest[start..]
            .find("<!-- end of walkthrough -->")
            .expect("every <!-- walkthrough marker has an <!-- end of walkthrough --> marker")
            + start;
        steps.extend(region_steps(&rest[start..end]));
        rest = &rest[end..];
    }
    assert!(!steps.is_empty(), "README has a <!-- walkthrough marker");
    steps
}

/// The steps of one walkthrough region.
fn region_steps(region: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut lines = region.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let body = body.join("\n");
        match info.trim() {
            "sh" => steps.push(Step {
                script: body,
                expected: None,
            }),
            "text" => {
                let step = steps.last_mut().expect("a text block follows an sh block");
                assert!(
                    step.expected.is_none(),
                    "two text blocks after one sh block"
                );
                step.expected = Some(body);
            }
            other => panic!("walkthrough block of kind {other:?}: use sh or text"),
        }
    }
    steps
}

/// `expected` with `...` standing for any run of characters.
fn matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("...");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

#[test]
fn dots_match_anything_and_the_rest_exactly() {
    assert!(matches(
        r#"{"expires":...} 200"#,
        r#"{"expires":1795563675} 200"#
    ));
    assert!(matches("a...c...e", "abcde"));
    assert!(matches("abc", "abc"));
    assert!(!matches("abc", "abcd"));
    assert!(!matches(r#"{"expires":...} 200"#, r#"{"expires":1} 409"#));
    assert!(!matches("a...c...e", "abde"));
}

#[tokio::test]
async fn the_readme_walkthrough_prints_what_the_readme_shows() {
    if !toolchain("curl", "--version", "the README walkthrough") {
        return;
    }
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let steps = walkthrough(&readme);
    assert!(steps.len() >= 8, "walkthrough too short: {steps:#?}");
    let qlessd = Qlessd::start().await;
    let address = qlessd.base.trim_start_matches("http://");

    // One shell, so that a step may use what an earlier one set; a marker line
    // between steps splits the output.
    let mut script = String::from("set -eu\n");
    for (i, step) in steps.iter().enumerate() {
        script.push_str(&format!("echo '@@ step {i}'\n"));
        script.push_str(&step.script.replace("localhost:5858", address));
        script.push('\n');
    }
    let output = tokio::task::spawn_blocking(move || {
        Command::new("bash").arg("-c").arg(script).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "the walkthrough failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Vec<&str> = stdout.split("@@ step ").skip(1).collect();
    assert_eq!(printed.len(), steps.len(), "{stdout}");
    for (step, printed) in steps.iter().zip(printed) {
        let (_, printed) = printed.split_once('\n').unwrap_or((printed, ""));
        let Some(expected) = &step.expected else {
            continue;
        };
        let actual: Vec<&str> = printed.lines().collect();
        let wanted: Vec<&str> = expected.lines().collect();
        assert_eq!(
            actual.len(),
            wanted.len(),
            "this step printed\n{printed}\nwhere the README shows\n{expected}\n\n{}",
            step.script
        );
        for (want, got) in wanted.iter().zip(&actual) {
            assert!(
                matches(want, got),
                "this step printed\n{got}\nwhere the README shows\n{want}\n\n{}",
                step.script
            );
        }
    }
}
