//! The qless Lua script: the class files of `lua/` joined in their fixed load order at
//! compile time, plus its SHA1 for EVALSHA.

/// The class files, in load order, after a shebang line (and what a copy puts before
/// them). `api.lua` comes last because it dispatches to everything defined before it.
macro_rules! lua_files {
    ($shebang:expr) => {
        concat!(
            $shebang,
            "\n",
            include_str!("../../lua/base.lua"),
            "\n",
            include_str!("../../lua/config.lua"),
            "\n",
            include_str!("../../lua/job.lua"),
            "\n",
            include_str!("../../lua/queue.lua"),
            "\n",
            include_str!("../../lua/recurring.lua"),
            "\n",
            include_str!("../../lua/worker.lua"),
            "\n",
            include_str!("../../lua/extra.lua"),
            "\n",
            include_str!("../../lua/throttle.lua"),
            "\n",
            include_str!("../../lua/push.lua"),
            "\n",
            include_str!("../../lua/batches.lua"),
            "\n",
            include_str!("../../lua/workflow.lua"),
            "\n",
            include_str!("../../lua/search.lua"),
            "\n",
            include_str!("../../lua/rates.lua"),
            "\n",
            include_str!("../../lua/failures.lua"),
            "\n",
            include_str!("../../lua/deadlines.lua"),
            "\n",
            include_str!("../../lua/partitions.lua"),
            "\n",
            include_str!("../../lua/api.lua"),
            "\n",
        )
    };
}

/// The prefix of qlessd's own keys and channels beside the plain `ql:` prefix (the
/// script's `OWN`, `lua/base.lua`): the due index, the availability announcements,
/// the sweeper lease, idempotency keys, cron ticks, throttles. The plain prefix holds
/// only what the qless protocol names, since stock clients and tools read and watch
/// it; in a namespace qlessd's own keys share the namespace's prefix (and its slot).
pub const OWN_PREFIX: &str = "qlessd:";

/// The exact script qlessd loads into Redis (what `qlessd --print-lua` prints).
///
/// The shebang (`#!lua`, no flags) declares the script to Redis 7 as one that writes
/// and must not run out of memory: Redis then checks memory before the script starts
/// and refuses the whole call (`OOM ...`) when it is over `maxmemory`, instead of
/// failing the call at its first write that allocates, possibly after other writes
/// (see "Out of memory" in `lua/README.md`). It also makes Redis 7 the oldest Redis
/// the script loads on.
pub const SOURCE: &str = lua_files!("#!lua");

/// The same program declared `no-writes`: Redis runs it even when out of memory, and
/// refuses any write it attempts. The gateway sends a read to it when the script
/// above was refused for lack of memory, so reads keep working then.
pub const READ_ONLY_SOURCE: &str = lua_files!("#!lua flags=no-writes");

/// The same program declared `allow-oom`, headed by `lua/oom.lua`, which refuses
/// every command but those of [`ONLY_DELETING`]: Redis runs it even when out of
/// memory, and lets it write. The gateway sends one of those commands to it when the
/// script above was refused for lack of memory, so memory can be freed through the API
/// then; nothing else can write through it (a `put` sent to it by hand is refused).
pub const ALLOW_OOM_SOURCE: &str = lua_files!(concat!(
    "#!lua flags=allow-oom\n",
    include_str!("../../lua/oom.lua")
));

/// The commands the `allow-oom` copy runs: those that only delete (their writes free
/// more memory than they take), but for the callback a cancel puts when it settles a
/// batch (kept so that it is not lost: "Out of memory" in `lua/README.md`). Each
/// one's type says so (`Command::only_deletes`).
pub const ONLY_DELETING: &[&str] = &["cancel", "queue.forget", "unrecur", "worker.deregister"];

/// The script with its SHA1, as Redis names it in `SCRIPT LOAD` / `EVALSHA`.
#[derive(Debug, Clone)]
pub struct Script {
    source: &'static str,
    sha: String,
}

impl Script {
    /// The compiled-in qless script.
    pub fn qless() -> Self {
        Script::new(SOURCE)
    }

    /// The compiled-in qless script, declared read-only (`no-writes`).
    pub fn qless_read_only() -> Self {
        Script::new(READ_ONLY_SOURCE)
    }

    /// The compiled-in qless script, declared `allow-oom`, running only the commands
    /// that only delete.
    pub fn qless_allow_oom() -> Self {
        Script::new(ALLOW_OOM_SOURCE)
    }

    fn new(source: &'static str) -> Self {
        Script {
            source,
            sha: redis::Script::new(source).get_hash().to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `allow-oom` copy's head lets through exactly the commands listed here, and
    /// is in that copy alone.
    #[test]
    fn the_allow_oom_copy_lets_only_the_deleting_commands_through() {
        let head = include_str!("../../lua/oom.lua");
        let allowed: Vec<&str> = head
            .split("name ~= '")
            .skip(1)
            .filter_map(|rest| rest.split('\'').next())
            .collect();
        assert_eq!(allowed, ONLY_DELETING);
        assert!(ALLOW_OOM_SOURCE.starts_with(&format!("#!lua flags=allow-oom\n{head}")));
        assert!(!SOURCE.contains(head) && !READ_ONLY_SOURCE.contains(head));
        assert_eq!(
            &ALLOW_OOM_SOURCE[ALLOW_OOM_SOURCE.len() - SOURCE.len() + "#!lua".len()..],
            &SOURCE["#!lua".len()..]
        );
    }
}
