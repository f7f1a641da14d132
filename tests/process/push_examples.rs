//! The push receivers in `examples/`, each run as a newcomer runs it: a real qlessd
//! (allowed to push to loopback) delivers greeting jobs to it, and the test checks
//! through the API that each named one was completed with the greeting as its result
//! and the one without a name failed at once into `push-http-422`. The receiver must
//! verify: deliveries of a second queue, signed with that queue's secret, which the
//! receiver was not given, fail into `push-http-401`; and requests the test sends
//! itself, unsigned, signed too long ago, or with the body changed after signing,
//! are refused with 401.
//!
//! A receiver whose toolchain or Standard Webhooks package is missing is skipped with
//! a printed message (see [`available`]); `.ci/run` installs them all and makes such a
//! skip a failure.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::binary::free_port;
use super::examples::{build_go, examples};
use super::running::{Qlessd, available, toolchain};

/// A receiver example listening on loopback; killed on drop.
struct Receiver {
    child: Child,
    url: String,
    said: mpsc::Receiver<String>,
    output: Vec<String>,
}

impl Receiver {
    /// Starts `command` on `port` with `secret`, and waits until it listens.
    fn start_on(mut command: Command, port: u16, secret: &str) -> Receiver {
        let mut child = command
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .env("QLESSD_PUSH_SECRET", secret)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let (lines, said) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let mut receiver = Receiver {
            child,
            url: format!("http://127.0.0.1:{port}/"),
            said,
            output: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !receiver
            .output
            .iter()
            .any(|l| l.starts_with("listening on"))
        {
            match receiver
                .said
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => receiver.output.push(line),
                Err(_) => panic!("the receiver did not listen: {:#?}", receiver.output),
            }
        }
        receiver
    }

    /// Waits (up to 10 s) until it has said a line that `wanted` holds of; panics
    /// with its output if it does not.
    fn says(&mut self, what: &str, wanted: impl Fn(&str) -> bool) {
        // A line is printed before the answer is sent, but read from the pipe by
        // another thread: it may come a little after the job's end is seen.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.output.iter().any(|line| wanted(line)) {
            match self
                .said
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => self.output.push(line),
                Err(_) => panic!("the receiver never said {what}: {:#?}", self.output),
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Subscribes `queue` to `url`; returns its secret.
async fn subscribe(qlessd: &Qlessd, queue: &str, url: &str) -> String {
    let reply = crate::support::http()
        .put(format!("{}/v1/queues/{queue}/push", qlessd.base))
        .json(&json!({"url": url, "timeout": 10}))
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let answer: Value = reply.json().await.unwrap();
    assert_eq!(status, 201, "{answer}");
    answer["secret"].as_str().unwrap().to_owned()
}

async fn put(qlessd: &Qlessd, queue: &str, jid: &str, name: &str) {
    let reply = crate::support::http()
        .post(format!("{}/v1/queues/{queue}/jobs", qlessd.base))
        .json(&json!({"jid": jid, "klass": "Greet", "data": {"name": name}, "retries": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 201);
}

/// The job once it has ended (complete or failed), within 30 s.
async fn ended(qlessd: &Qlessd, jid: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = qlessd.get(&format!("/v1/jobs/{jid}")).await;
        if job["state"] == "complete" || job["state"] == "failed" {
            return job;
        }
        assert!(Instant::now() < deadline, "never delivered: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `webhook-signature` of a message as the Standard Webhooks specification
/// defines it, computed here: `v1,` and the base64 HMAC-SHA256 of
/// `<id>.<timestamp>.<body>` under the secret's key.
fn signature(secret: &str, id: &str, timestamp: u64, body: &str) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Sends `body` to the receiver with these Standard Webhooks headers (none when
/// `signed` is None); returns the status and the answer's text.
async fn deliver(receiver: &Receiver, body: &str, signed: Option<(u64, String)>) -> (u16, String) {
    let mut request = crate::support::http()
        .post(&receiver.url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some((timestamp, signature)) = signed {
        request = request
            .header("webhook-id", "direct")
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature);
    }
    let reply = request.send().await.unwrap();
    (reply.status().as_u16(), reply.text().await.unwrap())
}

/// Runs the receiver made by `command` against a fresh qlessd and checks what it does.
async fn run_receiver(command: Command, queue: &str) {
    let qlessd = Qlessd::start_with(&[("QLESSD_PUSH_ALLOW_PRIVATE", "true")]).await;
    // The port is known before the receiver starts, and it needs the secret.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let secret = subscribe(&qlessd, queue, &url).await;
    // A second queue pushed to the same receiver, whose secret it is never given.
    let forged = format!("{queue}-forged");
    let other_secret = subscribe(&qlessd, &forged, &url).await;
    assert_ne!(secret, other_secret);
    let mut receiver = Receiver::start_on(command, port, &secret);

    // Requests sent by the test: only a fresh signature over the very body verifies.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let job = json!({"jid": "direct", "klass": "Greet", "data": {"name": "Direct"}}).to_string();
    let signed = |at: u64, body: &str| Some((at, signature(&secret, "direct", at, body)));
    assert_eq!(deliver(&receiver, &job, None).await.0, 401, "unsigned");
    assert_eq!(
        deliver(&receiver, &job, signed(now - 600, &job)).await.0,
        401,
        "signed ten minutes ago"
    );
    let changed = job.replace("Direct", "Mallory");
    assert_eq!(
        deliver(&receiver, &changed, signed(now, &job)).await.0,
        401,
        "body changed after signing"
    );
    let (status, answer) = deliver(&receiver, &job, signed(now, &job)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap(),
        json!({"name": "Direct", "greeting": "Hello, Direct!"})
    );

    // Deliveries by qlessd: the same greetings as the pull workers, and one job
    // without a name, which the receiver refuses.
    let names = ["Ada", "Grace", "Linus", "Barbara", ""];
    for (i, name) in names.iter().enumerate() {
        put(&qlessd, queue, &format!("greet-{i}"), name).await;
    }
    put(&qlessd, &forged, "forged-0", "Eve").await;
    put(&qlessd, &forged, "forged-1", "Eve").await;
    for (i, name) in names.iter().enumerate() {
        let jid = format!("greet-{i}");
        let job = ended(&qlessd, &jid).await;
        if name.is_empty() {
            assert_eq!(job["state"], "failed", "{job}");
            assert_eq!(job["failure"]["group"], "push-http-422", "{job}");
            let message = job["failure"]["message"].as_str().unwrap();
            assert!(message.contains("no name to greet"), "{job}");
        } else {
            assert_eq!(job["state"], "complete", "{job}");
            assert_eq!(
                job["result"],
                json!({"name": name, "greeting": format!("Hello, {name}!")}),
                "{job}"
            );
            let said = format!("completed {jid}: Hello, {name}!");
            receiver.says(&said, |line| line == said);
        }
    }
    for jid in ["forged-0", "forged-1"] {
        let job = ended(&qlessd, jid).await;
        assert_eq!(job["state"], "failed", "{job}");
        assert_eq!(job["failure"]["group"], "push-http-401", "{job}");
    }
    receiver.says("it refused a delivery", |line| {
        line.starts_with("refused an unverified delivery")
    });
}

/// Whether `python3` can import `module`.
fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[tokio::test]
async fn the_python_receiver_verifies_and_greets() {
    let test = "the Python receiver example";
    if !toolchain("python3", "--version", test)
        || !available(
            python_has("standardwebhooks"),
            test,
            "the `standardwebhooks` Python package is not installed (bash .ci/run installs it)",
        )
    {
        return;
    }
    let mut receiver = Command::new("python3");
    receiver.arg(examples().join("python/receiver.py"));
    run_receiver(receiver, "python-push").await;
}

#[tokio::test]
async fn the_node_receiver_verifies_and_greets() {
    let test = "the Node receiver example";
    if !toolchain("node", "--version", test)
        || !available(
            examples()
                .join("node/node_modules/standardwebhooks/package.json")
                .exists(),
            test,
            "`npm ci` has not been run in examples/node (bash .ci/run runs it)",
        )
    {
        return;
    }
    let mut receiver = Command::new("node");
    receiver.arg(examples().join("node/receiver.mjs"));
    run_receiver(receiver, "node-push").await;
}

#[tokio::test]
async fn the_go_receiver_verifies_and_greets() {
    if !toolchain("go", "version", "the Go receiver example") {
        return;
    }
    let (_dir, binary) = build_go("./receiver");
    run_receiver(Command::new(binary), "go-push").await;
}
