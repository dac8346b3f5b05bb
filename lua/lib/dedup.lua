-- Deduplication by key: who holds a key, letting keys go when their jobs
-- end, and the sweeper's release of keys whose ttl has passed. A key is
-- held by one job, its owner, while the owner lives (waiting or
-- processing) and until its `until` (enqueued + ttl_ms) has passed; an
-- owner deleted, or dropped on expiry, lets its key go at once. Every
-- write of `dedup` compares the owner first: a job that lost its key to a
-- newer one never lets the newer one's key go.

-- The `until` (ms) and the owner of a `dedup` entry.
local function held_by(entry)
  local until_, owner = string.match(entry, '^(%d+):(.*)$')
  return tonumber(until_), owner
end

-- Where job `id` is: 'waiting' (pending, scheduled, in a group set),
-- 'processing', 'ended' (dead or completed) or 'gone'.
local function life_of(q, id)
  if redis.call('HEXISTS', q.jobs, id) == 0 then return 'gone' end
  if redis.call('ZSCORE', q.processing, id) then return 'processing' end
  if redis.call('ZSCORE', q.dead, id) or redis.call('ZSCORE', q.completed, id) then return 'ended' end
  return 'waiting'
end

-- Forgets that job `id` held `key`.
local function forget_owner(c, id)
  add(c, 'keyed', -redis.call('HDEL', c.q.dedup_of, id))
end

-- Jobs `ids` ended at `now`: each one that still owns its key lets it go
-- when its `until` has passed or `removed` is set (the job is deleted or
-- dropped), else keeps it until then (`dedup:until` has the sweeper let
-- it go). A job whose key went to a newer job only forgets it.
local function let_go(c, ids, now, removed)
  if number(c, 'keyed') <= 0 then return end
  local q = c.q
  local keys = redis.call('HMGET', q.dedup_of, unpack(ids))
  for i, key in ipairs(keys) do
    if key then
      local id, entry = ids[i], redis.call('HGET', q.dedup, key)
      local until_, owner
      if entry then until_, owner = held_by(entry) end
      if owner ~= id then
        forget_owner(c, id)
      elseif removed or until_ <= now then
        redis.call('HDEL', q.dedup, key)
        forget_owner(c, id)
      else
        redis.call('ZADD', q.dedup_until, until_, key)
      end
    end
  end
end

-- Lets go up to `limit` keys whose `until` has come by `now` and whose
-- owner has ended. A key whose owner lives again (a dead job requeued) or
-- that a newer job took stays, for that job's end to decide.
local function release_due(c, now, limit)
  if number(c, 'keyed') <= 0 then return end
  local q = c.q
  local due = redis.call('ZRANGE', q.dedup_until, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, limit)
  if #due == 0 then return end
  redis.call('ZREM', q.dedup_until, unpack(due))
  for _, key in ipairs(due) do
    local entry = redis.call('HGET', q.dedup, key)
    if entry then
      local until_, owner = held_by(entry)
      local life = until_ <= now and life_of(q, owner)
      if not life then
        redis.call('ZADD', q.dedup_until, until_, key)
      elseif life == 'ended' or life == 'gone' then
        redis.call('HDEL', q.dedup, key)
        if redis.call('HGET', q.dedup_of, owner) == key then forget_owner(c, owner) end
      end
    end
  end
end

-- How long (ms) job `id`, acked at `now`, still holds its key: it is kept
-- completed at least that long, so that an enqueue the key turns away
-- answers it. Nil when it holds none past now.
local function held_for(c, id, now)
  local key = redis.call('HGET', c.q.dedup_of, id)
  local entry = key and redis.call('HGET', c.q.dedup, key)
  if not entry then return nil end
  local until_, owner = held_by(entry)
  if owner ~= id or until_ <= now then return nil end
  return until_ - now
end
