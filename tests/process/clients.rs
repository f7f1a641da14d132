//! Clients generated from the committed OpenAPI document, as a newcomer makes them:
//! the usual generators on their default settings (no option beyond the language, the
//! output directory and, where one is needed, the package name), and no header set by
//! hand. Each drives a worker program of `tests/clients/` against a real qlessd through
//! a job's life: a long poll that finds nothing, put, pop, heartbeat (its `expires` the
//! job's), complete with `pop`, fail, the failure listings, unfail, a tag added and
//! removed, a dependency added and removed, pause and unpause (body-less writes),
//! cancel, and a 404 and a 409 read as problems.
//!
//! A missing generator or toolchain skips the test, saying so (see
//! [`available`](super::running::available)); `.ci/run` installs them all and makes a
//! skip a failure.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::running::{Qlessd, available, toolchain};

/// What each worker prints, one line a step (each line's first word), in order.
const STEPS: [&str; 14] = [
    "waited",
    "put",
    "popped",
    "heartbeat",
    "completed",
    "failed",
    "failures",
    "unfailed",
    "tagged",
    "dependencies",
    "paused",
    "canceled",
    "conflict",
    "done",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn document() -> PathBuf {
    root().join("openapi/openapi.json")
}

/// The document for the receiving side of push delivery.
fn receiver_document() -> PathBuf {
    root().join("openapi/push-receiver.json")
}

fn worker_dir(name: &str) -> PathBuf {
    root().join("tests/clients").join(name)
}

/// Runs `command` to its end, failing the test with its output when it fails.
fn succeed(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// openapi-generator (the PyPI package `openapi-generator-cli`, which carries the
/// generator's jar and needs Java) and the other programs `needs`, each as
/// `(program, version argument)`.
fn openapi_generator_and(needs: &[(&str, &str)], test: &str) -> bool {
    toolchain("java", "-version", test)
        && toolchain("openapi-generator-cli", "version", test)
        && needs
            .iter()
            .all(|(program, version)| toolchain(program, version, test))
}

/// openapi-generator's `generator` on its defaults, writing into `out`.
fn openapi_generator(generator: &str, out: &Path) {
    openapi_generator_from(&document(), generator, out);
}

/// The same, from the document at `input`.
fn openapi_generator_from(input: &Path, generator: &str, out: &Path) {
    succeed(
        Command::new("openapi-generator-cli")
            .args(["generate", "-g", generator, "-i"])
            .arg(input)
            .arg("-o")
            .arg(out),
        &format!("openapi-generator {generator}"),
    );
}

/// Whether python3 can import every module of `modules` (a generated client's
/// dependencies).
fn python_modules(modules: &str, test: &str) -> bool {
    let found = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    available(
        found,
        test,
        &format!("python3 cannot import {modules} (bash .ci/run installs them)"),
    )
}

/// Runs `worker` against a fresh qlessd and checks it went through every step.
async fn run_worker(mut worker: Command, queue: &str) {
    let qlessd = Qlessd::start().await;
    let mut child = worker
        .env("QLESSD_URL", &qlessd.base)
        .env("QUEUE", queue)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the worker did not finish in two minutes");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    let steps: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(steps, STEPS, "{stdout}\n{stderr}");

    // What the worker left, seen through the API: the first job complete, the second
    // waiting again (unfailed, untagged), the queue not paused.
    let jid = |step: &str| {
        let line = stdout.lines().find(|line| line.starts_with(step)).unwrap();
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    let first = qlessd.get(&format!("/v1/jobs/{}", jid("put "))).await;
    assert_eq!(first["state"], "complete", "{first}");
    let second = qlessd.get(&format!("/v1/jobs/{}", jid("failed "))).await;
    assert_eq!(second["state"], "waiting", "{second}");
    assert_eq!(second["tags"], serde_json::json!([]), "{second}");
    let counts = qlessd.get(&format!("/v1/queues/{queue}")).await;
    assert_eq!(counts["paused"], false, "{counts}");
}

#[tokio::test]
async fn a_typescript_fetch_client_works_a_job_through_its_life() {
    let test = "a_typescript_fetch_client_works_a_job_through_its_life";
    if !openapi_generator_and(&[("tsc", "--version"), ("node", "--version")], test) {
        return;
    }
    // The worker beside the generated client, compiled with its tsconfig.json.
    let dir = tempfile::tempdir().unwrap();
    openapi_generator("typescript-fetch", &dir.path().join("client"));
    for file in ["worker.ts", "tsconfig.json"] {
        std::fs::copy(worker_dir("typescript").join(file), dir.path().join(file)).unwrap();
    }
    succeed(
        Command::new("tsc").arg("-p").arg(dir.path()),
        "tsc (typescript-fetch client and worker)",
    );
    let mut worker = Command::new("node");
    worker.arg(dir.path().join("out/worker.js"));
    run_worker(worker, "typescript-fetch").await;
}

/// Where Debian's `golang-*-dev` packages put their Go source (a GOPATH tree).
const DEBIAN_GOPATH: &str = "/usr/share/gocode";

#[tokio::test]
async fn a_go_client_works_a_job_through_its_life() {
    let test = "a_go_client_works_a_job_through_its_life";
    if !openapi_generator_and(&[("go", "version")], test) {
        return;
    }
    // The one module the generated client imports beyond the standard library.
    let validator = Path::new(DEBIAN_GOPATH).join("src/gopkg.in/validator.v2");
    if !available(
        validator.is_dir(),
        test,
        "gopkg.in/validator.v2 is not installed (Debian's golang-gopkg-validator.v2-dev; \
         bash .ci/run installs it)",
    ) {
        return;
    }
    // No module can be downloaded here, so the client is built the GOPATH way: the
    // generated package at its default import path in a GOPATH of its own, next to
    // Debian's Go source (GO111MODULE=off: no go.mod, no module proxy).
    let dir = tempfile::tempdir().unwrap();
    let gopath = dir.path().join("gopath");
    openapi_generator("go", &gopath.join("src/github.com/GIT_USER_ID/GIT_REPO_ID"));
    let binary = dir.path().join("worker");
    let gopaths = std::env::join_paths([gopath.as_path(), Path::new(DEBIAN_GOPATH)]).unwrap();
    succeed(
        Command::new("go")
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(worker_dir("go"))
            .env("GO111MODULE", "off")
            .env("GOPATH", gopaths)
            .env_remove("GOFLAGS"),
        "go build (go client and worker)",
    );
    run_worker(Command::new(binary), "go").await;
}

#[tokio::test]
async fn an_openapi_generator_python_client_works_a_job_through_its_life() {
    let test = "an_openapi_generator_python_client_works_a_job_through_its_life";
    if !openapi_generator_and(&[("python3", "--version")], test)
        || !python_modules("pydantic, dateutil, urllib3, typing_extensions", test)
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    openapi_generator("python", dir.path());
    let mut worker = Command::new("python3");
    worker
        .arg(worker_dir("python-openapi-generator").join("worker.py"))
        .env("PYTHONPATH", dir.path());
    run_worker(worker, "python-openapi-generator").await;
}

/// A receiver's types generated from `openapi/push-receiver.json` read a delivery's
/// body: a job with the fields a pull worker's pop leaves out (throttles, a partition).
#[tokio::test]
async fn a_push_receivers_generated_models_read_a_delivered_job() {
    let test = "a_push_receivers_generated_models_read_a_delivered_job";
    if !openapi_generator_and(&[("python3", "--version")], test)
        || !python_modules("pydantic, dateutil, urllib3, typing_extensions", test)
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    openapi_generator_from(&receiver_document(), "python", dir.path());

    let qlessd = Qlessd::start().await;
    let put = crate::support::http()
        .post(format!("{}/v1/queues/receiver/jobs", qlessd.base))
        .json(&serde_json::json!({
            "klass": "Greet",
            "data": {"name": "Ada"},
            "tags": ["vip", "eu"],
            "throttles": ["mail"],
            "partition": "tenant-7",
        }))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let jid = put.json::<serde_json::Value>().await.unwrap()["jid"]
        .as_str()
        .unwrap()
        .to_owned();
    // The body qlessd delivers is the job as GET shows it.
    let body = qlessd.get(&format!("/v1/jobs/{jid}")).await;

    let mut reader = Command::new("python3")
        .arg(worker_dir("push-receiver").join("parse.py"))
        .env("PYTHONPATH", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    reader
        .stdin
        .take()
        .unwrap()
        .write_all(body.to_string().as_bytes())
        .unwrap();
    let output = reader.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout,
        format!(
            "jid {jid}\nklass Greet\nstate waiting\ndata Ada\ntags vip,eu\n\
             throttles mail\npartition tenant-7\n"
        )
    );
}

#[tokio::test]
async fn an_openapi_python_client_works_a_job_through_its_life() {
    let test = "an_openapi_python_client_works_a_job_through_its_life";
    if !toolchain("openapi-python-client", "--version", test)
        || !python_modules("httpx, attrs", test)
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("client");
    succeed(
        Command::new("openapi-python-client")
            .args(["generate", "--path"])
            .arg(document())
            .arg("--output-path")
            .arg(&client),
        "openapi-python-client generate",
    );
    let mut worker = Command::new("python3");
    worker
        .arg(worker_dir("python-openapi-python-client").join("worker.py"))
        .env("PYTHONPATH", &client);
    run_worker(worker, "python-openapi-python-client").await;
}
