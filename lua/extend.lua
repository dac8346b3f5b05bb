-- extend: moves a lease's deadline to now + lease_ms; the token stays.
-- KEYS: processing, jobs, leases
-- ARGV[1] id, ARGV[2] lease token, ARGV[3] lease_ms
-- Returns: {id, record, 'processing', deadline, lease}
-- Errors: NOT_FOUND, LEASE_LOST
redis.register_function('extend_' .. VERSION, function(keys, argv)
  local q = {processing = keys[1], jobs = keys[2], leases = keys[3]}
  local id = argv[1]
  local lease, problem = current_lease(q, id, argv[2])
  if not lease then fail(problem) end
  local deadline = ms(now_ms() + tonumber(argv[3]))
  redis.call('ZADD', q.processing, 'XX', deadline, id)
  return {id, redis.call('HGET', q.jobs, id), 'processing', deadline, lease}
end)
