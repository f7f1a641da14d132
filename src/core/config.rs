//! Configuration commands (`lua/config.lua`).

use serde_json::{Map, Value};

use super::reply::{self, Args};
use super::{Error, Qless};

impl Qless {
    /// `config.get`: the defaults overlaid with every stored option.
    pub async fn config_get_all(&self, now: f64) -> Result<Map<String, Value>, Error> {
        reply::json(self.call("config.get", now, &[]).await?)
    }

    /// `config.get O`: the stored value, else the default, else `None`.
    pub async fn config_get(&self, now: f64, option: &str) -> Result<Option<Value>, Error> {
        match self.call("config.get", now, &[option.to_owned()]).await? {
            redis::Value::Nil => Ok(None),
            redis::Value::Int(n) => Ok(Some(Value::from(n))),
            other => reply::string(other).map(|s| Some(Value::String(s))),
        }
    }

    /// `config.set`.
    pub async fn config_set(&self, now: f64, option: &str, value: &str) -> Result<(), Error> {
        let args = Args::new().arg(option).arg(value).into_vec();
        reply::nothing(self.call("config.set", now, args).await?)
    }

    /// `config.unset`.
    pub async fn config_unset(&self, now: f64, option: &str) -> Result<(), Error> {
        reply::nothing(self.call("config.unset", now, &[option.to_owned()]).await?)
    }
}
