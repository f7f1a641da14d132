//! Leased jobs as the script hands them to the gateway: the stored fields, not job
//! objects.
//!
//! `pop` (with its `fields` argument), `pop.multi` and `pop.after` answer one flat
//! array: per job its jid, klass, queue, worker, priority, expires, retries,
//! remaining, data, tags, failure, spawned_from_jid, tracked (1 or 0), traceparent
//! and a workflow task's parents, then its history entries, its dependents and its dependencies, each list as a count
//! followed by its items (nil for an absent value). Building the JSON objects in Lua
//! cost Redis ~40k instructions a job, and Redis's one thread is shared by every
//! client, where gateways scale out; so the objects are built here, with the same
//! rules the script's JSON follows (`job_append` and `history_object` in
//! `lua/base.lua`), so that a job reads the same whichever way it was fetched.
//!
//! `push.pop` follows the jobs with a nil and then, per job in the same order, the
//! members `get` adds to it (`Extra.extras`), as a JSON object's text or nil: a push
//! delivery's body is the job as `GET /v1/jobs/{jid}` shows it.

use redis::Value;
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use super::Error;
use crate::model::wire::{self, JsonData};
use crate::model::{HistoryEntry, Job, JobState};

/// The jobs of a `fields` reply, in order.
pub(super) fn jobs(value: Value) -> Result<Vec<Job>, Error> {
    read(value).map(|(jobs, _)| jobs)
}

/// The jobs of a `push.pop` reply, in order, each with the members `get` adds and
/// which delivery of it its lease is.
pub(super) fn pushed_jobs(value: Value) -> Result<Vec<(Job, u64)>, Error> {
    let (jobs, mut fields) = read(value)?;
    jobs.into_iter()
        .map(|mut job| {
            if fields.0.as_slice().len() < 2 {
                return Err(Error::reply("a pushed job's members are missing"));
            }
            if let Some(text) = fields.next_text()? {
                stored_json(&text, |json| Extras::deserialize(json))?.add_to(&mut job);
            }
            let attempt = u64::try_from(fields.integer()?)
                .map_err(|_| Error::reply("a pushed job's attempt is not positive"))?;
            Ok((job, attempt))
        })
        .collect()
}

/// The leased jobs of a reply, and what follows them.
fn read(value: Value) -> Result<(Vec<Job>, Fields), Error> {
    let items = match value {
        Value::Array(items) => items,
        Value::Nil => Vec::new(),
        other => return Err(Error::reply(format!("expected leased jobs, got {other:?}"))),
    };
    let mut fields = Fields(items.into_iter());
    let mut jobs = Vec::new();
    while let Some(jid) = fields.next_text()? {
        jobs.push(fields.job(jid)?);
    }
    Ok((jobs, fields))
}

/// The members `get` adds to a job object beside those of a leased job's fields
/// (`Extra.extras` without `traced`), read as [`Job`] reads them from `get`'s JSON:
/// the same types, each absent when the job has none.
#[derive(Deserialize)]
struct Extras {
    progress: Option<JsonData>,
    result: Option<JsonData>,
    throttles: Option<Vec<String>>,
    backoff: Option<Json>,
    throttled: Option<String>,
    batch: Option<String>,
    workflow: Option<String>,
    start_by: Option<f64>,
    max_run: Option<f64>,
    partition: Option<String>,
}

impl Extras {
    fn add_to(self, job: &mut Job) {
        job.progress = self.progress;
        job.result = self.result;
        job.throttles = self.throttles;
        job.backoff = self.backoff;
        job.throttled = self.throttled;
        job.batch = self.batch;
        job.workflow = self.workflow;
        job.start_by = self.start_by;
        job.max_run = self.max_run;
        job.partition = self.partition;
    }
}

/// The reply's items, read in order.
struct Fields(std::vec::IntoIter<Value>);

impl Fields {
    /// The next text; `None` for nil, or at the end.
    fn next_text(&mut self) -> Result<Option<String>, Error> {
        match self.0.next() {
            None | Some(Value::Nil) => Ok(None),
            Some(Value::BulkString(bytes)) => text(bytes).map(Some),
            Some(Value::SimpleString(text)) => Ok(Some(text)),
            Some(Value::Int(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(Error::reply(format!("expected a job field, got {other:?}"))),
        }
    }

    /// The next text, which must be there.
    fn text(&mut self) -> Result<String, Error> {
        self.next_text()?
            .ok_or_else(|| Error::reply("a leased job's fields end early"))
    }

    fn integer(&mut self) -> Result<i64, Error> {
        match self.0.next() {
            Some(Value::Int(n)) => Ok(n),
            other => Err(Error::reply(format!("expected a count, got {other:?}"))),
        }
    }

    /// A counted list of texts.
    fn list(&mut self) -> Result<Vec<String>, Error> {
        let count = usize::try_from(self.integer()?).map_err(Error::reply)?;
        (0..count).map(|_| self.text()).collect()
    }

    /// The job whose jid was just read.
    fn job(&mut self, jid: String) -> Result<Job, Error> {
        let klass = self.text()?;
        let queue = self.text()?;
        let worker = self.text()?;
        let priority = cjson_number(self.next_text()?.as_deref());
        let expires = self.text()?.parse().map_err(Error::reply)?;
        let retries = cjson_number(self.next_text()?.as_deref()) as i64;
        let remaining = remaining(self.next_text()?.as_deref());
        let data = JsonData::from_stored(self.text()?);
        let tags = match self.next_text()?.as_deref() {
            None | Some("" | "[]" | "{}") => Vec::new(),
            Some(text) => stored_json(text, |json| wire::list(json))?,
        };
        let failure = match self.next_text()?.as_deref() {
            None | Some("" | "{}") => None,
            Some(text) => stored_json(text, |json| wire::object_or_empty(json))?,
        };
        let spawned_from_jid = self.next_text()?.filter(|jid| !jid.is_empty());
        let tracked = self.integer()? == 1;
        let traceparent = self.next_text()?;
        let parents = self.next_text()?.map(JsonData::from_stored);
        let history = self
            .list()?
            .iter()
            .filter_map(|entry| history_entry(entry).transpose())
            .collect::<Result<_, _>>()?;
        let mut dependents = self.list()?;
        dependents.sort_unstable();
        let mut dependencies = self.list()?;
        dependencies.sort_unstable();
        Ok(Job {
            jid,
            klass,
            state: JobState::Running,
            queue,
            worker,
            tracked,
            priority,
            expires,
            retries,
            remaining,
            data,
            tags,
            history,
            failure,
            spawned_from_jid,
            dependents,
            dependencies,
            progress: None,
            result: None,
            throttles: None,
            backoff: None,
            throttled: None,
            traceparent,
            batch: None,
            workflow: None,
            parents,
            start_by: None,
            max_run: None,
            partition: None,
        })
    }
}

/// A field's bytes as text. (Skipping the UTF-8 check for ASCII fields with
/// `from_utf8_unchecked` saved about 480 instructions a one-job pop, 0.4 % of a job's
/// gateway instructions on the worker path: under the 3 % that `unsafe` has to pay for,
/// so the checked form is used.)
fn text(bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(Error::reply)
}

/// A stored JSON text read with one of the `wire` rules (the whole text: trailing
/// bytes are an error, as they made the script's JSON unreadable).
fn stored_json<'a, T>(
    text: &'a str,
    read: impl FnOnce(&mut JsonReader<'a>) -> serde_json::Result<T>,
) -> Result<T, Error> {
    let mut json = serde_json::Deserializer::from_str(text);
    read(&mut json)
        .and_then(|value| json.end().map(|()| value))
        .map_err(|err| Error::reply(format!("{err}: {text}")))
}

type JsonReader<'a> = serde_json::Deserializer<serde_json::de::StrRead<'a>>;

/// A stored number as the script's JSON shows it: the text read as Lua's `tonumber`
/// would (0 when it is not a number), with cjson's 14 significant digits.
fn cjson_number(text: Option<&str>) -> f64 {
    let value: f64 = text
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0.0);
    fourteen_digits(value)
}

/// `%.14g`, as a number: whole numbers below 10^14 are unchanged.
fn fourteen_digits(value: f64) -> f64 {
    if value.fract() == 0.0 && value.abs() < 1e14 || !value.is_finite() {
        return value;
    }
    format!("{value:.13e}").parse().unwrap_or(value)
}

/// `remaining` as the script shows it: an integer text as it is, anything else floored.
fn remaining(text: Option<&str>) -> i64 {
    match text.map(str::parse::<i64>) {
        Some(Ok(n)) => n,
        _ => fourteen_digits(cjson_number(text).floor()) as i64,
    }
}

/// One stored history entry, `[when, what, {extra}]`, as the object clients see (the
/// extra keys plus `when` and `what`, which win); an object stored as such is read as
/// it is; anything else is left out, as the script's JSON leaves it out.
fn history_entry(stored: &str) -> Result<Option<HistoryEntry>, Error> {
    let invalid = |err: serde_json::Error| Error::reply(format!("{err}: {stored}"));
    match serde_json::from_str::<StoredEntry>(stored) {
        Ok(StoredEntry::Positional { when, what, extra }) => {
            let mut extra = match extra {
                Some(Json::Object(extra)) => extra,
                _ => Map::new(),
            };
            extra.remove("when");
            extra.remove("what");
            let required = |value: Option<Json>, name: &'static str| {
                value
                    .filter(|value| !value.is_null())
                    .ok_or_else(|| serde::de::Error::missing_field(name))
            };
            let when = required(when, "when")
                .and_then(wire::number)
                .map_err(invalid)?;
            let what = required(what, "what")
                .and_then(String::deserialize)
                .map_err(invalid)?;
            Ok(Some(HistoryEntry { when, what, extra }))
        }
        Ok(StoredEntry::Object(object)) => HistoryEntry::deserialize(Json::Object(object))
            .map(Some)
            .map_err(invalid),
        // Not JSON, or JSON of another shape.
        Err(_) => Ok(None),
    }
}

/// A stored history entry as written: the first three items of the script's array
/// (read straight into their places, without the array and the object the entry was
/// once rebuilt from: a third of the leased jobs' reading), or an object.
enum StoredEntry {
    Positional {
        when: Option<Json>,
        what: Option<Json>,
        extra: Option<Json>,
    },
    Object(Map<String, Json>),
}

impl<'de> Deserialize<'de> for StoredEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;

        impl<'de> serde::de::Visitor<'de> for EntryVisitor {
            type Value = StoredEntry;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a history entry (an array or an object)")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut items: A,
            ) -> Result<StoredEntry, A::Error> {
                let when = items.next_element()?;
                let what = if when.is_some() {
                    items.next_element()?
                } else {
                    None
                };
                let extra = if what.is_some() {
                    items.next_element()?
                } else {
                    None
                };
                while items.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(StoredEntry::Positional { when, what, extra })
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<StoredEntry, A::Error> {
                Map::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(StoredEntry::Object)
            }
        }

        deserializer.deserialize_any(EntryVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field is read as text whether it is ASCII or other UTF-8; bytes that are not
    /// UTF-8 make the reply an error.
    #[test]
    fn fields_are_read_as_text_only_when_they_are_utf8() {
        assert_eq!(super::text(b"job-1".to_vec()).unwrap(), "job-1");
        assert_eq!(
            super::text("café ☕".as_bytes().to_vec()).unwrap(),
            "café ☕"
        );
        assert!(super::text(vec![b'a', 0xff, b'b']).is_err());
        assert!(super::text(vec![0xc3]).is_err());
    }

    fn text(value: &str) -> Value {
        Value::BulkString(value.as_bytes().to_vec())
    }

    /// One job's fields, as the script lists them.
    fn fields(history: &[&str], dependents: &[&str]) -> Vec<Value> {
        let mut items = vec![
            text("j1"),
            text("k.Klass"),
            text("q"),
            text("w"),
            text("1.5"),
            text("1700000060.123"),
            text("5"),
            text("4"),
            text(r#"{"a":[1,2.50]}"#),
            text(r#"["t1"]"#),
            text("{}"),
            Value::Nil,
            Value::Int(0),
            Value::Nil,
            text(r#"{"fetch":{"jid":"f","state":"complete","result":null}}"#),
            Value::Int(history.len() as i64),
        ];
        items.extend(history.iter().map(|entry| text(entry)));
        items.push(Value::Int(dependents.len() as i64));
        items.extend(dependents.iter().map(|jid| text(jid)));
        items.push(Value::Int(0));
        items
    }

    #[test]
    fn a_job_reads_as_its_stored_fields_say() {
        let history = [
            r#"[1700000000,"put",{"q":"q"}]"#,
            r#"[1700000000,"popped",{"worker":"w"}]"#,
        ];
        let jobs = jobs(Value::Array(fields(&history, &["b", "a"]))).unwrap();
        let [job] = jobs.as_slice() else {
            panic!("one job: {jobs:?}")
        };
        let json = serde_json::to_value(job).unwrap();
        assert_eq!(json["jid"], "j1");
        assert_eq!(json["state"], "running");
        assert_eq!(json["priority"], 1.5);
        assert_eq!(json["expires"], 1700000060.123);
        assert_eq!(json["remaining"], 4);
        assert_eq!(
            serde_json::to_string(&job.data).unwrap(),
            r#"{"a":[1,2.50]}"#
        );
        assert_eq!(json["tags"], serde_json::json!(["t1"]));
        assert_eq!(json["failure"], Json::Null);
        assert_eq!(json["spawned_from_jid"], Json::Null);
        assert_eq!(json["dependents"], serde_json::json!(["a", "b"]));
        assert_eq!(json["parents"]["fetch"]["state"], "complete");
        assert_eq!(
            json["history"],
            serde_json::json!([
                {"when": 1700000000, "what": "put", "q": "q"},
                {"when": 1700000000, "what": "popped", "worker": "w"}
            ])
        );
    }

    #[test]
    fn history_entries_follow_the_scripts_rules() {
        // when and what win over extra keys of the same name; an entry without extra
        // keys is when and what alone; an object is taken as it is; others are left out.
        let entry = history_entry(r#"[5,"log",{"what":"x","k":1}]"#)
            .unwrap()
            .unwrap();
        assert_eq!((entry.when, entry.what.as_str()), (5.0, "log"));
        assert_eq!(
            entry.extra,
            serde_json::from_str::<Map<_, _>>(r#"{"k":1}"#).unwrap()
        );
        assert!(
            history_entry(r#"[6,"done"]"#)
                .unwrap()
                .unwrap()
                .extra
                .is_empty()
        );
        let object = history_entry(r#"{"when":7,"what":"put","q":"a"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(object.what, "put");
        assert!(history_entry("not json").unwrap().is_none());
        assert!(history_entry("7").unwrap().is_none());
        assert!(history_entry(r#""put""#).unwrap().is_none());
        assert!(
            history_entry(r#"[1]"#).is_err(),
            "an entry without `what` fails, as in JSON"
        );
        assert!(
            history_entry(r#"[null,"put"]"#).is_err(),
            "a null `when` is missing"
        );
        assert!(history_entry(r#"[1,7]"#).is_err(), "`what` is text");
        // A numeric text for `when`, a fourth item ignored, an extra that is not an
        // object dropped, and extra keys of any kind kept.
        let entry = history_entry(r#"["12.5","put",{"q":"a","n":[1,{"x":null}]},"more"]"#)
            .unwrap()
            .unwrap();
        assert_eq!((entry.when, entry.what.as_str()), (12.5, "put"));
        assert_eq!(
            entry.extra,
            serde_json::from_str::<Map<_, _>>(r#"{"q":"a","n":[1,{"x":null}]}"#).unwrap()
        );
        assert!(
            history_entry(r#"[3,"popped","w"]"#)
                .unwrap()
                .unwrap()
                .extra
                .is_empty()
        );
    }

    #[test]
    fn numbers_read_as_cjson_prints_them() {
        assert_eq!(cjson_number(Some("0")), 0.0);
        assert_eq!(cjson_number(Some(" 7 ")), 7.0);
        assert_eq!(cjson_number(Some("x")), 0.0);
        assert_eq!(cjson_number(None), 0.0);
        assert_eq!(cjson_number(Some("0.12345678901234567")), 0.12345678901235);
        assert_eq!(remaining(Some("3")), 3);
        assert_eq!(remaining(Some("2.7")), 2);
        assert_eq!(remaining(Some("-1")), -1);
        assert_eq!(remaining(None), 0);
    }

    #[test]
    fn a_pushed_job_carries_the_members_get_adds_after_its_fields() {
        let mut items = fields(&[], &[]);
        items.extend(fields(&[], &[]));
        items.push(Value::Nil);
        items.push(text(
            r#"{"throttles":["t"],"batch":"b1","start_by":1700000100,"partition":"acme","progress":"{\"p\":1}"}"#,
        ));
        items.push(Value::Int(3));
        items.push(Value::Nil);
        items.push(Value::Int(1));
        let jobs = pushed_jobs(Value::Array(items.clone())).unwrap();
        let [(with, 3), (without, 1)] = jobs.as_slice() else {
            panic!("two jobs, delivered a third and a first time: {jobs:?}")
        };
        assert_eq!(with.throttles.as_deref(), Some(&["t".to_owned()][..]));
        assert_eq!(with.batch.as_deref(), Some("b1"));
        assert_eq!(with.start_by, Some(1700000100.0));
        assert_eq!(with.partition.as_deref(), Some("acme"));
        assert_eq!(with.progress.as_ref().unwrap().get(), r#"{"p":1}"#);
        assert_eq!((with.workflow.as_ref(), with.max_run), (None, None));
        assert_eq!(
            (without.batch.as_ref(), without.throttles.as_ref()),
            (None, None)
        );
        items.pop();
        assert!(
            pushed_jobs(Value::Array(items.clone())).is_err(),
            "a job without its attempt"
        );
        items.pop();
        assert!(
            pushed_jobs(Value::Array(items)).is_err(),
            "a job without its members"
        );
        assert!(pushed_jobs(Value::Array(Vec::new())).unwrap().is_empty());
    }

    #[test]
    fn a_reply_cut_short_is_an_error_not_a_partial_job() {
        let mut items = fields(&[], &[]);
        items.truncate(9);
        assert!(jobs(Value::Array(items)).is_err());
        assert!(jobs(Value::Array(Vec::new())).unwrap().is_empty());
    }
}
