-- base.lua: what every other file builds on.
--
-- The seven files (base, config, job, queue, recurring, worker, api) are joined in that
-- order into one chunk, and Redis runs the whole chunk on every EVALSHA. In Redis' Lua
-- each closure, table, upvalue and string is an allocation (~70 ns here), so defining
-- the ~100 functions of the script up front would cost more than the work of a typical
-- command. Instead each file has one class table whose methods are made on first use:
-- the table's __index is the file's method factory, which builds the method asked for
-- and caches it in the table. A call pays only for the methods it actually runs.
--
-- Method bodies use the builtins as globals (redis.call, cjson.encode, ...) or alias
-- them in a local at the top of the body, never as upvalues: every upvalue costs an
-- allocation when the method is made. Nothing is ever stored in a global (Redis 7
-- forbids it).
--
-- Other habits that keep the hot paths cheap (measured; see lua/README.md):
-- * formatting a number (tostring, string.format, or passing a Lua number to
--   redis.call) costs 0.5-1 us: pass strings to Redis (`now` as received, constants as
--   '0'), and format a number once when it is used several times;
-- * one HMGET/HMSET rather than several HGET/HSET; variadic ZADD/ZREM for batches.

-- Prefix of every key and pub/sub channel: 'ql:' for 0-key calls, 'ql:{ns}:' for
-- namespaced calls (set by the dispatcher in api.lua before any command runs).
local P = 'ql:'

-- `now` as a string fit for Redis arguments: ARGV[2] itself when it is a plain decimal,
-- else its %.17g rendering (set by the dispatcher).
local NOWS

-- The class tables, one per file (each file makes its own).
local Qless, QlessConfig, QlessJob, QlessQueue, QlessRecurring, QlessWorker

-- The metatable of every class table. A class table holds its method factory at
-- index 0; the first lookup of a method builds it and caches it in the table.
local LAZY = { __index = function(self, name)
  local method = self[0](name)
  rawset(self, name, method)
  return method
end }

-- Qless: errors, argument checks, JSON helpers, history, job objects, tags, stats,
-- failure bookkeeping and dependency links.
Qless = setmetatable({ [0] = function(name)
  if name == 'raise' then
    -- Raises the error reply "<CODE> <Command>(): <message>". A table error carries no
    -- "user_script:N:" position; the dispatcher passes its text on unchanged.
    return function(code, command, message)
      error({ err = code .. ' ' .. command .. '(): ' .. message })
    end

  elseif name == 'rest' then
    -- ARGV[i..] as a list (the variadic commands).
    return function(A, i)
      local out = {}
      for k = i, #A do out[#out + 1] = A[k] end
      return out
    end

  elseif name == 'number_arg' then
    -- tonumber(v), or the error "<message><v>" (v as given, 'nil' when absent).
    return function(v, command, message)
      local n = tonumber(v)
      if n == nil or n ~= n then
        Qless.raise('QL_ARG', command, message .. tostring(v))
      end
      return n
    end

  elseif name == 'count_arg' then
    -- An offset or count: `default` when absent, else a finite number rounded down;
    -- with `min`, smaller values are refused with the same message.
    return function(v, default, command, message, min)
      if v == nil then return default end
      local n = tonumber(v)
      if n == nil or n ~= n or n == 1 / 0 or n == -1 / 0 or (min and n < min) then
        Qless.raise('QL_ARG', command, message .. tostring(v))
      end
      return math.floor(n)
    end

  elseif name == 'queue_arg' then
    -- A queue name (never empty).
    return function(v)
      if v == nil or v == '' then Qless.raise('QL_ARG', 'Queue', 'no queue name provided') end
      return v
    end

  elseif name == 'jid_arg' then
    -- A jid (never empty); `command` names the error (Job() by default).
    return function(v, command)
      if v == nil or v == '' then Qless.raise('QL_ARG', command or 'Job', 'no jid provided') end
      return v
    end

  elseif name == 'num' then
    -- A number as cjson prints it (14 significant digits), for JSON text.
    return function(x)
      return string.format('%.14g', x)
    end

  elseif name == 'numarg' then
    -- A number as Redis itself would store it (17 significant digits), for redis.call
    -- arguments used more than once.
    return function(x)
      return string.format('%.17g', x)
    end

  elseif name == 'jnum' then
    -- JSON number text of a numeric string read from Redis: plain integers (nearly
    -- every stored number) pass untouched, anything else is rendered as cjson would.
    return function(s)
      if s == '0' then return s end
      if s and string.find(s, '^%-?[1-9]%d*$') then return s end
      return string.format('%.14g', tonumber(s) or 0)
    end

  elseif name == 'trunc' then
    -- Integer reply value: truncated toward zero, as Redis would do with a float.
    return function(x)
      if x >= 0 then return math.floor(x) end
      return -math.floor(-x)
    end

  elseif name == 'json_list' then
    -- JSON array text of a Lua list; cjson (and every client) expects '{}' when empty.
    return function(list)
      if #list == 0 then return '{}' end
      return cjson.encode(list)
    end

  elseif name == 'json_decode' then
    -- Decoded JSON value of text, or nil when text is absent or not JSON.
    -- (A JSON null decodes to cjson.null, which is not nil.)
    return function(text)
      if type(text) ~= 'string' then return nil end
      local ok, value = pcall(cjson.decode, text)
      if ok then return value end
      return nil
    end

  elseif name == 'json_strings' then
    -- A list argument (tags, depends): a JSON array of strings or numbers, duplicates
    -- dropped (first occurrence wins). nil if the text is anything else.
    return function(text)
      local value = Qless.json_decode(text)
      if type(value) ~= 'table' or (#value == 0 and next(value) ~= nil) then return nil end
      local out, seen = {}, {}
      for i = 1, #value do
        local t = value[i]
        local kind = type(t)
        if kind ~= 'string' and kind ~= 'number' then return nil end
        if not seen[t] then
          seen[t] = true
          out[#out + 1] = t
        end
      end
      return out
    end

  elseif name == 'stored_tags' then
    -- A stored tags text (always written by cjson) as a list; {} for anything odd.
    return function(text)
      if not text or text == '{}' or text == '[]' or text == '' then return {} end
      local value = Qless.json_decode(text)
      if type(value) == 'table' then return value end
      return {}
    end

  elseif name == 'day_bin' then
    -- Day bucket of a timestamp, used in the stats key names.
    return function(t)
      return t - (t % 86400)
    end

  elseif name == 'history_cap' then
    -- The history cap from a raw config value (default 100; 0 or less = no cap).
    return function(raw)
      return math.floor(tonumber(raw) or 100)
    end

  elseif name == 'history_push' then
    -- Appends one history entry (JSON array text) and applies the cap: the list keeps
    -- its first entry plus the newest cap-1. RPUSH reports the new length, so the
    -- usual case (under the cap) costs one call.
    return function(jid, entry, cap)
      local key = P .. 'j:' .. jid .. '-history'
      local n = redis.call('rpush', key, entry)
      if cap > 0 and n > cap then
        local dropped = redis.call('lpop', key, n - cap + 1)
        redis.call('lpush', key, dropped[1])
      end
    end

  elseif name == 'history_object' then
    -- One stored entry [when, what, {extra}] as the object clients see: the extra keys
    -- plus "when" and "what" (which win). Entries of the usual shape are rewritten as
    -- text; anything else goes through cjson.
    return function(e)
      local when, what, extra = string.match(e, '^%[([^,%[%]{}"]+),("[^"\\]*")(.*)%]$')
      if when then
        if extra == '' or extra == ',{}' then
          return '{"when":' .. when .. ',"what":' .. what .. '}'
        end
        local inner = string.match(extra, '^,{(.*)}$')
        if inner and not string.find(inner, '"wh', 1, true) then
          return '{' .. inner .. ',"when":' .. when .. ',"what":' .. what .. '}'
        end
      end
      local value = Qless.json_decode(e)
      if type(value) ~= 'table' then return nil end
      if value[1] ~= nil or value[2] ~= nil then
        local obj = {}
        if type(value[3]) == 'table' then
          for k, v in pairs(value[3]) do obj[k] = v end
        end
        obj.when = value[1]
        obj.what = value[2]
        value = obj
      end
      return cjson.encode(value)
    end

  elseif name == 'history_json' then
    -- The JSON array of a job's history list ('{}' when empty).
    return function(list)
      local n = #list
      if n == 0 then return '{}' end
      local object = Qless.history_object
      local out = {}
      for i = 1, n do
        local obj = object(list[i])
        if obj then out[#out + 1] = obj end
      end
      if #out == 0 then return '{}' end
      return '[' .. table.concat(out, ',') .. ']'
    end

  elseif name == 'job_fields' then
    -- HMGET of the job-object fields, in the order job_encode expects, plus any extra
    -- fields (from index 14 on):
    --   1 jid  2 klass  3 state  4 queue  5 worker  6 priority  7 expires  8 retries
    --   9 remaining  10 data  11 tags  12 failure  13 spawned_from_jid
    return function(key, ...)
      return redis.call('hmget', key, 'jid', 'klass', 'state', 'queue', 'worker',
        'priority', 'expires', 'retries', 'remaining', 'data', 'tags', 'failure',
        'spawned_from_jid', ...)
    end

  elseif name == 'job_encode' then
    -- The 17-key job object from the job_fields values `f`. Written by hand (clients
    -- parse it, so key order is free), which is cheaper than encoding a table.
    -- `expires` (optional) is the expiry's JSON text when the caller has it already.
    return function(f, tracked, history, dependents, dependencies, expires)
      local encode, jnum, json_list = cjson.encode, Qless.jnum, Qless.json_list
      local tags, failure, spawned, remaining = f[11], f[12], f[13], f[9]
      if not tags or tags == '' or tags == '[]' then tags = '{}' end
      if not failure or failure == '' then failure = '{}' end
      if remaining ~= '0' and not (remaining and string.find(remaining, '^%-?[1-9]%d*$')) then
        remaining = string.format('%.14g', math.floor(tonumber(remaining) or 0))
      end
      return '{"jid":' .. encode(f[1]) ..
        ',"klass":' .. encode(f[2] or '') ..
        ',"state":' .. encode(f[3] or '') ..
        ',"queue":' .. encode(f[4] or '') ..
        ',"worker":' .. encode(f[5] or '') ..
        ',"tracked":' .. (tracked and 'true' or 'false') ..
        ',"priority":' .. jnum(f[6]) ..
        ',"expires":' .. (expires or jnum(f[7])) ..
        ',"retries":' .. jnum(f[8]) ..
        ',"remaining":' .. remaining ..
        ',"data":' .. encode(f[10] or '') ..
        ',"tags":' .. tags ..
        ',"history":' .. Qless.history_json(history) ..
        ',"failure":' .. failure ..
        ',"spawned_from_jid":' .. (spawned and encode(spawned) or 'false') ..
        ',"dependents":' .. json_list(dependents) ..
        ',"dependencies":' .. json_list(dependencies) .. '}'
    end

  elseif name == 'job_json' then
    -- The job object of jid as JSON text, or nil if the job does not exist.
    return function(jid)
      local key = P .. 'j:' .. jid
      local f = Qless.job_fields(key)
      if not f[1] then return nil end
      return Qless.job_encode(f, redis.call('zscore', P .. 'tracked', jid),
        redis.call('lrange', key .. '-history', 0, -1),
        redis.call('smembers', key .. '-dependents'),
        redis.call('smembers', key .. '-dependencies'))
    end

  elseif name == 'batch' then
    -- Runs `command [key] items...` in slices of `step` (even for score/member lists),
    -- so that huge variadic calls never exceed Lua's unpack limit. Returns the array
    -- reply (concatenated) or the integer reply (summed).
    return function(command, key, items, step)
      local n = #items
      if n == 0 then return nil end
      step = step or 1000
      if n <= step then
        if key then return redis.call(command, key, unpack(items)) end
        return redis.call(command, unpack(items))
      end
      local acc
      for i = 1, n, step do
        local j = i + step - 1
        if j > n then j = n end
        local r
        if key then
          r = redis.call(command, key, unpack(items, i, j))
        else
          r = redis.call(command, unpack(items, i, j))
        end
        if type(r) == 'table' then
          acc = acc or {}
          for k = 1, #r do acc[#acc + 1] = r[k] end
        else
          acc = (acc or 0) + r
        end
      end
      return acc
    end

  elseif name == 'tags_index' then
    -- Indexes a job under its tags: ql:t:<tag> (J -> time) and the ql:tags counter.
    return function(jid, tags, now)
      for i = 1, #tags do
        local t = tags[i]
        redis.call('zadd', P .. 't:' .. t, now, jid)
        redis.call('zincrby', P .. 'tags', 1, t)
      end
    end

  elseif name == 'tags_unindex' then
    -- The reverse of tags_index.
    return function(jid, tags)
      for i = 1, #tags do
        local t = tags[i]
        redis.call('zrem', P .. 't:' .. t, jid)
        redis.call('zincrby', P .. 'tags', -1, t)
      end
    end

  elseif name == 'stats_add' then
    -- Folds samples (seconds) into ql:s:<kind>:<bin(now)>:<queue>: Welford totals plus
    -- histogram buckets, one HMGET and one HMSET however many samples there are.
    return function(kind, now, queue, samples)
      local n = #samples
      if n == 0 then return end
      local floor = math.floor
      local key = P .. 's:' .. kind .. ':' .. (now - now % 86400) .. ':' .. queue
      local counts, names = {}, {}
      for i = 1, n do
        local s = floor(samples[i])
        local b
        if s < 60 then
          b = 's' .. s
        elseif s < 3600 then
          b = 'm' .. floor(s / 60)
        elseif s < 86400 then
          b = 'h' .. floor(s / 3600)
        else
          b = 'd' .. floor(s / 86400)
        end
        local c = counts[b]
        if c then
          counts[b] = c + 1
        else
          counts[b] = 1
          names[#names + 1] = b
        end
      end
      local cur = redis.call('hmget', key, 'total', 'mean', 'vk', unpack(names))
      local total, mean, vk = tonumber(cur[1]), tonumber(cur[2]) or 0, tonumber(cur[3]) or 0
      for i = 1, n do
        local v = samples[i]
        if not total then
          total, mean, vk = 1, v, 0
        else
          total = total + 1
          local old = mean
          mean = mean + (v - mean) / total
          vk = vk + (v - mean) * (v - old)
        end
      end
      local args = { 'total', total, 'mean', mean, 'vk', vk }
      for i = 1, #names do
        local b = names[i]
        args[#args + 1] = b
        args[#args + 1] = (tonumber(cur[3 + i]) or 0) + counts[b]
      end
      redis.call('hmset', key, unpack(args))
    end

  elseif name == 'failure_forget' then
    -- Takes a failed job out of its failure group (the list, and the group from
    -- ql:failures once empty) and lowers the `failed` gauge of the day and queue it
    -- failed in.
    return function(jid, failure_text, queue)
      local failure = Qless.json_decode(failure_text)
      if type(failure) ~= 'table' or type(failure.group) ~= 'string' then return end
      local group = failure.group
      local list = P .. 'f:' .. group
      redis.call('lrem', list, 0, jid)
      if redis.call('llen', list) == 0 then
        redis.call('srem', P .. 'failures', group)
      end
      local when = tonumber(failure.when)
      if when and queue and queue ~= '' then
        redis.call('hincrby', P .. 's:stats:' .. Qless.day_bin(when) .. ':' .. queue,
          'failed', -1)
      end
    end

  elseif name == 'lock_lost_event' then
    -- The lock_lost event payload (sent to ql:w:<W> and ql:log).
    return function(jid, worker)
      return '{"jid":' .. cjson.encode(jid) .. ',"event":"lock_lost","worker":' ..
        cjson.encode(worker) .. '}'
    end

  elseif name == 'dependable' then
    -- The jids of `list` that jid may depend on: existing, not complete, and not jid
    -- itself (that link could never be released). Read-only, so callers run it
    -- before their first write.
    return function(jid, list)
      local out = {}
      for i = 1, #list do
        local d = list[i]
        if d ~= jid then
          local state = redis.call('hget', P .. 'j:' .. d, 'state')
          if state and state ~= 'complete' then out[#out + 1] = d end
        end
      end
      return out
    end

  elseif name == 'dependencies_link' then
    -- Records "jid waits on each of deps" in both directions.
    return function(jid, deps)
      local mine = P .. 'j:' .. jid .. '-dependencies'
      for i = 1, #deps do
        redis.call('sadd', P .. 'j:' .. deps[i] .. '-dependents', jid)
        redis.call('sadd', mine, deps[i])
      end
    end
  end
end }, LAZY)
