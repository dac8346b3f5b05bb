-- nack: ends a lease without success: attempts + 1, then back to pending
-- behind the jobs already waiting in its class, to scheduled after a delay,
-- or to the DLQ when asked or when its attempts are used up.
-- KEYS: pending, scheduled, processing, dead, jobs, leases, seq
-- ARGV[1] wake channel, ARGV[2] id, ARGV[3] lease token, ARGV[4] delay_ms,
--   ARGV[5] '1' to dead-letter, ARGV[6] new priority ('' keeps it),
--   ARGV[7] '1' when ARGV[8] is an error text, ARGV[8] error text
-- Returns: the job's view.
-- Errors: NOT_FOUND, LEASE_LOST, SEQUENCE_EXHAUSTED
redis.register_function('nack_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], dead = keys[4],
    jobs = keys[5], leases = keys[6], seq = keys[7], wake = argv[1],
  }
  local id = argv[2]
  local lease, problem = current_lease(q, id, argv[3])
  if not lease then fail(problem) end
  local a = arrivals(q)
  local seq = must_reserve(a, 1)
  local error = argv[7] == '1' and argv[8] or nil
  end_lease(q, id, seq, now_ms(), tonumber(argv[4]), argv[5] == '1', tonumber(argv[6]), error)
  settle(a)
  return view(q, id)
end)
