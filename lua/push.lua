-- push: a queue's push target (in its home) and the slots its deliveries
-- hold, fleet-wide. The target is a hash: `url`, `concurrency`,
-- `timeout_ms`, `lease_ms`, `secret`, and its health, written as
-- deliveries end: `delivered`, `failed`, `stale` (counts),
-- `consecutive_failures`, `last_status` (the HTTP status, or 0 when none
-- came), `last_error`, `last_success_at`, `last_failure_at` (ms). A slot
-- is a member of `push:slots` scored by the time it lapses: an instance
-- takes slots before it claims jobs to deliver, keeps each with its
-- delivery's lease and frees it when the delivery ends; a slot of an
-- instance that died lapses with its lease, so the target's `concurrency`
-- holds across every instance.
-- KEYS: push, push:slots
-- ARGV[1] the mode, then its arguments:
--   'put' url concurrency timeout_ms lease_ms secret: writes the target
--     (its health kept when it existed). Returns 1 when it is new, else 0.
--   'drop': deletes the target and its slots. Returns 1, or 0 when there
--     was none.
--   'take' n holder hold_ms: drops the slots that lapsed, then grants up
--     to n slots, within `concurrency` less the slots held, each until
--     hold_ms from now. Returns the granted slots' names (holder:1..k),
--     or -1 when the queue has no target.
--   'busy' slot hold_ms: marks a slot a job was claimed for: it becomes
--     'd:' .. slot, lapsing hold_ms from now. Returns its new name.
--   'keep' slot hold_ms: the slot, while held, lapses hold_ms from now
--     (a delivery's slot is kept with its lease). Returns 1, or 0 when it
--     lapsed already.
--   'free' slot outcome status error: frees the slot and records the
--     delivery's end: outcome 'delivered', 'failed', 'stale' (the lease
--     ran out first) or 'unused' (no job was claimed for it). Returns 1.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'push_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('push', keys, argv)
    local mode = argv[1]
    if mode == 'put' then
      local new = redis.call('EXISTS', q.push) == 0
      redis.call('HSET', q.push, 'url', argv[2], 'concurrency', argv[3], 'timeout_ms', argv[4],
        'lease_ms', argv[5], 'secret', argv[6])
      return new and 1 or 0
    end
    if mode == 'drop' then
      return redis.call('DEL', q.push, q.push_slots) > 0 and 1 or 0
    end
    if mode == 'take' then
      local concurrency = tonumber(redis.call('HGET', q.push, 'concurrency'))
      if not concurrency then return -1 end
      local now = now_ms()
      redis.call('ZREMRANGEBYSCORE', q.push_slots, '-inf', now)
      local free = concurrency - redis.call('ZCARD', q.push_slots)
      local granted = {}
      for n = 1, math.min(tonumber(argv[2]), free) do
        local slot = argv[3] .. ':' .. n
        redis.call('ZADD', q.push_slots, now + tonumber(argv[4]), slot)
        granted[n] = slot
      end
      return granted
    end
    if mode == 'busy' then
      redis.call('ZREM', q.push_slots, argv[2])
      redis.call('ZADD', q.push_slots, now_ms() + tonumber(argv[3]), 'd:' .. argv[2])
      return 'd:' .. argv[2]
    end
    if mode == 'keep' then
      return redis.call('ZADD', q.push_slots, 'XX', 'CH', now_ms() + tonumber(argv[3]), argv[2])
    end
    -- 'free'
    redis.call('ZREM', q.push_slots, argv[2])
    local outcome = argv[3]
    if outcome == 'unused' or redis.call('EXISTS', q.push) == 0 then return 1 end
    if outcome == 'delivered' then
      redis.call('HINCRBY', q.push, 'delivered', 1)
      redis.call('HSET', q.push, 'consecutive_failures', 0, 'last_status', argv[4],
        'last_success_at', now_ms())
      return 1
    end
    redis.call('HINCRBY', q.push, outcome, 1)
    redis.call('HINCRBY', q.push, 'consecutive_failures', 1)
    redis.call('HSET', q.push, 'last_status', argv[4], 'last_error', argv[5],
      'last_failure_at', now_ms())
    return 1
  end,
}

-- push_view: the queue's push target, read: its hash as field, value
-- pairs, and the deliveries under way (slots marked busy, not lapsed) as
-- a last pair `in_flight`, n; {} when there is none. (A read of its own,
-- safe to send twice, apart from `push`, whose takes are not.)
redis.register_function{
  function_name = 'push_view_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('push_view', keys, argv)
    local target = redis.call('HGETALL', q.push)
    if #target == 0 then return {} end
    local busy = 0
    for _, slot in ipairs(redis.call('ZRANGE', q.push_slots, '(' .. now_ms(), '+inf', 'BYSCORE')) do
      if string.sub(slot, 1, 2) == 'd:' then busy = busy + 1 end
    end
    target[#target + 1] = 'in_flight'
    target[#target + 1] = tostring(busy)
    return target
  end,
}
