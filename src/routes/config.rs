//! `/v1/config` resources: the server-wide options stored in Redis.
//!
//! The script stores every value as text and reads numeric options with `tonumber`,
//! so a numeric option set to text would silently fall back to its default (or turn a
//! limit off). Numeric options therefore only accept JSON numbers here, and are
//! reported back as numbers whether they are stored or defaulted.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Number, Value};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::{Json, Path, Query};
use crate::error::ApiError;
use crate::model::{
    ConfigOption, ConfigOptionValue, ConfigOptions, ConfigScalar, ConfigWriteQuery, OptionName,
    Problem, Unavailable, UnsupportedMediaType,
};
use crate::server::AppState;

/// Longest duration an option may hold: ten years, in seconds.
const MAX_SECONDS: f64 = 315_360_000.0;

/// Largest count an option may hold.
const MAX_COUNT: i64 = 1_000_000_000;

/// How the script reads an option qlessd knows, hence what its value must be.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Text, for information only (`application`).
    Text,
    /// Seconds: a number up to [`MAX_SECONDS`], above 0 when `positive`, else at least 0.
    Seconds { positive: bool },
    /// A whole number from `min` to [`MAX_COUNT`].
    Whole { min: i64 },
    /// A retry backoff policy, as JSON text (`{"initial": 5, "factor": 2, ...}`).
    Backoff,
}

/// The options qlessd knows (see the qless core's configuration), by name.
const OPTIONS: [(&str, Kind); 9] = [
    ("application", Kind::Text),
    ("heartbeat", Kind::Seconds { positive: true }),
    ("grace-period", Kind::Seconds { positive: false }),
    ("stats-history", Kind::Whole { min: 0 }),
    ("histogram-history", Kind::Whole { min: 0 }),
    ("jobs-history", Kind::Seconds { positive: false }),
    ("jobs-history-count", Kind::Whole { min: 0 }),
    // 0 or less: no cap.
    ("max-job-history", Kind::Whole { min: -MAX_COUNT }),
    ("max-worker-age", Kind::Seconds { positive: true }),
];

/// Per-queue options: `<queue>-heartbeat`, `<queue>-max-concurrency` (0: no limit),
/// `<queue>-backoff` (the default retry backoff of the queue's jobs).
const QUEUE_OPTIONS: [(&str, Kind); 3] = [
    ("-heartbeat", Kind::Seconds { positive: true }),
    ("-max-concurrency", Kind::Whole { min: 0 }),
    ("-backoff", Kind::Backoff),
];

/// What qlessd knows about `option`; `None` for an option of a client's own.
fn kind(option: &str) -> Option<Kind> {
    OPTIONS
        .iter()
        .find(|(name, _)| *name == option)
        .or_else(|| {
            QUEUE_OPTIONS
                .iter()
                .find(|(suffix, _)| option.len() > suffix.len() && option.ends_with(suffix))
        })
        .map(|(_, kind)| *kind)
}

/// The text to store for `value`, or a 400 naming the option and what it needs.
pub(crate) fn stored_text(
    option: &str,
    value: &ConfigScalar,
    custom: bool,
) -> Result<String, ApiError> {
    let bad = |message: String| Err(ApiError::BadRequest(message));
    let Some(kind) = check_writable(option, custom)? else {
        return Ok(value.to_text());
    };
    match (kind, value) {
        (Kind::Text, ConfigScalar::Text(text)) => Ok(text.clone()),
        (Kind::Text, _) => bad(format!("config option {option} is text: give a string")),
        (Kind::Backoff, ConfigScalar::Text(text)) => match serde_json::from_str(text) {
            Ok(backoff) => super::queues::backoff_text(&backoff),
            Err(err) => bad(format!(
                "config option {option} is a backoff policy as JSON text \
                 ({{\"initial\": 5, \"factor\": 2, \"max\": 300, \"jitter\": 0.2}}): {err}"
            )),
        },
        (Kind::Backoff, _) => bad(format!(
            "config option {option} is a backoff policy as JSON text: give a string"
        )),
        (Kind::Seconds { positive }, ConfigScalar::Number(seconds)) => {
            let low_ok = if positive {
                *seconds > 0.0
            } else {
                *seconds >= 0.0
            };
            if low_ok && *seconds <= MAX_SECONDS {
                Ok(value.to_text())
            } else {
                let low = if positive { "above 0" } else { "at least 0" };
                bad(format!(
                    "config option {option} is a number of seconds {low} and at most \
                     {MAX_SECONDS}, not {seconds}"
                ))
            }
        }
        (Kind::Whole { min }, ConfigScalar::Number(number)) => {
            if number.fract() == 0.0 && (min as f64..=MAX_COUNT as f64).contains(number) {
                Ok(value.to_text())
            } else {
                bad(format!(
                    "config option {option} is a whole number from {min} to {MAX_COUNT}, \
                     not {number}"
                ))
            }
        }
        (_, _) => bad(format!(
            "config option {option} is numeric: its value must be a JSON number"
        )),
    }
}

/// Whether `option` may be written: a name qlessd knows (its kind), or a custom one
/// that the request says is custom (`None`).
fn check_writable(option: &str, custom: bool) -> Result<Option<Kind>, ApiError> {
    match (kind(option), custom) {
        (None, false) => Err(ApiError::BadRequest(format!(
            "unknown config option {option:?}; qlessd knows {}, <queue>-heartbeat and \
             <queue>-max-concurrency; to store an option of your own, add ?custom=true",
            OPTIONS.map(|(name, _)| name).join(", ")
        ))),
        (Some(_), true) => Err(ApiError::BadRequest(format!(
            "{option} is an option qlessd knows; leave out ?custom=true"
        ))),
        (known, _) => Ok(known),
    }
}

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_config))
        .routes(routes!(
            get_config_option,
            set_config_option,
            unset_config_option
        ))
}

/// Get every configuration option.
///
/// The defaults (`application`, `heartbeat`, `grace-period`, `stats-history`,
/// `histogram-history`, `jobs-history-count`, `jobs-history`) overlaid with every
/// stored option. Options that are read but have no default entry (`max-job-history`,
/// `max-worker-age`, `<queue>-heartbeat`, `<queue>-max-concurrency`) appear only once
/// set. Numeric options are numbers; every other option is the text stored.
#[utoipa::path(get, path = "/v1/config", tag = "config", operation_id = "get_config",
    responses(
        (status = 200, description = "Every option with its value", body = ConfigOptions),
        (status = 503, response = Unavailable),
    ))]
async fn get_config(State(state): State<AppState>) -> Result<Json<ConfigOptions>, ApiError> {
    let options = state.qless.config_get_all(state.clock.now()).await?;
    let typed: BTreeMap<String, Value> = options
        .into_iter()
        .map(|(option, value)| {
            let value = typed_value(&option, value);
            (option, value)
        })
        .collect();
    Ok(Json(ConfigOptions(typed)))
}

/// Get one configuration option.
///
/// The stored value, else the default. Numeric options are numbers; every other
/// option is the text stored (a boolean set with `PUT` reads back as `"true"`).
#[utoipa::path(get, path = "/v1/config/{option}", tag = "config",
    operation_id = "get_config_option",
    params(("option" = crate::model::OptionName, Path, description = "Option name, e.g. `heartbeat` or \
        `emails-max-concurrency`")),
    responses(
        (status = 200, description = "The option's effective value", body = ConfigOption),
        (status = 400, description = "The option is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 404, description = "The option is neither stored nor has a default \
            (e.g. `max-worker-age` before it is set: the server then uses its built-in \
            value)", body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn get_config_option(
    State(state): State<AppState>,
    Path(option): Path<OptionName>,
) -> Result<Json<ConfigOption>, ApiError> {
    match state
        .qless
        .config_get(state.clock.now(), option.as_str())
        .await?
    {
        Some(value) => Ok(Json(ConfigOption {
            value: typed_value(option.as_str(), value),
            option: option.into(),
        })),
        None => Err(ApiError::NotFound(format!(
            "config option {option} is neither set nor has a default"
        ))),
    }
}

/// Set a configuration option.
///
/// The value is stored as its text (`30`, `0.5`). qlessd knows these options and
/// refuses a value of the wrong type or range, since the script would silently fall
/// back to a default: `application` (a string); `heartbeat`, `max-worker-age` and
/// `<queue>-heartbeat` (seconds above 0); `grace-period` and `jobs-history` (seconds, at
/// least 0); `stats-history`, `histogram-history`, `jobs-history-count` and
/// `<queue>-max-concurrency` (whole numbers, at least 0); `max-job-history` (a whole
/// number, 0 or less for no cap). Seconds are at most ten years, counts at most 10^9.
/// Any other option is refused unless `?custom=true` says it is one of your own; its
/// value (a string, number or boolean) is then stored as given. Takes effect at the next
/// call that reads the option.
#[utoipa::path(put, path = "/v1/config/{option}", tag = "config",
    operation_id = "set_config_option",
    params(("option" = crate::model::OptionName, Path, description = "Option name"),
        ConfigWriteQuery),
    request_body = ConfigOptionValue,
    responses(
        (status = 204, description = "The option is stored"),
        (status = 400, description = "Malformed body, a missing value or one that is not \
            a string, number or boolean, an unknown field, a bad option name, an option \
            qlessd does not know without `?custom=true` (or one it knows with it), or a \
            known option given a value of the wrong type or range; nothing is stored",
         body = Problem, content_type = "application/problem+json"),
        (status = 415, response = UnsupportedMediaType),
        (status = 503, response = Unavailable),
    ))]
async fn set_config_option(
    State(state): State<AppState>,
    Path(option): Path<OptionName>,
    Query(query): Query<ConfigWriteQuery>,
    Json(body): Json<ConfigOptionValue>,
) -> Result<StatusCode, ApiError> {
    let text = stored_text(option.as_str(), &body.value, query.custom)?;
    state
        .qless
        .config_set(state.clock.now(), option.as_str(), &text)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Unset a configuration option.
///
/// Removes the stored value, so the option falls back to its default. Idempotent:
/// unsetting an option that is not stored is also a 204. As for setting, an option
/// qlessd does not know needs `?custom=true`.
#[utoipa::path(delete, path = "/v1/config/{option}", tag = "config",
    operation_id = "unset_config_option",
    params(("option" = crate::model::OptionName, Path, description = "Option name"),
        ConfigWriteQuery),
    responses(
        (status = 204, description = "The option is no longer stored"),
        (status = 400, description = "The option is not a valid name, or qlessd does not \
            know it and `?custom=true` is missing (or knows it and `custom` is given)",
         body = Problem, content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn unset_config_option(
    State(state): State<AppState>,
    Path(option): Path<OptionName>,
    Query(query): Query<ConfigWriteQuery>,
) -> Result<StatusCode, ApiError> {
    check_writable(option.as_str(), query.custom)?;
    state
        .qless
        .config_unset(state.clock.now(), option.as_str())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether the script reads `option` as a number.
fn is_numeric(option: &str) -> bool {
    matches!(
        kind(option),
        Some(Kind::Seconds { .. } | Kind::Whole { .. })
    )
}

/// The value as the API reports it: numeric options stored as numeric text become
/// numbers (the script returns defaults as numbers but stored values as text).
fn typed_value(option: &str, value: Value) -> Value {
    let Value::String(text) = &value else {
        return value;
    };
    if !is_numeric(option) {
        return value;
    }
    if let Ok(integer) = text.parse::<i64>() {
        return Value::Number(integer.into());
    }
    match text.parse::<f64>().ok().and_then(Number::from_f64) {
        Some(number) => Value::Number(number),
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_options_are_recognised() {
        for option in [
            "heartbeat",
            "max-worker-age",
            "emails-heartbeat",
            "q-max-concurrency",
        ] {
            assert!(is_numeric(option), "{option}");
        }
        for option in ["application", "custom", "-heartbeat", "heartbeats"] {
            assert!(!is_numeric(option), "{option}");
        }
    }

    #[test]
    fn numeric_text_is_reported_as_a_number() {
        let text = |s: &str| Value::String(s.to_owned());
        assert_eq!(typed_value("heartbeat", text("30")), Value::from(30));
        assert_eq!(typed_value("grace-period", text("0.5")), Value::from(0.5));
        assert_eq!(typed_value("heartbeat", text("soon")), text("soon"));
        assert_eq!(typed_value("application", text("30")), text("30"));
        assert_eq!(typed_value("heartbeat", Value::from(60)), Value::from(60));
    }
}
