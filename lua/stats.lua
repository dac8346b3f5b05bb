-- stats: counts a queue's jobs by state, and per priority class the
-- pending depth and the age of its oldest job. Costs O(classes * log N),
-- not O(N).
-- KEYS: pending, scheduled, processing, dead, jobs
-- Returns: {pending, scheduled, processing, expired leases, dead,
--   {priority, pending, oldest age ms, ...}}
redis.register_function{
  function_name = 'stats_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys)
    local pending, scheduled, processing, dead, jobs = keys[1], keys[2], keys[3], keys[4], keys[5]
    local now = now_ms()
    local classes = {}
    local head = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')
    while head[1] do
      local class = math.floor(tonumber(head[2]))
      local ready = decode(redis.call('HGET', jobs, head[1])).ready
      classes[#classes + 1] = class
      classes[#classes + 1] = redis.call('ZCOUNT', pending, class, '(' .. (class + 1))
      classes[#classes + 1] = math.max(0, now - ready)
      head = redis.call('ZRANGE', pending, class + 1, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    end
    return {
      redis.call('ZCARD', pending),
      redis.call('ZCARD', scheduled),
      redis.call('ZCARD', processing),
      redis.call('ZCOUNT', processing, '-inf', ms(now)),
      redis.call('ZCARD', dead),
      classes,
    }
  end,
}
