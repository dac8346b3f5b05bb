-- The claim part of `exchange`: hands out jobs to the requests in turn,
-- up to each one's max_jobs: the most urgent class first, in fair order
-- inside it (see the library's header); the bulk floor's share takes the
-- first job of the least urgent class. A paused queue hands out nothing;
-- max_in_flight and the rate limit bound what is handed out; a head whose
-- group is at its cap goes back to its group set. The jobs handed out are
-- those a claim per request would have taken, one after the other.
-- Its section of ARGV: the number of requests, then per request lease_ms,
-- max_jobs, worker ('' for none), number of acks, and an id, a lease token
-- and a result ('' for none) per ack (applied before the request's jobs
-- are handed out; see `claim_all`).
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

-- Whether the member `a_id` of score `a` comes before `b_id` of score `b`
-- in a sorted set: by score, then by bytes.
local function before(a, a_id, b, b_id)
  local x, y = tonumber(a), tonumber(b)
  if x ~= y then return x < y end
  return bytes_before(a_id, b_id)
end

-- Puts the pairs of `popped` from pair `first` on back into pending.
local function put_back(q, popped, first)
  local adds = {}
  for i = 2 * first - 1, #popped, 2 do
    adds[#adds + 1] = popped[i + 1]
    adds[#adds + 1] = popped[i]
  end
  redis.call('ZADD', q.pending, unpack(adds))
end

-- Refills the rate limit's bucket to now: answers the tokens in it.
local function tokens(c, now)
  fetch(c, {'tokens', 'at'})
  local held, at = tonumber(get(c, 'tokens')) or c.settings.rate_burst, tonumber(get(c, 'at')) or now
  return math.min(c.settings.rate_burst, held + math.max(0, now - at) * c.settings.rate_per_second / 1000)
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
    -- The most urgent head refilled in this pop, {id, score}.
    local first_refill = nil
    for i, id in ipairs(ids) do
      local record, member_score = records[i], popped[2 * i]
      -- A group's next job may come before the rest of this pop, as it
      -- would for claims of one job each: the rest go back, and the next
      -- pop takes them in order with it.
      if first_refill and before(first_refill[2], first_refill[1], member_score, id) then
        put_back(q, popped, i)
        break
      end
      local prio, tag = class_and_tag(member_score)
      local group = group_of(record)
      if group and holds(c, group) then
        withhold(c, id, prio, group, member_score)
      else
        taken[#taken + 1] = id
        records_taken[#taken] = record
        if tag > (last_tags[prio] or -1) then last_tags[prio] = tag end
        if group then
          count_waiting(c, group, -1)
          count_inflight(c, group, 1)
          spend_token(c, group)
          local head = refill_head(c, group, prio)
          if head then
            refilled = true
            if not first_refill or before(head[2], head[1], first_refill[2], first_refill[1]) then
              first_refill = head
            end
          end
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

-- Reads the section that starts at `at`: per request, where its lease_ms
-- is in ARGV and where its acks (id, token, result triples) start and
-- end. Answers those and where the next section starts.
local function read_claims(argv, at)
  local requests, count = {}, tonumber(argv[at])
  at = at + 1
  for r = 1, count do
    local n = tonumber(argv[at + 3])
    requests[r] = {at = at, acks = at + 4, last_ack = at + 3 + 3 * n}
    at = at + 4 + 3 * n
  end
  return requests, at
end

-- Hands out jobs to requests first..last of `requests`, at `now`; the
-- answers go at the end of `out`. `ppm` is the bulk floor in parts per
-- million of jobs handed out; a job's lease token is `token_prefix` ..
-- '-' .. n, n counting the call's leases (`c.leased`). Answers why fewer
-- jobs than asked were handed out and the wait for the next rate limit
-- token.
local function hand_out(c, argv, requests, first, last, now, ppm, token_prefix, out)
  local q, wanted = c.q, 0
  for r = first, last do
    wanted = wanted + tonumber(argv[requests[r].at + 1])
  end

  -- What the queue's settings let out now.
  local limited, wait_ms, bucket = '', 0, nil
  if c.settings.paused then
    wanted, limited = 0, 'paused'
  end
  if c.settings.max_in_flight and wanted > 0 then
    local free = math.max(0, c.settings.max_in_flight - redis.call('ZCARD', q.processing))
    if free < wanted then wanted, limited = free, 'max_in_flight' end
  end
  if c.settings.rate_per_second and wanted > 0 then
    bucket = tokens(c, now)
    if math.floor(bucket) < wanted then
      wanted, limited = math.floor(bucket), 'rate_limit'
      wait_ms = math.ceil((wanted + 1 - bucket) * 1000 / c.settings.rate_per_second)
    end
  end

  local handed = number(c, 'floor')
  local taken, records = take_jobs(c, wanted, handed, ppm)
  if ppm > 0 and #taken > 0 then put(c, 'floor', handed + #taken) end
  if bucket then
    put(c, 'tokens', bucket - #taken)
    put(c, 'at', now)
  end
  -- Fewer than asked because nothing else waits: no limit is to blame,
  -- unless groups wait for their rate limit's next token: look again then.
  if #taken < wanted then
    limited, wait_ms = '', 0
    if number(c, 'throttled') > 0 then
      local next = redis.call('ZRANGE', group_key(c, '!throttled'), 0, 0, 'WITHSCORES')
      if next[2] then limited, wait_ms = 'rate_limit', math.max(1, tonumber(next[2]) - now) end
    end
  end

  -- The jobs go to the requests in turn, each up to its max_jobs.
  local deadlines, leases, next = {}, {}, 1
  for r = first, last do
    local at = requests[r].at
    local deadline, worker = ms(now + tonumber(argv[at])), argv[at + 2]
    local count = math.min(tonumber(argv[at + 1]), #taken - next + 1)
    out[#out + 1] = count
    for n = next, next + count - 1 do
      c.leased = c.leased + 1
      local id, token = taken[n], token_prefix .. '-' .. c.leased
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

-- Serves the claim `requests` read by `read_claims`, at `now`: each one's
-- acks, then its jobs. Their ack statuses go at the end of `statuses`,
-- their answers at the end of `out`. A request's acks and its claim are
-- one step: where an ack can change what a claim may take (a group cap,
-- max_in_flight), each request's acks come right before its own claim;
-- elsewhere every request's acks go first and the jobs are handed out
-- together, which no claim can tell apart.
local function claim_all(c, argv, requests, now, ppm, token_prefix, statuses, out)
  c.leased = 0
  local acked_with = false
  for _, request in ipairs(requests) do
    if request.last_ack >= request.acks then acked_with = true end
  end
  local function ack(list, first, last)
    for _, status in ipairs(ack_all(c, list, first, last, now)) do
      statuses[#statuses + 1] = status
    end
  end
  if not (acked_with and (c.settings.group_max_in_flight or c.settings.max_in_flight)) then
    if acked_with then
      local acks = {}
      for _, request in ipairs(requests) do
        for i = request.acks, request.last_ack do
          acks[#acks + 1] = argv[i]
        end
      end
      ack(acks, 1, #acks)
    end
    return hand_out(c, argv, requests, 1, #requests, now, ppm, token_prefix, out)
  end
  local limited, wait_ms = '', 0
  for r, request in ipairs(requests) do
    ack(argv, request.acks, request.last_ack)
    local why, wait = hand_out(c, argv, requests, r, r, now, ppm, token_prefix, out)
    if why ~= '' then limited, wait_ms = why, wait end
  end
  return limited, wait_ms
end
