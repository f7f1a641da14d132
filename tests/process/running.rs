//! A `qlessd` binary running in embedded mode for the length of a test, for tests
//! that drive it from outside (the examples, the README's walkthrough).

use std::process::{Child, Stdio};
use std::time::Duration;

use super::binary::{free_port, spawn_embedded, wait_for_status};

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
        let data = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = spawn_embedded(&data.path().join("data"), port, Stdio::null);
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
        let reply = reqwest::get(format!("{}{path}", self.base)).await.unwrap();
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

/// Whether `program` can be run (a toolchain the test needs). Tests skip, saying so,
/// when it cannot, unless `QLESSD_REQUIRE_TOOLCHAINS` is set (as `.ci/run` does), where
/// a missing toolchain fails the test instead.
pub fn toolchain(program: &str, version_arg: &str, test: &str) -> bool {
    let found = std::process::Command::new(program)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var_os("QLESSD_REQUIRE_TOOLCHAINS").is_none(),
            "{test}: `{program}` is missing and QLESSD_REQUIRE_TOOLCHAINS is set"
        );
        println!("SKIPPED {test}: `{program}` is not installed (bash .ci/run installs it)");
    }
    found
}
