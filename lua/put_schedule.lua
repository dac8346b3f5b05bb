-- put_schedule: creates or replaces a schedule. Its next fire time,
-- computed by prioq from the pattern, a `now` this Redis gave and the
-- schedule's last fire time, replaces whatever was due; its last fire time
-- stays. The call goes ahead only while the last fire time is still the
-- one prioq read: a fire that ran in between would otherwise have its
-- fire time made due again.
-- KEYS: schedules, schedules:due, schedules:runs
-- ARGV[1] name, ARGV[2] definition (JSON), ARGV[3] next fire time (ms;
--   '' while paused or when there is none), ARGV[4] the last fire time
--   read (ms; '' for none)
-- Returns: 1 when the schedule is new, 0 when it replaced one, -1 when its
--   last fire time is no longer ARGV[4] (nothing changed).
-- Errors: none; every outcome is in the reply.
redis.register_function('put_schedule_' .. VERSION, function(keys, argv)
  local q = queue_of('put_schedule', keys, argv)
  if tonumber(redis.call('HGET', q.runs, argv[1])) ~= tonumber(argv[4]) then return -1 end
  local created = redis.call('HSET', q.schedules, argv[1], argv[2])
  if argv[3] == '' then
    redis.call('ZREM', q.due, argv[1])
  else
    redis.call('ZADD', q.due, argv[3], argv[1])
  end
  return created
end)
