-- line: what one shard of a sharded queue would hand out to claims of
-- one job each, one after the other, read before a claim picks its
-- shards. Due scheduled jobs are promoted first, as a claim there would.
-- Then, for up to ARGV[4] claims of one job, the job each would take and
-- the score it would find first in line, most urgent first: the shard's claimable
-- jobs in order, with each group's next job in line once its head is
-- taken, without the heads of groups at their cap, and with the bulk
-- floor's turns taking the first job of the least urgent class. None
-- while the shard is paused; no more than its share of max_in_flight and
-- of the rate limit lets out. A claim picks, claim after claim, the shard
-- whose next score is the lowest: so a claim of N jobs takes what N
-- claims of one would.
-- KEYS: LIFE, CLAIMS
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] how many due
--   scheduled jobs to promote at most, ARGV[4] how many claims of one,
--   ARGV[5] bulk floor in parts per million of jobs handed out, ARGV[6]
--   the number of shards the caller routed for, then the fields of
--   `claims` of the claims with a request id to look up (see
--   `claim_field`)
-- Returns: {capped, answered..., score, ...}: capped is 1 when a group cap
--   or max_in_flight is set (an ack could change what the shard offers),
--   else 0; answered, per request id looked up, 1 when this shard answered
--   that claim jobs before; then for each claim of one the id of the job
--   it would take and the score first in line (the bulk floor's turn
--   takes a job ranked after it), fewer when the shard would run out or be
--   held back
-- Errors: SHARDS_CHANGED (see `check_shards`), before any write.

-- A shard's pending jobs as the claims of one would see them: the first
-- pending jobs by rank, loaded `chunk` at a time, and the group heads
-- that take the place of those taken. `live` holds {id, score, group,
-- real} in order, the lowest last.
local function line(c, chunk)
  return {c = c, chunk = chunk, loaded = 0, live = {}, gone = {}, refills = {}, real = 0}
end

-- Whether entry `a` comes after `b` in a sorted set.
local function after_entry(a, b)
  if a[2] ~= b[2] then return a[2] > b[2] end
  return bytes_before(b[1], a[1])
end

local function insert(l, entry)
  local live = l.live
  local lo, hi = 1, #live + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if after_entry(live[mid], entry) then lo = mid + 1 else hi = mid end
  end
  table.insert(live, lo, entry)
  if entry[4] then l.real = l.real + 1 end
end

-- Loads the next chunk of pending by rank, but for the jobs gone.
local function load(l)
  local q = l.c.q
  local page = redis.call('ZRANGE', q.pending, l.loaded, l.loaded + l.chunk - 1, 'WITHSCORES')
  if #page == 0 then return false end
  l.loaded = l.loaded + #page / 2
  local ids = {}
  for i = 1, #page, 2 do
    ids[#ids + 1] = page[i]
  end
  local records = redis.call('HMGET', q.jobs, unpack(ids))
  for i, id in ipairs(ids) do
    if not l.gone[id] then insert(l, {id, tonumber(page[2 * i]), records[i] and group_of(records[i]), true}) end
  end
  return true
end

-- The entry first in line, or nil. Every pending job not loaded yet comes
-- after every one loaded, so a line holding a loaded job knows its first.
local function first(l)
  while l.real == 0 and load(l) do end
  return l.live[#l.live]
end

-- Takes an entry out of line; a pending job's is gone for good.
local function remove(l, entry)
  if entry[4] then l.gone[entry[1]] = true end
  if entry.detached then return end
  for i = #l.live, 1, -1 do
    if l.live[i] == entry then
      table.remove(l.live, i)
      break
    end
  end
  if entry[4] then l.real = l.real - 1 end
end

-- The first entry of the least urgent class in line, or nil: the least
-- urgent class is the higher of pending's (its top not yet gone) and the
-- refilled heads'. A pending job not loaded yet comes as an entry of its
-- own, out of line.
local function first_of_least_urgent(l)
  local q, gone_count = l.c.q, 0
  for _ in pairs(l.gone) do
    gone_count = gone_count + 1
  end
  local class = nil
  local top = redis.call('ZRANGE', q.pending, -(gone_count + 1), -1, 'WITHSCORES')
  for i = #top - 1, 1, -2 do
    if not l.gone[top[i]] then
      class = class_of(top[i + 1])
      break
    end
  end
  for _, entry in ipairs(l.live) do
    if not entry[4] and (not class or class_of(entry[2]) > class) then class = class_of(entry[2]) end
  end
  if not class then return nil end
  local best = nil
  local firsts = redis.call('ZRANGE', q.pending, class, '(' .. (class + 1), 'BYSCORE', 'LIMIT', 0, gone_count + 1,
    'WITHSCORES')
  for i = 1, #firsts, 2 do
    local id = firsts[i]
    if not l.gone[id] then
      for _, entry in ipairs(l.live) do
        if entry[1] == id then best = entry end
      end
      if not best then
        local record = redis.call('HGET', q.jobs, id)
        best = {id, tonumber(firsts[i + 1]), record and group_of(record), true, detached = true}
      end
      break
    end
  end
  for _, entry in ipairs(l.live) do
    if not entry[4] and class_of(entry[2]) == class and (not best or after_entry(best, entry)) then
      best = entry
    end
  end
  return best
end

-- The entry's group's next job in its class, in line once the entry is
-- taken.
local function refill(l, entry)
  local group = entry[3]
  local class = class_of(entry[2])
  local key = group .. ':' .. class
  local skip = l.refills[key] or 0
  local next = redis.call('ZRANGE', group_key(l.c, group), class, '(' .. (class + 1), 'BYSCORE', 'LIMIT', skip, 1,
    'WITHSCORES')
  if #next == 0 then return end
  l.refills[key] = skip + 1
  insert(l, {next[1], tonumber(next[2]), group, false})
end

redis.register_function{
  function_name = 'line_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('line', keys, argv)
    local c = context(q)
    check_shards(c, argv[6])
    local now = now_ms()
    promote_due(c, now, tonumber(argv[3]))
    promote_aged(c, now, tonumber(argv[3]))
    settle(c)

    local out = {(c.settings.group_max_in_flight or c.settings.max_in_flight) and 1 or 0}
    -- Which claims with a request id were answered jobs here before.
    for i = 7, #argv do
      local kept = redis.call('HGET', q.claims, argv[i])
      out[#out + 1] = (kept and string.match(kept, ';%S')) and 1 or 0
    end
    if c.settings.paused then return out end
    local limit = tonumber(argv[4])
    if c.settings.max_in_flight then limit = math.min(limit, math.max(0, c.settings.max_in_flight - jobs_in_flight(q))) end
    if c.settings.rate_per_second then limit = math.min(limit, math.floor(tokens(c, now))) end
    if limit <= 0 then return out end
    local ppm, handed = tonumber(argv[5]), number(c, 'floor')
    -- Without groups and floor, the line is pending's first jobs.
    if ppm == 0 and groups_listed(q) == 0 then
      local page = redis.call('ZRANGE', q.pending, 0, limit - 1, 'WITHSCORES')
      for i = 1, #page do
        out[#out + 1] = page[i]
      end
      return out
    end

    local l = line(c, limit)
    -- Jobs of each named group taken here, on top of those in flight.
    local taken = {}
    local function held(entry)
      local group = entry[3]
      return group and held_back(c, group, taken[group])
    end
    local picks = 0
    while picks < limit do
      local head = first(l)
      -- A head whose group is held back (at its cap) is withheld.
      while head and held(head) do
        remove(l, head)
        head = first(l)
      end
      if not head then break end
      local job = head
      if ppm > 0 and floor_turn(handed + picks + 1, ppm) then
        job = first_of_least_urgent(l)
        while job and held(job) do
          remove(l, job)
          job = first_of_least_urgent(l)
        end
      end
      if not job then break end
      picks = picks + 1
      out[#out + 1] = job[1]
      out[#out + 1] = string.format('%.17g', head[2])
      remove(l, job)
      if job[3] then
        taken[job[3]] = (taken[job[3]] or 0) + 1
        if not held(job) then refill(l, job) end
      end
    end
    return out
  end,
}
