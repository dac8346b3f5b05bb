-- put_schedule: creates or replaces a schedule. Its next fire time,
-- computed by prioq from the pattern and a `now` this Redis gave, replaces
-- whatever was due; its last fire time stays.
-- KEYS: schedules, schedules:due
-- ARGV[1] name, ARGV[2] definition (JSON), ARGV[3] next fire time (ms;
--   '' while paused or when there is none)
-- Returns: 1 when the schedule is new, 0 when it replaced one.
-- Errors: none; every outcome is in the reply.
redis.register_function('put_schedule_' .. VERSION, function(keys, argv)
  local created = redis.call('HSET', keys[1], argv[1], argv[2])
  if argv[3] == '' then
    redis.call('ZREM', keys[2], argv[1])
  else
    redis.call('ZADD', keys[2], argv[3], argv[1])
  end
  return created
end)
