//! Recurring-job commands (`lua/recurring.lua`).

use super::reply::{self, Args, json_list};
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
    /// Seconds between spawns (> 0).
    pub interval: f64,
    /// Seconds from now until the first spawn.
    pub offset: f64,
    pub priority: Option<f64>,
    pub tags: Option<Vec<String>>,
    pub retries: Option<i64>,
    pub backlog: Option<i64>,
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
    }
}

impl Qless {
    /// `recur`: creates or replaces a recurring job; returns its jid.
    pub async fn recur(&self, now: f64, args: RecurArgs) -> Result<String, Error> {
        let argv = Args::new()
            .arg(args.queue)
            .arg(args.jid)
            .arg(args.klass)
            .arg(args.data)
            .arg("interval")
            .arg(args.interval)
            .arg(args.offset)
            .option("priority", args.priority)
            .option("tags", args.tags.as_deref().map(json_list))
            .option("retries", args.retries)
            .option("backlog", args.backlog)
            .into_vec();
        reply::string(self.call("recur", now, argv).await?)
    }

    /// `recur.get`: the template, or `None`.
    pub async fn recur_get(&self, now: f64, jid: &str) -> Result<Option<RecurringJob>, Error> {
        reply::optional_json(self.call("recur.get", now, &[jid.to_owned()]).await?)
    }

    /// `recur.update`: changes some attributes of a template.
    pub async fn recur_update(
        &self,
        now: f64,
        jid: &str,
        update: RecurUpdate,
    ) -> Result<(), Error> {
        let argv = Args::new()
            .arg(jid)
            .option("priority", update.priority)
            .option("interval", update.interval)
            .option("retries", update.retries)
            .option("data", update.data)
            .option("klass", update.klass)
            .option("queue", update.queue)
            .option("backlog", update.backlog)
            .into_vec();
        reply::nothing(self.call("recur.update", now, argv).await?)
    }

    /// `recur.tag`: returns the template's tags.
    pub async fn recur_tag(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        let args = Args::new().arg(jid).args(tags).into_vec();
        reply::json_vec(self.call("recur.tag", now, args).await?)
    }

    /// `recur.untag`: returns the template's tags.
    pub async fn recur_untag(
        &self,
        now: f64,
        jid: &str,
        tags: &[String],
    ) -> Result<Vec<String>, Error> {
        let args = Args::new().arg(jid).args(tags).into_vec();
        reply::json_vec(self.call("recur.untag", now, args).await?)
    }

    /// `unrecur`: deletes the template (children already spawned stay).
    pub async fn unrecur(&self, now: f64, jid: &str) -> Result<(), Error> {
        reply::nothing(self.call("unrecur", now, &[jid.to_owned()]).await?)
    }
}
