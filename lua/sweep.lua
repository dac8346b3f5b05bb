-- sweep: one pass of the sweeper over one queue. Takes back up to `batch`
-- leases whose deadline has passed (attempts + 1, last error 'lease
-- expired', back to pending, or scheduled for its backoff, or to the DLQ
-- once attempts reach max_attempts), ends up to `batch` waiting jobs whose expiry has come
-- (see `expire`), promotes up to `batch` due scheduled jobs, deletes up to
-- `batch` completed jobs whose retention has ended, lets go up to `batch`
-- dedup keys whose ttl has passed since their jobs ended, and looks at
-- up to `batch` finish tags and groups from where the last pass stopped:
-- tags at or behind their class's virtual time are dropped (they tag a
-- group's next job no differently), and a group below its cap gets back
-- the heads it lacks (after the cap was raised); and lists up to `batch`
-- schedules that are due, for the caller to fire (see `fire`), and the
-- fires of a sharded queue owed for longer than ARGV[6] ms, for the
-- caller to pay (see `pay`); and forgets up to `batch` answers of claims
-- with a request id whose leases have ended, and ends told an hour ago
-- to dependants never made (see lib/deps.lua); and gives a listed queue
-- the marks it lacks (see `give_marks`) and packs its settings anew (see
-- `renew_packed`). Safe to run from every instance at once: a lease is
-- taken back exactly once.
-- KEYS: LIFE, CLAIMS, SCHEDULES, push
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] batch,
--   ARGV[4] tags cursor, ARGV[5] groups cursor ('0' to start over),
--   ARGV[6] how long a fire may be owed before the sweeper pays it (ms)
-- Returns: {leases taken back, of which dead-lettered, jobs promoted,
--   next tags cursor, next groups cursor, completed jobs deleted, now,
--   the due schedules: name, fire time due and definition each, the
--   shards the queue is split over as this shard records it, the fires
--   owed: job id and schedule definition each, waiting jobs expired,
--   {the ended jobs whose dependants elsewhere are still to be told (see
--   `outbox`), 1 when the shard holds a push target (the home does) else
--   0}}
-- Errors: none; every outcome is in the reply.

-- How long an end told before its dependant was made waits for the
-- dependant's enqueue (which follows its registration at once).
local EARLY_KEPT_MS = 3600000

redis.register_function{
  function_name = 'sweep_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('sweep', keys, argv)
    local c = context(q)
    if c.meta.registered == '1' then
      if get(c, 'layout') ~= META_MARK then give_marks(q) end
      -- Settings an older version wrote: in force from here.
      if renew_packed(q.meta) then c = context(q) end
    end
    local now, batch = now_ms(), tonumber(argv[3])
    local overdue = redis.call('ZRANGE', q.processing, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, batch)
    local taken, buried = 0, 0
    for _, id in ipairs(overdue) do
      local state = end_lease(c, id, now, nil, false, nil, 'lease expired', 'lease_expired')
      if state then taken = taken + 1 end
      if state == 'dead' then buried = buried + 1 end
    end
    local expired = expire_due(c, now, batch)
    local promoted = promote_due(c, now, batch)
    promote_aged(c, now, batch)
    local purged = redis.call('ZRANGE', q.completed, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, batch)
    if #purged > 0 then
      redis.call('ZREM', q.completed, unpack(purged))
      redis.call('HDEL', q.results, unpack(purged))
      redis.call('HDEL', q.leases, unpack(purged))
      redis.call('HDEL', q.jobs, unpack(purged))
      forget_cancels(c, purged)
    end
    release_due(c, now, batch)
    forget_early(q, now, EARLY_KEPT_MS, batch)

    local answered = redis.call('ZRANGE', q.claims_until, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, batch)
    if #answered > 0 then
      redis.call('ZREM', q.claims_until, unpack(answered))
      redis.call('HDEL', q.claims, unpack(answered))
    end

    local tags = redis.call('HSCAN', q.meta, argv[4], 'MATCH', 't:*', 'COUNT', batch)
    for i = 1, #tags[2], 2 do
      local field = tags[2][i]
      local prio = tonumber(string.match(field, '^t:(%d+):'))
      if c.dirty[field] == nil and tonumber(tags[2][i + 1]) <= number(c, fields_of(prio).vtime) then
        put(c, field, false)
      end
    end
    local groups = redis.call('ZSCAN', q.groups, argv[5], 'COUNT', batch)
    for i = 1, #groups[2], 2 do
      if groups[2][i] ~= MARK then restore_heads(c, groups[2][i]) end
    end
    local due = {}
    local names = redis.call('ZRANGE', q.due, '-inf', ms(now), 'BYSCORE', 'LIMIT', 0, batch, 'WITHSCORES')
    for i = 1, #names, 2 do
      due[#due + 1] = names[i]
      due[#due + 1] = names[i + 1]
      due[#due + 1] = redis.call('HGET', q.schedules, names[i]) or ''
    end
    local owed, debts = {}, redis.call('HGETALL', q.owed)
    for i = 1, #debts, 2 do
      local since, spec = string.match(debts[i + 1], '^(%d+):(.*)$')
      if tonumber(since) <= now - tonumber(argv[6]) then
        owed[#owed + 1] = debts[i]
        owed[#owed + 1] = spec
      end
    end
    settle(c)
    return {taken, buried, promoted, tags[1], groups[1], #purged, now, due, math.abs(tonumber(c.meta.shards) or 1), owed,
      expired, {redis.call('ZCARD', q.outbox_due), redis.call('EXISTS', q.push)}}
  end,
}
