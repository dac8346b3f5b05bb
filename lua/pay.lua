-- pay: makes the job of a sharded queue's schedule fire in the job's
-- shard (see `fire`), once: a shard remembers the fires it made for a day,
-- so a debt paid twice (its clearing was lost, a sweeper paid it too)
-- makes its job once.
-- KEYS: LIFE, schedules:paid
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] the schedule's
--   name, ARGV[4] the number of shards the caller routed for, then an
--   enqueues section of one request of one job (see the enqueue part).
-- Returns: {'PAID'} when this shard made the job before; else the
--   enqueue's answer, as `fire` gives it.
-- Errors: SHARDS_CHANGED (see `check_shards`), before any write.
local PAID_KEPT_MS = 86400000

redis.register_function('pay_' .. VERSION, function(keys, argv)
  local q = queue_of('pay', keys, argv)
  local now = now_ms()
  local enqueues = read_enqueues(argv, 5, now)
  local c = context(q, enqueues.fields)
  check_shards(c, argv[4])
  local id = enqueues.ids[1]
  if redis.call('ZSCORE', q.paid, id) then return {'PAID'} end
  c.schedule = argv[3]
  local answer = {}
  enqueue_all(c, argv, enqueues, now, answer)
  if answer[1] == 'OK' then
    redis.call('ZREMRANGEBYSCORE', q.paid, '-inf', ms(now - PAID_KEPT_MS))
    redis.call('ZADD', q.paid, ms(now), id)
  end
  settle(c)
  return answer
end)
