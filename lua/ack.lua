-- ack: acknowledges finished jobs; each one with its current lease token
-- is deleted with everything kept about it.
-- KEYS: processing, jobs, leases
-- ARGV: pairs of id, lease token
-- Returns: one status per pair, in order: 'OK', 'LEASE_LOST' (the token is
--   not the job's current lease) or 'NOT_FOUND' (no such job).
redis.register_function('ack_' .. VERSION, function(keys, argv)
  return ack_all({processing = keys[1], jobs = keys[2], leases = keys[3]}, argv)
end)
