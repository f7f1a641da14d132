//! The workers in `examples/`, each run as a newcomer runs it against a real qlessd:
//! it puts five jobs, works them (heartbeating), and stops on SIGTERM; run again with
//! `EXIT_WHEN_IDLE=1`, it exits by itself once the queue is empty. The test checks
//! through the API that four were completed and the one without a name failed into
//! `Greet-no-name`, the same group in every language.
//!
//! An example whose toolchain is missing is skipped with a printed message (see
//! [`toolchain`]); `.ci/run` installs them all and makes such a skip a failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::running::{Qlessd, toolchain};

/// The project's `examples/` directory.
pub(super) fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// Builds the Go package `package` of `examples/go` into a binary in a temporary
/// directory (kept as long as the returned guard). Built, then run: `go run` would
/// leave the program behind when it is stopped.
pub(super) fn build_go(package: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("example");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(package)
        .current_dir(examples().join("go"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    (dir, binary)
}

/// How a run of a worker ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Sent SIGTERM once its jobs are finished, it stops saying `stopped`.
    Sigterm,
    /// Run with `EXIT_WHEN_IDLE=1`, it exits by itself once the queue is empty, saying
    /// `idle, exiting`.
    Idle,
}

/// Runs `worker` against a fresh qlessd and checks what it did, twice: stopped by
/// SIGTERM, then with `EXIT_WHEN_IDLE=1`.
async fn run_worker(mut worker: Command, queue: &str) {
    run_until(worker.env_remove("EXIT_WHEN_IDLE"), queue, End::Sigterm).await;
    run_until(worker.env("EXIT_WHEN_IDLE", "1"), queue, End::Idle).await;
}

async fn run_until(worker: &mut Command, queue: &str, end: End) {
    let qlessd = Qlessd::start().await;
    let mut child = worker
        .env("QLESSD_URL", &qlessd.base)
        .env("QUEUE", queue)
        .env("PUT_JOBS", "5")
        .env("WORK_SECONDS", "0.6")
        .env("HEARTBEAT_SECONDS", "0.2")
        .env("POP_WAIT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its lines, until it closes its stdout (exits).
    let (lines, said) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut output = Vec::new();
    let finished = |output: &[String]| {
        output
            .iter()
            .filter(|line| line.starts_with("completed ") || line.starts_with("failed "))
            .count()
    };
    // Go compiles before it runs; everything else is quick.
    let deadline = Instant::now() + Duration::from_secs(120);
    while finished(&output) < 5 {
        match said.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => output.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("jobs not finished in time:\n{output:#?}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().unwrap();
                panic!(
                    "the worker exited ({status}) early:\n{output:#?}\n{}",
                    stderr(&mut child)
                );
            }
        }
    }

    // Every job it put is complete, except the one without a name, which failed into
    // the same group in every language.
    let jids: Vec<&str> = output
        .iter()
        .filter_map(|line| line.strip_prefix("put "))
        .collect();
    assert_eq!(jids.len(), 5, "{output:#?}");
    let mut states = Vec::new();
    for jid in &jids {
        let job = qlessd.get(&format!("/v1/jobs/{jid}")).await;
        states.push(job["state"].as_str().unwrap().to_owned());
        if job["state"] == "complete" {
            let greeting = job["data"]["greeting"].as_str().unwrap_or_default();
            assert!(greeting.starts_with("Hello, "), "{job}");
        } else {
            assert_eq!(job["data"]["name"], "", "{job}");
            assert_eq!(job["failure"]["group"], "Greet-no-name", "{job}");
        }
    }
    states.sort();
    assert_eq!(
        states,
        ["complete", "complete", "complete", "complete", "failed"]
    );
    assert_eq!(
        qlessd.get("/v1/failures").await,
        serde_json::json!({"Greet-no-name": 1})
    );
    let counts = qlessd.get(&format!("/v1/queues/{queue}")).await;
    assert_eq!(
        (counts["waiting"].as_u64(), counts["running"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(
        output.iter().any(|line| line.starts_with("heartbeat ")),
        "no heartbeat during 0.6 s jobs with a 0.2 s interval:\n{output:#?}"
    );

    // SIGTERM: the worker stops by itself, cleanly, within its long poll. Idle: the
    // completion of the last job leased none and the next long poll finds none either,
    // so it exits, cleanly, with no signal.
    if end == End::Sigterm {
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match said.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => output.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) => match end {
                End::Sigterm => panic!("the worker ignored SIGTERM:\n{output:#?}"),
                End::Idle => panic!("the worker did not exit when idle:\n{output:#?}"),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "{status}: {output:#?}\n{}",
        stderr(&mut child)
    );
    let last = match end {
        End::Sigterm => "stopped",
        End::Idle => "idle, exiting",
    };
    assert_eq!(output.last().map(String::as_str), Some(last), "{output:#?}");
}

/// What the worker wrote to stderr (once it has exited).
fn stderr(child: &mut Child) -> String {
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    stderr
}

#[tokio::test]
async fn the_python_worker_completes_its_jobs_and_stops_on_sigterm() {
    if !toolchain("python3", "--version", "the Python example") {
        return;
    }
    let mut worker = Command::new("python3");
    worker.arg(examples().join("python/worker.py"));
    run_worker(worker, "python-example").await;
}

#[tokio::test]
async fn the_node_worker_completes_its_jobs_and_stops_on_sigterm() {
    if !toolchain("node", "--version", "the Node example") {
        return;
    }
    let mut worker = Command::new("node");
    worker.arg(examples().join("node/worker.mjs"));
    run_worker(worker, "node-example").await;
}

#[tokio::test]
async fn the_go_worker_completes_its_jobs_and_stops_on_sigterm() {
    if !toolchain("go", "version", "the Go example") {
        return;
    }
    let (_dir, binary) = build_go(".");
    run_worker(Command::new(binary), "go-example").await;
}

#[tokio::test]
async fn the_generated_python_client_worker_completes_its_jobs_and_stops_on_sigterm() {
    if !toolchain(
        "openapi-python-client",
        "--version",
        "the generated-client example",
    ) {
        return;
    }
    // Generated from the committed document, as examples/README.md says, but outside
    // the source tree.
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("qlessd-client");
    let generated = Command::new("openapi-python-client")
        .args(["generate", "--path"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json"))
        .arg("--output-path")
        .arg(&client)
        .output()
        .unwrap();
    assert!(
        generated.status.success(),
        "{}{}",
        String::from_utf8_lossy(&generated.stdout),
        String::from_utf8_lossy(&generated.stderr)
    );
    let mut worker = Command::new("python3");
    worker
        .arg(examples().join("python-sdk/worker.py"))
        .env("PYTHONPATH", &client);
    run_worker(worker, "sdk-example").await;
}
