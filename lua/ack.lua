-- ack: acknowledges finished jobs; each one with its current lease token
-- is deleted with everything kept about it. A group that drops below its
-- cap gets its heads back; a queue that drops below max_in_flight wakes
-- the claims waiting for a slot.
-- KEYS: pending, processing, jobs, leases, settings, groups, inflight,
--   heads, backlog
-- ARGV[1] wake channel, ARGV[2] group key prefix, then pairs of id, lease
--   token
-- Returns: one status per pair, in order: 'OK', 'LEASE_LOST' (the token is
--   not the job's current lease) or 'NOT_FOUND' (no such job).
redis.register_function('ack_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], processing = keys[2], jobs = keys[3], leases = keys[4], settings = keys[5],
    groups = keys[6], inflight = keys[7], heads = keys[8], backlog = keys[9],
    wake = argv[1], group_prefix = argv[2],
  }
  local c = context(q)
  local was_empty = redis.call('ZCARD', q.pending) == 0
  local statuses = ack_all(c, {unpack(argv, 3)})
  settle(c, was_empty)
  return statuses
end)
