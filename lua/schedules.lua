-- schedules: reads a queue's schedules, or one of them.
-- KEYS: schedules, schedules:due, schedules:runs
-- ARGV[1] a schedule's name, or '' for all of them
-- Returns: {now, {per schedule its name, definition, next fire time
--   (false while paused) and last fire time (false before the first)}}
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'schedules_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('schedules', keys, argv)
    local out = {}
    local function add(name, definition)
      out[#out + 1] = name
      out[#out + 1] = definition
      out[#out + 1] = redis.call('ZSCORE', q.due, name)
      out[#out + 1] = redis.call('HGET', q.runs, name)
    end
    if argv[1] ~= '' then
      local definition = redis.call('HGET', q.schedules, argv[1])
      if definition then add(argv[1], definition) end
      return {now_ms(), out}
    end
    local all = redis.call('HGETALL', q.schedules)
    for i = 1, #all, 2 do
      add(all[i], all[i + 1])
    end
    return {now_ms(), out}
  end,
}
