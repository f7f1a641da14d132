//! Search commands (`lua/search.lua`, extension): finding jobs by a filter, and acting
//! on every job that matches, one bounded script call at a time. Each call walks at
//! most `scan` entries of the smallest index the filter allows and answers the
//! script's own cursor (JSON text) for the next call; what the cursor holds is the
//! script's business, and the gateway hands it back as it came.

use redis::Value;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::command::{Args, Command};
use super::{Error, Qless, reply};
use crate::model::{Job, SearchAction, SearchFilter};

/// One page of a search: the jobs that matched, and where the next call goes on.
#[derive(Debug)]
pub struct Found {
    pub jobs: Vec<Job>,
    /// The script's cursor (JSON text); `None` once the index was walked to its end.
    pub cursor: Option<String>,
    /// Index entries looked at.
    pub examined: u64,
    pub done: bool,
}

/// What one call of a bulk action did.
#[derive(Debug)]
pub struct Acted {
    pub matched: u64,
    pub changed: u64,
    pub skipped: u64,
    pub examined: u64,
    /// The script's cursor (JSON text); `None` once done.
    pub cursor: Option<String>,
    pub done: bool,
}

/// A bulk action with its argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Bulk {
    Retry,
    Cancel,
    Move(String),
    Unfail,
    Priority(f64),
    Tag(Vec<String>),
    Untag(Vec<String>),
}

impl Bulk {
    /// The action's word.
    pub fn action(&self) -> SearchAction {
        match self {
            Bulk::Retry => SearchAction::Retry,
            Bulk::Cancel => SearchAction::Cancel,
            Bulk::Move(_) => SearchAction::Move,
            Bulk::Unfail => SearchAction::Unfail,
            Bulk::Priority(_) => SearchAction::Priority,
            Bulk::Tag(_) => SearchAction::Tag,
            Bulk::Untag(_) => SearchAction::Untag,
        }
    }

    /// The action's argument as the script takes it (`''` for none).
    pub fn value(&self) -> String {
        match self {
            Bulk::Retry | Bulk::Cancel | Bulk::Unfail => String::new(),
            Bulk::Move(queue) => queue.clone(),
            Bulk::Priority(priority) => priority.to_string(),
            Bulk::Tag(tags) | Bulk::Untag(tags) => super::command::json_list(tags),
        }
    }
}

/// How far one call goes: at most `limit` matching jobs, at most `scan` index entries.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub limit: u32,
    pub scan: u32,
}

/// The filter as the script reads it. A filter always serializes (its data is a JSON
/// object already); should it not, the empty text is refused by the script.
fn filter_text(filter: &SearchFilter) -> String {
    serde_json::to_string(filter).unwrap_or_default()
}

/// The script's answers, with its cursor kept as the JSON text it is.
#[derive(Deserialize)]
struct FoundReply {
    #[serde(deserialize_with = "crate::model::wire::list")]
    jobs: Vec<Job>,
    cursor: Option<Box<RawValue>>,
    examined: u64,
    done: bool,
}

#[derive(Deserialize)]
struct ActedReply {
    matched: u64,
    changed: u64,
    skipped: u64,
    examined: u64,
    cursor: Option<Box<RawValue>>,
    done: bool,
}

/// `search`: a page of the jobs matching a filter.
struct Search<'a> {
    filter: &'a SearchFilter,
    bounds: Bounds,
    cursor: Option<&'a str>,
}

impl Command for Search<'_> {
    type Output = Found;

    fn name(&self) -> &'static str {
        "search"
    }

    fn encode(&self, args: &mut Args) {
        args.push(filter_text(self.filter))
            .push(self.bounds.limit)
            .push(self.bounds.scan);
        if let Some(cursor) = self.cursor {
            args.push(cursor);
        }
    }

    fn decode(&self, reply: Value) -> Result<Found, Error> {
        let found: FoundReply = reply::json(reply)?;
        Ok(Found {
            jobs: found.jobs,
            cursor: found.cursor.map(|raw| raw.get().to_owned()),
            examined: found.examined,
            done: found.done,
        })
    }

    fn writes(&self) -> bool {
        false
    }

    /// It looks at up to `scan` jobs: a group never waits behind more than one.
    fn weight(&self) -> usize {
        self.bounds.scan as usize
    }
}

/// `search.act`: a bulk action on the jobs matching a filter, one slice.
struct SearchAct<'a> {
    bulk: &'a Bulk,
    filter: &'a SearchFilter,
    bounds: Bounds,
    dry_run: bool,
    cursor: Option<&'a str>,
}

impl Command for SearchAct<'_> {
    type Output = Acted;

    fn name(&self) -> &'static str {
        "search.act"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.bulk.action().as_str())
            .push(self.bulk.value())
            .push(filter_text(self.filter))
            .push(self.bounds.limit)
            .push(self.bounds.scan)
            .push(if self.dry_run { "1" } else { "0" });
        if let Some(cursor) = self.cursor {
            args.push(cursor);
        }
    }

    fn decode(&self, reply: Value) -> Result<Acted, Error> {
        let acted: ActedReply = reply::json(reply)?;
        Ok(Acted {
            matched: acted.matched,
            changed: acted.changed,
            skipped: acted.skipped,
            examined: acted.examined,
            cursor: acted.cursor.map(|raw| raw.get().to_owned()),
            done: acted.done,
        })
    }

    fn writes(&self) -> bool {
        !self.dry_run
    }

    fn weight(&self) -> usize {
        self.bounds.scan as usize
    }
}

impl Qless {
    /// `search`: up to `bounds.limit` jobs matching `filter`, having looked at no more
    /// than `bounds.scan` entries of its smallest index, from `cursor` (the script's,
    /// from an earlier page of the same filter) or from the start.
    pub async fn search(
        &self,
        now: f64,
        filter: &SearchFilter,
        bounds: Bounds,
        cursor: Option<&str>,
    ) -> Result<Found, Error> {
        self.run(
            now,
            &Search {
                filter,
                bounds,
                cursor,
            },
        )
        .await
    }

    /// `search.act`: walks as [`search`](Self::search) does and does `bulk` to the
    /// jobs that matched (with `dry_run`, only counts them), in one call.
    pub async fn search_act(
        &self,
        now: f64,
        bulk: &Bulk,
        filter: &SearchFilter,
        bounds: Bounds,
        dry_run: bool,
        cursor: Option<&str>,
    ) -> Result<Acted, Error> {
        self.run(
            now,
            &SearchAct {
                bulk,
                filter,
                bounds,
                dry_run,
                cursor,
            },
        )
        .await
    }
}
