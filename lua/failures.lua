-- failures.lua: failure groups described for an operator (extension): when the jobs
-- a group holds failed first and last, and which message is the most common.
--
-- A group's list (P f:<group>) holds its jids newest failure first (fail LPUSHes; a
-- job leaving the group is LREMed), so its last entry is the oldest failure still in
-- the group and its first the newest. The most common message is counted over the
-- newest `sample` jobs only: a group may hold millions of jobs, and the answer must
-- cost the same whatever its size. Everything is read from the jobs' `failure` field,
-- which every writer of a failure fills with cjson (group, message, when, worker).

-- The methods of Qless.Failures, made on first use (see base.lua).
function failures_factory(name)
  if name == 'summary' then
    -- summary(groups, sample) -> JSON array, one object per group in order:
    -- {"group", "total", "first", "last", "message", "count", "sampled"}: `first` and
    -- `last` the failure times (Unix seconds) of the oldest and the newest job in the
    -- group, `message` the most common message among the newest `sample` jobs
    -- (`count` of them carry it; of messages as common, the one that got there first,
    -- counting from the newest) out of `sampled` read.
    -- A group without jobs has total 0 and no times or message.
    return function(groups, sample)
      local P = Qless.P
      local out = {}
      for g = 1, #groups do
        local group = groups[g]
        local key = P .. 'f:' .. group
        local total = redis.call('llen', key)
        local entry = { group = group, total = total, count = 0, sampled = 0 }
        if total > 0 then
          local jids = redis.call('lrange', key, '0', string.format('%d', sample - 1))
          local counts, best, bestn = {}, nil, 0
          for i = 1, #jids do
            local f = Qless.json_decode(redis.call('hget', P .. 'j:' .. jids[i], 'failure'))
            if type(f) == 'table' then
              if i == 1 then entry.last = tonumber(f.when) end
              local m = f.message
              if type(m) == 'string' then
                local n = (counts[m] or 0) + 1
                counts[m] = n
                -- (A message takes the lead only by passing the leader.)
                if n > bestn then best, bestn = m, n end
              end
              entry.sampled = entry.sampled + 1
            end
          end
          entry.message, entry.count = best, bestn
          local oldest = redis.call('lindex', key, '-1')
          local f = Qless.json_decode(oldest and redis.call('hget', P .. 'j:' .. oldest, 'failure'))
          if type(f) == 'table' then entry.first = tonumber(f.when) end
        end
        out[g] = entry
      end
      if #out == 0 then return '[]' end
      return cjson.encode(out)
    end
  end
end
