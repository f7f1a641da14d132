//! The batch-with-callback programs in `examples/`, each run as a newcomer runs it
//! against a real qlessd: it puts three `Thumbnail` jobs as a batch with an
//! `on_success` callback, works them, then works the callback and prints the batch's
//! summary from its data. The test checks the program's lines (the same in every
//! language) and its exit status, and through the API that the batch settled with its
//! callback fired, and every job, the callback's too, completed.
//!
//! A program whose toolchain is missing is skipped with a printed message (see
//! [`toolchain`]); `.ci/run` installs them all and makes such a skip a failure.

use std::collections::BTreeSet;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::examples::{build_go, examples};
use super::running::{Qlessd, toolchain};

/// Runs `program` to its end, within a deadline (it is killed past it).
fn run_to_end(program: &mut Command) -> Output {
    let child = program
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let (done, ended) = mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match ended.recv_timeout(Duration::from_secs(60)) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!("the program did not end within 60 s");
        }
    }
}

/// Runs `program` against a fresh qlessd and checks what it printed and did.
async fn run_batch_example(mut program: Command) {
    let qlessd = Qlessd::start().await;
    let output = run_to_end(
        program
            .env("QLESSD_URL", &qlessd.base)
            .env("POP_WAIT", "5")
            .env_remove("QLESSD_TOKEN"),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{}:\n{stdout}\n{stderr}",
        output.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}\n{stderr}");

    // `batch <bid>`: the batch is settled, its three jobs completed, its callback fired.
    let bid = lines[0].strip_prefix("batch ").expect(&stdout);
    let batch = qlessd.get(&format!("/v1/batches/{bid}")).await;
    assert_eq!(batch["state"], "settled", "{batch}");
    assert_eq!(batch["description"], "thumbnails of the holiday album");
    let counts = &batch["counts"];
    assert_eq!(
        (&counts["total"], &counts["completed"], &counts["failed"]),
        (&json!(3), &json!(3), &json!(0)),
        "{batch}"
    );
    let on_success = &batch["callbacks"]["on_success"];
    assert_eq!(on_success["state"], "fired", "{batch}");
    assert_eq!(on_success["queue"], "thumbnails-done", "{batch}");
    let jobs = batch["jobs"].as_array().unwrap();
    assert!(jobs.iter().all(|job| job["state"] == "complete"), "{batch}");
    let batch_jids: BTreeSet<&str> = jobs
        .iter()
        .map(|job| job["jid"].as_str().unwrap())
        .collect();

    // `completed <jid>`, once for each job of the batch, each with its result.
    let completed: BTreeSet<&str> = lines[1..4]
        .iter()
        .map(|line| line.strip_prefix("completed ").expect(&stdout))
        .collect();
    assert_eq!(completed, batch_jids, "{stdout}");
    let mut photos = BTreeSet::new();
    for jid in completed {
        let job = qlessd.get(&format!("/v1/jobs/{jid}")).await;
        assert_eq!(
            (&job["state"], &job["klass"]),
            (&json!("complete"), &json!("Thumbnail")),
            "{job}"
        );
        let photo = job["data"]["photo"].as_str().unwrap().to_owned();
        assert_eq!(
            job["result"],
            json!({"thumbnail": format!("thumb-{photo}")})
        );
        photos.insert(photo);
    }
    assert_eq!(photos.len(), 3, "each job has its own photo: {photos:?}");

    // `callback <jid>: 3 of 3 completed`: the callback job, completed, whose data holds
    // its own keys and the batch's summary.
    let callback = on_success["jid"].as_str().unwrap();
    assert_eq!(
        lines[4],
        format!("callback {callback}: 3 of 3 completed"),
        "{stdout}"
    );
    let job = qlessd.get(&format!("/v1/jobs/{callback}")).await;
    assert_eq!(
        (&job["state"], &job["klass"]),
        (&json!("complete"), &json!("ThumbnailsDone")),
        "{job}"
    );
    assert_eq!(job["data"]["album"], "holidays", "{job}");
    let summary = &job["data"]["batch"];
    assert_eq!(
        (
            &summary["bid"],
            &summary["total"],
            &summary["completed"],
            &summary["failed"]
        ),
        (&json!(bid), &json!(3), &json!(3), &json!(0)),
        "{job}"
    );

    // Nothing left behind in either queue.
    for queue in ["thumbnails", "thumbnails-done"] {
        let counts: Value = qlessd.get(&format!("/v1/queues/{queue}")).await;
        assert_eq!(
            (counts["waiting"].as_u64(), counts["running"].as_u64()),
            (Some(0), Some(0)),
            "{queue}: {counts}"
        );
    }
}

#[tokio::test]
async fn the_python_batch_example_works_its_batch_and_its_callback() {
    if !toolchain("python3", "--version", "the Python batch example") {
        return;
    }
    let mut program = Command::new("python3");
    program.arg(examples().join("python/batch.py"));
    run_batch_example(program).await;
}

#[tokio::test]
async fn the_node_batch_example_works_its_batch_and_its_callback() {
    if !toolchain("node", "--version", "the Node batch example") {
        return;
    }
    let mut program = Command::new("node");
    program.arg(examples().join("node/batch.mjs"));
    run_batch_example(program).await;
}

#[tokio::test]
async fn the_go_batch_example_works_its_batch_and_its_callback() {
    if !toolchain("go", "version", "the Go batch example") {
        return;
    }
    let (_dir, binary) = build_go("./batch");
    run_batch_example(Command::new(binary)).await;
}
