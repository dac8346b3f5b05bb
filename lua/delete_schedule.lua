-- delete_schedule: deletes a schedule; the jobs it made stay.
-- KEYS: schedules, schedules:due, schedules:runs
-- ARGV[1] name
-- Returns: 1 when it existed, 0 when not.
-- Errors: none; every outcome is in the reply.
redis.register_function('delete_schedule_' .. VERSION, function(keys, argv)
  redis.call('ZREM', keys[2], argv[1])
  redis.call('HDEL', keys[3], argv[1])
  return redis.call('HDEL', keys[1], argv[1])
end)
