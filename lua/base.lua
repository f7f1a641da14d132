-- base.lua: what every other file builds on.
--
-- The seven files (base, config, job, queue, recurring, worker, api) are joined in that
-- order into one chunk, and Redis runs the whole chunk on every EVALSHA. In Redis' Lua
-- each closure, table, upvalue and string is an allocation (~70 ns here), so defining
-- the ~100 functions of the script up front would cost more than the work of a typical
-- command. Instead each file has one class whose methods are made on first use: the
-- class table (made itself on first use) has the file's method factory, which builds
-- the method asked for and caches it in the table. A call pays only for the classes
-- and methods it actually uses.
--
-- Method bodies use the builtins as globals (redis.call, cjson.encode, ...) or alias
-- them in a local at the top of the body. Their only upvalue is `Qless`: the state of
-- the invocation (Qless.P, Qless.NOWS, ...) is kept in fields of it, not in chunk-level
-- locals. Every function the chunk makes at its top level (a factory per file, the
-- dispatcher's helpers) binds each chunk-level local it uses as an upvalue on every
-- EVALSHA, at ~0.15-0.4k instructions a binding; one shared upvalue costs a table read
-- per use instead. Nothing is ever stored in a global (Redis 7 forbids it).
--
-- Other habits that keep the hot paths cheap (measured; see lua/README.md):
-- * formatting a number (tostring, string.format, or passing a Lua number to
--   redis.call) costs 0.5-1 us: pass strings to Redis (`now` as received, constants as
--   '0'), and format a number once when it is used several times;
-- * every call of a C function (string.byte, math.floor, tonumber, unpack, rawset...)
--   costs ~1k instructions before its work, and building a method on first use 2-3k:
--   the hot paths use operators where they can (`x % 1`, string comparisons) and
--   inline small helpers;
-- * one HMGET/HSET of many fields rather than several calls; variadic ZADD/ZREM for
--   batches. (HSET with several pairs, not HMSET: an integer reply costs Lua less than
--   the status table HMSET answers with.)

-- Qless holds the base helpers and, as Qless.Config, Qless.Job, Qless.Queue,
-- Qless.Recurring and Qless.Worker, the class of each other file. A class table is made
-- only when a call first uses it, from its file's method factory. It also holds the
-- state of the invocation (its fields in capitals, below): a field that may be unset
-- holds false, never nil, so that reading it never reaches the LAZY metatable.
local Qless
local config_factory, job_factory, queue_factory, recurring_factory, worker_factory
-- The gateway's own features (extra.lua, throttle.lua): progress and results,
-- idempotent puts, retry backoff, throttles.
local extra_factory, throttle_factory, push_factory, batches_factory, workflow_factory
-- Finding jobs by a filter, and acting on every job that matches (search.lua).
local search_factory
-- The dashboard's (rates.lua, failures.lua): per-minute counts of each queue, failure
-- groups described.
local rates_factory, failures_factory
-- Deadlines of jobs (deadlines.lua): start_by and max_run.
local deadlines_factory
-- Fair queues (partitions.lua): partitions served in turn, limits per partition.
local partitions_factory

-- The metatable of every class table. A class table holds its method factory at
-- index 0; the first lookup of a method builds it and caches it in the table.
local LAZY = { __index = function(self, name)
  local method = self[0](name)
  -- (A plain assignment: there is no __newindex, and rawset would be a C call.)
  self[name] = method
  return method
end }

-- Qless: errors, argument checks, JSON helpers, history, job objects, tags, stats,
-- failure bookkeeping and dependency links.
Qless = setmetatable({
  -- Prefix of every key and pub/sub channel: 'ql:' for 0-key calls, 'ql:{ns}:' for
  -- namespaced calls (set by the dispatcher in api.lua before any command runs).
  P = 'ql:',

  -- Prefix of every key and channel of qlessd's own, which the qless protocol does not
  -- have (the due index, availability announcements, idempotency keys, cron ticks,
  -- throttles, the layout marker: lua/README.md, "Key schema"): 'qlessd:' for 0-key
  -- calls, since the plain 'ql:' prefix belongs to the protocol and the stock clients
  -- and tools that read and watch it; the namespace's own P for namespaced calls (its
  -- keys need its hash tag, and only this script reads a namespace). Set with P.
  OWN = 'qlessd:',

  -- The command every event is published with, chosen with P: PUBLISH on the plain
  -- 'ql:' prefix (stock qless clients subscribe there), SPUBLISH under a namespace, so
  -- that a namespace's events stay on the shard of its slot in a Redis Cluster (Redis 7
  -- sharded pub/sub; on a single Redis it works alike). Every publish in the script is
  -- `redis.call(Qless.PUBLISH, channel, message)`: a field rather than a helper
  -- function, since a Lua call per event costs more than the choice.
  PUBLISH = 'publish',

  -- `now` as a string fit for Redis arguments (ARGV[2] itself when it is a plain
  -- decimal, else its %.17g rendering), and floor(now) as JSON text for history
  -- entries. Both set by the dispatcher. NOWT: `now` formatted %.20f, as the spec
  -- writes the job hash's `time` field; made by the first command that writes `time`
  -- (`Qless.NOWT = Qless.NOWT or string.format('%.20f', now)`, inline: a method would
  -- cost more than the check), since the formatting costs as much as a small Redis call.
  -- In a namespace the dispatcher sets it to NOWS (see there).
  NOWS = false, NOWF = false, NOWT = false,

  -- When `now` is a plain decimal: its fraction as written, without trailing zeros
  -- ('.123', or '' for a whole number), so that now + n whole seconds can be written
  -- as the integer part and this text (pop's and heartbeat's expiry). false otherwise.
  NOWX = false,

  -- The day bin of `now` as text (stats keys), made by the first statistics write.
  DAY = false,

  -- While a `batch` runs: the run/wait samples its calls recorded, per (kind, queue), to
  -- be written with one HMGET/HSET each when the batch ends (Qless.stats_flush). All
  -- calls of a batch share `now`, so they share the day bin too. false otherwise.
  -- (rates.lua reads the same samples, and keeps its own counts under `rates`.)
  STATS = false,

  -- While a `batch` runs: what its calls learnt of keys that only other commands
  -- write, so that the next calls of the same kind skip the read (a group of puts and
  -- completions reads the same options and sets again and again). Kept only across
  -- the worker's hot commands (put, pop, pop.after, complete, heartbeat): any other
  -- call, and any rarer branch of those that writes such a key, starts it over (see
  -- Qless.seen). Fields: `pop`, `done` (per queue: the options pop / complete read),
  -- `queues` (per queue: in ql:queues), `due` (per queue: the expiry pop last put in
  -- `OWN due`, which only ZADD LT touches during the batch), `probe` (per queue: no
  -- pause, throttle, recurring or scheduled job to look at), `locks` (per queue: no
  -- lock expired at `now`), `tracked` (whether ql:tracked exists) and `completed` (the
  -- completed set's size and oldest score). Whatever schedules a job or a spawn, or
  -- takes a lock that has already expired, calls Qless.due or starts the memo over.
  -- false outside a batch, where each call reads for itself.
  SEEN = false,

  -- The queues in which this invocation made jobs available to pop, in order, each
  -- once (a queue is also a key of the table, whose value is how many jobs). Filled by
  -- Qless.available, lowered by pop for the jobs it leased itself, and published on
  -- `OWN available` by the dispatcher (api.lua) when the invocation ends, so a
  -- batch of puts into one queue is one message. false until something is announced.
  -- (put, the hot path, notes its job inline.)
  AVAILABLE = false,

  [0] = function(name)
  if name == 'Job' then
    return setmetatable({ [0] = job_factory }, LAZY)
  elseif name == 'Queue' then
    return setmetatable({ [0] = queue_factory }, LAZY)
  elseif name == 'rates_count' or name == 'rates_waited' then
    -- The two hot entries of rates.lua (put, pop, complete and fail each make one), as
    -- methods of Qless itself and early in this chain: a class of its own would cost
    -- each of those calls a table and a metatable more (~3k instructions).
    return rates_factory(name)
  -- (The hot paths' helpers come first: a method is found by walking this chain of
  -- comparisons the first time a call uses it.)
  elseif name == 'job_append' then
    -- Appends the 17-key job object of the job_fields values `f` to the buffer `buf`.
    -- Written by hand (clients parse it, so key order is free), and into a buffer
    -- rather than as one string per job: in Redis' Lua every string is hashed over its
    -- whole length when created, so long intermediate strings are expensive. Callers
    -- that know them pass the JSON text of expires/state/queue/worker, and two caches
    -- shared by the jobs of one call: `memo` (history entries) and `kmemo` (klasses).
    return function(buf, f, tracked, history, dependents, dependencies, expires, estate,
                    equeue, eworker, memo, kmemo)
      local encode = cjson.encode
      -- Set members come in the order of Redis' hash table, which a per-process seed
      -- decides: sorted, the same job reads the same on every server.
      if #dependents > 1 then table.sort(dependents) end
      if #dependencies > 1 then table.sort(dependencies) end
      local tags, failure, spawned, remaining = f[11], f[12], f[13], f[9]
      -- Single digits (the usual priority, retries and remaining) need no conversion.
      local priority, retries = f[6], f[8]
      if not (priority and #priority == 1 and priority >= '0' and priority <= '9') then
        priority = Qless.jnum(priority)
      end
      if not (retries and #retries == 1 and retries >= '0' and retries <= '9') then
        retries = Qless.jnum(retries)
      end
      if not tags or tags == '' or tags == '[]' then tags = '{}' end
      if not failure or failure == '' then failure = '{}' end
      if not (remaining and #remaining == 1 and remaining >= '0' and remaining <= '9') then
        if not (remaining and string.find(remaining, '^%-?[1-9]%d*$')) then
          remaining = string.format('%.14g', math.floor(tonumber(remaining) or 0))
        end
      end
      local klass = f[2] or ''
      local eklass = kmemo and kmemo[klass]
      if not eklass then
        eklass = encode(klass)
        if kmemo then kmemo[klass] = eklass end
      end
      local n = #buf
      buf[n + 1] = '{"jid":' .. encode(f[1]) ..
        ',"klass":' .. eklass ..
        ',"state":' .. (estate or encode(f[3] or '')) ..
        ',"queue":' .. (equeue or encode(f[4] or '')) ..
        ',"worker":' .. (eworker or encode(f[5] or '')) ..
        ',"tracked":' .. (tracked and 'true' or 'false') ..
        ',"priority":' .. priority ..
        ',"expires":' .. (expires or Qless.jnum(f[7])) ..
        ',"retries":' .. retries ..
        ',"remaining":' .. remaining ..
        ',"data":'
      buf[n + 2] = encode(f[10] or '')
      buf[n + 3] = ',"tags":'
      buf[n + 4] = tags
      n = n + 5
      -- The history array ('{}' when empty).
      local count = 0
      local object = Qless.history_object
      for i = 1, #history do
        local e = history[i]
        local obj = memo and memo[e]
        if not obj then
          obj = object(e)
          if memo and obj then memo[e] = obj end
        end
        if obj then
          count = count + 1
          buf[n] = count == 1 and ',"history":[' or ','
          buf[n + 1] = obj
          n = n + 2
        end
      end
      buf[n] = (count == 0 and ',"history":{}' or ']') .. ',"failure":'
      buf[n + 1] = failure
      buf[n + 2] = ',"spawned_from_jid":' .. (spawned and encode(spawned) or 'false') ..
        ',"dependents":' .. (#dependents == 0 and '{}' or encode(dependents)) ..
        ',"dependencies":' .. (#dependencies == 0 and '{}' or encode(dependencies)) ..
        -- Extension: the job's trace, where pop put it (f[19]; validated hex at put).
        (f[19] and (',"traceparent":"' .. f[19] .. '"}') or '}')
    end

  elseif name == 'history_object' then
    -- One stored entry [when, what, {extra}] as the object clients see: the extra keys
    -- plus "when" and "what" (which win). Entries of the usual shape are rewritten as
    -- text; anything else goes through cjson.
    return function(e)
      local match = string.match
      local when, what, inner = match(e, '^%[([^,%[%]{}"]+),("[^"\\]*"),{(.*)}%]$')
      if when then
        if inner == '' then return '{"when":' .. when .. ',"what":' .. what .. '}' end
        if not string.find(inner, '"wh', 1, true) then
          return '{' .. inner .. ',"when":' .. when .. ',"what":' .. what .. '}'
        end
      else
        when, what = match(e, '^%[([^,%[%]{}"]+),("[^"\\]*")%]$')
        if when then return '{"when":' .. when .. ',"what":' .. what .. '}' end
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

  elseif name == 'stats_add' then
    -- Folds samples (seconds) into ql:s:<kind>:<bin(now)>:<queue>: Welford totals plus
    -- histogram buckets, one HMGET and one HSET however many samples there are.
    return function(kind, now, queue, samples)
      local n = #samples
      if n == 0 then return end
      if Qless.STATS then
        local id = kind .. ':' .. queue
        local pending = Qless.STATS[id]
        if not pending then
          pending = { kind = kind, queue = queue, samples = {}, calls = {} }
          Qless.STATS[id] = pending
          Qless.STATS[#Qless.STATS + 1] = pending
        end
        local into = pending.samples
        for i = 1, n do into[#into + 1] = samples[i] end
        pending.calls[#pending.calls + 1] = Qless.STATS.call
        return
      end
      local floor, format, char = math.floor, string.format, string.char
      -- The day bin's text, made once per invocation (every call of a batch shares now).
      local day = Qless.DAY
      if not day then
        day = format('%d', now - now % 86400)
        Qless.DAY = day
      end
      local key = Qless.P .. 's:' .. kind .. ':' .. day .. ':' .. queue
      if n == 1 then
        -- The usual case (one pop or complete), without the bookkeeping tables.
        local v = samples[1]
        local s = v - v % 1   -- floor(v), without a C call (each costs ~1k instructions)
        if s ~= s then s = floor(v) end   -- (an infinite sample: v % 1 is NaN)
        local b, unit, c
        -- (Buckets are named with string.char: concatenating a number would format it
        -- with sprintf, several times dearer.)
        if s < 60 and s >= 0 then
          unit, c = 115, s
        elseif s < 60 then
          b = 's' .. s
        elseif s < 3600 then
          unit, c = 109, (s - s % 60) / 60
        elseif s < 86400 then
          unit, c = 104, (s - s % 3600) / 3600
        else
          b = 'd' .. floor(s / 86400)
        end
        if unit then
          if c < 10 then
            b = char(unit, 48 + c)
          else
            b = char(unit, 48 + (c - c % 10) / 10, 48 + c % 10)
          end
        end
        -- The two counters with HINCRBY, whose integer reply needs no parsing: cheaper
        -- than reading them (an HMGET field, strtod) and writing them back (%d, an
        -- HSET pair). Only mean and vk make the round trip through Lua.
        local total = redis.call('hincrby', key, 'total', '1')
        redis.call('hincrby', key, b, '1')
        local mean, vk = v, 0
        if total > 1 then
          local cur = redis.call('hmget', key, 'mean', 'vk')
          local old = tonumber(cur[1]) or 0
          mean = old + (v - old) / total
          vk = (tonumber(cur[2]) or 0) + (v - mean) * (v - old)
        end
        -- mean and vk as Lua numbers, written by Redis itself (for less than
        -- string.format costs from Lua): %.17g before Redis 7.2, the shortest text that
        -- reads back as the same number from 7.2 on and in Valkey. Every stats write
        -- does the same, so a batch and its calls one by one leave the same text.
        redis.call('hset', key, 'mean', mean, 'vk', vk == 0 and '0' or vk)
        return
      end
      local function bucket(v)
        local s = floor(v)
        if s < 60 then return 's' .. s end
        if s < 3600 then return 'm' .. floor(s / 60) end
        if s < 86400 then return 'h' .. floor(s / 3600) end
        return 'd' .. floor(s / 86400)
      end
      local counts, names = {}, {}
      for i = 1, n do
        local b = bucket(samples[i])
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
      local args = { 'total', format('%d', total), 'mean', mean, 'vk', vk == 0 and '0' or vk }
      for i = 1, #names do
        local b = names[i]
        args[#args + 1] = b
        args[#args + 1] = format('%d', (tonumber(cur[3 + i]) or 0) + counts[b])
      end
      redis.call('hset', key, unpack(args))
    end

  elseif name == 'jid_arg' then
    -- A jid (never empty, never reserved); `command` names the error (Job() by default).
    return function(v, command)
      if v == nil or v == '' then Qless.raise('QL_ARG', command or 'Job', 'no jid provided') end
      -- jid_free's own first test, inline: most jids never build that method.
      local last = string.byte(v, -1)
      if last == 121 or last == 115 then Qless.jid_free(v, command or 'Job') end
      return v
    end

  elseif name == 'Recurring' then
    return setmetatable({ [0] = recurring_factory }, LAZY)
  elseif name == 'Config' then
    return setmetatable({ [0] = config_factory }, LAZY)
  elseif name == 'Worker' then
    return setmetatable({ [0] = worker_factory }, LAZY)
  elseif name == 'Extra' then
    return setmetatable({ [0] = extra_factory }, LAZY)
  elseif name == 'Throttle' then
    return setmetatable({ [0] = throttle_factory }, LAZY)
  elseif name == 'Push' then
    return setmetatable({ [0] = push_factory }, LAZY)
  elseif name == 'Batches' then
    return setmetatable({ [0] = batches_factory }, LAZY)
  elseif name == 'Workflow' then
    return setmetatable({ [0] = workflow_factory }, LAZY)
  elseif name == 'Search' then
    return setmetatable({ [0] = search_factory }, LAZY)
  elseif name == 'Rates' then
    return setmetatable({ [0] = rates_factory }, LAZY)
  elseif name == 'Failures' then
    return setmetatable({ [0] = failures_factory }, LAZY)
  elseif name == 'Deadlines' then
    return setmetatable({ [0] = deadlines_factory }, LAZY)
  elseif name == 'Partitions' then
    return setmetatable({ [0] = partitions_factory }, LAZY)

  elseif name == 'raise' then
    -- Raises the error reply "<CODE> user_script:1: <Command>(): <message>". The code
    -- is for the gateway; the marker is what qless clients look for to tell a script
    -- error from a Redis one (Redis 7 puts it there for the original's error() calls),
    -- and they read the command and message right after it. A table error gets no
    -- position of its own, so the marker is written here; the dispatcher passes the
    -- text on unchanged.
    return function(code, command, message)
      error({ err = code .. ' user_script:1: ' .. command .. '(): ' .. message })
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

  elseif name == 'jid_free' then
    -- v, unless it ends in a suffix the key layout gives another job's keys: job J has
    -- `j:J-history`, `j:J-dependencies` and `j:J-dependents`, so a job named
    -- `J-history` would share its hash key with J's history list (and break both).
    -- Every such suffix ends in "y" or "s": other jids cost one byte test.
    return function(v, command)
      local last = string.byte(v, -1)
      if (last == 121 or last == 115) and (string.find(v, '%-history$') or
          string.find(v, '%-dependencies$') or string.find(v, '%-dependents$')) then
        Qless.raise('QL_ARG', command, 'Jid ' .. v .. ' is reserved: a jid must not end in ' ..
          '-history, -dependencies or -dependents')
      end
      return v
    end

  elseif name == 'pack' then
    -- Values as a table that keeps their count, nils included: unpack(t, 1, t.n).
    return function(...)
      return { n = select('#', ...), ... }
    end

  elseif name == 'jids_free' then
    -- list, once every jid in it passed jid_free.
    return function(list, command)
      local free = Qless.jid_free
      for i = 1, #list do free(list[i], command) end
      return list
    end

  elseif name == 'num' then
    -- A number as cjson prints it (14 significant digits), for JSON text.
    return function(x)
      return string.format('%.14g', x)
    end

  elseif name == 'numarg' then
    -- A number as the string Redis itself would store (integers plainly, others with 17
    -- significant digits). Passing a Lua number to redis.call makes Redis format it,
    -- which costs several times more than doing it here.
    return function(x)
      if x == math.floor(x) and x > -1e15 and x < 1e15 then
        return string.format('%d', x)
      end
      return string.format('%.17g', x)
    end

  elseif name == 'jnum' then
    -- JSON number text of a numeric string read from Redis: plain integers (nearly
    -- every stored number) pass untouched, anything else is rendered as cjson would.
    return function(s)
      if s and #s == 1 and s >= '0' and s <= '9' then return s end
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

  elseif name == 'json_array' then
    -- A list as a JSON array, `[]` when empty (json_list keeps the spec's `{}` for the
    -- protocol's answers; qlessd's own answers are plain JSON).
    return function(items)
      if #items == 0 then return '[]' end
      return cjson.encode(items)
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
    -- Day bucket of a timestamp as it appears in the stats key names.
    return function(t)
      return Qless.numarg(t - (t % 86400))
    end

  elseif name == 'history_cap' then
    -- The history cap from a raw config value (default 100; 0 or less = no cap).
    return function(raw)
      return math.floor(tonumber(raw) or 100)
    end

  elseif name == 'history_push' then
    -- Appends one history entry (JSON array text) and applies the cap: the list keeps
    -- its first entry plus the newest cap-1. RPUSH reports the new length, so the
    -- usual case (under the cap) costs one call. (The hot paths inline this.)
    -- `legacy` is the job's legacy `history` field as the caller read it (false: read,
    -- and absent); nil makes this read it. A legacy history is converted first.
    return function(jid, entry, cap, legacy)
      local key = Qless.P .. 'j:' .. jid .. '-history'
      if legacy == nil then legacy = redis.call('hget', Qless.P .. 'j:' .. jid, 'history') end
      if legacy then Qless.history_legacy(jid, legacy) end
      local n = redis.call('rpush', key, entry)
      if cap > 0 and n > cap then Qless.history_trim(key, n, cap) end
    end

  elseif name == 'history_fit' then
    -- Holds the history of jid to the byte budget `raw`, the raw value of the config
    -- option `max-job-history-bytes` (default 1 MiB, not in the defaults map, like
    -- `max-job-history`; 0 or less: no bound), counted in bytes of the entries' JSON
    -- text: drops the oldest entries but the first, as the entry cap does, until the
    -- rest fit. The first and the newest entry always stay, so a log whose own entry is
    -- over the budget still shows. The list is read whole: only log calls this, and
    -- the list it reads is held to the cap and to this budget.
    return function(jid, raw)
      local budget = math.floor(tonumber(raw) or 1048576)
      if budget <= 0 then return end
      local key = Qless.P .. 'j:' .. jid .. '-history'
      local entries = redis.call('lrange', key, '0', '-1')
      local n, total = #entries, 0
      for i = 1, n do total = total + #entries[i] end
      local keep = 2   -- the oldest entry after the first that stays
      while total > budget and keep < n do
        total = total - #entries[keep]
        keep = keep + 1
      end
      if keep > 2 then
        redis.call('lpop', key, string.format('%d', keep - 1))
        redis.call('lpush', key, entries[1])
      end
    end

  elseif name == 'history_legacy' then
    -- Legacy conversion (spec 2.4). Very old versions kept a job's history in its hash
    -- field `history`: a JSON list of objects {q, put, popped, worker, failed, done}.
    -- Given that field's text, appends the entries each object stands for (put with its
    -- queue, popped with its worker, failed, done; times floored) to the history list,
    -- then deletes the field. Every writer of a job's history calls this first when the
    -- field is there, so the conversion happens on first touch; readers show the same
    -- entries without writing (job_buffer).
    --
    -- qlessd itself writes the field in that form while a job's history is short and
    -- plain ("compact history", see lua/README.md "Memory"): put writes
    -- [{"q":Q,"put":T}] instead of creating the list, pop appends {"popped":T,
    -- "worker":W} and complete {"done":T} in the HSETs they make anyway. Any other
    -- history write (and any other qless client) converts it first, as above.
    return function(jid, raw)
      local key = Qless.P .. 'j:' .. jid
      local entries = Qless.history_legacy_entries(raw)
      if #entries > 0 then Qless.batch('rpush', key .. '-history', entries) end
      redis.call('hdel', key, 'history')
    end

  elseif name == 'history_legacy_entries' then
    -- The history entries (JSON array texts, in order) a legacy `history` field stands
    -- for: put with its queue, popped with its worker, failed, done, per object.
    return function(raw)
      local old = Qless.json_decode(raw)
      local entries = {}
      local function add(when, what, extra)
        if type(when) == 'number' then
          entries[#entries + 1] = cjson.encode({ math.floor(when), what, extra })
        end
      end
      if type(old) == 'table' then
        for _, item in ipairs(old) do
          if type(item) == 'table' then
            add(item.put, 'put', { q = item.q })
            add(item.popped, 'popped', { worker = item.worker })
            add(item.failed, 'failed')
            add(item.done, 'done')
          end
        end
      end
      return entries
    end

  elseif name == 'history_trim' then
    -- A history list of n entries is over its cap: drop the oldest entries but the
    -- first, so that cap remain.
    return function(key, n, cap)
      local dropped = redis.call('lpop', key, string.format('%d', n - cap + 1))
      redis.call('lpush', key, dropped[1])
    end

  elseif name == 'job_fields' then
    -- HMGET of the job-object fields, in the order job_append expects, plus any extra
    -- fields (from index 14 on):
    --   1 jid  2 klass  3 state  4 queue  5 worker  6 priority  7 expires  8 retries
    --   9 remaining  10 data  11 tags  12 failure  13 spawned_from_jid
    return function(key, ...)
      return redis.call('hmget', key, 'jid', 'klass', 'state', 'queue', 'worker',
        'priority', 'expires', 'retries', 'remaining', 'data', 'tags', 'failure',
        'spawned_from_jid', ...)
    end

  elseif name == 'job_buffer' then
    -- Appends the job object of jid to `buf`; false if the job does not exist.
    return function(buf, jid)
      local key = Qless.P .. 'j:' .. jid
      local f = Qless.job_fields(key, 'history')
      if not f[1] then return false end
      local history = redis.call('lrange', key .. '-history', '0', '-1')
      -- A legacy (or compact) history field reads as the entries it converts to,
      -- after the list's: the same as once converted, without a write for a read.
      if f[14] then
        local extra = Qless.history_legacy_entries(f[14])
        for i = 1, #extra do history[#history + 1] = extra[i] end
      end
      Qless.job_append(buf, f, redis.call('zscore', Qless.P .. 'tracked', jid), history,
        redis.call('smembers', key .. '-dependents'),
        redis.call('smembers', key .. '-dependencies'))
      return true
    end

  elseif name == 'job_json' then
    -- The job object of jid as JSON text, or nil if the job does not exist.
    return function(jid)
      local buf = {}
      if Qless.job_buffer(buf, jid) then return table.concat(buf) end
      return nil
    end

  elseif name == 'jobs_json' then
    -- The JSON array of the job objects of the jids that exist ('{}' if none).
    return function(jids)
      local buf = { '[' }
      local found = false
      for i = 1, #jids do
        if found then buf[#buf + 1] = ',' end
        if Qless.job_buffer(buf, jids[i]) then
          found = true
        elseif found then
          buf[#buf] = nil
        end
      end
      if not found then return '{}' end
      buf[#buf + 1] = ']'
      return table.concat(buf)
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
        redis.call('zadd', Qless.P .. 't:' .. t, now, jid)
        redis.call('zincrby', Qless.P .. 'tags', '1', t)
      end
    end

  elseif name == 'tags_unindex' then
    -- The reverse of tags_index.
    return function(jid, tags)
      for i = 1, #tags do
        local t = tags[i]
        redis.call('zrem', Qless.P .. 't:' .. t, jid)
        redis.call('zincrby', Qless.P .. 'tags', '-1', t)
      end
    end

  elseif name == 'seen' then
    -- Inside a batch, forgets what the calls so far learnt (see SEEN): called before
    -- anything that may write what it holds.
    return function()
      if Qless.SEEN then
        Qless.SEEN = { pop = {}, done = {}, queues = {}, due = {}, probe = {}, locks = {} }
      end
    end

  elseif name == 'stats_defer' then
    -- Starts collecting samples instead of writing them (see STATS).
    return function()
      Qless.STATS = {}
    end

  elseif name == 'stats_call' then
    -- The batch call (its position) that the next samples belong to.
    return function(k)
      Qless.STATS.call = k
    end

  elseif name == 'stats_flush' then
    -- Writes the collected samples, in the order they were recorded, and stops
    -- collecting. Returns the positions of the calls whose samples could not be
    -- written, with the error, so that the batch reports them.
    return function(now)
      local pending = Qless.STATS
      Qless.STATS = false
      local failed = {}
      for i = 1, #(pending or {}) do
        local p = pending[i]
        local ok, err = pcall(Qless.stats_add, p.kind, now, p.queue, p.samples)
        if not ok then
          for c = 1, #p.calls do failed[p.calls[c]] = err end
        end
      end
      -- The per-minute counts of the calls (rates.lua): from the same samples, and the
      -- puts and failures they added.
      if pending and (pending[1] or pending.rates) then Qless.Rates.flush(now, pending) end
      return failed
    end

  elseif name == 'failure_forget' then
    -- Takes a failed job out of its failure group (the list, and the group from
    -- ql:failures once empty) and lowers the `failed` gauge of the day and queue it
    -- failed in.
    return function(jid, failure_text, queue)
      local failure = Qless.json_decode(failure_text)
      if type(failure) ~= 'table' or type(failure.group) ~= 'string' then return end
      local group = failure.group
      local list = Qless.P .. 'f:' .. group
      -- Once, from the tail: a job is in its group's list once, and jobs mostly leave
      -- a group oldest first (unfail, and search actions walk it from the tail), so the
      -- scan stops near the tail rather than reading a list of a million failures whole.
      redis.call('lrem', list, '-1', jid)
      if redis.call('llen', list) == 0 then
        redis.call('srem', Qless.P .. 'failures', group)
      end
      local when = tonumber(failure.when)
      if when and queue and queue ~= '' then
        redis.call('hincrby', Qless.P .. 's:stats:' .. Qless.day_bin(when) .. ':' .. queue,
          'failed', '-1')
      end
    end

  elseif name == 'available' then
    -- `n` jobs became poppable in `queue` (put, retry, unfail, release, promotion,
    -- spawn, a lock handed over, a freed slot...): noted for the dispatcher to publish.
    return function(queue, n)
      local a = Qless.AVAILABLE
      if not a then
        a = {}
        Qless.AVAILABLE = a
      end
      local c = a[queue]
      if c then
        a[queue] = c + n
      else
        a[queue] = n
        a[#a + 1] = queue
      end
    end

  elseif name == 'available_all' then
    -- Something that held back all of queue's waiting jobs ended (unpaused, a higher
    -- max-concurrency): announces them all. Rare paths, so the count is read.
    return function(queue)
      local n = redis.call('zcard', Qless.P .. 'q:' .. queue .. '-work')
      if n > 0 then Qless.available(queue, n) end
    end

  elseif name == 'slot_freed' then
    -- A running job of `queue` stopped running: with a max-concurrency (its option
    -- text `maxc`), a job held back by it may now be popped.
    return function(queue, maxc)
      if (tonumber(maxc) or 0) > 0 then Qless.available(queue, 1) end
    end

  elseif name == 'due' then
    -- Something of `queue` falls due at `at` (a score as text: a scheduled job, a
    -- recurring spawn, a lock expiry): `OWN due` keeps each queue's earliest such
    -- time (ZADD LT never raises it), so `sweep` visits only the queues that are due.
    return function(queue, at)
      redis.call('zadd', Qless.OWN .. 'due', 'LT', at, queue)
      -- Something was scheduled (or a lock given grace): a batch's memo of what pop
      -- need not look at is out of date. (Outside a batch there is none: the method
      -- is not even built.)
      if Qless.SEEN then Qless.seen() end
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
    return function(jid, list, command)
      local out = {}
      for i = 1, #list do
        local d = Qless.jid_free(list[i], command)
        if d ~= jid then
          local state = redis.call('hget', Qless.P .. 'j:' .. d, 'state')
          if state and state ~= 'complete' then out[#out + 1] = d end
        end
      end
      return out
    end

  elseif name == 'dependencies_link' then
    -- Records "jid waits on each of deps" in both directions.
    return function(jid, deps)
      local mine = Qless.P .. 'j:' .. jid .. '-dependencies'
      for i = 1, #deps do
        redis.call('sadd', Qless.P .. 'j:' .. deps[i] .. '-dependents', jid)
        redis.call('sadd', mine, deps[i])
      end
    end
  end
end }, LAZY)
