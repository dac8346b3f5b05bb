-- Acknowledges finished jobs: each one and its record are deleted.
-- ARGV[2..] pairs of id, lease token
-- Returns: one status per pair, in order: 'OK', 'LEASE_LOST' (the token is
--   not the job's current lease) or 'NOT_FOUND' (no such job).
local out = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local lease, problem = current_lease(id, ARGV[i + 1])
  if lease then
    redis.call('ZREM', PROCESSING, id)
    redis.call('HDEL', LEASES, id)
    redis.call('HDEL', JOBS, id)
    redis.call('HDEL', ERRORS, id)
    out[#out + 1] = 'OK'
  else
    out[#out + 1] = problem
  end
end
return out
