-- sweep: one pass of the sweeper over one queue. Takes back up to `batch`
-- leases whose deadline has passed (attempts + 1, last error 'lease
-- expired', back to pending, or to the DLQ once attempts reach
-- max_attempts), then promotes up to `batch` due scheduled jobs. Safe to
-- run from every instance at once: a lease is taken back exactly once.
-- KEYS: pending, scheduled, processing, dead, jobs, leases, seq
-- ARGV[1] wake channel, ARGV[2] batch
-- Returns: {leases taken back, of which dead-lettered, jobs promoted}
redis.register_function('sweep_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], dead = keys[4],
    jobs = keys[5], leases = keys[6], seq = keys[7], wake = argv[1],
  }
  local now, batch, a = now_ms(), tonumber(argv[2]), arrivals(q)
  local expired = redis.call('ZRANGE', q.processing, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, batch)
  local seq = #expired > 0 and reserve(a, #expired)
  local buried = 0
  if seq then
    for i, id in ipairs(expired) do
      if end_lease(q, id, seq + i - 1, now, 0, false, nil, 'lease expired') == 'dead' then
        buried = buried + 1
      end
    end
  else
    expired = {}
  end
  local promoted = promote_due(q, a, now, batch)
  settle(a)
  return {#expired, buried, promoted}
end)
