-- claim: for each request in turn, acknowledges the jobs it brings, then
-- leases up to its max_jobs jobs: the most urgent class first, oldest first
-- in it; the bulk floor's share takes the oldest job of the least urgent
-- class. Due scheduled jobs are promoted first.
-- KEYS: pending, scheduled, processing, jobs, leases, errors, seq, floor
-- ARGV[1] wake channel, ARGV[2] how many due scheduled jobs to promote at
--   most, ARGV[3] bulk floor in parts per million of jobs handed out,
--   ARGV[4] lease token prefix (a job's token is prefix .. '-' .. n, n
--   counting the call's leases), ARGV[5] number of requests, then per
--   request: lease_ms, max_jobs, worker ('' for none), number of acks, and
--   an id and a lease token per ack
-- Returns: {now, per request {{ack status per ack: 'OK', 'LEASE_LOST' or
--   'NOT_FOUND'}, {per leased job {id, record, token, last error}}}}
redis.register_function('claim_' .. VERSION, function(keys, argv)
  local q = {
    pending = keys[1], scheduled = keys[2], processing = keys[3], jobs = keys[4],
    leases = keys[5], errors = keys[6], seq = keys[7], floor = keys[8], wake = argv[1],
  }
  local now = now_ms()
  promote_due(q, now, tonumber(argv[2]))
  local floor_ppm, token_prefix = tonumber(argv[3]), argv[4]

  -- Every job handed out counts once, fleet-wide; job n is a floor job when
  -- n crosses a multiple of 1/floor: the share is exact, not random.
  local function floor_turn()
    if floor_ppm <= 0 then return false end
    local n = redis.call('INCR', q.floor)
    return math.floor(n * floor_ppm / 1000000) > math.floor((n - 1) * floor_ppm / 1000000)
  end

  local function oldest_of_least_urgent()
    local last = redis.call('ZRANGE', q.pending, -1, -1, 'WITHSCORES')
    local class = math.floor(tonumber(last[2]))
    local id = redis.call('ZRANGE', q.pending, class, '(' .. (class + 1), 'BYSCORE', 'LIMIT', 0, 1)[1]
    redis.call('ZREM', q.pending, id)
    return id
  end

  local out, at, leased = {}, 6, 0
  for r = 1, tonumber(argv[5]) do
    local lease_ms, max_jobs, worker = tonumber(argv[at]), tonumber(argv[at + 1]), argv[at + 2]
    local ack_count = tonumber(argv[at + 3])
    at = at + 4
    local acks = {}
    for i = 1, ack_count do
      acks[i] = ack_one(q, argv[at], argv[at + 1])
      at = at + 2
    end
    local deadline = ms(now + lease_ms)
    local jobs = {}
    for n = 1, max_jobs do
      if redis.call('ZCARD', q.pending) == 0 then break end
      local id
      if floor_turn() then
        id = oldest_of_least_urgent()
      else
        id = redis.call('ZPOPMIN', q.pending)[1]
      end
      leased = leased + 1
      local token = token_prefix .. '-' .. leased
      redis.call('ZADD', q.processing, deadline, id)
      redis.call('HSET', q.leases, id, token .. ':' .. worker)
      jobs[n] = {id, redis.call('HGET', q.jobs, id), token, redis.call('HGET', q.errors, id)}
    end
    out[r] = {acks, jobs}
  end
  return {now, out}
end)
