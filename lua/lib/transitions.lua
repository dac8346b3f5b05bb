-- Transitions: a job's end, pending, scheduled and dead, promotions,
-- the job's view, leases, acks and a lease's end; settling a call.

-- Jobs `ids` ended at `now` (acked, dead-lettered, deleted, expired):
-- their progress and their expiry go, their dedup keys are let go (at
-- once when `removed`: deleted or dropped, else once their ttl has
-- passed), and those waiting on them hear of it at `settle`: the waits,
-- and the jobs that depend on them (`outcome`: 'c' completed, with its
-- result in `results[id]`, 'd' dead, 'x' cancelled, 'g' deleted; see
-- lib/deps.lua; none for a job that had ended before).
local function ended(c, ids, now, removed, outcome, results)
  if #ids == 0 then return end
  if outcome and (number(c, 'depending') > 0 or number(c, 'depended') > 0) then
    local told = c.told or {}
    for _, id in ipairs(ids) do
      told[#told + 1] = {id, outcome, results and results[id] or ''}
    end
    c.told = told
  end
  if number(c, 'progress') > 0 then
    add(c, 'progress', -redis.call('HDEL', c.q.progress, unpack(ids)))
  end
  if number(c, 'backing_off') > 0 then
    add(c, 'backing_off', -redis.call('HDEL', c.q.backoff, unpack(ids)))
  end
  if number(c, 'expiring') > 0 then
    local gone = redis.call('HDEL', c.q.expiry, unpack(ids))
    if gone > 0 then
      add(c, 'expiring', -gone)
      redis.call('ZREM', c.q.expiry_due, unpack(ids))
    end
  end
  let_go(c, ids, now, removed)
  c.ended = c.ended or {}
  for _, id in ipairs(ids) do
    c.ended[#c.ended + 1] = id
  end
  c.ended_at = now
end

-- Forgets the cancels asked of jobs `ids`, gone now.
local function forget_cancels(c, ids)
  if number(c, 'cancelling') > 0 then
    add(c, 'cancelling', -redis.call('HDEL', c.q.cancels, unpack(ids)))
  end
end

-- Ends job `id` (its record `record`), out of where it was, cancelled at
-- `now`: kept, `cancelled`, for its retention (its `cancels` entry and an
-- empty result, in `completed` like a completed job), or removed with its
-- cancel when it has none.
local function end_cancelled(c, id, record, now)
  local q, retain = c.q, retain_of(record)
  if retain > 0 then
    if redis.call('HSETNX', q.cancels, id, ':') == 1 then add(c, 'cancelling', 1) end
    redis.call('ZADD', q.completed, ms(now + retain), id)
    redis.call('HSET', q.results, id, ms(now) .. ':')
  else
    redis.call('HDEL', q.jobs, id)
    forget_cancels(c, {id})
  end
  note(c, id, now, 'cancelled')
  ended(c, {id}, now, retain == 0, 'x')
end

-- A number as `meta` keeps it: whole ones as integers (a quicker
-- conversion), tags with a fraction exactly.
local function number_text(n)
  if n == math.floor(n) then return string.format('%d', n) end
  return string.format('%.17g', n)
end

-- Writes back what the call changed, keeps each named group's count of
-- jobs waiting, and wakes the long polls of every instance when pending
-- went from empty to not empty: a claim waits only while nothing is
-- claimable for it, so that edge, a resume and a freed slot are the only
-- ones that need a message (and a claim that stopped moving expired jobs
-- out before it reached the live ones, `c.look_again`).
local function settle(c)
  local q = c.q
  if c.told then on_ended(c) end
  if next(c.dirty) then
    -- Made with room for four fields (most calls write one to four; an
    -- enqueue into many classes writes more, and the list grows past
    -- them): a table grown one entry at a time is made anew at 1, 2, 4
    -- and 8 entries, about 5,000 instructions a claim. Its first n
    -- entries are the fields and values to write.
    local sets, gone, n = {false, false, false, false, false, false, false, false}, {}, 0
    for field in pairs(c.dirty) do
      local value = c.meta[field]
      if value == false then
        gone[#gone + 1] = field
      else
        sets[n + 1] = field
        sets[n + 2] = type(value) == 'number' and number_text(value) or value
        n = n + 2
      end
    end
    if n > 0 then redis.call('HSET', q.meta, unpack(sets, 1, n)) end
    if #gone > 0 then redis.call('HDEL', q.meta, unpack(gone)) end
  end
  if c.aging then redis.call('ZADD', q.aging, unpack(c.aging)) end
  -- `groups` lists every named group with jobs waiting (its score) or in
  -- flight: a ZINCRBY of 0 lists a group in flight that was not.
  for group, n in pairs(c.waiting_of or NONE) do
    if n ~= 0 or inflight(c, group) > 0 then
      if tonumber(redis.call('ZINCRBY', q.groups, decimal(n), group)) <= 0 and inflight(c, group) <= 0 then
        redis.call('ZREM', q.groups, group)
      end
    else
      local waiting = redis.call('ZSCORE', q.groups, group)
      if waiting and tonumber(waiting) <= 0 then redis.call('ZREM', q.groups, group) end
    end
  end
  if (c.was_empty or c.look_again) and redis.call('ZCARD', q.pending) > 0 then
    redis.call('PUBLISH', q.wake, '')
  end
  if c.ended and number(c, 'w') >= c.ended_at then
    redis.call('PUBLISH', string.sub(q.wake, 1, -5) .. 'done', table.concat(c.ended, ' '))
  end
end

-- Makes jobs claimable behind the jobs waiting in their class (of their
-- group): `moves` holds {id, job, ready} triples. Answers false, writing
-- nothing, when a class's tags are used up.
local function make_pending(c, moves)
  if #moves == 0 then return true end
  local prios, groups, fields, seen = {}, {}, {}, {}
  for i, move in ipairs(moves) do
    prios[i], groups[i] = move[2].prio, move[2].group or ''
    want_tag_fields(fields, seen, prios[i], groups[i])
  end
  fetch(c, fields)
  local tags = take_tags(c, prios, groups)
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

-- Bytes waiting (max_pending_bytes): while the queue has the setting,
-- `sizes` holds the body size of each job waiting that was counted (it
-- entered waiting since the setting was set), and `meta`'s pending_bytes
-- their sum. A job enters at its enqueue, a lease's end that puts it
-- back and a requeue; it leaves when claimed, taken out, expired or dead
-- while waiting. A job leaves by the size it entered with, so a
-- record rewritten meanwhile changes nothing; one never counted leaves
-- nothing. Without the setting `sizes` is empty (see configure.lua) and
-- neither costs anything.

-- Counts job `id`, of body `body`, as waiting.
local function enter_waiting(c, id, body)
  if not c.settings.max_pending_bytes then return end
  redis.call('HSET', c.q.sizes, id, #body)
  add(c, 'pending_bytes', #body)
end

-- Counts jobs `ids` as no longer waiting.
local function leave_waiting(c, ids)
  if not c.settings.max_pending_bytes or #ids == 0 then return end
  local sizes, gone = redis.call('HMGET', c.q.sizes, unpack(ids)), 0
  for i = 1, #ids do
    gone = gone + (tonumber(sizes[i]) or 0)
  end
  if gone > 0 then
    redis.call('HDEL', c.q.sizes, unpack(ids))
    add(c, 'pending_bytes', -gone)
  end
end

-- Takes a waiting job (pending, scheduled, or in its group set) out of
-- where it waits; `record` is its record. A group's head taken out is
-- replaced by the group's next job. Answers whether the job was waiting.
local function take_out(c, id, record)
  local q = c.q
  if redis.call('ZREM', q.scheduled, id) == 1
    or (number(c, 'depending') > 0 and redis.call('ZREM', q.waiting, id) == 1) then
    leave_waiting(c, {id})
    return true
  end
  local group = group_of(record)
  if not group then
    if redis.call('ZREM', q.pending, id) == 0 then return false end
    leave_waiting(c, {id})
    return true
  end
  local prio = decode(record).prio
  if redis.call('ZREM', q.pending, id) == 1 then
    -- The head's successor takes its place: pending did not go from
    -- empty to not empty, nobody needs waking.
    if c.was_empty == nil then c.was_empty = false end
    refill_head(c, group, prio)
  elseif redis.call('ZREM', group_key(c, group), id) == 1 then
    add(c, fields_of(prio).backlog, -1)
  else
    return false
  end
  leave_waiting(c, {id})
  count_waiting(c, group, -1)
  return true
end

-- The deadline (ms) of an `expiry` entry, and whether its job is dropped
-- rather than dead-lettered when it expires.
local function deadline_of(entry)
  local deadline, mode = string.match(entry, '^(%d+)(.*)$')
  return tonumber(deadline), mode == ':drop'
end

-- Ends at `now` the jobs `gone` ({id, record, expiry entry} each) whose
-- deadline came before they were claimed, already out of where they
-- waited: each goes to the DLQ with the last error 'expired', or is
-- removed when its on_expiry is drop. `c.expired` counts them.
local function expire(c, gone, now)
  if #gone == 0 then return end
  local q, buried, dropped = c.q, {}, {}
  for _, job in ipairs(gone) do
    local id, record, entry = job[1], job[2], job[3]
    local _, drop = deadline_of(entry)
    note(c, id, now, 'expired')
    if drop then
      dropped[#dropped + 1] = id
    else
      buried[#buried + 1] = id
      local decoded = decode(record)
      decoded.error = 'expired'
      make_dead(q, id, decoded, now)
    end
  end
  if #dropped > 0 then
    redis.call('HDEL', q.jobs, unpack(dropped))
    let_go(c, dropped, now, true)
  end
  ended(c, buried, now, false, 'd')
  ended(c, dropped, now, true, 'g')
  c.expired = (c.expired or 0) + #gone
end

-- Ends up to `limit` waiting jobs whose deadline has come by `now`,
-- earliest deadline first (see `expire`); answers how many. Each costs
-- O(log N), once: a queue whose jobs all expired is emptied `limit` jobs a
-- call.
local function expire_due(c, now, limit)
  if number(c, 'expiring') <= 0 then return 0 end
  local q = c.q
  local ids = redis.call('ZRANGE', q.expiry_due, '-inf', ms(now), 'BYSCORE', 'LIMIT', '0', decimal(limit))
  if #ids == 0 then return 0 end
  local records = redis.call('HMGET', q.jobs, unpack(ids))
  local entries = redis.call('HMGET', q.expiry, unpack(ids))
  local gone, stale = {}, {}
  for i, id in ipairs(ids) do
    if records[i] and take_out(c, id, records[i]) then
      gone[#gone + 1] = {id, records[i], entries[i] or ms(now)}
    elseif not records[i] and entries[i] then
      stale[#stale + 1] = id
    end
  end
  -- Entries of jobs no longer waiting, or gone, that a version of prioq
  -- without expiry claimed or ended: out of `expiry:due` (a lease's end
  -- looks at `expiry`), and out of `expiry` once the job is gone.
  redis.call('ZREM', q.expiry_due, unpack(ids))
  if #stale > 0 then add(c, 'expiring', -redis.call('HDEL', q.expiry, unpack(stale))) end
  expire(c, gone, now)
  return #gone
end

-- Moves up to `limit` scheduled jobs whose time has come to pending,
-- earliest first; answers how many. Every claim calls it, and most
-- queues schedule nothing: an EXISTS (about 2,800 instructions) spares
-- them the range's (about 10,000 with `now` made text).
local function promote_due(c, now, limit)
  restore_throttled(c, now)
  local q = c.q
  if redis.call('EXISTS', q.scheduled) == 0 then return 0 end
  local due = redis.call('ZRANGE', q.scheduled, '-inf', ms(now), 'BYSCORE', 'LIMIT', '0', decimal(limit), 'WITHSCORES')
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

-- Priority aging: a job without a group that waited max_wait_ms in its
-- class moves to the front of the next more urgent class, after the jobs
-- that aged into it before (FIFO among the aged), and ages from there
-- again; up to `limit` jobs a call. `aging` holds, for each job that
-- entered pending while the queue had max_wait_ms, when it ages next.
-- The steps are counted from when each was due, not from when a call
-- came to it: a job whose steps fell due between two calls takes them
-- all in the later one (to the front of the class it would have reached),
-- so a job of class p is in class 0 p × max_wait_ms after it entered, at
-- the first call after. An entry of a job no longer pending (claimed,
-- cancelled, deleted...) or in the most urgent class goes when its time
-- comes. Costs O(log N) and O(log N) per job aged.
local function promote_aged(c, now, limit)
  local wait, q = c.settings.max_wait_ms, c.q
  if not wait then return end
  local due = redis.call('ZRANGE', q.aging, '-inf', ms(now), 'BYSCORE', 'LIMIT', '0', decimal(limit), 'WITHSCORES')
  if #due == 0 then return end
  local adds, again, gone = {}, {}, {}
  for i = 1, #due, 2 do
    local id, at = due[i], tonumber(due[i + 1])
    local member_score = redis.call('ZSCORE', q.pending, id)
    local prio = member_score and class_of(member_score)
    -- One step at `at`, one more each max_wait_ms since, down to class 0.
    local steps = prio and math.min(prio, math.floor((now - at) / wait) + 1) or 0
    local field = steps > 0 and fields_of(prio - steps).aged
    local front = field and number(c, field)
    if not front or front >= AGED_SPAN then
      gone[#gone + 1] = id
    else
      put(c, field, front + 1)
      adds[#adds + 1] = score(prio - steps, front)
      adds[#adds + 1] = id
      if prio - steps > 0 then
        again[#again + 1] = ms(at + steps * wait)
        again[#again + 1] = id
      else
        gone[#gone + 1] = id
      end
    end
  end
  if #adds > 0 then redis.call('ZADD', q.pending, unpack(adds)) end
  if #again > 0 then redis.call('ZADD', q.aging, unpack(again)) end
  if #gone > 0 then redis.call('ZREM', q.aging, unpack(gone)) end
end

-- The reply for one job, in any state, as the Rust side parses it: {id,
-- record, state, state time (run_at, lease deadline, dead_at or
-- completed_at), lease entry, progress, result of a completed job ('' for
-- none), `expiry` entry, the dedup key it holds, its `cancels` entry, its
-- dependencies (see `dependencies_of`), its dependants (see
-- `dependants_of`)}; false for each part the job does not have.
local function job_reply(id, record, state, at, lease, progress, result, expiry, key, cancel, after, dependants,
                         backoff)
  return {id, record, state, at or false, lease or false, progress or false, result or false, expiry or false,
    key or false, cancel or false, after or false, dependants or false, backoff or false}
end

-- Up to DEPENDANTS_SHOWN of the jobs that wait for job `id` and have not
-- heard of its end ("<queue>/<id>" each), or nil for none.
local DEPENDANTS_SHOWN = 100
local function dependants_of(q, id)
  local members = redis.call('SRANDMEMBER', dependants_key(q, id), DEPENDANTS_SHOWN)
  if #members == 0 then return nil end
  local here = queue_name(q) .. '/'
  for i, member in ipairs(members) do
    if string.byte(member, 1) == 61 then members[i] = here .. string.sub(member, 2) end
  end
  return members
end

-- The `after:done` fields of job `id`, whose `after` entry is `entry`:
-- "<id> <ref>" per ref, in order.
local function pairs_of(id, entry)
  local fields = {}
  for ref in string.gmatch(string.sub(entry, 3), '%S+') do
    fields[#fields + 1] = id .. ' ' .. ref
  end
  return fields
end

-- The dependencies of job `id`, whose `after` entry is `entry`: {entry,
-- the number not finished, then per ref its `after:done` entry or false}.
local function dependencies_of(q, id, entry)
  local fields = pairs_of(id, entry)
  local out = {entry, redis.call('HGET', q.after_left, id) or '0'}
  local done = redis.call('HMGET', q.after_done, unpack(fields))
  for i = 1, #fields do
    out[i + 2] = done[i]
  end
  return out
end

-- The reply for one job (see job_reply), read from wherever it is. Needs
-- q.jobs, q.processing, q.scheduled, q.dead, q.completed, q.leases,
-- q.results, q.progress, q.expiry, q.dedup_of, q.cancels, q.waiting,
-- q.after, q.after_left, q.after_done and q.backoff.
-- The state of job `id` (known to exist), and the score of its entry in
-- `processing`, `scheduled` or `dead` (else false).
local function state_of(q, id)
  for _, set in ipairs({'processing', 'scheduled', 'dead'}) do
    local score = redis.call('ZSCORE', q[set], id)
    if score then return set, score end
  end
  if redis.call('ZSCORE', q.completed, id) then
    return redis.call('HEXISTS', q.cancels, id) == 1 and 'cancelled' or 'completed', false
  end
  if redis.call('ZSCORE', q.waiting, id) then return 'waiting', false end
  return 'pending', false
end

local function view(q, id)
  local record = redis.call('HGET', q.jobs, id)
  if not record then return false end
  local cancel = redis.call('HGET', q.cancels, id)
  local state, at = state_of(q, id)
  local result = false
  if state == 'completed' or state == 'cancelled' then
    at, result = string.match(redis.call('HGET', q.results, id) or '', '^(%d+):(.*)$')
  end
  local after = redis.call('HGET', q.after, id)
  return job_reply(id, record, state, at, redis.call('HGET', q.leases, id), redis.call('HGET', q.progress, id), result,
    redis.call('HGET', q.expiry, id), redis.call('HGET', q.dedup_of, id), cancel, after and dependencies_of(q, id, after),
    dependants_of(q, id), redis.call('HGET', q.backoff, id))
end

-- The token of a `leases` entry.
local function token_of(lease)
  return string.match(lease, '^([^:/]*)')
end

-- What a `leases` entry says after its token: the retention (ms) of a job
-- kept once acked, 'done' for a completed job, nil for neither.
local function retention_of(lease)
  local retention = string.match(lease, '^[^:/]*/([^:]*):')
  return tonumber(retention) or retention
end

-- Checks that `token` is the job's current lease: answers the lease entry,
-- or nil and LEASE_LOST or NOT_FOUND.
local function current_lease(q, id, token)
  local lease = redis.call('HGET', q.leases, id)
  if not lease then
    if redis.call('HEXISTS', q.jobs, id) == 1 then return nil, 'LEASE_LOST' end
    return nil, 'NOT_FOUND'
  end
  if token_of(lease) ~= token or retention_of(lease) == 'done' then return nil, 'LEASE_LOST' end
  return lease
end

-- Wakes the claims waiting for a slot when the queue's jobs in flight
-- just dropped below max_in_flight (`before` of them were in flight).
local function wake_if_slot_freed(c, before)
  if c.settings.max_in_flight and before >= c.settings.max_in_flight and jobs_in_flight(c.q) < c.settings.max_in_flight then
    redis.call('PUBLISH', c.q.wake, '')
  end
end

-- Acknowledges jobs at `now`: each one whose token is its current lease
-- leaves processing and is deleted, or, when it is to be kept once acked,
-- becomes completed with its result until its retention ends. The triples
-- are argv[first], argv[first + 1], ... (id, token, result JSON or '').
-- An ack with the token that completed a job answers 'OK' again. Answers
-- one status per triple, in order: 'OK', 'LEASE_LOST' or 'NOT_FOUND'.
local function ack_all(c, argv, first, last, now)
  if first > last then return {} end
  local q = c.q
  local ids = {}
  for i = first, last, 3 do
    ids[#ids + 1] = argv[i]
  end
  local leases = redis.call('HMGET', q.leases, unpack(ids))
  -- `acked[id]`: the token of a job completed here, false for one deleted.
  local statuses, acked, ending, gone, kept = {}, {}, {}, {}, {}
  local keyed = number(c, 'keyed') > 0
  for i, id in ipairs(ids) do
    local lease, token = leases[i], argv[first + 3 * i - 2]
    -- Acked earlier in this call: completed, or gone.
    if acked[id] then lease = acked[id] .. '/done:' end
    if acked[id] == false then
      statuses[i] = 'NOT_FOUND'
    elseif lease and token_of(lease) == token then
      statuses[i] = 'OK'
      local retention = retention_of(lease)
      if retention ~= 'done' then
        ending[#ending + 1] = id
        -- A job whose dedup key is still held is kept completed until
        -- the key is let go.
        local held = keyed and held_for(c, id, now)
        if held and (retention or 0) < held then retention = held end
        if retention then
          acked[id] = token
          kept[#kept + 1] = {id, retention, argv[first + 3 * i - 1], lease}
        else
          acked[id] = false
          gone[#gone + 1] = id
        end
      end
    elseif lease or redis.call('HEXISTS', q.jobs, id) == 1 then
      statuses[i] = 'LEASE_LOST'
    else
      statuses[i] = 'NOT_FOUND'
    end
  end
  if #ending > 0 then
    if noting(c) then
      for _, id in ipairs(ending) do
        note(c, id, now, 'acked')
      end
    end
    -- Those whose cancel was asked end cancelled, for their dependants too.
    local cancelled = NONE
    if number(c, 'cancelling') > 0 and number(c, 'depended') > 0 then
      cancelled = {}
      for i, entry in ipairs(redis.call('HMGET', q.cancels, unpack(ending))) do
        if entry then cancelled[ending[i]] = true end
      end
    end
    local in_flight = c.settings.max_in_flight and jobs_in_flight(q)
    -- Only named groups count their jobs in flight; none in flight, none
    -- to read.
    if number(c, 'i:') > 0 then
      for _, group in ipairs(fetch_inflight(c, redis.call('HMGET', q.jobs, unpack(ending)))) do
        leave_processing(c, group)
      end
    end
    redis.call('ZREM', q.processing, unpack(ending))
    if #gone > 0 then
      redis.call('HDEL', q.leases, unpack(gone))
      redis.call('HDEL', q.jobs, unpack(gone))
      forget_cancels(c, gone)
    end
    if #kept > 0 then
      local until_, results, completions = {}, {}, {}
      for _, job in ipairs(kept) do
        local id, retain, result, lease = job[1], job[2], job[3], job[4]
        until_[#until_ + 1] = ms(now + retain)
        until_[#until_ + 1] = id
        results[#results + 1] = id
        results[#results + 1] = ms(now) .. ':' .. result
        completions[#completions + 1] = id
        completions[#completions + 1] = token_of(lease) .. '/done:' .. string.match(lease, '^[^:]*:(.*)$')
      end
      redis.call('ZADD', q.completed, unpack(until_))
      redis.call('HSET', q.results, unpack(results))
      redis.call('HSET', q.leases, unpack(completions))
    end
    if next(cancelled) then
      local completed, ends = {}, {}
      for _, id in ipairs(ending) do
        if cancelled[id] then ends[#ends + 1] = id else completed[#completed + 1] = id end
      end
      ended(c, ends, now, false, 'x')
      ending = completed
    end
    local results
    if number(c, 'depended') > 0 then
      results = {}
      for i, id in ipairs(ids) do
        if statuses[i] == 'OK' then results[id] = argv[first + 3 * i - 1] end
      end
    end
    ended(c, ending, now, false, 'c', results)
    -- Their dependants here are released now, not at `settle`: a claim
    -- later in the call (one that carried these acks) may take them, as
    -- a claim after the acks would.
    if c.told then on_ended(c) end
    if in_flight then wake_if_slot_freed(c, in_flight) end
  end
  return statuses
end

-- The longest a backoff waits (ms): 30 days.
local MAX_BACKOFF_MS = 2592000000

-- How long job `id` waits after its `attempts`-th failed attempt: its
-- `backoff` entry's delay, doubled for each failure after the first when
-- the entry says `e`; 0 without one.
local function backoff_delay(c, id, attempts)
  local entry = number(c, 'backing_off') > 0 and redis.call('HGET', c.q.backoff, id)
  if not entry then return 0 end
  local delay = tonumber(string.sub(entry, 2))
  if string.sub(entry, 1, 1) ~= 'e' then return delay end
  return math.min(delay * 2 ^ math.min(attempts - 1, 32), MAX_BACKOFF_MS)
end

-- Ends a lease: the job leaves processing, attempts + 1, and it goes back to
-- pending (or scheduled after `delay`, nil for the job's backoff), or to
-- the DLQ when `bury` is set or its attempts are used up. `prio`
-- (optional) moves it to another class; `error` (optional) becomes its
-- last error. A job whose expiry has come
-- is not delivered again: it goes to the DLQ with the last error
-- 'expired', whatever its on_expiry (it ran, and failed). `event` names
-- the end in the job's history ('nacked', 'lease_expired'). Answers the
-- job's new state, or nil when its class's tags are used up (then nothing
-- was written).
local function end_lease(c, id, now, delay, bury, prio, error, event)
  local q = c.q
  if number(c, 'cancelling') > 0 and redis.call('HEXISTS', q.cancels, id) == 1 then
    local in_flight = c.settings.max_in_flight and jobs_in_flight(q)
    local record = redis.call('HGET', q.jobs, id)
    redis.call('ZREM', q.processing, id)
    redis.call('HDEL', q.leases, id)
    leave_processing(c, group_of(record))
    end_cancelled(c, id, record, now)
    if in_flight then wake_if_slot_freed(c, in_flight) end
    return 'cancelled'
  end
  local job = decode(redis.call('HGET', q.jobs, id))
  job.attempts = job.attempts + 1
  if prio then job.prio = prio end
  if error then job.error = error end
  local deadline = number(c, 'expiring') > 0 and redis.call('HGET', q.expiry, id)
  if deadline then
    deadline = deadline_of(deadline)
    if deadline <= now then bury, job.error = true, 'expired' end
  end
  local state = 'pending'
  delay = delay or backoff_delay(c, id, job.attempts)
  if bury or job.attempts >= job.max then
    state = 'dead'
  elseif delay > 0 then
    state = 'scheduled'
  elseif not make_pending(c, {{id, job, now}}) then
    return nil
  end
  local in_flight = c.settings.max_in_flight and jobs_in_flight(q)
  redis.call('ZREM', q.processing, id)
  redis.call('HDEL', q.leases, id)
  leave_processing(c, job.group)
  if state == 'dead' then
    make_dead(q, id, job, now)
    ended(c, {id}, now, false, 'd')
  elseif state == 'scheduled' then
    make_scheduled(q, id, job, now + delay)
  end
  if state ~= 'dead' then enter_waiting(c, id, job.body) end
  if deadline and state ~= 'dead' then redis.call('ZADD', q.expiry_due, ms(deadline), id) end
  if in_flight then wake_if_slot_freed(c, in_flight) end
  note(c, id, now, event .. ' ' .. state .. (job.error and (' ' .. job.error) or ''))
  return state
end

