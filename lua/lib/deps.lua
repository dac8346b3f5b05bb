-- Dependencies by counting (design note 19). A job enqueued with `after`
-- waits (`waiting`) with a count of its dependencies not finished
-- (`after:left`). Each dependency knows its dependants (its dependants
-- set). When a dependency ends, the dependants in its slot hear of it in
-- the same call; for those elsewhere (another queue, another shard) it
-- keeps its outcome in its `outbox` until a sweeper has told each one in
-- its own slot (`tell`) and crossed it off (`sent`); a sweeper that died
-- half-way leaves the outbox to the next. Telling is idempotent, keyed by the pair in
-- `after:done`: however often an end is told, it counts once. A dependant
-- is released (pending, or scheduled for its delay) when its count
-- reaches 0; a dependency that ends dead, cancelled or deleted fails it
-- (to the DLQ, its last error naming the dependency) unless it was
-- enqueued with on_dependency_failure 'ignore'.

local OUTCOME_NAMES = {c = 'completed', d = 'dead', x = 'cancelled', g = 'deleted'}

-- Job `id`'s state as a dependency: 'l' while it lives (waiting, pending,
-- scheduled, processing), else its outcome ('c' completed, with its
-- result, 'd' dead, 'x' cancelled, 'g' gone).
local function outcome_of(q, id)
  if redis.call('HEXISTS', q.jobs, id) == 0 then return 'g', '' end
  if redis.call('ZSCORE', q.dead, id) then return 'd', '' end
  if redis.call('ZSCORE', q.completed, id) then
    if redis.call('HEXISTS', q.cancels, id) == 1 then return 'x', '' end
    return 'c', string.match(redis.call('HGET', q.results, id) or '', '^%d+:(.*)$') or ''
  end
  return 'l', ''
end

-- Adds `member` to the dependants of job `id`.
local function add_dependant(c, id, member)
  local key = dependants_key(c.q, id)
  if redis.call('SADD', key, member) == 1 and redis.call('SADD', c.q.depended, id) == 1 then add(c, 'depended', 1) end
end

-- Job `id` has no dependants left to tell.
local function drop_dependants(c, id)
  redis.call('DEL', dependants_key(c.q, id))
  if redis.call('SREM', c.q.depended, id) == 1 then add(c, 'depended', -1) end
end

-- Job `id` ended: its own dependencies' entries go.
local function forget_after(c, id)
  local q = c.q
  local entry = redis.call('HGET', q.after, id)
  if not entry then return end
  redis.call('HDEL', q.after_done, unpack(pairs_of(id, entry)))
  redis.call('HDEL', q.after, id)
  redis.call('HDEL', q.after_left, id)
  add(c, 'depending', -1)
end

-- Makes waiting job `id` pending at `now`, or scheduled for its delay
-- (counted from now; its record keeps it as ready - enqueued).
local function release(c, id, now)
  local q = c.q
  redis.call('ZREM', q.waiting, id)
  local job = decode(redis.call('HGET', q.jobs, id))
  local delay = job.ready - job.enqueued
  -- A class whose tags ran out takes it in from `scheduled`, later.
  if delay > 0 or not make_pending(c, {{id, job, now}}) then make_scheduled(q, id, job, now + delay) end
end

-- Tells job `id` of this slot, at `now`, that its dependency `ref` ended
-- with `outcome` ('c', 'd', 'x' or 'g') and `result`. Counted once per
-- pair. A job not made yet (its enqueue registered with the dependency
-- first) finds it in `after:early` when it is made.
local function tell(c, id, ref, outcome, result, now)
  local q = c.q
  local pair = id .. ' ' .. ref
  local entry = redis.call('HGET', q.after, id)
  if not entry then
    if redis.call('HEXISTS', q.jobs, id) == 0 and redis.call('HSETNX', q.after_done, pair, outcome .. ':' .. result) == 1 then
      redis.call('ZADD', q.after_early, ms(now), pair)
    end
    return
  end
  if not string.find(entry .. ' ', ' ' .. ref .. ' ', 2, true) then return end
  if redis.call('HSETNX', q.after_done, pair, outcome .. ':' .. result) == 0 then return end
  if not redis.call('ZSCORE', q.waiting, id) then return end
  if outcome ~= 'c' and string.sub(entry, 1, 1) == 'd' then
    redis.call('ZREM', q.waiting, id)
    leave_waiting(c, {id})
    local job = decode(redis.call('HGET', q.jobs, id))
    job.error = 'dependency ' .. ref .. ' ' .. OUTCOME_NAMES[outcome]
    make_dead(q, id, job, now)
    ended(c, {id}, now, false, 'd')
    return
  end
  if redis.call('HINCRBY', q.after_left, id, -1) <= 0 then release(c, id, now) end
end

-- Job `id` ended with `outcome` and `result`: its dependants in this slot
-- hear of it now; those elsewhere from its `outbox` entry, which lasts
-- until prioq crossed them all off.
local function tell_dependants(c, id, outcome, result, now)
  local q = c.q
  local key = dependants_key(q, id)
  local members = redis.call('SMEMBERS', key)
  if #members == 0 then return end
  local ref, here, elsewhere = queue_name(q) .. '/' .. id, {}, 0
  for _, member in ipairs(members) do
    if string.byte(member, 1) == 61 then
      here[#here + 1] = member
    else
      elsewhere = elsewhere + 1
    end
  end
  for _, member in ipairs(here) do
    tell(c, string.sub(member, 2), ref, outcome, result, now)
  end
  if elsewhere == 0 then
    drop_dependants(c, id)
    return
  end
  if #here > 0 then redis.call('SREM', key, unpack(here)) end
  redis.call('HSET', q.outbox, id, outcome .. ':' .. result)
  redis.call('ZADD', q.outbox_due, ms(now), id)
  c.outboxed = (c.outboxed or 0) + 1
end

-- The jobs the call ended tell their dependants (see `ended`), those that
-- fail in turn tell theirs, and the ended jobs' own dependencies go.
on_ended = function(c)
  local told, i = c.told, 1
  while i <= #told do
    local id, outcome, result = told[i][1], told[i][2], told[i][3]
    if number(c, 'depending') > 0 then forget_after(c, id) end
    if number(c, 'depended') > 0 then tell_dependants(c, id, outcome, result, c.ended_at) end
    i = i + 1
  end
  c.told = nil
end

-- Job `id`, just made waiting with the dependencies of `after` ("<d|i>"
-- then refs, '=' before one in this slot), registers with those in this
-- slot, and counts those that ended already: those here, and those
-- elsewhere whose end was told before it was made.
local function depend(c, id, after, now)
  local q = c.q
  local left, refs, ended_already = 0, {string.sub(after, 1, 1)}, {}
  for ref in string.gmatch(string.sub(after, 3), '%S+') do
    local here = string.byte(ref, 1) == 61
    if here then ref = string.sub(ref, 2) end
    refs[#refs + 1] = ref
    left = left + 1
    if here then
      local other = string.match(ref, '/(.*)$')
      local outcome, result = outcome_of(q, other)
      if outcome == 'l' then
        add_dependant(c, other, '=' .. id)
      else
        ended_already[#ended_already + 1] = {ref, outcome, result}
      end
    else
      local pair = id .. ' ' .. ref
      local early = redis.call('HGET', q.after_done, pair)
      if early then
        redis.call('HDEL', q.after_done, pair)
        redis.call('ZREM', q.after_early, pair)
        local outcome, result = string.match(early, '^(%a):(.*)$')
        ended_already[#ended_already + 1] = {ref, outcome, result}
      end
    end
  end
  redis.call('ZADD', q.waiting, ms(now), id)
  redis.call('HSET', q.after, id, table.concat(refs, ' '))
  redis.call('HSET', q.after_left, id, left)
  add(c, 'depending', 1)
  for _, done in ipairs(ended_already) do
    tell(c, id, done[1], done[2], done[3], now)
  end
end

-- Forgets, at `now`, the ends told before their dependants were made that
-- are older than `age` ms (their enqueue never came), up to `limit`.
local function forget_early(q, now, age, limit)
  local pairs_ = redis.call('ZRANGE', q.after_early, '-inf', ms(now - age), 'BYSCORE', 'LIMIT', 0, limit)
  if #pairs_ == 0 then return end
  redis.call('ZREM', q.after_early, unpack(pairs_))
  redis.call('HDEL', q.after_done, unpack(pairs_))
end
