-- Counts a queue's jobs by state, and per priority class the pending depth
-- and the age of its oldest job. Costs O(classes * log N), not O(N).
-- Returns: {pending, scheduled, processing, expired leases, dead,
--   {priority, pending, oldest age ms, ...}}
local now = now_ms()
local classes = {}
local head = redis.call('ZRANGE', PENDING, 0, 0, 'WITHSCORES')
while head[1] do
  local class = math.floor(tonumber(head[2]))
  local ready = decode(redis.call('HGET', JOBS, head[1])).ready
  classes[#classes + 1] = class
  classes[#classes + 1] = redis.call('ZCOUNT', PENDING, class, '(' .. (class + 1))
  classes[#classes + 1] = math.max(0, now - ready)
  head = redis.call('ZRANGE', PENDING, class + 1, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
end
return {
  redis.call('ZCARD', PENDING),
  redis.call('ZCARD', SCHEDULED),
  redis.call('ZCARD', PROCESSING),
  redis.call('ZCOUNT', PROCESSING, '-inf', ms(now)),
  redis.call('ZCARD', DEAD),
  classes,
}
