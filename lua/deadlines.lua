-- deadlines.lua: the two deadlines a put may give a job (gateway features).
--
-- * `start_by`: the time by which the job must have been popped. A job still not
--   popped then is not run: it fails into the group `expired`, when a pop would have
--   handed it out (the pop takes the next job instead) or when the sweeper visits its
--   queue at the deadline, whichever comes first. The deadline is about the job's first
--   start only: a pop drops it from the index, so a job that ran and came back (retry,
--   lock expiry) is not expired; unfail, and any re-put or requeue that does not give a
--   new one, clear it.
-- * `max_run`: how long the job may run from its pop. Pop and heartbeat cap its lock at
--   popped + max_run, so the ordinary lock expiry (notice, grace, retry or failure by
--   its retries) ends the run even while its worker keeps heartbeating. The notice of
--   such an expiry marks the job `timed_out` (its worker) and publishes `timed_out`;
--   the worker's next heartbeat or completion is refused with QL_TIMEDOUT.
--
-- Keys (lua/README.md, "Key schema"): `OWN q:<Q>-deadlines`, a zset jid -> start_by of
-- Q's jobs that have one and were not popped since it was given (the index the pop
-- and the sweeper read; the job hash's `start_by` is the fact, an index entry that no
-- longer matches is dropped); job hash fields `start_by`, `max_run`, `timed_out`.
-- Events on `OWN log` (qlessd's own, like `unthrottled`): `expired`
-- {"jid","event","queue","start_by"} and `timed_out` {"jid","event","queue","worker",
-- "max_run"}.

-- The methods of Qless.Deadlines, made on first use (see base.lua).
function deadlines_factory(name)
  if name == 'admit' then
    -- Pop's check (queue.lua), for a queue whose deadlines pop must look at: of `jids`
    -- after the first `handed` (taken over from expired locks: popped before), just
    -- taken off -work by ZPOPMAX (`top`: their scores), those past their start_by fail
    -- into `expired`, and as many next jobs of -work take their place (checked the
    -- same way; at most 1000 expiries per call, past which the places stay empty).
    -- Returns the jids and the ZPOPMAX-shaped list of the others, and whether any of
    -- them has an index entry (which `leased` drops once they are leased).
    return function(now, queue, qkey, jids, handed, top)
      local dkey = Qless.OWN .. 'q:' .. queue .. '-deadlines'
      local out, otop, scores, pending = {}, {}, {}, {}
      for i = 1, handed do out[i] = jids[i] end
      for i = handed + 1, #jids do pending[#pending + 1] = jids[i] end
      for i = 1, #top, 2 do scores[top[i]] = top[i + 1] end
      local indexed, failed = false, 0
      while #pending > 0 do
        local at = Qless.batch('zmscore', dkey, pending)
        local late = 0
        for i = 1, #pending do
          local jid = pending[i]
          if at[i] and tonumber(at[i]) <= now and Qless.Deadlines.expire(now, queue, jid) then
            late = late + 1
          else
            if at[i] then indexed = true end
            out[#out + 1] = jid
            otop[#otop + 1] = jid
            otop[#otop + 1] = scores[jid]
          end
        end
        failed = failed + late
        pending = {}
        if late > 0 and failed <= 1000 then
          local more = redis.call('zpopmax', qkey .. '-work', string.format('%d', late))
          for i = 1, #more, 2 do
            pending[#pending + 1] = more[i]
            scores[more[i]] = more[i + 1]
          end
        end
      end
      return out, otop, indexed
    end

  elseif name == 'leased' then
    -- The jobs `jids` of `queue` were popped: their start_by is met.
    return function(queue, jids)
      Qless.batch('zrem', Qless.OWN .. 'q:' .. queue .. '-deadlines', jids)
    end

  elseif name == 'cap' then
    -- Pop of a job with a max_run (text): its lock ends at now + max_run when that is
    -- before now + hb. Returns the capped expiry as Redis and JSON text (nil when not
    -- capped). A mark of an earlier run's timeout stays for that run's worker (its
    -- late calls still hear `timed_out`), unless it is this worker W, who runs it anew.
    return function(now, queue, key, W, hb, max_run)
      if redis.call('hget', key, 'timed_out') == W then redis.call('hdel', key, 'timed_out') end
      local limit = tonumber(max_run)
      if not limit or limit >= hb then return nil end
      local at = now + limit
      local text = Qless.numarg(at)
      -- The sweeper visits the queue when this earlier lock expires.
      redis.call('zadd', Qless.OWN .. 'due', 'LT', text, queue)
      return text, string.format('%.14g', at)
    end

  elseif name == 'run_by' then
    -- Heartbeat or complete of a running job with a max_run (text), by its owner: the
    -- time its run must end, or QL_TIMEDOUT when that has come. `popped` is the job's
    -- `time` (set by its pop), read here when the caller has not.
    return function(now, command, jid, key, max_run, popped)
      popped = tonumber(popped or redis.call('hget', key, 'time')) or now
      local at = popped + (tonumber(max_run) or 0)
      if now >= at then
        Qless.raise('QL_TIMEDOUT', command, 'Job ' .. jid ..
          ' timed out: it ran longer than its max_run of ' .. max_run .. ' seconds')
      end
      return at
    end

  elseif name == 'lost' then
    -- Heartbeat or complete by a worker that no longer holds the job: QL_TIMEDOUT when
    -- its run was ended by the job's max_run, rather than the generic refusal the
    -- caller raises next.
    return function(command, jid, key, worker)
      local by = redis.call('hget', key, 'timed_out')
      if by and by == worker and worker ~= '' then
        Qless.raise('QL_TIMEDOUT', command, 'Job ' .. jid ..
          ' timed out: its run was ended by its max_run')
      end
    end

  elseif name == 'noticed' then
    -- The lock of a running job expired (queue.lua lock_notice): when its max_run is
    -- what ended it, the job is marked timed out for `worker` and `timed_out` is
    -- published.
    return function(now, queue, jid, key, worker)
      local f = redis.call('hmget', key, 'max_run', 'time')
      local limit = tonumber(f[1])
      if not limit or now < (tonumber(f[2]) or now) + limit then return end
      redis.call('hset', key, 'timed_out', worker)
      redis.call(Qless.PUBLISH, Qless.OWN .. 'log', '{"jid":' .. cjson.encode(jid) ..
        ',"event":"timed_out","queue":' .. cjson.encode(queue) .. ',"worker":' ..
        cjson.encode(worker) .. ',"max_run":' .. Qless.jnum(f[1]) .. '}')
    end

  elseif name == 'expire' then
    -- Fails job jid into `expired` if it is still waiting to start in `queue` and its
    -- start_by has come; drops its index entry either way (one that no longer matches
    -- the job is stale). Returns whether it failed.
    return function(now, queue, jid)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'state', 'queue', 'start_by', 'throttles')
      redis.call('zrem', Qless.OWN .. 'q:' .. queue .. '-deadlines', jid)
      local state, at = f[1], tonumber(f[3])
      if not (at and at <= now and f[2] == queue and
          (state == 'waiting' or state == 'scheduled' or state == 'depends')) then
        return false
      end
      -- (throttle.lua) A job waiting for room in a throttle stops waiting.
      if f[4] then Qless.Throttle.release(now, jid, f[4], queue) end
      Qless.Job.fail_waiting(now, jid, 'expired', 'Job was not started by its start_by ' ..
        Qless.jnum(f[3]))
      redis.call(Qless.PUBLISH, Qless.OWN .. 'log', '{"jid":' .. cjson.encode(jid) ..
        ',"event":"expired","queue":' .. cjson.encode(queue) .. ',"start_by":' ..
        Qless.jnum(f[3]) .. '}')
      return true
    end

  elseif name == 'visit' then
    -- The sweeper's visit of `queue` (queue.lua visit): fails the jobs past their
    -- start_by, at most `limit`. Returns how many failed, and the queue's next
    -- start_by (nil if none; now when `limit` cut the work short).
    return function(now, queue, limit)
      local dkey = Qless.OWN .. 'q:' .. queue .. '-deadlines'
      if redis.call('exists', dkey) == 0 then return 0, nil end
      local due = redis.call('zrangebyscore', dkey, '-inf', Qless.NOWS, 'LIMIT', '0',
        string.format('%d', limit))
      local failed = 0
      for i = 1, #due do
        if Qless.Deadlines.expire(now, queue, due[i]) then failed = failed + 1 end
      end
      if #due >= limit then return failed, now end
      local first = redis.call('zrange', dkey, '0', '0', 'WITHSCORES')
      return failed, tonumber(first[2])
    end

  elseif name == 'put' then
    -- After a put or requeue of jid into `queue`: its start_by (a number, or nil:
    -- none; the put already dropped an old one) and max_run (a number; '' removes it;
    -- nil keeps it).
    return function(queue, jid, start_by, max_run)
      local key = Qless.P .. 'j:' .. jid
      if start_by then
        local at = Qless.numarg(start_by)
        redis.call('hset', key, 'start_by', at)
        redis.call('zadd', Qless.OWN .. 'q:' .. queue .. '-deadlines', at, jid)
        -- Pop looks at the queue's deadlines from now on; the sweeper visits it then.
        Qless.due(queue, at)
      end
      if max_run == '' then
        redis.call('hdel', key, 'max_run')
      elseif max_run then
        redis.call('hset', key, 'max_run', Qless.numarg(max_run))
      end
    end

  elseif name == 'clear' then
    -- Job jid's start_by no longer applies (a re-put, unfail): the field and its index
    -- entry in `queue` go.
    return function(jid, queue)
      redis.call('hdel', Qless.P .. 'j:' .. jid, 'start_by')
      if queue and queue ~= '' then
        redis.call('zrem', Qless.OWN .. 'q:' .. queue .. '-deadlines', jid)
      end
    end

  elseif name == 'option' then
    -- A deadline option of put/recur: a finite number >= 0 (`positive`: > 0), or the
    -- error "<Command>(): Arg "<what>" ..." naming it.
    return function(v, command, what, positive)
      local n = tonumber(v)
      if n == nil or n ~= n or n == 1 / 0 or n == -1 / 0 or n < 0 or (positive and n == 0) then
        Qless.raise('QL_ARG', command, 'Arg "' .. what .. '" must be a ' ..
          (positive and 'positive' or 'non-negative') .. ' number: ' .. tostring(v))
      end
      return n
    end
  end
end
