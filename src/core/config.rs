//! Configuration commands (`lua/config.lua`).

use serde_json::{Map, Value as Json};

use redis::Value;

use super::command::{Args, Command};
use super::reply;
use super::{Error, Qless};

/// `config.get`: the defaults overlaid with every stored option.
struct ConfigAll;

impl Command for ConfigAll {
    type Output = Map<String, Json>;

    fn name(&self) -> &'static str {
        "config.get"
    }

    fn encode(&self, _: &mut Args) {}

    fn decode(&self, reply: Value) -> Result<Map<String, Json>, Error> {
        reply::json(reply)
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `config.get O`: the stored value, else the default, else `None`.
struct ConfigGet<'a> {
    option: &'a str,
}

impl Command for ConfigGet<'_> {
    type Output = Option<Json>;

    fn name(&self) -> &'static str {
        "config.get"
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.option);
    }

    fn decode(&self, reply: Value) -> Result<Option<Json>, Error> {
        match reply {
            Value::Nil => Ok(None),
            Value::Int(n) => Ok(Some(Json::from(n))),
            other => reply::string(other).map(|s| Some(Json::String(s))),
        }
    }

    fn writes(&self) -> bool {
        false
    }
}

/// `config.set` / `config.unset`: stores an option, or removes it (`value` none).
struct ConfigSet<'a> {
    option: &'a str,
    value: Option<&'a str>,
}

impl Command for ConfigSet<'_> {
    type Output = ();

    fn name(&self) -> &'static str {
        match self.value {
            Some(_) => "config.set",
            None => "config.unset",
        }
    }

    fn encode(&self, args: &mut Args) {
        args.push(self.option).extend(self.value);
    }

    fn decode(&self, reply: Value) -> Result<(), Error> {
        reply::nothing(reply)
    }
}

impl Qless {
    /// `config.get`: the defaults overlaid with every stored option.
    pub async fn config_get_all(&self, now: f64) -> Result<Map<String, Json>, Error> {
        self.run(now, &ConfigAll).await
    }

    /// `config.get O`: the stored value, else the default, else `None`.
    pub async fn config_get(&self, now: f64, option: &str) -> Result<Option<Json>, Error> {
        self.run(now, &ConfigGet { option }).await
    }

    /// `config.set`.
    pub async fn config_set(&self, now: f64, option: &str, value: &str) -> Result<(), Error> {
        let value = Some(value);
        self.run(now, &ConfigSet { option, value }).await
    }

    /// `config.unset`.
    pub async fn config_unset(&self, now: f64, option: &str) -> Result<(), Error> {
        self.run(
            now,
            &ConfigSet {
                option,
                value: None,
            },
        )
        .await
    }
}
