-- Moves a lease's deadline to now + lease_ms; the token stays the same.
-- ARGV[2] id  ARGV[3] lease token  ARGV[4] lease_ms
-- Returns: the job's view.
-- Errors: NOT_FOUND, LEASE_LOST
local id = ARGV[2]
local lease, problem = current_lease(id, ARGV[3])
if not lease then fail(problem) end
local deadline = ms(now_ms() + tonumber(ARGV[4]))
redis.call('ZADD', PROCESSING, 'XX', deadline, id)
return {id, redis.call('HGET', JOBS, id), 'processing', deadline, lease, redis.call('HGET', ERRORS, id)}
