-- enqueue: adds jobs, idempotently by id. Several requests' jobs travel in
-- one call; each request is answered on its own, and the writes of the
-- whole call go in one HSET and a ZADD per set.
-- KEYS: pending, scheduled, processing, dead, jobs, leases, meta, weights,
--   groups
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] number of
--   requests, then per request its number of jobs and six ARGV per job:
--   id, priority, delay_ms, max_attempts, group ('' for none), body (see
--   the record layout)
-- Returns: {now, per request {status, per job: 1 when created, else the
--   view of the job already known under its id}}, status 'OK' or
--   'SEQUENCE_EXHAUSTED' (the request's class has used up its tags while
--   jobs wait in it: the request wrote nothing and has no jobs).
local PER_JOB = 6

redis.register_function('enqueue_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], dead = keys[4], jobs = keys[5],
    leases = keys[6], meta = keys[7], weights = keys[8], groups = keys[9],
    wake = argv[1], group_prefix = argv[2],
  }
  local now = now_ms()
  local now_varint = varint(now)

  -- Every job of the call, to learn at once which ids are known.
  local requests, ids, at = {}, {}, 4
  for r = 1, tonumber(argv[3]) do
    local count = tonumber(argv[at])
    requests[r] = {first = at + 1, count = count}
    for i = 0, count - 1 do
      ids[#ids + 1] = argv[at + 1 + PER_JOB * i]
    end
    at = at + 1 + PER_JOB * count
  end
  local known = #ids > 0 and redis.call('HMGET', q.jobs, unpack(ids)) or {}

  -- The fair-order state of every class and group of the call, read with
  -- the settings.
  local prios, groups = {}, {}
  for _, request in ipairs(requests) do
    for i = 0, request.count - 1 do
      local base = request.first + PER_JOB * i
      if argv[base + 2] == '0' then
        prios[#prios + 1], groups[#groups + 1] = tonumber(argv[base + 1]), argv[base + 4]
      end
    end
  end
  local c = context(q, tag_fields(prios, groups))

  local created, records, adds, scheduled, n = {}, {}, {}, {}, 0
  for _, request in ipairs(requests) do
    -- Which of the request's jobs are new; the tags of those that wait now.
    local fresh, wanted_prios, wanted_groups = {}, {}, {}
    for i = 0, request.count - 1 do
      local base = request.first + PER_JOB * i
      local id = argv[base]
      n = n + 1
      if not known[n] and not created[id] and not fresh[id] then
        fresh[id] = base
        if argv[base + 2] == '0' then
          wanted_prios[#wanted_prios + 1] = tonumber(argv[base + 1])
          wanted_groups[#wanted_groups + 1] = argv[base + 4]
        end
      end
    end
    local tags = take_tags(c, wanted_prios, wanted_groups)
    request.exhausted = not tags
    if tags then
      local next_tag = 1
      for i = 0, request.count - 1 do
        local base = request.first + PER_JOB * i
        local id = argv[base]
        if fresh[id] == base then
          created[id] = true
          local prio, delay, max = tonumber(argv[base + 1]), tonumber(argv[base + 2]), tonumber(argv[base + 3])
          local group = argv[base + 4] ~= '' and argv[base + 4] or nil
          -- flags, priority, attempts 0, max_attempts, enqueued_at, delay, group
          records[#records + 1] = id
          records[#records + 1] = small_varint(group and HAS_GROUP or 0) .. small_varint(prio) .. '\0'
            .. small_varint(max) .. now_varint .. (delay == 0 and '\0' or varint(delay))
            .. (group and (small_varint(#group) .. group) or '') .. argv[base + 5]
          if delay > 0 then
            scheduled[#scheduled + 1] = ms(now + delay)
            scheduled[#scheduled + 1] = id
          else
            place(c, adds, id, prio, group, tags[next_tag])
            next_tag = next_tag + 1
          end
        end
      end
    end
  end
  if #records > 0 then redis.call('HSET', q.jobs, unpack(records)) end
  if #scheduled > 0 then redis.call('ZADD', q.scheduled, unpack(scheduled)) end
  if #adds > 0 then redis.call('ZADD', q.pending, unpack(adds)) end
  settle(c)

  -- The answers: what was created here is 1, what was known its view.
  local out, answered = {}, {}
  for r, request in ipairs(requests) do
    if request.exhausted then
      out[r] = {'SEQUENCE_EXHAUSTED'}
    else
      local answers = {'OK'}
      for i = 0, request.count - 1 do
        local id = argv[request.first + PER_JOB * i]
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
