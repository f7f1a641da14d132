-- extra.lua: what the gateway adds to a job beside the qless model: progress and
-- result (kept apart from `data`), idempotent puts, and retry backoff.
--
-- Everything lives in keys and hash fields that stock qless clients never read
-- (lua/README.md, "Gateway features"), so they keep working on the same Redis.

-- The methods of Qless.Extra, made on first use (see base.lua).
function extra_factory(name)
  if name == 'job_json' then
    -- The job object of jid (as `get` gives it) plus, when the job has them, the
    -- fields `extras` adds; nil if no job. This is `GET /v1/jobs/{jid}`.
    return function(jid)
      local buf = {}
      if not Qless.job_buffer(buf, jid) then return nil end
      local extra = Qless.Extra.extras(jid, true)
      if extra ~= '' then
        -- The object ends with '}' in the buffer's last piece: insert before it.
        local last = buf[#buf]
        buf[#buf] = string.sub(last, 1, -2) .. extra .. '}'
      end
      return table.concat(buf)
    end

  elseif name == 'extras' then
    -- The members the gateway adds to jid's job object, each as `,"name":value`
    -- ('' when it has none): its `progress` and `result` (JSON text, as strings like
    -- `data`), `throttles`, its `backoff` policy, the throttle it waits on
    -- (`throttled`), its `batch` and `workflow`, its deadlines `start_by` and
    -- `max_run` (deadlines.lua), its `partition` (partitions.lua), and with `traced`
    -- its `traceparent` and workflow `parents` too (a leased job's fields carry those
    -- already: push.pop). One list for `get` and for push deliveries, whose body is the
    -- job as `get` shows it.
    return function(jid, traced)
      -- (Each field of an HMGET costs about as much as a small Redis call: a leased
      -- job's fields carry its traceparent and parents, which are then not read.)
      local key = Qless.P .. 'j:' .. jid
      local f
      if traced then
        f = redis.call('hmget', key, 'progress', 'result', 'throttles', 'backoff', 'throttled',
          'batch', 'workflow', 'start_by', 'max_run', 'partition', 'traceparent', 'parents')
      else
        f = redis.call('hmget', key, 'progress', 'result', 'throttles', 'backoff', 'throttled',
          'batch', 'workflow', 'start_by', 'max_run', 'partition')
      end
      if not (f[1] or f[2] or f[3] or f[4] or f[5] or f[6] or f[7] or f[8] or f[9] or f[10] or
          f[11] or f[12]) then
        return ''
      end
      local extra = ''
      if f[1] then extra = extra .. ',"progress":' .. cjson.encode(f[1]) end
      if f[2] then extra = extra .. ',"result":' .. cjson.encode(f[2]) end
      if f[3] then extra = extra .. ',"throttles":' .. f[3] end
      if f[4] and f[4] ~= '' then extra = extra .. ',"backoff":' .. f[4] end
      if f[5] and f[5] ~= '' then extra = extra .. ',"throttled":' .. cjson.encode(f[5]) end
      if f[11] then extra = extra .. ',"traceparent":' .. cjson.encode(f[11]) end
      -- (batches.lua, workflow.lua: the parents object as JSON text, like data.)
      if f[6] then extra = extra .. ',"batch":' .. cjson.encode(f[6]) end
      if f[7] then extra = extra .. ',"workflow":' .. cjson.encode(f[7]) end
      if f[12] then extra = extra .. ',"parents":' .. cjson.encode(f[12]) end
      if f[8] then extra = extra .. ',"start_by":' .. Qless.jnum(f[8]) end
      if f[9] then extra = extra .. ',"max_run":' .. Qless.jnum(f[9]) end
      if f[10] then extra = extra .. ',"partition":' .. cjson.encode(f[10]) end
      return extra
    end

  elseif name == 'oldest_waiting' then
    -- JSON object: queue -> the time (as stored, seconds) its job next in line was put
    -- or last put back, for each queue with a waiting job ('{}' if none). With equal
    -- priorities that is the queue's oldest waiting job. One ZREVRANGE and one HGET a
    -- queue: cheap enough for a scrape of 1,000 queues.
    return function()
      local names = redis.call('zrange', Qless.P .. 'queues', '0', '-1')
      local out = {}
      for i = 1, #names do
        local top = redis.call('zrevrange', Qless.P .. 'q:' .. names[i] .. '-work', '0', '0')[1]
        local put = top and redis.call('hget', Qless.P .. 'j:' .. top, 'time')
        if put then out[#out + 1] = cjson.encode(names[i]) .. ':' .. cjson.encode(put) end
      end
      return '{' .. table.concat(out, ',') .. '}'
    end

  elseif name == 'traceparent_valid' then
    -- Whether text is a W3C traceparent of version 00 (`00-<32 hex>-<16 hex>-<2 hex>`,
    -- lowercase, ids not all zeros), the form the gateway stores.
    local hex = '[0-9a-f]'
    local pattern = '^00%-' .. string.rep(hex, 32) .. '%-' .. string.rep(hex, 16) .. '%-' ..
      hex .. hex .. '$'
    return function(text)
      return string.find(text, pattern) ~= nil
        and string.sub(text, 4, 35) ~= string.rep('0', 32)
        and string.sub(text, 37, 52) ~= string.rep('0', 16)
    end

  elseif name == 'idempotent' then
    -- The jid an idempotency key answers while it is fresh (its `until` is after
    -- now), or nil. Beside the plain prefix a key is also looked for under its name
    -- of before qlessd's keys left 'ql:' (`ql:idem:<key>`): the start-up migration
    -- (Qless.migrate) moves those, but a gateway of the older version still serving
    -- during a rolling upgrade writes them until it stops, and a request retried
    -- from it to this one must still find its put. (Only a key not found pays the
    -- second read; the old keys expire with their ttl.)
    return function(now, ikey)
      local f = redis.call('hmget', Qless.OWN .. 'idem:' .. ikey, 'jid', 'until')
      if not f[1] and Qless.OWN ~= Qless.P then
        f = redis.call('hmget', Qless.P .. 'idem:' .. ikey, 'jid', 'until')
      end
      if f[1] and (tonumber(f[2]) or 0) > now then return f[1] end
      return nil
    end

  elseif name == 'remember' then
    -- Records that idempotency key ikey answers jid until now + ttl. Redis expires
    -- the key a little after that (by its own clock) so that it does not pile up.
    return function(now, ikey, jid, ttl)
      local key = Qless.OWN .. 'idem:' .. ikey
      redis.call('hset', key, 'jid', jid, 'until', Qless.numarg(now + ttl))
      redis.call('expire', key, string.format('%d', math.ceil(ttl) + 60))
    end

  elseif name == 'backoff_parse' then
    -- A backoff policy's JSON text as {initial, factor, max, jitter}, or nil when
    -- it is not a valid one: initial >= 0, factor >= 1, max >= 0, 0 <= jitter <= 1
    -- (factor, max and jitter are optional: 2, none, 0).
    return function(text)
      local b = Qless.json_decode(text)
      if type(b) ~= 'table' then return nil end
      local initial, factor, max, jitter = b.initial, b.factor or 2, b.max, b.jitter or 0
      if type(initial) ~= 'number' or initial < 0 or initial ~= initial or initial == 1 / 0 then
        return nil
      end
      if type(factor) ~= 'number' or factor < 1 or factor == 1 / 0 then return nil end
      if max ~= nil and (type(max) ~= 'number' or max < 0 or max ~= max) then return nil end
      if type(jitter) ~= 'number' or jitter < 0 or jitter > 1 then return nil end
      return { initial = initial, factor = factor, max = max, jitter = jitter }
    end

  elseif name == 'backoff_delay' then
    -- The backoff of job jid (its own policy, else its queue's `<queue>-backoff`
    -- option) for its next attempt, in seconds; 0 when it has none. The attempt
    -- number is the retries used so far plus `offset` (1 when read before the retry
    -- uses one, 0 after).
    -- Jitter takes up to that fraction off the delay, by an amount derived from the
    -- jid and the attempt: the same on every gateway, spread across jobs.
    return function(jid, queue, offset)
      local f = redis.call('hmget', Qless.P .. 'j:' .. jid, 'backoff', 'retries', 'remaining',
        'queue')
      local text = f[1]
      if not text then
        text = redis.call('hget', Qless.P .. 'config', (queue or f[4] or '') .. '-backoff')
      end
      if not text then return 0 end
      local b = Qless.Extra.backoff_parse(text)
      if not b then return 0 end
      local attempt = (tonumber(f[2]) or 5) - (tonumber(f[3]) or 5) + offset
      if attempt < 1 then attempt = 1 end
      local delay = b.initial * b.factor ^ (attempt - 1)
      if b.max and delay > b.max then delay = b.max end
      if b.jitter > 0 then
        local h = attempt * 7919
        for i = 1, #jid do h = (h * 31 + string.byte(jid, i)) % 1000003 end
        delay = delay * (1 - b.jitter * (h / 1000003))
      end
      return delay
    end

  elseif name == 'lock_backoff' then
    -- A job whose lock expired and that still has retries: if it has a backoff, it
    -- is scheduled in its queue after that delay (its throttle slots freed) instead
    -- of being handed to the popping worker. Returns true when it was scheduled.
    -- (`remaining` was already lowered by the caller: offset 0.)
    return function(now, queue, jid)
      local key = Qless.P .. 'j:' .. jid
      local delay = Qless.Extra.backoff_delay(jid, queue, 0)
      if delay <= 0 then return false end
      local qkey = Qless.P .. 'q:' .. queue
      redis.call('zrem', qkey .. '-locks', jid)
      local at = Qless.numarg(now + delay)
      redis.call('zadd', qkey .. '-scheduled', at, jid)
      Qless.due(queue, at)
      redis.call('hset', key, 'state', 'scheduled', 'worker', '', 'expires', '0')
      local throttles = redis.call('hget', key, 'throttles')
      if throttles then Qless.Throttle.release(now, jid, throttles, queue) end
      return true
    end

  elseif name == 'migrate' then
    -- migrate(now, cursor, count) -> { next cursor, keys moved }: moves qlessd's own
    -- keys of the plain prefix from their names of before (under 'ql:', where the
    -- qless protocol has no such keys) to OWN ('qlessd:'); lua/README.md, "Moving
    -- qlessd's keys out of ql:". Atomic per call and idempotent: a key is moved or
    -- merged into its new name and deleted, so a second run, or two gateways running
    -- it at once, find nothing more to do. In a namespace (OWN is P) there is nothing
    -- to move.
    --
    -- Every call first moves the families whose members an index names, together:
    -- the due index; the cron index with each listed template's ticks; the set of
    -- throttles with limits with each one's limits, holders, leases and waiting jobs,
    -- and the -throttled set of each waiting job's queue. So no call ever leaves a
    -- due time, a tick or a throttle half moved. Then, with a cursor (a SCAN cursor,
    -- '0' to start), it looks at one SCAN step of the keys under 'ql:' and moves
    -- those of qlessd's kinds that no index names (idempotency keys, the holders of
    -- throttles without limits, the old sweeper lease), until a full pass is done:
    -- `OWN migrated` then records it (its value is `now`), and later calls stop at
    -- the indexed families, which are cheap to look for (one EXISTS), for a gateway
    -- of the older version may still write them during a rolling upgrade.
    return function(now, cursor, count)
      local P, OWN = Qless.P, Qless.OWN
      if P == OWN then return { '0', 0 } end
      local call = redis.call
      local moved = 0
      -- Moves old key `old` (if it exists) to `new`: sorted sets and sets are merged
      -- into what the new name already has (a sorted set keeps each member's lowest
      -- score: the earliest due time or tick); anything else is renamed, keeping its
      -- expiry, unless the new name exists already, which was written since by this
      -- version and so wins.
      local function move(old, new)
        local kind = call('type', old).ok
        if kind == 'none' then return end
        if kind == 'zset' then
          call('zunionstore', new, '2', new, old, 'AGGREGATE', 'MIN')
          call('del', old)
        elseif kind == 'set' then
          call('sunionstore', new, new, old)
          call('del', old)
        elseif call('exists', new) == 1 then
          call('del', old)
        else
          call('rename', old, new)
        end
        moved = moved + 1
      end
      if call('exists', P .. 'due', P .. 'cron', P .. 'throttles') > 0 then
        move(P .. 'due', OWN .. 'due')
        local crons = call('zrange', P .. 'cron', '0', '-1')
        for i = 1, #crons do move(P .. 'cron:' .. crons[i], OWN .. 'cron:' .. crons[i]) end
        move(P .. 'cron', OWN .. 'cron')
        local names = call('smembers', P .. 'throttles')
        local queues = {}
        for i = 1, #names do
          local th = 'th:' .. names[i]
          local waiting = call('zrange', P .. th .. '-waiting', '0', '-1')
          for k = 1, #waiting do
            local q = call('hget', P .. 'j:' .. waiting[k], 'queue')
            if q and not queues[q] then
              queues[q] = true
              move(P .. 'q:' .. q .. '-throttled', OWN .. 'q:' .. q .. '-throttled')
            end
          end
          move(P .. th, OWN .. th)
          move(P .. th .. '-locks', OWN .. th .. '-locks')
          move(P .. th .. '-leases', OWN .. th .. '-leases')
          move(P .. th .. '-waiting', OWN .. th .. '-waiting')
        end
        move(P .. 'throttles', OWN .. 'throttles')
      end
      if not cursor or call('exists', OWN .. 'migrated') == 1 then return { '0', moved } end
      local step = call('scan', cursor, 'MATCH', P .. '*', 'COUNT', count)
      local keys = step[2]
      local plen = #P
      for i = 1, #keys do
        local key = keys[i]
        local rest = string.sub(key, plen + 1)
        -- (Keys of the namespaces, `ql:{ns}:...`, are not the plain prefix's.)
        if string.byte(rest, 1) ~= 123 then
          if rest == 'sweeper' then
            -- The lease of a gateway of the older version: nothing reads it now (this
            -- version's is OWN sweeper). Such a gateway still running takes it again
            -- and sweeps beside this version's until it stops, which is harmless
            -- (each sweep is atomic); the lease then expires within seconds.
            call('del', key)
            moved = moved + 1
          elseif rest == 'due' or rest == 'cron' or rest == 'throttles'
              or string.sub(rest, 1, 5) == 'idem:' or string.sub(rest, 1, 5) == 'cron:'
              or string.sub(rest, 1, 3) == 'th:'
              or (string.sub(rest, 1, 2) == 'q:' and string.sub(rest, -10) == '-throttled') then
            move(key, OWN .. rest)
          end
        end
      end
      if step[1] == '0' then call('set', OWN .. 'migrated', Qless.NOWS) end
      return { step[1], moved }
    end
  end
end
