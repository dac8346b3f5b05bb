-- prioq's Redis Functions library: the helpers every function shares.
-- The loader (src/queue/library.rs) puts `#!lua name=prioq_<version>` and
-- `local VERSION = '<version>'` in front of this file and every function's
-- file after it, and loads the whole once per Redis primary: the helpers
-- are defined at load, not on every call.
--
-- The keys of one queue, all in its hash slot. A function is given only
-- the keys it uses, in the order its header lists them, and builds a table
-- `q` of them by name:
--   pending    zset   id -> priority + seq * 2^-44
--   scheduled  zset   id -> run_at (ms)
--   processing zset   id -> lease deadline (ms)
--   dead       zset   id -> dead_at (ms)
--   jobs       hash   id -> record (below)
--   leases     hash   id -> "token:worker" while the job is processing
--   errors     hash   id -> last error text
--   seq        string the queue's arrival counter
--   floor      string jobs handed out, for the bulk floor
-- `q.wake` is the queue's wake-up channel (an argument, not a key).
-- Times are Redis TIME in milliseconds, never an instance's clock.
--
-- A record is a header of unsigned varints (7 bits a byte, least
-- significant first, the high bit set on every byte but a number's last):
--   flags (0), priority, attempts, max_attempts, enqueued_at,
--   ready_at - enqueued_at (when the job last became pending, or its run_at)
-- followed by the body, which prioq writes and no function reads:
--   the task's length in bytes (varint), the task, the args as sent.
--
-- Functions that add to pending may answer SEQUENCE_EXHAUSTED, always
-- before they write anything (see reserve_arrivals). A Lua error does not
-- undo the writes before it, so every check comes before the first write.

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

-- A whole number as Redis should store it: Lua would print large ones in
-- exponent form.
local function ms(n)
  return string.format('%d', n)
end

local function put_varint(bytes, n)
  while n >= 128 do
    local low = n % 128
    bytes[#bytes + 1] = low + 128
    n = (n - low) / 128
  end
  bytes[#bytes + 1] = n
end

-- The header's fields and the body of a record.
local function decode(record)
  local fields, pos = {}, 1
  for i = 1, 6 do
    local n, scale, byte = 0, 1, string.byte(record, pos)
    while byte >= 128 do
      n = n + (byte - 128) * scale
      scale = scale * 128
      pos = pos + 1
      byte = string.byte(record, pos)
    end
    fields[i] = n + byte * scale
    pos = pos + 1
  end
  return {
    flags = fields[1], prio = fields[2], attempts = fields[3], max = fields[4],
    enqueued = fields[5], ready = fields[5] + fields[6], body = string.sub(record, pos),
  }
end

local function encode(job)
  local bytes = {}
  put_varint(bytes, job.flags)
  put_varint(bytes, job.prio)
  put_varint(bytes, job.attempts)
  put_varint(bytes, job.max)
  put_varint(bytes, job.enqueued)
  put_varint(bytes, math.max(0, job.ready - job.enqueued))
  return string.char(unpack(bytes)) .. job.body
end

-- Makes room for `n` arrivals before the caller writes anything, so that
-- arrival_score cannot fail halfway through. The counter restarts only
-- when no pending score is left to compare with. Answers whether there
-- was room.
local function reserve_arrivals(q, n)
  if n == 0 then return true end
  if tonumber(redis.call('GET', q.seq) or '0') + n < SEQ_SPAN then return true end
  if redis.call('ZCARD', q.pending) > 0 then return false end
  redis.call('SET', q.seq, 0)
  return true
end

local function must_reserve_arrivals(q, n)
  if not reserve_arrivals(q, n) then fail('SEQUENCE_EXHAUSTED') end
end

-- The score of a job entering the tail of its priority class now; the
-- caller has reserved room for it.
local function arrival_score(q, prio)
  return string.format('%.17g', prio + redis.call('INCR', q.seq) / SEQ_SPAN)
end

-- Makes a job claimable behind every job already waiting in its class.
-- Waiting long polls sleep only while the queue is empty, so only the
-- empty-to-non-empty edge needs a wake-up.
local function make_pending(q, id, job, ready)
  job.ready = ready
  redis.call('HSET', q.jobs, id, encode(job))
  local was_empty = redis.call('ZCARD', q.pending) == 0
  redis.call('ZADD', q.pending, arrival_score(q, job.prio), id)
  if was_empty then redis.call('PUBLISH', q.wake, '') end
end

local function make_scheduled(q, id, job, run_at)
  job.ready = run_at
  redis.call('HSET', q.jobs, id, encode(job))
  redis.call('ZADD', q.scheduled, ms(run_at), id)
end

local function make_dead(q, id, job, now)
  redis.call('HSET', q.jobs, id, encode(job))
  redis.call('ZADD', q.dead, ms(now), id)
end

-- Moves up to `limit` scheduled jobs whose time has come to pending,
-- earliest first; answers how many. Reserves their arrivals itself.
local function promote_due(q, now, limit)
  local due = redis.call('ZRANGE', q.scheduled, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
  if #due == 0 or not reserve_arrivals(q, #due / 2) then return 0 end
  for i = 1, #due, 2 do
    local id = due[i]
    redis.call('ZREM', q.scheduled, id)
    make_pending(q, id, decode(redis.call('HGET', q.jobs, id)), tonumber(due[i + 1]))
  end
  return #due / 2
end

-- The reply for one job, in any state:
-- {id, record, state, state time (run_at, lease deadline or dead_at), lease, last error}
-- Needs q.jobs, q.processing, q.scheduled, q.dead, q.leases and q.errors.
local function view(q, id)
  local record = redis.call('HGET', q.jobs, id)
  if not record then return false end
  local state, at = 'pending', false
  local score = redis.call('ZSCORE', q.processing, id)
  if score then
    state, at = 'processing', score
  else
    score = redis.call('ZSCORE', q.scheduled, id)
    if score then
      state, at = 'scheduled', score
    else
      score = redis.call('ZSCORE', q.dead, id)
      if score then state, at = 'dead', score end
    end
  end
  return {id, record, state, at, redis.call('HGET', q.leases, id), redis.call('HGET', q.errors, id)}
end

-- Checks that `token` is the job's current lease: answers the lease entry,
-- or nil and LEASE_LOST or NOT_FOUND.
local function current_lease(q, id, token)
  local lease = redis.call('HGET', q.leases, id)
  if not lease then
    if redis.call('HEXISTS', q.jobs, id) == 1 then return nil, 'LEASE_LOST' end
    return nil, 'NOT_FOUND'
  end
  if string.match(lease, '^([^:]*):') ~= token then return nil, 'LEASE_LOST' end
  return lease
end

-- Acknowledges one job: with its current lease token it is deleted.
-- Answers 'OK', 'LEASE_LOST' or 'NOT_FOUND'.
local function ack_one(q, id, token)
  local lease, problem = current_lease(q, id, token)
  if not lease then return problem end
  redis.call('ZREM', q.processing, id)
  redis.call('HDEL', q.leases, id)
  redis.call('HDEL', q.jobs, id)
  redis.call('HDEL', q.errors, id)
  return 'OK'
end

-- Ends a lease: the job leaves processing, attempts + 1, and it goes back to
-- pending (or scheduled after `delay`), or to the DLQ when `bury` is set or
-- its attempts are used up. `prio` (optional) moves it to another class.
-- The caller has reserved an arrival for it.
local function end_lease(q, id, now, delay, bury, prio)
  redis.call('ZREM', q.processing, id)
  redis.call('HDEL', q.leases, id)
  local job = decode(redis.call('HGET', q.jobs, id))
  job.attempts = job.attempts + 1
  if prio then job.prio = prio end
  if bury or job.attempts >= job.max then
    make_dead(q, id, job, now)
    return 'dead'
  elseif delay > 0 then
    make_scheduled(q, id, job, now + delay)
    return 'scheduled'
  end
  make_pending(q, id, job, now)
  return 'pending'
end
