-- rates.lua: what each queue did minute by minute, for the dashboard (extension).
--
-- One hash per queue and minute, OWN rate:<minute>:<Q> (<minute>: the Unix time of the
-- minute's first second), holds how many jobs were put into Q (`put`: puts and
-- recurring spawns), completed in it (`done`: every complete, as the day's `run`
-- statistics count them) and failed in it (`failed`: fail, and retries or lock
-- expiries that ran out of retries, as the day's `failures` count them), and the
-- histogram of the wait times of the jobs popped from it, in the buckets of the day's
-- statistics (`s0`..`s59`, `m1`..`m59`, `h1`..`h23`, `d1`..`d6`, the last one holding
-- every wait of six days or more).
--
-- Memory stays bounded whatever the traffic: a hash exists only for the minutes in
-- which its queue did something, holds at most 3 + 148 small fields, and expires a
-- little over an hour after it was made (3,720 s). The expiry is relative, set by the
-- write that makes a field (HINCRBY answers 1 only then), so writing costs one call
-- (and a second one a few times per minute at most); it is Redis's own clock that
-- ends a hash, so a caller's logical `now` (tests) never makes one expire early.
--
-- The hot paths (put, pop, complete, fail) call `Qless.rates_count` or
-- `Qless.rates_waited` once: one HINCRBY. Those two are methods of Qless itself, made
-- by this file's factory (see base.lua): a class table of their own would cost each of
-- those calls more than their write. (`flush` and `get` are Qless.Rates's.)
--
-- Inside a `batch` (the gateway's group commit) nothing is written call by call: puts
-- and failures are counted in the batch's collected statistics (Qless.STATS), and the
-- completions and waits are already there, as the run and wait samples the day's
-- statistics collect (one `run` sample per complete, one `wait` sample per job
-- popped). When the batch ends (Qless.stats_flush), `flush` writes it all: one HINCRBY
-- per queue and field per batch.
--
-- A count is never worth failing a call for: the writes use redis.pcall, so a key of
-- another type (someone else's) is left alone, silently.

-- A minute's hash lives 3,720 seconds, the hour shown (the current minute and the 59
-- before it) and two minutes to spare: '3720' is written out at each EXPIRE, so that
-- the methods' only upvalues stay `Qless` and `bucket` (made with them).

-- The methods of Qless.Rates, and Qless.rates_count and Qless.rates_waited, made on first
-- use (see base.lua).
function rates_factory(name)
  -- The histogram bucket of a wait of v seconds, as the day's statistics name them (a
  -- negative wait, from clocks that disagree, counts as 0 s, and six days or more as
  -- d6), made with string.char: concatenating a number would format it with sprintf,
  -- several times dearer.
  local function bucket(v)
    local s = v - v % 1   -- floor(v), without a C call
    if s ~= s then s = v > 0 and 518400 or 0 end   -- (an infinite wait: v % 1 is NaN)
    local unit, c
    if s < 60 then
      unit, c = 115, s > 0 and s or 0
    elseif s < 3600 then
      unit, c = 109, (s - s % 60) / 60
    elseif s < 86400 then
      unit, c = 104, (s - s % 3600) / 3600
    else
      unit, c = 100, (s - s % 86400) / 86400
      if c > 6 then c = 6 end
    end
    if c < 10 then return string.char(unit, 48 + c) end
    return string.char(unit, 48 + (c - c % 10) / 10, 48 + c % 10)
  end

  if name == 'rates_count' then
    -- rates_count(now, queue, field, [n]): one more job (or n) of `queue` was put,
    -- completed or failed (`field`: put, done, failed) at `now`.
    return function(now, queue, field, n)
      local pending = Qless.STATS
      if pending then
        -- Inside a batch: a completion is counted from the batch's run samples; a put
        -- or a failure is added to the batch's collected statistics (inline: a method
        -- call per count would cost more than the addition).
        if field == 'done' then return end
        local rates = pending.rates
        if not rates then
          rates = {}
          pending.rates = rates
        end
        local fields = rates[queue]
        if not fields then
          fields = {}
          rates[queue] = fields
        end
        fields[field] = (fields[field] or 0) + (n or 1)
        return
      end
      local key = Qless.OWN .. 'rate:' .. string.format('%d', now - now % 60) .. ':' .. queue
      if not n then
        -- (The usual case: a constant, nothing to format.)
        if redis.pcall('hincrby', key, field, '1') == 1 then
          redis.pcall('expire', key, '3720')
        end
      elseif redis.pcall('hincrby', key, field, string.format('%d', n)) == n then
        redis.pcall('expire', key, '3720')
      end
    end

  elseif name == 'rates_waited' then
    -- rates_waited(now, queue, samples): jobs of `queue` were popped after waiting
    -- `samples` seconds (a list), counted in their histogram buckets. (Inside a batch
    -- nothing: `flush` counts the batch's wait samples.)
    return function(now, queue, samples)
      local n = #samples
      if n == 0 or Qless.STATS then return end
      local key = Qless.OWN .. 'rate:' .. string.format('%d', now - now % 60) .. ':' .. queue
      if n == 1 then
        -- The usual case (a pop of one job), without tables.
        if redis.pcall('hincrby', key, bucket(samples[1]), '1') == 1 then
          redis.pcall('expire', key, '3720')
        end
        return
      end
      local counts, names = {}, {}
      for i = 1, n do
        local b = bucket(samples[i])
        local c = counts[b]
        if c then
          counts[b] = c + 1
        else
          counts[b] = 1
          names[#names + 1] = b
        end
      end
      for i = 1, #names do
        local c = counts[names[i]]
        if redis.pcall('hincrby', key, names[i], string.format('%d', c)) == c then
          redis.pcall('expire', key, '3720')
        end
      end
    end

  elseif name == 'flush' then
    -- flush(now, pending): writes a batch's counts when it ends (every call of a batch
    -- shares `now`), from what the batch collected (`pending`, Qless.STATS: see
    -- base.lua's stats_add): the puts and failures rates_count added (`rates`), and
    -- each queue's completions (one `run` sample each) and waits (its `wait` samples).
    return function(now, pending)
      local queues, names = {}, {}   -- queue -> its fields (field -> count, in order)
      local function fields_of(queue)
        local fields = queues[queue]
        if not fields then
          fields = {}
          queues[queue] = fields
          names[#names + 1] = queue
        end
        return fields
      end
      local function add(fields, field, n)
        local c = fields[field]
        if c then
          fields[field] = c + n
        else
          fields[field] = n
          fields[#fields + 1] = field
        end
      end
      local rates = pending.rates
      if rates then
        for queue, counts in pairs(rates) do
          local fields = fields_of(queue)
          if counts.put then add(fields, 'put', counts.put) end
          if counts.failed then add(fields, 'failed', counts.failed) end
        end
      end
      for i = 1, #pending do
        local p = pending[i]
        if p.kind == 'run' then
          add(fields_of(p.queue), 'done', #p.samples)
        elseif p.kind == 'wait' then
          local fields, samples = fields_of(p.queue), p.samples
          for k = 1, #samples do add(fields, bucket(samples[k]), 1) end
        end
      end
      -- (pairs has no order: sorted, the writes are made in the same order on every
      -- server.)
      if #names > 1 then table.sort(names) end
      local minute = Qless.OWN .. 'rate:' .. string.format('%d', now - now % 60) .. ':'
      for i = 1, #names do
        local key = minute .. names[i]
        local fields = queues[names[i]]
        for j = 1, #fields do
          local field = fields[j]
          local c = fields[field]
          if redis.pcall('hincrby', key, field, string.format('%d', c)) == c then
            redis.pcall('expire', key, '3720')
          end
        end
      end
    end

  elseif name == 'get' then
    -- get(now, queue, minutes) -> { minute, fields, minute, fields, ... }: the last
    -- `minutes` minutes up to now's, oldest first, each as its first second (text)
    -- and its hash as HGETALL answers it (empty for a minute without anything).
    return function(now, queue, minutes)
      local last = now - now % 60
      local prefix = Qless.OWN .. 'rate:'
      local out = {}
      for i = minutes - 1, 0, -1 do
        local minute = string.format('%d', last - 60 * i)
        out[#out + 1] = minute
        out[#out + 1] = redis.call('hgetall', prefix .. minute .. ':' .. queue)
      end
      return out
    end
  end
end
