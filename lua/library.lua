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
--   seq        string the queue's arrival counter
--   floor      string jobs handed out, for the bulk floor
-- `q.wake` is the queue's wake-up channel (an argument, not a key).
-- Times are Redis TIME in milliseconds, never an instance's clock.
--
-- A record is a header of unsigned varints (7 bits a byte, least
-- significant first, the high bit set on every byte but a number's last):
--   flags, priority, attempts, max_attempts, enqueued_at,
--   ready_at - enqueued_at (when the job last became pending, or its run_at)
-- then, when flags has bit 1, the last error: its length (varint) and text;
-- then the body, which prioq writes and no function reads:
--   the task's length in bytes (varint), the task, the args as sent.
--
-- Functions that add to pending may answer SEQUENCE_EXHAUSTED, always
-- before they write anything (see `reserve`). A Lua error does not undo
-- the writes before it, so every check comes before the first write.

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

local function varint(n)
  local bytes = {}
  put_varint(bytes, n)
  return string.char(unpack(bytes))
end

-- Varints of small numbers (priorities, attempts), made once each.
local SMALL_VARINTS = {}

local function small_varint(n)
  local bytes = SMALL_VARINTS[n]
  if not bytes then
    bytes = varint(n)
    SMALL_VARINTS[n] = bytes
  end
  return bytes
end

local HAS_ERROR = 1

-- Reads a varint at `pos`: answers it and the position after it.
local function read_varint(record, pos)
  local n, scale, byte = 0, 1, string.byte(record, pos)
  while byte >= 128 do
    n = n + (byte - 128) * scale
    scale = scale * 128
    pos = pos + 1
    byte = string.byte(record, pos)
  end
  return n + byte * scale, pos + 1
end

-- The header's fields, the last error (or nil) and the body of a record.
local function decode(record)
  local fields, pos = {}, 1
  for i = 1, 6 do
    fields[i], pos = read_varint(record, pos)
  end
  local job = {
    prio = fields[2], attempts = fields[3], max = fields[4],
    enqueued = fields[5], ready = fields[5] + fields[6],
  }
  if fields[1] % 2 == HAS_ERROR then
    local length
    length, pos = read_varint(record, pos)
    job.error = string.sub(record, pos, pos + length - 1)
    pos = pos + length
  end
  job.body = string.sub(record, pos)
  return job
end

local function encode(job)
  local bytes = {}
  put_varint(bytes, job.error and HAS_ERROR or 0)
  put_varint(bytes, job.prio)
  put_varint(bytes, job.attempts)
  put_varint(bytes, job.max)
  put_varint(bytes, job.enqueued)
  put_varint(bytes, math.max(0, job.ready - job.enqueued))
  if job.error then
    put_varint(bytes, #job.error)
    return string.char(unpack(bytes)) .. job.error .. job.body
  end
  return string.char(unpack(bytes)) .. job.body
end

-- The queue's arrival counter for one call: read once, arrivals counted
-- off it with `reserve`, written back once with `settle`.
local function arrivals(q)
  return {q = q, base = tonumber(redis.call('GET', q.seq) or '0'), used = 0}
end

-- Reserves `n` arrivals and answers the first one's number, or nil when
-- the counter is used up: it restarts only when no pending score is left
-- to compare with. Writes nothing, so a caller can still refuse.
local function reserve(a, n)
  if a.base + a.used + n < SEQ_SPAN then
    a.used = a.used + n
    return a.base + a.used - n + 1
  end
  if a.used == 0 and redis.call('ZCARD', a.q.pending) == 0 then
    a.base, a.used, a.restarted = 0, n, true
    return 1
  end
  return nil
end

local function must_reserve(a, n)
  return reserve(a, n) or fail('SEQUENCE_EXHAUSTED')
end

local function settle(a)
  if a.used > 0 or a.restarted then redis.call('SET', a.q.seq, a.base + a.used) end
end

-- The score of arrival number `seq` in class `prio`: behind every job
-- that arrived in the class before it.
local function score(prio, seq)
  return string.format('%.17g', prio + seq / SEQ_SPAN)
end

-- Wakes the long polls of every instance when pending went from empty to
-- not empty: a claim waits only while the queue is empty, so that edge is
-- the only one that needs a message. `was_empty` is read before the adds.
local function wake_if_filled(q, was_empty)
  if was_empty and redis.call('ZCARD', q.pending) > 0 then
    redis.call('PUBLISH', q.wake, '')
  end
end

-- Makes jobs claimable, in order, behind every job already waiting in
-- their class: `moves` holds {id, job, ready} triples, and `seq` is the
-- first of the arrivals reserved for them.
local function make_pending(q, moves, seq)
  if #moves == 0 then return end
  local was_empty = redis.call('ZCARD', q.pending) == 0
  local records, scores = {}, {}
  for i, move in ipairs(moves) do
    local id, job = move[1], move[2]
    job.ready = move[3]
    records[#records + 1] = id
    records[#records + 1] = encode(job)
    scores[#scores + 1] = score(job.prio, seq + i - 1)
    scores[#scores + 1] = id
  end
  redis.call('HSET', q.jobs, unpack(records))
  redis.call('ZADD', q.pending, unpack(scores))
  wake_if_filled(q, was_empty)
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
-- earliest first, with arrivals from `a`; answers how many.
local function promote_due(q, a, now, limit)
  local due = redis.call('ZRANGE', q.scheduled, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
  if #due == 0 then return 0 end
  local seq = reserve(a, #due / 2)
  if not seq then return 0 end
  local ids, moves = {}, {}
  for i = 1, #due, 2 do
    ids[#ids + 1] = due[i]
  end
  local records = redis.call('HMGET', q.jobs, unpack(ids))
  for i, id in ipairs(ids) do
    moves[i] = {id, decode(records[i]), tonumber(due[2 * i])}
  end
  redis.call('ZREM', q.scheduled, unpack(ids))
  make_pending(q, moves, seq)
  return #ids
end

-- The reply for one job, in any state:
-- {id, record, state, state time (run_at, lease deadline or dead_at), lease}
-- Needs q.jobs, q.processing, q.scheduled, q.dead and q.leases.
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
  return {id, record, state, at, redis.call('HGET', q.leases, id)}
end

-- The token of a `leases` entry, "token:worker".
local function token_of(lease)
  return string.match(lease, '^([^:]*):')
end

-- Checks that `token` is the job's current lease: answers the lease entry,
-- or nil and LEASE_LOST or NOT_FOUND.
local function current_lease(q, id, token)
  local lease = redis.call('HGET', q.leases, id)
  if not lease then
    if redis.call('HEXISTS', q.jobs, id) == 1 then return nil, 'LEASE_LOST' end
    return nil, 'NOT_FOUND'
  end
  if token_of(lease) ~= token then return nil, 'LEASE_LOST' end
  return lease
end

-- Acknowledges jobs: each one whose token is its current lease is deleted.
-- `pairs` is a flat list of id, token. Answers one status per pair, in
-- order: 'OK', 'LEASE_LOST' or 'NOT_FOUND'.
local function ack_all(q, pairs)
  local ids = {}
  for i = 1, #pairs, 2 do
    ids[#ids + 1] = pairs[i]
  end
  if #ids == 0 then return {} end
  local leases = redis.call('HMGET', q.leases, unpack(ids))
  local statuses, done, gone = {}, {}, {}
  for i, id in ipairs(ids) do
    local lease = leases[i]
    if done[id] then
      -- Acked earlier in this call: gone by now.
      statuses[i] = 'NOT_FOUND'
    elseif lease and token_of(lease) == pairs[2 * i] then
      statuses[i] = 'OK'
      done[id] = true
      gone[#gone + 1] = id
    elseif lease or redis.call('HEXISTS', q.jobs, id) == 1 then
      statuses[i] = 'LEASE_LOST'
    else
      statuses[i] = 'NOT_FOUND'
    end
  end
  if #gone > 0 then
    redis.call('ZREM', q.processing, unpack(gone))
    redis.call('HDEL', q.leases, unpack(gone))
    redis.call('HDEL', q.jobs, unpack(gone))
  end
  return statuses
end

-- Ends a lease: the job leaves processing, attempts + 1, and it goes back to
-- pending (or scheduled after `delay`), or to the DLQ when `bury` is set or
-- its attempts are used up. `prio` (optional) moves it to another class;
-- `error` (optional) becomes its last error. `seq` is an arrival the caller
-- reserved for it.
local function end_lease(q, id, seq, now, delay, bury, prio, error)
  redis.call('ZREM', q.processing, id)
  redis.call('HDEL', q.leases, id)
  local job = decode(redis.call('HGET', q.jobs, id))
  job.attempts = job.attempts + 1
  if prio then job.prio = prio end
  if error then job.error = error end
  if bury or job.attempts >= job.max then
    make_dead(q, id, job, now)
    return 'dead'
  elseif delay > 0 then
    make_scheduled(q, id, job, now + delay)
    return 'scheduled'
  end
  make_pending(q, {{id, job, now}}, seq)
  return 'pending'
end
