//! A 10,000-job batch worked off by 20 HTTP workers through two qlessd processes at
//! once, while one qlessd and then Redis itself are killed with SIGKILL and started
//! again: every job completes, and `on_success` and `on_complete` are each put exactly
//! once. Redis runs with `appendfsync always`, as a deployment that must not lose an
//! acknowledged write does.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::binary::{BINARY, free_port, wait_for_status};
use crate::support::topology::Node;

/// A qlessd on the test's Redis; killed (SIGKILL) on drop.
struct Gateway {
    child: Child,
    base: String,
}

impl Gateway {
    async fn start(redis: &Node) -> Gateway {
        let port = free_port();
        let child = Command::new(BINARY)
            .env("QLESSD_REDIS_URL", redis.url())
            .env("QLESSD_LISTEN", format!("127.0.0.1:{port}"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for_status(&format!("{base}/readyz"), 200, Duration::from_secs(20)).await;
        Gateway { child, base }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const JOBS: usize = 10_000;
const WORKERS: usize = 20;

/// The jids completed so far, by any worker.
type Completed = Arc<Mutex<HashSet<String>>>;

fn count(completed: &Completed) -> usize {
    completed.lock().unwrap().len()
}

/// One worker: pops from the gateway its number picks (whichever is up), completes
/// what it got, and goes on until the batch is done. Every failed request (a gateway
/// or Redis being down) is tried again: the job stays leased to this worker. A lease
/// whose answer was lost with a killed qlessd expires and goes to another worker.
async fn worker(
    number: usize,
    gateways: Arc<RwLock<Vec<String>>>,
    completed: Completed,
    deadline: Instant,
) {
    let http = crate::support::http();
    let name = format!("worker-{number}");
    let base = |attempt: usize| {
        let bases = gateways.read().unwrap();
        bases[(number + attempt) % bases.len()].clone()
    };
    let mut attempt = 0;
    while count(&completed) < JOBS {
        assert!(Instant::now() < deadline, "the batch took too long");
        let popped = http
            .post(format!("{}/v1/queues/rows/pop", base(attempt)))
            .json(&json!({"worker": name, "count": 5, "wait": 1}))
            .send()
            .await;
        let jobs: Vec<Value> = match popped {
            Ok(reply) if reply.status().is_success() => reply.json().await.unwrap(),
            _ => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        for job in jobs {
            let jid = job["jid"].as_str().unwrap().to_owned();
            loop {
                assert!(Instant::now() < deadline, "a completion never went through");
                let done = http
                    .post(format!("{}/v1/jobs/{jid}/complete", base(attempt)))
                    .json(&json!({"worker": name, "queue": "rows"}))
                    .send()
                    .await;
                match done {
                    Ok(reply) if reply.status().is_success() => {
                        completed.lock().unwrap().insert(jid);
                        break;
                    }
                    // Completed already (the answer to a completion that went through
                    // was lost with the process that sent it), or handed to another
                    // worker after its lease expired.
                    Ok(reply) if reply.status().as_u16() == 409 => {
                        let job: Value = http
                            .get(format!("{}/v1/jobs/{jid}", base(attempt)))
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        if job["state"] == "complete" {
                            completed.lock().unwrap().insert(jid);
                        }
                        break;
                    }
                    _ => {
                        attempt += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ten_thousand_job_batch_survives_sigkill_of_qlessd_and_redis_and_fires_once() {
    let mut redis = Node::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let first = Gateway::start(&redis).await;
    let second = Gateway::start(&redis).await;
    let http = crate::support::http();
    // Short leases, so that one whose answer died with a qlessd is handed on soon.
    let set = http
        .put(format!("{}/v1/config/heartbeat", first.base))
        .json(&json!({"value": 5}))
        .send()
        .await
        .unwrap();
    assert!(set.status().is_success(), "{}", set.text().await.unwrap());
    let jobs: Vec<Value> = (0..JOBS)
        .map(|n| json!({"queue": "rows", "klass": "Row", "data": {"n": n}}))
        .collect();
    let created: Value = http
        .post(format!("{}/v1/batches", first.base))
        .json(&json!({
            "description": "crash test",
            "jobs": jobs,
            "on_success": {"queue": "cb", "klass": "Success", "jid": "cb-success"},
            "on_complete": {"queue": "cb", "klass": "Complete", "jid": "cb-complete"}
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bid = created["bid"].as_str().expect("a bid").to_owned();
    assert_eq!(created["jids"].as_array().unwrap().len(), JOBS);

    let gateways = Arc::new(RwLock::new(vec![first.base.clone(), second.base.clone()]));
    let completed: Completed = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(600);
    let workers: Vec<_> = (0..WORKERS)
        .map(|number| {
            tokio::spawn(worker(
                number,
                gateways.clone(),
                completed.clone(),
                deadline,
            ))
        })
        .collect();

    // A third of the way: the first qlessd dies mid-flight; a new one takes its place.
    let reached = async |count: usize| {
        while self::count(&completed) < count {
            assert!(Instant::now() < deadline, "stuck before {count}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    reached(JOBS / 3).await;
    drop(first);
    let third = Gateway::start(&redis).await;
    gateways.write().unwrap()[0] = third.base.clone();
    // Two thirds: Redis dies (SIGKILL) and comes back from its append-only file.
    reached(2 * JOBS / 3).await;
    redis.kill();
    redis.restart();
    for handle in workers {
        handle.await.unwrap();
    }

    let batch: Value = loop {
        let shown: Value = http
            .get(format!("{}/v1/batches/{bid}", second.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if shown["state"] == "settled" || Instant::now() > deadline {
            break shown;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(batch["state"], "settled", "{batch}");
    assert_eq!(batch["counts"]["completed"], JOBS, "{batch}");
    assert_eq!(batch["counts"]["failed"], 0);
    assert_eq!(batch["callbacks"]["on_success"]["state"], "fired");

    // Each callback was put once: one job each in `cb`, each with one put in its
    // history, and the summary of all 10,000.
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let waiting: Vec<String> = redis::cmd("ZRANGE")
        .arg("ql:q:cb-work")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let mut waiting = waiting;
    waiting.sort();
    assert_eq!(waiting, ["cb-complete", "cb-success"]);
    for jid in ["cb-success", "cb-complete"] {
        let job: Value = http
            .get(format!("{}/v1/jobs/{jid}", second.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let puts = job["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["what"] == "put")
            .count();
        assert_eq!(puts, 1, "{jid}: {job}");
        assert_eq!(job["data"]["batch"]["completed"], JOBS);
    }
    let done: usize = redis::cmd("ZCARD")
        .arg("ql:completed")
        .query(&mut conn)
        .unwrap();
    assert_eq!(done, JOBS, "every job completed once, none lost");
    drop(third);
    drop(second);
}
