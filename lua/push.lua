-- push.lua: push delivery, queues worked by an HTTP endpoint that qlessd calls.
--
-- Push delivery is qlessd's own (the qless protocol has none), so every key of it is
-- under OWN. A pushed queue Q has its settings in OWN push:<Q> (a hash: `url`,
-- `timeout` seconds, `concurrency`, `rate-jobs` per `rate-seconds` (0: no rate),
-- `headers` (a JSON object), the signing `secret`, the rotated-out `old-secret` valid
-- until `old-until`, and the counts `delivered`, `retried`, `failed`). OWN pushes is
-- the set of pushed queues. The deliveries in flight are OWN push:<Q>-flight (jid ->
-- the time by which the delivery is over, its timeout included: an entry left by a
-- qlessd that died mid-delivery frees its slot then) and the recent ones, for the
-- rate, OWN push:<Q>-sent (jid@time -> time). Both are shared by every qlessd on the
-- namespace, which is what makes `concurrency` and `rate` hold across them.
--
-- A delivery is an ordinary lease (Queue.pop, under the delivering qlessd's worker
-- name) and ends through an ordinary complete, retry or fail, run by push.finish,
-- which also frees the slot and counts the outcome: stock clients see a worker
-- running the job and nothing else.

-- The methods of Qless.Push, made on first use (see base.lua).
function push_factory(name)
  -- How many recent deliveries a pushed queue keeps (OWN push:<Q>-recent).
  local RECENT = 50
  if name == 'set' then
    -- set(now, queue, url, timeout, concurrency, rate_jobs, rate_seconds, headers,
    -- secret) -> 1 when the queue was not pushed before (and `secret` is its signing
    -- secret from now on), 0 when only its settings changed (its secrets are kept).
    -- The queue's waiting jobs are announced, so that deliveries start at once.
    return function(now, queue, url, timeout, concurrency, rjobs, rsec, headers, secret)
      local key = Qless.OWN .. 'push:' .. queue
      local created = redis.call('hsetnx', key, 'secret', secret)
      redis.call('hset', key, 'url', url, 'timeout', timeout, 'concurrency', concurrency,
        'rate-jobs', rjobs, 'rate-seconds', rsec, 'headers', headers)
      redis.call('sadd', Qless.OWN .. 'pushes', queue)
      local waiting = redis.call('zcard', Qless.P .. 'q:' .. queue .. '-work')
      if waiting > 0 then Qless.available(queue, waiting) end
      return created
    end

  elseif name == 'get' then
    -- get(now, queue) -> JSON {queue, url, timeout, concurrency, rate ({jobs,
    -- seconds} or null), headers, secrets (the current one first, then the old one
    -- while its grace lasts), old_until (or null), delivered, retried, failed,
    -- in_flight}, or nil when the queue is not pushed. The secrets are for the
    -- gateway's signatures: it never shows them. A rotated-out secret whose grace is
    -- over is deleted (every qlessd delivering the queue reads this within seconds).
    return function(now, queue)
      local key = Qless.OWN .. 'push:' .. queue
      local f = redis.call('hmget', key, 'url', 'timeout', 'concurrency', 'rate-jobs',
        'rate-seconds', 'headers', 'secret', 'old-secret', 'old-until', 'delivered',
        'retried', 'failed')
      if not f[1] then return nil end
      local rjobs, rsec = tonumber(f[4]) or 0, tonumber(f[5]) or 0
      local rate = 'null'
      if rjobs > 0 and rsec > 0 then
        rate = '{"jobs":' .. Qless.num(rjobs) .. ',"seconds":' .. Qless.num(rsec) .. '}'
      end
      local secrets = { f[7] }
      local old_until = 'null'
      if f[8] and (tonumber(f[9]) or 0) > now then
        secrets[2] = f[8]
        old_until = Qless.num(tonumber(f[9]))
      elseif f[8] then
        -- Its grace is over: the old secret is gone, from Redis too.
        redis.call('hdel', key, 'old-secret', 'old-until')
      end
      redis.call('zremrangebyscore', key .. '-flight', '-inf', Qless.NOWS)
      return '{"queue":' .. cjson.encode(queue) .. ',"url":' .. cjson.encode(f[1]) ..
        ',"timeout":' .. Qless.num(tonumber(f[2])) ..
        ',"concurrency":' .. Qless.num(tonumber(f[3])) ..
        ',"rate":' .. rate .. ',"headers":' .. (f[6] or '{}') ..
        ',"secrets":' .. Qless.json_list(secrets) .. ',"old_until":' .. old_until ..
        ',"delivered":' .. (f[10] or '0') .. ',"retried":' .. (f[11] or '0') ..
        ',"failed":' .. (f[12] or '0') ..
        ',"in_flight":' .. redis.call('zcard', key .. '-flight') ..
        ',"recent":[' .. table.concat(redis.call('lrange', key .. '-recent', '0', '-1'), ',') ..
        ']}'
    end

  elseif name == 'list' then
    -- list(now) -> the pushed queues, by name.
    return function(now)
      local names = redis.call('smembers', Qless.OWN .. 'pushes')
      table.sort(names)
      return names
    end

  elseif name == 'forget' then
    -- forget(now, queue) -> 1 when the queue was pushed, else 0. Its jobs stay; the
    -- deliveries in flight end as they would have (push.finish counts nothing then).
    return function(now, queue)
      local key = Qless.OWN .. 'push:' .. queue
      local had = redis.call('del', key, key .. '-flight', key .. '-sent', key .. '-recent')
      redis.call('srem', Qless.OWN .. 'pushes', queue)
      return had > 0 and 1 or 0
    end

  elseif name == 'rotate' then
    -- rotate(now, queue, secret, grace) -> 1, or 0 when the queue is not pushed.
    -- `secret` signs from now on; the one it replaces signs beside it for `grace`
    -- seconds more (not at all when grace is 0).
    return function(now, queue, secret, grace)
      local key = Qless.OWN .. 'push:' .. queue
      local old = redis.call('hget', key, 'secret')
      if not old then return 0 end
      redis.call('hset', key, 'secret', secret, 'old-secret', old, 'old-until',
        Qless.numarg(now + grace))
      return 1
    end

  elseif name == 'pop' then
    -- pop(now, queue, worker, max) -> Queue.pop's flat array of the leased jobs'
    -- fields, then (when any were leased) false and, per job in the same order, the
    -- members `get` adds to it (Extra.extras, as a JSON object's text, or false when
    -- it has none: the delivery's body is the job as `get` shows it) and which
    -- delivery of the job this lease is (its `push-attempts`, counted here, so that
    -- `qlessd-attempt` goes on rising however long its history grows). At most `max`
    -- jobs, fewer when the queue's concurrency or rate has less room. Each leased job
    -- takes a slot until push.finish or the end of its delivery's timeout, and counts
    -- against the rate window.
    return function(now, queue, worker, max)
      local key = Qless.OWN .. 'push:' .. queue
      local f = redis.call('hmget', key, 'timeout', 'concurrency', 'rate-jobs', 'rate-seconds')
      if not f[1] then return {} end
      local flight, sent = key .. '-flight', key .. '-sent'
      redis.call('zremrangebyscore', flight, '-inf', Qless.NOWS)
      local room = (tonumber(f[2]) or 0) - redis.call('zcard', flight)
      local rjobs, rsec = tonumber(f[3]) or 0, tonumber(f[4]) or 0
      if rjobs > 0 and rsec > 0 then
        redis.call('zremrangebyscore', sent, '-inf', Qless.numarg(now - rsec))
        local left = rjobs - redis.call('zcard', sent)
        if left < room then room = left end
      end
      if max < room then room = max end
      if room <= 0 then return {} end
      local out = Qless.Queue.pop(now, worker, room, { queue }, { room }, true)
      local n = #out
      if n == 0 then return out end
      local deadline = Qless.numarg(now + (tonumber(f[1]) or 0))
      -- The jids of the flat array: each job is 15 fields, then three counted lists.
      -- (Their members are added after the array rather than after each job: no copy.)
      local m = n + 1
      out[m] = false
      local i = 1
      while i <= n do
        local jid = out[i]
        redis.call('zadd', flight, deadline, jid)
        if rjobs > 0 and rsec > 0 then
          redis.call('zadd', sent, Qless.NOWS, jid .. '@' .. Qless.NOWS)
        end
        local extra = Qless.Extra.extras(jid, false)
        out[m + 1] = extra ~= '' and '{' .. string.sub(extra, 2) .. '}' or false
        out[m + 2] = redis.call('hincrby', Qless.P .. 'j:' .. jid, 'push-attempts', 1)
        m = m + 2
        i = i + 15
        for _ = 1, 3 do i = i + out[i] + 1 end
      end
      return out
    end

  elseif name == 'finish' then
    -- finish(now, queue, jid, worker, status, ms, attempt, outcome, ...) -> { what
    -- happened, detail }: ends a delivery of jid by worker, frees its slot, counts it,
    -- and records it among the queue's recent deliveries (its HTTP `status`, '' when
    -- none came, its duration `ms`, its `attempt`). Outcomes:
    --   complete [result]          -> 'delivered' (result: JSON text to keep)
    --   retry delay group message  -> 'retried', or 'failed' when its retries are used up
    --                                 (delay: seconds, or 'backoff' for the job's own)
    --   postpone delay group message -> 'retried' after `delay` seconds, using none of
    --                                 its retries (a receiver's Retry-After, shutdown);
    --                                 with `attempt` 0 the job was never posted, and
    --                                 its lease does not count as a delivery
    --   fail group message         -> 'failed'
    -- When the job can no longer be ended by this worker (canceled meanwhile, its
    -- lease expired and went to another), { 'gone', the error's text } and nothing is
    -- counted: the slot is freed all the same.
    return function(now, queue, jid, worker, status, ms, attempt, outcome, a, b, c)
      local key = Qless.OWN .. 'push:' .. queue
      local ok, what = pcall(function()
        if outcome == 'complete' then
          Qless.Job.complete(now, jid, worker, queue, nil, nil, 0, nil)
          if a and redis.call('exists', Qless.P .. 'j:' .. jid) == 1 then
            redis.call('hset', Qless.P .. 'j:' .. jid, 'result', a)
          end
          return 'delivered'
        elseif outcome == 'retry' then
          local delay = a == 'backoff' and Qless.Extra.backoff_delay(jid, queue, 1) or tonumber(a)
          local left = Qless.Job.retry(now, jid, queue, worker, delay, b, c)
          return left < 0 and 'failed' or 'retried'
        elseif outcome == 'postpone' then
          -- A retry that uses none of the job's retries: the one retry takes is given
          -- back first, once the job is known to be this worker's (retry's own
          -- checks then pass, so nothing is written unless all of it is).
          local key = Qless.P .. 'j:' .. jid
          local f = redis.call('hmget', key, 'state', 'worker')
          if f[1] == 'running' and f[2] == worker then
            redis.call('hincrby', key, 'remaining', 1)
            if attempt == '0' then redis.call('hincrby', key, 'push-attempts', -1) end
          end
          Qless.Job.retry(now, jid, queue, worker, tonumber(a), b, c)
          return 'retried'
        end
        Qless.Job.fail(now, jid, worker, a, b, nil)
        return 'failed'
      end)
      -- Only this worker's slot: the same jid may be in flight again elsewhere.
      local held = redis.call('hget', Qless.P .. 'j:' .. jid, 'worker')
      -- A freed slot is announced like any transition that lets a job be leased, so
      -- that every qlessd's loop of the queue may take it, not only this one's.
      if (ok or held ~= worker) and redis.call('zrem', key .. '-flight', jid) == 1 and
          redis.call('zcard', Qless.P .. 'q:' .. queue .. '-work') > 0 then
        Qless.available(queue, 1)
      end
      local detail = ''
      if not ok then
        if type(what) == 'table' then what = what.err end
        detail = string.gsub(tostring(what), '[\r\n]', ' ')
        what = 'gone'
      end
      if redis.call('exists', key) == 1 then
        if ok then redis.call('hincrby', key, what, 1) end
        redis.call('lpush', key .. '-recent', '{"jid":' .. cjson.encode(jid) ..
          ',"status":' .. (status == '' and 'null' or status) .. ',"ms":' .. ms ..
          ',"attempt":' .. attempt .. ',"outcome":"' .. what .. '","when":' .. Qless.NOWF ..
          ',"worker":' .. cjson.encode(worker) .. '}')
        redis.call('ltrim', key .. '-recent', '0', tostring(RECENT - 1))
      end
      return { what, detail }
    end
  end
end
