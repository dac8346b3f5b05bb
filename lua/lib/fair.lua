-- The fair order: weights, groups in flight, their caps and rate
-- limits, tags, heads and their refills.

-- The tags below AGED_SPAN are a class's front: the jobs aged into it
-- (see `promote_aged`), in the order they aged; every other job's tag is
-- at least AGED_SPAN, so the aged come first.
local AGED_SPAN = 2 ^ 40

local function weight(c, group)
  if group == '' or c.stride == 1 then return 1 end
  c.weights = c.weights or {}
  local value = c.weights[group]
  if value == nil then
    value = tonumber(redis.call('HGET', c.q.weights, group) or '1')
    c.weights[group] = value
  end
  return value
end

local function inflight(c, group)
  return number(c, 'i:' .. group)
end

-- The call's time, read once.
local function now_of(c)
  c.now = c.now or now_ms()
  return c.now
end

-- The tokens in named group `group`'s rate limit bucket now.
local function group_tokens(c, group)
  local burst = c.settings.group_rate_burst
  local raw = get(c, 'g:' .. group)
  local held, at = burst, now_of(c)
  if raw then
    local tokens, when = string.match(raw, '^([^:]*):(.*)$')
    held, at = tonumber(tokens), tonumber(when)
  end
  return math.min(burst, held + math.max(0, now_of(c) - at) * c.settings.group_rate_per_second / 1000)
end

-- Whether named group `group` may have no more jobs handed out now, with
-- `extra` (or none) handed out already on top of those in flight and of
-- the tokens spent: it is at its cap, or its rate limit bucket is short
-- of a token. Answers, for a bucket short of one, when it holds one again
-- (ms).
local function held_back(c, group, extra)
  extra = extra or 0
  local cap = c.settings.group_max_in_flight
  if cap ~= nil and inflight(c, group) + extra >= cap then return true end
  local rate = c.settings.group_rate_per_second
  if not rate or not c.settings.group_rate_burst then return false end
  local tokens = group_tokens(c, group) - extra
  if tokens >= 1 then return false end
  return true, now_of(c) + math.ceil((1 - tokens) * 1000 / rate)
end

-- A job of named group `group` was handed out: its bucket spends a token.
local function spend_token(c, group)
  if not (c.settings.group_rate_per_second and c.settings.group_rate_burst) then return end
  put(c, 'g:' .. group, string.format('%.17g', group_tokens(c, group) - 1) .. ':' .. ms(now_of(c)))
end

local function group_key(c, group)
  return c.q.group_prefix .. group
end

-- held_back, for a place that holds the group back: a group held by its
-- rate limit is noted in `!throttled`, to get its heads back in time.
local function holds(c, group)
  local held, until_ = held_back(c, group)
  if until_ then
    add(c, 'throttled', redis.call('ZADD', group_key(c, '!throttled'), ms(until_), group))
  end
  return held
end

-- Counts `n` more (or fewer) jobs of named group `group` waiting.
local function count_waiting(c, group, n)
  c.waiting_of = c.waiting_of or {}
  c.waiting_of[group] = (c.waiting_of[group] or 0) + n
end

local function count_inflight(c, group, n)
  add(c, 'i:' .. group, n)
  add(c, 'i:', n)
  count_waiting(c, group, 0)
end

-- Starts the class over when its tags are used up and nothing of it
-- waits: virtual time 0, every finish tag of the class gone. Answers
-- whether it did.
local function restart_class(c, prio)
  if redis.call('ZCOUNT', c.q.pending, decimal(prio), '(' .. decimal(prio + 1)) > 0 then return false end
  local fields = fields_of(prio)
  if number(c, fields.backlog) > 0 then return false end
  put(c, fields.vtime, false)
  put(c, fields.aged, false)
  local class = fields.tag
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', c.q.meta, cursor, 'MATCH', class .. '*', 'COUNT', 100)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      put(c, page[2][i], false)
    end
  until cursor == '0'
  for field in pairs(c.meta) do
    if string.sub(field, 1, #class) == class then put(c, field, false) end
  end
  return true
end

-- Tags for jobs entering pending, taken together: job i is of class
-- prios[i] and group groups[i] ('' for none), and in a sharded queue's
-- enqueue has the arrival number arrivals[i]. Answers their tags, or nil
-- when a class's tag space is used up (then nothing is taken).
local function take_tags(c, prios, groups, arrivals, restarted)
  local taken, tags = {}, {}
  for i = 1, #prios do
    local prio, group = prios[i], groups[i]
    local fields = CLASS_FIELDS[prio] or fields_of(prio)
    local field = fields.tag .. group
    local tag = taken[field]
    if tag == nil then tag = math.max(AGED_SPAN, number(c, fields.vtime), number(c, field)) end
    -- In a sharded queue the jobs without a group are tagged by their
    -- arrival number, taken from one counter in the queue's home: tags
    -- compare across shards, so claims keep arrival order (a job whose
    -- enqueue began after another's was answered has the later number).
    -- The group's finish tag only grows, so a job put back without a
    -- number (a nack, a promotion) goes behind every job tagged so far.
    local arrival = arrivals and arrivals[i]
    local finish
    if group == '' and arrival then
      local previous = tag
      tag = AGED_SPAN + arrival * c.stride
      finish = math.max(previous, tag + c.stride)
    else
      finish = tag + (group == '' and c.stride or c.stride / weight(c, group))
    end
    if finish >= SPAN then
      restarted = restarted or {}
      if restarted[prio] or not restart_class(c, prio) then return nil end
      restarted[prio] = true
      return take_tags(c, prios, groups, arrivals, restarted)
    end
    taken[field] = finish
    tags[i] = tag
  end
  for field, finish in pairs(taken) do
    put(c, field, finish)
  end
  return tags
end

-- Adds to `fields` the fields `take_tags` and `place` read for a job of
-- class `prio` and group `group` ('' for none), unless `seen` has them:
-- to read them all at once.
local function want_tag_fields(fields, seen, prio, group)
  local class = fields_of(prio)
  local tag = class.tag .. group
  if seen[tag] then return end
  seen[tag] = true
  fields[#fields + 1] = tag
  if group ~= '' then fields[#fields + 1] = class.head .. group end
  if not seen[class.vtime] then
    seen[class.vtime] = true
    fields[#fields + 1] = class.vtime
  end
end

-- Jobs with tag `tag` (the highest) of class `prio` were handed out.
local function advance(c, prio, tag)
  local field = fields_of(prio).vtime
  if tag > number(c, field) then put(c, field, tag) end
end

-- Puts a job with a tag where it waits: straight into pending when it has
-- no group; else into pending as its group's head in its class when it
-- has none and the group is below its cap, or into its group set.
-- Collects pending's adds in `adds` (score, id pairs) for one ZADD.
local function place(c, adds, id, prio, group, tag)
  local member_score = score(prio, tag)
  -- A job without a group ages (see `promote_aged`) under max_wait_ms.
  local wait = c.settings.max_wait_ms
  if wait and not group and prio > 0 then
    c.aging = c.aging or {}
    local aging = c.aging
    aging[#aging + 1] = ms(now_of(c) + wait)
    aging[#aging + 1] = id
  end
  if group then
    count_waiting(c, group, 1)
    local fields = fields_of(prio)
    local head = fields.head .. group
    if get(c, head) or holds(c, group) then
      redis.call('ZADD', group_key(c, group), member_score, id)
      add(c, fields.backlog, 1)
      return
    end
    put(c, head, id)
  end
  adding_to_pending(c)
  adds[#adds + 1] = member_score
  adds[#adds + 1] = id
end

-- The first job of class `prio` in group set `gkey`, taken out of it:
-- {id, score}, or nil. The set's first job is most often of the class
-- (a head is refilled in the class it was taken from, and a group's more
-- urgent heads go first): then one ZPOPMIN takes it.
local function pop_of_class(gkey, prio)
  local first = redis.call('ZPOPMIN', gkey)
  if #first == 0 then return nil end
  local class = class_of(first[2])
  if class == prio then return first end
  redis.call('ZADD', gkey, first[2], first[1])
  if class > prio then return nil end
  local next = redis.call('ZRANGE', gkey, decimal(prio), '(' .. decimal(prio + 1), 'BYSCORE', 'LIMIT', '0', '1',
    'WITHSCORES')
  if #next == 0 then return nil end
  redis.call('ZREM', gkey, next[1])
  return next
end

-- The next job of `group` in class `prio` becomes its head, if the group
-- has one waiting and is below its cap: into pending, unless `deferred`
-- (then the caller puts it there, with others in one ZADD). Answers the
-- new head, {id, score}, or nil.
local function refill_head(c, group, prio, deferred)
  local fields = fields_of(prio)
  local head = fields.head .. group
  put(c, head, false)
  if holds(c, group) then return nil end
  -- No group set holds a job of the class, by its backlog, when the call
  -- has read it (a claim's pop reads it with the groups' counts).
  local backlog = c.meta[fields.backlog]
  if backlog ~= nil and (tonumber(backlog) or 0) <= 0 then return nil end
  local next = pop_of_class(group_key(c, group), prio)
  if not next then return nil end
  adding_to_pending(c)
  if not deferred then redis.call('ZADD', c.q.pending, next[2], next[1]) end
  put(c, head, next[1])
  add(c, fields.backlog, -1)
  return next
end

-- Reads the jobs in flight of the named groups of `records` (false for a
-- job gone) in one HMGET, for the calls that count them one by one; for
-- a claim's pop, whose `popped` holds the records' ids and scores, the
-- backlog of their classes too, for their refills. Answers the records'
-- groups (false for none), by record.
local function fetch_inflight(c, records, popped)
  local groups, fields, seen = {}, nil, nil
  for i, record in ipairs(records) do
    local group = record and group_of(record)
    groups[i] = group or false
    if group then
      fields = fields or {}
      fields[#fields + 1] = 'i:' .. group
      if popped then
        seen = seen or {}
        local backlog = fields_of(class_of(popped[2 * i])).backlog
        if not seen[backlog] then
          seen[backlog] = true
          fields[#fields + 1] = backlog
        end
      end
    end
  end
  if fields then fetch(c, fields) end
  return groups
end

-- Gives `group` a head in every class it has jobs waiting in and no head:
-- when it drops below its cap. Costs O(classes * log N).
local function restore_heads(c, group)
  if holds(c, group) then return end
  local gkey, from = group_key(c, group), '-inf'
  while true do
    local first = redis.call('ZRANGE', gkey, from, '+inf', 'BYSCORE', 'LIMIT', '0', '1', 'WITHSCORES')
    if #first == 0 then return end
    local prio = class_of(first[2])
    if not get(c, fields_of(prio).head .. group) then refill_head(c, group, prio) end
    from = decimal(prio + 1)
  end
end

-- The groups held back by their rate limit whose bucket holds a token
-- again at `now` (all of them, when the limit is gone) get their heads
-- back, a hundred a call at most.
local function restore_throttled(c, now)
  if number(c, 'throttled') <= 0 then return end
  local key = group_key(c, '!throttled')
  local upto = c.settings.group_rate_per_second and ms(now) or '+inf'
  local due = redis.call('ZRANGE', key, '-inf', upto, 'BYSCORE', 'LIMIT', '0', '100')
  if #due == 0 then return end
  redis.call('ZREM', key, unpack(due))
  add(c, 'throttled', -#due)
  for _, group in ipairs(due) do
    restore_heads(c, group)
  end
end

-- A head met while its group is held back goes back to the group set.
local function withhold(c, id, prio, group, member_score)
  redis.call('ZADD', group_key(c, group), member_score, id)
  local fields = fields_of(prio)
  put(c, fields.head .. group, false)
  add(c, fields.backlog, 1)
end

-- A job of `group` left processing (acked, given back, taken back).
local function leave_processing(c, group)
  if not group then return end
  local was_held = held_back(c, group)
  count_inflight(c, group, -1)
  if was_held then restore_heads(c, group) end
end

