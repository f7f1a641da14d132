//! Recurring-job commands (`lua/recurring.lua`).

use redis::Value;

use super::command::{Args, Command, Subject, json_list};
use super::reply;
use super::{Error, Qless};
use crate::model::RecurringJob;

/// Arguments of `recur`.
#[derive(Debug, Clone, Default)]
pub struct RecurArgs {
    pub queue: String,
    pub jid: String,
    pub klass: String,
    /// JSON text.
    pub data: String,
    /// Seconds between spawns (> 0); unused with `cron`.
    pub interval: f64,
    /// Seconds from now until the first spawn; unused with `cron`.
    pub offset: f64,
    /// A cron schedule instead of the interval.
    pub cron: Option<CronSpec>,
    pub priority: Option<f64>,
    pub tags: Option<Vec<String>>,
    pub retries: Option<i64>,
    pub backlog: Option<i64>,
    /// Each child must be popped within this many seconds of its spawn
    /// (`lua/deadlines.lua`'s `start_by`).
    pub start_within: Option<f64>,
    /// Each child's `max_run`.
    pub max_run: Option<f64>,
    /// Each child's partition (`lua/partitions.lua`).
    pub partition: Option<String>,
}

/// A cron schedule as the script stores it: the expression, its zone, and its first
/// fire times (whole seconds, ascending), computed by [`crate::cron`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CronSpec {
    pub expression: String,
    pub timezone: String,
    pub ticks: Vec<i64>,
}

/// A cron template whose stored ticks run low (`recur.cron.due`).
#[derive(Debug, Clone, PartialEq)]
pub struct CronDue {
    pub jid: String,
    pub cron: String,
    pub timezone: String,
    /// How many ticks are stored.
    pub stored: usize,
    /// The latest stored tick.
    pub last: Option<f64>,
}

/// Changes for `recur.update`; unset fields stay as they are.
#[derive(Debug, Clone, Default)]
pub struct RecurUpdate {
    pub priority: Option<f64>,
    pub interval: Option<f64>,
    pub retries: Option<i64>,
    /// JSON text.
    pub data: Option<String>,
    pub klass: Option<String>,
    pub queue: Option<String>,
    pub backlog: Option<i64>,
    /// A new cron schedule (replaces the interval or the previous schedule).
    pub cron: Option<CronSpec>,
    /// A new `start_within` of the children; `Some(None)` removes it.
    pub start_within: Option<Option<f64>>,
    /// A new `max_run` of the children; `Some(None)` removes it.
    pub max_run: Option<Option<f64>>,
    /// A new partition of the children; `Some("")` removes it.
    pub partition: Option<String>,
}

impl RecurUpdate {
    /// True when nothing would change.
    pub fn is_empty(&self) -> bool {
        self.priority.is_none()
            && self.interval.is_none()
            && self.retries.is_none()
            && self.data.is_none()
            && self.klass.is_none()
            && self.queue.is_none()
            && self.backlog.is_none()
            && self.cron.is_none()
            && self.start_within.is_none()
            && self.max_run.is_none()
            && self.partition.is_none()
    }
}

impl Command for RecurArgs {
    /// The template's jid.
    type Output = String;

    fn name(&self) -> &'static str {
        "recur"
    }

    fn encode(&self, args: &mut Args) {
        args.push(&self.queue)
            .push(&self.jid)
            .push(&self.klass)
            .push(&self.data);
        match &self.cron {
            Some(cron) => args
                .push("cron")
                .push(&cron.expression)
                .push(&cron.timezone)
                .push("ticks")
                .push(ticks_json(&cron.ticks)),
            None => args.push("interval").push(self.interval).push(self.offset),
        };
        args.option("priority", self.priority)
            .option("tags", self.tags.as_deref().map(json_list))
            .option("retries", self.retries)
            .option("backlog", self.backlog)
            .option("start-within", self.start_within)
            .option("max-run", self.max_run)
            .option("partition", self.partition.as_ref());
    }

    fn decode(&self, reply: Value) -> Result<String, Error> {
        reply::string(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::job(&self.queue, &self.jid)
    }
}

/// `recur.get.ext`: the template with its next spawn times, or `None`.
struct RecurGet<'a> {
    jid: &'a str,
}

impl Command for RecurGet<'_> {
    type Output = Option<RecurringJob>;

    fn name(&self) -> &'static str {
        "recur.get.ext"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid);
    }

    fn decode(&self, reply: Value) -> Result<Option<RecurringJob>, Error> {
        reply::optional_json(reply)
    }

    fn writes(&self) -> bool {
        false
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `recur.update`: changes some attributes of a template.
struct RecurChange<'a> {
    jid: &'a str,
    update: RecurUpdate,
}

impl Command for RecurChange<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "recur.update"
    }

    fn encode(&self, args: &mut Args) {
        let update = &self.update;
        args.push(self.jid)
            .option("priority", update.priority)
            .option("interval", update.interval)
            .option("retries", update.retries)
            .option("data", update.data.as_ref())
            .option("klass", update.klass.as_ref())
            .option("queue", update.queue.as_ref())
            .option("backlog", update.backlog)
            .option("start-within", update.start_within.map(removable))
            .option("max-run", update.max_run.map(removable))
            .option("partition", update.partition.as_ref());
        if let Some(cron) = &update.cron {
            args.push("cron")
                .push(&cron.expression)
                .push("timezone")
                .push(&cron.timezone)
                .push("ticks")
                .push(ticks_json(&cron.ticks));
        }
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// A deadline of `recur.update`: the number, or `''` that removes it.
fn removable(value: Option<f64>) -> String {
    value.map(|n| n.to_string()).unwrap_or_default()
}

/// `recur.cron.due`: at most `limit` cron templates whose stored ticks run low.
struct RecurCronDue {
    limit: u32,
}

impl Command for RecurCronDue {
    type Output = Vec<CronDue>;

    fn name(&self) -> &'static str {
        "recur.cron.due"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.limit);
    }

    /// Five fields a template: jid, cron, timezone, ticks stored, last tick.
    fn decode(&self, reply: Value) -> Result<Vec<CronDue>, Error> {
        let fields = reply::strings(reply)?;
        Ok(fields
            .chunks_exact(5)
            .map(|f| CronDue {
                jid: f[0].clone(),
                cron: f[1].clone(),
                timezone: f[2].clone(),
                stored: f[3].parse().unwrap_or(0),
                last: f[4].parse().ok(),
            })
            .collect())
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `recur.cron.extend`: stores more ticks of a cron template; false when the
/// template is gone or its schedule is no longer `cron` in `timezone`.
struct RecurCronExtend<'a> {
    jid: &'a str,
    cron: &'a str,
    timezone: &'a str,
    ticks: &'a [i64],
}

impl Command for RecurCronExtend<'_> {
    type Output = bool;

    fn name(&self) -> &'static str {
        "recur.cron.extend"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid)
            .push(self.cron)
            .push(self.timezone)
            .push(ticks_json(self.ticks));
    }

    fn decode(&self, reply: Value) -> Result<bool, Error> {
        Ok(reply::integer(reply)? == 1)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `recur.tag` / `recur.untag`: adds or removes a template's tags; answers its tags.
struct RecurTags<'a> {
    jid: &'a str,
    tags: &'a [String],
    add: bool,
}

impl Command for RecurTags<'_> {
    type Output = Vec<String>;

    fn name(&self) -> &'static str {
        if self.add { "recur.tag" } else { "recur.untag" }
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid).extend(self.tags);
    }

    fn decode(&self, reply: Value) -> Result<Vec<String>, Error> {
        reply::json_vec(reply)
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

/// `unrecur`: deletes the template (children already spawned stay).
struct Unrecur<'a> {
    jid: &'a str,
}

impl Command for Unrecur<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        "unrecur"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.jid);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }

    fn only_deletes(&self) -> bool {
        true
    }

    fn subject(&self) -> Subject<'_> {
        Subject::jid(self.jid)
    }
}

impl Qless {
    /// `recur`: creates or replaces a recurring job; returns its jid.
    pub async fn recur(&self, now: f64, args: RecurArgs) -> Result<String, Error> {
        self.run(now, &args).await
    }

    /// `recur.get.ext`: the template with its next spawn times, or `None`.
    pub async fn recur_get(&self, now: f64, jid: &str) -> Result<Option<RecurringJob>, Error> {
        self.run(now, &RecurGet { jid }).await
    }

    /// `recur.update`: changes some attributes of a template.
    pub async fn recur_update(
        &self,
        now: f64,
        jid: &str,
        update: RecurUpdate,
    ) -> Result<(), Error> {
        self.run(now, &RecurChange { jid, update }).await
    }

    /// `recur.cron.due`: at most `limit` cron templates whose stored ticks run low.
    pub async fn recur_cron_due(&self, now: f64, limit: u32) -> Result<Vec<CronDue>, Error> {
        self.run(now, &RecurCronDue { limit }).await
    }

    /// `recur.cron.extend`: stores more ticks of a cron template; false when the
    /// template is gone or its schedule is no longer `cron` in `timezone`.
    pub async fn recur_cron_extend(
        &self,
        now: f64,
        jid: &str,
        cron: &str,
        timezone: &str,
        ticks: &[i64],
    ) -> Result<bool, Error> {
        let extend = RecurCronExtend {
            jid,
            cron,
            timezone,
            ticks,
        };
        self.run(now, &extend).await
    }

    /// `recur.tag`: returns the template's tags.
    pub async fn recur_tag(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        let add = true;
        self.run(now, &RecurTags { jid, tags, add }).await
    }

    /// `recur.untag`: returns the template's tags.
    pub async fn recur_untag(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        let add = false;
        self.run(now, &RecurTags { jid, tags, add }).await
    }

    /// `unrecur`: deletes the template (children already spawned stay).
    pub async fn unrecur(&self, now: f64, jid: &str) -> Result<(), Error> {
        self.run(now, &Unrecur { jid }).await
    }
}

/// Ticks as the script takes them: a JSON array of whole seconds.
fn ticks_json(ticks: &[i64]) -> String {
    let items: Vec<String> = ticks.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}
