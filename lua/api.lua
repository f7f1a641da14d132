-- api.lua: one small function per command, then the dispatcher.
--
-- Call shape: EVALSHA <sha> <0|1> [ql:{ns}] <command> <now> <args...>. command(name)
-- returns the function of that command (made only for the command being run). It
-- receives `now` (a number) and the raw ARGV, whose own arguments start at ARGV[3];
-- it checks and converts every argument, in the order the spec lists the errors, and
-- hands typed values to the class files. Errors are raised with Qless.raise and leave
-- as "<CODE> <Command>(): <message>" (codes in lua/README.md).

-- The text of an error reply for what a command raised: the script's own errors and
-- Redis' errors keep their text (one line); anything else (a bug) is labelled ERR.
local function error_text(raised)
  if type(raised) == 'table' then raised = raised.err or tostring(raised) end
  raised = string.gsub(tostring(raised), '[\r\n]', ' ')
  if not string.find(raised, '^[A-Z][A-Z_]* ') then raised = 'ERR ' .. raised end
  return raised
end


-- The function of command `name`, or nil if there is no such command. Signatures in
-- the comments leave out `now`; lua/README.md has the full command table.
--
-- Checked before run: the commands a batch carries for the gateway's batch routes
-- (put and its forms, complete, heartbeat, fail, retry, log, cancel) also return
-- their argument checks and their run apart, as `handler, check, run`:
-- check(A) raises on a malformed argument, reads and writes nothing, and returns the
-- checked values; run(now, A, <those values>) does the rest (state checks, then the
-- writes), and handler(now, A) is run(now, A, check(A)). `batch` and `pop.after`
-- check every call before running any, so a malformed call anywhere in them writes
-- nothing at all (a state error still stops its own call only).
local function command(name)
  -- (The worker's commands come first: the dispatcher finds a command by walking
  -- this chain of comparisons.)
  if name == 'heartbeat' then
    -- heartbeat(jid, worker, [data], ['progress', json], ['exact']) -> the new expiry
    -- (integer). Extensions: `progress <json>` (after data, or in its place) is stored
    -- beside the job's data; `progress` itself is not JSON, so it cannot be mistaken
    -- for data. `exact` (last) answers the expiry as stored, fraction and all, as a
    -- string (Redis would truncate a Lua number); neither word is JSON.
    -- (Checks and run apart: see "Checked before run" above `command`.)
    local function check(A)
      local jid, worker, data = A[3], A[4], A[5]
      local last = #A
      local exact = last > 4 and A[last] == 'exact'
      if exact then
        last = last - 1
        if last == 4 then data = nil end
      end
      -- Qless.jid_arg, inline (building the method costs more than its body).
      if jid == nil or jid == '' then Qless.raise('QL_ARG', 'Job', 'no jid provided') end
      local suffix = string.byte(jid, -1)
      if suffix == 121 or suffix == 115 then Qless.jid_free(jid, 'Job') end
      -- Missing means absent: an empty worker is a name like any other, which the
      -- job's state and owner checks refuse with the texts clients match (a qless
      -- client heartbeats a job that is not running with an empty worker).
      if worker == nil then Qless.raise('QL_ARG', 'Heatbeat', 'Arg "worker" missing') end
      local progress
      if data == 'progress' or A[6] == 'progress' then
        if data == 'progress' then data = nil end
        progress = A[last]
        if Qless.json_decode(progress) == nil then
          Qless.raise('QL_ARG', 'Heartbeat', 'Arg "progress" not JSON: ' .. tostring(progress))
        end
      end
      if data ~= nil and Qless.json_decode(data) == nil then
        Qless.raise('QL_ARG', 'Heartbeat', 'Arg "data" not JSON: ' .. data)
      end
      return jid, worker, data, progress, exact
    end
    local function run(now, A, jid, worker, data, progress, exact)
      local expires, stored = Qless.Job.heartbeat(now, jid, worker, data)
      if progress then redis.call('hset', Qless.P .. 'j:' .. jid, 'progress', progress) end
      if exact then return stored end
      return expires
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'pop' then
    -- pop(queue, worker, count, [fields]) -> JSON array of the leased jobs. Extension: a
    -- fourth argument `fields` has them as Queue.pop's flat array of stored fields.
    return function(now, A)
      local queue, worker, count = A[3], A[4], 1
      if queue == nil or queue == '' then
        Qless.raise('QL_ARG', 'Queue', 'no queue name provided')
      end
      if worker == nil or worker == '' then Qless.raise('QL_ARG', 'Pop', 'Arg "worker" missing') end
      -- (A worker mostly asks for one job: no parse for that.)
      if A[5] ~= '1' then
        count = tonumber(A[5])
        if count == nil or count ~= count or count < 0 or count == 1 / 0 then
          Qless.raise('QL_ARG', 'Pop', 'Arg "count" missing or not a number: ' .. tostring(A[5]))
        end
        count = math.floor(count)
      end
      return Qless.Queue.pop(now, worker, count, { queue }, { count }, A[6] == 'fields')
    end

  elseif name == 'complete' then
    -- complete(jid, worker, queue, data, [next|delay|depends v]...) -> the new state.
    -- Extension: the option `keep-data 1` leaves the stored data as it is (`data` must
    -- still be JSON); other clients never send it, and unknown options are ignored.
    local function check(A)
      local jid, worker, queue, data = A[3], A[4], A[5], A[6]
      -- Qless.jid_arg, inline (building the method costs more than its body).
      if jid == nil or jid == '' then Qless.raise('QL_ARG', 'Job', 'no jid provided') end
      local suffix = string.byte(jid, -1)
      if suffix == 121 or suffix == 115 then Qless.jid_free(jid, 'Job') end
      -- (An empty worker is a value, refused by the state and owner checks: see heartbeat.)
      if worker == nil then Qless.raise('QL_ARG', 'Complete', 'Arg "worker" missing') end
      if queue == nil or queue == '' then
        Qless.raise('QL_ARG', 'Complete', 'Arg "queue" missing')
      end
      -- (Qless.json_decode, inline: building the method costs more than its body. The
      -- usual '{}', which the gateway sends with `keep-data`, needs no decoding.)
      if data ~= '{}' and (type(data) ~= 'string' or not pcall(cjson.decode, data)) then
        Qless.raise('QL_ARG', 'Complete', 'Arg "data" missing or not JSON: ' .. tostring(data))
      end
      local nextq, delay, depends, result = nil, 0, nil, nil
      if #A > 6 then
        local opts = {}
        for i = 7, #A, 2 do opts[A[i]] = A[i + 1] end
        nextq = opts['next']
        if opts['keep-data'] ~= nil then data = nil end
        -- Extension option `result`: the job's result, stored beside its data.
        if opts.result ~= nil then
          if Qless.json_decode(opts.result) == nil then
            Qless.raise('QL_ARG', 'Complete', 'Arg "result" not JSON: ' .. opts.result)
          end
          result = opts.result
        end
        if opts.delay ~= nil then
          delay = Qless.number_arg(opts.delay, 'Complete', 'Arg "delay" not a number: ')
        end
        if opts.depends ~= nil then
          depends = Qless.json_strings(opts.depends)
          if not depends then
            Qless.raise('QL_ARG', 'Complete', 'Arg "depends" not JSON: ' .. opts.depends)
          end
          -- (Checked again when linked; here too, so that a batch checks them first.)
          Qless.jids_free(depends, 'Complete')
        end
        if nextq == nil then
          if opts.delay ~= nil then
            Qless.raise('QL_ARG', 'Complete', '"delay" cannot be used without a "next".')
          elseif depends then
            Qless.raise('QL_ARG', 'Complete', '"depends" cannot be used without a "next".')
          end
        else
          Qless.queue_arg(nextq)
        end
      end
      return jid, worker, queue, data, nextq, delay, depends, result
    end
    local function run(now, A, jid, worker, queue, data, nextq, delay, depends, result)
      return Qless.Job.complete(now, jid, worker, queue, data, nextq, delay, depends, result)
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'batch' or name == 'batch.check' or name == 'pop.after' or
      name == 'batch.open' or name == 'batch.add' or name == 'workflow.open' then
    -- The two commands that run calls of other commands share these helpers, which
    -- are made only for them: a function the chunk made at its top level would cost
    -- every invocation.

    -- The calls of a `batch` (or `pop.after`) from A[i] on: (function, args) pairs,
    -- each args shaped like ARGV ({ command, now, arguments... }). The whole list is
    -- checked before anything runs, so a malformed list writes nothing: its shape, and
    -- the arguments of every call whose command checks them apart ("Checked before
    -- run" above `command`). Such a call's pair holds its run, and its args the checked
    -- values under `v`; the first malformed call refuses the whole list, with its own
    -- code and message after `Call <k> is malformed, no call ran: ` (a list of one
    -- call: its own error as it is). Calls are numbered from `first` (1 unless the
    -- list is one part of a longer one: see `batch.check`).
    local function batch_calls(A, i, who, first)
      -- (Room for one call: `pop.after` usually carries one.)
      local n, calls, handlers, checks, runs = #A, { nil, nil }, {}, {}, {}
      if n < i then Qless.raise('QL_ARG', who, 'At least one call is required') end
      while i <= n do
        local sub, argc = A[i], tonumber(A[i + 1])
        local handler = handlers[sub]
        if handler == nil and sub ~= 'batch' and sub ~= 'batch.check' then
          local check, run
          handler, check, run = command(sub)
          handlers[sub], checks[sub], runs[sub] = handler, check or false, run
        end
        local k = #calls / 2 + (first or 1)
        if not handler then
          Qless.raise('QL_ARG', who, 'Unknown command in call ' .. k .. ': ' .. tostring(sub))
        end
        if argc == nil or argc < 0 or argc % 1 ~= 0 or i + 1 + argc > n then
          Qless.raise('QL_ARG', who, 'Arg "argc" of call ' .. k ..
            ' is not the number of arguments that follow: ' .. tostring(A[i + 1]))
        end
        -- Built in one constructor, the table is sized once rather than grown key by
        -- key; unpack has a stack limit, so very long calls are copied one by one.
        local args
        if argc <= 1000 then
          args = { sub, A[2], unpack(A, i + 2, i + 1 + argc) }
        else
          args = { sub, A[2] }
          for j = 1, argc do args[j + 2] = A[i + 1 + j] end
        end
        local check = checks[sub]
        if check then
          local checked = Qless.pack(pcall(check, args))
          if not checked[1] then
            -- The only call of the list is refused as it would be alone.
            -- (Caught, a raised error is its text: raised again as a table, it gets no
            -- position in front.)
            local text = error_text(checked[2])
            if k == 1 and i + 2 + argc > n then error({ err = text }) end
            local code, rest = string.match(text, '^(%S+) user_script:1: (.*)$')
            if not code then code, rest = string.match(text, '^(%S+) (.*)$') end
            error({ err = code .. ' user_script:1: ' .. who .. '(): Call ' .. k ..
              ' is malformed, no call ran: ' .. rest })
          end
          args.v = checked
          handler = runs[sub]
        end
        calls[#calls + 1] = handler
        calls[#calls + 1] = args
        i = i + 2 + argc
      end
      return calls
    end

    -- Runs checked calls one by one, each on its own: a failing call writes nothing and
    -- the calls after it still run. Returns one reply per call (its own, nil as false, or
    -- its error reply) and whether any call failed. With `collect`, run and wait
    -- statistics are written once per (kind, queue) at the end (a stats call sees the
    -- ones before it): the numbers are those of the calls run one by one, folded in order.
    local function run_calls(now, calls, collect)
      -- (Room for one call's reply and the two pop.after adds: its usual three.)
      local replies, failed, any = { nil, nil, nil }, nil, false
      local flush
      if collect then
        failed = {}
        flush = function()
          for k, err in pairs(Qless.stats_flush(now)) do failed[k] = err end
        end
        Qless.stats_defer()
        Qless.SEEN = true
        Qless.seen()   -- (starts the memo empty)
      end
      for k = 1, #calls / 2 do
        local handler, args = calls[2 * k - 1], calls[2 * k]
        if collect then
          local sub = args[1]
          -- (A call that reads the statistics, or the per-minute counts drawn from
          -- them, sees those of the calls before it.)
          if sub == 'stats' or sub == 'rates' then
            flush()
            Qless.stats_defer()
          end
          Qless.stats_call(k)
          -- Only the worker's hot commands keep what the calls before them learnt.
          if sub ~= 'put' and sub ~= 'pop.after' and sub ~= 'complete' and sub ~= 'pop' and
              sub ~= 'heartbeat' then
            Qless.seen()
          end
        end
        local ok, result
        local v = args.v
        if v then
          -- A checked call: its run, with the values its check returned (after pcall's
          -- true).
          ok, result = pcall(handler, now, args, unpack(v, 2, v.n))
        else
          ok, result = pcall(handler, now, args)
        end
        if not ok then
          result = { err = error_text(result) }
          any = true
          -- (A call fails before its first write, but a write Redis refuses midway,
          -- out of memory say, may leave what the memo holds out of date.)
          if Qless.SEEN then Qless.seen() end
        elseif result == nil then
          result = false
        end
        replies[k] = result
      end
      if collect then
        Qless.SEEN = false
        flush()
        for k, err in pairs(failed) do
          replies[k] = { err = error_text(err) }
          any = true
        end
      end
      return replies, any
    end

    -- The puts of a batch.open, batch.add or workflow.open from A[i] on: every call a
    -- `put` of a new jid, no jid twice (nor among `taken`, jids already claimed by
    -- the call, which are checked the same way). Returns the checked calls and their
    -- jids; raises before anything is written.
    local function new_jobs(A, i, who, taken)
      local calls = { nil, nil }
      if i <= #A then calls = batch_calls(A, i, who) end
      local jids, seen = {}, {}
      for _, jid in ipairs(taken) do
        if seen[jid] then Qless.raise('QL_ARG', who, 'Jid ' .. jid .. ' is given twice') end
        seen[jid] = true
      end
      for k = 2, #calls, 2 do
        local args = calls[k]
        if args[1] ~= 'put' then
          Qless.raise('QL_ARG', who, 'Call ' .. (k / 2) .. ' must be put: ' .. args[1])
        end
        local jid = args[5]
        if seen[jid] then Qless.raise('QL_ARG', who, 'Jid ' .. jid .. ' is given twice') end
        seen[jid] = true
        jids[#jids + 1] = jid
      end
      for jid in pairs(seen) do
        if redis.call('exists', Qless.P .. 'j:' .. jid) == 1 then
          Qless.raise('QL_STATE', who, 'Job ' .. jid .. ' already exists')
        end
      end
      return calls, jids
    end

    -- Runs checked puts, in order, each writing (checks all passed before).
    local function run_puts(now, calls)
      for k = 1, #calls, 2 do
        local handler, args = calls[k], calls[k + 1]
        handler(now, args, unpack(args.v, 2, args.v.n))
      end
    end

    if name == 'batch.open' then
      -- Extension. batch.open(bid, meta, put calls as batch has them...) -> the jids.
      -- `meta` is JSON {description, parent, callbacks: {kind: spec}} (batches.lua).
      -- Every job and the batch record are written in this one call, or nothing.
      return function(now, A)
        local bid, meta = A[3], Qless.json_decode(A[4])
        if bid == nil or bid == '' then Qless.raise('QL_ARG', 'BatchOpen', 'Arg "bid" missing') end
        if type(meta) ~= 'table' then
          Qless.raise('QL_ARG', 'BatchOpen', 'Arg "meta" not a JSON object: ' .. tostring(A[4]))
        end
        if Qless.Batches.state(bid) then
          Qless.raise('QL_STATE', 'BatchOpen', 'Batch ' .. bid .. ' already exists')
        end
        local parent = meta.parent
        if type(parent) ~= 'string' then parent = nil end
        if parent then
          local pstate = Qless.Batches.state(parent)
          if not pstate then
            Qless.raise('QL_NOTFOUND', 'BatchOpen', 'Batch ' .. parent .. ' does not exist')
          elseif pstate ~= 'open' then
            Qless.raise('QL_STATE', 'BatchOpen', 'Batch ' .. parent .. ' is ' .. pstate)
          end
        end
        local specs, taken = {}, {}
        if type(meta.callbacks) == 'table' then
          for _, kind in ipairs({ 'on_success', 'on_complete', 'on_death' }) do
            local spec = meta.callbacks[kind]
            if spec ~= nil then
              local text = cjson.encode(spec)
              specs[kind] = text
              taken[#taken + 1] = Qless.Batches.spec(text, 'BatchOpen', kind).jid
            end
          end
        end
        local description = type(meta.description) == 'string' and meta.description or ''
        local calls, jids = new_jobs(A, 5, 'BatchOpen', taken)
        run_puts(now, calls)
        Qless.Batches.open(now, bid, description, parent, specs, jids)
        return jids
      end

    elseif name == 'batch.add' then
      -- Extension. batch.add(bid, put calls...) -> the jids: more jobs for a batch that
      -- has not finished (a job of it may add some while it runs).
      return function(now, A)
        local bid = A[3]
        if bid == nil or bid == '' then Qless.raise('QL_ARG', 'BatchAdd', 'Arg "bid" missing') end
        local state = Qless.Batches.state(bid)
        if not state then
          Qless.raise('QL_NOTFOUND', 'BatchAdd', 'Batch ' .. bid .. ' does not exist')
        elseif state ~= 'open' then
          Qless.raise('QL_STATE', 'BatchAdd', 'Batch ' .. bid .. ' is ' .. state)
        end
        if #A < 4 then Qless.raise('QL_ARG', 'BatchAdd', 'At least one job is required') end
        local calls, jids = new_jobs(A, 4, 'BatchAdd', {})
        run_puts(now, calls)
        Qless.Batches.add(now, bid, jids)
        return jids
      end

    elseif name == 'workflow.open' then
      -- Extension. workflow.open(wid, meta, put calls...) -> the jids, in order.
      -- `meta` is JSON {name, tasks: [{name, after: [names], policy}]}, one task per
      -- put, parents before children (which is what makes the graph acyclic: a task
      -- may only wait for tasks before it). Each put's depends are its parents' jids.
      return function(now, A)
        local wid, meta = A[3], Qless.json_decode(A[4])
        local who = 'WorkflowOpen'
        if wid == nil or wid == '' then Qless.raise('QL_ARG', who, 'Arg "wid" missing') end
        if type(meta) ~= 'table' or type(meta.tasks) ~= 'table' then
          Qless.raise('QL_ARG', who, 'Arg "meta" not a JSON object with tasks: ' ..
            tostring(A[4]))
        end
        if redis.call('exists', Qless.Workflow.key(wid)) == 1 then
          Qless.raise('QL_STATE', who, 'Workflow ' .. wid .. ' already exists')
        end
        local calls, jids = new_jobs(A, 5, who, {})
        local tasks, known = meta.tasks, {}
        if #tasks ~= #jids then
          Qless.raise('QL_ARG', who, #tasks .. ' tasks for ' .. #jids .. ' puts')
        end
        local policies = { cancel = true, fail = true, ignore = true, continue = true }
        for i = 1, #tasks do
          local t = tasks[i]
          if type(t) ~= 'table' or type(t.name) ~= 'string' or t.name == '' then
            Qless.raise('QL_ARG', who, 'Task ' .. i .. ' has no name')
          end
          if known[t.name] then Qless.raise('QL_ARG', who, 'Task ' .. t.name .. ' is given twice') end
          if type(t.after) ~= 'table' then t.after = {} end
          local wanted = {}
          for k = 1, #t.after do
            local pjid = known[t.after[k]]
            if not pjid then
              Qless.raise('QL_ARG', who, 'Task ' .. t.name .. ' waits for ' ..
                tostring(t.after[k]) .. ', which is not a task before it')
            end
            wanted[pjid] = true
          end
          t.policy = t.policy or 'cancel'
          if not policies[t.policy] then
            Qless.raise('QL_ARG', who, 'Task ' .. t.name .. ' has an unknown policy: ' ..
              tostring(t.policy))
          end
          -- Its put waits for exactly its parents.
          local depends = calls[2 * i].v[10] or {}
          local given = 0
          for k = 1, #depends do
            if not wanted[depends[k]] then
              Qless.raise('QL_ARG', who, 'Task ' .. t.name .. ' depends on ' .. depends[k] ..
                ', not one of its parents')
            end
            given = given + 1
          end
          local parents = 0
          for _ in pairs(wanted) do parents = parents + 1 end
          if given ~= parents then
            Qless.raise('QL_ARG', who, 'Task ' .. t.name .. ' must depend on its parents')
          end
          t.jid = jids[i]
          t.queue = calls[2 * i].v[2]
          known[t.name] = t.jid
        end
        run_puts(now, calls)
        local wname = type(meta.name) == 'string' and meta.name or ''
        Qless.Workflow.open(now, wid, wname, tasks)
        return jids
      end
    end

    if name == 'batch.check' then
      -- Extension. batch.check(first, command, argc, args..., [command, argc, args...]...)
      -- -> how many calls were checked. Checks the list exactly as `batch` does before
      -- it runs anything (same checks, same errors), and runs none of it: writes
      -- nothing. The gateway sends a request longer than one `batch` in several; it
      -- checks every part this way before sending the first `batch`, so a malformed
      -- call in any part writes nothing at all. `first` is the number of the list's
      -- first call in the whole request, which the error names as one `batch` of the
      -- whole request would.
      return function(now, A)
        local first = tonumber(A[3])
        if first == nil or first < 1 or first % 1 ~= 0 or first == 1 / 0 then
          Qless.raise('QL_ARG', 'Batch', 'Arg "first" must be a positive integer: ' ..
            tostring(A[3]))
        end
        return #batch_calls(A, 4, 'Batch', first) / 2
      end
    end

    if name == 'batch' then
      -- Extension. batch(command, argc, args..., [command, argc, args...]...) -> one
      -- reply per call, in order: the call's own reply (nil stays nil), or its error
      -- reply. The whole list is checked before anything runs, so a malformed batch
      -- writes nothing; then each call runs exactly as if it were called alone: a
      -- failing call writes nothing and the calls after it still run. One EVALSHA for
      -- many calls spares each call the fixed cost of a script invocation.
      return function(now, A)
        local calls = batch_calls(A, 3, 'Batch')
        local replies = run_calls(now, calls, true)
        return replies
      end
    end

    -- Extension. pop.after(count, command, argc, args..., [command, argc, args...]...)
    -- -> { reply of each call..., queue, the leased jobs as pop.multi answers them }: the calls
    -- (each `complete`, `fail` or `retry`, all ending jobs of one
    -- worker in one queue) run as in a batch, each on its own; then, only if every one
    -- of them succeeded, up to `count` jobs of the queue the first call's job ran in
    -- are leased to its worker, as `pop` would. `queue` is that queue (nil when the
    -- first call failed). A worker so ends a job and gets its next one in one call.
    return function(now, A)
      -- (A worker mostly asks for one job: no parse for that. `% 1` rather than
      -- math.floor: a C call costs ~1k instructions.)
      local count = 1
      if A[3] ~= '1' then
        count = tonumber(A[3])
        if count == nil or count < 0 or count % 1 ~= 0 or count == 1 / 0 then
          Qless.raise('QL_ARG', 'PopAfter', 'Arg "count" must be a non-negative integer: ' ..
            tostring(A[3]))
        end
      end
      local calls = batch_calls(A, 4, 'PopAfter')
      local first = calls[2]
      local sub, queue, worker = first[1], nil, nil
      local hot = true
      for k = 1, #calls, 2 do
        local name = calls[k + 1][1]
        if name ~= 'complete' then
          if name ~= 'fail' and name ~= 'retry' then
            Qless.raise('QL_ARG', 'PopAfter', 'Call ' .. ((k + 1) / 2) ..
              ' must be complete, fail or retry: ' .. name)
          end
          hot = false
        end
      end
      -- (fail and retry are not among the hot commands that keep the batch's memo.)
      if not hot and Qless.SEEN then Qless.seen() end
      if sub == 'retry' then
        worker = first[5]
      else
        worker = first[4]
      end
      if sub == 'complete' then
        queue = first[5]
      elseif first[3] then
        -- fail and retry do not name the queue the job ran in: read it first.
        queue = redis.call('hget', Qless.P .. 'j:' .. first[3], 'queue')
      end
      -- Inside a batch (group commit) the enclosing batch collects the statistics.
      local replies, failed = run_calls(now, calls, not Qless.STATS and #calls > 2)
      local n = #replies
      if failed or not queue or queue == '' then
        replies[n + 1] = false
        replies[n + 2] = {}
        return replies
      end
      replies[n + 1] = queue
      replies[n + 2] = Qless.Queue.pop(now, worker, count, { queue }, { count }, true)
      return replies
    end

  elseif name == 'put' or name == 'requeue' or name == 'put.ifabsent' then
    -- put(worker, queue, jid, klass, data, delay, [priority|tags|retries|depends v]...)
    -- -> jid. requeue: the same, but the job must exist. put.ifabsent (extension):
    -- the same, but a no-op answering nil when the job already exists.
    local function check(A)
      local queue = A[4]
      if queue == nil or queue == '' then
        Qless.raise('QL_ARG', 'Queue', 'no queue name provided')
      end
      local jid, klass, data = A[5], A[6], A[7]
      if jid == nil or jid == '' then Qless.raise('QL_ARG', 'Put', 'Arg "jid" missing') end
      local last = string.byte(jid, -1)
      if last == 121 or last == 115 then Qless.jid_free(jid, 'Put') end
      if klass == nil then Qless.raise('QL_ARG', 'Put', 'Arg "klass" missing') end
      if data == nil or not pcall(cjson.decode, data) then
        Qless.raise('QL_ARG', 'Put', 'Arg "data" missing or not JSON: ' .. tostring(data))
      end
      local delay = tonumber(A[8])
      if delay == nil or delay ~= delay then
        Qless.raise('QL_ARG', 'Put', 'Arg "delay" not a number: ' .. tostring(A[8]))
      end
      local n = #A
      if (n - 8) % 2 == 1 then
        Qless.raise('QL_ARG', 'Put', 'Odd number of additional args: ' .. (n - 8))
      end
      local priority, tags, retries, depends
      local throttles, backoff, traceparent   -- extension options (extra.lua, throttle.lua)
      local start_by, max_run                 -- (deadlines.lua)
      local partition                         -- (partitions.lua)
      if n > 8 then
        local opts = {}
        for i = 9, n, 2 do opts[A[i]] = A[i + 1] end
        local number_arg = Qless.number_arg
        if opts.retries ~= nil then
          retries = number_arg(opts.retries, 'Put', 'Arg "retries" not a number: ')
        end
        if opts.tags ~= nil then
          tags = Qless.json_strings(opts.tags)
          if not tags then Qless.raise('QL_ARG', 'Put', 'Arg "tags" not JSON' .. opts.tags) end
        end
        if opts.priority ~= nil then
          priority = number_arg(opts.priority, 'Put', 'Arg "priority" not a number')
        end
        if opts.depends ~= nil then
          depends = Qless.json_strings(opts.depends)
          if not depends then
            Qless.raise('QL_ARG', 'Put', 'Arg "depends" not JSON: ' .. opts.depends)
          end
          -- (Checked again when linked; here too, so that a batch checks them first.)
          Qless.jids_free(depends, 'Put')
        end
        if opts.throttles ~= nil then
          throttles = Qless.json_strings(opts.throttles)
          if not throttles then
            Qless.raise('QL_ARG', 'Put', 'Arg "throttles" not a JSON list: ' .. opts.throttles)
          end
        end
        if opts.traceparent ~= nil then
          traceparent = opts.traceparent
          if traceparent ~= '' and not Qless.Extra.traceparent_valid(traceparent) then
            Qless.raise('QL_ARG', 'Put', 'Arg "traceparent" not a version-00 traceparent: ' ..
              traceparent)
          end
        end
        if opts.backoff ~= nil then
          backoff = opts.backoff
          if backoff ~= '' and not Qless.Extra.backoff_parse(backoff) then
            Qless.raise('QL_ARG', 'Put', 'Arg "backoff" not a backoff policy: ' .. backoff)
          end
        end
        if opts['start-by'] ~= nil then
          start_by = Qless.Deadlines.option(opts['start-by'], 'Put', 'start-by')
        end
        if opts['max-run'] == '' then
          max_run = ''
        elseif opts['max-run'] ~= nil then
          max_run = Qless.Deadlines.option(opts['max-run'], 'Put', 'max-run', true)
        end
        partition = opts.partition
      end
      return queue, jid, klass, data, delay, priority, tags, retries, depends, throttles,
        backoff, traceparent, start_by, max_run, partition
    end
    local function run(now, A, queue, jid, klass, data, delay, priority, tags, retries,
                       depends, throttles, backoff, traceparent, start_by, max_run, partition)
      local n = #A
      if name == 'requeue' and not redis.call('hget', Qless.P .. 'j:' .. jid, 'jid') then
        Qless.raise('QL_NOTFOUND', 'Requeue', 'Job ' .. jid .. ' does not exist')
      end
      if name == 'requeue' then
        -- Extension: `keep-klass 1` / `keep-data 1` keep the job's own klass / data
        -- (the positional klass and data must still be given; they are ignored).
        for i = 9, n, 2 do
          if A[i] == 'keep-klass' then
            klass = redis.call('hget', Qless.P .. 'j:' .. jid, 'klass')
          end
          if A[i] == 'keep-data' then data = redis.call('hget', Qless.P .. 'j:' .. jid, 'data') end
        end
      end
      if name == 'put.ifabsent' and redis.call('hget', Qless.P .. 'j:' .. jid, 'jid') then
        return false
      end
      local result = Qless.Queue.put(now, A[3], queue, jid, klass, data, delay, priority, tags,
        retries, depends)
      -- Extension options: stored beside the job (an empty list / text removes them).
      if throttles then
        if #throttles > 0 then
          redis.call('hset', Qless.P .. 'j:' .. jid, 'throttles', cjson.encode(throttles))
        else
          redis.call('hdel', Qless.P .. 'j:' .. jid, 'throttles')
        end
      end
      if traceparent then
        if traceparent ~= '' then
          redis.call('hset', Qless.P .. 'j:' .. jid, 'traceparent', traceparent)
        else
          redis.call('hdel', Qless.P .. 'j:' .. jid, 'traceparent')
        end
      end
      if backoff then
        if backoff ~= '' then
          redis.call('hset', Qless.P .. 'j:' .. jid, 'backoff', backoff)
        else
          redis.call('hdel', Qless.P .. 'j:' .. jid, 'backoff')
        end
      end
      if start_by or max_run then Qless.Deadlines.put(queue, jid, start_by, max_run) end
      -- (partitions.lua) Filed under its partition, or under '' while the queue has any
      -- (its -pseq exists: one EXISTS for a put without a partition).
      if (partition and partition ~= '') or
          redis.call('exists', Qless.OWN .. 'q:' .. queue .. '-pseq') == 1 then
        Qless.Partitions.put(queue, jid, partition)
      end
      return result
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'put.idem' then
    -- Extension. put.idem(key, ttl, 'put'|'put.ifabsent', <the arguments of put>) ->
    -- { jid, 1 } when the put ran (or { jid, 0 } for put.ifabsent finding the job),
    -- { first jid, 0 } when idempotency key `key` was used for a put less than `ttl`
    -- seconds ago (nothing written then). The key then answers this jid for `ttl`.
    -- (The put's own arguments are checked as put checks them, before anything runs.)
    local function check(A)
      local ikey, ttl, mode = A[3], tonumber(A[4]), A[5]
      if ikey == nil or ikey == '' then
        Qless.raise('QL_ARG', 'PutIdem', 'Arg "key" missing')
      end
      if ttl == nil or ttl <= 0 or ttl == 1 / 0 then
        Qless.raise('QL_ARG', 'PutIdem', 'Arg "ttl" must be a positive number: ' ..
          tostring(A[4]))
      end
      if mode ~= 'put' and mode ~= 'put.ifabsent' then
        Qless.raise('QL_ARG', 'PutIdem', 'Arg "mode" must be "put" or "put.ifabsent"')
      end
      local _, put_check, put_run = command(mode)
      local args = { mode, A[2], unpack(A, 6) }
      return ikey, ttl, put_run, args, Qless.pack(put_check(args))
    end
    local function run(now, A, ikey, ttl, put_run, args, checked)
      local first = Qless.Extra.idempotent(now, ikey)
      if first then return { first, '0' } end
      local jid = put_run(now, args, unpack(checked, 1, checked.n))
      local created = '1'
      if not jid then
        jid = A[8]
        created = '0'
      end
      Qless.Extra.remember(now, ikey, jid, ttl)
      return { jid, created }
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'get.ext' then
    -- Extension. get.ext(jid) -> the job object of `get` plus its `progress`,
    -- `result` and `throttles` when it has them, or nil.
    return function(now, A)
      return Qless.Extra.job_json(Qless.jid_arg(A[3]))
    end

  elseif name == 'throttle.set' then
    -- Extension. throttle.set(name, maximum, rate_jobs, rate_seconds) -> 1. Each
    -- limit is a number >= 0 (0: none).
    return function(now, A)
      local tname = A[3]
      if tname == nil or tname == '' then
        Qless.raise('QL_ARG', 'Throttle', 'Arg "name" missing')
      end
      local values = {}
      for i = 4, 6 do
        local v = tonumber(A[i])
        if v == nil or v ~= v or v < 0 or v == 1 / 0 then
          Qless.raise('QL_ARG', 'Throttle', 'Limits must be numbers >= 0: ' .. tostring(A[i]))
        end
        values[#values + 1] = v
      end
      return Qless.Throttle.set(now, tname, values[1], values[2], values[3])
    end

  elseif name == 'throttle.get' or name == 'throttle.delete' then
    -- Extension. throttle.get(name) -> JSON or nil; throttle.delete(name) -> 1|0.
    return function(now, A)
      local tname = A[3]
      if tname == nil or tname == '' then
        Qless.raise('QL_ARG', 'Throttle', 'Arg "name" missing')
      end
      if name == 'throttle.get' then return Qless.Throttle.get(now, tname) end
      return Qless.Throttle.delete(now, tname)
    end

  elseif name == 'throttle.list' then
    -- Extension. throttle.list(offset, count) -> JSON array of throttle.get's objects
    -- for the throttles with limits (OWN throttles), by name
    return function(now, A)
      local offset = Qless.count_arg(A[3], 0, 'Throttle', 'Arg "offset" not a number: ', 0)
      local count = Qless.count_arg(A[4], 25, 'Throttle', 'Arg "count" not a number: ', 0)
      local names = redis.call('smembers', Qless.OWN .. 'throttles')
      table.sort(names)
      local out = {}
      for i = offset + 1, math.min(offset + count, #names) do
        out[#out + 1] = Qless.Throttle.get(now, names[i])
      end
      if #out == 0 then return '{}' end
      return '[' .. table.concat(out, ',') .. ']'
    end

  elseif name == 'get' then
    -- get(jid) -> job JSON, or nil
    return function(now, A)
      return Qless.job_json(Qless.jid_arg(A[3]))
    end

  elseif name == 'multiget' then
    -- multiget(jid...) -> JSON array of the jobs that exist ('{}' if none)
    return function(now, A)
      return Qless.jobs_json(Qless.jids_free(Qless.rest(A, 3), 'Multiget'))
    end

  elseif name == 'peek' then
    -- peek(queue, count) -> JSON array of the next jobs
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local count = Qless.count_arg(A[4] or 'nil', nil, 'Peek',
        'Arg "count" missing or not a number: ', 0)
      return Qless.Queue.peek(now, queue, count)
    end

  elseif name == 'fail' then
    -- fail(jid, worker, group, message, [data]) -> jid
    local function check(A)
      local jid, worker, group, message, data = Qless.jid_arg(A[3]), A[4], A[5], A[6], A[7]
      -- (An empty worker is a value, refused by the state and owner checks: see heartbeat.)
      if worker == nil then Qless.raise('QL_ARG', 'Fail', 'Arg "worker" missing') end
      if group == nil then Qless.raise('QL_ARG', 'Fail', 'Arg "group" missing') end
      if message == nil then Qless.raise('QL_ARG', 'Fail', 'Arg "message" missing') end
      if data ~= nil and Qless.json_decode(data) == nil then
        Qless.raise('QL_ARG', 'Fail', 'Arg "data" not JSON: ' .. data)
      end
      return jid, worker, group, message, data
    end
    local function run(now, A, jid, worker, group, message, data)
      return Qless.Job.fail(now, jid, worker, group, message, data)
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'retry' then
    -- retry(jid, queue, worker, [delay=0], [group], [message]) -> remaining (integer)
    local function check(A)
      local jid, queue, worker = Qless.jid_arg(A[3]), A[4], A[5]
      if queue == nil or queue == '' then Qless.raise('QL_ARG', 'Retry', 'Arg "queue" missing') end
      -- (An empty worker is a value, refused by the state and owner checks: see heartbeat.)
      if worker == nil then Qless.raise('QL_ARG', 'Retry', 'Arg "worker" missing') end
      local delay = 0
      if A[6] ~= nil and A[6] ~= 'backoff' then
        delay = Qless.number_arg(A[6], 'Retry', 'Arg "delay" not a number: ')
      end
      return jid, queue, worker, delay
    end
    local function run(now, A, jid, queue, worker, delay)
      if A[6] == 'backoff' then
        -- Extension: the delay is the job's backoff for this attempt (0 without one).
        delay = Qless.Extra.backoff_delay(jid, queue, 1)
      end
      return Qless.Job.retry(now, jid, queue, worker, delay, A[7], A[8])
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'cancel' then
    -- cancel(jid...) -> array of the jids as given
    local function check(A)
      return Qless.jids_free(Qless.rest(A, 3), 'Cancel')
    end
    local function run(now, A, jids)
      return Qless.Job.cancel(now, jids)
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'timeout' then
    -- timeout(jid...) -> nil
    return function(now, A)
      return Qless.Job.timeout(now, Qless.jids_free(Qless.rest(A, 3), 'Timeout'))
    end

  elseif name == 'depends' then
    -- depends(jid, 'on', jid...) | depends(jid, 'off', 'all' | jid...) -> 1
    return function(now, A)
      local jid, command = Qless.jid_arg(A[3]), A[4]
      if command == nil then Qless.raise('QL_ARG', 'Depends', 'Arg "command" missing') end
      return Qless.Job.depends(now, jid, command, Qless.rest(A, 5))
    end

  elseif name == 'priority' then
    -- priority(jid, priority) -> the priority (integer)
    return function(now, A)
      local jid = Qless.jid_arg(A[3])
      local priority = Qless.number_arg(A[4], 'Priority',
        'Arg "priority" missing or not a number: ')
      return Qless.Job.priority(now, jid, priority)
    end

  elseif name == 'log' then
    -- log(jid, message, [data]) -> nil
    local function check(A)
      local jid, message, data = A[3], A[4], A[5]
      if jid == nil or jid == '' then Qless.raise('QL_ARG', 'Log', "Argument 'jid' missing") end
      Qless.jid_free(jid, 'Log')
      if message == nil then Qless.raise('QL_ARG', 'Log', "Argument 'message' missing") end
      if data ~= nil and Qless.json_decode(data) == nil then
        Qless.raise('QL_ARG', 'Log', "Argument 'data' not cjson: " .. data)
      end
      return jid, message, data
    end
    local function run(now, A, jid, message, data)
      return Qless.Job.log(now, jid, message, data)
    end
    return function(now, A) return run(now, A, check(A)) end, check, run

  elseif name == 'queues' then
    -- queues([queue]) -> one counts object, or an array of them ('{}' if none)
    return function(now, A)
      return Qless.Queue.queues(now, A[3])
    end

  elseif name == 'queues.ext' then
    -- Extension. queues.ext([queue]) -> as queues, each counts object with `throttled`:
    -- the queue's jobs waiting for room in a throttle (OWN q:<Q>-throttled)
    return function(now, A)
      local function counts(queue)
        local text = Qless.Queue.counts(now, queue)
        return text:sub(1, -2) .. ',"throttled":' ..
          redis.call('zcard', Qless.OWN .. 'q:' .. queue .. '-throttled') .. '}'
      end
      if A[3] then return counts(A[3]) end
      local names = redis.call('zrange', Qless.P .. 'queues', '0', '-1')
      if #names == 0 then return '{}' end
      local out = {}
      for i = 1, #names do out[i] = counts(names[i]) end
      return '[' .. table.concat(out, ',') .. ']'
    end

  elseif name == 'queues.oldest' then
    -- Extension. queues.oldest() -> JSON object: queue -> when its job next in line
    -- was put (seconds, as text), for the queues with a waiting job.
    return function(now, A)
      return Qless.Extra.oldest_waiting()
    end

  elseif name == 'length' then
    -- length(queue) -> integer
    return function(now, A)
      return Qless.Queue.length(Qless.queue_arg(A[3]))
    end

  elseif name == 'jobs' then
    -- jobs('complete', [offset=0], [count=25]) | jobs(state, queue, [offset], [count])
    -- -> array of jids
    return function(now, A)
      local state = A[3]
      if state == nil then Qless.raise('QL_ARG', 'Jobs', 'Arg "state" missing') end
      local queue, i = nil, 4
      if state ~= 'complete' then
        queue = A[4]
        if queue == nil then Qless.raise('QL_ARG', 'Jobs', 'Arg "queue" missing') end
        i = 5
      end
      local offset = Qless.count_arg(A[i], 0, 'Jobs', 'Arg "offset" not a number: ')
      local count = Qless.count_arg(A[i + 1], 25, 'Jobs', 'Arg "count" not a number: ')
      return Qless.Queue.jobs(now, state, queue, offset, count)
    end

  elseif name == 'pause' or name == 'unpause' then
    -- pause(queue...) / unpause(queue...) -> nil
    return function(now, A)
      local names = Qless.rest(A, 3)
      if #names == 0 then
        Qless.raise('QL_ARG', name == 'pause' and 'Pause' or 'Unpause', 'Arg "queue" missing')
      end
      local changed = Qless.batch(name == 'pause' and 'sadd' or 'srem', Qless.P .. 'paused_queues',
        names)
      -- An unpaused queue's waiting jobs can be popped again.
      if name == 'unpause' and changed > 0 then
        for i = 1, #names do Qless.available_all(names[i]) end
      end
      return nil
    end

  elseif name == 'queue.forget' then
    -- queue.forget(queue...) -> nil
    return function(now, A)
      local names = Qless.rest(A, 3)
      if #names == 0 then Qless.raise('QL_ARG', 'Forget', 'Arg "queue" missing') end
      Qless.batch('zrem', Qless.P .. 'queues', names)
      Qless.batch('zrem', Qless.OWN .. 'due', names)   -- sweep skips forgotten queues
      return nil
    end

  elseif name == 'failed' then
    -- failed([group], [start=0], [limit=25]) -> JSON
    return function(now, A)
      local start = Qless.count_arg(A[4], 0, 'Failed', 'Arg "start" is not a number: ')
      local limit = Qless.count_arg(A[5], 25, 'Failed', 'Arg "limit" is not a number: ')
      return Qless.Queue.failed(A[3], start, limit)
    end

  elseif name == 'unfail' then
    -- unfail(queue, group, [count=25]) -> how many moved
    return function(now, A)
      local queue, group = Qless.queue_arg(A[3]), A[4]
      if group == nil then Qless.raise('QL_ARG', 'Unfail', 'Arg "group" missing') end
      local count = Qless.count_arg(A[5], 25, 'Unfail', 'Arg "count" not a number: ')
      return Qless.Queue.unfail(now, queue, group, count)
    end

  elseif name == 'stats' then
    -- stats(queue, date) -> JSON
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local date = Qless.number_arg(A[4], 'Stats', 'Arg "date" missing or not a number: ')
      return Qless.Queue.stats(queue, date)
    end

  elseif name == 'tag' then
    -- tag('add'|'remove', jid, tag...) -> JSON array of the job's tags
    -- tag('get', tag, [offset=0], [count=25]) -> {"total":n,"jobs":[...]}
    -- tag('top', [offset=0], [count=25]) -> JSON array of tags used at least twice
    return function(now, A)
      local count_arg = Qless.count_arg
      local command = A[3]
      if command == 'add' or command == 'remove' then
        local jid = A[4]
        if jid == nil then Qless.raise('QL_ARG', 'Tag', 'Arg "jid" missing') end
        Qless.jid_free(jid, 'Tag')
        return Qless.Job.tag(now, command, jid, Qless.rest(A, 5))
      elseif command == 'get' then
        local tag = A[4]
        if tag == nil then Qless.raise('QL_ARG', 'Tag', 'Arg "tag" missing') end
        local offset = count_arg(A[5], 0, 'Tag', 'Arg "offset" not a number: ')
        local count = count_arg(A[6], 25, 'Tag', 'Arg "count" not a number: ')
        local key = Qless.P .. 't:' .. tag
        return '{"total":' .. redis.call('zcard', key) .. ',"jobs":' ..
          Qless.json_list(redis.call('zrange', key, offset, offset + count - 1)) .. '}'
      elseif command == 'top' then
        local offset = count_arg(A[4], 0, 'Tag', 'Arg "offset" not a number: ')
        local count = count_arg(A[5], 25, 'Tag', 'Arg "count" not a number: ')
        return Qless.json_list(redis.call('zrevrangebyscore', Qless.P .. 'tags', '+inf', 2,
          'LIMIT', offset, count))
      elseif command == nil then
        Qless.raise('QL_ARG', 'Tag', 'Arg "command" must be "add", "remove", "get" or "top"')
      end
      Qless.raise('QL_ARG', 'Tag', 'First argument must be "add", "remove" or "get"')
    end

  elseif name == 'track' then
    -- track() -> {"jobs":[...],"expired":[...]} | track('track'|'untrack', jid) -> 1/0
    return function(now, A)
      local command, jid = A[3], A[4]
      if command ~= nil and jid == nil then Qless.raise('QL_ARG', 'Track', 'Arg "jid" missing') end
      if jid ~= nil then Qless.jid_free(jid, 'Track') end
      return Qless.Job.track(now, command, jid)
    end

  elseif name == 'workers' then
    -- workers([worker]) -> JSON
    return function(now, A)
      return Qless.Worker.list(now, A[3])
    end

  elseif name == 'worker.deregister' then
    -- worker.deregister(worker...) -> nil
    return function(now, A)
      local names = Qless.rest(A, 3)
      if #names == 0 then Qless.raise('QL_ARG', 'Deregister', 'Arg "worker" missing') end
      return Qless.Worker.forget(names)
    end

  elseif name == 'recur' then
    -- recur(queue, jid, klass, data, 'interval', interval, offset,
    --       [tags|priority|retries|backlog|start-within|max-run v]...) -> jid
    -- recur(queue, jid, klass, data, 'cron', expression, timezone,
    --       ticks <JSON array>, [tags|priority|retries|backlog v]...) -> jid (extension)
    -- (start-within and max-run, deadlines of the children, and partition are
    -- extensions too.)
    return function(now, A)
      local number_arg = Qless.number_arg
      local queue = Qless.queue_arg(A[3])
      local jid, klass, data, spec = A[4], A[5], A[6], A[7]
      if jid == nil or jid == '' then
        Qless.raise('QL_ARG', 'RecurringJob On', 'Arg "jid" missing')
      end
      if klass == nil then Qless.raise('QL_ARG', 'RecurringJob On', 'Arg "klass" missing') end
      if spec == nil then Qless.raise('QL_ARG', 'RecurringJob On', 'Arg "spec" missing') end
      if Qless.json_decode(data) == nil then
        Qless.raise('QL_ARG', 'RecurringJob On', 'Arg "data" not JSON: ' .. tostring(data))
      end
      local interval, offset
      if spec == 'interval' then
        interval = number_arg(A[8], 'Recur', 'Arg "interval" not a number: ')
        offset = number_arg(A[9], 'Recur', 'Arg "offset" not a number: ')
        if interval <= 0 then
          Qless.raise('QL_ARG', 'Recur', 'Arg "interval" must be greater than 0')
        end
      elseif spec == 'cron' then
        -- The gateway parsed the expression and computed its ticks (lua/README.md).
        if A[8] == nil or A[8] == '' then Qless.raise('QL_ARG', 'Recur', 'Arg "cron" missing') end
        if A[9] == nil or A[9] == '' then
          Qless.raise('QL_ARG', 'Recur', 'Arg "timezone" missing')
        end
      else
        Qless.raise('QL_ARG', 'Recur', 'schedule type "' .. spec .. '" unknown')
      end
      local n = #A
      if (n - 9) % 2 == 1 then
        Qless.raise('QL_ARG', 'Recur', 'Odd number of additional args: ' .. (n - 9))
      end
      local opts = {}
      for i = 10, n, 2 do opts[A[i]] = A[i + 1] end
      local tags = {}
      if opts.tags ~= nil then
        tags = Qless.json_strings(opts.tags)
        if not tags then
          Qless.raise('QL_ARG', 'Recur', 'Arg "tags" must be JSON string array: ' .. opts.tags)
        end
      end
      local priority, retries, backlog = 0, 0, 0
      if opts.priority ~= nil then
        priority = number_arg(opts.priority, 'Recur', 'Arg "priority" not a number: ')
      end
      if opts.retries ~= nil then
        retries = number_arg(opts.retries, 'Recur', 'Arg "retries" not a number: ')
      end
      if opts.backlog ~= nil then
        backlog = number_arg(opts.backlog, 'Recur', 'Arg "backlog" not a number: ')
      end
      -- (deadlines.lua) Each child's start_by (its spawn time + start-within), max_run.
      local within, max_run
      if opts['start-within'] ~= nil then
        within = Qless.Deadlines.option(opts['start-within'], 'Recur', 'start-within')
      end
      if opts['max-run'] ~= nil then
        max_run = Qless.Deadlines.option(opts['max-run'], 'Recur', 'max-run', true)
      end
      local partition = opts.partition   -- (partitions.lua) each child's
      local cron
      if spec == 'cron' then
        if opts.ticks == nil then Qless.raise('QL_ARG', 'Recur', 'Arg "ticks" missing') end
        local ticks = Qless.Recurring.ticks_arg(opts.ticks)
        cron = { expr = A[8], zone = A[9], ticks = ticks }
        interval, offset = tonumber(Qless.Recurring.period(ticks, 86400)), 0
      end
      return Qless.Recurring.on(now, queue, jid, klass, data, interval, offset, priority,
        tags, retries, backlog, cron, within, max_run, partition)
    end

  elseif name == 'recur.cron.due' then
    -- recur.cron.due(limit) -> [jid, cron, timezone, stored, last, ...] (extension)
    return function(now, A)
      local limit = Qless.number_arg(A[3], 'Recur', 'Arg "limit" not a number: ')
      return Qless.Recurring.cron_due(math.max(math.floor(limit), 1))
    end

  elseif name == 'recur.cron.extend' then
    -- recur.cron.extend(jid, cron, timezone, ticks) -> 1, or 0 if the schedule changed
    return function(now, A)
      local jid = Qless.jid_arg(A[3], 'Recurring')
      if A[4] == nil or A[5] == nil then
        Qless.raise('QL_ARG', 'Recur', 'Args "cron" and "timezone" missing')
      end
      return Qless.Recurring.cron_extend(now, jid, A[4], A[5], Qless.Recurring.ticks_arg(A[6]))
    end

  elseif name == 'recur.get' then
    -- recur.get(jid) -> JSON, or nil
    return function(now, A)
      return Qless.Recurring.get(Qless.jid_arg(A[3], 'Recurring'))
    end

  elseif name == 'recur.get.ext' then
    -- Extension. recur.get.ext(jid) -> recur.get's JSON plus `next` (and `cron`,
    -- `timezone` for a cron template), or nil
    return function(now, A)
      return Qless.Recurring.get(Qless.jid_arg(A[3], 'Recurring'), true)
    end

  elseif name == 'recur.update' then
    -- recur.update(jid, [priority|retries|interval|data|klass|queue|backlog|cron|
    --   timezone|ticks|start-within|max-run|partition v]...) -> 1
    return function(now, A)
      return Qless.Recurring.update(now, Qless.jid_arg(A[3], 'Recurring'), Qless.rest(A, 4))
    end

  elseif name == 'recur.tag' or name == 'recur.untag' then
    -- recur.tag(jid, tag...) / recur.untag(jid, tag...) -> JSON array of the tags
    return function(now, A)
      return Qless.Recurring.tags(Qless.jid_arg(A[3], 'Recurring'), Qless.rest(A, 4),
        name == 'recur.tag')
    end

  elseif name == 'unrecur' then
    -- unrecur(jid) -> 1
    return function(now, A)
      return Qless.Recurring.off(Qless.jid_arg(A[3], 'Recurring'))
    end

  elseif name == 'config.get' then
    -- config.get([option]) -> the value, or the JSON map of all options
    return function(now, A)
      return Qless.Config.get(A[3])
    end

  elseif name == 'config.set' then
    -- config.set(option, value) -> nil
    return function(now, A)
      local option, value = A[3], A[4]
      if option == nil then Qless.raise('QL_ARG', 'config.set', 'Arg "option" missing') end
      if value == nil then Qless.raise('QL_ARG', 'config.set', 'Arg "value" missing') end
      Qless.Config.set(option, value)
      return nil
    end

  elseif name == 'config.unset' then
    -- config.unset(option) -> nil
    return function(now, A)
      local option = A[3]
      if option == nil then Qless.raise('QL_ARG', 'config.unset', 'Arg "option" missing') end
      Qless.Config.unset(option)
      return nil
    end

  elseif name == 'pop.multi' then
    -- Extension. pop.multi(worker, count, queue, max, [queue, max]...) -> the leased
    -- jobs as Queue.pop's flat array of stored fields (queue.lua)
    return function(now, A)
      local worker = A[3]
      if worker == nil or worker == '' then
        Qless.raise('QL_ARG', 'PopMulti', 'Arg "worker" missing')
      end
      local count = tonumber(A[4])
      if count == nil or count < 0 or count ~= math.floor(count) or count == 1 / 0 then
        Qless.raise('QL_ARG', 'PopMulti', 'Arg "count" must be a non-negative integer: ' ..
          tostring(A[4]))
      end
      local n = #A
      if n < 6 then
        Qless.raise('QL_ARG', 'PopMulti', 'At least one (queue, max) pair is required')
      end
      if (n - 4) % 2 == 1 then
        Qless.raise('QL_ARG', 'PopMulti', 'Odd number of (queue, max) args: ' .. (n - 4))
      end
      local queues, maxes = {}, {}
      for i = 5, n, 2 do
        local q, m = A[i], tonumber(A[i + 1])
        if q == '' then Qless.raise('QL_ARG', 'Queue', 'no queue name provided') end
        if m == nil or m < 1 or m ~= math.floor(m) or m == 1 / 0 then
          Qless.raise('QL_ARG', 'PopMulti', 'Arg "max" must be a positive integer: ' .. A[i + 1])
        end
        queues[#queues + 1] = q
        maxes[#maxes + 1] = m
      end
      return Qless.Queue.pop(now, worker, count, queues, maxes, true)
    end

  elseif name == 'jobs.waiting' then
    -- Extension. jobs.waiting(queue, [offset=0], [count=25]) -> array of the waiting
    -- jids in pop order. Unlike peek it neither promotes nor spawns anything.
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local offset = Qless.count_arg(A[4], 0, 'Jobs', 'Arg "offset" not a number: ')
      local count = Qless.count_arg(A[5], 25, 'Jobs', 'Arg "count" not a number: ')
      if offset < 0 or count < 0 then
        Qless.raise('QL_ARG', 'Jobs', 'Arg "offset" and "count" must not be negative')
      end
      if count == 0 then return {} end
      return redis.call('zrevrange', Qless.P .. 'q:' .. queue .. '-work', offset,
        offset + count - 1)
    end

  elseif name == 'sweep' then
    -- Extension. sweep([limit=1000], [scan=0], [cursor=0]) -> {"promoted":n,
    -- "spawned":n,"stalled":n,"available":n,"visited":n,"cursor":c,"next":t}: the
    -- upkeep of the queues due in `OWN due`, plus `scan` queues of `P queues` from rank
    -- `cursor` on (the slow pass that finds work other clients wrote).
    return function(now, A)
      local function count(i, name, least)
        if A[i] == nil then return nil end
        local n = tonumber(A[i])
        if n == nil or n < least or n ~= math.floor(n) or n == 1 / 0 then
          Qless.raise('QL_ARG', 'Sweep', 'Arg "' .. name .. '" must be a ' ..
            (least > 0 and 'positive' or 'non-negative') .. ' integer: ' .. A[i])
        end
        return n
      end
      local limit = count(3, 'limit', 1) or 1000
      local scan = count(4, 'scan', 0) or 0
      local cursor = count(5, 'cursor', 0) or 0
      return Qless.Queue.sweep(now, limit, scan, cursor)
    end

  elseif name == 'push.set' then
    -- Extension. push.set(queue, url, timeout, concurrency, rate_jobs, rate_seconds,
    -- headers, secret) -> 1 when the queue starts being pushed (with `secret`), 0 when
    -- its settings changed (push.lua). timeout: 1 to 900 seconds; concurrency: a
    -- positive integer; rate: 0 0 for none; headers: a JSON object of strings.
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local url, headers, secret = A[4], A[9], A[10]
      if url == nil or not string.find(url, '^https?://') then
        Qless.raise('QL_ARG', 'PushSet', 'Arg "url" must be an http or https URL: ' ..
          tostring(url))
      end
      local timeout = tonumber(A[5])
      if timeout == nil or timeout < 1 or timeout > 900 then
        Qless.raise('QL_ARG', 'PushSet', 'Arg "timeout" must be 1 to 900 seconds: ' ..
          tostring(A[5]))
      end
      local function whole(i, what, least)
        local n = tonumber(A[i])
        if n == nil or n < least or n % 1 ~= 0 or n == 1 / 0 then
          Qless.raise('QL_ARG', 'PushSet', 'Arg "' .. what .. '" must be a ' ..
            (least > 0 and 'positive' or 'non-negative') .. ' integer: ' .. tostring(A[i]))
        end
        return n
      end
      whole(6, 'concurrency', 1)
      local rjobs = whole(7, 'rate_jobs', 0)
      local rsec = tonumber(A[8])
      if rsec == nil or rsec < 0 or rsec == 1 / 0 or (rjobs > 0) ~= (rsec > 0) then
        Qless.raise('QL_ARG', 'PushSet', 'Arg "rate_seconds" must be positive with ' ..
          'rate_jobs, 0 without: ' .. tostring(A[8]))
      end
      local decoded = headers and Qless.json_decode(headers)
      if type(decoded) ~= 'table' or string.sub(headers, 1, 1) ~= '{' then
        Qless.raise('QL_ARG', 'PushSet', 'Arg "headers" must be a JSON object: ' ..
          tostring(headers))
      end
      for k, v in pairs(decoded) do
        if type(v) ~= 'string' then
          Qless.raise('QL_ARG', 'PushSet', 'Header ' .. k .. ' must be a string')
        end
      end
      if secret == nil or secret == '' then
        Qless.raise('QL_ARG', 'PushSet', 'Arg "secret" missing')
      end
      return Qless.Push.set(now, queue, url, A[5], A[6], A[7], A[8], headers, secret)
    end

  elseif name == 'push.get' or name == 'push.forget' then
    -- Extension. push.get(queue) -> JSON of the queue's push settings, secrets and
    -- counts, or nil; push.forget(queue) -> 1 if it was pushed, else 0 (push.lua).
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      if name == 'push.get' then return Qless.Push.get(now, queue) end
      return Qless.Push.forget(now, queue)
    end

  elseif name == 'push.list' then
    -- Extension. push.list() -> the pushed queues, by name.
    return function(now, A)
      return Qless.Push.list(now)
    end

  elseif name == 'push.rotate' then
    -- Extension. push.rotate(queue, secret, grace) -> 1, or 0 when the queue is not
    -- pushed: `secret` signs from now on, the old one beside it for `grace` seconds.
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      if A[4] == nil or A[4] == '' then
        Qless.raise('QL_ARG', 'PushRotate', 'Arg "secret" missing')
      end
      local grace = tonumber(A[5])
      if grace == nil or grace < 0 or grace == 1 / 0 then
        Qless.raise('QL_ARG', 'PushRotate', 'Arg "grace" must be a non-negative number: ' ..
          tostring(A[5]))
      end
      return Qless.Push.rotate(now, queue, A[4], grace)
    end

  elseif name == 'push.pop' then
    -- Extension. push.pop(queue, worker, max) -> up to `max` jobs leased to worker
    -- for delivery, within the queue's concurrency and rate, as pop's flat fields.
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local worker = A[4]
      if worker == nil or worker == '' then
        Qless.raise('QL_ARG', 'PushPop', 'Arg "worker" missing')
      end
      local max = tonumber(A[5])
      if max == nil or max < 1 or max % 1 ~= 0 or max == 1 / 0 then
        Qless.raise('QL_ARG', 'PushPop', 'Arg "max" must be a positive integer: ' ..
          tostring(A[5]))
      end
      return Qless.Push.pop(now, queue, worker, max)
    end

  elseif name == 'push.finish' then
    -- Extension. push.finish(queue, jid, worker, status, ms, attempt, outcome, ...) ->
    -- { what happened, detail }: `complete [result]`, `retry delay group message` or
    -- `fail group message` (push.lua).
    return function(now, A)
      local queue, jid, worker = Qless.queue_arg(A[3]), Qless.jid_arg(A[4]), A[5]
      local status, ms, attempt, outcome = A[6], A[7], A[8], A[9]
      if worker == nil or worker == '' then
        Qless.raise('QL_ARG', 'PushFinish', 'Arg "worker" missing')
      end
      if status == nil or not string.find(status, '^%d*$') or #status > 3 then
        Qless.raise('QL_ARG', 'PushFinish', 'Arg "status" must be an HTTP status or empty: ' ..
          tostring(status))
      end
      if ms == nil or not string.find(ms, '^%d+$') or attempt == nil or
          not string.find(attempt, '^%d+$') then
        Qless.raise('QL_ARG', 'PushFinish', 'Args "ms" and "attempt" must be whole numbers')
      end
      if outcome == 'complete' then
        if A[10] ~= nil and Qless.json_decode(A[10]) == nil then
          Qless.raise('QL_ARG', 'PushFinish', 'Arg "result" not JSON: ' .. A[10])
        end
      elseif outcome == 'retry' or outcome == 'postpone' then
        if (outcome == 'postpone' or A[10] ~= 'backoff') and tonumber(A[10]) == nil then
          Qless.raise('QL_ARG', 'PushFinish', 'Arg "delay" not a number: ' .. tostring(A[10]))
        end
        if A[11] == nil or A[12] == nil then
          Qless.raise('QL_ARG', 'PushFinish', 'Args "group" and "message" missing')
        end
      elseif outcome == 'fail' then
        if A[10] == nil or A[11] == nil then
          Qless.raise('QL_ARG', 'PushFinish', 'Args "group" and "message" missing')
        end
      else
        Qless.raise('QL_ARG', 'PushFinish', 'Arg "outcome" must be complete, retry, postpone or fail: ' ..
          tostring(outcome))
      end
      return Qless.Push.finish(now, queue, jid, worker, status, ms, attempt, outcome, A[10],
        A[11], A[12])
    end

  elseif name == 'batch.get' then
    -- Extension. batch.get(bid, offset, count) -> JSON (batches.lua), or nil.
    return function(now, A)
      local bid = A[3]
      if bid == nil or bid == '' then Qless.raise('QL_ARG', 'BatchGet', 'Arg "bid" missing') end
      local offset = Qless.count_arg(A[4], 0, 'BatchGet', 'Arg "offset" not a number: ', 0)
      local count = Qless.count_arg(A[5], 25, 'BatchGet', 'Arg "count" not a number: ', 0)
      return Qless.Batches.get(now, bid, offset, count)
    end

  elseif name == 'batch.cancel' then
    -- Extension. batch.cancel(bid) -> how many jobs were canceled, or nil.
    return function(now, A)
      local bid = A[3]
      if bid == nil or bid == '' then Qless.raise('QL_ARG', 'BatchCancel', 'Arg "bid" missing') end
      return Qless.Batches.cancel(now, bid)
    end

  elseif name == 'workflow.get' then
    -- Extension. workflow.get(wid) -> JSON (workflow.lua), or nil.
    return function(now, A)
      local wid = A[3]
      if wid == nil or wid == '' then Qless.raise('QL_ARG', 'WorkflowGet', 'Arg "wid" missing') end
      return Qless.Workflow.get(wid)
    end

  elseif name == 'workflow.cancel' then
    -- Extension. workflow.cancel(wid) -> how many tasks were canceled, or nil.
    return function(now, A)
      local wid = A[3]
      if wid == nil or wid == '' then
        Qless.raise('QL_ARG', 'WorkflowCancel', 'Arg "wid" missing')
      end
      return Qless.Workflow.cancel(now, wid)
    end

  elseif name == 'migrate' then
    -- Extension. migrate([cursor], [count=1000]) -> { next cursor, keys moved }: moves
    -- qlessd's own keys of the plain prefix out of 'ql:' (extra.lua). Without a cursor
    -- only the indexed families; with one, also one SCAN step of COUNT `count` from it
    -- (a pass starts at '0' and is done when '0' comes back).
    return function(now, A)
      local cursor = A[3]
      if cursor ~= nil and not string.find(cursor, '^%d+$') then
        Qless.raise('QL_ARG', 'Migrate', 'Arg "cursor" must be a SCAN cursor: ' .. cursor)
      end
      local count = Qless.count_arg(A[4], 1000, 'Migrate', 'Arg "count" must be positive: ', 1)
      return Qless.Extra.migrate(now, cursor, string.format('%d', count))
    end

  elseif name == 'search' then
    -- Extension. search(filter, limit, scan, [cursor]) -> JSON {"jobs","cursor",
    -- "examined","done"}: up to `limit` jobs matching the filter (a JSON object), having
    -- looked at no more than `scan` entries of the smallest index it allows; the
    -- cursor (from an earlier call with the same filter) says where to go on
    -- (search.lua). Reads only.
    return function(now, A)
      local f = Qless.Search.filter(A[3])
      local limit = Qless.count_arg(A[4], 25, 'Search', 'Arg "limit" must be a positive integer: ', 1)
      local scan = Qless.count_arg(A[5], 2000, 'Search', 'Arg "scan" must be a positive integer: ', 1)
      return Qless.Search.find(now, f, limit, scan, A[6])
    end

  elseif name == 'search.act' then
    -- Extension. search.act(action, value, filter, limit, scan, dry, [cursor]) -> JSON
    -- {"matched","changed","skipped","examined","cursor","done"}: walks as search does,
    -- then does `action` to the jobs that matched, in the same call (dry `1`: counts
    -- only). Actions: retry, cancel, unfail (value ''), move (value: the queue),
    -- priority (a number), tag and untag (a JSON list of tags).
    return function(now, A)
      local action, value = A[3], A[4]
      if action == 'move' then
        value = Qless.queue_arg(value)
      elseif action == 'priority' then
        value = Qless.number_arg(value, 'Search', 'Arg "priority" not a number: ')
        if value == 1 / 0 or value == -1 / 0 then
          Qless.raise('QL_ARG', 'Search', 'Arg "priority" not a number: ' .. A[4])
        end
      elseif action == 'tag' or action == 'untag' then
        local tags = Qless.json_strings(value or '')
        if not tags or #tags == 0 then
          Qless.raise('QL_ARG', 'Search', 'Arg "tags" must be a non-empty JSON list of tags: ' ..
            tostring(value))
        end
        for i = 1, #tags do tags[i] = tostring(tags[i]) end
        value = tags
      elseif action ~= 'retry' and action ~= 'cancel' and action ~= 'unfail' then
        Qless.raise('QL_ARG', 'Search', 'Arg "action" must be retry, cancel, move, unfail, ' ..
          'priority, tag or untag: ' .. tostring(action))
      end
      local f = Qless.Search.filter(A[5])
      local limit = Qless.count_arg(A[6], 100, 'Search', 'Arg "limit" must be a positive integer: ', 1)
      local scan = Qless.count_arg(A[7], 2000, 'Search', 'Arg "scan" must be a positive integer: ', 1)
      local dry = A[8]
      if dry ~= '0' and dry ~= '1' then
        Qless.raise('QL_ARG', 'Search', 'Arg "dry" must be 0 or 1: ' .. tostring(dry))
      end
      return Qless.Search.apply(now, action, value, f, limit, scan, dry == '1', A[9])
    end

  elseif name == 'rates' then
    -- Extension. rates(queue, [minutes=60]) -> { minute, fields, minute, fields, ... }:
    -- what the queue did in each of the last `minutes` minutes (1 to 60) up to now's,
    -- oldest first: the minute's first second, and its counts and wait histogram as
    -- HGETALL answers them (rates.lua). Only reads.
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local minutes = 60
      if A[4] ~= nil then
        minutes = tonumber(A[4])
        -- (NaN passes the comparisons, not the last test.)
        if minutes == nil or minutes < 1 or minutes > 60 or minutes % 1 ~= 0 then
          Qless.raise('QL_ARG', 'Rates', 'Arg "minutes" must be a whole number from 1 to 60: ' ..
            A[4])
        end
      end
      return Qless.Rates.get(now, queue, minutes)
    end

  elseif name == 'failed.summary' then
    -- Extension. failed.summary(sample, group...) -> JSON array: for each group, in
    -- order, its total, the failure times of its oldest and newest job, and its most
    -- common message among its newest `sample` jobs (1 to 1000) (failures.lua). Only
    -- reads.
    return function(now, A)
      local sample = tonumber(A[3])
      if sample == nil or sample < 1 or sample > 1000 or sample % 1 ~= 0 then
        Qless.raise('QL_ARG', 'FailedSummary',
          'Arg "sample" must be a whole number from 1 to 1000: ' .. tostring(A[3]))
      end
      return Qless.Failures.summary(Qless.rest(A, 4), sample)
    end

  elseif name == 'partitions.set' then
    -- Extension. partitions.set(queue, concurrency, rate_jobs, rate_seconds) -> 1: the
    -- limits of each partition of the queue, numbers >= 0 (0: none) (partitions.lua).
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local values = {}
      for i = 4, 6 do
        local v = tonumber(A[i])
        if v == nil or v ~= v or v < 0 or v == 1 / 0 then
          Qless.raise('QL_ARG', 'Partitions', 'Limits must be numbers >= 0: ' .. tostring(A[i]))
        end
        values[#values + 1] = v
      end
      return Qless.Partitions.set(now, queue, values[1], values[2], values[3])
    end

  elseif name == 'partitions.get' then
    -- Extension. partitions.get(queue, offset, count) -> JSON (partitions.lua). Reads.
    return function(now, A)
      local queue = Qless.queue_arg(A[3])
      local offset = Qless.count_arg(A[4], 0, 'Partitions', 'Arg "offset" not a number: ', 0)
      local count = Qless.count_arg(A[5], 25, 'Partitions', 'Arg "count" not a number: ', 0)
      return Qless.Partitions.list(now, queue, offset, count)
    end
  end
  return nil
end

-- The dispatcher (spec 1.1): the namespace from KEYS, then the command, then `now`,
-- then the command itself under pcall. Errors raised by the script and errors from
-- Redis (WRONGTYPE, OOM, ...) both leave as error replies with their text unchanged;
-- anything else (a bug in the script) is labelled ERR.
if #KEYS == 1 then
  local key = KEYS[1]
  -- Up to the first `}` after the first `{`, with something between them: one pattern
  -- (one C call, ~1k instructions) rather than two finds and a sub.
  local tagged = string.match(key, '^[^{]*{[^}]+}')
  if not tagged then
    return redis.error_reply('QL_KEYS user_script:1: Qless(): Key "' .. key ..
      '" must contain a non-empty {hash tag}')
  end
  Qless.P = tagged .. ':'
  Qless.OWN = Qless.P
  Qless.PUBLISH = 'spublish'
elseif #KEYS > 1 then
  return redis.error_reply('QL_KEYS user_script:1: Qless(): No Keys should be provided')
end
if ARGV[1] == nil then
  return redis.error_reply('QL_COMMAND user_script:1: Qless(): Must provide a command')
end
local handler = command(ARGV[1])
if handler == nil then
  return redis.error_reply('QL_COMMAND user_script:1: Qless(): Unknown command ' .. ARGV[1])
end
local now = tonumber(ARGV[2])
if now == nil or now ~= now then
  return redis.error_reply(
    'QL_ARG user_script:1: Qless(): Arg "now" missing or not a number: nil')
end
-- A plain non-negative decimal (the usual case) is used as it is; its integer part is
-- floor(now), and its fraction (trailing zeros dropped) is kept for expiry texts.
-- Anything else (signs, exponents, spaces, hex) is rendered.
local int, frac = string.match(ARGV[2], '^(%d+)(%.?%d-)0*$')
if int then
  Qless.NOWS = ARGV[2]
  -- (A string comparison rather than string.byte: a C call costs ~1k instructions.)
  if #int < 15 and (#int == 1 or int >= '1') then Qless.NOWF = int end
  if frac == '.' then frac = '' end
  Qless.NOWX = frac
else
  Qless.NOWS = string.format('%.17g', now)
end
if not Qless.NOWF then Qless.NOWF = string.format('%.14g', math.floor(now)) end
-- In a namespace, whose keys only this script reads (stock qless clients never pass a
-- key), a job's `time` is `now` as written rather than its %.20f expansion: the same
-- number to every reader (tonumber), no format, and 17 bytes less in each job's hash,
-- which keeps a waiting job's hash in a smaller allocation (lua/README.md, "Memory").
if Qless.PUBLISH == 'spublish' then Qless.NOWT = Qless.NOWS end
local ok, result = pcall(handler, now, ARGV)
-- What the call made available is announced whether or not it failed: a failing
-- command writes nothing, but a batch's earlier calls did.
-- (Inline rather than a method: building a method costs as much as the publish.)
if Qless.AVAILABLE then
  local a = Qless.AVAILABLE
  Qless.AVAILABLE = false
  for i = 1, #a do
    local q = a[i]
    local n = a[q]
    if n > 0 then
      redis.call(Qless.PUBLISH, Qless.OWN .. 'available',
        '{"queue":' .. cjson.encode(q) .. ',"count":' ..
        (n == 1 and '1' or string.format('%d', n)) .. '}')
    end
  end
end
if ok then return result end
return redis.error_reply(error_text(result))
