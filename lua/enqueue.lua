-- enqueue: adds jobs, idempotently by id. Several requests' jobs travel in
-- one call; each request is reserved and answered on its own, and the
-- writes of the whole call go in one HSET and a ZADD per set.
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
  local now_varint = varint(now)
  local was_empty = redis.call('ZCARD', q.pending) == 0

  -- Every job of the call, to learn at once which ids are known.
  local requests, ids, at = {}, {}, 3
  for r = 1, tonumber(argv[2]) do
    local count = tonumber(argv[at])
    requests[r] = {first = at + 1, count = count}
    for i = 0, count - 1 do
      ids[#ids + 1] = argv[at + 1 + 5 * i]
    end
    at = at + 1 + 5 * count
  end
  local known = #ids > 0 and redis.call('HMGET', q.jobs, unpack(ids)) or {}

  local a = arrivals(q)
  local created, records, pending, scheduled, n = {}, {}, {}, {}, 0
  for _, request in ipairs(requests) do
    -- Which of the request's jobs are new, and how many wait now.
    local fresh, waiting = {}, 0
    for i = 0, request.count - 1 do
      local base = request.first + 5 * i
      local id = argv[base]
      n = n + 1
      if not known[n] and not created[id] and not fresh[id] then
        fresh[id] = base
        if argv[base + 2] == '0' then waiting = waiting + 1 end
      end
    end
    local seq = reserve(a, waiting)
    request.exhausted = not seq
    if seq then
      for i = 0, request.count - 1 do
        local base = request.first + 5 * i
        local id = argv[base]
        if fresh[id] == base then
          created[id] = true
          local delay = tonumber(argv[base + 2])
          records[#records + 1] = id
          local prio, max = tonumber(argv[base + 1]), tonumber(argv[base + 3])
          -- flags 0, priority, attempts 0, max_attempts, enqueued_at, delay
          records[#records + 1] = '\0' .. small_varint(prio) .. '\0' .. small_varint(max)
            .. now_varint .. (delay == 0 and '\0' or varint(delay)) .. argv[base + 4]
          if delay > 0 then
            scheduled[#scheduled + 1] = ms(now + delay)
            scheduled[#scheduled + 1] = id
          else
            pending[#pending + 1] = score(prio, seq)
            pending[#pending + 1] = id
            seq = seq + 1
          end
        end
      end
    end
  end
  if #records > 0 then redis.call('HSET', q.jobs, unpack(records)) end
  if #scheduled > 0 then redis.call('ZADD', q.scheduled, unpack(scheduled)) end
  if #pending > 0 then redis.call('ZADD', q.pending, unpack(pending)) end
  settle(a)
  wake_if_filled(q, was_empty)

  -- The answers: what was created here is 1, what was known its view.
  local out, answered = {}, {}
  for r, request in ipairs(requests) do
    if request.exhausted then
      out[r] = {'SEQUENCE_EXHAUSTED'}
    else
      local answers = {'OK'}
      for i = 0, request.count - 1 do
        local id = argv[request.first + 5 * i]
        if created[id] and not answered[id] then
          answered[id] = true
          answers[i + 2] = 1
        else
          answers[i + 2] = view(q, id)
        end
      end
      out[r] = answers
    end
  end
  return {now, out}
end)
