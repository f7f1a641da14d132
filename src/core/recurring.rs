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
    }
}

impl Qless {
    /// `recur`: creates or replaces a recurring job; returns its jid.
    pub async fn recur(&self, now: f64, args: RecurArgs) -> Result<String, Error> {
        let argv = Args::new()
            .arg(args.queue)
            .arg(args.jid)
            .arg(args.klass)
            .arg(args.data);
        let argv = match &args.cron {
            Some(cron) => argv
                .arg("cron")
                .arg(cron.expression.as_str())
                .arg(cron.timezone.as_str())
                .arg("ticks")
                .arg(ticks_json(&cron.ticks)),
            None => argv.arg("interval").arg(args.interval).arg(args.offset),
        };
        let argv = argv
            .option("priority", args.priority)
            .option("tags", args.tags.as_deref().map(json_list))
            .option("retries", args.retries)
            .option("backlog", args.backlog)
            .into_vec();
        reply::string(self.call("recur", now, argv).await?)
    }

    /// `recur.get.ext`: the template with its next spawn times, or `None`.
    pub async fn recur_get(&self, now: f64, jid: &str) -> Result<Option<RecurringJob>, Error> {
        reply::optional_json(self.call("recur.get.ext", now, &[jid.to_owned()]).await?)
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
            .option("backlog", update.backlog);
        let argv = match update.cron {
            Some(cron) => argv
                .arg("cron")
                .arg(cron.expression)
                .arg("timezone")
                .arg(cron.timezone)
                .arg("ticks")
                .arg(ticks_json(&cron.ticks)),
            None => argv,
        }
        .into_vec();
        reply::nothing(self.call("recur.update", now, argv).await?)
    }

    /// `recur.cron.due`: at most `limit` cron templates whose stored ticks run low.
    pub async fn recur_cron_due(&self, now: f64, limit: u32) -> Result<Vec<CronDue>, Error> {
        let fields = reply::strings(
            self.call("recur.cron.due", now, &[limit.to_string()])
                .await?,
        )?;
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
        let args = Args::new()
            .arg(jid)
            .arg(cron)
            .arg(timezone)
            .arg(ticks_json(ticks))
            .into_vec();
        Ok(reply::integer(self.call("recur.cron.extend", now, args).await?)? == 1)
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

/// Ticks as the script takes them: a JSON array of whole seconds.
fn ticks_json(ticks: &[i64]) -> String {
    let items: Vec<String> = ticks.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}
