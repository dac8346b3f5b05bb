-- Helpers shared by every queue script; the loader puts this file in front
-- of each of them, so each script still runs as one atomic unit.
--
-- Every script receives the same KEYS, all of one queue and one hash slot:
-- KEYS[1] pending    zset   id -> priority + seq * 2^-44
-- KEYS[2] scheduled  zset   id -> run_at (ms)
-- KEYS[3] processing zset   id -> lease deadline (ms)
-- KEYS[4] dead       zset   id -> dead_at (ms)
-- KEYS[5] jobs       hash   id -> "prio:attempts:max_attempts:enqueued_at:ready_at:" .. body
-- KEYS[6] leases     hash   id -> "token:worker" while the job is processing
-- KEYS[7] errors     hash   id -> last error text
-- KEYS[8] seq        string arrival counter of the queue
-- KEYS[9] floor      string jobs handed out, for the bulk floor
-- ARGV[1] the queue's wake-up channel
-- Times are Redis TIME in milliseconds, never an instance's clock.
-- Scripts that add to pending may fail with SEQUENCE_EXHAUSTED, always
-- before they write anything (see reserve_arrivals).
local PENDING, SCHEDULED, PROCESSING, DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local JOBS, LEASES, ERRORS, SEQ, FLOOR = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local WAKE = ARGV[1]

-- 2^44 arrivals fit in the score's fraction next to an 8-bit priority:
-- 8 + 44 bits stay exact in a float64.
local SEQ_SPAN = 17592186044416

local function fail(code)
  error({err = code})
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function ms(n)
  return string.format('%d', n)
end

local function decode(value)
  local prio, attempts, max, enqueued, ready, rest =
    string.match(value, '^(%d+):(%d+):(%d+):(%d+):(%d+):()')
  return {
    prio = tonumber(prio), attempts = tonumber(attempts), max = tonumber(max),
    enqueued = tonumber(enqueued), ready = tonumber(ready), body = string.sub(value, rest),
  }
end

local function encode(job)
  return string.format('%d:%d:%d:%d:%d:', job.prio, job.attempts, job.max, job.enqueued, job.ready)
    .. job.body
end

-- Makes room for `n` arrivals before the script writes anything, so that
-- arrival_score cannot fail halfway through. The counter restarts only
-- when no pending score is left to compare with.
local function reserve_arrivals(n)
  if n == 0 then return end
  if tonumber(redis.call('GET', SEQ) or '0') + n < SEQ_SPAN then return end
  if redis.call('ZCARD', PENDING) > 0 then fail('SEQUENCE_EXHAUSTED') end
  redis.call('SET', SEQ, 0)
end

-- The score of a job entering the tail of its priority class now; the
-- script has reserved room for it.
local function arrival_score(prio)
  return string.format('%.17g', prio + redis.call('INCR', SEQ) / SEQ_SPAN)
end

-- Makes a job claimable behind every job already waiting in its class.
-- Waiting long polls sleep only while the queue is empty, so only the
-- empty-to-non-empty edge needs a wake-up.
local function make_pending(id, job, ready)
  job.ready = ready
  redis.call('HSET', JOBS, id, encode(job))
  local was_empty = redis.call('ZCARD', PENDING) == 0
  redis.call('ZADD', PENDING, arrival_score(job.prio), id)
  if was_empty then redis.call('PUBLISH', WAKE, '') end
end

local function make_scheduled(id, job, run_at)
  job.ready = run_at
  redis.call('HSET', JOBS, id, encode(job))
  redis.call('ZADD', SCHEDULED, ms(run_at), id)
end

local function make_dead(id, job, now)
  redis.call('HSET', JOBS, id, encode(job))
  redis.call('ZADD', DEAD, ms(now), id)
end

-- Moves scheduled jobs whose time has come to pending, earliest first.
local function promote_due(now, limit)
  local due = redis.call('ZRANGE', SCHEDULED, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
  reserve_arrivals(#due / 2)
  for i = 1, #due, 2 do
    local id = due[i]
    redis.call('ZREM', SCHEDULED, id)
    make_pending(id, decode(redis.call('HGET', JOBS, id)), tonumber(due[i + 1]))
  end
  return #due / 2
end

-- The reply every job-returning script uses:
-- {id, record, state, state time (run_at, lease deadline or dead_at), lease, last error}
local function view(id)
  local record = redis.call('HGET', JOBS, id)
  if not record then return false end
  local state, at = 'pending', false
  local score = redis.call('ZSCORE', PROCESSING, id)
  if score then
    state, at = 'processing', score
  else
    score = redis.call('ZSCORE', SCHEDULED, id)
    if score then
      state, at = 'scheduled', score
    else
      score = redis.call('ZSCORE', DEAD, id)
      if score then state, at = 'dead', score end
    end
  end
  return {id, record, state, at, redis.call('HGET', LEASES, id), redis.call('HGET', ERRORS, id)}
end

-- Checks that `token` is the job's current lease; returns the lease entry.
local function current_lease(id, token)
  local lease = redis.call('HGET', LEASES, id)
  if not lease then
    if redis.call('HEXISTS', JOBS, id) == 1 then return nil, 'LEASE_LOST' end
    return nil, 'NOT_FOUND'
  end
  if string.match(lease, '^([^:]*):') ~= token then return nil, 'LEASE_LOST' end
  return lease
end

-- Ends a lease: the job leaves processing, attempts + 1, and it goes back to
-- pending (or scheduled after `delay`), or to the DLQ when `bury` is set or
-- its attempts are used up. `prio` (optional) moves it to another class.
local function end_lease(id, now, delay, bury, prio)
  redis.call('ZREM', PROCESSING, id)
  redis.call('HDEL', LEASES, id)
  local job = decode(redis.call('HGET', JOBS, id))
  job.attempts = job.attempts + 1
  if prio then job.prio = prio end
  if bury or job.attempts >= job.max then
    make_dead(id, job, now)
    return 'dead'
  elseif delay > 0 then
    make_scheduled(id, job, now + delay)
    return 'scheduled'
  end
  make_pending(id, job, now)
  return 'pending'
end
