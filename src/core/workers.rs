//! Worker commands (`lua/worker.lua`).

use redis::Value;

use super::command::{Args, Command};
use super::reply;
use super::{Error, Qless};
use crate::model::{WorkerJobs, WorkerSummary};

/// `workers`: every live worker, most recently seen first.
struct Workers;

impl Command for Workers {
    type Output = Vec<WorkerSummary>;

    fn name(&self) -> &'static str {
        "workers"
    }

    fn encode(&self, _: &mut Args) {}

    fn decode(&self, reply: Value) -> Result<Vec<WorkerSummary>, Error> {
        reply::json_vec(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `workers W`: the jobs one worker holds (empty lists for an unknown worker).
struct Worker<'a> {
    worker: &'a str,
}

impl Command for Worker<'_> {
    type Output = WorkerJobs;

    fn name(&self) -> &'static str {
        "workers"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.worker);
    }

    fn decode(&self, reply: Value) -> Result<WorkerJobs, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `worker.deregister`: forgets workers (their job sets stay).
struct Deregister<'a> {
    workers: &'a [String],
}

impl Command for Deregister<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "worker.deregister"
    }

    fn encode(&self, args: &mut Args) {
        args.extend(self.workers);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn only_deletes(&self) -> bool {
        true
    }
}

impl Qless {
    /// `workers`: every live worker, most recently seen first.
    pub async fn workers(&self, now: f64) -> Result<Vec<WorkerSummary>, Error> {
        self.run(now, &Workers).await
    }

    /// `workers W`: the jobs one worker holds (empty lists for an unknown worker).
    pub async fn worker(&self, now: f64, worker: &str) -> Result<WorkerJobs, Error> {
        self.run(now, &Worker { worker }).await
    }

    /// `worker.deregister`: forgets workers (their job sets stay).
    pub async fn worker_deregister(&self, now: f64, workers: &[String]) -> Result<(), Error> {
        self.run(now, &Deregister { workers }).await
    }
}
