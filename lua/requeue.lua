-- requeue: returns a dead job to pending with its attempts reset, at the
-- tail of its class (or of another class) for its group; it keeps its
-- last error.
-- KEYS: pending, dead, jobs, meta, weights, groups, aging, sizes
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] id, ARGV[4] new
--   priority ('' keeps it)
-- Returns: the job's reply (see job_reply), pending
-- Errors: NOT_FOUND; CONFLICT when the job is not dead; SEQUENCE_EXHAUSTED
redis.register_function('requeue_' .. VERSION, function(keys, argv)
  local q = queue_of('requeue', keys, argv)
  local id = argv[3]
  local record = redis.call('HGET', q.jobs, id)
  if not record then fail('NOT_FOUND') end
  if not redis.call('ZSCORE', q.dead, id) then fail('CONFLICT') end
  local c = context(q)
  local job = decode(record)
  job.attempts = 0
  job.prio = tonumber(argv[4]) or job.prio
  local now = now_ms()
  if not make_pending(c, {{id, job, now}}) then fail('SEQUENCE_EXHAUSTED') end
  enter_waiting(c, id, job.body)
  note(c, id, now, 'requeued')
  redis.call('ZREM', q.dead, id)
  settle(c)
  return job_reply(id, redis.call('HGET', q.jobs, id), 'pending')
end)
