-- workflow.lua: workflows, graphs of jobs (tasks) that wait for each other (the
-- /v1/workflows routes).
--
-- A workflow is built on the qless protocol's dependencies: a task waits for the
-- tasks in its `after` as a job waits for its `depends`, so a completion releases the
-- tasks after it through the ordinary release (Job.release), whoever completes it,
-- and stock clients see ordinary jobs. What the protocol leaves open is what a
-- parent's failure does to the tasks waiting for it; each task says so in its policy
-- (`on_parent_failure`), applied here in the call that fails or cancels the parent:
--   cancel   the task is canceled, and so on down the graph (the default);
--   fail     the task fails into the group `workflow-parent-failed`;
--   ignore   the task runs once its other parents are done, as if the failed one had
--            completed (until then, unfailing the failed parent puts things back as
--            they were: the task waits for it again);
--   continue the task runs at once.
--
-- Keys, under OWN: workflow:<W> (a hash: `name`, `created`, `count`), workflow:<W>-tasks
-- (task name -> JSON {jid, after (names), policy, queue}), workflow:<W>-jids (jid -> task
-- name), workflow:<W>-order (the jids in the order they were put: parents first) and
-- workflow:<W>-ended (jid -> `canceled`,
-- for tasks whose job is gone). A task's job carries the workflow's id in its hash's
-- `workflow` field and, once it is released, its parents' outcomes in `parents` (JSON
-- {name: {jid, state, result}}), which a pop hands to the worker.

-- The methods of Qless.Workflow, made on first use (see base.lua).
function workflow_factory(name)
  local function key(wid) return Qless.OWN .. 'workflow:' .. wid end

  if name == 'key' then
    return key

  elseif name == 'open' then
    -- open(now, wid, wname, tasks): records the workflow whose tasks (a list of
    -- {name, jid, after, policy, queue}, parents before children) were just put.
    return function(now, wid, wname, tasks)
      local W = key(wid)
      redis.call('hset', W, 'name', wname, 'created', Qless.NOWS, 'count', #tasks)
      local named, jids, order = {}, {}, {}
      for i = 1, #tasks do
        local t = tasks[i]
        named[#named + 1] = t.name
        named[#named + 1] = cjson.encode({ jid = t.jid, after = t.after, policy = t.policy,
          queue = t.queue })
        jids[#jids + 1] = t.jid
        jids[#jids + 1] = t.name
        order[i] = t.jid
        redis.call('hset', Qless.P .. 'j:' .. t.jid, 'workflow', wid)
      end
      if #tasks > 0 then
        Qless.batch('hset', W .. '-tasks', named, 1000)
        Qless.batch('hset', W .. '-jids', jids, 1000)
        Qless.batch('rpush', W .. '-order', order, 1000)
      end
      redis.call('zadd', Qless.OWN .. 'workflows', Qless.NOWS, wid)
    end

  elseif name == 'task' then
    -- task(wid, jid) -> the task (name, and its {jid, after, policy}) whose job is jid.
    return function(wid, jid)
      local W = key(wid)
      local tname = redis.call('hget', W .. '-jids', jid)
      if not tname then return nil end
      local text = redis.call('hget', W .. '-tasks', tname)
      if not text then return nil end
      local t = cjson.decode(text)
      t.name = tname
      return t
    end

  elseif name == 'parents' then
    -- parents(wid, t) -> JSON {name: {jid, state, result}} of task t's parents.
    return function(wid, t)
      local W = key(wid)
      local parts = {}
      local after = type(t.after) == 'table' and t.after or {}
      for i = 1, #after do
        local ptext = redis.call('hget', W .. '-tasks', after[i])
        local pjid = ptext and cjson.decode(ptext).jid or ''
        local f = redis.call('hmget', Qless.P .. 'j:' .. pjid, 'state', 'result')
        local state = f[1] or redis.call('hget', W .. '-ended', pjid) or 'complete'
        parts[#parts + 1] = cjson.encode(after[i]) .. ':{"jid":' .. cjson.encode(pjid) ..
          ',"state":' .. cjson.encode(state) .. ',"result":' .. (f[2] or 'null') .. '}'
      end
      return '{' .. table.concat(parts, ',') .. '}'
    end

  elseif name == 'released' then
    -- released(jid): the job's dependencies are all gone and it is about to run: if it
    -- is a workflow's task, its parents' outcomes go into its `parents` field.
    return function(jid)
      local wid = redis.call('hget', Qless.P .. 'j:' .. jid, 'workflow')
      if not wid then return end
      local t = Qless.Workflow.task(wid, jid)
      if t then
        redis.call('hset', Qless.P .. 'j:' .. jid, 'parents', Qless.Workflow.parents(wid, t))
      end
    end

  elseif name == 'release' then
    -- release(now, jid): task jid runs now (or when its delay is over), whatever its
    -- remaining dependencies: they are unlinked first.
    return function(now, jid)
      local dkey = Qless.P .. 'j:' .. jid
      local deps = redis.call('smembers', dkey .. '-dependencies')
      for i = 1, #deps do
        redis.call('srem', Qless.P .. 'j:' .. deps[i] .. '-dependents', jid)
      end
      redis.call('del', dkey .. '-dependencies')
      Qless.Job.unblock(now, jid)
    end

  elseif name == 'settled' then
    -- settled(jid) -> whether every dependency left to task jid has failed (then
    -- an `ignore` task need not wait any longer).
    return function(jid)
      local deps = redis.call('smembers', Qless.P .. 'j:' .. jid .. '-dependencies')
      for i = 1, #deps do
        if redis.call('hget', Qless.P .. 'j:' .. deps[i], 'state') ~= 'failed' then
          return false
        end
      end
      return true
    end

  elseif name == 'ended' then
    -- ended(now, wid, jid, how): task jid of workflow wid failed for good (how =
    -- 'failed') or was canceled ('canceled'): each task waiting for it is decided by
    -- its policy, and so on down the graph.
    return function(now, wid, jid, how)
      if how == 'canceled' then
        redis.call('hset', key(wid) .. '-ended', jid, 'canceled')
      end
      local children = redis.call('smembers', Qless.P .. 'j:' .. jid .. '-dependents')
      table.sort(children)
      for i = 1, #children do
        local c = children[i]
        local ckey = Qless.P .. 'j:' .. c
        local f = redis.call('hmget', ckey, 'state', 'workflow')
        local t = f[1] == 'depends' and f[2] == wid and Qless.Workflow.task(wid, c)
        if t then
          local policy = t.policy or 'cancel'
          if policy == 'continue' then
            Qless.Workflow.release(now, c)
          elseif policy == 'ignore' then
            -- A canceled parent never comes back: it is unlinked. A failed one stays
            -- linked (an unfail brings it back), and is waited for no longer once every
            -- parent left has failed.
            if how == 'canceled' then
              redis.call('srem', ckey .. '-dependencies', jid)
              redis.call('srem', Qless.P .. 'j:' .. jid .. '-dependents', c)
            end
            if Qless.Workflow.settled(c) then Qless.Workflow.release(now, c) end
          elseif policy == 'fail' then
            Qless.Workflow.fail(now, wid, c, jid, how)
          else
            -- The task's own children are decided first; it is then no one's parent.
            Qless.Workflow.ended(now, wid, c, 'canceled')
            local deps = redis.call('smembers', ckey .. '-dependencies')
            for k = 1, #deps do
              redis.call('srem', Qless.P .. 'j:' .. deps[k] .. '-dependents', c)
            end
            redis.call('del', ckey .. '-dependencies')
            -- Jobs of no workflow that wait for the task stop waiting for it, as for a
            -- completion (cancel would refuse to leave them waiting for nothing).
            local others = redis.call('smembers', ckey .. '-dependents')
            table.sort(others)
            for k = 1, #others do
              local okey = Qless.P .. 'j:' .. others[k]
              redis.call('srem', okey .. '-dependencies', c)
              if redis.call('scard', okey .. '-dependencies') == 0 then
                Qless.Job.unblock(now, others[k])
              end
            end
            redis.call('del', ckey .. '-dependents')
            Qless.Job.cancel(now, { c })
          end
        end
      end
    end

  elseif name == 'standing' then
    -- standing(wid, jid) -> the state of task jid: its job's, else `canceled` or
    -- `complete` (a completed job purged after jobs-history).
    return function(wid, jid)
      local state = redis.call('hget', Qless.P .. 'j:' .. jid, 'state')
      return state or redis.call('hget', key(wid) .. '-ended', jid) or 'complete'
    end

  elseif name == 'get' then
    -- get(wid) -> JSON {wid, name, created, tasks: [{name, jid, state, after, policy,
    -- queue}] in the graph's order}, or nil if there is no such workflow.
    return function(wid)
      local W = key(wid)
      local h = redis.call('hmget', W, 'name', 'created')
      if not h[2] then return nil end
      local order = redis.call('lrange', W .. '-order', '0', '-1')
      local tasks = {}
      for i = 1, #order do
        local jid = order[i]
        local tname = redis.call('hget', W .. '-jids', jid)
        local t = cjson.decode(redis.call('hget', W .. '-tasks', tname))
        -- (The queue it was put in: a completed job's own field is empty.)
        local queue = t.queue
        tasks[#tasks + 1] = '{"name":' .. cjson.encode(tname) .. ',"jid":' .. cjson.encode(jid) ..
          ',"state":' .. cjson.encode(Qless.Workflow.standing(wid, jid)) .. ',"after":' ..
          Qless.json_array(type(t.after) == 'table' and t.after or {}) .. ',"policy":' ..
          cjson.encode(t.policy or 'cancel') .. ',"queue":' .. cjson.encode(queue or '') .. '}'
      end
      return '{"wid":' .. cjson.encode(wid) .. ',"name":' .. cjson.encode(h[1] or '') ..
        ',"created":' .. h[2] .. ',"tasks":[' .. table.concat(tasks, ',') .. ']}'
    end

  elseif name == 'cancel' then
    -- cancel(now, wid) -> how many tasks were canceled, or nil if there is no such
    -- workflow: every task that has not started (waiting, scheduled, waiting for its
    -- parents); those running finish as they will.
    return function(now, wid)
      local W = key(wid)
      if redis.call('exists', W) == 0 then return nil end
      local order = redis.call('lrange', W .. '-order', '0', '-1')
      local doomed, listed = {}, {}
      for i = 1, #order do
        local s = redis.call('hget', Qless.P .. 'j:' .. order[i], 'state')
        if s == 'waiting' or s == 'scheduled' or s == 'depends' then
          doomed[#doomed + 1] = order[i]
          listed[order[i]] = true
        end
      end
      -- Jobs of no workflow waiting for a doomed task stop waiting for it.
      for i = 1, #doomed do
        local dkey = Qless.P .. 'j:' .. doomed[i]
        local others = redis.call('smembers', dkey .. '-dependents')
        table.sort(others)
        for k = 1, #others do
          if not listed[others[k]] then
            local okey = Qless.P .. 'j:' .. others[k]
            redis.call('srem', okey .. '-dependencies', doomed[i])
            redis.call('srem', dkey .. '-dependents', others[k])
            if redis.call('scard', okey .. '-dependencies') == 0 then
              Qless.Job.unblock(now, others[k])
            end
          end
        end
      end
      if #doomed > 0 then Qless.Job.cancel(now, doomed) end
      return #doomed
    end

  elseif name == 'fail' then
    -- fail(now, wid, jid, parent, how): task jid (waiting for its parents) fails
    -- into `workflow-parent-failed` because `parent` failed or was canceled; then its
    -- own children are decided.
    return function(now, wid, jid, parent, how)
      local jkey = Qless.P .. 'j:' .. jid
      local ptname = redis.call('hget', key(wid) .. '-jids', parent) or parent
      local message = 'parent task ' .. ptname .. ' (' .. parent .. ') ' ..
        (how == 'canceled' and 'was canceled' or 'failed')
      local deps = redis.call('smembers', jkey .. '-dependencies')
      for k = 1, #deps do
        redis.call('srem', Qless.P .. 'j:' .. deps[k] .. '-dependents', jid)
      end
      redis.call('del', jkey .. '-dependencies')
      Qless.Job.fail_waiting(now, jid, 'workflow-parent-failed', message)
    end
  end
end
