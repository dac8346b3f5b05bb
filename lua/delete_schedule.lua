-- delete_schedule: deletes a schedule; the jobs it made stay.
-- KEYS: schedules, schedules:due, schedules:runs
-- ARGV[1] name
-- Returns: 1 when it existed, 0 when not.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'delete_schedule_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('delete_schedule', keys, argv)
    redis.call('ZREM', q.due, argv[1])
    redis.call('HDEL', q.runs, argv[1])
    return redis.call('HDEL', q.schedules, argv[1])
  end,
}
