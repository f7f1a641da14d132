-- job.lua: commands that act on one job (or a list of jobs) by jid.
--
-- complete, fail, retry, heartbeat, cancel, timeout, depends, priority, log, tag and
-- track, plus the completed-job purge and dependency release that complete needs.
-- Arguments arrive parsed and validated by api.lua; every function here makes all of
-- its state checks before its first write (Redis never rolls a script back).

-- The methods of Qless.Job, made on first use (see base.lua).
function job_factory(name)
  -- (The hottest commands come first: a method is found by walking this chain of
  -- comparisons the first time a call uses it.)
  if name == 'heartbeat' then
    -- heartbeat(now, jid, worker, [data]) -> new expiry (integer), and its text as
    -- stored (the fraction kept)
    return function(now, jid, worker, data)
      local P = Qless.P
      local key = P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'state', 'worker', 'queue', 'grace', 'max_run')
      local state = f[1]
      if not state then
        Qless.raise('QL_NOTFOUND', 'Heartbeat', 'Job ' .. jid .. ' does not exist')
      elseif state ~= 'running' then
        Qless.Deadlines.lost('Heartbeat', jid, key, worker)   -- (deadlines.lua)
        Qless.raise('QL_STATE', 'Heartbeat', 'Job ' .. jid .. ' not currently running: ' .. state)
      elseif f[2] ~= worker or worker == '' then
        Qless.Deadlines.lost('Heartbeat', jid, key, worker)
        -- (An empty worker never holds a lock, whatever the job's field says: spec.)
        Qless.raise('QL_WORKER', 'Heartbeat', 'Job ' .. jid .. ' given out to another worker: ' ..
          tostring(f[2]))
      end
      -- (deadlines.lua) A job with a max_run: refused once it has run that long, and
      -- its lock never goes past then.
      local run_by = f[5] and Qless.Deadlines.run_by(now, 'Heartbeat', jid, key, f[5])
      local queue = f[3] or ''
      local cfg = redis.call('hmget', P .. 'config', queue .. '-heartbeat', 'heartbeat')
      local hb = cfg[1] and tonumber(cfg[1]) or cfg[2] and tonumber(cfg[2]) or 60
      -- The expiry text as pop writes it (see there): usually the integer part of
      -- now + hb and now's own fraction, else Qless.numarg inline (building the method
      -- costs more than its body).
      local eargs, expires
      local x = Qless.NOWX
      if x and hb >= 0 and hb % 1 == 0 and hb < 1e14 and now < 1e14 then
        expires = now - now % 1 + hb
        local text = string.format('%d%s', expires, x)
        if #text <= (x == '' and 14 or 15) then eargs = text end
      end
      if not eargs then
        expires = now + hb
        if expires == math.floor(expires) and expires > -1e15 and expires < 1e15 then
          eargs = string.format('%d', expires)
        else
          eargs = string.format('%.17g', expires)
        end
        expires = math.floor(expires)
      end
      if run_by and run_by < now + hb then
        eargs = Qless.numarg(run_by)
        expires = math.floor(run_by)
      end
      -- A lock that expires at once (no heartbeat) is due to the next pop of a batch.
      local seen = Qless.SEEN
      if seen and not (now + hb > now) then seen.locks[queue] = nil end
      -- (`worker` is not rewritten: it was just checked to be this worker.)
      if data then
        redis.call('hset', key, 'expires', eargs, 'data', data)
      else
        redis.call('hset', key, 'expires', eargs)
      end
      -- Fix of quirk 6: a heartbeat answers the grace notice, so a later expiry warns again.
      if f[4] then redis.call('hdel', key, 'grace') end
      redis.call('zadd', P .. 'w:' .. worker .. ':jobs', eargs, jid)
      redis.call('zadd', P .. 'workers', Qless.NOWS, worker)
      redis.call('zadd', P .. 'q:' .. queue .. '-locks', eargs, jid)
      -- The expiry rounded down (an expiry is never negative: truncation and floor agree).
      return expires, eargs
    end

  elseif name == 'complete' then
    -- complete(now, jid, worker, queue, data, [next, delay, depends], [result])
    -- -> 'complete' | 'waiting' | 'scheduled' | 'depends'. `result` (extension, JSON
    -- text) is stored beside the data before the dependents are released, which see it
    -- (workflow.lua).
    return function(now, jid, worker, queue, data, nextq, delay, depends, result)
      local key = Qless.P .. 'j:' .. jid
      -- (priority only matters when the job moves on to `next`: each HMGET field costs
      -- about as much as a small Redis call.)
      local f
      if nextq then
        f = redis.call('hmget', key, 'state', 'worker', 'queue', 'time', 'retries', 'history',
          'throttles', 'priority', 'max_run', 'partition')
      else
        -- (8: the job's batch, batches.lua, where the branch for next reads priority.)
        f = redis.call('hmget', key, 'state', 'worker', 'queue', 'time', 'retries', 'history',
          'throttles', 'batch', 'max_run')
      end
      local state = f[1]
      if not state then
        Qless.raise('QL_NOTFOUND', 'Complete', 'Job ' .. jid .. ' does not exist')
      elseif state ~= 'running' then
        Qless.Deadlines.lost('Complete', jid, key, worker)   -- (deadlines.lua)
        Qless.raise('QL_STATE', 'Complete', 'Job ' .. jid .. ' is not currently running: ' .. state)
      elseif f[2] ~= worker then
        Qless.Deadlines.lost('Complete', jid, key, worker)
        Qless.raise('QL_WORKER', 'Complete', 'Job ' .. jid ..
          ' has been handed out to another worker: ' .. tostring(f[2]))
      elseif f[3] ~= queue then
        Qless.raise('QL_QUEUE', 'Complete', 'Job ' .. jid .. ' running in another queue: ' ..
          tostring(f[3]))
      end
      -- (deadlines.lua) A job that ran longer than its max_run is not completed.
      if f[9] then Qless.Deadlines.run_by(now, 'Complete', jid, key, f[9], f[4]) end
      local deps
      if nextq and depends and #depends > 0 then
        deps = Qless.dependable(jid, depends, 'Complete')
      end
      Qless.NOWT = Qless.NOWT or string.format('%.20f', now)

      local seen = Qless.SEEN
      local cfg = seen and seen.done[queue]
      if not cfg then
        cfg = redis.call('hmget', Qless.P .. 'config', 'max-job-history', 'jobs-history',
          'jobs-history-count', queue .. '-max-concurrency')
        if seen then seen.done[queue] = cfg end
      end
      local cap = math.floor(tonumber(cfg[1]) or 100)   -- Qless.history_cap, inline
      local when = Qless.NOWF
      -- A compact history (put and popped, see history_legacy) takes the done entry in
      -- the final HSET below, without a list; any other is converted and appended to.
      local compact
      if f[6] and not nextq and (cap <= 0 or cap >= 3) then
        local head = string.match(f[6],
          '^(%[{"q":"[^"\\]*","put":%d+},{"popped":%d+,"worker":"[^"\\]*"})%]$')
        if head then compact = head .. ',{"done":' .. when .. '}]' end
      end
      if not compact then
        -- Qless.history_push, inline (building the method costs more than its body).
        if f[6] then Qless.history_legacy(jid, f[6]) end
        local hkey = key .. '-history'
        local n = redis.call('rpush', hkey, '[' .. when .. ',"done"]')
        if cap > 0 and n > cap then Qless.history_trim(hkey, n, cap) end
      end
      -- A running job is only in -locks (pop takes it out of -work, and -scheduled jobs
      -- go through -work), so that is the one entry to remove.
      redis.call('zrem', Qless.P .. 'q:' .. queue .. '-locks', jid)
      if cfg[4] then Qless.slot_freed(queue, cfg[4]) end
      if f[7] then Qless.Throttle.release(now, jid, f[7], queue) end   -- throttle.lua
      Qless.stats_add('run', now, queue, { now - (tonumber(f[4]) or now) })
      Qless.rates_count(now, queue, 'done')   -- rates.lua
      redis.call('zrem', Qless.P .. 'w:' .. worker .. ':jobs', jid)
      -- Usually neither ql:tracked nor the job's -dependents set exists: one EXISTS then
      -- spares the ZSCORE here and the SMEMBERS of the release below.
      local linked = redis.call('exists', Qless.P .. 'tracked', key .. '-dependents') > 0
      if linked and redis.call('zscore', Qless.P .. 'tracked', jid) then
        redis.call(Qless.PUBLISH, Qless.P .. 'completed', jid)
      end
      local retries = f[5] or '5'
      local ejid, equeue = cjson.encode(jid), cjson.encode(queue)

      if nextq then
        local enext = cjson.encode(nextq)
        redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"jid":' .. ejid .. ',"to":' .. enext ..
          ',"event":"advanced","queue":' .. equeue .. '}')
        Qless.history_push(jid, '[' .. when .. ',"put",{"q":' .. enext .. '}]', cap, false)
        redis.call('zadd', Qless.P .. 'queues', 'NX', Qless.NOWS, nextq)
        local nkey = Qless.P .. 'q:' .. nextq
        local moved
        if delay > 0 and not (depends and #depends > 0) then
          -- Fix of quirk 3: the hash says 'scheduled' while the job sits in -scheduled.
          local at = Qless.numarg(now + delay)
          redis.call('zadd', nkey .. '-scheduled', at, jid)
          Qless.due(nextq, at)
          moved = 'scheduled'
        elseif deps and #deps > 0 then
          Qless.dependencies_link(jid, deps)
          redis.call('zadd', nkey .. '-depends', Qless.NOWS, jid)
          if delay > 0 then redis.call('hset', key, 'scheduled', Qless.numarg(now + delay)) end
          moved = 'depends'
        else
          local score = Qless.numarg((tonumber(f[8]) or 0) - now / 10000000000)
          redis.call('zadd', nkey .. '-work', score, jid)
          Qless.Partitions.added(nextq, jid, score, f[10] or '')   -- partitions.lua
          Qless.available(nextq, 1)
          moved = 'waiting'
        end
        if data then
          redis.call('hset', key, 'data', data, 'time', Qless.NOWT, 'state', moved,
            'worker', '', 'failure', '{}', 'queue', nextq, 'expires', '0', 'remaining', retries)
        else
          redis.call('hset', key, 'time', Qless.NOWT, 'state', moved, 'worker', '',
            'failure', '{}', 'queue', nextq, 'expires', '0', 'remaining', retries)
        end
        if result then redis.call('hset', key, 'result', result) end
        return moved
      end

      redis.call(Qless.PUBLISH, Qless.P .. 'log',
        '{"jid":' .. ejid .. ',"event":"completed","queue":' ..
        equeue .. '}')
      if compact and data then
        redis.call('hset', key, 'data', data, 'time', Qless.NOWT, 'state', 'complete',
          'worker', '', 'failure', '{}', 'queue', '', 'expires', '0', 'remaining', retries,
          'history', compact)
      elseif compact then
        redis.call('hset', key, 'time', Qless.NOWT, 'state', 'complete', 'worker', '',
          'failure', '{}', 'queue', '', 'expires', '0', 'remaining', retries, 'history', compact)
      elseif data then
        redis.call('hset', key, 'data', data, 'time', Qless.NOWT, 'state', 'complete',
          'worker', '', 'failure', '{}', 'queue', '', 'expires', '0', 'remaining', retries)
      else
        redis.call('hset', key, 'time', Qless.NOWT, 'state', 'complete', 'worker', '',
          'failure', '{}', 'queue', '', 'expires', '0', 'remaining', retries)
      end
      local ckey = Qless.P .. 'completed'
      local added = redis.call('zadd', ckey, Qless.NOWS, jid)
      -- The purge of old completed jobs (spec 6.8). Its checks, here, cost two calls
      -- when nothing is due: the oldest entry's score, and the count. Within a batch,
      -- a completion after another knows both: nothing but the completions' ZADDs
      -- wrote the set since (each new member scored now), unless a ZADD only moved a
      -- member (added 0).
      local cutoff = now - (cfg[2] and tonumber(cfg[2]) or 604800)
      local keep = cfg[3] and math.floor(tonumber(cfg[3]) or 50000) or 50000
      seen = Qless.SEEN
      local known = seen and added == 1 and seen.completed
      local oldest, count
      if known then
        oldest, count = known.oldest, known.count + 1
        if now < oldest then oldest = now end
      else
        local first = redis.call('zrange', ckey, '0', '0', 'WITHSCORES')
        oldest = first[2] and tonumber(first[2])
      end
      local aged = oldest and oldest <= cutoff
      if not aged and not count then count = redis.call('zcard', ckey) end
      if aged or count > keep then
        Qless.Job.purge(cutoff, keep, aged)
        if seen then seen.completed = nil end
      elseif known then
        known.oldest, known.count = oldest, count
      elseif seen then
        seen.completed = { oldest = oldest, count = count }
      end
      -- (A completion may purge the job at once: no result is written then.)
      if result and (not aged and count <= keep or redis.call('exists', key) == 1) then
        redis.call('hset', key, 'result', result)
      end
      if linked then Qless.Job.release(now, jid) end
      if f[8] then Qless.Batches.note(now, f[8], jid, 'c') end   -- batches.lua
      return 'complete'
    end

  elseif name == 'forget' then
    -- Deletes a completed job for good (purge): its tag index entries, hash and history.
    -- Its dependency sets and tracking entry stay (spec 6.8).
    return function(jid)
      local key = Qless.P .. 'j:' .. jid
      Qless.tags_unindex(jid, Qless.stored_tags(redis.call('hget', key, 'tags')))
      redis.call('del', key, key .. '-history')
    end

  elseif name == 'purge' then
    -- Purges ql:completed (complete found something due): with `aged`, the jobs
    -- completed at or before `cutoff` (jobs-history seconds ago); then all but the
    -- newest `keep` (jobs-history-count).
    return function(cutoff, keep, aged)
      local key = Qless.P .. 'completed'
      if aged then
        local cut = Qless.numarg(cutoff)
        local old = redis.call('zrangebyscore', key, '-inf', cut)
        for i = 1, #old do Qless.Job.forget(old[i]) end
        redis.call('zremrangebyscore', key, '-inf', cut)
      end
      local n = redis.call('zcard', key)
      if n > keep then
        local last = n - keep - 1
        last = string.format('%d', last)
        local extra = redis.call('zrange', key, '0', last)
        for i = 1, #extra do Qless.Job.forget(extra[i]) end
        redis.call('zremrangebyrank', key, '0', last)
      end
    end

  elseif name == 'release' then
    -- On the final completion of jid: each dependent with no dependency left moves from
    -- its queue's -depends to -scheduled (if a delay is pending) or -work.
    return function(now, jid)
      local key = Qless.P .. 'j:' .. jid .. '-dependents'
      local list = redis.call('smembers', key)
      if #list == 0 then return end
      -- In jid order, not the set's (seed-dependent) order: the same on every server.
      if #list > 1 then table.sort(list) end
      -- (workflow.lua) A task of a workflow may release a dependent still waiting for
      -- other parents: one whose policy is `ignore` once all of those have failed.
      local wid
      for i = 1, #list do
        local d = list[i]
        local dkey = Qless.P .. 'j:' .. d
        redis.call('srem', dkey .. '-dependencies', jid)
        if redis.call('scard', dkey .. '-dependencies') == 0 then
          Qless.Job.unblock(now, d)
        else
          if wid == nil then
            wid = redis.call('hget', Qless.P .. 'j:' .. jid, 'workflow') or false
          end
          if wid then
            local t = Qless.Workflow.task(wid, d)
            if t and t.policy == 'ignore' and Qless.Workflow.settled(d) then
              Qless.Workflow.release(now, d)
            end
          end
        end
      end
      redis.call('del', key)
    end

  elseif name == 'unblock' then
    -- unblock(now, jid): job jid, which waits for no dependency any more, moves from its
    -- queue's -depends to -scheduled (if a delay is pending) or -work.
    return function(now, d)
      local dkey = Qless.P .. 'j:' .. d
      local f = redis.call('hmget', dkey, 'queue', 'scheduled', 'priority', 'workflow',
        'partition')
      local q = f[1]
      -- (As the spec releases: whatever the dependent's state, if it still has a queue.)
      if not q or q == '' then return end
      local qkey = Qless.P .. 'q:' .. q
      redis.call('zrem', qkey .. '-depends', d)
      if f[2] then
        redis.call('zadd', qkey .. '-scheduled', f[2], d)
        Qless.due(q, f[2])
        redis.call('hset', dkey, 'state', 'scheduled')
        redis.call('hdel', dkey, 'scheduled')
      else
        local score = Qless.numarg((tonumber(f[3]) or 0) - now / 10000000000)
        redis.call('zadd', qkey .. '-work', score, d)
        Qless.Partitions.added(q, d, score, f[5] or '')   -- partitions.lua
        redis.call('hset', dkey, 'state', 'waiting')
        Qless.available(q, 1)
      end
      if f[4] then Qless.Workflow.released(d) end   -- workflow.lua
    end

  elseif name == 'ended' then
    -- ended(now, jid, bid, wid, to): job jid, of batch bid and/or workflow wid (either
    -- may be nil), now stands at `to`: 'c' completed, 'f' failed for good, 'x'
    -- canceled, 'p' back to be run. Its batch counts it (batches.lua); a workflow
    -- decides the tasks waiting for a failed one (workflow.lua; those waiting for a
    -- canceled one are canceled with it, as cancel requires).
    return function(now, jid, bid, wid, to)
      if bid then Qless.Batches.note(now, bid, jid, to) end
      if wid then
        if to == 'f' then
          Qless.Workflow.ended(now, wid, jid, 'failed')
        elseif to == 'x' then
          redis.call('hset', Qless.Workflow.key(wid) .. '-ended', jid, 'canceled')
        end
      end
    end

  elseif name == 'fail_waiting' then
    -- fail_waiting(now, jid, group, message): a job that is not running (a workflow's
    -- task whose parent failed) fails into `group`, as a fail would, with no worker.
    return function(now, jid, group, message)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'queue', 'batch', 'workflow')
      local queue = f[1] or ''
      local qkey = Qless.P .. 'q:' .. queue
      for _, set in ipairs({ '-work', '-scheduled', '-depends' }) do
        redis.call('zrem', qkey .. set, jid)
      end
      local egroup, emessage = cjson.encode(group), cjson.encode(message)
      local when = Qless.NOWF
      local cap = Qless.history_cap(redis.call('hget', Qless.P .. 'config', 'max-job-history'))
      Qless.history_push(jid, '[' .. when .. ',"failed",{"group":' .. egroup .. '}]', cap)
      redis.call('hset', key, 'state', 'failed', 'worker', '', 'expires', '', 'failure',
        '{"group":' .. egroup .. ',"message":' .. emessage .. ',"when":' .. when ..
        ',"worker":""}')
      redis.call('hdel', key, 'scheduled')
      redis.call('sadd', Qless.P .. 'failures', group)
      redis.call('lpush', Qless.P .. 'f:' .. group, jid)
      redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"message":' .. emessage .. ',"jid":' ..
        cjson.encode(jid) .. ',"group":' .. egroup .. ',"event":"failed","worker":""}')
      if redis.call('zscore', Qless.P .. 'tracked', jid) then
        redis.call(Qless.PUBLISH, Qless.P .. 'failed', jid)
      end
      local skey = Qless.P .. 's:stats:' .. Qless.day_bin(now) .. ':' .. queue
      redis.call('hincrby', skey, 'failures', '1')
      redis.call('hincrby', skey, 'failed', '1')
      Qless.Job.ended(now, jid, f[2] or nil, f[3] or nil, 'f')
    end

  elseif name == 'fail' then
    -- fail(now, jid, worker, group, message, [data]) -> jid
    return function(now, jid, worker, group, message, data)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'state', 'worker', 'queue', 'throttles', 'batch',
        'workflow')
      local state = f[1]
      if not state then
        Qless.raise('QL_NOTFOUND', 'Fail', 'Job ' .. jid .. 'does not exist')
      elseif state ~= 'running' then
        Qless.raise('QL_STATE', 'Fail', 'Job ' .. jid .. 'not currently running: ' .. state)
      elseif f[2] ~= worker then
        Qless.raise('QL_WORKER', 'Fail', 'Job ' .. jid .. ' running with another worker: ' ..
          tostring(f[2]))
      end
      local queue = f[3] or ''
      local ejid, egroup, eworker = cjson.encode(jid), cjson.encode(group), cjson.encode(worker)
      local emessage = cjson.encode(message)
      redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"message":' .. emessage .. ',"jid":' .. ejid ..
        ',"group":' .. egroup .. ',"event":"failed","worker":' .. eworker .. '}')
      if redis.call('zscore', Qless.P .. 'tracked', jid) then
        redis.call(Qless.PUBLISH, Qless.P .. 'failed', jid)
      end
      redis.call('zrem', Qless.P .. 'w:' .. worker .. ':jobs', jid)
      local cfg = redis.call('hmget', Qless.P .. 'config', 'max-job-history',
        queue .. '-max-concurrency')
      local cap = Qless.history_cap(cfg[1])
      if cfg[2] then Qless.slot_freed(queue, cfg[2]) end
      local when = Qless.NOWF
      Qless.history_push(jid, '[' .. when .. ',"failed",{"worker":' .. eworker .. ',"group":' ..
        egroup .. '}]', cap)
      local skey = Qless.P .. 's:stats:' .. Qless.day_bin(now) .. ':' .. queue
      redis.call('hincrby', skey, 'failures', '1')
      redis.call('hincrby', skey, 'failed', '1')
      Qless.rates_count(now, queue, 'failed')   -- rates.lua
      local qkey = Qless.P .. 'q:' .. queue
      redis.call('zrem', qkey .. '-work', jid)
      redis.call('zrem', qkey .. '-locks', jid)
      redis.call('zrem', qkey .. '-scheduled', jid)
      if f[4] then Qless.Throttle.release(now, jid, f[4], queue) end   -- throttle.lua
      local failure = '{"group":' .. egroup .. ',"message":' .. emessage .. ',"when":' ..
        when .. ',"worker":' .. eworker .. '}'
      if data then
        redis.call('hset', key, 'data', data, 'state', 'failed', 'worker', '', 'expires', '',
          'failure', failure)
      else
        redis.call('hset', key, 'state', 'failed', 'worker', '', 'expires', '', 'failure', failure)
      end
      redis.call('sadd', Qless.P .. 'failures', group)
      redis.call('lpush', Qless.P .. 'f:' .. group, jid)
      if f[5] or f[6] then Qless.Job.ended(now, jid, f[5], f[6], 'f') end
      return jid
    end

  elseif name == 'retry' then
    -- retry(now, jid, queue, worker, delay, [group], [message]) -> floor(remaining)
    return function(now, jid, queue, worker, delay, group, message)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'state', 'worker', 'queue', 'priority', 'throttles',
        'batch', 'workflow', 'partition')
      local state = f[1]
      if not state then
        Qless.raise('QL_NOTFOUND', 'Retry', 'Job ' .. jid .. ' does not exist')
      elseif state ~= 'running' then
        Qless.raise('QL_STATE', 'Retry', 'Job ' .. jid .. ' is not currently running: ' .. state)
      elseif f[2] ~= worker then
        Qless.raise('QL_WORKER', 'Retry', 'Job ' .. jid .. ' has been given to another worker: ' ..
          tostring(f[2]))
      end
      local stored = f[3] or ''
      local remaining = tonumber(redis.call('hincrby', key, 'remaining', '-1'))
      redis.call('hdel', key, 'grace')
      redis.call('zrem', Qless.P .. 'q:' .. stored .. '-locks', jid)
      if f[5] then Qless.Throttle.release(now, jid, f[5], stored) end   -- throttle.lua
      redis.call('zrem', Qless.P .. 'w:' .. worker .. ':jobs', jid)
      local cfg = redis.call('hmget', Qless.P .. 'config', 'max-job-history',
        stored .. '-max-concurrency')
      local cap = Qless.history_cap(cfg[1])
      if cfg[2] then Qless.slot_freed(stored, cfg[2]) end
      local when = Qless.NOWF
      if remaining < 0 then
        local g = group or ('failed-retries-' .. queue)
        local egroup = cjson.encode(g)
        Qless.history_push(jid, '[' .. when .. ',"failed",{"group":' .. egroup .. '}]', cap)
        local failure
        if group and message then
          failure = '{"group":' .. egroup .. ',"message":' .. cjson.encode(message) ..
            ',"when":' .. when .. ',"worker":' .. cjson.encode(worker) .. '}'
        else
          failure = '{"group":' .. egroup .. ',"message":' ..
            cjson.encode('Job exhausted retries in queue "' .. stored .. '"') ..
            ',"when":' .. Qless.num(now) .. ',"worker":""}'
        end
        redis.call('hset', key, 'state', 'failed', 'worker', '', 'expires', '', 'failure', failure)
        if redis.call('zscore', Qless.P .. 'tracked', jid) then
          redis.call(Qless.PUBLISH, Qless.P .. 'failed', jid)
        end
        redis.call('sadd', Qless.P .. 'failures', g)
        redis.call('lpush', Qless.P .. 'f:' .. g, jid)
        local skey = Qless.P .. 's:stats:' .. Qless.day_bin(now) .. ':' .. queue
        redis.call('hincrby', skey, 'failures', '1')
        redis.call('hincrby', skey, 'failed', '1')
        if f[6] or f[7] then Qless.Job.ended(now, jid, f[6], f[7], 'f') end
        Qless.rates_count(now, queue, 'failed')   -- rates.lua
      else
        -- Fix of quirk 4: the job waits in `queue` with no worker and no lock, and its
        -- hash says so (the original left worker/expires set and the old queue name).
        local qkey = Qless.P .. 'q:' .. queue
        local newstate
        if delay > 0 then
          local at = Qless.numarg(now + delay)
          redis.call('zadd', qkey .. '-scheduled', at, jid)
          Qless.due(queue, at)
          newstate = 'scheduled'
        else
          local score = Qless.numarg((tonumber(f[4]) or 0) - now / 10000000000)
          redis.call('zadd', qkey .. '-work', score, jid)
          Qless.Partitions.added(queue, jid, score, f[8] or '')   -- partitions.lua
          Qless.available(queue, 1)
          newstate = 'waiting'
        end
        if group and message then
          redis.call('hset', key, 'state', newstate, 'worker', '', 'expires', '0', 'queue', queue,
            'failure', '{"group":' .. cjson.encode(group) .. ',"message":' ..
            cjson.encode(message) .. ',"when":' .. when .. ',"worker":' ..
            cjson.encode(worker) .. '}')
        else
          redis.call('hset', key, 'state', newstate, 'worker', '', 'expires', '0', 'queue', queue)
        end
      end
      return math.floor(remaining)
    end

  elseif name == 'cancel' then
    -- cancel(now, jid...) -> the jids as given. Refuses (before any write) to cancel a
    -- job whose dependents are not all being canceled too.
    return function(now, jids)
      local listed = {}
      for i = 1, #jids do listed[jids[i]] = true end
      for i = 1, #jids do
        local jid = jids[i]
        local dependents = redis.call('smembers', Qless.P .. 'j:' .. jid .. '-dependents')
        -- Sorted, so the error names the same dependent on every server.
        if #dependents > 1 then table.sort(dependents) end
        for k = 1, #dependents do
          if not listed[dependents[k]] then
            Qless.raise('QL_DEPENDENCY', 'Cancel', jid .. ' is a dependency of ' .. dependents[k] ..
              ' but is not mentioned to be canceled')
          end
        end
      end
      for i = 1, #jids do
        local jid = jids[i]
        local key = Qless.P .. 'j:' .. jid
        local f = redis.call('hmget', key, 'state', 'queue', 'worker', 'failure', 'tags',
          'throttles', 'batch', 'workflow')
        local state = f[1]
        if state ~= 'complete' then
          local queue, worker = f[2], f[3]
          local event = '{"jid":' .. cjson.encode(jid) .. ',"queue":' ..
            (queue and cjson.encode(queue) or 'false') .. ',"event":"canceled","worker":' ..
            (worker and cjson.encode(worker) or 'false') .. '}'
          redis.call(Qless.PUBLISH, Qless.P .. 'log', event)
          if worker and worker ~= '' then
            redis.call('zrem', Qless.P .. 'w:' .. worker .. ':jobs', jid)
            redis.call(Qless.PUBLISH, Qless.P .. 'w:' .. worker, event)
          end
          if queue and queue ~= '' then
            local qkey = Qless.P .. 'q:' .. queue
            redis.call('zrem', qkey .. '-work', jid)
            redis.call('zrem', qkey .. '-locks', jid)
            redis.call('zrem', qkey .. '-scheduled', jid)
            redis.call('zrem', qkey .. '-depends', jid)
            if state == 'running' then
              Qless.slot_freed(queue, redis.call('hget', Qless.P .. 'config',
                queue .. '-max-concurrency'))
            end
          end
          if f[6] then Qless.Throttle.release(now, jid, f[6], queue) end   -- throttle.lua
          local deps = redis.call('smembers', key .. '-dependencies')
          for k = 1, #deps do
            redis.call('srem', Qless.P .. 'j:' .. deps[k] .. '-dependents', jid)
          end
          if #deps > 0 then redis.call('del', key .. '-dependencies') end
          if state == 'failed' then Qless.failure_forget(jid, f[4], queue) end
          if state then Qless.tags_unindex(jid, Qless.stored_tags(f[5])) end
          if redis.call('zscore', Qless.P .. 'tracked', jid) then
            redis.call(Qless.PUBLISH, Qless.P .. 'canceled', jid)
          end
          redis.call('del', key, key .. '-history')
          if f[7] or f[8] then Qless.Job.ended(now, jid, f[7], f[8], 'x') end
        end
      end
      return jids
    end

  elseif name == 'timeout' then
    -- timeout(now, jid...) -> nil. Every jid is checked before any job is touched.
    return function(now, jids)
      local rows, seen = {}, {}
      for i = 1, #jids do
        local jid = jids[i]
        local f = redis.call('hmget', Qless.P .. 'j:' .. jid, 'state', 'queue', 'worker')
        if not f[1] then
          Qless.raise('QL_NOTFOUND', 'Timeout', 'Job ' .. jid .. ' does not exist')
        elseif f[1] ~= 'running' or seen[jid] then
          -- A jid listed twice is no longer running when its second turn comes.
          Qless.raise('QL_STATE', 'Timeout', 'Job ' .. jid .. ' not running')
        end
        seen[jid] = true
        rows[i] = f
      end
      local cap = Qless.history_cap(redis.call('hget', Qless.P .. 'config', 'max-job-history'))
      local entry = '[' .. Qless.NOWF .. ',"timed-out"]'
      for i = 1, #jids do
        local jid, f = jids[i], rows[i]
        local qkey = Qless.P .. 'q:' .. (f[2] or '')
        local worker = f[3] or ''
        Qless.history_push(jid, entry, cap)
        redis.call('zrem', qkey .. '-locks', jid)
        redis.call('zadd', qkey .. '-work', '+inf', jid)
        Qless.Partitions.added(f[2] or '', jid, nil, nil)   -- partitions.lua
        Qless.available(f[2] or '', 1)
        redis.call('hset', Qless.P .. 'j:' .. jid, 'state', 'stalled', 'expires', '0')
        -- Quirk 5 mirrored: the worker's job set keeps the job (spec), so `workers`
        -- counts what other qless clients count.
        local event = Qless.lock_lost_event(jid, worker)
        redis.call(Qless.PUBLISH, Qless.P .. 'w:' .. worker, event)
        redis.call(Qless.PUBLISH, Qless.P .. 'log', event)
      end
      return nil
    end

  elseif name == 'depends_to_waiting' then
    -- A job whose dependencies are all gone moves from -depends to -work.
    return function(now, jid, key, queue, priority)
      local qkey = Qless.P .. 'q:' .. queue
      redis.call('zrem', qkey .. '-depends', jid)
      local score = Qless.numarg((tonumber(priority) or 0) - now / 10000000000)
      redis.call('zadd', qkey .. '-work', score, jid)
      Qless.Partitions.added(queue, jid, score, nil)   -- partitions.lua
      redis.call('hset', key, 'state', 'waiting')
      Qless.available(queue, 1)
    end

  elseif name == 'depends' then
    -- depends(now, jid, 'on', jid...) / depends(now, jid, 'off', 'all' | jid...) -> 1
    return function(now, jid, command, args)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'state', 'queue', 'priority')
      if f[1] ~= 'depends' then
        Qless.raise('QL_STATE', 'Depends', 'Job ' .. jid .. ' not in the depends state: ' ..
          tostring(f[1]))
      end
      if command == 'on' then
        Qless.dependencies_link(jid, Qless.dependable(jid, args, 'Depends'))
      elseif command == 'off' then
        local mine = key .. '-dependencies'
        if args[1] == 'all' then
          local deps = redis.call('smembers', mine)
          for i = 1, #deps do
            redis.call('srem', Qless.P .. 'j:' .. deps[i] .. '-dependents', jid)
          end
          redis.call('del', mine)
          Qless.Job.depends_to_waiting(now, jid, key, f[2] or '', f[3])
        else
          for i = 1, #args do
            redis.call('srem', mine, args[i])
            redis.call('srem', Qless.P .. 'j:' .. args[i] .. '-dependents', jid)
          end
          if redis.call('scard', mine) == 0 then
            Qless.Job.depends_to_waiting(now, jid, key, f[2] or '', f[3])
          end
        end
      else
        Qless.raise('QL_ARG', 'Depends', 'Argument "command" must be "on" or "off"')
      end
      return 1
    end

  elseif name == 'priority' then
    -- priority(now, jid, priority) -> priority (integer). A job waiting in -work is
    -- re-scored to exactly `priority` (quirk 11, mirrored).
    return function(now, jid, priority)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'jid', 'queue')
      if not f[1] then
        Qless.raise('QL_NOTFOUND', 'Priority', 'Job ' .. jid .. ' does not exist')
      end
      local queue = f[2] or ''
      if queue ~= '' then
        local work = Qless.P .. 'q:' .. queue .. '-work'
        if redis.call('zscore', work, jid) then
          redis.call('zadd', work, Qless.numarg(priority), jid)
          Qless.Partitions.added(queue, jid, nil, nil)   -- partitions.lua: re-scored
        end
      end
      redis.call('hset', key, 'priority', Qless.numarg(priority))
      return Qless.trunc(priority)
    end

  elseif name == 'log' then
    -- log(now, jid, message, [data]) -> nil. data is JSON text, already validated.
    -- A log entry is the one kind of history entry whose size the caller chooses, so
    -- after it the history is also held to `max-job-history-bytes` (history_fit).
    return function(now, jid, message, data)
      if not redis.call('hget', Qless.P .. 'j:' .. jid, 'jid') then
        Qless.raise('QL_NOTFOUND', 'Log', 'Job ' .. jid .. ' does not exist')
      end
      local cfg = redis.call('hmget', Qless.P .. 'config', 'max-job-history',
        'max-job-history-bytes')
      local cap = Qless.history_cap(cfg[1])
      local entry = '[' .. Qless.NOWF .. ',' .. cjson.encode(message)
      if data then entry = entry .. ',' .. data end
      Qless.history_push(jid, entry .. ']', cap)
      Qless.history_fit(jid, cfg[2])
      return nil
    end

  elseif name == 'tag' then
    -- tag(now, 'add'|'remove', jid, tag...) -> JSON array of the job's tags. The counter
    -- moves for every argument, duplicates included (quirk 9, mirrored).
    return function(now, command, jid, tags)
      local key = Qless.P .. 'j:' .. jid
      local f = redis.call('hmget', key, 'jid', 'tags')
      if not f[1] then
        Qless.raise('QL_NOTFOUND', 'Tag', 'Job ' .. jid .. ' does not exist')
      end
      local current = Qless.stored_tags(f[2])
      local out = {}
      if command == 'add' then
        local have = {}
        for i = 1, #current do
          out[#out + 1] = current[i]
          have[current[i]] = true
        end
        for i = 1, #tags do
          local t = tags[i]
          if not have[t] then
            have[t] = true
            out[#out + 1] = t
          end
        end
        Qless.tags_index(jid, tags, Qless.NOWS)
      else
        local drop = {}
        for i = 1, #tags do drop[tags[i]] = true end
        for i = 1, #current do
          if not drop[current[i]] then out[#out + 1] = current[i] end
        end
        Qless.tags_unindex(jid, tags)
      end
      local text = Qless.json_list(out)
      redis.call('hset', key, 'tags', text)
      return text
    end

  elseif name == 'track' then
    -- track(now) -> {"jobs":[...],"expired":[...]};
    -- track(now, 'track'|'untrack', jid) -> JSON 1/0
    return function(now, command, jid)
      if command == nil then
        local jids = redis.call('zrange', Qless.P .. 'tracked', '0', '-1')
        local buf = { '{"jobs":[' }
        local expired = {}
        local found = false
        for i = 1, #jids do
          if found then buf[#buf + 1] = ',' end
          if Qless.job_buffer(buf, jids[i]) then
            found = true
          else
            if found then buf[#buf] = nil end
            expired[#expired + 1] = jids[i]
          end
        end
        if found then buf[#buf + 1] = ']' else buf[1] = '{"jobs":{}' end
        buf[#buf + 1] = ',"expired":' .. Qless.json_list(expired) .. '}'
        return table.concat(buf)
      end
      if not redis.call('hget', Qless.P .. 'j:' .. jid, 'jid') then
        Qless.raise('QL_NOTFOUND', 'Track', 'Job does not exist')
      end
      local action = string.lower(command)
      if action == 'track' then
        redis.call(Qless.PUBLISH, Qless.P .. 'track', jid)
        return cjson.encode(redis.call('zadd', Qless.P .. 'tracked', Qless.NOWS, jid))
      elseif action == 'untrack' then
        redis.call(Qless.PUBLISH, Qless.P .. 'untrack', jid)
        return cjson.encode(redis.call('zrem', Qless.P .. 'tracked', jid))
      end
      Qless.raise('QL_ARG', 'Track', 'Unknown action "' .. command .. '"')
    end
  end
end
