//! Workers, as seen by the queue.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::wire;

/// A worker and how many jobs it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "worker-1", "running": 3, "stalled": 0}))]
pub struct WorkerSummary {
    /// Worker name.
    pub name: String,
    /// How many jobs it holds with an unexpired lock.
    // The script's reply calls it `jobs`.
    #[serde(alias = "jobs")]
    pub running: i64,
    /// How many jobs it holds whose lock expired.
    pub stalled: i64,
}

/// The jobs a worker holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jids": ["8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f"], "stalled": []}))]
pub struct WorkerJobs {
    /// Jids it holds with an unexpired lock.
    // The script's reply calls them `jobs`.
    #[serde(deserialize_with = "wire::list", alias = "jobs")]
    pub jids: Vec<String>,
    /// Jids whose lock expired.
    #[serde(deserialize_with = "wire::list")]
    pub stalled: Vec<String>,
}
