//! Decoding quirks of the script's JSON (cjson): an empty list arrives as `{}`, a
//! job's `data` is JSON *text*, absent values are `false`. These functions turn them
//! into the typed, regular shapes the HTTP API promises.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::Value;

/// A list that cjson may have encoded as `{}` when empty.
pub fn list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .map(|item| serde_json::from_value(item).map_err(serde::de::Error::custom))
            .collect(),
        Value::Object(map) if map.is_empty() => Ok(Vec::new()),
        Value::Null => Ok(Vec::new()),
        other => Err(serde::de::Error::custom(format!(
            "expected a list, got {other}"
        ))),
    }
}

/// JSON text stored by the script, parsed into a value. Text that is not JSON (written
/// by some other client) is returned as a JSON string rather than failing the read.
pub fn json_text<'de, D>(deserializer: D) -> Result<Value, D::Error>
where
    D: Deserializer<'de>,
{
    match Value::deserialize(deserializer)? {
        Value::String(text) => Ok(serde_json::from_str(&text).unwrap_or(Value::String(text))),
        other => Ok(other),
    }
}

/// A string that the script reports as `false` when absent.
pub fn string_or_false<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
where
    D: Deserializer<'de>,
{
    match Value::deserialize(deserializer)? {
        Value::String(text) if !text.is_empty() => Ok(Some(text)),
        _ => Ok(None),
    }
}

/// An object that the script reports as `{}` when absent.
pub fn object_or_empty<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    match Value::deserialize(deserializer)? {
        Value::Object(map) if map.is_empty() => Ok(None),
        Value::Null | Value::Bool(false) => Ok(None),
        other => serde_json::from_value(other)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// A number that may arrive as a JSON number or a numeric string (stored config).
pub fn number<'de, D>(deserializer: D) -> Result<f64, D::Error>
where
    D: Deserializer<'de>,
{
    match Value::deserialize(deserializer)? {
        Value::Number(n) => Ok(n.as_f64().unwrap_or_default()),
        Value::String(s) => Ok(s.trim().parse().unwrap_or_default()),
        Value::Null => Ok(0.0),
        other => Err(serde::de::Error::custom(format!(
            "expected a number, got {other}"
        ))),
    }
}
