//! Worker commands (`lua/worker.lua`).

use super::reply::{self, Args};
use super::{Error, Qless};
use crate::model::{WorkerJobs, WorkerSummary};

impl Qless {
    /// `workers`: every live worker, most recently seen first.
    pub async fn workers(&self, now: f64) -> Result<Vec<WorkerSummary>, Error> {
        reply::json_vec(self.call("workers", now, &[]).await?)
    }

    /// `workers W`: the jobs one worker holds (empty lists for an unknown worker).
    pub async fn worker(&self, now: f64, worker: &str) -> Result<WorkerJobs, Error> {
        let args = Args::new().arg(worker).into_vec();
        reply::json(self.call("workers", now, args).await?)
    }

    /// `worker.deregister`: forgets workers (their job sets stay).
    pub async fn worker_deregister(&self, now: f64, workers: &[String]) -> Result<(), Error> {
        reply::nothing(self.call("worker.deregister", now, workers).await?)
    }
}
