//! Figures about the Redis behind the script, read for `/metrics`.

use super::{Error, Qless};

/// Redis's memory use and limit (`INFO memory`); a limit of 0 means none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// `used_memory`, bytes.
    pub used: u64,
    /// `maxmemory`, bytes (0: no limit).
    pub max: u64,
}

impl Qless {
    /// `INFO memory`, after the script calls already sent.
    pub async fn memory(&self) -> Result<Memory, Error> {
        let reply = self.command(&["INFO", "memory"]).await?;
        let text: String = redis::from_redis_value(reply).map_err(Error::reply)?;
        let mut memory = Memory::default();
        for line in text.lines() {
            let (key, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.trim().parse().unwrap_or(0);
            match key {
                "used_memory" => memory.used = value,
                "maxmemory" => memory.max = value,
                _ => {}
            }
        }
        Ok(memory)
    }
}
