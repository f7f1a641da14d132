-- throttle.lua: throttles, limits shared by the jobs that name them.
--
-- Throttles are qlessd's own (the qless protocol has none), so every key of theirs is
-- under OWN ('qlessd:' beside the plain 'ql:' prefix; a namespace's own prefix in a
-- namespace). A throttle T has limits in OWN th:<T> (`maximum` jobs holding it at
-- once, at most `rate-jobs` leases per `rate-seconds`), its holders in OWN th:<T>-locks
-- (jid -> lease time), its recent leases in OWN th:<T>-leases (jid@time -> lease time)
-- and the jobs waiting for a slot in OWN th:<T>-waiting (jid -> the job's -work
-- score). A job names its throttles in its hash field `throttles` (JSON list).
-- OWN throttles is the set of throttles with limits: while it does not exist pop does
-- not look at throttles at all. A job waiting for a slot is out of its queue's -work,
-- in OWN q:<Q>-throttled, with state `waiting` (stock clients see a waiting job); its
-- hash field `throttled` names the throttle it waits on.

-- The methods of Qless.Throttle, made on first use (see base.lua).
function throttle_factory(name)
  if name == 'set' then
    -- set(now, name, maximum, rate_jobs, rate_seconds): 0 means no such limit. Jobs
    -- waiting on it are reconsidered (a higher maximum may let some run).
    return function(now, tname, maximum, rjobs, rsec)
      local th = Qless.OWN .. 'th:' .. tname
      redis.call('hset', th, 'maximum', Qless.numarg(maximum), 'rate-jobs', Qless.numarg(rjobs),
        'rate-seconds', Qless.numarg(rsec))
      redis.call('sadd', Qless.OWN .. 'throttles', tname)
      Qless.Throttle.drain(now, tname)
      return 1
    end

  elseif name == 'delete' then
    -- delete(now, name) -> 1 if it had limits, else 0. Its waiting jobs go back to
    -- their queues; its holders keep running (and free nothing when they finish).
    return function(now, tname)
      local th = Qless.OWN .. 'th:' .. tname
      local had = redis.call('del', th, th .. '-leases')
      redis.call('srem', Qless.OWN .. 'throttles', tname)
      Qless.Throttle.drain(now, tname)
      return had > 0 and 1 or 0
    end

  elseif name == 'get' then
    -- get(now, name) -> JSON {name, maximum, rate, running, waiting}, or nil when the
    -- throttle has no limits, no holder and no waiting job.
    return function(now, tname)
      local th = Qless.OWN .. 'th:' .. tname
      local f = redis.call('hmget', th, 'maximum', 'rate-jobs', 'rate-seconds')
      local running = redis.call('zrange', th .. '-locks', '0', '-1')
      local waiting = redis.call('zrevrange', th .. '-waiting', '0', '-1')
      if not f[1] and #running == 0 and #waiting == 0 then return nil end
      local rjobs, rsec = tonumber(f[2]) or 0, tonumber(f[3]) or 0
      local rate = 'null'
      local recent = 0
      if rjobs > 0 and rsec > 0 then
        recent = redis.call('zcount', th .. '-leases', '(' .. Qless.numarg(now - rsec), '+inf')
        rate = '{"jobs":' .. Qless.num(rjobs) .. ',"seconds":' .. Qless.num(rsec) .. '}'
      end
      local max = tonumber(f[1]) or 0
      return '{"name":' .. cjson.encode(tname) ..
        ',"maximum":' .. (max > 0 and Qless.num(max) or 'null') ..
        ',"rate":' .. rate .. ',"recent":' .. recent ..
        ',"running":' .. Qless.json_list(running) ..
        ',"waiting":' .. Qless.json_list(waiting) .. '}'
    end

  elseif name == 'limits' then
    -- The limits and current use of a throttle, read once per call into `cache`.
    return function(now, tname, cache)
      local l = cache[tname]
      if l then return l end
      local th = Qless.OWN .. 'th:' .. tname
      local f = redis.call('hmget', th, 'maximum', 'rate-jobs', 'rate-seconds')
      l = { key = th, max = tonumber(f[1]) or 0, rjobs = tonumber(f[2]) or 0,
        rsec = tonumber(f[3]) or 0 }
      if l.max > 0 then l.held = redis.call('zcard', th .. '-locks') end
      if l.rjobs > 0 and l.rsec > 0 then
        redis.call('zremrangebyscore', th .. '-leases', '-inf', Qless.numarg(now - l.rsec))
        l.leases = redis.call('zcard', th .. '-leases')
        local first = redis.call('zrange', th .. '-leases', '0', '0', 'WITHSCORES')
        l.oldest = tonumber(first[2]) or now
      end
      cache[tname] = l
      return l
    end

  elseif name == 'admit' then
    -- Pop's check (queue.lua): of the jobs just taken from the top of -work (`jids`
    -- after the first `handed`, which were taken over from expired locks and keep
    -- their slots; `top` is ZPOPMAX's reply with their scores), those whose
    -- throttles all have room take a slot and are returned (with the handed ones);
    -- the others wait apart: for a full `maximum` in the throttle's -waiting set, for
    -- a used-up rate in -scheduled until the window has room. Each job that waits is
    -- replaced by the next one of -work, so other jobs of the queue are not blocked
    -- (at most 1000 replacements per call).
    return function(now, queue, qkey, jids, handed, top)
      local out, pending, scores, cache = {}, {}, {}, {}
      for i = 1, handed do out[i] = jids[i] end
      for i = handed + 1, #jids do pending[#pending + 1] = jids[i] end
      for i = 1, #top, 2 do scores[top[i]] = top[i + 1] end
      local stored_tags, limits = Qless.stored_tags, Qless.Throttle.limits
      local parked, i = 0, 1
      while i <= #pending do
        local jid = pending[i]
        local key = Qless.P .. 'j:' .. jid
        local text = redis.call('hget', key, 'throttles')
        local names = text and stored_tags(text) or {}
        local full, retry_at
        local mine = {}
        for k = 1, #names do
          local l = limits(now, names[k], cache)
          mine[k] = l
          local holds = redis.call('zscore', l.key .. '-locks', jid)
          if not holds then
            if l.held and l.held >= l.max then
              full = names[k]
              break
            elseif l.leases and l.leases >= l.rjobs then
              retry_at = l.oldest + l.rsec
              break
            end
          end
          l.holding = holds and jid or nil
        end
        if not full and not retry_at then
          for k = 1, #mine do
            local l = mine[k]
            if l.holding ~= jid then
              redis.call('zadd', l.key .. '-locks', Qless.NOWS, jid)
              if l.held then l.held = l.held + 1 end
              if l.leases then
                redis.call('zadd', l.key .. '-leases', Qless.NOWS, jid .. '@' .. Qless.NOWS)
                l.leases = l.leases + 1
              end
            end
          end
          out[#out + 1] = jid
        else
          local score = scores[jid] or '0'
          if full then
            redis.call('zadd', Qless.OWN .. 'th:' .. full .. '-waiting', score, jid)
            redis.call('zadd', Qless.OWN .. 'q:' .. queue .. '-throttled', score, jid)
            redis.call('hset', key, 'throttled', full)
          else
            local at = Qless.numarg(retry_at)
            redis.call('zadd', qkey .. '-scheduled', at, jid)
            Qless.due(queue, at)
            redis.call('hset', key, 'state', 'scheduled')
          end
          parked = parked + 1
          if parked <= 1000 then
            local more = redis.call('zpopmax', qkey .. '-work', '1')
            if more[1] then
              scores[more[1]] = more[2]
              pending[#pending + 1] = more[1]
            end
          end
        end
        i = i + 1
      end
      return out
    end

  elseif name == 'release' then
    -- The job jid (in `queue`) no longer runs, or leaves its queue: its slot in each
    -- of its throttles (JSON list text) is freed, it stops waiting on any of them,
    -- and the waiting jobs that now have room go back to their queues.
    return function(now, jid, throttles, queue)
      local names = Qless.stored_tags(throttles)
      for k = 1, #names do
        local th = Qless.OWN .. 'th:' .. names[k]
        local freed = redis.call('zrem', th .. '-locks', jid)
        if redis.call('zrem', th .. '-waiting', jid) == 1 then
          if queue and queue ~= '' then
            redis.call('zrem', Qless.OWN .. 'q:' .. queue .. '-throttled', jid)
          end
          redis.call('hdel', Qless.P .. 'j:' .. jid, 'throttled')
        end
        if freed == 1 then Qless.Throttle.drain(now, names[k]) end
      end
    end

  elseif name == 'drain' then
    -- Moves the jobs waiting on throttle `tname` that now have room (all of them when
    -- it has no maximum) back to the top of their queues' -work, with an
    -- `unthrottled` event on OWN log each (not on the protocol's log: stock clients
    -- know no such event), and announces them on OWN available.
    return function(now, tname)
      local th = Qless.OWN .. 'th:' .. tname
      local waiting = th .. '-waiting'
      local n = redis.call('zcard', waiting)
      if n == 0 then return end
      local max = tonumber(redis.call('hget', th, 'maximum')) or 0
      local room = n
      if max > 0 then room = max - redis.call('zcard', th .. '-locks') end
      if room <= 0 then return end
      if room > n then room = n end
      local top = redis.call('zpopmax', waiting, string.format('%d', room))
      for i = 1, #top, 2 do
        local jid = top[i]
        local key = Qless.P .. 'j:' .. jid
        local q = redis.call('hget', key, 'queue')
        if q and q ~= '' then
          local qkey = Qless.P .. 'q:' .. q
          redis.call('zrem', Qless.OWN .. 'q:' .. q .. '-throttled', jid)
          redis.call('zadd', qkey .. '-work', top[i + 1], jid)
          Qless.Partitions.added(q, jid, nil, nil)   -- partitions.lua
          redis.call('hdel', key, 'throttled')
          redis.call(Qless.PUBLISH, Qless.OWN .. 'log', '{"jid":' .. cjson.encode(jid) ..
            ',"event":"unthrottled","queue":' .. cjson.encode(q) .. '}')
          Qless.available(q, 1)
        end
      end
    end
  end
end
