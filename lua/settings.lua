-- settings: reads a queue's settings.
-- KEYS: meta, weights
-- Returns: {settings as field, value pairs, weights as group, weight pairs}
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'settings_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('settings', keys, argv)
    return {settings_of(q.meta), redis.call('HGETALL', q.weights)}
  end,
}
