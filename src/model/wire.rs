//! Decoding quirks of the script's JSON (cjson): an empty list arrives as `{}`, a
//! job's `data` is JSON *text*, absent values are `false`. These functions turn them
//! into the typed, regular shapes the HTTP API promises. Payloads travel as raw JSON
//! text ([`RawJson`], [`JsonData`]) so they are never re-encoded.

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
    // A visitor rather than a detour through `Value`: every job in every reply has
    // several of these fields.
    struct NumberVisitor;

    impl serde::de::Visitor<'_> for NumberVisitor {
        type Value = f64;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number, a numeric string or null")
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<f64, E> {
            Ok(v.trim().parse().unwrap_or_default())
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<f64, E> {
            Ok(0.0)
        }
    }

    deserializer.deserialize_any(NumberVisitor)
}

/// A whole number that may arrive as a JSON number (possibly with a zero fraction) or
/// a numeric string, as [`number`] reads it; a fraction is dropped.
pub fn integer<'de, D>(deserializer: D) -> Result<i64, D::Error>
where
    D: Deserializer<'de>,
{
    number(deserializer).map(|value| value as i64)
}

/// A JSON value kept as the exact text the client sent: key order, number spelling
/// and precision survive (a `serde_json::Value` would sort keys and turn big integers
/// into floats), so the script stores a job's data byte for byte, as qless promises.
pub type RawJson = Box<serde_json::value::RawValue>;

/// `{}`, the data of a job put without any.
pub fn empty_object() -> RawJson {
    serde_json::value::RawValue::from_string("{}".to_owned()).expect("`{}` is JSON")
}

/// A field that is `Some` whenever it is present, even when it is `null`.
pub fn present_raw<'de, D>(deserializer: D) -> Result<Option<RawJson>, D::Error>
where
    D: Deserializer<'de>,
{
    RawJson::deserialize(deserializer).map(Some)
}

/// A field that may be given as `null`: absent is `None`, `null` is `Some(None)`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A job's (or template's) stored data on its way out: the text the script stored,
/// sent to the client as JSON without being re-encoded. Text another client stored
/// that is not JSON is sent as a JSON string rather than failing the read.
#[derive(Debug, Clone)]
pub struct JsonData(RawJson);

impl JsonData {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parsed into a value (for callers that inspect the payload).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }
}

impl JsonData {
    /// The data as stored: its text when that is JSON, else the text as a JSON string.
    pub fn from_stored(text: String) -> Self {
        match serde_json::value::RawValue::from_string(text.clone()) {
            Ok(raw) => JsonData(raw),
            Err(_) => {
                let quoted = Value::String(text).to_string();
                JsonData(serde_json::value::RawValue::from_string(quoted).expect("a JSON string"))
            }
        }
    }
}

impl<'de> Deserialize<'de> for JsonData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = match Value::deserialize(deserializer)? {
            Value::String(text) => text,
            other => other.to_string(),
        };
        Ok(JsonData::from_stored(text))
    }
}

impl serde::Serialize for JsonData {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl PartialEq for JsonData {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

impl PartialEq<Value> for JsonData {
    fn eq(&self, other: &Value) -> bool {
        &self.to_value() == other
    }
}

/// Writes a number as a JSON integer when it is whole (`5`, not `5.0`): the script's
/// counts, priorities and times are usually whole, and clients expect them so.
pub fn whole_when_possible<S: serde::Serializer>(
    value: &f64,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: beyond it f64 skips integers
    if value.fract() == 0.0 && value.abs() < EXACT {
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

/// [`whole_when_possible`] for each number of a list.
pub fn whole_list_when_possible<S: serde::Serializer>(
    values: &[f64],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    use serde::ser::SerializeSeq;
    struct Whole(f64);
    impl Serialize for Whole {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            whole_when_possible(&self.0, serializer)
        }
    }
    let mut seq = serializer.serialize_seq(Some(values.len()))?;
    for value in values {
        seq.serialize_element(&Whole(*value))?;
    }
    seq.end()
}

/// [`whole_when_possible`] for an optional field.
pub fn optional_whole_when_possible<S: serde::Serializer>(
    value: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => whole_when_possible(value, serializer),
        None => serializer.serialize_none(),
    }
}

/// A whole number, also when written with a zero fraction (`5.0`): JSON Schema counts
/// that as an integer, and some encoders write every number so (Python's for a float).
/// A fraction or a value out of range is refused.
pub fn whole<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64>,
{
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = match (number.as_i64(), number.as_f64()) {
        (Some(value), _) => Some(value),
        // i64's range is [-2^63, 2^63): the float bounds are exact.
        (None, Some(value))
            if value.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&value) =>
        {
            Some(value as i64)
        }
        _ => None,
    };
    whole
        .and_then(|value| T::try_from(value).ok())
        .ok_or_else(|| {
            serde::de::Error::custom(format!("expected a whole number in range, got {number}"))
        })
}

/// [`whole`] for an optional field (`null` or absent: `None`).
pub fn optional_whole<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64>,
{
    #[derive(Deserialize)]
    struct Whole<T: TryFrom<i64>>(#[serde(deserialize_with = "whole")] T);
    Ok(Option::<Whole<T>>::deserialize(deserializer)?.map(|Whole(value)| value))
}
