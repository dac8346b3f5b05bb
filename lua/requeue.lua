-- requeue: returns a dead job to pending with its attempts reset, at the
-- tail of its class (or of another class); it keeps its last error.
-- KEYS: pending, dead, jobs, seq
-- ARGV[1] wake channel, ARGV[2] id, ARGV[3] new priority ('' keeps it)
-- Returns: {id, record, 'pending', false, false}
-- Errors: NOT_FOUND; CONFLICT when the job is not dead; SEQUENCE_EXHAUSTED
redis.register_function('requeue_' .. VERSION, function(keys, argv)
  local q = {pending = keys[1], dead = keys[2], jobs = keys[3], seq = keys[4], wake = argv[1]}
  local id = argv[2]
  local record = redis.call('HGET', q.jobs, id)
  if not record then fail('NOT_FOUND') end
  if not redis.call('ZSCORE', q.dead, id) then fail('CONFLICT') end
  local a = arrivals(q)
  local seq = must_reserve(a, 1)
  redis.call('ZREM', q.dead, id)
  local job = decode(record)
  job.attempts = 0
  job.prio = tonumber(argv[3]) or job.prio
  make_pending(q, {{id, job, now_ms()}}, seq)
  settle(a)
  return {id, redis.call('HGET', q.jobs, id), 'pending', false, false}
end)
