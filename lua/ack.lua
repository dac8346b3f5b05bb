-- ack: acknowledges finished jobs; each one with its current lease token
-- is deleted with everything kept about it. A group that drops below its
-- cap gets its heads back; a queue that drops below max_in_flight wakes
-- the claims waiting for a slot.
-- KEYS: pending, processing, jobs, leases, meta, groups
-- ARGV[1] wake channel, ARGV[2] group key prefix, then pairs of id, lease
--   token
-- Returns: one status per pair, in order: 'OK', 'LEASE_LOST' (the token is
--   not the job's current lease) or 'NOT_FOUND' (no such job).
redis.register_function('ack_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], processing = keys[2], jobs = keys[3], leases = keys[4], meta = keys[5],
    groups = keys[6], wake = argv[1], group_prefix = argv[2],
  }
  local c = context(q)
  local statuses = ack_all(c, argv, 3, #argv)
  settle(c)
  return statuses
end)
