-- Leases up to max_jobs jobs: the most urgent class first, oldest first in
-- it; the bulk floor's share takes the oldest job of the least urgent class.
-- ARGV[2] lease_ms
-- ARGV[3] max_jobs
-- ARGV[4] worker name ('' for none)
-- ARGV[5] lease token prefix; each job's token is prefix .. '-' .. n
-- ARGV[6] bulk floor in parts per million of jobs handed out
-- ARGV[7] how many due scheduled jobs to promote first, at most
-- Returns: a list of views of the leased jobs (state processing).
local lease_ms, max_jobs, worker = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local token_prefix, floor_ppm = ARGV[5], tonumber(ARGV[6])
local now = now_ms()
promote_due(now, tonumber(ARGV[7]))

-- Every job handed out counts once, fleet-wide; job n is a floor claim when
-- it crosses a multiple of 1/floor: the share is exact, not random.
local function floor_turn()
  if floor_ppm <= 0 then return false end
  local n = redis.call('INCR', FLOOR)
  return math.floor(n * floor_ppm / 1000000) > math.floor((n - 1) * floor_ppm / 1000000)
end

local function oldest_of_least_urgent()
  local last = redis.call('ZRANGE', PENDING, -1, -1, 'WITHSCORES')
  local class = math.floor(tonumber(last[2]))
  local id = redis.call('ZRANGE', PENDING, class, '(' .. (class + 1), 'BYSCORE', 'LIMIT', 0, 1)[1]
  redis.call('ZREM', PENDING, id)
  return id
end

local deadline = ms(now + lease_ms)
local out = {}
for n = 1, max_jobs do
  if redis.call('ZCARD', PENDING) == 0 then break end
  local id
  if floor_turn() then
    id = oldest_of_least_urgent()
  else
    id = redis.call('ZPOPMIN', PENDING)[1]
  end
  local lease = token_prefix .. '-' .. n .. ':' .. worker
  redis.call('ZADD', PROCESSING, deadline, id)
  redis.call('HSET', LEASES, id, lease)
  out[n] = {id, redis.call('HGET', JOBS, id), 'processing', deadline, lease, redis.call('HGET', ERRORS, id)}
end
return out
