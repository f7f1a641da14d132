//! Turning script replies into Rust values, and building argument lists.

use redis::Value;
use serde::de::DeserializeOwned;

use super::Error;

/// The ARGV tail of one script call.
#[derive(Debug, Default, Clone)]
pub struct Args(pub Vec<String>);

impl Args {
    pub fn new() -> Self {
        Args(Vec::new())
    }

    /// Appends one argument.
    pub fn arg(mut self, value: impl IntoArg) -> Self {
        self.0.push(value.into_arg());
        self
    }

    /// Appends every item.
    pub fn args<T: IntoArg>(mut self, values: impl IntoIterator<Item = T>) -> Self {
        self.0.extend(values.into_iter().map(IntoArg::into_arg));
        self
    }

    /// Appends `name value` when the option is set.
    pub fn option(self, name: &str, value: Option<impl IntoArg>) -> Self {
        match value {
            Some(value) => self.arg(name).arg(value),
            None => self,
        }
    }

    pub fn into_vec(self) -> Vec<String> {
        self.0
    }
}

/// The arguments of one call, owned or borrowed: owned ones move into the call's
/// queue entry, borrowed ones are copied there (and neither when sent at once).
pub trait CallArgs {
    /// The arguments, borrowed.
    fn as_slice(&self) -> &[String];
    /// The arguments, owned.
    fn into_vec(self) -> Vec<String>;
}

impl CallArgs for Vec<String> {
    fn as_slice(&self) -> &[String] {
        self
    }
    fn into_vec(self) -> Vec<String> {
        self
    }
}

impl CallArgs for &Vec<String> {
    fn as_slice(&self) -> &[String] {
        self
    }
    fn into_vec(self) -> Vec<String> {
        self.clone()
    }
}

impl CallArgs for &[String] {
    fn as_slice(&self) -> &[String] {
        self
    }
    fn into_vec(self) -> Vec<String> {
        self.to_vec()
    }
}

impl<const N: usize> CallArgs for [String; N] {
    fn as_slice(&self) -> &[String] {
        self
    }
    fn into_vec(self) -> Vec<String> {
        self.into()
    }
}

impl<const N: usize> CallArgs for &[String; N] {
    fn as_slice(&self) -> &[String] {
        *self
    }
    fn into_vec(self) -> Vec<String> {
        self.to_vec()
    }
}

/// A value as the text of a script argument. Owned strings move in as they are: a
/// job's data can be large, and `ToString` would copy it.
pub trait IntoArg {
    /// The argument's text.
    fn into_arg(self) -> String;
}

impl IntoArg for String {
    fn into_arg(self) -> String {
        self
    }
}

impl IntoArg for &String {
    fn into_arg(self) -> String {
        self.clone()
    }
}

impl IntoArg for &str {
    fn into_arg(self) -> String {
        self.to_owned()
    }
}

/// Numbers in their `Display` form (floats without a trailing `.0`).
macro_rules! number_args {
    ($($number:ty),*) => {$(
        impl IntoArg for $number {
            fn into_arg(self) -> String {
                self.to_string()
            }
        }
    )*};
}

number_args!(f64, i64, u64, u32, i32, usize);

/// JSON text of a list of strings.
pub fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_owned())
}

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
