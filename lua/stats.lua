-- stats: counts a queue's jobs by state, and per priority class the jobs
-- waiting and the age of the class's next job in line. Costs
-- O(classes * log N), not O(N).
-- KEYS: pending, scheduled, processing, dead, jobs, meta, groups,
--   completed, waiting
-- Returns: {pending, scheduled, processing, expired leases, dead,
--   {priority, pending, age ms of the next in line, ...}, groups, paused,
--   completed, the `shards` field of meta (see the library's header) or
--   1, the named groups held back by group_rate_limit, {jobs waiting for
--   their dependencies, bytes counted waiting (see `enter_waiting`)}}
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'stats_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('stats', keys, argv)
    local pending, meta = q.pending, q.meta
    local now = now_ms()
    -- Jobs in group sets, by class: waiting too, though not in pending.
    local fields = {}
    for class = 0, 255 do
      fields[class + 1] = 'b:' .. class
    end
    local behind, total = {}, redis.call('ZCARD', pending)
    for i, n in ipairs(redis.call('HMGET', meta, unpack(fields))) do
      n = tonumber(n)
      if n and n > 0 then
        behind[i - 1] = n
        total = total + n
      end
    end
    local ages = {}
    local head = redis.call('ZRANGE', pending, 0, 0, 'WITHSCORES')
    while head[1] do
      local class = class_of(head[2])
      ages[class] = math.max(0, now - decode(redis.call('HGET', q.jobs, head[1])).ready)
      head = redis.call('ZRANGE', pending, class + 1, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    end
    local order = {}
    for class in pairs(ages) do order[#order + 1] = class end
    for class in pairs(behind) do
      if not ages[class] then order[#order + 1] = class end
    end
    table.sort(order)
    local classes = {}
    for _, class in ipairs(order) do
      classes[#classes + 1] = class
      classes[#classes + 1] = redis.call('ZCOUNT', pending, class, '(' .. (class + 1)) + (behind[class] or 0)
      classes[#classes + 1] = ages[class] or 0
    end
    return {
      total,
      redis.call('ZCARD', q.scheduled),
      jobs_in_flight(q),
      redis.call('ZCOUNT', q.processing, '-inf', ms(now)),
      redis.call('ZCARD', q.dead),
      classes,
      groups_listed(q),
      redis.call('HGET', meta, 'paused') == '1' and 1 or 0,
      redis.call('ZCARD', q.completed),
      tonumber(redis.call('HGET', meta, 'shards')) or 1,
      tonumber(redis.call('HGET', meta, 'throttled')) or 0,
      {redis.call('ZCARD', q.waiting), tonumber(redis.call('HGET', meta, 'pending_bytes')) or 0},
    }
  end,
}
