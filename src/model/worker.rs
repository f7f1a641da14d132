//! Workers, as seen by the queue.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::wire;

/// A worker and how many jobs it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerSummary {
    /// Worker name.
    pub name: String,
    /// Jobs with an unexpired lock.
    pub jobs: i64,
    /// Jobs whose lock expired.
    pub stalled: i64,
}

/// The jobs a worker holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerJobs {
    /// Jids with an unexpired lock.
    #[serde(deserialize_with = "wire::list")]
    pub jobs: Vec<String>,
    /// Jids whose lock expired.
    #[serde(deserialize_with = "wire::list")]
    pub stalled: Vec<String>,
}
