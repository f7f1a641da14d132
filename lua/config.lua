-- config.lua: the ql:config hash (options stored as strings).
--
-- Hot commands read just the options they need with an HMGET of their own; the
-- methods here serve the config.* commands.

-- The methods of Qless.Config, made on first use (see base.lua).
function config_factory(name)
  if name == 'defaults' then
    -- The documented defaults: config.get with no option shows exactly these, overlaid
    -- with the stored options. Options without a default (<Q>-heartbeat,
    -- <Q>-max-concurrency, max-job-history, max-worker-age) are absent on purpose.
    return function()
      return {
        ['application'] = 'qless',
        ['heartbeat'] = 60,
        ['grace-period'] = 10,
        ['stats-history'] = 30,
        ['histogram-history'] = 7,
        ['jobs-history-count'] = 50000,
        ['jobs-history'] = 604800,
      }
    end

  elseif name == 'get' then
    -- config.get: with an option, its stored string, else its default (a number for
    -- the numeric defaults, so the reply is an integer), else nil. Without an option,
    -- the JSON map of defaults overlaid with everything stored.
    return function(option)
      if option ~= nil then
        local value = redis.call('hget', Qless.P .. 'config', option)
        if value then return value end
        return Qless.Config.defaults()[option]
      end
      local all = Qless.Config.defaults()
      local stored = redis.call('hgetall', Qless.P .. 'config')
      for i = 1, #stored, 2 do
        all[stored[i]] = stored[i + 1]
      end
      return cjson.encode(all)
    end

  elseif name == 'set' then
    -- config.set: publish config_set on ql:log, then store.
    return function(option, value)
      redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"option":' .. cjson.encode(option) ..
        ',"event":"config_set","value":' .. cjson.encode(value) .. '}')
      redis.call('hset', Qless.P .. 'config', option, value)
      Qless.Config.changed(option)
    end

  elseif name == 'unset' then
    -- config.unset: publish config_unset on ql:log, then delete.
    return function(option)
      redis.call(Qless.PUBLISH, Qless.P .. 'log', '{"event":"config_unset","option":' ..
        cjson.encode(option) .. '}')
      redis.call('hdel', Qless.P .. 'config', option)
      Qless.Config.changed(option)
    end

  elseif name == 'changed' then
    -- A queue's max-concurrency changed: its waiting jobs may be poppable now.
    return function(option)
      local queue = string.match(option, '^(.*)%-max%-concurrency$')
      if queue then Qless.available_all(queue) end
    end
  end
end
