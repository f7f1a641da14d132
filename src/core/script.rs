//! The qless Lua script: the class files of `lua/` joined in their fixed load order at
//! compile time, plus its SHA1 for EVALSHA.

/// The class files, in load order, after the shebang line. `api.lua` comes last
/// because it dispatches to everything defined before it.
///
/// The shebang (`#!lua`, no flags) declares the script to Redis 7 as one that writes
/// and must not run out of memory: Redis then checks memory before the script starts
/// and refuses the whole call (`OOM ...`) when it is over `maxmemory`, instead of
/// failing the call at its first write that allocates, possibly after other writes
/// (see "Out of memory" in `lua/README.md`). It also makes Redis 7 the oldest Redis
/// the script loads on.
macro_rules! lua_files {
    ($($name:literal),+ $(,)?) => {
        concat!("#!lua\n", $(include_str!(concat!("../../lua/", $name)), "\n"),+)
    };
}

/// The exact script qlessd loads into Redis (what `qlessd --print-lua` prints).
pub const SOURCE: &str = lua_files!(
    "base.lua",
    "config.lua",
    "job.lua",
    "queue.lua",
    "recurring.lua",
    "worker.lua",
    "api.lua",
);

/// The script with its SHA1, as Redis names it in `SCRIPT LOAD` / `EVALSHA`.
#[derive(Debug, Clone)]
pub struct Script {
    source: &'static str,
    sha: String,
}

impl Script {
    /// The compiled-in qless script.
    pub fn qless() -> Self {
        Script {
            source: SOURCE,
            sha: redis::Script::new(SOURCE).get_hash().to_owned(),
        }
    }

    /// The Lua source.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The SHA1 Redis uses to name the script.
    pub fn sha(&self) -> &str {
        &self.sha
    }
}
