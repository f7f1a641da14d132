//! Request and response types of the HTTP API: serde for the wire, utoipa for the
//! OpenAPI document, nothing else. `wire` adapts the script's cjson output (`{}` for
//! empty lists, JSON text for payloads) to these regular shapes.

mod admin_api;
mod batch_api;
mod job;
mod jobs_api;
mod leasing_api;
mod names;
mod page;
mod partitions;
mod problem;
mod push_api;
mod queue;
mod queues_api;
mod recurring;
mod search_api;
mod text;
mod throttle;
pub mod wire;
mod worker;

pub use admin_api::*;
pub use batch_api::*;
pub use job::{Failure, HistoryEntry, Job, JobState};
pub use jobs_api::*;
pub use leasing_api::*;
pub use names::PartitionName;
pub use names::{
    BatchId, GroupName, IdempotencyKey, Jid, Name, NameError, NamespaceName, OptionName, QueueName,
    Tag, TaskName, ThrottleName, TokenName, WorkerName, WorkflowId, WorkflowName, is_blank,
};
pub use page::PageQuery;
pub use partitions::{Partition, PartitionsQuery, QueuePartitions, SetPartitionsRequest};
pub use problem::{
    Health, PayloadTooLarge, Problem, Unavailable, UnsupportedMediaType, problem_example,
};
pub use push_api::*;
pub use queue::{
    FailedJobs, FailureSummary, JidPage, QueueCounts, QueueStats, SweepReport, TimingStats,
};
pub use queues_api::*;
pub use recurring::RecurringJob;
pub use search_api::*;
pub use text::Text;
pub use throttle::{SetThrottleRequest, Throttle, ThrottleRate};
pub use worker::{WorkerJobs, WorkerSummary};
