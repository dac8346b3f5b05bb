-- claim: acknowledges the jobs the requests bring, then hands out jobs to
-- the requests in turn, up to each one's max_jobs: the most urgent class
-- first, oldest first in it; the bulk floor's share takes the oldest job
-- of the least urgent class. Due scheduled jobs are promoted first. Acks
-- only remove leased jobs and claims only take pending ones, so applying
-- every request's acks first answers each request as it would have been
-- alone; the jobs handed out are those a claim per request would have
-- taken, one after the other.
-- KEYS: pending, scheduled, processing, jobs, leases, seq, floor
-- ARGV[1] wake channel, ARGV[2] how many due scheduled jobs to promote at
--   most, ARGV[3] bulk floor in parts per million of jobs handed out,
--   ARGV[4] lease token prefix (a job's token is prefix .. '-' .. n, n
--   counting the call's leases), ARGV[5] number of requests, then per
--   request: lease_ms, max_jobs, worker ('' for none), number of acks, and
--   an id and a lease token per ack
-- Returns: {now, per request {{ack status per ack: 'OK', 'LEASE_LOST' or
--   'NOT_FOUND'}, {per leased job {id, record, token}}}}

-- Whether job number n handed out (fleet-wide, counted by the floor key)
-- is a floor job: n crosses a multiple of 1/floor, so the share is exact.
local function floor_turn(n, ppm)
  return math.floor(n * ppm / 1000000) > math.floor((n - 1) * ppm / 1000000)
end

-- The oldest job of the least urgent non-empty class, taken out of
-- pending; nil when pending is empty.
local function take_oldest_of_least_urgent(q)
  local last = redis.call('ZRANGE', q.pending, -1, -1, 'WITHSCORES')
  if #last == 0 then return nil end
  local class = math.floor(tonumber(last[2]))
  local id = redis.call('ZRANGE', q.pending, class, '(' .. (class + 1), 'BYSCORE', 'LIMIT', 0, 1)[1]
  redis.call('ZREM', q.pending, id)
  return id
end

-- Takes up to `wanted` jobs in hand-out order, counting from `handed`
-- jobs already handed out; plain pops between two floor jobs go in one
-- ZPOPMIN. Answers the ids, in order.
local function take_jobs(q, wanted, handed, ppm)
  local ids = {}
  while #ids < wanted do
    local run = 0
    while run < wanted - #ids and not (ppm > 0 and floor_turn(handed + #ids + run + 1, ppm)) do
      run = run + 1
    end
    if run > 0 then
      local popped = redis.call('ZPOPMIN', q.pending, run)
      for i = 1, #popped, 2 do
        ids[#ids + 1] = popped[i]
      end
      if #popped / 2 < run then break end
    else
      local id = take_oldest_of_least_urgent(q)
      if not id then break end
      ids[#ids + 1] = id
    end
  end
  return ids
end

redis.register_function('claim_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], jobs = keys[4],
    leases = keys[5], seq = keys[6], floor = keys[7], wake = argv[1],
  }
  local now = now_ms()
  local a = arrivals(q)
  promote_due(q, a, now, tonumber(argv[2]))
  settle(a)
  local ppm, token_prefix = tonumber(argv[3]), argv[4]

  local requests, acks, wanted, at = {}, {}, 0, 6
  for r = 1, tonumber(argv[5]) do
    local request = {
      lease_ms = tonumber(argv[at]), max_jobs = tonumber(argv[at + 1]), worker = argv[at + 2],
      acks = tonumber(argv[at + 3]), first_ack = #acks / 2,
    }
    at = at + 4
    for _ = 1, request.acks do
      acks[#acks + 1] = argv[at]
      acks[#acks + 1] = argv[at + 1]
      at = at + 2
    end
    wanted = wanted + request.max_jobs
    requests[r] = request
  end
  local statuses = ack_all(q, acks)

  local handed = ppm > 0 and tonumber(redis.call('GET', q.floor) or '0') or 0
  local ids = take_jobs(q, wanted, handed, ppm)
  if ppm > 0 and #ids > 0 then redis.call('SET', q.floor, handed + #ids) end
  local records = #ids > 0 and redis.call('HMGET', q.jobs, unpack(ids)) or {}

  -- The jobs go to the requests in turn, each up to its max_jobs.
  local out, deadlines, leases, next = {}, {}, {}, 1
  for r, request in ipairs(requests) do
    local answered, jobs = {}, {}
    for i = 1, request.acks do
      answered[i] = statuses[request.first_ack + i]
    end
    local deadline = ms(now + request.lease_ms)
    while #jobs < request.max_jobs and next <= #ids do
      local id, token = ids[next], token_prefix .. '-' .. next
      deadlines[#deadlines + 1] = deadline
      deadlines[#deadlines + 1] = id
      leases[#leases + 1] = id
      leases[#leases + 1] = token .. ':' .. request.worker
      jobs[#jobs + 1] = {id, records[next], token}
      next = next + 1
    end
    out[r] = {answered, jobs}
  end
  if #ids > 0 then
    redis.call('ZADD', q.processing, unpack(deadlines))
    redis.call('HSET', q.leases, unpack(leases))
  end
  return {now, out}
end)
