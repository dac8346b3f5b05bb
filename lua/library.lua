-- prioq's Redis Functions library: the helpers every function shares.
-- The loader (src/queue/library.rs) puts `#!lua name=prioq_<version>` and
-- `local VERSION = '<version>'` in front of this file and every function's
-- file after it, and loads the whole once per Redis primary: the helpers
-- are defined at load, not on every call.
--
-- The keys of one queue, all in its hash slot. A function is given only
-- the keys it uses, in the order its header lists them, and builds a table
-- `q` of them by name:
--   pending    zset   claimable jobs: id -> priority + tag * 2^-44
--   scheduled  zset   id -> run_at (ms)
--   processing zset   id -> lease deadline (ms)
--   dead       zset   id -> dead_at (ms)
--   jobs       hash   id -> record (below)
--   leases     hash   id -> "token:worker" while the job is processing
--   floor      string jobs handed out, for the bulk floor
--   settings   hash   paused, max_in_flight, rate_per_second, rate_burst,
--                     group_max_in_flight, max_weight (the largest weight)
--   weights    hash   group -> weight
--   vtime      hash   priority -> virtual time: the tag last handed out
--   tags       hash   "priority:group" -> finish tag of the group's last
--                     job ('' is the group of jobs without one)
--   bucket     hash   tokens, at: the rate limit's bucket
--   groups     zset   group -> its waiting jobs, for every named group with
--                     jobs waiting or processing
--   inflight   hash   group -> its jobs processing
--   heads      hash   "priority:group" -> the group's job in pending
--   backlog    hash   priority -> jobs waiting in group sets
-- and, for each named group g, `<group prefix>g`, a zset like pending that
-- holds the group's waiting jobs other than its heads. Group keys are named
-- from the group inside the functions: they share the queue's hash tag, so
-- they live in the slot of the declared keys.
-- `q.wake` is the queue's wake-up channel and `q.group_prefix` the prefix
-- of its group keys (arguments, not keys).
-- Times are Redis TIME in milliseconds, never an instance's clock.
--
-- Fair order (start-time fair queuing). A job of group g entering class p
-- gets the tag S = max(V[p], F[p:g]), V[p] being the class's virtual time
-- and F[p:g] the group's finish tag, which becomes S + step / weight. A
-- class serves jobs by tag, so groups with jobs waiting share it in
-- proportion to their weights, and a group's own jobs keep their order.
-- step is the largest weight configured (1 when none is): every increment
-- is at least 1, so a group's tags strictly increase in the score; with
-- one group and no weights the tags are 1, 2, 3...: arrival order.
-- A named group has at most one job per class in pending, its head; the
-- rest wait in its group set, and the head is refilled when it is claimed.
-- A group at its cap (group_max_in_flight) has no head: a head met while
-- its group is at the cap goes back to the group set, and heads come back
-- when the group's jobs in flight drop below the cap. Jobs without a group
-- go straight to pending and are not capped by group_max_in_flight.
--
-- A record is a header of unsigned varints (7 bits a byte, least
-- significant first, the high bit set on every byte but a number's last):
--   flags, priority, attempts, max_attempts, enqueued_at,
--   ready_at - enqueued_at (when the job last became pending, or its run_at)
-- then, when flags has bit 1, the last error, and when it has bit 2, the
-- group: each its length (varint) and text; then the body, which prioq
-- writes and no function reads: the task's length in bytes (varint), the
-- task, the args as sent.
--
-- Functions that add to pending may answer SEQUENCE_EXHAUSTED, always
-- before they write anything (see `take_tag`). A Lua error does not undo
-- the writes before it, so every check comes before the first write.

-- A score's fraction holds 2^44 tag units next to an 8-bit priority: 8 + 44
-- bits stay exact in a float64.
local SPAN = 17592186044416
local HAS_ERROR, HAS_GROUP = 1, 2

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

-- Reads a length-prefixed text at `pos`: answers it and the position after.
local function read_text(record, pos)
  local length
  length, pos = read_varint(record, pos)
  return string.sub(record, pos, pos + length - 1), pos + length
end

-- The header's fields, the last error and the group (or nil) and the body
-- of a record.
local function decode(record)
  local fields, pos = {}, 1
  for i = 1, 6 do
    fields[i], pos = read_varint(record, pos)
  end
  local job = {
    prio = fields[2], attempts = fields[3], max = fields[4],
    enqueued = fields[5], ready = fields[5] + fields[6],
  }
  local flags = fields[1]
  if flags % 2 == 1 then job.error, pos = read_text(record, pos) end
  if math.floor(flags / 2) % 2 == 1 then job.group, pos = read_text(record, pos) end
  job.body = string.sub(record, pos)
  return job
end

local function encode(job)
  local bytes, texts = {}, {}
  put_varint(bytes, (job.error and HAS_ERROR or 0) + (job.group and HAS_GROUP or 0))
  put_varint(bytes, job.prio)
  put_varint(bytes, job.attempts)
  put_varint(bytes, job.max)
  put_varint(bytes, job.enqueued)
  put_varint(bytes, math.max(0, job.ready - job.enqueued))
  texts[1] = string.char(unpack(bytes))
  for _, text in ipairs({job.error or false, job.group or false}) do
    if text then
      texts[#texts + 1] = varint(#text)
      texts[#texts + 1] = text
    end
  end
  texts[#texts + 1] = job.body
  return table.concat(texts)
end

-- The group of a record, or nil, without decoding the rest.
local function group_of(record)
  local flags = string.byte(record, 1)
  if flags < HAS_GROUP then return nil end
  return decode(record).group
end

-- The score of a job of class `prio` with tag `tag`: behind every job of
-- the class with a smaller tag.
local function score(prio, tag)
  return string.format('%.17g', prio + math.floor(tag) / SPAN)
end

-- The tag a score holds.
local function tag_of_score(score, prio)
  return math.floor((tonumber(score) - prio) * SPAN + 0.5)
end

-- The class a score belongs to.
local function class_of(score)
  return math.floor(tonumber(score))
end

-- What one call knows of the queue: its settings, and the state it reads
-- and changes (virtual times, finish tags, heads, groups' counts), each
-- read at most once and written back once by `settle`.
local function context(q)
  local s = redis.call('HMGET', q.settings, 'paused', 'max_in_flight', 'rate_per_second', 'rate_burst',
    'group_max_in_flight', 'max_weight')
  return {
    q = q,
    paused = s[1] == '1',
    max_in_flight = tonumber(s[2]),
    rate = tonumber(s[3]),
    burst = tonumber(s[4]),
    group_cap = tonumber(s[5]),
    step = tonumber(s[6]) or 1,
    -- Per hash: what was read or written, and which fields to write back.
    vtime = {}, tags = {}, heads = {}, weights = {}, inflight = {},
    dirty = {vtime = {}, tags = {}, heads = {}, inflight = {}},
    -- Changes to counts, written as increments.
    pending_of = {}, backlog = {},
  }
end

-- Reads `field` of hash `name` through the call's cache, `fallback` when
-- absent.
local function cached(c, name, field, fallback)
  local cache = c[name]
  local value = cache[field]
  if value == nil then
    value = redis.call('HGET', c.q[name], field)
    if value == false then value = fallback end
    cache[field] = value
  end
  return value
end

-- Changes `field` of hash `name` in the cache (false deletes it) and
-- writes it back at `settle`.
local function store(c, name, field, value)
  c[name][field] = value
  c.dirty[name][field] = true
end

local function weight(c, group)
  return tonumber(cached(c, 'weights', group, '1'))
end

local function inflight(c, group)
  return tonumber(cached(c, 'inflight', group, '0')) or 0
end

local function at_cap(c, group)
  return c.group_cap ~= nil and inflight(c, group) >= c.group_cap
end

local function head(c, key)
  return cached(c, 'heads', key, false)
end

local function set_head(c, key, id)
  store(c, 'heads', key, id)
end

-- Counts `n` more (or fewer) jobs of `group` waiting.
local function count_waiting(c, group, n)
  c.pending_of[group] = (c.pending_of[group] or 0) + n
end

local function count_inflight(c, group, n)
  local now = inflight(c, group) + n
  store(c, 'inflight', group, now > 0 and now or false)
  c.pending_of[group] = c.pending_of[group] or 0
end

local function count_backlog(c, prio, n)
  c.backlog[prio] = (c.backlog[prio] or 0) + n
end

local function group_key(c, group)
  return c.q.group_prefix .. group
end

-- Starts the class over when its tags are used up and nothing of it
-- waits: virtual time 0, every finish tag of the class gone. Answers
-- whether it did.
local function restart_class(c, prio)
  if redis.call('ZCOUNT', c.q.pending, prio, '(' .. (prio + 1)) > 0 then return false end
  if tonumber(redis.call('HGET', c.q.backlog, prio) or '0') + (c.backlog[prio] or 0) > 0 then return false end
  store(c, 'vtime', prio, 0)
  local class = prio .. ':'
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', c.q.tags, cursor, 'MATCH', class .. '*', 'COUNT', 100)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      store(c, 'tags', page[2][i], false)
    end
  until cursor == '0'
  for key in pairs(c.tags) do
    if string.sub(key, 1, #class) == class then store(c, 'tags', key, false) end
  end
  return true
end

-- Tags for jobs entering pending, taken together: `jobs` is a list of
-- {prio, group ('' for none)}. Answers their tags, or nil when a class's
-- tag space is used up (then nothing is taken).
local function take_tags(c, jobs, restarted)
  restarted = restarted or {}
  local taken, tags = {}, {}
  for i, job in ipairs(jobs) do
    local prio, group = job[1], job[2]
    local key = prio .. ':' .. group
    local finish = taken[key] or tonumber(cached(c, 'tags', key, '0')) or 0
    local tag = math.max(tonumber(cached(c, 'vtime', prio, '0')) or 0, finish)
    local next_finish = tag + c.step / weight(c, group)
    if next_finish >= SPAN then
      if restarted[prio] or not restart_class(c, prio) then return nil end
      restarted[prio] = true
      return take_tags(c, jobs, restarted)
    end
    taken[key] = next_finish
    tags[i] = tag
  end
  for key, finish in pairs(taken) do
    store(c, 'tags', key, finish)
  end
  return tags
end

-- A job with tag `tag` of class `prio` was handed out.
local function advance(c, prio, tag)
  if tag > (tonumber(cached(c, 'vtime', prio, '0')) or 0) then store(c, 'vtime', prio, tag) end
end

-- Puts a job with a tag where it waits: straight into pending when it has
-- no group; else into pending as its group's head in its class when it
-- has none and the group is below its cap, or into its group set.
-- Collects pending's adds in `adds` (score, id pairs) for one ZADD.
local function place(c, adds, id, prio, group, tag)
  local member_score = score(prio, tag)
  if not group then
    adds[#adds + 1] = member_score
    adds[#adds + 1] = id
    return
  end
  count_waiting(c, group, 1)
  local key = prio .. ':' .. group
  if not head(c, key) and not at_cap(c, group) then
    set_head(c, key, id)
    adds[#adds + 1] = member_score
    adds[#adds + 1] = id
  else
    redis.call('ZADD', group_key(c, group), member_score, id)
    count_backlog(c, prio, 1)
  end
end

-- The next job of `group` in class `prio` becomes its head, if the group
-- has one waiting and is below its cap. Answers whether one did.
local function refill_head(c, group, prio)
  local key = prio .. ':' .. group
  set_head(c, key, false)
  if at_cap(c, group) then return false end
  local gkey = group_key(c, group)
  local next = redis.call('ZRANGE', gkey, prio, '(' .. (prio + 1), 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  if #next == 0 then return false end
  redis.call('ZREM', gkey, next[1])
  redis.call('ZADD', c.q.pending, next[2], next[1])
  set_head(c, key, next[1])
  count_backlog(c, prio, -1)
  return true
end

-- Gives `group` a head in every class it has jobs waiting in and no head:
-- when it drops below its cap. Costs O(classes * log N).
local function restore_heads(c, group)
  if at_cap(c, group) then return end
  local gkey, from = group_key(c, group), '-inf'
  while true do
    local first = redis.call('ZRANGE', gkey, from, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if #first == 0 then return end
    local prio = class_of(first[2])
    if not head(c, prio .. ':' .. group) then refill_head(c, group, prio) end
    from = prio + 1
  end
end

-- A head met while its group is at the cap goes back to the group set.
local function withhold(c, id, prio, group, member_score)
  redis.call('ZADD', group_key(c, group), member_score, id)
  set_head(c, prio .. ':' .. group, false)
  count_backlog(c, prio, 1)
end

-- A job of `group` left processing (acked, given back, taken back).
local function leave_processing(c, group)
  if not group then return end
  local was_capped = at_cap(c, group)
  count_inflight(c, group, -1)
  if was_capped then restore_heads(c, group) end
end

-- Writes back what the call changed, and wakes the long polls of every
-- instance when pending went from empty to not empty (`was_empty`, read
-- before the call changed it): a claim waits only while nothing is
-- claimable for it, so that edge, a resume and a freed slot are the only
-- ones that need a message.
local function settle(c, was_empty)
  local q = c.q
  for name, fields in pairs(c.dirty) do
    local sets, gone = {}, {}
    for field in pairs(fields) do
      local value = c[name][field]
      if value == false then
        gone[#gone + 1] = field
      else
        sets[#sets + 1] = field
        sets[#sets + 1] = type(value) == 'number' and string.format('%.17g', value) or value
      end
    end
    if #sets > 0 then redis.call('HSET', q[name], unpack(sets)) end
    if #gone > 0 then redis.call('HDEL', q[name], unpack(gone)) end
  end
  for prio, n in pairs(c.backlog) do
    if n ~= 0 then redis.call('HINCRBY', q.backlog, prio, n) end
  end
  for group, n in pairs(c.pending_of) do
    local waiting
    if n ~= 0 then
      waiting = tonumber(redis.call('ZINCRBY', q.groups, n, group))
    else
      waiting = tonumber(redis.call('ZSCORE', q.groups, group) or '0')
    end
    if waiting <= 0 and inflight(c, group) <= 0 then
      redis.call('ZREM', q.groups, group)
    elseif redis.call('ZSCORE', q.groups, group) == false then
      redis.call('ZADD', q.groups, 0, group)
    end
  end
  if was_empty and redis.call('ZCARD', q.pending) > 0 then
    redis.call('PUBLISH', q.wake, '')
  end
end

-- Makes jobs claimable behind the jobs waiting in their class (of their
-- group): `moves` holds {id, job, ready} triples. Answers false, writing
-- nothing, when a class's tags are used up.
local function make_pending(c, moves)
  if #moves == 0 then return true end
  local wanted = {}
  for i, move in ipairs(moves) do
    wanted[i] = {move[2].prio, move[2].group or ''}
  end
  local tags = take_tags(c, wanted)
  if not tags then return false end
  local records, adds = {}, {}
  for i, move in ipairs(moves) do
    local id, job = move[1], move[2]
    job.ready = move[3]
    records[#records + 1] = id
    records[#records + 1] = encode(job)
    place(c, adds, id, job.prio, job.group, tags[i])
  end
  redis.call('HSET', c.q.jobs, unpack(records))
  if #adds > 0 then redis.call('ZADD', c.q.pending, unpack(adds)) end
  return true
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
-- earliest first; answers how many.
local function promote_due(c, now, limit)
  local q = c.q
  local due = redis.call('ZRANGE', q.scheduled, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
  if #due == 0 then return 0 end
  local ids, moves = {}, {}
  for i = 1, #due, 2 do
    ids[#ids + 1] = due[i]
  end
  local records = redis.call('HMGET', q.jobs, unpack(ids))
  for i, id in ipairs(ids) do
    moves[i] = {id, decode(records[i]), tonumber(due[2 * i])}
  end
  if not make_pending(c, moves) then return 0 end
  redis.call('ZREM', q.scheduled, unpack(ids))
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

-- Whether the queue's jobs in flight just dropped below max_in_flight:
-- then claims waiting for a slot are told.
local function wake_if_slot_freed(c, before)
  if c.max_in_flight and before >= c.max_in_flight and redis.call('ZCARD', c.q.processing) < c.max_in_flight then
    redis.call('PUBLISH', c.q.wake, '')
  end
end

-- Acknowledges jobs: each one whose token is its current lease is deleted.
-- `pairs` is a flat list of id, token. Answers one status per pair, in
-- order: 'OK', 'LEASE_LOST' or 'NOT_FOUND'.
local function ack_all(c, pairs)
  local q = c.q
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
    local in_flight = c.max_in_flight and redis.call('ZCARD', q.processing)
    -- Groups count jobs in flight; a queue without any has none to read.
    if redis.call('HLEN', q.inflight) > 0 then
      for _, record in ipairs(redis.call('HMGET', q.jobs, unpack(gone))) do
        leave_processing(c, record and group_of(record))
      end
    end
    redis.call('ZREM', q.processing, unpack(gone))
    redis.call('HDEL', q.leases, unpack(gone))
    redis.call('HDEL', q.jobs, unpack(gone))
    if in_flight then wake_if_slot_freed(c, in_flight) end
  end
  return statuses
end

-- Ends a lease: the job leaves processing, attempts + 1, and it goes back to
-- pending (or scheduled after `delay`), or to the DLQ when `bury` is set or
-- its attempts are used up. `prio` (optional) moves it to another class;
-- `error` (optional) becomes its last error. Answers the job's new state,
-- or nil when its class's tags are used up (then nothing was written).
local function end_lease(c, id, now, delay, bury, prio, error)
  local q = c.q
  local job = decode(redis.call('HGET', q.jobs, id))
  job.attempts = job.attempts + 1
  if prio then job.prio = prio end
  if error then job.error = error end
  local state = 'pending'
  if bury or job.attempts >= job.max then
    state = 'dead'
  elseif delay > 0 then
    state = 'scheduled'
  elseif not make_pending(c, {{id, job, now}}) then
    return nil
  end
  local in_flight = c.max_in_flight and redis.call('ZCARD', q.processing)
  redis.call('ZREM', q.processing, id)
  redis.call('HDEL', q.leases, id)
  leave_processing(c, job.group)
  if state == 'dead' then
    make_dead(q, id, job, now)
  elseif state == 'scheduled' then
    make_scheduled(q, id, job, now + delay)
  end
  if in_flight then wake_if_slot_freed(c, in_flight) end
  return state
end

-- Redis orders members bytewise; Lua's < follows the server's locale.
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- One page of sorted set `key`, highest score first (ties by member,
-- descending, as Redis orders them), after the member `after_member` of
-- score `after_score` (nil for the first page): up to `limit` {member,
-- score} pairs.
local function page_down(key, limit, after_score, after_member)
  local out, offset = {}, 0
  local top = after_score and string.format('%.17g', after_score) or '+inf'
  while #out < limit do
    local chunk = redis.call('ZRANGE', key, top, '-inf', 'BYSCORE', 'REV', 'LIMIT', offset, limit, 'WITHSCORES')
    if #chunk == 0 then break end
    for i = 1, #chunk, 2 do
      local member, member_score = chunk[i], chunk[i + 1]
      local seen = after_score and tonumber(member_score) == after_score and not bytes_before(member, after_member)
      if not seen and #out < limit then out[#out + 1] = {member, member_score} end
    end
    offset = offset + #chunk / 2
  end
  return out
end
