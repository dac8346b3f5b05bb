-- Takes back leases whose deadline has passed: attempts + 1, back to
-- pending, or to the DLQ once attempts reach max_attempts. Safe to run from
-- every instance at once: a lease is taken back exactly once.
-- ARGV[2] batch size
-- Returns: {leases taken back, of which dead-lettered}
local now = now_ms()
local expired = redis.call('ZRANGE', PROCESSING, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
reserve_arrivals(#expired)
local buried = 0
for _, id in ipairs(expired) do
  redis.call('HSET', ERRORS, id, 'lease expired')
  if end_lease(id, now, 0, false, nil) == 'dead' then buried = buried + 1 end
end
return {#expired, buried}
