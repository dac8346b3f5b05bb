-- delete: deletes a job that nobody is working on.
-- KEYS: pending, scheduled, processing, dead, jobs
-- ARGV[1] id, ARGV[2] 'dead' to delete only a dead job, 'any' otherwise
-- Returns: 1
-- Errors: NOT_FOUND; CONFLICT when the job is processing (or, for 'dead',
--   not dead)
redis.register_function('delete_' .. VERSION, function(keys, argv)
  local q = {pending = keys[1], scheduled = keys[2], processing = keys[3], dead = keys[4], jobs = keys[5]}
  local id = argv[1]
  if redis.call('HEXISTS', q.jobs, id) == 0 then fail('NOT_FOUND') end
  if argv[2] == 'dead' then
    if not redis.call('ZSCORE', q.dead, id) then fail('CONFLICT') end
  elseif redis.call('ZSCORE', q.processing, id) then
    fail('CONFLICT')
  end
  redis.call('ZREM', q.pending, id)
  redis.call('ZREM', q.scheduled, id)
  redis.call('ZREM', q.dead, id)
  redis.call('HDEL', q.jobs, id)
  return 1
end)
