-- The claim part of `exchange`: hands out jobs to the requests in turn,
-- up to each one's max_jobs: the most urgent class first, in fair order
-- inside it (see the library's header); the bulk floor's share takes the
-- first job of the least urgent class. A paused queue hands out nothing;
-- max_in_flight and the rate limit bound what is handed out; a head whose
-- group is at its cap goes back to its group set. The jobs handed out are
-- those a claim per request would have taken, one after the other.
-- Its section of ARGV: the number of requests, then per request lease_ms,
-- max_jobs, worker ('' for none), number of acks, and an id, a lease token
-- and a result ('' for none) per ack (the acks go with the call's other
-- acks, before any job is handed out).
-- Answers, one request after the other, the number of jobs leased to it
-- and then id, record and lease token per job; and why fewer jobs than
-- asked were handed out: '' (none waiting, or all handed out), 'paused',
-- 'max_in_flight' or 'rate_limit', and the ms until the next rate limit
-- token (0 when not rate limited).
-- Errors: none; every outcome is in the reply.

-- Whether job number n handed out (fleet-wide, counted by the floor key)
-- is a floor job: n crosses a multiple of 1/floor, so the share is exact.
local function floor_turn(n, ppm)
  return math.floor(n * ppm / 1000000) > math.floor((n - 1) * ppm / 1000000)
end

-- The first job, in fair order, of the least urgent non-empty class, taken
-- out of pending: {id, score}, or nil when pending is empty.
local function take_first_of_least_urgent(q)
  local last = redis.call('ZRANGE', q.pending, -1, -1, 'WITHSCORES')
  if #last == 0 then return nil end
  local class = class_of(last[2])
  local first = redis.call('ZRANGE', q.pending, class, '(' .. (class + 1), 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  redis.call('ZREM', q.pending, first[1])
  return first
end

-- Refills the rate limit's bucket to now: answers the tokens in it.
local function tokens(c, now)
  fetch(c, {'tokens', 'at'})
  local held, at = tonumber(get(c, 'tokens')) or c.burst, tonumber(get(c, 'at')) or now
  return math.min(c.burst, held + math.max(0, now - at) * c.rate / 1000)
end

-- Takes up to `wanted` jobs in hand-out order, counting from `handed` jobs
-- already handed out; plain pops between two floor jobs go in one
-- ZPOPMIN. A job of a group at its cap goes back to its group set and
-- does not count. Answers the ids and the records of the jobs taken.
local function take_jobs(c, wanted, handed, ppm)
  local q, taken, records_taken, last_tags = c.q, {}, {}, {}
  while #taken < wanted do
    local run = 0
    while run < wanted - #taken and not (ppm > 0 and floor_turn(handed + #taken + run + 1, ppm)) do
      run = run + 1
    end
    local popped
    if run > 0 then
      popped = redis.call('ZPOPMIN', q.pending, run)
    else
      run, popped = 1, take_first_of_least_urgent(q) or {}
    end
    if #popped == 0 then break end
    local ids = {}
    for i = 1, #popped, 2 do
      ids[#ids + 1] = popped[i]
    end
    local records = redis.call('HMGET', q.jobs, unpack(ids))
    -- A head taken is replaced by its group's next job: pending is not
    -- empty just because a pop came back short.
    local refilled = false
    for i, id in ipairs(ids) do
      local record, member_score = records[i], popped[2 * i]
      local prio, tag = class_and_tag(member_score)
      local group = group_of(record)
      if group and at_cap(c, group) then
        withhold(c, id, prio, group, member_score)
      else
        taken[#taken + 1] = id
        records_taken[#taken] = record
        if tag > (last_tags[prio] or -1) then last_tags[prio] = tag end
        if group then
          count_waiting(c, group, -1)
          count_inflight(c, group, 1)
          refilled = refill_head(c, group, prio) or refilled
        end
      end
    end
    if #popped / 2 < run and not refilled then break end
  end
  -- The classes' virtual times move to the highest tags handed out.
  local fields = {}
  for prio in pairs(last_tags) do
    fields[#fields + 1] = fields_of(prio).vtime
  end
  fetch(c, fields)
  for prio, tag in pairs(last_tags) do
    advance(c, prio, tag)
  end
  return taken, records_taken
end

-- Reads the section that starts at `at`: where each request's lease_ms
-- is in ARGV; its acks go at the end of `acks` (id, token, result
-- triples). Answers
-- those places and where the next section starts.
local function read_claims(argv, at, acks)
  local requests, count = {}, tonumber(argv[at])
  at = at + 1
  for r = 1, count do
    requests[r] = at
    local n = tonumber(argv[at + 3])
    at = at + 4
    for i = at, at + 3 * n - 1 do
      acks[#acks + 1] = argv[i]
    end
    at = at + 3 * n
  end
  return requests, at
end

-- Hands out jobs to the `requests` read by `read_claims`, at `now`; the
-- answers go at the end of `out`. `ppm` is the bulk floor in parts per
-- million of jobs handed out; a job's lease token is `token_prefix` ..
-- '-' .. n, n counting the call's leases.
local function claim_all(c, argv, requests, now, ppm, token_prefix, out)
  local q, wanted = c.q, 0
  for _, at in ipairs(requests) do
    wanted = wanted + tonumber(argv[at + 1])
  end

  -- What the queue's settings let out now.
  local limited, wait_ms, bucket = '', 0, nil
  if c.paused then
    wanted, limited = 0, 'paused'
  end
  if c.max_in_flight and wanted > 0 then
    local free = math.max(0, c.max_in_flight - redis.call('ZCARD', q.processing))
    if free < wanted then wanted, limited = free, 'max_in_flight' end
  end
  if c.rate and wanted > 0 then
    bucket = tokens(c, now)
    if math.floor(bucket) < wanted then
      wanted, limited = math.floor(bucket), 'rate_limit'
      wait_ms = math.ceil((wanted + 1 - bucket) * 1000 / c.rate)
    end
  end

  local handed = number(c, 'floor')
  local taken, records = take_jobs(c, wanted, handed, ppm)
  if ppm > 0 and #taken > 0 then put(c, 'floor', handed + #taken) end
  if bucket then
    put(c, 'tokens', bucket - #taken)
    put(c, 'at', now)
  end
  -- Fewer than asked because nothing else waits: no limit is to blame.
  if #taken < wanted then limited, wait_ms = '', 0 end

  -- The jobs go to the requests in turn, each up to its max_jobs.
  local deadlines, leases, next = {}, {}, 1
  for _, at in ipairs(requests) do
    local deadline, worker = ms(now + tonumber(argv[at])), argv[at + 2]
    local count = math.min(tonumber(argv[at + 1]), #taken - next + 1)
    out[#out + 1] = count
    for n = next, next + count - 1 do
      local id, token = taken[n], token_prefix .. '-' .. n
      local retain = retain_of(records[n])
      deadlines[#deadlines + 1] = deadline
      deadlines[#deadlines + 1] = id
      leases[#leases + 1] = id
      leases[#leases + 1] = token .. (retain > 0 and ('/' .. retain) or '') .. ':' .. worker
      out[#out + 1] = id
      out[#out + 1] = records[n]
      out[#out + 1] = token
    end
    next = next + count
  end
  if #taken > 0 then
    redis.call('ZADD', q.processing, unpack(deadlines))
    redis.call('HSET', q.leases, unpack(leases))
  end
  return limited, wait_ms
end
