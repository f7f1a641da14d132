-- worker.lua: the worker registry. ql:workers (W -> last seen) is refreshed by pop and
-- heartbeat; ql:w:<W>:jobs (J -> lock expiry) lists what W holds. Idle workers are
-- forgotten lazily, by `workers` only.

-- The methods of Qless.Worker, made on first use (see base.lua).
function worker_factory(name)
  if name == 'list' then
    -- workers(now, [worker]) -> JSON: one worker's jobs/stalled jids, or every worker's
    -- counts, most recently seen first. First forgets workers idle > max-worker-age.
    return function(now, worker)
      local age = tonumber(redis.call('hget', Qless.P .. 'config', 'max-worker-age')) or 86400
      local cutoff = now - age
      local idle = redis.call('zrangebyscore', Qless.P .. 'workers', '-inf', cutoff)
      if #idle > 0 then
        for i = 1, #idle do redis.call('del', Qless.P .. 'w:' .. idle[i] .. ':jobs') end
        redis.call('zremrangebyscore', Qless.P .. 'workers', '-inf', cutoff)
      end
      local horizon = now + 8640000
      if worker then
        local key = Qless.P .. 'w:' .. worker .. ':jobs'
        return '{"jobs":' .. Qless.json_list(redis.call('zrevrangebyscore', key, horizon,
          Qless.NOWS)) ..
          ',"stalled":' .. Qless.json_list(redis.call('zrevrangebyscore', key, Qless.NOWS,
            '0')) .. '}'
      end
      local names = redis.call('zrevrange', Qless.P .. 'workers', '0', '-1')
      if #names == 0 then return '{}' end
      local out = {}
      for i = 1, #names do
        local key = Qless.P .. 'w:' .. names[i] .. ':jobs'
        out[i] = '{"name":' .. cjson.encode(names[i]) ..
          ',"jobs":' .. redis.call('zcount', key, Qless.NOWS, horizon) ..
          ',"stalled":' .. redis.call('zcount', key, '0', Qless.NOWS) .. '}'
      end
      return '[' .. table.concat(out, ',') .. ']'
    end

  elseif name == 'forget' then
    -- worker.deregister(now, worker...) -> nil. The workers' job sets are kept.
    return function(names)
      Qless.batch('zrem', Qless.P .. 'workers', names)
      return nil
    end
  end
end
