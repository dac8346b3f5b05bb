-- enqueue: adds jobs, idempotently by id. Several requests' jobs travel in
-- one call; each request is reserved and answered on its own.
-- KEYS: pending, scheduled, processing, dead, jobs, leases, seq
-- ARGV[1] wake channel, ARGV[2] number of requests, then per request its
--   number of jobs and five ARGV per job:
--   id, priority, delay_ms, max_attempts, body (see the record layout)
-- Returns: {now, per request {status, per job: 1 when created, else the
--   view of the job already known under its id}}, status 'OK' or
--   'SEQUENCE_EXHAUSTED' (then the request wrote nothing and has no jobs).
redis.register_function('enqueue_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], dead = keys[4],
    jobs = keys[5], leases = keys[6], seq = keys[7], wake = argv[1],
  }
  local now = now_ms()
  local was_empty = redis.call('ZCARD', q.pending) == 0
  local out, at = {}, 3
  for r = 1, tonumber(argv[2]) do
    local count = tonumber(argv[at])
    at = at + 1
    if not reserve_arrivals(q, count) then
      out[r] = {'SEQUENCE_EXHAUSTED'}
      at = at + 5 * count
    else
      local answers, pending = {'OK'}, {}
      for i = 1, count do
        local id, delay = argv[at], tonumber(argv[at + 2])
        local job = {
          prio = tonumber(argv[at + 1]), attempts = 0, max = tonumber(argv[at + 3]),
          enqueued = now, ready = now + delay, body = argv[at + 4],
        }
        if redis.call('HSETNX', q.jobs, id, encode(job)) == 0 then
          answers[i + 1] = view(q, id)
        else
          if delay > 0 then
            redis.call('ZADD', q.scheduled, ms(job.ready), id)
          else
            pending[#pending + 1] = {id, job.prio}
          end
          answers[i + 1] = 1
        end
        at = at + 5
      end
      if #pending > 0 then
        local seq, scores = take_arrivals(q, #pending), {}
        for i, entry in ipairs(pending) do
          scores[2 * i - 1] = score(entry[2], seq + i - 1)
          scores[2 * i] = entry[1]
        end
        redis.call('ZADD', q.pending, unpack(scores))
      end
      out[r] = answers
    end
  end
  wake_if_filled(q, was_empty)
  return {now, out}
end)
