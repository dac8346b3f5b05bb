-- enqueue: adds jobs, idempotently by id. Several requests' jobs travel in
-- one call; each request is reserved and answered on its own.
-- KEYS: pending, scheduled, processing, dead, jobs, leases, errors, seq
-- ARGV[1] wake channel, ARGV[2] number of requests, then per request its
--   number of jobs and five ARGV per job:
--   id, priority, delay_ms, max_attempts, body (see the record layout)
-- Returns: {now, per request {status, per job: 1 when created, else the
--   view of the job already known under its id}}, status 'OK' or
--   'SEQUENCE_EXHAUSTED' (then the request wrote nothing and has no jobs).
redis.register_function('enqueue_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], dead = keys[4],
    jobs = keys[5], leases = keys[6], errors = keys[7], seq = keys[8], wake = argv[1],
  }
  local now = now_ms()
  local out, at = {}, 3
  for r = 1, tonumber(argv[2]) do
    local count = tonumber(argv[at])
    at = at + 1
    if not reserve_arrivals(q, count) then
      out[r] = {'SEQUENCE_EXHAUSTED'}
    else
      local answers = {'OK'}
      for i = 1, count do
        local id = argv[at]
        if redis.call('HEXISTS', q.jobs, id) == 1 then
          answers[i + 1] = view(q, id)
        else
          local job = {
            flags = 0, prio = tonumber(argv[at + 1]), attempts = 0, max = tonumber(argv[at + 3]),
            enqueued = now, body = argv[at + 4],
          }
          local delay = tonumber(argv[at + 2])
          if delay > 0 then
            make_scheduled(q, id, job, now + delay)
          else
            make_pending(q, id, job, now)
          end
          answers[i + 1] = 1
        end
        at = at + 5
      end
      out[r] = answers
    end
  end
  return {now, out}
end)
