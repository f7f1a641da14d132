//! Search (`/v1/search`): the filter that finds jobs, the page of jobs it finds, and
//! the bodies of the actions that change every job it matches.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{GroupName, Job, JobState, QueueName, Tag, WorkerName};

/// What a job must be to match: every field given must hold (none given matches
/// nothing: a search needs at least one of `queue`, `tag`, `worker`, `group`, or
/// `state` `failed` or `complete`, which name an index to walk). The query parameters
/// of `GET /v1/search` carry the same fields (`data` as JSON text there).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"queue": "emails", "state": "failed", "data": {"user.id": 42}}))]
pub struct SearchFilter {
    /// The job is in this queue (completed jobs are in none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueName>,
    /// The job is in this state. `running` is a job whose lock has not expired;
    /// `stalled` one whose lock expired (it still shows `running` until a pop hands it
    /// over) or that was timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// The job's class is exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::model::Text>)]
    pub klass: Option<String>,
    /// The job carries this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<Tag>,
    /// The job is held by this worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerName>,
    /// The job is failed, in this failure group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupName>,
    /// The job's last history entry is at or after this time (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub since: Option<f64>,
    /// The job's last history entry is at or before this time (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub until: Option<f64>,
    /// Every key's value equals the job's data at that key: a key is a dotted path
    /// into nested objects (`"user.id"`; a segment of digits also indexes an array,
    /// from 0), a value any JSON value (numbers compare by value, objects and arrays
    /// whole). At most 20 keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>, example = json!({"user.id": 42, "plan": "pro"}))]
    pub data: Option<Map<String, Value>>,
    /// The job's data (its JSON text) or its failure message contains this text
    /// (case-sensitive, 1 to 1000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 1000)]
    pub text: Option<String>,
}

/// A page of jobs found by `GET /v1/search`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"jobs": [], "cursor": "eyJ2IjoxLCJrIjoic2VhcmNoIn0",
    "examined": 2000, "done": false}))]
pub struct SearchResponse {
    /// The jobs that matched, as `GET /v1/jobs/{jid}` shows them, in the order of the
    /// index walked (a failure group oldest failure first, a queue's waiting jobs in
    /// pop order, any other index oldest entry first). Fewer than `limit`, even none,
    /// does not mean the search is over: see `done`.
    pub jobs: Vec<Job>,
    /// Where to go on: pass it back as `cursor` with the same filter. `null` once
    /// `done`.
    pub cursor: Option<String>,
    /// How many entries of the index this request looked at (at most the server's
    /// `--search-scan-limit`).
    pub examined: u64,
    /// Whether the whole index has been looked at: no job matches beyond this page.
    pub done: bool,
}

/// What `POST /v1/search/{action}` does to each job that matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchAction {
    /// A failed, running, stalled or scheduled job goes back into its queue, waiting
    /// (its worker, if any, loses it).
    Retry,
    /// A job that is not complete is canceled, unless a job depending on it stays.
    Cancel,
    /// A job goes into the queue `queue` (unless it is there already).
    Move,
    /// A failed job goes back into the queue it failed in, waiting.
    Unfail,
    /// A job that is not complete gets the priority `priority`.
    Priority,
    /// A job gets the tags `tags` it lacks.
    Tag,
    /// A job loses the tags `tags` it has.
    Untag,
}

impl SearchAction {
    /// The action's word, as the path and the script say it.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchAction::Retry => "retry",
            SearchAction::Cancel => "cancel",
            SearchAction::Move => "move",
            SearchAction::Unfail => "unfail",
            SearchAction::Priority => "priority",
            SearchAction::Tag => "tag",
            SearchAction::Untag => "untag",
        }
    }
}

/// Body of `POST /v1/search/{action}`: the filter, the action's own field (`queue` for
/// `move`, `priority` for `priority`, `tags` for `tag` and `untag`; the others take
/// none), and how to go on.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"filter": {"group": "smtp-timeout", "queue": "emails"},
    "dry_run": true}))]
pub struct SearchActionRequest {
    /// Which jobs: as the parameters of `GET /v1/search`.
    pub filter: SearchFilter,
    /// `move`: the queue the jobs go to.
    #[serde(default)]
    pub queue: Option<QueueName>,
    /// `priority`: the jobs' new priority (higher pops first).
    #[serde(default)]
    pub priority: Option<f64>,
    /// `tag` and `untag`: 1 to 100 tags.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100)]
    pub tags: Option<Vec<Tag>>,
    /// Count what would change, and change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Most jobs this request acts on, 1 to 500 (default 100).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The `cursor` of the previous answer for this filter and action, to go on.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// What one `POST /v1/search/{action}` request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"matched": 100, "changed": 98, "skipped": 2, "examined": 100,
    "cursor": "eyJ2IjoxLCJrIjoicmV0cnkifQ", "done": false}))]
pub struct SearchActionResponse {
    /// Jobs that matched the filter when this request ran.
    pub matched: u64,
    /// Jobs the action changed (with `dry_run`: would change).
    pub changed: u64,
    /// Jobs that matched but were left alone, the action not applying to them (see
    /// the actions).
    pub skipped: u64,
    /// Entries of the index this request looked at (at most `--search-scan-limit`).
    pub examined: u64,
    /// Where to go on: send it back with the same filter and action. `null` once
    /// `done`.
    pub cursor: Option<String>,
    /// Whether the whole index has been looked at.
    pub done: bool,
}
