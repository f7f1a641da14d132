-- partitions.lua: fair queues. A job may name a `partition` (a customer, a tenant);
-- a queue's partitioned jobs are served round robin across the partitions that have
-- jobs waiting, each partition in the usual order (priority, then time), with optional
-- limits per partition (at most `concurrency` running, at most `rate-jobs` started per
-- `rate-seconds`).
--
-- The queue's -work zset stays the truth: a partitioned job waits in it like any other
-- (counts, peek, cancel, priority and stock clients' reads are unchanged). Beside it,
-- under OWN (lua/README.md, "Key schema", "Fair queues"):
--
-- * `q:<Q>-p:<name>`: partition <name>'s waiting jobs, scored as in -work. Whoever puts
--   a partitioned job into -work files it here too (`added`); a job that leaves -work
--   is not taken out: an entry whose jid is no longer in -work with that score is
--   stale, and is dropped (or re-scored) when pop meets it.
-- * `q:<Q>-parts`: the rotation, partition name -> turn number (ZPOPMIN gives the next
--   partition; one served goes to the back with the next number from `q:<Q>-pseq`).
-- * `q:<Q>-ppark`: partitions at a limit, name -> when pop looks at them again (the
--   rate window's end; a concurrency limit is looked at again RECHECK seconds on).
--   A partition with waiting jobs is in the rotation or parked (or its jobs' entries
--   are all stale).
-- * `q:<Q>-pseq`: the rotation's turn counter. It exists while the queue has
--   partitions (the rotation or the parked set is not empty; pop deletes it when
--   both are): pop's EXISTS probe names it, so a queue without partitions pays
--   nothing more there, and a put without a partition pays one EXISTS.
-- * `q:<Q>-plimits`: the settings (`concurrency`, `rate-jobs`, `rate-seconds`).
-- * `q:<Q>-prun:<name>`: jid -> pop time of the partition's jobs leased while the queue
--   had a concurrency limit; an entry whose jid no longer holds a lock of Q (one
--   ZMSCORE of -locks) is dropped when counted. `q:<Q>-prate:<name>`: the partition's
--   leases (jid@time -> time) within the rate window, kept while a rate is set.
--
-- Unpartitioned jobs of a queue that has partitions take one turn in the rotation as
-- the partition '' (no limits apply to it): while the queue has partitions, whoever
-- puts an unpartitioned job into its -work files it under ''. When a queue gets its
-- first partitioned job, the jobs already waiting are filed under '' (one
-- ZUNIONSTORE).

-- The methods of Qless.Partitions, made on first use (see base.lua).
function partitions_factory(name)
  -- Seconds after which pop looks again at a partition parked at its concurrency.
  local RECHECK = 1

  if name == 'added' then
    -- Job jid entered `queue`'s -work with `score` (text; nil: read from -work). Its
    -- `partition`: a name, '' for none, nil to read it from the job.
    return function(queue, jid, score, partition)
      local base = Qless.OWN .. 'q:' .. queue
      if partition == nil then
        partition = redis.call('hget', Qless.P .. 'j:' .. jid, 'partition') or ''
      end
      local partitioned = redis.call('exists', base .. '-pseq') == 1
      if partition == '' and not partitioned then return end
      score = score or redis.call('zscore', Qless.P .. 'q:' .. queue .. '-work', jid)
      if not score then return end
      if not partitioned then
        -- The queue's first partition: the jobs already waiting take the turns of ''.
        local rest = base .. '-p:'
        if redis.call('zunionstore', rest, '1', Qless.P .. 'q:' .. queue .. '-work') > 1 then
          redis.call('zrem', rest, jid)
          Qless.Partitions.back(base, '')
        else
          redis.call('del', rest)
        end
        -- A batch's memo that pop need not look at partitions is out of date.
        if Qless.SEEN then Qless.seen() end
      end
      redis.call('zadd', base .. '-p:' .. partition, score, jid)
      if not redis.call('zscore', base .. '-parts', partition) and
          not redis.call('zscore', base .. '-ppark', partition) then
        Qless.Partitions.back(base, partition)
      end
    end

  elseif name == 'back' then
    -- Partition `pname` of the queue with keys `base` goes to the back of the rotation.
    return function(base, pname)
      redis.call('zadd', base .. '-parts', redis.call('incr', base .. '-pseq'), pname)
    end

  elseif name == 'put' then
    -- After a put or requeue of jid into `queue` (which dropped an old partition):
    -- its partition (nil: none).
    return function(queue, jid, partition)
      if partition and partition ~= '' then
        redis.call('hset', Qless.P .. 'j:' .. jid, 'partition', partition)
      else
        partition = ''
      end
      Qless.Partitions.added(queue, jid, nil, partition)
    end

  elseif name == 'limited' then
    -- When partition `pname` of `queue` may next start a job, if it is at a limit now
    -- (`l`: the settings as numbers); nil when it may start one.
    return function(now, queue, base, pname, l)
      if l.conc > 0 then
        local rk = base .. '-prun:' .. pname
        if redis.call('zcard', rk) >= l.conc then
          -- (Those leased before now and no longer holding a lock of the queue are
          -- gone: this call's own leases get their locks after the take.)
          local before = redis.call('zrangebyscore', rk, '-inf', '(' .. Qless.NOWS)
          local gone = {}
          if #before > 0 then
            local held = redis.call('zmscore', Qless.P .. 'q:' .. queue .. '-locks',
              unpack(before))
            for i = 1, #before do
              if not held[i] then gone[#gone + 1] = before[i] end
            end
            if #gone > 0 then Qless.batch('zrem', rk, gone) end
          end
          if redis.call('zcard', rk) >= l.conc then return now + RECHECK end
        end
      end
      if l.rjobs > 0 and l.rsec > 0 then
        local lk = base .. '-prate:' .. pname
        redis.call('zremrangebyscore', lk, '-inf', Qless.numarg(now - l.rsec))
        if redis.call('zcard', lk) >= l.rjobs then
          local oldest = redis.call('zrange', lk, '0', '0', 'WITHSCORES')[2]
          return (tonumber(oldest) or now) + l.rsec
        end
      end
      return nil
    end

  elseif name == 'settings' then
    -- The limits of the queue with keys `base`, as numbers (0: none).
    return function(base)
      local f = redis.call('hmget', base .. '-plimits', 'concurrency', 'rate-jobs', 'rate-seconds')
      return { conc = tonumber(f[1]) or 0, rjobs = tonumber(f[2]) or 0, rsec = tonumber(f[3]) or 0 }
    end

  elseif name == 'take' then
    -- Pop's take from a queue with partitions (queue.lua), in place of ZPOPMAX of its
    -- -work: up to `n` jobs, the next partitions of the rotation one job each, taken
    -- out of -work. Returns them as ZPOPMAX does (jid, score, ...).
    return function(now, queue, qkey, n)
      local base = Qless.OWN .. 'q:' .. queue
      local parts, park, work = base .. '-parts', base .. '-ppark', qkey .. '-work'
      -- Parked partitions whose time has come rejoin the rotation.
      local woken = redis.call('zrangebyscore', park, '-inf', Qless.NOWS, 'LIMIT', '0', '1000')
      if #woken > 0 then
        Qless.batch('zrem', park, woken)
        for i = 1, #woken do Qless.Partitions.back(base, woken[i]) end
      end
      local l = Qless.Partitions.settings(base)
      local top, got, visits = {}, 0, 0
      -- (Each visit serves, parks or drops a partition, or drops 100 stale entries;
      -- the cap bounds a call whatever the state.)
      while got < n and visits < n + 1000 do
        visits = visits + 1
        local head = redis.call('zpopmin', parts)
        local pname = head[1]
        if not pname then break end
        local pset = base .. '-p:' .. pname
        local at
        if pname ~= '' then at = Qless.Partitions.limited(now, queue, base, pname, l) end
        if at then
          redis.call('zadd', park, Qless.numarg(at), pname)
        else
          local jid, score
          for _ = 1, 100 do
            local e = redis.call('zrevrange', pset, '0', '0', 'WITHSCORES')
            if not e[1] then break end
            local s = redis.call('zscore', work, e[1])
            if not s then
              redis.call('zrem', pset, e[1])         -- left -work: stale
            elseif s ~= e[2] then
              redis.call('zadd', pset, s, e[1])      -- re-scored (priority, timeout)
            else
              jid, score = e[1], s
              break
            end
          end
          if jid then
            redis.call('zrem', pset, jid)
            redis.call('zrem', work, jid)
            top[#top + 1] = jid
            top[#top + 1] = score
            got = got + 1
            if pname ~= '' then
              if l.conc > 0 then redis.call('zadd', base .. '-prun:' .. pname, Qless.NOWS, jid) end
              if l.rjobs > 0 and l.rsec > 0 then
                redis.call('zadd', base .. '-prate:' .. pname, Qless.NOWS, jid .. '@' .. Qless.NOWS)
              end
            end
          end
          if redis.call('exists', pset) == 1 then Qless.Partitions.back(base, pname) end
        end
      end
      if redis.call('exists', parts, park) == 0 then redis.call('del', base .. '-pseq') end
      return top
    end

  elseif name == 'set' then
    -- partitions.set(queue, concurrency, rate-jobs, rate-seconds) -> 1 (0: no such
    -- limit). Parked partitions are looked at again by the next pop.
    return function(now, queue, conc, rjobs, rsec)
      local base = Qless.OWN .. 'q:' .. queue
      redis.call('del', base .. '-plimits')
      if conc > 0 then redis.call('hset', base .. '-plimits', 'concurrency', Qless.numarg(conc)) end
      if rjobs > 0 and rsec > 0 then
        redis.call('hset', base .. '-plimits', 'rate-jobs', Qless.numarg(rjobs), 'rate-seconds',
          Qless.numarg(rsec))
      end
      local parked = redis.call('zrange', base .. '-ppark', '0', '-1')
      for i = 1, #parked do redis.call('zadd', base .. '-ppark', Qless.NOWS, parked[i]) end
      if Qless.SEEN then Qless.seen() end
      return 1
    end

  elseif name == 'list' then
    -- partitions.get(queue, offset, count) -> JSON {"partitions": [{name, waiting,
    -- running, limited}...], "cursor": next offset or null, "concurrency", "rate"}:
    -- the partitions with jobs waiting, the rotation's order first, then the parked
    -- ones (`limited`: when pop looks at it again). `waiting` counts its set (stale
    -- entries included until pop meets them); `running` its leased jobs while the
    -- queue has a concurrency limit (else null).
    return function(now, queue, offset, count)
      local base = Qless.OWN .. 'q:' .. queue
      local l = Qless.Partitions.settings(base)
      local names, limited = {}, {}
      local nparts = redis.call('zcard', base .. '-parts')
      local want = count + 1   -- one more than asked: is there a next page?
      if offset < nparts then
        local r = redis.call('zrange', base .. '-parts', string.format('%d', offset),
          string.format('%d', offset + want - 1))
        for i = 1, #r do names[#names + 1] = r[i] end
      end
      if #names < want then
        local from = math.max(offset - nparts, 0)
        local r = redis.call('zrange', base .. '-ppark', string.format('%d', from),
          string.format('%d', from + want - #names - 1), 'WITHSCORES')
        for i = 1, #r, 2 do
          names[#names + 1] = r[i]
          limited[r[i]] = r[i + 1]
        end
      end
      local out = {}
      local more = #names > count
      for i = 1, math.min(#names, count) do
        local pname = names[i]
        if pname ~= '' then
          local running = 'null'
          if l.conc > 0 then
            local jids = redis.call('zrange', base .. '-prun:' .. pname, '0', '-1')
            local n = 0
            if #jids > 0 then
              local held = redis.call('zmscore', Qless.P .. 'q:' .. queue .. '-locks', unpack(jids))
              for k = 1, #jids do if held[k] then n = n + 1 end end
            end
            running = tostring(n)
          end
          out[#out + 1] = '{"name":' .. cjson.encode(pname) ..
            ',"waiting":' .. redis.call('zcard', base .. '-p:' .. pname) ..
            ',"running":' .. running ..
            ',"limited":' .. (limited[pname] and Qless.jnum(limited[pname]) or 'null') .. '}'
        end
      end
      local rate = 'null'
      if l.rjobs > 0 and l.rsec > 0 then
        rate = '{"jobs":' .. Qless.num(l.rjobs) .. ',"seconds":' .. Qless.num(l.rsec) .. '}'
      end
      return '{"partitions":[' .. table.concat(out, ',') .. '],"cursor":' ..
        (more and string.format('"%d"', offset + count) or 'null') ..
        ',"concurrency":' .. (l.conc > 0 and Qless.num(l.conc) or 'null') ..
        ',"rate":' .. rate .. '}'
    end
  end
end
