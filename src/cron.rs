//! Cron schedules of recurring jobs: parsing an expression in a time zone, and the
//! fire times ("ticks") the gateway computes for the script, which knows no time
//! zones (lua/README.md, "Cron templates").
//!
//! An expression has 5 fields (minute to day of week) or 6 with seconds first; the
//! zone is an IANA name from the bundled database (`chrono-tz`), so no zoneinfo is
//! needed on the host. Daylight saving time follows Vixie cron, as `croner` does:
//! a fixed-time tick in the hour skipped by spring-forward fires once, at the first
//! instant after the gap; a fixed-time tick in the hour repeated by fall-back fires
//! once, at the earlier instant; an expression with a wildcard or step in its
//! seconds, minutes or hours field fires on real time, so in both repeated hours.
//!
//! [`top_up`] keeps every cron template's list of ticks [`TICKS`] long; the sweeper
//! (one gateway at a time) calls it after each sweep.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::core::{CronSpec, Error, Qless};

/// How many upcoming ticks a cron template keeps stored; the gateway adds more when
/// half of them have fired.
pub const TICKS: usize = 8;

/// Longest accepted expression.
const MAX_EXPRESSION: usize = 200;

/// Longest accepted zone name.
const MAX_ZONE: usize = 64;

/// Most templates one top-up handles (the rest wait for the next sweep).
const TOP_UP_LIMIT: u32 = 100;

/// A parsed cron expression in a time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

/// Why an expression or zone was refused; the message names what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The expression does not parse, or never fires.
    #[error("cron expression {expression:?} is invalid: {reason}")]
    Expression { expression: String, reason: String },
    /// The zone is not an IANA time zone name.
    #[error("timezone {0:?} is not a known IANA time zone")]
    Zone(String),
}

impl Schedule {
    /// Parses `expression` (5 fields, or 6 with seconds first) in `zone`.
    pub fn parse(expression: &str, zone: &str) -> Result<Self, ScheduleError> {
        let invalid = |reason: String| ScheduleError::Expression {
            expression: expression.chars().take(MAX_EXPRESSION).collect(),
            reason,
        };
        if expression.len() > MAX_EXPRESSION {
            return Err(invalid(format!("longer than {MAX_EXPRESSION} bytes")));
        }
        let fields = expression.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(invalid(format!(
                "{fields} fields; give 5, or 6 with seconds first"
            )));
        }
        let zone = if zone.len() > MAX_ZONE {
            None
        } else {
            Tz::from_str(zone).ok()
        }
        .ok_or_else(|| ScheduleError::Zone(zone.chars().take(MAX_ZONE).collect()))?;
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map_err(|err| invalid(err.to_string()))?;
        let schedule = Schedule { cron, zone };
        if schedule.after(0.0, 1).is_empty() {
            return Err(invalid("it never fires".to_owned()));
        }
        Ok(schedule)
    }

    /// The first `count` fire times strictly after `time` (seconds since the epoch),
    /// ascending, as whole seconds. Fewer when the schedule ends.
    pub fn after(&self, time: f64, count: usize) -> Vec<i64> {
        let Some(start) = DateTime::<Utc>::from_timestamp(time.floor() as i64, 0) else {
            return Vec::new();
        };
        let start = start.with_timezone(&self.zone);
        self.cron
            .iter_after(start)
            .take(count)
            .map(|tick| tick.timestamp())
            .collect()
    }

    /// The zone's name.
    pub fn zone(&self) -> &str {
        self.zone.name()
    }
}

/// `expression` in `zone` checked and turned into the script's form: with its first
/// [`TICKS`] ticks after `now`.
pub fn spec(expression: String, zone: &str, now: f64) -> Result<CronSpec, ScheduleError> {
    let schedule = Schedule::parse(&expression, zone)?;
    Ok(CronSpec {
        ticks: schedule.after(now, TICKS),
        timezone: schedule.zone().to_owned(),
        expression,
    })
}

/// Adds ticks to every cron template whose stored list runs low, continuing after its
/// last stored tick (or after `now` when that is past or none is stored). A template
/// whose expression no longer parses (written by another client) is left alone and
/// logged. Returns how many templates were topped up.
pub async fn top_up(qless: &Qless, now: f64) -> Result<usize, Error> {
    let due = qless.recur_cron_due(now, TOP_UP_LIMIT).await?;
    let mut topped = 0;
    for template in due {
        let schedule = match Schedule::parse(&template.cron, &template.timezone) {
            Ok(schedule) => schedule,
            Err(err) => {
                tracing::debug!(jid = %template.jid, %err, "cron template cannot be scheduled");
                continue;
            }
        };
        let from = template.last.map_or(now, |last| last.max(now));
        let missing = TICKS.saturating_sub(template.stored).max(1);
        let ticks = schedule.after(from, missing);
        if ticks.is_empty() {
            continue;
        }
        qless
            .recur_cron_extend(
                now,
                &template.jid,
                &template.cron,
                &template.timezone,
                &ticks,
            )
            .await?;
        topped += 1;
    }
    Ok(topped)
}

/// Formats `time` (seconds since the epoch) in `zone` for people, e.g. on the
/// dashboard: `2026-03-08 03:00:00 EDT`.
pub fn local_time(time: f64, zone: &str) -> String {
    let zone = Tz::from_str(zone).unwrap_or(Tz::UTC);
    match zone.timestamp_opt(time.floor() as i64, 0).single() {
        Some(at) => at.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
        None => format!("{time}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_and_six_fields_parse_others_do_not() {
        assert!(Schedule::parse("*/5 * * * *", "UTC").is_ok());
        assert!(Schedule::parse("30 */5 * * * *", "UTC").is_ok());
        assert!(Schedule::parse("* * * *", "UTC").is_err());
        assert!(Schedule::parse("0 0 0 1 1 * 2030", "UTC").is_err());
        assert!(Schedule::parse("61 * * * *", "UTC").is_err());
        assert!(matches!(
            Schedule::parse("* * * * *", "Mars/Olympus"),
            Err(ScheduleError::Zone(_))
        ));
    }

    #[test]
    fn ticks_are_whole_seconds_after_the_start() {
        let schedule = Schedule::parse("*/10 * * * * *", "UTC").unwrap();
        assert_eq!(schedule.after(95.5, 3), vec![100, 110, 120]);
    }
}
