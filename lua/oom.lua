-- oom.lua: the head of the `allow-oom` copy of the script (src/core/script.rs), and of
-- that copy alone. Redis runs a script flagged `allow-oom` even over `maxmemory`, and
-- lets it write whatever it asks: so this copy runs only the commands whose writes
-- free more than they take (deleting jobs, recurring templates, registry entries),
-- and refuses any other, a `batch` included (whose calls could lease or put), before
-- anything else runs. (One exception, on purpose: a cancel that settles a batch puts
-- its on_complete callback, so that the callback is not lost; lua/README.md, "Out of
-- memory", says why that is bounded.) The gateway sends a command here only after the main script was
-- refused for lack of memory; the list matches `script::ONLY_DELETING`.
do
  local name = ARGV[1]
  if name ~= 'cancel' and name ~= 'queue.forget' and name ~= 'unrecur' and
      name ~= 'worker.deregister' then
    return redis.error_reply('QL_COMMAND user_script:1: Qless(): Command ' ..
      tostring(name) .. ' does not only delete: not run when out of memory')
  end
end
