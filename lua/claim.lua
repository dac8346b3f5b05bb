-- claim: acknowledges the jobs the requests bring, then, request by
-- request, leases up to max_jobs jobs: the most urgent class first, oldest
-- first in it; the bulk floor's share takes the oldest job of the least
-- urgent class. Due scheduled jobs are promoted first. Acks only remove
-- leased jobs and claims only take pending ones, so applying every
-- request's acks first answers each request as it would have been alone.
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

redis.register_function('claim_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], jobs = keys[4],
    leases = keys[5], seq = keys[6], floor = keys[7], wake = argv[1],
  }
  local now = now_ms()
  promote_due(q, now, tonumber(argv[2]))
  local ppm, token_prefix = tonumber(argv[3]), argv[4]

  local requests, acks, at = {}, {}, 6
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
    requests[r] = request
  end
  local statuses = ack_all(q, acks)

  local counted = ppm > 0
  local handed = counted and tonumber(redis.call('GET', q.floor) or '0') or 0
  local first_handed, leased, out = handed, 0, {}
  for r, request in ipairs(requests) do
    local answered = {}
    for i = 1, request.acks do
      answered[i] = statuses[request.first_ack + i]
    end
    local ids = {}
    while #ids < request.max_jobs do
      -- Plain pops up to the next floor job, in one ZPOPMIN.
      local run = 0
      while run < request.max_jobs - #ids and not (counted and floor_turn(handed + run + 1, ppm)) do
        run = run + 1
      end
      if run > 0 then
        local popped = redis.call('ZPOPMIN', q.pending, run)
        for i = 1, #popped, 2 do
          ids[#ids + 1] = popped[i]
        end
        handed = handed + #popped / 2
        if #popped / 2 < run then break end
      else
        local id = take_oldest_of_least_urgent(q)
        if not id then break end
        ids[#ids + 1] = id
        handed = handed + 1
      end
    end
    local jobs = {}
    if #ids > 0 then
      local records = redis.call('HMGET', q.jobs, unpack(ids))
      local deadline = ms(now + request.lease_ms)
      local deadlines, leases = {}, {}
      for i, id in ipairs(ids) do
        leased = leased + 1
        local token = token_prefix .. '-' .. leased
        deadlines[2 * i - 1] = deadline
        deadlines[2 * i] = id
        leases[2 * i - 1] = id
        leases[2 * i] = token .. ':' .. request.worker
        jobs[i] = {id, records[i], token}
      end
      redis.call('ZADD', q.processing, unpack(deadlines))
      redis.call('HSET', q.leases, unpack(leases))
    end
    out[r] = {answered, jobs}
  end
  if handed ~= first_handed then redis.call('SET', q.floor, handed) end
  return {now, out}
end)
