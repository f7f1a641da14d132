-- queue.lua: commands that act on a queue: put/requeue, pop (and pop.multi), peek,
-- queues, length, jobs, failed, unfail, stats, sweep.
--
-- A queue Q is the set of zsets ql:q:<Q>-work (score priority - now/1e10, read with
-- ZREVRANGE), -locks (lock expiry), -scheduled (due time), -depends (entry time) and
-- -recur (next spawn time of its recurring templates).

-- The methods of Qless.Queue, made on first use (see base.lua).
function queue_factory(name)
  -- (The hottest commands come first: a method is found by walking this chain of
  -- comparisons the first time a call uses it.)
  if name == 'pop' then
    -- Leases jobs to worker W from a list of (queue, max) pairs, at most `total` in all,
    -- each pair with the semantics of pop (spec 6.5); pop is the one-pair case. A queue
    -- that gave fewer jobs than asked is not asked again in the same call, and its upkeep
    -- (expired locks, recurring, scheduled) is not redone once a pass found less than
    -- its limit. The common path (nothing due) is written out inline: it is the hottest
    -- code of the script. Returns the JSON array of the leased jobs ('{}' if none), or
    -- with `fields` (the gateway's calls) one flat array of the jobs' stored fields,
    -- each job as: jid, klass, queue, worker, priority, expires, retries, remaining,
    -- data, tags, failure, spawned_from_jid, tracked (1 or 0), traceparent, then the
    -- number of its history entries and the entries as stored, the same for its
    -- dependents, the same for its dependencies (false for an absent value). The
    -- gateway builds the job objects then, not Redis, whose one thread every client
    -- shares: building them here costs ~40k instructions a job.
    return function(now, W, total, queues, maxes, fields)
      local call, format, tonumber = redis.call, string.format, tonumber
      local P = Qless.P
      -- One HMGET for the global options and each queue's own, one SMISMEMBER for pauses.
      -- Usually no queue is paused, no throttle has limits and the queues have neither
      -- recurring templates nor scheduled jobs: one EXISTS of all those keys then
      -- answers for the SMISMEMBER of the pauses, the throttle check and each queue's
      -- EXISTS of -recur and -scheduled. (A lock taken over below may schedule its job
      -- (backoff): that queue then looks at -scheduled again.) A single queue (pop) has
      -- its lists built in one go, without growing tables.
      local distinct, index, cfg, probed
      local done = { nil }   -- per distinct queue: which upkeep is known to be done
      local qkeys = { nil }  -- per distinct queue: P .. 'q:' .. queue
      local seen = Qless.SEEN
      if #queues == 1 then
        local q = queues[1]
        local qkey = P .. 'q:' .. q
        distinct, index, qkeys[1] = { q }, { [q] = 1 }, qkey
        cfg = seen and seen.pop[q]
        if not cfg then
          cfg = call('hmget', P .. 'config', 'heartbeat', 'grace-period', 'max-job-history',
            q .. '-heartbeat', q .. '-max-concurrency')
          if seen then seen.pop[q] = cfg end
        end
        if seen and seen.probe[q] then
          probed = 0
        else
          local own = Qless.OWN .. 'q:' .. q
          probed = call('exists', P .. 'paused_queues', Qless.OWN .. 'throttles', qkey .. '-recur',
            qkey .. '-scheduled', own .. '-deadlines', own .. '-pseq')
          if seen and probed == 0 then seen.probe[q] = true end
        end
      else
        distinct, index = {}, {}
        local fields = { 'heartbeat', 'grace-period', 'max-job-history' }
        local probe = { P .. 'paused_queues', Qless.OWN .. 'throttles' }
        for i = 1, #queues do
          local q = queues[i]
          if not index[q] then
            distinct[#distinct + 1] = q
            index[q] = #distinct
            fields[#fields + 1] = q .. '-heartbeat'
            fields[#fields + 1] = q .. '-max-concurrency'
            local qkey = P .. 'q:' .. q
            qkeys[#distinct] = qkey
            probe[#probe + 1] = qkey .. '-recur'
            probe[#probe + 1] = qkey .. '-scheduled'
            probe[#probe + 1] = Qless.OWN .. 'q:' .. q .. '-deadlines'
            probe[#probe + 1] = Qless.OWN .. 'q:' .. q .. '-pseq'   -- (partitions.lua)
          end
        end
        cfg = call('hmget', P .. 'config', unpack(fields))
        probed = call('exists', unpack(probe))
      end
      local paused, throttles
      if probed == 0 then
        paused, throttles = {}, false
        for i = 1, #distinct do done[i] = { recur = true, sched = true, dl = true, flat = true } end
      else
        paused = call('smismember', P .. 'paused_queues', unpack(distinct))
        local any = false
        for i = 1, #distinct do
          if paused[i] ~= 1 then any = true end
        end
        if not any then return fields and {} or '{}' end
      end
      call('zadd', P .. 'workers', Qless.NOWS, W)

      local heartbeat = cfg[1] and tonumber(cfg[1]) or 60
      local grace = cfg[2] and tonumber(cfg[2]) or 10
      local cap = 100
      if cfg[3] then cap = math.floor(tonumber(cfg[3]) or 100) end
      local eW = cjson.encode(W)
      local popped = '[' .. Qless.NOWF .. ',"popped",{"worker":' .. eW .. '}]'
      -- (Tables that a pop of one job fills are made with room for it: `{ nil }` has an
      -- array slot, so the first stores do not grow the table, ~1.5k instructions each.)
      local jobs = { nil }   -- hash fields of every leased job, in order (+ 15: expiry
                             -- and 16: queue, as JSON text)
      local ids, sets = { nil }, { nil, nil, nil }  -- their jids; their dependency set keys
      local waits = { nil }  -- per distinct queue: wait samples
      local wjobs = { nil, nil }  -- ZADD ql:w:<W>:jobs arguments
      local remaining = total

      for p = 1, #queues do
        if remaining <= 0 then break end
        local q = queues[p]
        local k = index[q]
        local st = done[k]
        if not st then
          st = {}
          done[k] = st
        end
        if paused[k] ~= 1 and not st.empty then
          local asked = maxes[p]
          if asked > remaining then asked = remaining end
          local want = asked
          local qkey = qkeys[k]
          local maxc = cfg[3 + 2 * k]
          maxc = maxc and tonumber(maxc) or 0
          if maxc > 0 then
            local room = maxc - call('zcount', qkey .. '-locks', Qless.NOWS, '+inf')
            if room < 0 then room = 0 end
            if want > room then want = room end
          end
          local jids = { nil }
          local handed = 0   -- how many of jids were taken over from expired locks
          if want > 0 then
            local limit = want == 1 and '1' or format('%d', want)
            if not st.locks and seen and seen.locks[q] then st.locks = true end
            if not st.locks then
              local due = call('zrangebyscore', qkey .. '-locks', '-inf', Qless.NOWS, 'LIMIT', '0',
                limit)
              if #due > 0 then
                Qless.Queue.invalidate_locks(now, q, due, grace, cap, jids)
                handed = #jids
                st.sched = nil
              end
              if #due < want then
                st.locks = true
                seen = Qless.SEEN   -- (invalidate_locks may have started it over)
                if seen then seen.locks[q] = true end
              end
            end
            local more = want - #jids
            if more > 0 then
              if more ~= want then limit = format('%d', more) end
              -- Usually a queue has neither recurring templates nor scheduled jobs: one
              -- EXISTS of both sets spares the two range reads then.
              if not st.recur and not st.sched and
                  call('exists', qkey .. '-recur', qkey .. '-scheduled') == 0 then
                st.recur, st.sched = true, true
              end
              if not st.recur then
                local due = call('zrangebyscore', qkey .. '-recur', '0', Qless.NOWS, 'WITHSCORES',
                  'LIMIT', '0', limit)
                if #due == 0 then
                  st.recur = true
                else
                  local _, all = Qless.Recurring.spawn(now, q, due, more, cap)
                  if all then st.recur = true end
                end
              end
              if not st.sched then
                local due = call('zrangebyscore', qkey .. '-scheduled', '0', Qless.NOWS, 'LIMIT',
                  '0', limit)
                if #due > 0 then Qless.Queue.promote(now, q, due) end
                if #due < more then st.sched = true end
              end
              -- ZPOPMAX reads the top of -work (in ZREVRANGE order) and takes it out in
              -- one call; a member whose hash is gone is dropped, as it would be anyway.
              -- (partitions.lua) A queue with partitions serves them in turn instead.
              if st.flat == nil then
                st.flat = call('exists', Qless.OWN .. 'q:' .. q .. '-pseq') == 0
              end
              local top
              if st.flat then
                top = call('zpopmax', qkey .. '-work', limit)
              else
                top = Qless.Partitions.take(now, q, qkey, more)
              end
              for i = 1, #top, 2 do jids[#jids + 1] = top[i] end
              -- (deadlines.lua) Jobs past their start_by fail instead, and the next jobs
              -- take their place.
              if not st.dl and #top > 0 then
                jids, top, st.dlz = Qless.Deadlines.admit(now, q, qkey, jids, handed, top)
              end
              -- (throttle.lua) Only once some throttle has limits: jobs whose throttle
              -- is full wait apart and the next jobs take their place.
              if throttles == nil then throttles = call('exists', Qless.OWN .. 'throttles') == 1 end
              if throttles and #top > 0 then
                jids = Qless.Throttle.admit(now, q, qkey, jids, handed, top)
              end
            end
          end
          local got = 0
          if #jids > 0 then
            local hb = cfg[2 + 2 * k]
            hb = hb and tonumber(hb) or heartbeat
            -- The expiry as JSON (cjson's 14 digits) and for Redis. Usually (whole
            -- seconds, `now` a plain decimal of at most 14 digits) that is one text, the
            -- integer part of now + hb and now's own fraction (Qless.NOWX): what %.14g
            -- prints, for one integer format instead of two number formats and a parse.
            local ejson, eargs
            local x = Qless.NOWX
            if x and hb >= 0 and hb % 1 == 0 and hb < 1e14 and now < 1e14 then
              local text = format('%d%s', now - now % 1 + hb, x)
              if #text <= (x == '' and 14 or 15) then ejson = text end
            end
            if ejson then
              eargs = ejson
            else
              -- Otherwise one text when the short form reads back exactly, else two.
              local expires = now + hb
              ejson = format('%.14g', expires)
              eargs = ejson
              if tonumber(ejson) ~= expires then eargs = format('%.17g', expires) end
            end
            local eq = cjson.encode(q)
            Qless.NOWT = Qless.NOWT or format('%.20f', now)
            -- A lock that expires at once (no heartbeat) is due to the next pop.
            seen = Qless.SEEN
            if seen and not (now + hb > now) then seen.locks[q] = nil end
            local locks = { nil, nil }
            local qwaits = waits[k] or { nil }
            waits[k] = qwaits
            for i = 1, #jids do
              local jid = jids[i]
              local key = P .. 'j:' .. jid
              -- Not read: state, worker and expires, which this pop sets (each field
              -- of an HMGET costs about as much as a small Redis call). `g` is laid out
              -- as job_fields' list for job_append (15: the expiry as JSON, 16: the
              -- queue as JSON).
              local g = call('hmget', key, 'jid', 'klass', 'queue', 'priority', 'retries',
                'remaining', 'data', 'tags', 'failure', 'spawned_from_jid', 'time', 'history',
                'traceparent', 'parents', 'max_run')
              if g[1] then
                -- (deadlines.lua) A job with a max_run may have an earlier lock.
                local je, jj = eargs, ejson
                if g[15] then
                  je, jj = Qless.Deadlines.cap(now, q, key, W, hb, g[15])
                  if not je then je, jj = eargs, ejson end
                end
                -- A compact history (only its put, see history_legacy) gets the popped
                -- entry in the hash too, and the job object's history is known: no
                -- RPUSH, no LRANGE. Any other history is converted and appended to.
                local hq, ht
                if g[12] and (cap <= 0 or cap >= 2) then
                  hq, ht = string.match(g[12], '^%[{"q":("[^"\\]*"),"put":(%d+)}%]$')
                end
                local history, putobj
                if hq then
                  call('hset', key, 'time', Qless.NOWT, 'worker', W, 'expires', je, 'state',
                    'running', 'history', '[{"q":' .. hq .. ',"put":' .. ht .. '},{"popped":' ..
                    Qless.NOWF .. ',"worker":' .. eW .. '}]')
                  history = { '[' .. ht .. ',"put",{"q":' .. hq .. '}]', popped }
                  -- Its object, as history_object would make it (which costs ~7k
                  -- instructions a call); a name with "wh in it takes that path.
                  if not string.find(hq, '"wh', 1, true) then
                    putobj = '{"q":' .. hq .. ',"when":' .. ht .. ',"what":"put"}'
                  end
                else
                  if g[12] then Qless.history_legacy(jid, g[12]) end
                  local hkey = key .. '-history'
                  local n = call('rpush', hkey, popped)
                  if cap > 0 and n > cap then Qless.history_trim(hkey, n, cap) end
                  call('hset', key, 'time', Qless.NOWT, 'worker', W, 'expires', je, 'state',
                    'running')
                end
                qwaits[#qwaits + 1] = now - (tonumber(g[11]) or now)
                -- (17: the history entries when known, 18: the put entry's object, 19: the
                -- job's trace, an extension job_append adds, 20: a workflow task's
                -- parents, workflow.lua.)
                local f = { g[1], g[2], 'running', g[3], W, g[4], nil, g[5], g[6], g[7], g[8],
                  g[9], g[10], nil, jj, nil, history, putobj, g[13], g[14] }
                if g[3] == q then f[16] = eq end
                got = got + 1
                local m = #jobs + 1
                jobs[m], ids[m] = f, jid
                sets[#sets + 1] = key .. '-dependents'
                sets[#sets + 1] = key .. '-dependencies'
                locks[#locks + 1] = je
                locks[#locks + 1] = jid
                wjobs[#wjobs + 1] = je
                wjobs[#wjobs + 1] = jid
              end
            end
            if got <= 500 then
              if got > 0 then call('zadd', qkey .. '-locks', unpack(locks)) end
            else
              Qless.batch('zadd', qkey .. '-locks', locks)
            end
            -- The sweeper visits the queue when its earliest lock expires. (Within a
            -- batch, a pop that leased with the same expiry before has done this.)
            if got > 0 and not (seen and seen.due[q] == eargs) then
              call('zadd', Qless.OWN .. 'due', 'LT', eargs, q)
              if seen then seen.due[q] = eargs end
            end
            -- Jobs taken over from expired locks are not in -work, but are removed from it
            -- as any leased job is (ZPOPMAX removed the others).
            if handed > 0 then
              local h = {}
              for i = 1, handed do h[i] = jids[i] end
              Qless.batch('zrem', qkey .. '-work', h)
            end
            -- (deadlines.lua) The leased jobs' start_by is met.
            if st.dlz then
              Qless.Deadlines.leased(q, jids)
              st.dlz = nil
            end
          end
          remaining = remaining - got
          if got < asked then st.empty = true end
          -- Jobs this invocation made available and leased itself are not announced.
          local a = Qless.AVAILABLE
          if a and a[q] then a[q] = a[q] > got and a[q] - got or 0 end
        end
      end

      local n = #jobs
      if n == 0 then return fields and {} or '{}' end
      local none = {}
      if n <= 500 then
        call('zadd', P .. 'w:' .. W .. ':jobs', unpack(wjobs))
      else
        Qless.batch('zadd', P .. 'w:' .. W .. ':jobs', wjobs)
      end
      for k = 1, #distinct do
        if waits[k] and #waits[k] > 0 then
          Qless.stats_add('wait', now, distinct[k], waits[k])
          Qless.rates_waited(now, distinct[k], waits[k])   -- rates.lua
        end
      end
      -- Job objects: tracked flags with one ZMSCORE, dependency sets only if any exist.
      -- Usually neither ql:tracked nor any of the sets exists: one EXISTS over all of
      -- them then spares the ZMSCORE.
      local tracked, anysets = none, false
      if n <= 500 then
        sets[#sets + 1] = P .. 'tracked'
        if call('exists', unpack(sets)) > 0 then
          sets[#sets] = nil
          tracked = call('zmscore', P .. 'tracked', unpack(ids))
          anysets = call('exists', unpack(sets)) > 0
        end
      else
        tracked = Qless.batch('zmscore', P .. 'tracked', ids)
        anysets = Qless.batch('exists', nil, sets) > 0
      end
      if fields then
        -- Room for a job with two history entries (15 fields and three counted lists),
        -- so that the usual pop of one never grows the array.
        local out, m = { nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
          nil, nil, nil, nil, nil, nil }, 0
        for i = 1, n do
          local key = P .. 'j:' .. ids[i]
          local t = tracked[i]
          if t then call(Qless.PUBLISH, P .. 'popped', ids[i]) end
          local dependents, dependencies = none, none
          if anysets then
            dependents = call('smembers', key .. '-dependents')
            dependencies = call('smembers', key .. '-dependencies')
          end
          local f = jobs[i]
          local history = f[17] or call('lrange', key .. '-history', '0', '-1')
          -- (One flat array: each nested table would cost Redis a conversion of its own.
          -- A nil would end the array, hence false.)
          out[m + 1], out[m + 2], out[m + 3], out[m + 4] = f[1], f[2] or '', f[4] or '', W
          out[m + 5], out[m + 6], out[m + 7], out[m + 8] = f[6] or false, f[15],
            f[8] or false, f[9] or false
          out[m + 9], out[m + 10], out[m + 11], out[m + 12] = f[10] or '', f[11] or false,
            f[12] or false, f[13] or false
          out[m + 13], out[m + 14], out[m + 15] = t and 1 or 0, f[19] or false, f[20] or false
          m = m + 16
          local count = #history
          out[m] = count
          for k = 1, count do out[m + k] = history[k] end
          m = m + count + 1
          count = #dependents
          out[m] = count
          for k = 1, count do out[m + k] = dependents[k] end
          m = m + count + 1
          count = #dependencies
          out[m] = count
          for k = 1, count do out[m + k] = dependencies[k] end
          m = m + count
        end
        return out
      end
      local buf, kmemo = { '[' }, {}
      -- The entry this call wrote is known already; other entries are converted once.
      local memo = {
        [popped] = '{"worker":' .. eW .. ',"when":' .. Qless.NOWF .. ',"what":"popped"}' }
      local append = Qless.job_append
      for i = 1, n do
        local jid = ids[i]
        local key = P .. 'j:' .. jid
        local t = tracked[i]
        if t then call(Qless.PUBLISH, P .. 'popped', jid) end
        local dependents, dependencies = none, none
        if anysets then
          dependents = call('smembers', key .. '-dependents')
          dependencies = call('smembers', key .. '-dependencies')
        end
        if i > 1 then buf[#buf + 1] = ',' end
        local f = jobs[i]
        local history = f[17]
        if f[18] then memo[history[1]] = f[18] end
        append(buf, f, t, history or call('lrange', key .. '-history', '0', '-1'),
          dependents, dependencies, f[15], '"running"', f[16], eW, memo, kmemo)
      end
      buf[#buf + 1] = ']'
      return table.concat(buf)
    end

  elseif name == 'put' then
    -- put(now, worker, queue, jid, klass, data, delay, priority?, tags?, retries?, depends?)
    -- -> jid. Options not given are nil (inherited from an existing job, else defaults).
    return function(now, worker, queue, jid, klass, data, delay, priority, tags, retries,
                    depends)
      local key = Qless.P .. 'j:' .. jid
      -- Most puts create a job: a cheap EXISTS first spares them the 8-field HMGET.
      local old = {}
      if redis.call('exists', key) == 1 then
        old = redis.call('hmget', key, 'jid', 'state', 'queue', 'worker', 'priority',
          'retries', 'tags', 'failure', 'history', 'throttles', 'batch', 'start_by', 'partition')
        -- Moving an existing job may touch what a batch's memo holds (ql:completed).
        if Qless.SEEN then Qless.seen() end
      end
      local exists = old[1]
      local ostate, oqueue, oworker = old[2], old[3], old[4]
      -- Numbers are passed to Redis as strings (see base.lua): the stored text when
      -- inherited, else the option rendered once.
      local parg, rarg
      if priority then
        parg = string.format('%.17g', priority)
      else
        parg = old[5] or '0'
        priority = tonumber(parg) or 0
      end
      if retries then rarg = string.format('%.17g', retries) else rarg = old[6] or '5' end
      local otags = exists and Qless.stored_tags(old[7]) or {}
      tags = tags or otags
      -- Reads first: which listed dependencies can be linked, and old links to drop.
      local link, unlink
      if depends and #depends > 0 then
        link = Qless.dependable(jid, depends, 'Put')
        local wanted = {}
        for i = 1, #depends do wanted[depends[i]] = true end
        local current = redis.call('smembers', key .. '-dependencies')
        for i = 1, #current do
          if not wanted[current[i]] then
            unlink = unlink or {}
            unlink[#unlink + 1] = current[i]
          end
        end
      end

      -- 1. Old tags leave the index (tags the put keeps only get a new score, below).
      if #otags > 0 then
        local keep = {}
        for i = 1, #tags do keep[tags[i]] = true end
        local gone = {}
        for i = 1, #otags do
          if not keep[otags[i]] then gone[#gone + 1] = otags[i] end
        end
        Qless.tags_unindex(jid, gone)
      end
      -- 2. Dependencies no longer listed are unlinked.
      if unlink then
        for i = 1, #unlink do
          redis.call('srem', Qless.P .. 'j:' .. unlink[i] .. '-dependents', jid)
          redis.call('srem', key .. '-dependencies', unlink[i])
        end
      end
      -- 3, 4. Event and history.
      local equeue = cjson.encode(queue)
      redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"jid":' .. cjson.encode(jid) ..
        ',"event":"put","queue":' .. equeue .. '}')
      -- (The cap only matters once there are two entries: skip reading it before.)
      -- A new job in a namespace keeps its one entry in the hash, in the legacy field
      -- form (compact history, see history_legacy): ~200 bytes less than a list of its
      -- own. The plain `ql:` prefix, which stock qless clients share, keeps the spec's
      -- list from the first entry: a client whose script skips the legacy conversion
      -- (the spec allows it) must still see every job's history.
      local compact
      if exists or Qless.P == 'ql:' then
        if exists and old[9] then Qless.history_legacy(jid, old[9]) end
        local hkey = key .. '-history'
        local hlen = redis.call('rpush', hkey,
          '[' .. Qless.NOWF .. ',"put",{"q":' .. equeue .. '}]')
        if hlen > 1 then
          local cap = tonumber(redis.call('hget', Qless.P .. 'config', 'max-job-history'))
          cap = math.floor(cap or 100)
          if cap > 0 and hlen > cap then Qless.history_trim(hkey, hlen, cap) end
        end
      else
        compact = '[{"q":' .. equeue .. ',"put":' .. Qless.NOWF .. '}]'
      end
      if exists then
        -- 5. Out of the old queue.
        if oqueue and oqueue ~= '' then
          local okey = Qless.P .. 'q:' .. oqueue
          redis.call('zrem', okey .. '-work', jid)
          redis.call('zrem', okey .. '-locks', jid)
          redis.call('zrem', okey .. '-depends', jid)
          redis.call('zrem', okey .. '-scheduled', jid)
        end
        -- 6. Away from its worker; a different worker hears that it lost the job.
        if oworker and oworker ~= '' then
          redis.call('zrem', Qless.P .. 'w:' .. oworker .. ':jobs', jid)
          if ostate == 'running' and oqueue and oqueue ~= '' then
            Qless.slot_freed(oqueue, redis.call('hget', Qless.P .. 'config',
              oqueue .. '-max-concurrency'))
          end
          if oworker ~= worker then
            local event = Qless.lock_lost_event(jid, oworker)
            redis.call(Qless.PUBLISH, Qless.P .. 'w:' .. oworker, event)
            redis.call(Qless.PUBLISH, Qless.P .. 'log', event)
          end
        end
        -- 7. No longer complete.
        if ostate == 'complete' then redis.call('zrem', Qless.P .. 'completed', jid) end
        -- (throttle.lua) Its throttle slots, or its wait for one, end.
        if old[10] then Qless.Throttle.release(now, jid, old[10], oqueue) end
        -- (deadlines.lua) Its start_by was for its old wait (the put may give a new one).
        if old[12] then Qless.Deadlines.clear(jid, oqueue) end
        -- (partitions.lua) Its partition too (api.lua files it under the put's own).
        if old[13] then redis.call('hdel', key, 'partition') end
      end
      -- 8. Tags into the index, score now (the counter moves only for new ones).
      if #tags > 0 then
        local had = {}
        for i = 1, #otags do had[otags[i]] = true end
        for i = 1, #tags do
          local t = tags[i]
          redis.call('zadd', Qless.P .. 't:' .. t, Qless.NOWS, jid)
          if not had[t] then redis.call('zincrby', Qless.P .. 'tags', '1', t) end
        end
      end
      -- 9. No longer failed (fix of quirk 7: the gauge of the queue it failed in).
      if ostate == 'failed' then Qless.failure_forget(jid, old[8], oqueue) end
      -- (batches.lua) A finished job of a batch put again is to be run again.
      if old[11] and (ostate == 'failed' or ostate == 'complete') then
        Qless.Batches.note(now, old[11], jid, 'p')
      end
      -- 10, 11. Link dependencies, place the job, write its hash.
      local ndeps = 0
      if link then
        Qless.dependencies_link(jid, link)
        ndeps = redis.call('scard', key .. '-dependencies')
      elseif exists then
        ndeps = redis.call('scard', key .. '-dependencies')
      end
      local qkey = Qless.P .. 'q:' .. queue
      local state
      if ndeps > 0 then
        state = 'depends'
        redis.call('zadd', qkey .. '-depends', Qless.NOWS, jid)
        if delay > 0 then redis.call('hset', key, 'scheduled', Qless.numarg(now + delay)) end
      elseif delay > 0 then
        state = 'scheduled'
        local at = Qless.numarg(now + delay)
        redis.call('zadd', qkey .. '-scheduled', at, jid)
        Qless.due(queue, at)
      else
        state = 'waiting'
        redis.call('zadd', qkey .. '-work', string.format('%.17g', priority - now / 10000000000),
          jid)
        -- Qless.available(queue, 1), inline: building that method would cost more.
        local a = Qless.AVAILABLE
        if not a then
          a = {}
          Qless.AVAILABLE = a
        end
        local c = a[queue]
        if c then
          a[queue] = c + 1
        else
          a[queue] = 1
          a[#a + 1] = queue
        end
      end
      local etags = '{}'
      if #tags > 0 then etags = cjson.encode(tags) end
      Qless.NOWT = Qless.NOWT or string.format('%.20f', now)
      if compact then
        redis.call('hset', key, 'jid', jid, 'klass', klass, 'data', data, 'priority', parg,
          'tags', etags, 'state', state, 'worker', '', 'expires', '0', 'queue', queue,
          'retries', rarg, 'remaining', rarg, 'time', Qless.NOWT, 'history', compact)
      else
        redis.call('hset', key, 'jid', jid, 'klass', klass, 'data', data, 'priority', parg,
          'tags', etags, 'state', state, 'worker', '', 'expires', '0', 'queue', queue,
          'retries', rarg, 'remaining', rarg, 'time', Qless.NOWT)
      end
      Qless.rates_count(now, queue, 'put')   -- rates.lua
      -- 12, 13. Register the queue; tell trackers. (Within a batch, once per queue,
      -- and the ZSCORE only while some job is tracked.)
      local seen = Qless.SEEN
      if not seen then
        redis.call('zadd', Qless.P .. 'queues', 'NX', Qless.NOWS, queue)
        if redis.call('zscore', Qless.P .. 'tracked', jid) then
          redis.call(Qless.PUBLISH, Qless.P .. 'put', jid)
        end
        return jid
      end
      if not seen.queues[queue] then
        redis.call('zadd', Qless.P .. 'queues', 'NX', Qless.NOWS, queue)
        seen.queues[queue] = true
      end
      if seen.tracked == nil then
        seen.tracked = redis.call('exists', Qless.P .. 'tracked') == 1
      end
      if seen.tracked and redis.call('zscore', Qless.P .. 'tracked', jid) then
        redis.call(Qless.PUBLISH, Qless.P .. 'put', jid)
      end
      return jid
    end

  elseif name == 'check_scheduled' then
    -- Moves up to `limit` due jobs of -scheduled into -work (state waiting) and
    -- announces them. Returns how many moved. (Pop promotes by itself, without the
    -- announcement: it leases as many jobs as it promotes.)
    return function(now, queue, limit)
      if limit <= 0 then return 0 end
      local jids = redis.call('zrangebyscore', Qless.P .. 'q:' .. queue .. '-scheduled', '0',
        Qless.NOWS, 'LIMIT', '0', string.format('%d', limit))
      if #jids > 0 then
        Qless.Queue.promote(now, queue, jids)
        Qless.available(queue, #jids)
      end
      return #jids
    end

  elseif name == 'promote' then
    -- Moves the given due jobs from -scheduled to -work (spec 6.2), with their stored
    -- priority and the current time.
    return function(now, queue, jids)
      local qkey = Qless.P .. 'q:' .. queue
      local scores = {}
      local t = now / 10000000000
      local parts, any = {}, false   -- (partitions.lua) the jobs' partitions
      for i = 1, #jids do
        local key = Qless.P .. 'j:' .. jids[i]
        local f = redis.call('hmget', key, 'priority', 'partition')
        scores[#scores + 1] = string.format('%.17g', (tonumber(f[1]) or 0) - t)
        scores[#scores + 1] = jids[i]
        redis.call('hset', key, 'state', 'waiting')
        parts[i] = f[2] or ''
        if f[2] then any = true end
      end
      Qless.batch('zadd', qkey .. '-work', scores)
      Qless.batch('zrem', qkey .. '-scheduled', jids)
      if any or redis.call('exists', Qless.OWN .. 'q:' .. queue .. '-pseq') == 1 then
        for i = 1, #jids do Qless.Partitions.added(queue, jids[i], scores[2 * i - 1], parts[i]) end
      end
    end

  elseif name == 'lock_notice' then
    -- The notice half of lock expiry (spec 6.4 step 3): tell the worker, give it `grace`
    -- more seconds, count a retry in the stats. The job is not handed out.
    return function(now, queue, jid, key, worker, grace, cap)
      Qless.Deadlines.noticed(now, queue, jid, key, worker)   -- (deadlines.lua) max_run
      if redis.call('zscore', Qless.P .. 'tracked', jid) then
        redis.call(Qless.PUBLISH, Qless.P .. 'stalled', jid)
      end
      Qless.history_push(jid, '[' .. Qless.NOWF .. ',"timed-out"]', cap)
      redis.call('hset', key, 'grace', '1')
      local event = Qless.lock_lost_event(jid, worker)
      redis.call(Qless.PUBLISH, Qless.P .. 'w:' .. worker, event)
      redis.call(Qless.PUBLISH, Qless.P .. 'log', event)
      local expiry = Qless.numarg(now + grace)
      redis.call('zadd', Qless.P .. 'q:' .. queue .. '-locks', expiry, jid)
      Qless.due(queue, expiry)
      redis.call('hincrby', Qless.P .. 's:stats:' .. Qless.day_bin(now) .. ':' .. queue, 'retries',
        '1')
    end

  elseif name == 'invalidate_locks' then
    -- The given expired locks of `queue`, as pop sees them (spec 6.4): sends the grace
    -- notice, hands over (appending to `handed` the jids the popping worker takes) or
    -- fails the jobs whose retries are exhausted.
    return function(now, queue, jids, grace, cap, handed)
      local qkey = Qless.P .. 'q:' .. queue
      for i = 1, #jids do
        local jid = jids[i]
        local key = Qless.P .. 'j:' .. jid
        local f = redis.call('hmget', key, 'jid', 'worker', 'grace', 'queue', 'batch',
          'workflow')
        if not f[1] then
          redis.call('zrem', qkey .. '-locks', jid)   -- the lock of a job that is gone
        else
          local worker = f[2] or ''
          redis.call('zrem', Qless.P .. 'w:' .. worker .. ':jobs', jid)
          local noticed = tonumber(f[3]) == 1
          if not noticed or grace <= 0 then
            Qless.Queue.lock_notice(now, queue, jid, key, worker, grace, cap)
          end
          if noticed or grace <= 0 then
            redis.call('hdel', key, 'grace')
            local remaining = tonumber(redis.call('hincrby', key, 'remaining', '-1'))
            if remaining >= 0 then
              -- (extra.lua) With a backoff the job is scheduled for later instead.
              if not Qless.Extra.lock_backoff(now, queue, jid) then
                handed[#handed + 1] = jid
              end
            else
              local jq = f[4] or ''
              local jqkey = Qless.P .. 'q:' .. jq
              redis.call('zrem', jqkey .. '-work', jid)
              redis.call('zrem', jqkey .. '-locks', jid)
              redis.call('zrem', jqkey .. '-scheduled', jid)
              local throttles = redis.call('hget', key, 'throttles')   -- (throttle.lua)
              if throttles then Qless.Throttle.release(now, jid, throttles, jq) end
              local group = 'failed-retries-' .. jq
              local egroup = cjson.encode(group)
              local message = cjson.encode('Job exhausted retries in queue "' .. jq .. '"')
              Qless.history_push(jid, '[' .. Qless.NOWF .. ',"failed",{"group":' .. egroup ..
                '}]', cap)
              redis.call('hset', key, 'state', 'failed', 'worker', '', 'expires', '',
                'failure', '{"group":' .. egroup .. ',"message":' .. message .. ',"when":' ..
                Qless.num(now) .. ',"worker":""}')
              redis.call('sadd', Qless.P .. 'failures', group)
              redis.call('lpush', Qless.P .. 'f:' .. group, jid)
              if redis.call('zscore', Qless.P .. 'tracked', jid) then
                redis.call(Qless.PUBLISH, Qless.P .. 'failed', jid)
              end
              redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"message":' .. message .. ',"jid":' ..
                cjson.encode(jid) .. ',"group":' .. egroup ..
                ',"event":"failed","worker":' .. cjson.encode(worker) .. '}')
              local skey = Qless.P .. 's:stats:' .. Qless.day_bin(now) .. ':' .. queue
              redis.call('hincrby', skey, 'failures', '1')
              redis.call('hincrby', skey, 'failed', '1')
              if f[5] or f[6] then Qless.Job.ended(now, jid, f[5], f[6], 'f') end
              Qless.rates_count(now, queue, 'failed')   -- rates.lua
            end
          end
        end
      end
    end

  elseif name == 'check_recurring' then
    -- Spawns the due recurring children of `queue`, at most `limit` (recurring.lua),
    -- and announces them. Returns how many were spawned and whether everything due
    -- was handled. (Pop spawns by itself, without the announcement, as it promotes.)
    return function(now, queue, limit, cap)
      if limit <= 0 then return 0, false end
      local due = redis.call('zrangebyscore', Qless.P .. 'q:' .. queue .. '-recur', '0', Qless.NOWS,
        'WITHSCORES', 'LIMIT', '0', string.format('%d', limit))
      if #due == 0 then return 0, true end
      local spawned, all = Qless.Recurring.spawn(now, queue, due, limit, cap)
      if spawned > 0 then Qless.available(queue, spawned) end
      return spawned, all
    end

  elseif name == 'peek' then
    -- peek(now, queue, count) -> JSON array of job objects: expired-lock jobs first (left
    -- as they are), then the top of -work once due children/scheduled jobs are in.
    return function(now, queue, count)
      local jids = {}
      if count > 0 then
        jids = redis.call('zrangebyscore', Qless.P .. 'q:' .. queue .. '-locks', '-inf', Qless.NOWS,
          'LIMIT', '0', string.format('%d', count))
      end
      local more = count - #jids
      if more > 0 then
        Qless.Queue.check_recurring(now, queue, more)
        Qless.Queue.check_scheduled(now, queue, more)
        local top = redis.call('zrevrange', Qless.P .. 'q:' .. queue .. '-work', '0',
          string.format('%d', more - 1))
        for i = 1, #top do jids[#jids + 1] = top[i] end
      end
      return Qless.jobs_json(jids)
    end

  elseif name == 'counts' then
    -- The 8-key counts object of one queue (promotes due scheduled jobs first).
    return function(now, queue)
      local qkey = Qless.P .. 'q:' .. queue
      local stalled = redis.call('zcount', qkey .. '-locks', '0', Qless.NOWS)
      Qless.Queue.check_scheduled(now, queue, redis.call('zcard', qkey .. '-scheduled'))
      local paused = redis.call('sismember', Qless.P .. 'paused_queues', queue) == 1
      return '{"name":' .. cjson.encode(queue) ..
        ',"waiting":' .. redis.call('zcard', qkey .. '-work') ..
        ',"stalled":' .. stalled ..
        ',"running":' .. (redis.call('zcard', qkey .. '-locks') - stalled) ..
        ',"scheduled":' .. redis.call('zcard', qkey .. '-scheduled') ..
        ',"depends":' .. redis.call('zcard', qkey .. '-depends') ..
        ',"recurring":' .. redis.call('zcard', qkey .. '-recur') ..
        ',"paused":' .. (paused and 'true' or 'false') .. '}'
    end

  elseif name == 'queues' then
    -- queues(now, [queue]) -> one counts object, or an array over ql:queues.
    return function(now, queue)
      if queue then return Qless.Queue.counts(now, queue) end
      local names = redis.call('zrange', Qless.P .. 'queues', '0', '-1')
      if #names == 0 then return '{}' end
      local out = {}
      for i = 1, #names do out[i] = Qless.Queue.counts(now, names[i]) end
      return '[' .. table.concat(out, ',') .. ']'
    end

  elseif name == 'length' then
    -- length(now, queue) -> running + waiting + scheduled.
    return function(queue)
      local qkey = Qless.P .. 'q:' .. queue
      return redis.call('zcard', qkey .. '-locks') + redis.call('zcard', qkey .. '-work') +
        redis.call('zcard', qkey .. '-scheduled')
    end

  elseif name == 'jobs' then
    -- jobs(now, state, queue, offset, count) -> RESP array of jids.
    return function(now, state, queue, offset, count)
      if state == 'complete' then
        return redis.call('zrevrange', Qless.P .. 'completed', offset, offset + count - 1)
      end
      local qkey = Qless.P .. 'q:' .. queue
      if state == 'running' then
        return redis.call('zrangebyscore', qkey .. '-locks', Qless.NOWS, '+inf', 'LIMIT', offset,
          count)
      elseif state == 'stalled' then
        return redis.call('zrangebyscore', qkey .. '-locks', '-inf', Qless.NOWS, 'LIMIT', offset,
          count)
      elseif state == 'scheduled' then
        Qless.Queue.check_scheduled(now, queue, redis.call('zcard', qkey .. '-scheduled'))
        return redis.call('zrange', qkey .. '-scheduled', offset, offset + count - 1)
      elseif state == 'depends' then
        return redis.call('zrange', qkey .. '-depends', offset, offset + count - 1)
      elseif state == 'recurring' then
        return redis.call('zrangebyscore', qkey .. '-recur', '0', '+inf', 'LIMIT', offset, count)
      end
      Qless.raise('QL_ARG', 'Jobs', 'Unknown type "' .. state .. '"')
    end

  elseif name == 'failed' then
    -- failed(now) -> {"<group>": count...}; failed(now, group, start, limit) -> a page.
    return function(group, start, limit)
      if not group then
        local groups = redis.call('smembers', Qless.P .. 'failures')
        if #groups == 0 then return '{}' end
        -- Sorted: the set's own order depends on the server's hash seed.
        if #groups > 1 then table.sort(groups) end
        local parts = {}
        for i = 1, #groups do
          parts[i] = cjson.encode(groups[i]) .. ':' .. redis.call('llen',
            Qless.P .. 'f:' .. groups[i])
        end
        return '{' .. table.concat(parts, ',') .. '}'
      end
      local key = Qless.P .. 'f:' .. group
      return '{"total":' .. redis.call('llen', key) .. ',"jobs":' ..
        Qless.json_list(redis.call('lrange', key, start, start + limit - 1)) .. '}'
    end

  elseif name == 'unfail' then
    -- unfail(now, queue, group, count) -> how many of the group's oldest jobs moved.
    return function(now, queue, group, count)
      if count <= 0 then return 0 end
      local list = Qless.P .. 'f:' .. group
      local jids = redis.call('lrange', list, -count, '-1')
      local cap = Qless.history_cap(redis.call('hget', Qless.P .. 'config', 'max-job-history'))
      local entry = '[' .. Qless.NOWF .. ',"put",{"q":' .. cjson.encode(queue) .. '}]'
      local work = Qless.P .. 'q:' .. queue .. '-work'
      local moved = 0
      for i = 1, #jids do
        local jid = jids[i]
        local key = Qless.P .. 'j:' .. jid
        local f = redis.call('hmget', key, 'jid', 'priority', 'retries', 'state', 'failure',
          'queue', 'batch', 'start_by', 'partition')
        if f[1] then
          -- (deadlines.lua) Put back to run: a start_by, passed or not, no longer holds.
          if f[8] then Qless.Deadlines.clear(jid, f[6]) end
          Qless.history_push(jid, entry, cap)
          redis.call('hset', key, 'state', 'waiting', 'worker', '', 'expires', '0', 'queue', queue,
            'remaining', f[3] or '5')
          local score = Qless.numarg((tonumber(f[2]) or 0) - now / 10000000000)
          redis.call('zadd', work, score, jid)
          Qless.Partitions.added(queue, jid, score, f[9] or '')   -- partitions.lua
          -- Fix of quirk 8: the failed gauge goes down, as for put and cancel.
          if f[4] == 'failed' then
            local failure = Qless.json_decode(f[5])
            local when = type(failure) == 'table' and tonumber(failure.when)
            if when and f[6] and f[6] ~= '' then
              local skey = Qless.P .. 's:stats:' .. Qless.day_bin(when) .. ':' .. f[6]
              redis.call('hincrby', skey, 'failed', '-1')
            end
            if f[7] then Qless.Batches.note(now, f[7], jid, 'p') end   -- batches.lua
          end
          moved = moved + 1
        end
      end
      redis.call('ltrim', list, '0', -count - 1)
      if redis.call('llen', list) == 0 then redis.call('srem', Qless.P .. 'failures', group) end
      if moved > 0 then
        redis.call('zadd', Qless.P .. 'queues', 'NX', Qless.NOWS, queue)
        Qless.available(queue, moved)
      end
      return moved
    end

  elseif name == 'stats' then
    -- stats(now, queue, date) -> the wait/run statistics and counters of that day.
    return function(queue, date)
      local bin = Qless.day_bin(date)
      local function summary(kind)
        local h = redis.call('hgetall', Qless.P .. 's:' .. kind .. ':' .. bin .. ':' .. queue)
        local map = {}
        for i = 1, #h, 2 do map[h[i]] = h[i + 1] end
        local count = tonumber(map.total) or 0
        local vk = tonumber(map.vk) or 0
        local std = 0
        if count > 1 then std = math.sqrt(vk / (count - 1)) end
        local hist = {}
        for i = 0, 59 do hist[#hist + 1] = tonumber(map['s' .. i]) or 0 end
        for i = 1, 59 do hist[#hist + 1] = tonumber(map['m' .. i]) or 0 end
        for i = 1, 23 do hist[#hist + 1] = tonumber(map['h' .. i]) or 0 end
        for i = 1, 6 do hist[#hist + 1] = tonumber(map['d' .. i]) or 0 end
        return { count = count, mean = tonumber(map.mean) or 0, std = std, histogram = hist }
      end
      local s = redis.call('hmget', Qless.P .. 's:stats:' .. bin .. ':' .. queue, 'retries',
        'failed', 'failures')
      return cjson.encode({
        retries = tonumber(s[1]) or 0,
        failed = tonumber(s[2]) or 0,
        failures = tonumber(s[3]) or 0,
        wait = summary('wait'),
        run = summary('run'),
      })
    end

  elseif name == 'visit' then
    -- Sweep's upkeep of one queue: promotes and spawns what is due (announced), sends
    -- the grace notice for newly expired locks, and announces the expired locks whose
    -- notice is out (or with grace <= 0), which the next pop hands over. Then records
    -- the queue's next due time in `OWN due` (now if `limit` cut the work short), or
    -- removes it when nothing is pending. Returns promoted, spawned, stalled, expired.
    return function(now, q, limit, grace, cap)
      local qkey = Qless.P .. 'q:' .. q
      local promoted = Qless.Queue.check_scheduled(now, q, limit)
      local spawned, all = Qless.Queue.check_recurring(now, q, limit, cap)
      local stalled, expired = 0, 0
      -- (deadlines.lua) Jobs past their start_by fail.
      local late, dnext = Qless.Deadlines.visit(now, q, limit)
      local jids = redis.call('zrangebyscore', qkey .. '-locks', '-inf', Qless.NOWS, 'LIMIT', '0',
        string.format('%d', limit))
      for k = 1, #jids do
        local jid = jids[k]
        local key = Qless.P .. 'j:' .. jid
        local f = redis.call('hmget', key, 'jid', 'worker', 'grace')
        if f[1] then
          if grace > 0 and tonumber(f[3]) ~= 1 then
            local worker = f[2] or ''
            redis.call('zrem', Qless.P .. 'w:' .. worker .. ':jobs', jid)
            Qless.Queue.lock_notice(now, q, jid, key, worker, grace, cap)
            stalled = stalled + 1
          else
            expired = expired + 1
          end
        end
      end
      if expired > 0 then Qless.available(q, expired) end
      local nextt
      if promoted >= limit or not all or #jids >= limit or late >= limit then
        nextt = now   -- more is due than one visit handles: come back at once
      else
        nextt = dnext
        local after = '(' .. Qless.NOWS
        local suffixes = { '-scheduled', '-recur', '-locks' }
        for s = 1, 3 do
          local first = redis.call('zrangebyscore', qkey .. suffixes[s], after, '+inf',
            'WITHSCORES', 'LIMIT', '0', '1')
          local t = tonumber(first[2])
          if t and (not nextt or t < nextt) then nextt = t end
        end
      end
      if nextt then
        redis.call('zadd', Qless.OWN .. 'due', Qless.numarg(nextt), q)
      else
        redis.call('zrem', Qless.OWN .. 'due', q)
      end
      return promoted, spawned, stalled, expired
    end

  elseif name == 'sweep' then
    -- sweep(now, limit, scan, cursor) -> {"promoted":n,"spawned":n,"stalled":n,
    -- "expired":n,"visited":n,"queues":n,"cursor":c,"next":t}: pop's upkeep, without
    -- leasing anything, for the queues due by now in `OWN due` (at most `limit` of them),
    -- then for `scan` queues of `P queues` from rank `cursor` on, which finds work
    -- written by clients that do not keep `OWN due` (extension, lua/README.md).
    return function(now, limit, scan, cursor)
      local cfg = redis.call('hmget', Qless.P .. 'config', 'grace-period', 'max-job-history')
      local grace = tonumber(cfg[1]) or 10
      local cap = Qless.history_cap(cfg[2])
      local names = redis.call('zrangebyscore', Qless.OWN .. 'due', '-inf', Qless.NOWS, 'LIMIT',
        '0', string.format('%d', limit))
      local seen = {}
      for i = 1, #names do seen[names[i]] = true end
      local queues = redis.call('zcard', Qless.P .. 'queues')
      local nextcursor = 0
      if scan > 0 and queues > 0 then
        if cursor >= queues then cursor = 0 end
        local slice = redis.call('zrange', Qless.P .. 'queues', string.format('%d', cursor),
          string.format('%d', cursor + scan - 1))
        for i = 1, #slice do
          if not seen[slice[i]] then
            seen[slice[i]] = true
            names[#names + 1] = slice[i]
          end
        end
        nextcursor = cursor + #slice
        if nextcursor >= queues then nextcursor = 0 end
      end
      local promoted, spawned, stalled, expired = 0, 0, 0, 0
      local visit = Qless.Queue.visit
      for i = 1, #names do
        local p, s, st, e = visit(now, names[i], limit, grace, cap)
        promoted, spawned, stalled, expired = promoted + p, spawned + s, stalled + st,
          expired + e
      end
      local first = redis.call('zrange', Qless.OWN .. 'due', '0', '0', 'WITHSCORES')
      return '{"promoted":' .. promoted .. ',"spawned":' .. spawned .. ',"stalled":' ..
        stalled .. ',"expired":' .. expired .. ',"visited":' .. #names .. ',"queues":' ..
        queues .. ',"cursor":' .. nextcursor .. ',"next":' ..
        string.format('%.17g', tonumber(first[2]) or 0) .. '}'
    end
  end
end
