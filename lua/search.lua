-- search.lua: finding jobs by what they are (queue, state, class, tag, worker, failure
-- group, the time of their last history entry, their data, a text), and acting on every
-- job that matches, one bounded slice per call.
--
-- Redis keeps no index of jobs by class or data, and looking at every job would make a
-- search cost in proportion to everything stored. So a call walks one index the protocol
-- keeps anyway, the smallest the filter allows: a failure group's list (`f:<group>`), a
-- tag's set (`t:<tag>`), a queue's state sets (`q:<Q>-work`, `-scheduled`, `-depends`,
-- `-locks`), the completed set, a worker's jobs (`w:<W>:jobs`), or every failure group
-- in turn. It tests each job it meets against the whole filter, looks at no more than
-- `scan` entries, and says where it stopped (the cursor), so a call costs the same on a
-- Redis with ten million jobs as on an empty one. Nothing here writes a key of its own.
--
-- An index is one or more parts (a sorted set or a list each), walked in order: a
-- sorted set by rank (ascending; a queue's `-work` descending, in pop order), a failure
-- list from its tail (oldest failure first), so that the failures pushed at its head
-- meanwhile leave the positions alone. The cursor is a JSON array
--   [index, part, position, anchor, stop]
-- index: 'group', 'tag', 'worker', 'queue', 'failed' or 'complete' (one of those the
-- filter allows); part: the part's number, or for 'failed' the failure group's name
-- (groups come and go); position: the rank (sorted set) or the count from the tail
-- (list) where the walk goes on; anchor: the jid found there when the call ended, so a
-- call that finds it elsewhere (jobs before it left meanwhile) goes on from where it is
-- now; stop: the score (sorted set, as text) or position (list) of the part's last entry
-- when the walk first reached it. Jobs entering a part after that (a re-put gets new
-- tag scores and a new lock expiry, a new failure goes to the head of its list) are not
-- met: a walk sees each job once, and an action never meets the jobs it moved.

-- The methods of Qless.Search, made on first use (see base.lua).
function search_factory(name)
  if name == 'filter' then
    -- The filter (JSON object text) as a table, each field checked: queue, state,
    -- klass, tag, worker, group and text are non-empty strings, state one of the seven
    -- states, since and until finite numbers, data an object of dotted paths (its
    -- `paths`: { segments, wanted value } each). Raises QL_ARG naming the field.
    return function(text)
      local function bad(message)
        Qless.raise('QL_ARG', 'Search', 'Arg "filter" ' .. message)
      end
      local f = Qless.json_decode(text)
      if type(f) ~= 'table' then bad('is not a JSON object: ' .. tostring(text)) end
      local states = { waiting = true, running = true, scheduled = true, stalled = true,
        depends = true, failed = true, complete = true }
      for k, v in pairs(f) do
        if k == 'queue' or k == 'state' or k == 'klass' or k == 'tag' or k == 'worker' or
            k == 'group' or k == 'text' then
          if type(v) ~= 'string' or v == '' then bad('field "' .. k .. '" must be a non-empty string') end
        elseif k == 'since' or k == 'until' then
          if type(v) ~= 'number' or v ~= v or v == 1 / 0 or v == -1 / 0 then
            bad('field "' .. k .. '" must be a finite number')
          end
        elseif k == 'data' then
          if type(v) ~= 'table' then bad('field "data" must be an object') end
        else
          bad('has an unknown field "' .. tostring(k) .. '"')
        end
      end
      if f.state and not states[f.state] then bad('field "state" is not a state: ' .. f.state) end
      if f.data then
        local paths = {}
        for path, wanted in pairs(f.data) do
          if type(path) ~= 'string' then bad('field "data" must be an object') end
          local segments = {}
          for segment in string.gmatch(path .. '.', '([^.]*)%.') do
            if segment == '' then bad('field "data" has an empty path segment: ' .. path) end
            segments[#segments + 1] = segment
          end
          paths[#paths + 1] = { segments, wanted }
        end
        if #paths > 0 then f.paths = paths end
      end
      return f
    end

  elseif name == 'indexes' then
    -- The indexes filter f can be walked by, in the order preferred among equal sizes.
    return function(f)
      local out = {}
      if f.group then out[#out + 1] = 'group' end
      if f.tag then out[#out + 1] = 'tag' end
      if f.worker then out[#out + 1] = 'worker' end
      if f.state == 'failed' then
        out[#out + 1] = 'failed'
      elseif f.state == 'complete' then
        out[#out + 1] = 'complete'
      elseif f.queue then
        out[#out + 1] = 'queue'
      end
      return out
    end

  elseif name == 'parts' then
    -- The parts of index ix for filter f: { key, list (a failure list) or dir (1
    -- ascending, -1 descending), limit (a score the walk never passes), name (of a
    -- failure group) }. A queue's stalled jobs are its expired locks (scores up to now)
    -- and the jobs a timeout put at the head of its -work (score +inf).
    return function(now, f, ix)
      local P = Qless.P
      if ix == 'group' then return { { key = P .. 'f:' .. f.group, list = true, group = f.group } } end
      if ix == 'tag' then return { { key = P .. 't:' .. f.tag, dir = 1 } } end
      if ix == 'worker' then return { { key = P .. 'w:' .. f.worker .. ':jobs', dir = 1 } } end
      if ix == 'complete' then return { { key = P .. 'completed', dir = 1 } } end
      if ix == 'failed' then
        local groups = redis.call('smembers', P .. 'failures')
        table.sort(groups)
        local parts = {}
        for i = 1, #groups do
          parts[i] = { key = P .. 'f:' .. groups[i], list = true, name = groups[i], group = groups[i] }
        end
        return parts
      end
      local q = P .. 'q:' .. f.queue
      local work = { key = q .. '-work', dir = -1 }
      local scheduled = { key = q .. '-scheduled', dir = 1 }
      local depends = { key = q .. '-depends', dir = 1 }
      local locks = { key = q .. '-locks', dir = 1 }
      local state = f.state
      if state == 'waiting' then return { work } end
      if state == 'running' then return { locks } end
      if state == 'scheduled' then return { scheduled } end
      if state == 'depends' then return { depends } end
      if state == 'stalled' then
        locks.limit = now
        work.limit = 1 / 0
        return { locks, work }
      end
      -- (-work first: a job the action puts back into the queue goes there, and is not
      -- met again in a later part.)
      return { work, scheduled, depends, locks }
    end

  elseif name == 'size' then
    -- How many entries the parts hold.
    return function(parts)
      local n = 0
      for i = 1, #parts do
        local p = parts[i]
        n = n + redis.call(p.list and 'llen' or 'zcard', p.key)
      end
      return n
    end

  elseif name == 'start' then
    -- Where a call starts: { ix, i (part number), pos, anchor, stop } from the cursor
    -- text, or the start of the smallest index the filter allows; and the parts.
    return function(now, f, cursor)
      local allowed = Qless.Search.indexes(f)
      if cursor == nil or cursor == '' then
        local best, parts, size
        for k = 1, #allowed do
          local p = Qless.Search.parts(now, f, allowed[k])
          local n = Qless.Search.size(p)
          if not size or n < size then best, parts, size = allowed[k], p, n end
        end
        if not best then
          Qless.raise('QL_ARG', 'Search', 'The filter has no index to search: give a queue, ' ..
            'a tag, a worker, a group, or the state failed or complete')
        end
        return { ix = best, i = 1, pos = 0, anchor = false, stop = false }, parts
      end
      local function bad()
        Qless.raise('QL_ARG', 'Search', 'Arg "cursor" is not a cursor of this filter: ' .. cursor)
      end
      local c = Qless.json_decode(cursor)
      if type(c) ~= 'table' then bad() end
      local ix, part, pos, anchor, stop = c[1], c[2], c[3], c[4], c[5]
      local known = false
      for k = 1, #allowed do known = known or allowed[k] == ix end
      -- (A position beyond 2^53 is no rank Redis could answer, nor a whole Lua number.)
      if not known or type(pos) ~= 'number' or pos < 0 or pos % 1 ~= 0 or pos > 2 ^ 53 or
          (anchor ~= false and type(anchor) ~= 'string') then
        bad()
      end
      if stop ~= false then
        stop = type(stop) == 'string' and tonumber(stop)
        if not stop or stop ~= stop then bad() end
      end
      local parts = Qless.Search.parts(now, f, ix)
      local st = { ix = ix, pos = pos, anchor = anchor, stop = stop }
      if ix == 'failed' then
        -- The group named, or the first after it when it has no failure left.
        if type(part) ~= 'string' then bad() end
        local i = 1
        while parts[i] and parts[i].name < part do i = i + 1 end
        st.i = i
        if parts[i] and parts[i].name ~= part then
          st.pos, st.anchor, st.stop = 0, false, false
        end
      else
        if type(part) ~= 'number' or part < 1 or part > #parts or part % 1 ~= 0 then bad() end
        st.i = part
      end
      return st, parts
    end

  elseif name == 'cursor' then
    -- The cursor text of st, or 'null' once the walk is done.
    return function(st, parts)
      if st.done then return 'null' end
      local part = st.i
      if st.ix == 'failed' then part = parts[st.i].name end
      local stop = st.stop
      if stop then
        if stop == 1 / 0 then
          stop = 'inf'
        elseif stop == -1 / 0 then
          stop = '-inf'
        else
          stop = string.format('%.17g', stop)
        end
      end
      return cjson.encode({ st.ix, part, st.pos, st.anchor, stop })
    end

  elseif name == 'last_time' then
    -- The time of the job's last history entry (whole seconds), or nil when it has
    -- none. `field` is its hash field `history` (legacy or compact form), whose entries
    -- come after the list's.
    return function(jid, field)
      if field then
        local list = Qless.json_decode(field)
        local o = type(list) == 'table' and list[#list]
        if type(o) == 'table' then
          local t = o.done or o.failed or o.popped or o.put
          if type(t) == 'number' then return math.floor(t) end
        end
      end
      local e = redis.call('lindex', Qless.P .. 'j:' .. jid .. '-history', '-1')
      if not e then return nil end
      local when = string.match(e, '^%[(%-?[%d.]+),')
      if when then return tonumber(when) end
      local value = Qless.json_decode(e)
      if type(value) ~= 'table' then return nil end
      return tonumber(value[1] or value.when)
    end

  elseif name == 'matcher' then
    -- A function jid -> the job's fields when it matches filter f (walking index ix),
    -- else nil. Fields (HMGET): 1 jid, 2 state, 3 queue, 4 worker, 5 klass, 6 tags,
    -- 7 failure, 8 expires, 9 priority, then data when the filter reads it (`.data`),
    -- then history when it reads that; `.jid` is the jid. A job whose state is running
    -- and whose lock expired (at or before now) is `stalled`, as queue listings say.
    return function(now, f, ix)
      local P = Qless.P
      local fields = { 'jid', 'state', 'queue', 'worker', 'klass', 'tags', 'failure', 'expires',
        'priority' }
      local di, hi
      if f.text or f.paths then
        fields[#fields + 1] = 'data'
        di = #fields
      end
      if f.since or f['until'] then
        fields[#fields + 1] = 'history'
        hi = #fields
      end
      local decode = Qless.json_decode
      local find = string.find
      -- Whether JSON values a and b (as cjson decodes them) are equal.
      local function same(a, b)
        if a == b then return true end
        if type(a) ~= 'table' or type(b) ~= 'table' then return false end
        for k, v in pairs(a) do
          if not same(v, b[k]) then return false end
        end
        for k in pairs(b) do
          if a[k] == nil then return false end
        end
        return true
      end
      -- The value at a path of segments (an array takes 0-based indexes), or nil.
      local function at(value, segments)
        for i = 1, #segments do
          if type(value) ~= 'table' then return nil end
          local s = segments[i]
          local v = value[s]
          if v == nil and find(s, '^%d+$') then v = value[tonumber(s) + 1] end
          if v == nil then return nil end
          value = v
        end
        return value
      end
      local state, queue, klass, worker = f.state, f.queue, f.klass, f.worker
      local since, upto = f.since, f['until']
      local plain = f.text and not find(f.text, '[%c"\\/]')
      return function(jid)
        local g = redis.call('hmget', P .. 'j:' .. jid, unpack(fields))
        if not g[1] then return nil end
        if state then
          local s = g[2]
          if s == 'running' and (tonumber(g[8]) or 0) <= now then s = 'stalled' end
          if s ~= state then return nil end
        end
        if queue and g[3] ~= queue then return nil end
        if klass and g[5] ~= klass then return nil end
        if worker and g[4] ~= worker then return nil end
        local failure
        if f.group then
          if g[2] ~= 'failed' then return nil end
          -- (Every job in the group's list failed in it.)
          if ix ~= 'group' then
            failure = decode(g[7])
            if type(failure) ~= 'table' or failure.group ~= f.group then return nil end
          end
        end
        if f.tag and ix ~= 'tag' then
          local tags = Qless.stored_tags(g[6])
          local has = false
          for i = 1, #tags do has = has or tostring(tags[i]) == f.tag end
          if not has then return nil end
        end
        if hi then
          local t = Qless.Search.last_time(jid, g[hi])
          if not t or (since and t < since) or (upto and t > upto) then return nil end
        end
        if f.text and not find(g[di] or '', f.text, 1, true) then
          -- (The failure's JSON text holds its message as cjson wrote it: a text with
          -- nothing cjson escapes is in the message only if it is in that text, so most
          -- failures need no decoding.)
          if not g[7] or (plain and not find(g[7], f.text, 1, true)) then return nil end
          failure = failure or decode(g[7])
          local message = type(failure) == 'table' and failure.message
          if type(message) ~= 'string' or not find(message, f.text, 1, true) then return nil end
        end
        if f.paths then
          local data = decode(g[di])
          if data == nil then return nil end
          for i = 1, #f.paths do
            local p = f.paths[i]
            if not same(at(data, p[1]), p[2]) then return nil end
          end
        end
        g.jid = jid
        return g
      end
    end

  elseif name == 'walk' then
    -- walk(now, f, st, parts, limit, scan) -> found, examined. Walks from st (see
    -- start) until `limit` jobs matched, `scan` entries were looked at, or the index
    -- ended (then st.done); st is left where the next call goes on, its anchor the
    -- entry there. found holds the matching jobs' fields (see matcher).
    return function(now, f, st, parts, limit, scan)
      local found, examined = {}, 0
      local match = Qless.Search.matcher(now, f, st.ix)
      -- Entries fetched per call to Redis.
      local STEP = 100

      -- Walks a sorted set; true when it is done.
      local function sorted(p)
        local key, up = p.key, p.dir > 0
        local range = up and 'zrange' or 'zrevrange'
        if not st.stop then
          local e = redis.call(range, key, '-1', '-1', 'WITHSCORES')
          if not e[1] then return true end
          local last = tonumber(e[2])
          if p.limit and ((up and p.limit < last) or (not up and p.limit > last)) then
            last = p.limit
          end
          st.stop = last
        elseif st.anchor then
          local rank = redis.call(up and 'zrank' or 'zrevrank', key, st.anchor)
          if rank then st.pos = rank end
        end
        local stop = st.stop
        while true do
          local want = scan - examined
          if want <= 0 or #found >= limit then
            local e = redis.call(range, key, st.pos, st.pos, 'WITHSCORES')
            if not e[1] then return true end
            local s = tonumber(e[2])
            if (up and s > stop) or (not up and s < stop) then return true end
            st.anchor = e[1]
            return false
          end
          if want > STEP then want = STEP end
          local e = redis.call(range, key, st.pos, st.pos + want - 1, 'WITHSCORES')
          if not e[1] then return true end
          for k = 1, #e, 2 do
            local s = tonumber(e[k + 1])
            if (up and s > stop) or (not up and s < stop) then return true end
            examined = examined + 1
            st.pos = st.pos + 1
            local m = match(e[k])
            if m then
              found[#found + 1] = m
              if #found >= limit then break end
            end
          end
        end
      end

      -- Walks a list from its tail; true when it is done.
      local function list(p)
        local key = p.key
        if not st.stop then
          st.stop = redis.call('llen', key)
        elseif st.anchor and redis.call('lindex', key, -(st.pos + 1)) ~= st.anchor then
          -- Entries nearer the tail went meanwhile, so the anchor moved toward the
          -- tail: look for it among the `scan` entries before its old position.
          local low = st.pos - scan
          if low < 0 then low = 0 end
          local w = redis.call('lrange', key, -(st.pos + 1), -(low + 1))
          for k = 1, #w do
            if w[k] == st.anchor then
              st.pos = st.pos - (k - 1)
              st.stop = st.stop - (k - 1)
              break
            end
          end
        end
        while true do
          if st.pos >= st.stop then return true end
          local want = scan - examined
          if want <= 0 or #found >= limit then
            local a = redis.call('lindex', key, -(st.pos + 1))
            if not a then return true end
            st.anchor = a
            return false
          end
          if want > STEP then want = STEP end
          if want > st.stop - st.pos then want = st.stop - st.pos end
          local e = redis.call('lrange', key, -(st.pos + want), -(st.pos + 1))
          if not e[1] then return true end
          for k = #e, 1, -1 do
            examined = examined + 1
            local m = match(e[k])
            if m then
              -- (Where it is, for an action that takes it out of the list: see act.)
              m.list, m.at, m.group = key, st.pos, p.group
              found[#found + 1] = m
            end
            st.pos = st.pos + 1
            if #found >= limit then break end
          end
        end
      end

      while parts[st.i] do
        local p = parts[st.i]
        local done
        if p.list then done = list(p) else done = sorted(p) end
        if not done then return found, examined end
        st.i, st.pos, st.anchor, st.stop = st.i + 1, 0, false, false
      end
      st.done = true
      return found, examined
    end

  elseif name == 'find' then
    -- find(now, f, limit, scan, cursor) -> JSON {"jobs","cursor","examined","done"}: the
    -- matching jobs as `get.ext` shows them.
    return function(now, f, limit, scan, cursor)
      local st, parts = Qless.Search.start(now, f, cursor)
      local found, examined = Qless.Search.walk(now, f, st, parts, limit, scan)
      local jobs = {}
      for i = 1, #found do
        local job = Qless.Extra.job_json(found[i].jid)
        if job then jobs[#jobs + 1] = job end
      end
      return '{"jobs":[' .. table.concat(jobs, ',') .. '],"cursor":' ..
        Qless.Search.cursor(st, parts) .. ',"examined":' .. examined .. ',"done":' ..
        (st.done and 'true' or 'false') .. '}'
    end

  elseif name == 'act' then
    -- act(now, action, value, found, dry) -> how many of the found jobs it changed (or,
    -- dry, would change). Each job is changed only when the action applies to it:
    --   retry    failed, running, stalled or scheduled: back into its queue, waiting
    --   move     not in queue `value` already: into it (as a requeue: waiting, or
    --            depends while it has dependencies)
    --   unfail   failed: back into the queue it failed in
    --   cancel   not complete, and every job depending on it canceled with it
    --   priority not complete, priority not `value` already
    --   tag      lacks one of the tags `value` (a list): those are added
    --   untag    has one of the tags `value`: those are removed
    -- retry, move and unfail are requeues keeping everything of the job (klass, data,
    -- priority, tags, retries, dependencies), with a fresh retry budget.
    return function(now, action, value, found, dry)
      local P = Qless.P
      -- The jobs to change, in order, each with what to do (a queue, or tags).
      local todo, what = {}, {}
      if action == 'cancel' then
        -- A job others depend on goes only with all of them (cancel refuses otherwise):
        -- drop such jobs until the rest can go together.
        local keep, dependents, order = {}, {}, {}
        for i = 1, #found do
          local m = found[i]
          if m[2] ~= 'complete' and not keep[m.jid] then
            keep[m.jid] = true
            order[#order + 1] = m
            dependents[m.jid] = redis.call('smembers', P .. 'j:' .. m.jid .. '-dependents')
          end
        end
        local dropped = true
        while dropped do
          dropped = false
          for i = 1, #order do
            local jid = order[i].jid
            if keep[jid] then
              local d = dependents[jid]
              for k = 1, #d do
                if not keep[d[k]] then
                  keep[jid] = false
                  dropped = true
                  break
                end
              end
            end
          end
        end
        for i = 1, #order do
          if keep[order[i].jid] then todo[#todo + 1] = order[i] end
        end
      else
        for i = 1, #found do
          local m = found[i]
          local state, queue = m[2], m[3] or ''
          local change
          if action == 'move' then
            if queue ~= value then change = value end
          elseif action == 'retry' or action == 'unfail' then
            if queue ~= '' and (state == 'failed' or (action == 'retry' and
                (state == 'running' or state == 'stalled' or state == 'scheduled'))) then
              change = queue
            end
          elseif action == 'priority' then
            if state ~= 'complete' and tonumber(m[9]) ~= value then change = value end
          else
            local has, tags = {}, {}
            local current = Qless.stored_tags(m[6])
            for k = 1, #current do has[tostring(current[k])] = true end
            for k = 1, #value do
              if (action == 'tag') ~= (has[value[k]] == true) then tags[#tags + 1] = value[k] end
            end
            if #tags > 0 then change = tags end
          end
          if change ~= nil then
            todo[#todo + 1] = m
            what[#todo] = change
          end
        end
      end
      if dry or #todo == 0 then return #todo end

      -- A failed job leaves its failure list when it is requeued or canceled, by an LREM
      -- from the tail, which reads the list up to the job: deep in a list of a million
      -- failures, a few milliseconds a job. The walk knows where each job is, so the
      -- jobs leaving a list are first moved to its tail (their places marked, then
      -- their jids pushed, the first to go last, so each LREM finds its job at once);
      -- one LREM of the marks then reads the list once, to the deepest of them.
      local MARK = '{search:moved}'
      local moved = {}
      if action ~= 'priority' and action ~= 'tag' and action ~= 'untag' then
        for i = 1, #todo do
          local m = todo[i]
          local failure = m.list and m[2] == 'failed' and Qless.json_decode(m[7])
          if type(failure) == 'table' and failure.group == m.group then
            redis.call('lset', m.list, -(m.at + 1), MARK)
            m.moved = true
            if not moved[m.list] then
              moved[m.list] = { group = m.group, n = 0 }
              moved[#moved + 1] = m.list
            end
            moved[m.list].n = moved[m.list].n + 1
          end
        end
        for i = #todo, 1, -1 do
          if todo[i].moved then redis.call('rpush', todo[i].list, todo[i].jid) end
        end
      end

      if action == 'cancel' then
        local jids = {}
        for i = 1, #todo do jids[i] = todo[i].jid end
        Qless.Job.cancel(now, jids)
      else
        for i = 1, #todo do
          local jid, change = todo[i].jid, what[i]
          if action == 'priority' then
            Qless.Job.priority(now, jid, change)
          elseif action == 'tag' or action == 'untag' then
            Qless.Job.tag(now, action == 'tag' and 'add' or 'remove', jid, change)
          else
            local j = redis.call('hmget', P .. 'j:' .. jid, 'klass', 'data', 'partition')
            Qless.Queue.put(now, '', change, jid, j[1] or '', j[2] or '{}', 0)
            Qless.Partitions.put(change, jid, j[3])   -- (partitions.lua) it keeps its own
          end
        end
      end

      for i = 1, #moved do
        local key = moved[i]
        redis.call('lrem', key, -moved[key].n, MARK)
        -- (failure_forget found the marks still there: the group may be empty now.)
        if redis.call('llen', key) == 0 then
          redis.call('srem', P .. 'failures', moved[key].group)
        end
      end
      return #todo
    end

  elseif name == 'apply' then
    -- apply(now, action, value, f, limit, scan, dry, cursor) -> JSON {"matched",
    -- "changed","skipped","examined","cursor","done"}: walks as find does, then does
    -- the action to the jobs that matched (see act), in the same call, so a job is
    -- changed only if it matches when its slice runs. The walk then goes on from its
    -- anchor (a sorted set) or from its position less the entries the action took out
    -- of the list (a failure list), so the jobs after them are not skipped.
    return function(now, action, value, f, limit, scan, dry, cursor)
      local S = Qless.Search
      local st, parts = S.start(now, f, cursor)
      local found, examined = S.walk(now, f, st, parts, limit, scan)
      local p = parts[st.i]
      local before
      if p and p.list and not dry then before = redis.call('llen', p.key) end
      local changed = S.act(now, action, value, found, dry)
      if p and not dry then
        if p.list then
          local removed = before - redis.call('llen', p.key)
          st.pos = st.pos - removed
          st.stop = st.stop - removed
          if st.pos < 0 then st.pos = 0 end
        elseif st.anchor then
          local rank = redis.call(p.dir > 0 and 'zrank' or 'zrevrank', p.key, st.anchor)
          if rank then st.pos = rank end
        end
      end
      return '{"matched":' .. #found .. ',"changed":' .. changed .. ',"skipped":' ..
        (#found - changed) .. ',"examined":' .. examined .. ',"cursor":' ..
        S.cursor(st, parts) .. ',"done":' .. (st.done and 'true' or 'false') .. '}'
    end
  end
end
