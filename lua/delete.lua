-- Deletes a job that nobody is working on.
-- ARGV[2] id  ARGV[3] 'dead' to delete only a dead job, 'any' otherwise
-- Returns: 1
-- Errors: NOT_FOUND; CONFLICT when the job is processing (or, for 'dead',
--   not dead)
local id = ARGV[2]
if redis.call('HEXISTS', JOBS, id) == 0 then fail('NOT_FOUND') end
if ARGV[3] == 'dead' then
  if not redis.call('ZSCORE', DEAD, id) then fail('CONFLICT') end
elseif redis.call('ZSCORE', PROCESSING, id) then
  fail('CONFLICT')
end
redis.call('ZREM', PENDING, id)
redis.call('ZREM', SCHEDULED, id)
redis.call('ZREM', DEAD, id)
redis.call('HDEL', JOBS, id)
redis.call('HDEL', ERRORS, id)
return 1
