-- The enqueue part of `exchange`: adds jobs, idempotently by id. Each
-- request is answered on its own; the writes of all of them go in one
-- HSET and a ZADD per set.
-- Its section of ARGV: the number of requests, then per request its
-- number of jobs and nine ARGV per job: id, priority, delay_ms,
-- max_attempts, group ('' for none), retain_ms once acked ('' for the
-- queue's), body (see the record layout), in a sharded queue its
-- arrival number ('' otherwise; see `take_tags`), and its expiry: ''
-- for none, else expires_in_ms, followed by ':drop' when on_expiry is
-- drop.
-- Answers, one request after the other, a status and then, when it is
-- 'OK', per job 1 when created, else the view of the job already known
-- under its id. The status 'SEQUENCE_EXHAUSTED' says the request's class
-- has used up its tags while jobs wait in it, 'UNREGISTERED' and
-- 'DELETING' that the queue may not be written to now (see
-- `registered`): the request wrote nothing and has no jobs.
-- Errors: none; every outcome is in the reply.
local PER_JOB = 9

-- Reads the section that starts at `at`: the requests ({first, count, n}:
-- where its jobs start in ARGV, how many, and the number of jobs before
-- them), the ids of their jobs, and the `meta` fields the tags of those
-- due now read. Answers those and where the next section starts.
local function read_enqueues(argv, at)
  local requests, ids, fields, seen = {}, {}, {}, {}
  local count = int_of(argv[at])
  at = at + 1
  for r = 1, count do
    local jobs = int_of(argv[at])
    requests[r] = {first = at + 1, count = jobs, n = #ids}
    for i = 0, jobs - 1 do
      local base = at + 1 + PER_JOB * i
      ids[#ids + 1] = argv[base]
      if argv[base + 2] == '0' then want_tag_fields(fields, seen, int_of(argv[base + 1]), argv[base + 4]) end
    end
    at = at + 1 + PER_JOB * jobs
  end
  return {requests = requests, ids = ids, fields = fields}, at
end

-- Takes the new jobs of requests first..last as one: their tags at once,
-- then their records and places in `w` (created ids, records, pending's
-- and scheduled's adds, expiry's entries and expiry:due's adds). Answers false, having changed nothing, when a
-- class's tags ran out.
local function take_requests(c, argv, requests, first, last, known, w, now)
  local fresh, prios, groups, arrivals = {}, {}, {}, {}
  for r = first, last do
    local request = requests[r]
    for i = 0, request.count - 1 do
      local base = request.first + PER_JOB * i
      local id = argv[base]
      if not known[request.n + i + 1] and not w.created[id] and not fresh[id] then
        fresh[id] = base
        if argv[base + 2] == '0' then
          prios[#prios + 1], groups[#groups + 1] = int_of(argv[base + 1]), argv[base + 4]
          arrivals[#prios] = tonumber(argv[base + 7])
        end
      end
    end
  end
  local tags = take_tags(c, prios, groups, arrivals)
  if not tags then return false end
  local now_varint, next_tag, records = varint(now), 1, w.records
  for r = first, last do
    local request = requests[r]
    for i = 0, request.count - 1 do
      local base = request.first + PER_JOB * i
      local id = argv[base]
      if fresh[id] == base then
        w.created[id] = true
        local prio, delay, max = int_of(argv[base + 1]), int_of(argv[base + 2]), int_of(argv[base + 3])
        local group = argv[base + 4] ~= '' and argv[base + 4] or nil
        local retain = int_of(argv[base + 5]) or c.settings.retain_ms
        -- flags, priority, attempts 0, max_attempts, enqueued_at, delay,
        -- group, retention, schedule (`c.schedule`: set by `fire`)
        records[#records + 1] = id
        local schedule = c.schedule
        records[#records + 1] = small_varint((group and HAS_GROUP or 0) + (retain > 0 and HAS_RETAIN or 0)
            + (schedule and HAS_SCHEDULE or 0))
          .. small_varint(prio) .. '\0' .. small_varint(max) .. now_varint .. (delay == 0 and '\0' or varint(delay))
          .. (group and (small_varint(#group) .. group) or '') .. (retain > 0 and varint(retain) or '')
          .. (schedule and (small_varint(#schedule) .. schedule) or '')
          .. argv[base + 6]
        local expiry = argv[base + 8]
        if expiry ~= '' then
          local after, mode = string.match(expiry, '^(%d+)(.*)$')
          local deadline = ms(now + tonumber(after))
          -- Made for the first job with an expiry: a call without any
          -- builds no more tables than before.
          w.expiry, w.expiry_due = w.expiry or {}, w.expiry_due or {}
          w.expiry[#w.expiry + 1] = id
          w.expiry[#w.expiry + 1] = deadline .. mode
          w.expiry_due[#w.expiry_due + 1] = deadline
          w.expiry_due[#w.expiry_due + 1] = id
        end
        if delay > 0 then
          w.scheduled[#w.scheduled + 1] = ms(now + delay)
          w.scheduled[#w.scheduled + 1] = id
        else
          place(c, w.adds, id, prio, group, tags[next_tag])
          next_tag = next_tag + 1
        end
      end
    end
  end
  return true
end

-- Enqueues what `read_enqueues` read, at `now`; the answers go at the end
-- of `out`.
local function enqueue_all(c, argv, enqueues, now, out)
  local q, requests = c.q, enqueues.requests
  if #requests == 0 then return end
  local problem = registered(q, c)
  if problem then
    for _ in ipairs(requests) do
      out[#out + 1] = problem
    end
    return
  end
  local known = #enqueues.ids > 0 and redis.call('HMGET', q.jobs, unpack(enqueues.ids)) or {}
  local w = {created = {}, records = {}, adds = {}, scheduled = {}}
  local exhausted = {}
  if not take_requests(c, argv, requests, 1, #requests, known, w, now) then
    -- A class's tags ran out: each request on its own, so that only those
    -- of that class fail.
    for r = 1, #requests do
      exhausted[r] = not take_requests(c, argv, requests, r, r, known, w, now)
    end
  end
  if #w.records > 0 then redis.call('HSET', q.jobs, unpack(w.records)) end
  if #w.scheduled > 0 then redis.call('ZADD', q.scheduled, unpack(w.scheduled)) end
  if #w.adds > 0 then redis.call('ZADD', q.pending, unpack(w.adds)) end
  if w.expiry then
    redis.call('HSET', q.expiry, unpack(w.expiry))
    redis.call('ZADD', q.expiry_due, unpack(w.expiry_due))
    add(c, 'expiring', #w.expiry / 2)
  end

  -- The answers: what was created here is 1, what was known its view.
  local answered = {}
  for r, request in ipairs(requests) do
    if exhausted[r] then
      out[#out + 1] = 'SEQUENCE_EXHAUSTED'
    else
      out[#out + 1] = 'OK'
      for i = 0, request.count - 1 do
        local id = argv[request.first + PER_JOB * i]
        if w.created[id] and not answered[id] then
          answered[id] = true
          out[#out + 1] = 1
        else
          out[#out + 1] = view(q, id)
        end
      end
    end
  end
end
