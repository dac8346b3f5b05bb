-- put_schedule: creates or replaces a schedule. Its next fire time,
-- computed by prioq from the pattern, a `now` this Redis gave and the
-- schedule's last fire time, replaces whatever was due; its last fire time
-- stays. The call goes ahead only while the last fire time is still the
-- one prioq read: a fire that ran in between would otherwise have its
-- fire time made due again.
-- KEYS: schedules, schedules:due, schedules:runs, meta
-- ARGV[1] name, ARGV[2] definition (JSON), ARGV[3] next fire time (ms;
--   '' while paused or when there is none), ARGV[4] the last fire time
--   read (ms; '' for none), ARGV[5] the most schedules a queue may have
-- Returns: 1 when the schedule is new, 0 when it replaced one, -1 when its
--   last fire time is no longer ARGV[4] (nothing changed).
-- Errors: UNREGISTERED (see `registered`), LIMIT_REACHED when the
--   schedule is new and the queue has the most already; before any write.
redis.register_function('put_schedule_' .. VERSION, function(keys, argv)
  local q = queue_of('put_schedule', keys, argv)
  local problem = registered(q)
  if problem then fail(problem) end
  if redis.call('HEXISTS', q.schedules, argv[1]) == 0 and redis.call('HLEN', q.schedules) >= tonumber(argv[5]) then
    fail('LIMIT_REACHED')
  end
  if tonumber(redis.call('HGET', q.runs, argv[1])) ~= tonumber(argv[4]) then return -1 end
  local created = redis.call('HSET', q.schedules, argv[1], argv[2])
  if argv[3] == '' then
    redis.call('ZREM', q.due, argv[1])
  else
    redis.call('ZADD', q.due, argv[3], argv[1])
  end
  return created
end)
