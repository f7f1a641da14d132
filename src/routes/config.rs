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

use super::extract::{Json, Path};
use super::validate;
use crate::error::ApiError;
use crate::model::{
    ConfigOption, ConfigOptionValue, ConfigOptions, ConfigScalar, Problem, Unavailable,
    UnsupportedMediaType,
};
use crate::server::AppState;

/// Options the script reads as numbers.
const NUMERIC_OPTIONS: [&str; 8] = [
    "heartbeat",
    "grace-period",
    "stats-history",
    "histogram-history",
    "jobs-history",
    "jobs-history-count",
    "max-job-history",
    "max-worker-age",
];

/// Per-queue numeric options: `<queue>-heartbeat`, `<queue>-max-concurrency`.
const NUMERIC_SUFFIXES: [&str; 2] = ["-heartbeat", "-max-concurrency"];

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
    params(("option" = crate::model::Name, Path, description = "Option name, e.g. `heartbeat` or \
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
    Path(option): Path<String>,
) -> Result<Json<ConfigOption>, ApiError> {
    validate::name("option", &option)?;
    match state.qless.config_get(state.clock.now(), &option).await? {
        Some(value) => Ok(Json(ConfigOption {
            value: typed_value(&option, value),
            option,
        })),
        None => Err(ApiError::NotFound(format!(
            "config option {option} is neither set nor has a default"
        ))),
    }
}

/// Set a configuration option.
///
/// The value (a string, number or boolean) is stored as its text: `30`, `0.5`,
/// `true`. Numeric options (`heartbeat`, `grace-period`, `stats-history`,
/// `histogram-history`, `jobs-history`, `jobs-history-count`, `max-job-history`,
/// `max-worker-age`, `<queue>-heartbeat`, `<queue>-max-concurrency`) only accept a JSON
/// number, since text would silently disable them. Takes effect at the next call that
/// reads the option.
#[utoipa::path(put, path = "/v1/config/{option}", tag = "config",
    operation_id = "set_config_option",
    params(("option" = crate::model::Name, Path, description = "Option name")),
    request_body = ConfigOptionValue,
    responses(
        (status = 204, description = "The option is stored"),
        (status = 400, description = "Malformed body, a missing value or one that is not \
            a string, number or boolean, an unknown field, a bad option name, or a \
            numeric option given something other than a number; nothing is stored",
         body = Problem, content_type = "application/problem+json"),
        (status = 415, response = UnsupportedMediaType),
        (status = 503, response = Unavailable),
    ))]
async fn set_config_option(
    State(state): State<AppState>,
    Path(option): Path<String>,
    Json(body): Json<ConfigOptionValue>,
) -> Result<StatusCode, ApiError> {
    validate::name("option", &option)?;
    if is_numeric(&option) && !matches!(body.value, ConfigScalar::Number(_)) {
        return Err(ApiError::BadRequest(format!(
            "config option {option} is numeric: its value must be a JSON number"
        )));
    }
    state
        .qless
        .config_set(state.clock.now(), &option, &body.value.to_text())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Unset a configuration option.
///
/// Removes the stored value, so the option falls back to its default. Idempotent:
/// unsetting an option that is not stored is also a 204.
#[utoipa::path(delete, path = "/v1/config/{option}", tag = "config",
    operation_id = "unset_config_option",
    params(("option" = crate::model::Name, Path, description = "Option name")),
    responses(
        (status = 204, description = "The option is no longer stored"),
        (status = 400, description = "The option is not a valid name", body = Problem,
         content_type = "application/problem+json"),
        (status = 503, response = Unavailable),
    ))]
async fn unset_config_option(
    State(state): State<AppState>,
    Path(option): Path<String>,
) -> Result<StatusCode, ApiError> {
    validate::name("option", &option)?;
    state.qless.config_unset(state.clock.now(), &option).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Whether the script reads `option` as a number.
fn is_numeric(option: &str) -> bool {
    NUMERIC_OPTIONS.contains(&option)
        || NUMERIC_SUFFIXES
            .iter()
            .any(|suffix| option.len() > suffix.len() && option.ends_with(suffix))
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
