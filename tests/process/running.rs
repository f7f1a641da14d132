//! A `qlessd` binary running in embedded mode for the length of a test, for tests
//! that drive it from outside (the examples, the README's walkthrough).

use std::process::{Child, Stdio};
use std::time::Duration;

use super::binary::{embedded, free_port, wait_for_status};

/// A running qlessd with its own data directory; killed (with its Redis) on drop.
pub struct Qlessd {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    _data: tempfile::TempDir,
}

impl Qlessd {
    /// Starts qlessd and waits until it is ready.
    pub async fn start() -> Qlessd {
        Qlessd::start_with(&[]).await
    }

    /// The same, with these environment variables (settings) added.
    pub async fn start_with(env: &[(&str, &str)]) -> Qlessd {
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = embedded(&data.path().join("data"), &format!("127.0.0.1:{port}"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
        Qlessd {
            child,
            base,
            _data: data,
        }
    }

    /// `GET path` as JSON.
    pub async fn get(&self, path: &str) -> serde_json::Value {
        let reply = crate::support::http()
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert!(
            reply.status().is_success(),
            "GET {path}: {}",
            reply.status()
        );
        reply.json().await.unwrap()
    }
}

impl Drop for Qlessd {
    fn drop(&mut self) {
        // SIGKILL: the embedded Redis follows (PR_SET_PDEATHSIG).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `program` can be run (a toolchain the test needs): see [`available`].
pub fn toolchain(program: &str, version_arg: &str, test: &str) -> bool {
    let found = std::process::Command::new(program)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    available(
        found,
        test,
        &format!("`{program}` is not installed (bash .ci/run installs it)"),
    )
}

/// `found`, when a test's toolchain is there. When it is not, the test skips, saying
/// `SKIPPED <test>: <missing>` in the test output, unless `QLESSD_REQUIRE_TOOLCHAINS`
/// is set (as `.ci/run` does), where it fails instead.
///
/// libtest captures what a test prints with `println!` and `eprintln!` and shows it
/// only for a failure; the notice is written to the process's standard error itself,
/// which it does not capture, so a plain `cargo test` shows every skip (it may land
/// between libtest's own lines, as tests run in parallel).
pub fn available(found: bool, test: &str, missing: &str) -> bool {
    if !found {
        assert!(
            std::env::var_os("QLESSD_REQUIRE_TOOLCHAINS").is_none(),
            "{test}: {missing}, and QLESSD_REQUIRE_TOOLCHAINS is set"
        );
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {missing}");
    }
    found
}

#[tokio::test]
async fn writes_without_a_body_need_no_content_type_over_real_http() {
    // As clients generated from the OpenAPI document send them: no body, no type.
    let qlessd = Qlessd::start().await;
    let http = crate::support::http();
    let put = http
        .post(format!("{}/v1/queues/q/jobs", qlessd.base))
        .json(&serde_json::json!({"jid": "j", "klass": "K"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status().as_u16(), 201);
    // A POST with `Content-Length: 0` and a DELETE with no length at all.
    let paused = http
        .post(format!("{}/v1/queues/q/pause", qlessd.base))
        .send()
        .await
        .unwrap();
    assert!(paused.status().is_success(), "{}", paused.status());
    assert_eq!(qlessd.get("/v1/queues/q").await["paused"], true);
    let cancelled = http
        .delete(format!("{}/v1/jobs/j", qlessd.base))
        .send()
        .await
        .unwrap();
    assert!(cancelled.status().is_success(), "{}", cancelled.status());
    let gone = http
        .get(format!("{}/v1/jobs/j", qlessd.base))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status().as_u16(), 404);
    // A body still needs its JSON type.
    let typeless = http
        .post(format!("{}/v1/queues/q/jobs", qlessd.base))
        .body(r#"{"klass": "K"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(typeless.status().as_u16(), 415);
}
