-- recurring.lua: recurring templates (ql:r:<jid>) and the children they spawn.
--
-- A template lives in ql:q:<Q>-recur with its next spawn time as score. pop, peek and
-- sweep find the due templates and call spawn, which creates the children R-1, R-2,
-- ...; the recur.* commands manage the templates themselves.

-- The methods of Qless.Recurring, made on first use (see base.lua).
function recurring_factory(name)
  if name == 'spawn' then
    -- Spawns the children of the due templates `due` (jid, score, jid, score, ... as
    -- ZRANGEBYSCORE WITHSCORES gives them) of `queue`, at most `limit` in all (spec
    -- 6.3). Returns how many were spawned and whether everything due was handled.
    return function(now, queue, due, limit, cap)
      local rkey = P .. 'q:' .. queue .. '-recur'
      local ntemplates = #due / 2
      cap = cap or Qless.history_cap(redis.call('hget', P .. 'config', 'max-job-history'))
      local work = P .. 'q:' .. queue .. '-work'
      local entry_tail = ',"put",{"q":' .. cjson.encode(queue) .. '}]'
      local moved = 0
      for i = 1, #due, 2 do
        if moved >= limit then break end
        local rid = due[i]
        local rhash = P .. 'r:' .. rid
        local t = redis.call('hmget', rhash, 'klass', 'data', 'priority', 'tags', 'retries',
          'interval', 'backlog')
        if not t[1] then
          redis.call('zrem', rkey, rid)   -- a schedule entry whose template is gone
        else
          local score = math.floor(tonumber(due[i + 1]))
          local interval = tonumber(t[6]) or 0
          local backlog = tonumber(t[7]) or 0
          if backlog ~= 0 and interval > 0 then
            local n = (now - score) / interval
            if n > backlog then score = score + math.ceil(n - backlog) * interval end
          end
          local tags_text = t[4] or '{}'
          local tags = Qless.stored_tags(tags_text)
          local priority = tonumber(t[3]) or 0
          local retries = t[5] or '0'
          local spawned = false
          while score <= now and moved < limit do
            local child = rid .. '-' .. redis.call('hincrby', rhash, 'count', '1')
            Qless.tags_index(child, tags, NOWS)
            redis.call('hmset', P .. 'j:' .. child, 'jid', child, 'klass', t[1],
              'data', t[2] or '{}',
              'priority', t[3] or '0', 'tags', tags_text, 'state', 'waiting', 'worker', '',
              'expires', '0', 'queue', queue, 'retries', retries, 'remaining', retries,
              'time', string.format('%.20f', score), 'spawned_from_jid', rid)
            Qless.history_push(child, '[' .. Qless.num(math.floor(score)) .. entry_tail, cap,
              false)
            redis.call('zadd', work, Qless.numarg(priority - score / 10000000000), child)
            score = score + interval
            moved = moved + 1
            spawned = true
          end
          if spawned then redis.call('zadd', rkey, Qless.numarg(score), rid) end
        end
      end
      return moved, (ntemplates < limit and moved < limit)
    end

  elseif name == 'on' then
    -- recur(now, queue, jid, klass, data, 'interval', interval, offset, opts) -> jid.
    -- Replaces every attribute but the spawn counter; next run at now + offset.
    return function(now, queue, jid, klass, data, interval, offset, priority, tags, retries,
                    backlog)
      local key = P .. 'r:' .. jid
      local f = redis.call('hmget', key, 'queue', 'count')
      if f[1] and f[1] ~= queue then
        redis.call('zrem', P .. 'q:' .. f[1] .. '-recur', jid)
      end
      local numarg = Qless.numarg
      redis.call('hmset', key, 'jid', jid, 'klass', klass, 'data', data,
        'priority', numarg(priority), 'tags', Qless.json_list(tags), 'state', 'recur',
        'queue', queue, 'type', 'interval',
        'count', f[2] or '0', 'interval', numarg(interval), 'retries', numarg(retries),
        'backlog', numarg(backlog))
      local at = Qless.numarg(now + offset)
      redis.call('zadd', P .. 'q:' .. queue .. '-recur', at, jid)
      Qless.due(queue, at)
      redis.call('zadd', P .. 'queues', 'NX', NOWS, queue)
      return jid
    end

  elseif name == 'get' then
    -- recur.get(now, jid) -> the template as JSON, or nil.
    return function(jid)
      local f = redis.call('hmget', P .. 'r:' .. jid, 'jid', 'klass', 'state', 'queue', 'priority',
        'interval', 'retries', 'count', 'data', 'tags', 'backlog')
      if not f[1] then return nil end
      local tags = f[10]
      if not tags or tags == '' or tags == '[]' then tags = '{}' end
      return '{"jid":' .. cjson.encode(f[1]) ..
        ',"klass":' .. cjson.encode(f[2] or '') ..
        ',"state":' .. cjson.encode(f[3] or '') ..
        ',"queue":' .. cjson.encode(f[4] or '') ..
        ',"priority":' .. Qless.num(tonumber(f[5]) or 0) ..
        ',"interval":' .. Qless.num(tonumber(f[6]) or 0) ..
        ',"retries":' .. Qless.num(tonumber(f[7]) or 0) ..
        ',"count":' .. Qless.num(tonumber(f[8]) or 0) ..
        ',"data":' .. cjson.encode(f[9] or '') ..
        ',"tags":' .. tags ..
        ',"backlog":' .. Qless.num(tonumber(f[11]) or 0) .. '}'
    end

  elseif name == 'update' then
    -- recur.update(now, jid, key, value, ...) -> 1. Every pair is checked before the
    -- first change is made.
    return function(now, jid, args)
      local key = P .. 'r:' .. jid
      local f = redis.call('hmget', key, 'jid', 'queue', 'interval')
      if not f[1] then
        Qless.raise('QL_NOTFOUND', 'Recur', 'No recurring job ' .. jid)
      end
      for i = 1, #args, 2 do
        local k, v = args[i], args[i + 1]
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
        elseif k ~= 'klass' then
          Qless.raise('QL_ARG', 'Recur', 'Unrecognized option "' .. k .. '"')
        end
      end
      local queue, interval = f[2] or '', tonumber(f[3]) or 0
      for i = 1, #args, 2 do
        local k, v = args[i], args[i + 1]
        if k == 'interval' then
          local n = tonumber(v)
          local at = redis.call('zincrby', P .. 'q:' .. queue .. '-recur', n - interval, jid)
          Qless.due(queue, at)
          redis.call('hset', key, 'interval', n)
          interval = n
        elseif k == 'queue' then
          if v ~= queue then
            local old = P .. 'q:' .. queue .. '-recur'
            local score = redis.call('zscore', old, jid)
            redis.call('zrem', old, jid)
            if score then
              redis.call('zadd', P .. 'q:' .. v .. '-recur', score, jid)
              Qless.due(v, score)
            end
          end
          redis.call('hset', key, 'queue', v)
          redis.call('zadd', P .. 'queues', 'NX', NOWS, v)
          queue = v
        elseif k == 'priority' or k == 'retries' or k == 'backlog' then
          redis.call('hset', key, k, tonumber(v))
        else
          redis.call('hset', key, k, v)
        end
      end
      return 1
    end

  elseif name == 'tags' then
    -- recur.tag / recur.untag (now, jid, tag...) -> JSON array of the template's tags.
    return function(jid, tags, add)
      local key = P .. 'r:' .. jid
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
      local key = P .. 'r:' .. jid
      local queue = redis.call('hget', key, 'queue')
      if queue then redis.call('zrem', P .. 'q:' .. queue .. '-recur', jid) end
      redis.call('del', key)
      return 1
    end
  end
end
