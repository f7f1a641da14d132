-- recurring.lua: recurring templates (ql:r:<jid>) and the children they spawn.
--
-- A template lives in ql:q:<Q>-recur with its next spawn time as score. pop, peek and
-- sweep find the due templates and call spawn, which creates the children R-1, R-2,
-- ...; the recur.* commands manage the templates themselves.
--
-- Cron templates (an extension, lua/README.md) have the hash fields `cron` and
-- `timezone`. Lua knows no time zones, so the gateway computes their upcoming fire
-- times and stores them in OWN cron:<jid> (a zset, tick -> tick); spawn fires from
-- there, and OWN cron (jid -> time) tells the gateway when a template's list runs low.
-- (OWN, not P: the ticks are qlessd's bookkeeping, which stock clients never read.)

-- The methods of Qless.Recurring, made on first use (see base.lua).
function recurring_factory(name)
  if name == 'spawn' then
    -- Spawns the children of the due templates `due` (jid, score, jid, score, ... as
    -- ZRANGEBYSCORE WITHSCORES gives them) of `queue`, at most `limit` in all (spec
    -- 6.3). Returns how many were spawned and whether everything due was handled.
    return function(now, queue, due, limit, cap)
      local rkey = Qless.P .. 'q:' .. queue .. '-recur'
      local ntemplates = #due / 2
      cap = cap or Qless.history_cap(redis.call('hget', Qless.P .. 'config', 'max-job-history'))
      local work = Qless.P .. 'q:' .. queue .. '-work'
      local entry_tail = ',"put",{"q":' .. cjson.encode(queue) .. '}]'
      local moved = 0
      for i = 1, #due, 2 do
        if moved >= limit then break end
        local rid = due[i]
        local rhash = Qless.P .. 'r:' .. rid
        local t = redis.call('hmget', rhash, 'klass', 'data', 'priority', 'tags', 'retries',
          'interval', 'backlog', 'cron', 'start_within', 'max_run', 'partition')
        if not t[1] then
          redis.call('zrem', rkey, rid)   -- a schedule entry whose template is gone
        else
          local score = math.floor(tonumber(due[i + 1]))
          local interval = tonumber(t[6]) or 0
          local backlog = tonumber(t[7]) or 0
          local tags_text = t[4] or '{}'
          local tags = Qless.stored_tags(tags_text)
          local priority = tonumber(t[3]) or 0
          local retries = t[5] or '0'
          -- One child of this template, due at `at`.
          local function child_at(at)
            local child = rid .. '-' .. redis.call('hincrby', rhash, 'count', '1')
            Qless.tags_index(child, tags, Qless.NOWS)
            redis.call('hset', Qless.P .. 'j:' .. child, 'jid', child, 'klass', t[1],
              'data', t[2] or '{}',
              'priority', t[3] or '0', 'tags', tags_text, 'state', 'waiting', 'worker', '',
              'expires', '0', 'queue', queue, 'retries', retries, 'remaining', retries,
              'time', string.format('%.20f', at), 'spawned_from_jid', rid)
            Qless.history_push(child, '[' .. Qless.num(math.floor(at)) .. entry_tail, cap,
              false)
            local score = Qless.numarg(priority - at / 10000000000)
            redis.call('zadd', work, score, child)
            -- (partitions.lua) The template's partition is the child's.
            if t[11] then redis.call('hset', Qless.P .. 'j:' .. child, 'partition', t[11]) end
            Qless.Partitions.added(queue, child, score, t[11] or '')
            -- (deadlines.lua) The template's deadlines, counted from the child's spawn
            -- time (its tick: a child of a tick missed long ago may be past it).
            if t[9] or t[10] then
              Qless.Deadlines.put(queue, child, t[9] and at + tonumber(t[9]), t[10])
            end
            moved = moved + 1
          end
          if t[8] then
            -- A cron template fires from its stored ticks. Ticks missed while nothing
            -- ran: the latest one fires (backlog 0), or the latest `backlog` of them.
            local tkey = Qless.OWN .. 'cron:' .. rid
            local ticks = redis.call('zrangebyscore', tkey, '-inf', Qless.NOWS)
            local first = #ticks - math.max(backlog, 1) + 1
            local fired
            for k = math.max(first, 1), #ticks do
              if moved >= limit then break end
              child_at(tonumber(ticks[k]))
              fired = ticks[k]
            end
            if fired then
              redis.call('zremrangebyscore', tkey, '-inf', fired)
              redis.call('hset', rhash, 'fired', fired)
            end
            if fired or #ticks == 0 then
              -- Next spawn: the next stored tick; with none stored (no gateway has
              -- topped the list up), look again an interval later.
              local nxt = redis.call('zrange', tkey, 0, 0, 'WITHSCORES')[2]
              redis.call('zadd', rkey, nxt or Qless.numarg(now + math.max(interval, 1)), rid)
            end
          else
            if backlog ~= 0 and interval > 0 then
              local n = (now - score) / interval
              if n > backlog then score = score + math.ceil(n - backlog) * interval end
            end
            local spawned = false
            while score <= now and moved < limit do
              child_at(score)
              score = score + interval
              spawned = true
            end
            if spawned then redis.call('zadd', rkey, Qless.numarg(score), rid) end
          end
        end
      end
      if moved > 0 then Qless.rates_count(now, queue, 'put', moved) end   -- rates.lua
      return moved, (ntemplates < limit and moved < limit)
    end

  elseif name == 'store_ticks' then
    -- Adds the fire times `ticks` (ascending whole seconds) to cron template `jid`,
    -- dropping those not after its last fired tick, and sets when the gateway should
    -- add more: once the middle stored tick is due. Returns the first stored tick.
    return function(jid, ticks, fired)
      local tkey = Qless.OWN .. 'cron:' .. jid
      fired = tonumber(fired) or -math.huge
      for i = 1, #ticks do
        if ticks[i] > fired then
          local t = Qless.numarg(ticks[i])
          redis.call('zadd', tkey, t, t)
        end
      end
      local n = redis.call('zcard', tkey)
      if n == 0 then
        redis.call('zrem', Qless.OWN .. 'cron', jid)
        return nil
      end
      local middle = redis.call('zrange', tkey, math.floor((n - 1) / 2), math.floor((n - 1) / 2),
        'WITHSCORES')
      redis.call('zadd', Qless.OWN .. 'cron', middle[2], jid)
      return redis.call('zrange', tkey, 0, 0, 'WITHSCORES')[2]
    end

  elseif name == 'cron_off' then
    -- Forgets the cron schedule of template `jid` (its fields stay for the caller).
    return function(jid)
      redis.call('del', Qless.OWN .. 'cron:' .. jid)
      redis.call('zrem', Qless.OWN .. 'cron', jid)
      redis.call('hdel', Qless.P .. 'r:' .. jid, 'cron', 'timezone', 'fired')
    end

  elseif name == 'cron_due' then
    -- recur.cron.due(now, limit) -> [jid, cron, timezone, stored, last, ...]: the cron
    -- templates whose stored ticks run low (stored: how many, last: the latest or '').
    -- Entries whose template is gone or no longer cron are dropped.
    return function(limit)
      local jids = redis.call('zrangebyscore', Qless.OWN .. 'cron', '-inf', Qless.NOWS, 'LIMIT', 0,
        limit)
      local out = {}
      for i = 1, #jids do
        local jid = jids[i]
        local f = redis.call('hmget', Qless.P .. 'r:' .. jid, 'cron', 'timezone')
        if not f[1] then
          redis.call('zrem', Qless.OWN .. 'cron', jid)
          redis.call('del', Qless.OWN .. 'cron:' .. jid)
        else
          local tkey = Qless.OWN .. 'cron:' .. jid
          local last = redis.call('zrange', tkey, -1, -1)[1]
          out[#out + 1] = jid
          out[#out + 1] = f[1]
          out[#out + 1] = f[2] or 'UTC'
          out[#out + 1] = tostring(redis.call('zcard', tkey))
          out[#out + 1] = last or ''
        end
      end
      return out
    end

  elseif name == 'cron_extend' then
    -- recur.cron.extend(jid, cron, timezone, tick...) -> 1 if stored, 0 if the template
    -- is gone or its schedule changed since the ticks were computed.
    return function(now, jid, cron, timezone, ticks)
      local rhash = Qless.P .. 'r:' .. jid
      local f = redis.call('hmget', rhash, 'cron', 'timezone', 'queue', 'fired')
      if f[1] ~= cron or (f[2] or 'UTC') ~= timezone then return 0 end
      local first = Qless.Recurring.store_ticks(jid, ticks, f[4])
      -- A template whose list had run dry waits for an interval; bring it forward.
      local rkey = Qless.P .. 'q:' .. f[3] .. '-recur'
      local score = tonumber(redis.call('zscore', rkey, jid))
      if first and score and tonumber(first) < score then
        redis.call('zadd', rkey, first, jid)
      end
      return 1
    end

  elseif name == 'on' then
    -- recur(now, queue, jid, klass, data, 'interval', interval, offset, opts) -> jid.
    -- Replaces every attribute but the spawn counter; next run at now + offset. A cron
    -- schedule (`cron` = {expr, zone, ticks}) runs at its first tick instead, and its
    -- `interval` is only the period stock qless clients see.
    return function(now, queue, jid, klass, data, interval, offset, priority, tags, retries,
                    backlog, cron, within, max_run, partition)
      local key = Qless.P .. 'r:' .. jid
      local f = redis.call('hmget', key, 'queue', 'count')
      if f[1] and f[1] ~= queue then
        redis.call('zrem', Qless.P .. 'q:' .. f[1] .. '-recur', jid)
      end
      Qless.Recurring.cron_off(jid)
      local numarg = Qless.numarg
      redis.call('hset', key, 'jid', jid, 'klass', klass, 'data', data,
        'priority', numarg(priority), 'tags', Qless.json_list(tags), 'state', 'recur',
        'queue', queue, 'type', 'interval',
        'count', f[2] or '0', 'interval', numarg(interval), 'retries', numarg(retries),
        'backlog', numarg(backlog))
      -- (deadlines.lua) qlessd's fields beside the protocol's, copied to each child.
      redis.call('hdel', key, 'start_within', 'max_run', 'partition')
      if within then redis.call('hset', key, 'start_within', numarg(within)) end
      if max_run then redis.call('hset', key, 'max_run', numarg(max_run)) end
      -- (partitions.lua) The children's partition.
      if partition and partition ~= '' then redis.call('hset', key, 'partition', partition) end
      local first = now + offset
      if cron then
        redis.call('hset', key, 'cron', cron.expr, 'timezone', cron.zone)
        first = tonumber(Qless.Recurring.store_ticks(jid, cron.ticks)) or first
      end
      local at = Qless.numarg(first)
      redis.call('zadd', Qless.P .. 'q:' .. queue .. '-recur', at, jid)
      Qless.due(queue, at)
      redis.call('zadd', Qless.P .. 'queues', 'NX', Qless.NOWS, queue)
      return jid
    end

  elseif name == 'get' then
    -- recur.get(now, jid) -> the template as JSON (spec 2.5), or nil. With `ext`
    -- (recur.get.ext), also `next`: its next spawn times (at most 5; a cron template's
    -- stored ticks), and `cron` and `timezone` for a cron template.
    return function(jid, ext)
      local f = redis.call('hmget', Qless.P .. 'r:' .. jid, 'jid', 'klass', 'state', 'queue',
        'priority', 'interval', 'retries', 'count', 'data', 'tags', 'backlog', 'cron', 'timezone',
        'start_within', 'max_run', 'partition')
      if not f[1] then return nil end
      local tags = f[10]
      if not tags or tags == '' or tags == '[]' then tags = '{}' end
      local interval = tonumber(f[6]) or 0
      local extra = ''
      if ext then
        local upcoming = {}
        if f[12] then
          local ticks = redis.call('zrange', Qless.OWN .. 'cron:' .. jid, 0, 4)
          for i = 1, #ticks do upcoming[i] = ticks[i] end
          extra = ',"cron":' .. cjson.encode(f[12]) ..
            ',"timezone":' .. cjson.encode(f[13] or 'UTC')
        else
          local score = tonumber(redis.call('zscore', Qless.P .. 'q:' .. (f[4] or '') .. '-recur',
            jid))
          if score and interval > 0 then
            for i = 0, 4 do upcoming[#upcoming + 1] = Qless.num(score + i * interval) end
          end
        end
        extra = extra .. ',"next":[' .. table.concat(upcoming, ',') .. ']'
        if f[14] then extra = extra .. ',"start_within":' .. Qless.jnum(f[14]) end
        if f[15] then extra = extra .. ',"max_run":' .. Qless.jnum(f[15]) end
        if f[16] then extra = extra .. ',"partition":' .. cjson.encode(f[16]) end
      end
      return '{"jid":' .. cjson.encode(f[1]) ..
        ',"klass":' .. cjson.encode(f[2] or '') ..
        ',"state":' .. cjson.encode(f[3] or '') ..
        ',"queue":' .. cjson.encode(f[4] or '') ..
        ',"priority":' .. Qless.num(tonumber(f[5]) or 0) ..
        ',"interval":' .. Qless.num(interval) ..
        ',"retries":' .. Qless.num(tonumber(f[7]) or 0) ..
        ',"count":' .. Qless.num(tonumber(f[8]) or 0) ..
        ',"data":' .. cjson.encode(f[9] or '') ..
        ',"tags":' .. tags ..
        ',"backlog":' .. Qless.num(tonumber(f[11]) or 0) .. extra .. '}'
    end

  elseif name == 'update' then
    -- recur.update(now, jid, key, value, ...) -> 1 (keys: the protocol's, and the
    -- extensions cron/timezone/ticks and start-within/max-run, '' removing one of
    -- the last two). Every pair is checked before the first change is made. `cron`,
    -- `timezone` and `ticks` (a JSON array of whole seconds) come together and make
    -- it a cron template from its first tick;
    -- `interval` makes a cron template an interval one again, next run an interval on.
    return function(now, jid, args)
      local key = Qless.P .. 'r:' .. jid
      local f = redis.call('hmget', key, 'jid', 'queue', 'interval', 'cron')
      if not f[1] then
        Qless.raise('QL_NOTFOUND', 'Recur', 'No recurring job ' .. jid)
      end
      local given = {}
      for i = 1, #args, 2 do
        local k, v = args[i], args[i + 1]
        given[k] = v
        if v == nil then
          Qless.raise('QL_ARG', 'Recur', 'No value provided for ' .. k)
        elseif k == 'priority' or k == 'retries' then
          if not tonumber(v) then
            Qless.raise('QL_ARG', 'Recur', 'Arg "' .. k .. '" must be a number: ' .. v)
          end
        elseif k == 'interval' then
          local n = tonumber(v)
          if not n then
            Qless.raise('QL_ARG', 'Recur', 'Arg "interval" must be a number: ' .. v)
          elseif n <= 0 then
            Qless.raise('QL_ARG', 'Recur', 'Arg "interval" must be greater than 0')
          end
        elseif k == 'data' then
          if Qless.json_decode(v) == nil then
            Qless.raise('QL_ARG', 'Recur', 'Arg "data" is not JSON-encoded: ' .. v)
          end
        elseif k == 'backlog' then
          if not tonumber(v) then
            Qless.raise('QL_ARG', 'Recur', 'Arg "backlog" not a number: ' .. v)
          end
        elseif k == 'queue' then
          if v == '' then Qless.raise('QL_ARG', 'Queue', 'no queue name provided') end
        elseif k == 'cron' or k == 'timezone' then
          if v == '' then Qless.raise('QL_ARG', 'Recur', 'Arg "' .. k .. '" is empty') end
        elseif k == 'ticks' then
          given.ticks = Qless.Recurring.ticks_arg(v)
        elseif k == 'partition' then
          -- (partitions.lua) '' removes it.
        elseif k == 'start-within' or k == 'max-run' then
          -- (deadlines.lua) '' removes the template's deadline.
          if v ~= '' then Qless.Deadlines.option(v, 'Recur', k, k == 'max-run') end
        elseif k ~= 'klass' then
          Qless.raise('QL_ARG', 'Recur', 'Unrecognized option "' .. k .. '"')
        end
      end
      local cron = given.cron or given.timezone or given.ticks
      if cron and not (given.cron and given.timezone and given.ticks) then
        Qless.raise('QL_ARG', 'Recur', 'Args "cron", "timezone" and "ticks" go together')
      end
      if cron and given.interval then
        Qless.raise('QL_ARG', 'Recur', 'Args "cron" and "interval" exclude each other')
      end
      local queue, interval = f[2] or '', tonumber(f[3]) or 0
      for i = 1, #args, 2 do
        local k, v = args[i], args[i + 1]
        if k == 'interval' then
          local n = tonumber(v)
          local at
          if f[4] then
            Qless.Recurring.cron_off(jid)
            at = Qless.numarg(now + n)
            redis.call('zadd', Qless.P .. 'q:' .. queue .. '-recur', at, jid)
          else
            at = redis.call('zincrby', Qless.P .. 'q:' .. queue .. '-recur', n - interval, jid)
          end
          Qless.due(queue, at)
          redis.call('hset', key, 'interval', n)
          interval = n
        elseif k == 'queue' then
          if v ~= queue then
            local old = Qless.P .. 'q:' .. queue .. '-recur'
            local score = redis.call('zscore', old, jid)
            redis.call('zrem', old, jid)
            if score then
              redis.call('zadd', Qless.P .. 'q:' .. v .. '-recur', score, jid)
              Qless.due(v, score)
            end
          end
          redis.call('hset', key, 'queue', v)
          redis.call('zadd', Qless.P .. 'queues', 'NX', Qless.NOWS, v)
          queue = v
        elseif k == 'priority' or k == 'retries' or k == 'backlog' then
          redis.call('hset', key, k, tonumber(v))
        elseif k == 'start-within' or k == 'max-run' or k == 'partition' then
          local field = k == 'max-run' and 'max_run' or k == 'partition' and 'partition' or
            'start_within'
          if v == '' then
            redis.call('hdel', key, field)
          else
            redis.call('hset', key, field, k == 'partition' and v or Qless.numarg(tonumber(v)))
          end
        elseif k ~= 'cron' and k ~= 'timezone' and k ~= 'ticks' then
          redis.call('hset', key, k, v)
        end
      end
      if cron then
        local fired = redis.call('hget', key, 'fired')
        redis.call('del', Qless.OWN .. 'cron:' .. jid)
        redis.call('hset', key, 'cron', given.cron, 'timezone', given.timezone,
          'interval', Qless.Recurring.period(given.ticks, interval))
        local first = Qless.Recurring.store_ticks(jid, given.ticks, fired)
        local at = first or Qless.numarg(now + interval)
        redis.call('zadd', Qless.P .. 'q:' .. queue .. '-recur', at, jid)
        Qless.due(queue, at)
      end
      return 1
    end

  elseif name == 'ticks_arg' then
    -- The fire times of a cron schedule: a JSON array of 1 to 100 whole seconds,
    -- ascending. Raises an ARG error otherwise.
    return function(text)
      local ticks = Qless.json_decode(text)
      local ok = type(ticks) == 'table' and #ticks >= 1 and #ticks <= 100
      if ok then
        for i = 1, #ticks do
          local t = ticks[i]
          if type(t) ~= 'number' or t ~= math.floor(t) or (i > 1 and t <= ticks[i - 1]) then
            ok = false
          end
        end
      end
      if not ok then
        Qless.raise('QL_ARG', 'Recur', 'Arg "ticks" must be a JSON array of ascending whole ' ..
          'seconds: ' .. tostring(text))
      end
      return ticks
    end

  elseif name == 'period' then
    -- The interval stock qless clients see for a cron schedule: the gap between its
    -- first two ticks (else `default`).
    return function(ticks, default)
      if #ticks >= 2 then return Qless.numarg(ticks[2] - ticks[1]) end
      return Qless.numarg(default)
    end

  elseif name == 'tags' then
    -- recur.tag / recur.untag (now, jid, tag...) -> JSON array of the template's tags.
    return function(jid, tags, add)
      local key = Qless.P .. 'r:' .. jid
      local f = redis.call('hmget', key, 'jid', 'tags')
      if not f[1] then
        Qless.raise('QL_NOTFOUND', add and 'Tag' or 'Untag', 'Job ' .. jid .. ' does not exist')
      end
      local current = Qless.stored_tags(f[2])
      local out = {}
      if add then
        local have = {}
        for i = 1, #current do
          out[#out + 1] = current[i]
          have[current[i]] = true
        end
        for i = 1, #tags do
          if not have[tags[i]] then
            have[tags[i]] = true
            out[#out + 1] = tags[i]
          end
        end
      else
        local drop = {}
        for i = 1, #tags do drop[tags[i]] = true end
        for i = 1, #current do
          if not drop[current[i]] then out[#out + 1] = current[i] end
        end
      end
      local text = Qless.json_list(out)
      redis.call('hset', key, 'tags', text)
      return text
    end

  elseif name == 'off' then
    -- unrecur(now, jid) -> 1. Children already spawned stay.
    return function(jid)
      local key = Qless.P .. 'r:' .. jid
      local queue = redis.call('hget', key, 'queue')
      if queue then redis.call('zrem', Qless.P .. 'q:' .. queue .. '-recur', jid) end
      Qless.Recurring.cron_off(jid)
      redis.call('del', key)
      return 1
    end
  end
end
