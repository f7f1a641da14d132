//! Jobs as the API shows them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::wire;

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Ready to be popped.
    Waiting,
    /// Waiting for its delay to pass.
    Scheduled,
    /// Waiting for other jobs to complete.
    Depends,
    /// Leased by a worker.
    Running,
    /// Its lock expired or it was timed out; the next pop hands it to a worker.
    Stalled,
    /// Failed; listed in its failure group.
    Failed,
    /// Completed (kept until purged by `jobs-history` / `jobs-history-count`).
    Complete,
}

impl JobState {
    /// The state's word, as the script stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Scheduled => "scheduled",
            JobState::Depends => "depends",
            JobState::Running => "running",
            JobState::Stalled => "stalled",
            JobState::Failed => "failed",
            JobState::Complete => "complete",
        }
    }
}

impl PartialEq<&str> for JobState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "jid": "8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f", "klass": "email.Send",
    "state": "running", "queue": "emails", "worker": "worker-1", "tracked": false,
    "priority": 0, "expires": 1700000060, "retries": 5, "remaining": 5,
    "data": {"to": "a@example.com"}, "tags": ["signup"],
    "history": [{"when": 1700000000, "what": "put", "q": "emails"},
                {"when": 1700000000, "what": "popped", "worker": "worker-1"}],
    "failure": null, "spawned_from_jid": null, "dependents": [], "dependencies": []
}))]
pub struct Job {
    /// The job id.
    pub jid: String,
    /// The class (handler name) a worker runs it with.
    pub klass: String,
    /// Current state.
    pub state: JobState,
    /// Current queue; empty once complete.
    pub queue: String,
    /// The worker holding it; empty when none.
    pub worker: String,
    /// Whether the job is tracked (its transitions are published).
    pub tracked: bool,
    /// Higher pops first.
    #[serde(
        deserialize_with = "wire::number",
        serialize_with = "wire::whole_when_possible"
    )]
    pub priority: f64,
    /// Lock expiry, seconds since the epoch; 0 when not leased.
    #[serde(
        deserialize_with = "wire::number",
        serialize_with = "wire::whole_when_possible"
    )]
    pub expires: f64,
    /// Retry budget per queue.
    #[serde(deserialize_with = "wire::integer")]
    pub retries: i64,
    /// Retries left.
    #[serde(deserialize_with = "wire::integer")]
    pub remaining: i64,
    /// The payload: any JSON value, exactly as it was put.
    #[schema(value_type = serde_json::Value)]
    pub data: wire::JsonData,
    /// Tags, in the order they were added.
    #[serde(deserialize_with = "wire::list")]
    pub tags: Vec<String>,
    /// What happened to the job, oldest first.
    #[serde(deserialize_with = "wire::list")]
    pub history: Vec<HistoryEntry>,
    /// The last failure, if any (kept until the job completes).
    #[serde(deserialize_with = "wire::object_or_empty")]
    pub failure: Option<Failure>,
    /// The recurring job that spawned it, if any.
    #[serde(deserialize_with = "wire::string_or_false")]
    pub spawned_from_jid: Option<String>,
    /// Jobs waiting for this one.
    #[serde(deserialize_with = "wire::list")]
    pub dependents: Vec<String>,
    /// Jobs this one waits for.
    #[serde(deserialize_with = "wire::list")]
    pub dependencies: Vec<String>,
    /// The progress its worker last reported with a heartbeat (any JSON value), apart
    /// from `data`. Shown by `GET /v1/jobs/{jid}`; absent when none was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub progress: Option<wire::JsonData>,
    /// The result its worker completed it with (any JSON value), apart from `data`;
    /// kept as long as the job is. Shown by `GET /v1/jobs/{jid}`; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub result: Option<wire::JsonData>,
    /// The throttles it holds while running. Shown by `GET /v1/jobs/{jid}`; absent
    /// when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttles: Option<Vec<String>>,
    /// Its own retry backoff policy, when it was put with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::model::Backoff>)]
    pub backoff: Option<Value>,
    /// The throttle it waits for room in, while its pop is held back by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled: Option<String>,
    /// The job's trace: the W3C `traceparent` its put carried (or, with the gateway
    /// exporting spans, that of the put's own span). Send it as the `traceparent`
    /// header of the requests about the job (heartbeat, complete, fail) to continue
    /// the producer's trace. Absent when the put carried none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The batch it belongs to (`/v1/batches/{bid}`); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The workflow it is a task of (`/v1/workflows/{wid}`); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// A workflow task's parents once they are done, by task name: each one's `jid`,
    /// `state` and `result` (null when it completed without one). Absent for a job
    /// of no workflow and for a task not yet released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parents: Option<wire::JsonData>,
    /// Unix time by which it must have been popped, else it fails into the group
    /// `expired`; absent when none (or once unfailed or put again without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_by: Option<f64>,
    /// Seconds it may run from its pop; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run: Option<f64>,
    /// Its partition in a fair queue; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
}

/// One history entry: `when` and `what`, plus what the event recorded (`q` for puts,
/// `worker` for pops and failures, `group` for failures, or the caller's data for log
/// entries). The schema declares the fields the script writes and lets others come
/// (`additionalProperties`), since a log entry carries the caller's own fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryEntry {
    /// Seconds since the epoch.
    #[serde(serialize_with = "wire::whole_when_possible")]
    pub when: f64,
    /// `put`, `popped`, `done`, `failed`, `timed-out`, or a logged message.
    pub what: String,
    /// Everything else the entry carries.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl utoipa::PartialSchema for HistoryEntry {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
        let text = |description: &str| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(description))
        };
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "One history entry: `when` and `what`, plus what the event recorded. \
                 Entries the server writes carry only the fields below; a log entry \
                 (`POST /v1/jobs/{jid}/log`) also carries the fields of the object it \
                 was logged with, hence `additionalProperties`.",
            ))
            .property(
                "when",
                ObjectBuilder::new()
                    .schema_type(Type::Number)
                    .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                        utoipa::openapi::KnownFormat::Double,
                    )))
                    .description(Some("Seconds since the epoch (fractions allowed).")),
            )
            .required("when")
            .property(
                "what",
                text("`put`, `popped`, `done`, `failed`, `timed-out`, or a logged message."),
            )
            .required("what")
            .property("q", text("`put`: the queue the job was put in."))
            .property(
                "worker",
                text("`popped`: the worker that leased the job; `failed`: the worker that failed it."),
            )
            .property("group", text("`failed`: the failure group."))
            .additional_properties(Some(AdditionalProperties::FreeForm(true)))
            .examples([serde_json::json!({"when": 1700000000, "what": "put", "q": "emails"})])
            .into()
    }
}

impl utoipa::ToSchema for HistoryEntry {}

impl<'de> Deserialize<'de> for HistoryEntry {
    /// By hand, because `#[serde(flatten)]` buffers every entry before reading it, and
    /// each job in a reply carries a few entries.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Number(f64);

        impl<'de> Deserialize<'de> for Number {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                wire::number(d).map(Number)
            }
        }

        struct EntryVisitor;

        impl<'de> serde::de::Visitor<'de> for EntryVisitor {
            type Value = HistoryEntry;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a history entry (an object with `when` and `what`)")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<HistoryEntry, A::Error> {
                let (mut when, mut what, mut extra) = (None, None, Map::new());
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "when" => when = Some(map.next_value::<Number>()?.0),
                        "what" => what = Some(map.next_value::<String>()?),
                        _ => {
                            extra.insert(key, map.next_value::<Value>()?);
                        }
                    }
                }
                Ok(HistoryEntry {
                    when: when.ok_or_else(|| serde::de::Error::missing_field("when"))?,
                    what: what.ok_or_else(|| serde::de::Error::missing_field("what"))?,
                    extra,
                })
            }
        }

        deserializer.deserialize_map(EntryVisitor)
    }
}

/// Why a job failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Failure {
    /// The failure group (a kind of failure).
    pub group: String,
    /// The message given by the worker.
    pub message: String,
    /// When it failed (seconds since the epoch).
    #[serde(
        deserialize_with = "wire::number",
        serialize_with = "wire::whole_when_possible"
    )]
    pub when: f64,
    /// The worker that failed it; empty when the job failed by running out of retries.
    #[serde(default)]
    pub worker: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_entries_keep_what_they_carry_besides_when_and_what() {
        let entry: HistoryEntry =
            serde_json::from_str(r#"{"q":"emails","when":"17.5","what":"put","n":[1,2]}"#).unwrap();
        assert_eq!(entry.when, 17.5);
        assert_eq!(entry.what, "put");
        assert_eq!(entry.extra["q"], "emails");
        assert_eq!(entry.extra["n"], serde_json::json!([1, 2]));
        let back = serde_json::to_value(&entry).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"when": 17.5, "what": "put", "q": "emails", "n": [1, 2]})
        );
    }

    #[test]
    fn a_history_entry_without_what_or_with_a_bad_when_is_refused() {
        assert!(serde_json::from_str::<HistoryEntry>(r#"{"when":1}"#).is_err());
        assert!(serde_json::from_str::<HistoryEntry>(r#"{"when":true,"what":"x"}"#).is_err());
        let null_when: HistoryEntry = serde_json::from_str(r#"{"when":null,"what":"x"}"#).unwrap();
        assert_eq!(null_when.when, 0.0);
    }
}
