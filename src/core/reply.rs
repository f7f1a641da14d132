//! Turning script replies into Rust values.

use redis::Value;
use serde::de::DeserializeOwned;

use super::Error;

/// A bulk string.
pub fn string(value: Value) -> Result<String, Error> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).map_err(Error::reply),
        Value::SimpleString(text) => Ok(text),
        other => Err(Error::reply(format!("expected a string, got {other:?}"))),
    }
}

/// A bulk string or nil.
pub fn optional_string(value: Value) -> Result<Option<String>, Error> {
    match value {
        Value::Nil => Ok(None),
        other => string(other).map(Some),
    }
}

/// An integer reply.
pub fn integer(value: Value) -> Result<i64, Error> {
    match value {
        Value::Int(n) => Ok(n),
        other => Err(Error::reply(format!("expected an integer, got {other:?}"))),
    }
}

/// A nil reply (commands that answer nothing).
pub fn nothing(value: Value) -> Result<(), Error> {
    match value {
        Value::Nil | Value::Okay | Value::Int(_) => Ok(()),
        other => Err(Error::reply(format!("expected nil, got {other:?}"))),
    }
}

/// A RESP array of strings (`jobs`, `cancel`).
pub fn strings(value: Value) -> Result<Vec<String>, Error> {
    match value {
        Value::Array(items) => items.into_iter().map(string).collect(),
        Value::Nil => Ok(Vec::new()),
        other => Err(Error::reply(format!("expected an array, got {other:?}"))),
    }
}

/// A bulk string holding JSON.
pub fn json<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    let text = string(value)?;
    serde_json::from_str(&text).map_err(|err| Error::reply(format!("{err}: {text}")))
}

/// A bulk string holding JSON, or nil.
pub fn optional_json<T: DeserializeOwned>(value: Value) -> Result<Option<T>, Error> {
    match value {
        Value::Nil => Ok(None),
        other => json(other).map(Some),
    }
}

/// A JSON list that cjson encodes as `{}` when empty.
pub fn json_vec<T: DeserializeOwned>(value: Value) -> Result<Vec<T>, Error> {
    let text = string(value)?;
    if text == "{}" {
        return Ok(Vec::new());
    }
    serde_json::from_str(&text).map_err(|err| Error::reply(format!("{err}: {text}")))
}
