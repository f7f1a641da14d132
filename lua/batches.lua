-- batches.lua: batches of jobs with callbacks (the /v1/batches routes; not the `batch`
-- command, which runs many calls in one invocation).
--
-- A batch is qlessd's own (the qless protocol has none), so its keys are under OWN.
-- Batch B has OWN batch:<B>, a hash: `description`, `created`, `parent`, `state`
-- (`open`, `settled` once every job and child batch is finished, `canceled`), the
-- counts `total`, `completed`, `failed` and `canceled`, `open` (child batches not yet
-- finished) and `unsucceeded` (child batches that have not succeeded), `died` (1 once a
-- job of it or of a child batch failed for good), the callbacks `cb:<kind>` (JSON put
-- specs; kinds on_complete, on_success, on_death) and, once put, `fired:<kind>` (the
-- callback's jid), and the times `settled` and `succeeded`. Beside it: `-jobs` (zset,
-- jid -> order of arrival), `-done` (hash, jid -> `c` completed, `f` failed, `x`
-- canceled; a member absent from it is still to run), `-failed` (zset, jid -> when it
-- failed, for the callbacks' `failed_jids`) and `-children` (zset, child bid -> order).
-- OWN batches lists every batch (bid -> created).
--
-- A job of the batch carries its bid in its hash's `batch` field. Every path that
-- ends a job for good (complete, fail, a retry or lock expiry with no retries left,
-- cancel) or brings it back (unfail, a put over it) calls Qless.Batches.note with the
-- job's new standing, in the same invocation, so the counts move exactly once per
-- change and a callback is put by the very call that settles the batch: a crash can
-- never leave one put twice or not at all. Stock clients calling the script's own
-- commands move batches the same way.

-- The methods of Qless.Batches, made on first use (see base.lua).
function batches_factory(name)
  -- The kinds of callback, in the order they fire when one call triggers several.
  local KINDS = { 'on_death', 'on_complete', 'on_success' }

  local function key(bid) return Qless.OWN .. 'batch:' .. bid end

  if name == 'key' then
    return key

  elseif name == 'spec' then
    -- spec(text, who, what) -> the callback spec decoded and checked, or raises. A spec
    -- is a JSON object {queue, jid, klass, data (an object, as JSON text), delay,
    -- priority, tags, retries, throttles, backoff}, the gateway's put body.
    return function(text, who, what)
      local spec = Qless.json_decode(text)
      local function bad(why)
        Qless.raise('QL_ARG', who, 'Arg "' .. what .. '" ' .. why .. ': ' .. tostring(text))
      end
      if type(spec) ~= 'table' then bad('not a JSON object') end
      for k, v in pairs(spec) do
        if v == cjson.null then spec[k] = nil end
      end
      for _, field in ipairs({ 'queue', 'jid', 'klass', 'data' }) do
        if type(spec[field]) ~= 'string' or spec[field] == '' then
          bad('needs a non-empty string "' .. field .. '"')
        end
      end
      Qless.jid_free(spec.jid, who)
      if not string.find(spec.data, '^%s*{') or Qless.json_decode(spec.data) == nil then
        bad('needs "data" as the text of a JSON object')
      end
      for _, field in ipairs({ 'delay', 'priority', 'retries' }) do
        if spec[field] ~= nil and type(spec[field]) ~= 'number' then
          bad('needs a number "' .. field .. '"')
        end
      end
      return spec
    end

  elseif name == 'open' then
    -- open(now, bid, description, parent, specs, jids): records a new batch whose jobs
    -- (already put, in order) are `jids`, with the callback specs `specs` (kind -> JSON
    -- text). api.lua has checked everything (the bid is new, the parent open, the jobs
    -- new). An empty batch settles at once.
    return function(now, bid, description, parent, specs, jids)
      local B = key(bid)
      local fields = { 'description', description, 'created', Qless.NOWS, 'state', 'open',
        'total', #jids, 'completed', 0, 'failed', 0, 'canceled', 0, 'open', 0,
        'unsucceeded', 0, 'seq', #jids }
      if parent then
        fields[#fields + 1] = 'parent'
        fields[#fields + 1] = parent
      end
      for kind, text in pairs(specs) do
        fields[#fields + 1] = 'cb:' .. kind
        fields[#fields + 1] = text
      end
      redis.call('hset', B, unpack(fields))
      -- The listing forgets batches older than finished ones are kept (see keep).
      local ttl = tonumber(redis.call('hget', Qless.P .. 'config', 'jobs-history')) or 604800
      redis.call('zremrangebyscore', Qless.OWN .. 'batches', '-inf', Qless.numarg(now - ttl))
      redis.call('zadd', Qless.OWN .. 'batches', Qless.NOWS, bid)
      Qless.Batches.enlist(B, bid, jids, 0)
      if parent then
        local PB = key(parent)
        redis.call('hincrby', PB, 'open', 1)
        redis.call('hincrby', PB, 'unsucceeded', 1)
        local n = redis.call('hincrby', PB, 'children', 1)
        redis.call('zadd', PB .. '-children', n, bid)
      end
      if #jids == 0 then Qless.Batches.check(now, bid) end
    end

  elseif name == 'enlist' then
    -- enlist(B, bid, jids, from): the jobs join the batch, numbered after `from`.
    return function(B, bid, jids, from)
      local members = {}
      for i = 1, #jids do
        members[#members + 1] = from + i
        members[#members + 1] = jids[i]
        redis.call('hset', Qless.P .. 'j:' .. jids[i], 'batch', bid)
      end
      if #members > 0 then Qless.batch('zadd', B .. '-jobs', members, 1000) end
    end

  elseif name == 'add' then
    -- add(now, bid, jids): jobs already put join the open batch `bid`.
    return function(now, bid, jids)
      local B = key(bid)
      local seq = redis.call('hincrby', B, 'seq', #jids) - #jids
      redis.call('hincrby', B, 'total', #jids)
      Qless.Batches.enlist(B, bid, jids, seq)
    end

  elseif name == 'state' then
    -- state(bid) -> the batch's state, or nil if there is no such batch.
    return function(bid)
      local state = redis.call('hget', key(bid), 'state')
      return state or nil
    end

  elseif name == 'note' then
    -- note(now, bid, jid, to): job `jid` of batch `bid` now stands at `to`: 'c'
    -- completed, 'f' failed for good, 'x' canceled, or 'p' back to be run. Moves the
    -- counts from where the job stood to where it stands, then settles what that
    -- settles. A job that is not a member (a stale field), or that stands where it
    -- stood, changes nothing.
    return function(now, bid, jid, to)
      local B = key(bid)
      if not redis.call('zscore', B .. '-jobs', jid) then return end
      local from = redis.call('hget', B .. '-done', jid)
      if from == to or (not from and to == 'p') then return end
      local counts = { c = 'completed', f = 'failed', x = 'canceled' }
      if from then
        redis.call('hincrby', B, counts[from], -1)
        if from == 'f' then redis.call('zrem', B .. '-failed', jid) end
      end
      if to == 'p' then
        redis.call('hdel', B .. '-done', jid)
      else
        redis.call('hset', B .. '-done', jid, to)
        redis.call('hincrby', B, counts[to], 1)
        if to == 'f' then redis.call('zadd', B .. '-failed', Qless.NOWS, jid) end
      end
      if to == 'f' then
        -- A death counts for the batch and every batch above it.
        local at = bid
        while at do
          local AB = key(at)
          redis.call('hset', AB, 'died', 1)
          if at ~= bid then Qless.Batches.check(now, at) end
          at = redis.call('hget', AB, 'parent')
          at = at or nil
        end
      end
      Qless.Batches.check(now, bid)
    end

  elseif name == 'check' then
    -- check(now, bid): fires what the batch's counts call for, each callback once:
    -- on_death once a job died; on_complete when every job and child batch has
    -- finished (the batch is then settled, and its parent hears of it); on_success when,
    -- settled, every job has completed and every child batch succeeded (its parent
    -- hears of that too). A canceled batch fires nothing.
    return function(now, bid)
      local B = key(bid)
      local h = redis.call('hmget', B, 'state', 'total', 'completed', 'failed', 'canceled',
        'open', 'unsucceeded', 'died', 'parent', 'succeeded', 'fired:on_death')
      local state = h[1]
      if state ~= 'open' and state ~= 'settled' then return end
      local total, completed = tonumber(h[2]), tonumber(h[3])
      local finished = completed + tonumber(h[4]) + tonumber(h[5])
      if h[8] and not h[11] then Qless.Batches.fire(now, bid, 'on_death') end
      local parent = h[9] or nil
      if state == 'open' and finished == total and tonumber(h[6]) == 0 then
        state = 'settled'
        redis.call('hset', B, 'state', state, 'settled', Qless.NOWS)
        Qless.Batches.fire(now, bid, 'on_complete')
        if parent then
          redis.call('hincrby', key(parent), 'open', -1)
          Qless.Batches.check(now, parent)
        end
      end
      if state == 'settled' and not h[10] and completed == total and tonumber(h[7]) == 0 then
        redis.call('hset', B, 'succeeded', Qless.NOWS)
        Qless.Batches.fire(now, bid, 'on_success')
        if parent then
          redis.call('hincrby', key(parent), 'unsucceeded', -1)
          Qless.Batches.check(now, parent)
        end
      end
      if state == 'settled' then Qless.Batches.keep(bid) end
    end

  elseif name == 'keep' then
    -- keep(bid): a finished batch is kept as long as completed jobs are (the
    -- `jobs-history` option, a week by default) from its last change, then expires.
    return function(bid)
      local B = key(bid)
      local ttl = tonumber(redis.call('hget', Qless.P .. 'config', 'jobs-history')) or 604800
      ttl = math.max(1, math.floor(ttl))
      for _, k in ipairs({ B, B .. '-jobs', B .. '-done', B .. '-failed', B .. '-children' }) do
        redis.call('expire', k, ttl)
      end
    end

  elseif name == 'summary' then
    -- summary(bid) -> the JSON object a callback's data carries under "batch".
    return function(bid)
      local B = key(bid)
      local h = redis.call('hmget', B, 'total', 'completed', 'failed', 'canceled')
      local failed = redis.call('zrange', B .. '-failed', '0', '99')
      return '{"bid":' .. cjson.encode(bid) .. ',"total":' .. h[1] .. ',"completed":' .. h[2] ..
        ',"failed":' .. h[3] .. ',"canceled":' .. h[4] .. ',"failed_jids":' ..
        Qless.json_array(failed) .. '}'
    end

  elseif name == 'fire' then
    -- fire(now, bid, kind): puts the batch's `kind` callback, if it has one and it was
    -- not put before; its data gets "batch" (the summary) beside its own keys. Without
    -- a callback of that kind, the firing is still recorded (as true).
    return function(now, bid, kind)
      local B = key(bid)
      local h = redis.call('hmget', B, 'cb:' .. kind, 'fired:' .. kind)
      if h[2] then return end
      if not h[1] then
        redis.call('hset', B, 'fired:' .. kind, '')
        return
      end
      local spec = Qless.Batches.spec(h[1], 'Batch', kind)
      local data = string.gsub(spec.data, '^%s*{%s*', '', 1)
      local summary = Qless.Batches.summary(bid)
      if string.find(data, '^}') then
        data = '{"batch":' .. summary .. data
      else
        data = '{"batch":' .. summary .. ',' .. data
      end
      local tags = spec.tags
      if type(tags) ~= 'table' then tags = nil end
      Qless.Queue.put(now, '', spec.queue, spec.jid, spec.klass, data, spec.delay or 0,
        spec.priority, tags, spec.retries, nil)
      Qless.Partitions.added(spec.queue, spec.jid, nil, '')   -- (partitions.lua) under ''
      local jkey = Qless.P .. 'j:' .. spec.jid
      if type(spec.throttles) == 'table' and #spec.throttles > 0 then
        redis.call('hset', jkey, 'throttles', cjson.encode(spec.throttles))
      end
      if type(spec.backoff) == 'string' and spec.backoff ~= '' then
        redis.call('hset', jkey, 'backoff', spec.backoff)
      end
      redis.call('hset', B, 'fired:' .. kind, spec.jid)
      -- (qlessd's own event: on OWN log, beside the protocol's `log` events.)
      redis.call(Qless.PUBLISH, Qless.OWN .. 'log', '{"bid":' .. cjson.encode(bid) ..
        ',"event":"batch_fired","kind":"' .. kind .. '","jid":' .. cjson.encode(spec.jid) ..
        ',"queue":' .. cjson.encode(spec.queue) .. '}')
    end

  elseif name == 'get' then
    -- get(now, bid, offset, count) -> JSON {bid, description, created, state, parent,
    -- children, counts {total, waiting, running, scheduled, depends, completed, failed,
    -- canceled}, callbacks {kind: {state: pending|fired|none, jid}}, settled,
    -- succeeded, jobs: [{jid, state}] (the page), next (offset of the next page or
    -- null)}, or nil if there is no such batch.
    return function(now, bid, offset, count)
      local B = key(bid)
      local h = redis.call('hgetall', B)
      if #h == 0 then return nil end
      local r = {}
      for i = 1, #h, 2 do r[h[i]] = h[i + 1] end
      -- Where each job still to run stands, from its own hash.
      local counts = { waiting = 0, running = 0, scheduled = 0, depends = 0, stalled = 0 }
      local done = {}
      local d = redis.call('hgetall', B .. '-done')
      for i = 1, #d, 2 do done[d[i]] = d[i + 1] end
      local words = { c = 'complete', f = 'failed', x = 'canceled' }
      local function standing(jid)
        if done[jid] then return words[done[jid]] end
        local state = redis.call('hget', Qless.P .. 'j:' .. jid, 'state')
        return state or 'canceled'
      end
      local all = redis.call('zrange', B .. '-jobs', '0', '-1')
      for i = 1, #all do
        if not done[all[i]] then
          local state = standing(all[i])
          if counts[state] then counts[state] = counts[state] + 1 end
        end
      end
      local page = {}
      local last = math.min(#all, offset + count)
      for i = offset + 1, last do
        page[#page + 1] = { jid = all[i], state = standing(all[i]) }
      end
      local callbacks = {}
      for _, kind in ipairs(KINDS) do
        local fired = r['fired:' .. kind]
        if r['cb:' .. kind] then
          local spec = cjson.decode(r['cb:' .. kind])
          callbacks[kind] = { state = fired and 'fired' or 'pending', jid = spec.jid,
            queue = spec.queue }
        end
      end
      local children = redis.call('zrange', B .. '-children', '0', '-1')
      local out = {
        bid = bid, description = r.description or '', created = tonumber(r.created),
        state = r.state, parent = r.parent or false,
        counts = { total = tonumber(r.total), waiting = counts.waiting,
          running = counts.running + counts.stalled, scheduled = counts.scheduled,
          depends = counts.depends, completed = tonumber(r.completed),
          failed = tonumber(r.failed), canceled = tonumber(r.canceled) },
        callbacks = callbacks,
        settled = r.settled and tonumber(r.settled) or false,
        succeeded = r.succeeded and tonumber(r.succeeded) or false,
        next = last < #all and last or false,
      }
      -- (cjson writes an empty table as {}: the lists are spliced in as text.)
      local text = cjson.encode(out)
      return string.sub(text, 1, -2) .. ',"children":' .. Qless.json_array(children) ..
        ',"jobs":' .. (#page > 0 and cjson.encode(page) or '[]') .. '}'
    end

  elseif name == 'cancel' then
    -- cancel(now, bid) -> how many jobs were canceled, or nil if there is no such batch.
    -- Cancels the batch's jobs that have not started (waiting, scheduled, depending),
    -- and its child batches likewise; the batches are then finished, and no callback
    -- fires (jobs already running finish as they will).
    return function(now, bid)
      local B = key(bid)
      local state = redis.call('hget', B, 'state')
      if not state then return nil end
      local canceled = 0
      local children = redis.call('zrange', B .. '-children', '0', '-1')
      for i = 1, #children do
        canceled = canceled + (Qless.Batches.cancel(now, children[i]) or 0)
      end
      if state ~= 'canceled' then
        redis.call('hset', B, 'state', 'canceled', 'settled', Qless.NOWS)
        Qless.Batches.keep(bid)
        local parent = redis.call('hget', B, 'parent')
        if parent and state == 'open' then
          redis.call('hincrby', key(parent), 'open', -1)
          Qless.Batches.check(now, parent)
        end
      end
      local all = redis.call('zrange', B .. '-jobs', '0', '-1')
      local doomed = {}
      for i = 1, #all do
        local s = redis.call('hget', Qless.P .. 'j:' .. all[i], 'state')
        if s == 'waiting' or s == 'scheduled' or s == 'depends' then
          doomed[#doomed + 1] = all[i]
        end
      end
      if #doomed > 0 then Qless.Job.cancel(now, doomed) end
      return canceled + #doomed
    end
  end
end
