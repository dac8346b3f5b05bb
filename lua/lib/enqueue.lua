-- The enqueue part of `exchange`: adds jobs, idempotently by id. Each
-- request is answered on its own; the writes of all of them go in one
-- HSET and a ZADD per set.
-- Its section of ARGV: the number of requests, then per request its
-- number of jobs (followed by '!' when the request is admitted whatever
-- the queue's bounds: see `admit`) and twelve ARGV per job: id, priority, delay_ms
-- (or '@' and its run_at in ms, made a delay from `now` as it is read),
-- max_attempts, group ('' for none), retain_ms once acked ('' for the
-- queue's), body (see the record format), in a sharded queue its
-- arrival number ('' otherwise; see `take_tags`), and its expiry: ''
-- for none, else expires_in_ms, followed by ':drop' when on_expiry is
-- drop; its dedup ('' for none, else "<d|r><ttl ms>:<key>"); and its
-- dependencies ('' for none, else "<d|i>" then each ref "<queue>/<id>",
-- after '=' when it is in this slot, space-separated; see lib/deps.lua);
-- and its backoff ('' for none, else its `backoff` entry, see
-- lib/keys.lua).
-- Answers, one request after the other, a status and then, when it is
-- 'OK', per job 1 when created ({'made', view} when created waiting for
-- dependencies), else the view of the job already known under its id.
-- The status 'QUEUE_FULL', followed by the jobs waiting and the shard's
-- max_pending, says the request's new jobs would take the jobs waiting
-- past max_pending; 'QUEUE_FULL_BYTES', followed by the bytes waiting and
-- the shard's max_pending_bytes, the same of their bodies' bytes. The
-- status 'SEQUENCE_EXHAUSTED' says the request's class
-- has used up its tags while jobs wait in it, 'UNREGISTERED' and
-- 'DELETING' that the queue may not be written to now (see
-- `registered`): the request wrote nothing and has no jobs.
-- Errors: none; every outcome is in the reply.
local PER_JOB = 12
-- The byte that starts a run_at in place of a delay: '@'.
local AT = 64

-- What `read_enqueues` answers for a section of no requests, shared:
-- nothing reads into it.
local NO_ENQUEUES = {firsts = {}, counts = {}, before = {}, ids = {}, fields = {}, admitted = {}}

-- Reads the section that starts at `at`: the requests (request r's jobs
-- start at `firsts[r]` in ARGV, are `counts[r]`, and have `before[r]` jobs
-- before them: a list each, not a table per request), the ids of their
-- jobs, and the `meta` fields the tags of those due now read. A job's
-- run_at becomes its delay from `now` in ARGV. Answers those and where
-- the next section starts.
local function read_enqueues(argv, at, now)
  local count = int_of(argv[at])
  if count == 0 then return NO_ENQUEUES, at + 1 end
  local firsts, counts, before, ids, fields, seen, admitted = {}, {}, {}, {}, {}, {}, {}
  at = at + 1
  for r = 1, count do
    local jobs = int_of(argv[at])
    if not jobs then
      jobs, admitted[r] = int_of(string.sub(argv[at], 1, -2)), true
    end
    firsts[r], counts[r], before[r] = at + 1, jobs, #ids
    for i = 0, jobs - 1 do
      local base = at + 1 + PER_JOB * i
      ids[#ids + 1] = argv[base]
      if string.byte(argv[base + 2]) == AT then
        argv[base + 2] = decimal(math.max(0, tonumber(string.sub(argv[base + 2], 2)) - now))
      end
      if argv[base + 2] == '0' then want_tag_fields(fields, seen, int_of(argv[base + 1]), argv[base + 4]) end
    end
    at = at + 1 + PER_JOB * jobs
  end
  return {firsts = firsts, counts = counts, before = before, ids = ids, fields = fields, admitted = admitted}, at
end

-- Which requests the queue's bounds refuse: those whose new jobs (ids
-- not `known`, counted before deduplication) would take the jobs waiting
-- past max_pending, or their bodies' bytes past max_pending_bytes (see
-- `enter_waiting`), in turn, the earlier ones admitted counting. A request
-- admitted whatever the bounds (split over shards and checked in each
-- before, or a schedule's job) is not refused, and counts. Answers the
-- refused: {[r] = its answer's status, the amount waiting and the bound},
-- or NONE.
local function admit(c, argv, enqueues, known)
  local limit, bytes_limit = c.settings.max_pending, c.settings.max_pending_bytes
  if not limit and not bytes_limit then return NONE end
  local waiting = limit and waiting_jobs(c.q) or 0
  local bytes = bytes_limit and number(c, 'pending_bytes') or 0
  local refused = NONE
  for r = 1, #enqueues.firsts do
    local fresh, fresh_bytes, before = 0, 0, enqueues.before[r]
    for i = 1, enqueues.counts[r] do
      if not known[before + i] then
        fresh = fresh + 1
        if bytes_limit then fresh_bytes = fresh_bytes + #argv[enqueues.firsts[r] + PER_JOB * (i - 1) + 6] end
      end
    end
    local full
    if fresh > 0 and not enqueues.admitted[r] then
      if limit and waiting + fresh > limit then
        full = {'QUEUE_FULL', waiting, limit}
      elseif bytes_limit and bytes + fresh_bytes > bytes_limit then
        full = {'QUEUE_FULL_BYTES', bytes, bytes_limit}
      end
    end
    if full then
      if refused == NONE then refused = {} end
      refused[r] = full
    else
      waiting, bytes = waiting + fresh, bytes + fresh_bytes
    end
  end
  return refused
end

-- Decides at `now` whether the job at `base`, new by its id, is answered
-- with another job holding its dedup key (see lua/lib/dedup.lua) rather
-- than made; answers true when it is. `d` collects the call's decisions:
-- `answers[base]` {owner, replaced}; `owners[key]` the job made here that
-- takes a key ({id, base, until, stale: the ended owner it takes the key
-- from}); `source[base]` the later entry whose task, args, priority and
-- delay a job made here takes (a replace in the same call); `replaces`
-- the waiting jobs replaced, in order, and `replacing[owner]` the entry
-- each takes ({base, key, until, record, job}). `made` holds the keys of
-- jobs made by an earlier part of the call.
local function dedupe(c, argv, base, d, made, now)
  local mode, ttl, key = string.match(argv[base + 9], '^([dr])(%d+):(.*)$')
  local here = d.owners[key]
  if here or made[key] then
    -- Made in this call, so still waiting: a replace gives it its fields
    -- (one made by an earlier part is only answered).
    if mode == 'r' and here then
      d.source[here.base] = base
      d.answers[base] = {here.id, true}
    else
      d.answers[base] = {(here or made[key]).id, false}
    end
    return true
  end
  local q, entry = c.q, redis.call('HGET', c.q.dedup, key)
  local until_, owner, life
  if entry then
    until_, owner = held_by(entry)
    life = life_of(q, owner)
  end
  if entry and mode == 'd' and (life == 'waiting' or life == 'processing' or (life == 'ended' and until_ > now)) then
    d.answers[base] = {owner, false}
    return true
  end
  if entry and mode == 'r' and life == 'waiting' then
    local replacing = d.replacing[owner]
    if not replacing then
      local record = redis.call('HGET', q.jobs, owner)
      replacing = {key = key, until_ = until_, record = record, job = decode(record)}
      d.replacing[owner] = replacing
      d.replaces[#d.replaces + 1] = owner
    end
    replacing.base = base
    replacing.until_ = math.max(replacing.until_, now + tonumber(ttl))
    d.answers[base] = {owner, true}
    return true
  end
  d.owners[key] = {id = argv[base], base = base, until_ = now + tonumber(ttl),
    stale = entry and (life == 'ended' or life == 'gone') and owner or nil}
  return false
end

-- Notes the class, group and arrival of a job that is to take a tag: one
-- whose delay (the entry at `from`'s) is 0, of the priority of the entry
-- at `from`, of `group`, with the arrival of the entry at `base`.
local function want_tag(argv, from, base, group, prios, groups, arrivals)
  if argv[from + 2] ~= '0' then return end
  prios[#prios + 1], groups[#groups + 1] = int_of(argv[from + 1]), group
  arrivals[#prios] = tonumber(argv[base + 7])
end

-- Takes the new jobs of requests first..last as one: their tags at once,
-- then their records and places in `w` (created ids, records, pending's
-- and scheduled's adds, expiry's entries and expiry:due's adds, dedup's
-- answers and entries), and replaces the waiting jobs their dedup keys
-- name. Answers false, having changed nothing, when a class's tags ran
-- out.
local function take_requests(c, argv, enqueues, first, last, known, w, now)
  local fresh, order, d = {}, {}, nil
  local prios, groups, arrivals = {}, {}, {}
  for r = first, last do
    local before = enqueues.before[r]
    for i = 0, (w.refused[r] and 0 or enqueues.counts[r]) - 1 do
      local base = enqueues.firsts[r] + PER_JOB * i
      local id = argv[base]
      if not known[before + i + 1] and not w.created[id] and not fresh[id] then
        if argv[base + 9] ~= '' then
          d = d or {answers = {}, owners = {}, source = {}, replaces = {}, replacing = {}}
        end
        if argv[base + 9] == '' or not dedupe(c, argv, base, d, w.owners or NONE, now) then
          fresh[id] = base
          order[#order + 1] = base
          -- One with dependencies waits, and takes its tag when released.
          if argv[base + 10] == '' then want_tag(argv, base, base, argv[base + 4], prios, groups, arrivals) end
        end
      end
    end
  end
  local source = d and d.source or NONE
  if next(source) then
    -- A job made here took a later entry's priority and delay: its tag
    -- is of that priority, or it takes none.
    prios, groups, arrivals = {}, {}, {}
    for _, base in ipairs(order) do
      if argv[base + 10] == '' then want_tag(argv, source[base] or base, base, argv[base + 4], prios, groups, arrivals) end
    end
  end
  for _, owner in ipairs(d and d.replaces or NONE) do
    local replacing = d.replacing[owner]
    -- One still waiting for its dependencies stays so, with its new fields.
    replacing.waiting = number(c, 'depending') > 0 and redis.call('ZSCORE', c.q.waiting, owner) ~= false
    if not replacing.waiting then
      want_tag(argv, replacing.base, replacing.base, replacing.job.group or '', prios, groups, arrivals)
    end
  end
  local tags = take_tags(c, prios, groups, arrivals)
  if not tags then return false end
  local now_varint, next_tag, records = varint(now), 1, w.records
  for _, base in ipairs(order) do
    local id, from = argv[base], source[base] or base
    w.created[id] = true
    enter_waiting(c, id, argv[from + 6])
    local prio, delay, max = int_of(argv[from + 1]), int_of(argv[from + 2]), int_of(argv[base + 3])
    local group = argv[base + 4] ~= '' and argv[base + 4] or nil
    local retain = int_of(argv[base + 5]) or c.settings.retain_ms
    note(c, id, now, 'enqueued ' .. decimal(prio))
    -- flags, priority, attempts 0, max_attempts, enqueued_at, delay,
    -- group, retention, schedule (`c.schedule`: set by `fire`)
    records[#records + 1] = id
    local schedule = c.schedule
    records[#records + 1] = small_varint((group and HAS_GROUP or 0) + (retain > 0 and HAS_RETAIN or 0)
        + (schedule and HAS_SCHEDULE or 0))
      .. small_varint(prio) .. '\0' .. small_varint(max) .. now_varint .. (delay == 0 and '\0' or varint(delay))
      .. (group and (small_varint(#group) .. group) or '') .. (retain > 0 and varint(retain) or '')
      .. (schedule and (small_varint(#schedule) .. schedule) or '')
      .. argv[from + 6]
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
    if argv[base + 11] ~= '' then
      w.backoff = w.backoff or {}
      w.backoff[#w.backoff + 1] = id
      w.backoff[#w.backoff + 1] = argv[base + 11]
    end
    if argv[base + 10] ~= '' then
      w.depends = w.depends or {}
      w.depends[#w.depends + 1] = base
    elseif delay > 0 then
      w.scheduled[#w.scheduled + 1] = ms(now + delay)
      w.scheduled[#w.scheduled + 1] = id
    else
      place(c, w.adds, id, prio, group, tags[next_tag])
      next_tag = next_tag + 1
    end
  end
  if not d then return true end
  -- What deduplication decided: the keys taken, the waiting jobs replaced
  -- (out of where they wait, back with their new fields and a new tag or
  -- run_at).
  w.answers, w.owners, w.dedup, w.dedup_of = w.answers or {}, w.owners or {}, w.dedup or {}, w.dedup_of or {}
  for base, answer in pairs(d.answers) do
    w.answers[base] = answer
  end
  for key, owner in pairs(d.owners) do
    w.owners[key] = owner
    w.dedup[#w.dedup + 1] = key
    w.dedup[#w.dedup + 1] = ms(owner.until_) .. ':' .. owner.id
    w.dedup_of[#w.dedup_of + 1] = owner.id
    w.dedup_of[#w.dedup_of + 1] = key
    if owner.stale and redis.call('HGET', c.q.dedup_of, owner.stale) == key then forget_owner(c, owner.stale) end
  end
  for _, owner in ipairs(d.replaces) do
    local replacing = d.replacing[owner]
    local job, from = replacing.job, replacing.base
    job.prio, job.body = int_of(argv[from + 1]), argv[from + 6]
    local delay = int_of(argv[from + 2])
    if replacing.waiting then
      leave_waiting(c, {owner})
      job.ready = job.enqueued + delay
    else
      take_out(c, owner, replacing.record)
      if delay > 0 then
        job.ready = now + delay
        w.scheduled[#w.scheduled + 1] = ms(job.ready)
        w.scheduled[#w.scheduled + 1] = owner
      else
        job.ready = now
        place(c, w.adds, owner, job.prio, job.group, tags[next_tag])
        next_tag = next_tag + 1
      end
    end
    enter_waiting(c, owner, job.body)
    records[#records + 1] = owner
    records[#records + 1] = encode(job)
    w.dedup[#w.dedup + 1] = replacing.key
    w.dedup[#w.dedup + 1] = ms(replacing.until_) .. ':' .. owner
  end
  c.replaced = (c.replaced or 0) + #d.replaces
  return true
end

-- Enqueues what `read_enqueues` read, at `now`; the answers go at the end
-- of `out`.
local function enqueue_all(c, argv, enqueues, now, out)
  local q, requests = c.q, #enqueues.firsts
  if requests == 0 then return end
  local problem = registered(q, c)
  if problem then
    for _ = 1, requests do
      out[#out + 1] = problem
    end
    return
  end
  local known = #enqueues.ids > 0 and redis.call('HMGET', q.jobs, unpack(enqueues.ids)) or {}
  local refused = admit(c, argv, enqueues, known)
  local w = {created = {}, records = {}, adds = {}, scheduled = {}, refused = refused}
  local exhausted = {}
  if not take_requests(c, argv, enqueues, 1, requests, known, w, now) then
    -- A class's tags ran out: each request on its own, so that only those
    -- of that class fail.
    for r = 1, requests do
      exhausted[r] = not take_requests(c, argv, enqueues, r, r, known, w, now)
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
  if w.backoff then
    redis.call('HSET', q.backoff, unpack(w.backoff))
    add(c, 'backing_off', #w.backoff / 2)
  end
  if w.dedup and #w.dedup > 0 then
    redis.call('HSET', q.dedup, unpack(w.dedup))
    if #w.dedup_of > 0 then
      redis.call('HSET', q.dedup_of, unpack(w.dedup_of))
      add(c, 'keyed', #w.dedup_of / 2)
    end
  end
  for _, base in ipairs(w.depends or NONE) do
    depend(c, argv[base], argv[base + 10], now)
  end

  -- The answers: what was created here is 1, what was known its view.
  local answered = {}
  for r = 1, requests do
    if refused[r] then
      for _, part in ipairs(refused[r]) do
        out[#out + 1] = part
      end
    elseif exhausted[r] then
      out[#out + 1] = 'SEQUENCE_EXHAUSTED'
    else
      out[#out + 1] = 'OK'
      for i = 0, enqueues.counts[r] - 1 do
        local base = enqueues.firsts[r] + PER_JOB * i
        local id, other = argv[base], w.answers and w.answers[base]
        if other then
          -- Answered with the job that holds its dedup key.
          out[#out + 1] = other[2] and {'replaced', view(q, other[1])} or view(q, other[1])
        elseif w.created[id] and not answered[id] then
          answered[id] = true
          out[#out + 1] = argv[base + 10] == '' and 1 or {'made', view(q, id)}
        else
          out[#out + 1] = view(q, id)
        end
      end
    end
  end
end
