-- A job's history, kept while the queue's `history_ms` is set: a list per
-- job, `<base>history:<id>` in its shard's slot, of its events, each
-- "<ms> <event> <detail>": 'enqueued <priority>', 'claimed <fence>
-- <worker>', 'acked', 'nacked <state> <error>', 'lease_expired <state>',
-- 'cancelled', 'expired', 'requeued', 'deleted'. The last HISTORY_KEPT
-- events are kept, and the list lapses `history_ms` after its last one,
-- whatever became of the job.

local HISTORY_KEPT = 100

local function history_key(q, id)
  return key_base(q) .. 'history:' .. id
end

-- Whether the call's queue keeps histories.
local function noting(c)
  return (c.settings.history_ms or 0) > 0
end

-- Adds an event to job `id`'s history, at `now`, when the queue keeps them.
local function note(c, id, now, event)
  if not noting(c) then return end
  local key = history_key(c.q, id)
  if redis.call('RPUSH', key, ms(now) .. ' ' .. event) > HISTORY_KEPT then
    redis.call('LPOP', key)
  end
  redis.call('PEXPIRE', key, c.settings.history_ms)
end
