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
--   leases     hash   id -> the job's lease: "token:worker" while it is
--                     processing, "token/<retain ms>:worker" when it is
--                     to be kept once acked, "token/done:worker" once it
--                     is completed (the token that completed it)
--   completed  zset   id -> the end of its retention (ms), for jobs acked
--                     with retention
--   results    hash   id -> "<completed_at ms>:<result JSON>" of completed
--                     jobs ('' for no result)
--   progress   hash   id -> the latest progress JSON its worker reported
--   schedules  hash   name -> the schedule's definition (JSON, written and
--                     read by prioq, opaque here)
--   schedules:due  zset  name -> the schedule's next fire time (ms), for
--                     schedules not paused
--   schedules:runs hash  name -> its last fire time that made a job (ms)
--   schedules:owed hash  in the home of a sharded queue: job id -> "<ms
--                     owed since>:<schedule definition>" of each fire whose
--                     job is still to be made in its shard (see `fire`)
--   schedules:paid zset  in a shard: job id -> when a fire's job was made
--                     there, kept a day, so a debt is never paid twice
--   meta       hash   the queue's small state, read and written at most once
--                     a call:
--                     settings: paused, max_in_flight, rate_per_second,
--                       rate_burst, group_max_in_flight, max_weight (the
--                       largest weight)
--                     floor: jobs handed out, for the bulk floor
--                     tokens, at: the rate limit's bucket
--                     v:<priority>: the class's virtual time, the tag it
--                       last handed out
--                     t:<priority>:<group>: the group's finish tag in the
--                       class ('' is the group of jobs without one)
--                     h:<priority>:<group>: the named group's head: its
--                       job in pending for the class
--                     b:<priority>: jobs of the class waiting in group sets
--                     i:<group>: the named group's jobs processing; i: all
--                       named groups' together
--                     retain_ms: the retention of jobs enqueued without
--                       one (a setting)
--                     progress: the entries in `progress`, so that jobs
--                       ending need not look there when it is empty
--                     w: until when (ms) a wait for a job may be running
--                       on some instance: ended jobs are published then
--                     g:<group>: the named group's rate limit bucket,
--                       "<tokens>:<at ms>"
--                     throttled: the groups in `!throttled`
--                     registered: 1 once the queue is on the list of
--                       queues, in every shard (a token while it is being
--                       put there, see `listing`); deleting: 1 while the
--                       queue is being deleted (see `drop`)
--                     shards: the number of shards the queue is split over
--                       (absent: 1), in every shard; -k while a change
--                       from k is under way (see `reshard`)
--                     arrivals: in the home of a sharded queue, jobs
--                       enqueued so far: their arrival numbers
--   weights    hash   group -> weight, for the groups given one (others
--                     weigh 1)
--   groups     zset   group -> its jobs waiting, for every named group with
--                     jobs waiting or processing
-- and, for each named group g, `<group prefix>g`, a zset like pending that
-- holds the group's waiting jobs other than its heads; and
-- `<group prefix>!throttled`, a zset of the named groups held back by the
-- group rate limit: group -> when its bucket holds a token again (ms). No
-- group is named `!throttled`: group names are job ids. Group keys are
-- named from the group inside the functions: they share the queue's hash
-- tag, so they live in the slot of the declared keys.
-- `q.wake` is the queue's wake-up channel, `<prefix>:{<queue>}:wake`, and
-- `q.group_prefix` the prefix of its group keys (arguments, not keys). Its
-- `done` channel, the same with `done` for `wake`, hears the ids of jobs
-- that ended (acked, dead-lettered, deleted) while a wait may be running.
-- Times are Redis TIME in milliseconds, never an instance's clock.
--
-- Fair order (start-time fair queuing). A job of group g entering class p
-- gets the tag S = max(V[p], F[p:g]), V[p] being the class's virtual time
-- and F[p:g] the group's finish tag, which becomes S + step / weight. A
-- class serves jobs by tag, so groups with jobs waiting share it in
-- proportion to their weights, and a group's own jobs keep their order.
-- step is the largest weight configured (1 when none is): every increment
-- is at least 1, so a group's tags strictly increase in the score; with
-- one group and no weights the tags are 0, 1, 2...: arrival order.
-- A named group has at most one job per class in pending, its head; the
-- rest wait in its group set, and the head is refilled when it is claimed.
-- A group at its cap (group_max_in_flight) has no head: a head met while
-- its group is at the cap goes back to the group set, and heads come back
-- when the group's jobs in flight drop below the cap. A group whose rate
-- limit bucket (group_rate_limit) is empty is held back the same way, and
-- gets its heads back when the bucket holds a token again: a claim (or a
-- sweep) gives them back to the groups of `!throttled` whose time came.
-- Jobs without a group go straight to pending and are not held back by
-- group_max_in_flight or group_rate_limit.
--
-- A record is a header of unsigned varints (7 bits a byte, least
-- significant first, the high bit set on every byte but a number's last):
--   flags, priority, attempts, max_attempts, enqueued_at,
--   ready_at - enqueued_at (when the job last became pending, or its run_at)
-- then, when flags has bit 1, the last error, and when it has bit 2, the
-- group: each its length (varint) and text; when it has bit 4, the
-- retention once acked (ms, varint); when it has bit 8, the name of the
-- schedule that made the job (length and text); then the body, which prioq
-- writes and no function reads: the task's length in bytes (varint), the
-- task, the args as sent.
--
-- Functions that add to pending may answer SEQUENCE_EXHAUSTED, always
-- before they write anything (see `take_tags`). A Lua error does not undo
-- the writes before it, so every check comes before the first write.

-- A score's fraction holds 2^44 tag units next to an 8-bit priority: 8 + 44
-- bits stay exact in a float64.
local SPAN = 17592186044416
local HAS_ERROR, HAS_GROUP, HAS_RETAIN, HAS_SCHEDULE = 1, 2, 4, 8
local NONE = {}

-- The names of a class's fields in `meta`, made once per class: a number
-- turned into text costs a call to sprintf each time.
local CLASS_FIELDS = {}

local function fields_of(prio)
  local fields = CLASS_FIELDS[prio]
  if not fields then
    fields = {vtime = 'v:' .. prio, tag = 't:' .. prio .. ':', head = 'h:' .. prio .. ':', backlog = 'b:' .. prio}
    CLASS_FIELDS[prio] = fields
  end
  return fields
end

local function fail(code)
  error({err = code})
end

-- The table `q` of a call of function `stem`: its keys by name, as the
-- loader's KEYS_OF lists them (from the function table in
-- src/queue/store/library.rs), and its leading arguments, LEADING_OF of
-- them: the wake-up channel, then the group key prefix.
local function queue_of(stem, keys, argv)
  local q = {}
  for i, name in ipairs(KEYS_OF[stem]) do
    q[name] = keys[i]
  end
  local leading = LEADING_OF[stem]
  if leading >= 1 then q.wake = argv[1] end
  if leading >= 2 then q.group_prefix = argv[2] end
  return q
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
  if math.floor(flags / 4) % 2 == 1 then job.retain, pos = read_varint(record, pos) end
  if math.floor(flags / 8) % 2 == 1 then job.schedule, pos = read_text(record, pos) end
  job.body = string.sub(record, pos)
  return job
end

local function encode(job)
  local bytes, texts = {}, {}
  put_varint(bytes, (job.error and HAS_ERROR or 0) + (job.group and HAS_GROUP or 0) + (job.retain and HAS_RETAIN or 0)
    + (job.schedule and HAS_SCHEDULE or 0))
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
  if job.retain then texts[#texts + 1] = varint(job.retain) end
  if job.schedule then
    texts[#texts + 1] = varint(#job.schedule)
    texts[#texts + 1] = job.schedule
  end
  texts[#texts + 1] = job.body
  return table.concat(texts)
end

-- The group of a record, or nil, without decoding the rest.
local function group_of(record)
  if math.floor(string.byte(record, 1) / 2) % 2 == 0 then return nil end
  return decode(record).group
end

-- How long a job of a record is kept once acked (ms; 0: not at all),
-- without decoding the rest.
local function retain_of(record)
  if math.floor(string.byte(record, 1) / 4) % 2 == 0 then return 0 end
  return decode(record).retain
end

-- The score of a job of class `prio` with tag `tag`: behind every job of
-- the class with a smaller tag.
local function score(prio, tag)
  return string.format('%.17g', prio + math.floor(tag) / SPAN)
end

-- The class a score belongs to.
local function class_of(member_score)
  return math.floor(tonumber(member_score))
end

-- The class and the tag a score holds.
local function class_and_tag(member_score)
  local n = tonumber(member_score)
  local prio = math.floor(n)
  return prio, math.floor((n - prio) * SPAN + 0.5)
end

-- The fields of `meta` a call reads besides the settings: the largest
-- weight, the bulk floor's count, the named groups' jobs in flight, the
-- entries of `progress`, until when a wait may run.
local STATE = {'max_weight', 'floor', 'i:', 'progress', 'w', 'throttled', 'registered', 'deleting'}

-- What one call knows of the queue's `meta` hash: the fields it read,
-- those it changed (false deletes one), written back once by `settle`;
-- and the queue's settings, as the loader's SETTINGS (from the table in
-- src/queue/settings/table.rs) lists them, by field in `settings`. Reads
-- the settings, the STATE fields and the `more` fields in one HMGET.
local function context(q, more)
  local fields = {}
  for i, setting in ipairs(SETTINGS) do
    fields[i] = setting.field
  end
  for _, list in ipairs({STATE, more or NONE}) do
    for _, field in ipairs(list) do
      fields[#fields + 1] = field
    end
  end
  local values = redis.call('HMGET', q.meta, unpack(fields))
  local meta = {}
  for i, field in ipairs(fields) do
    meta[field] = values[i]
  end
  -- A shard of a queue split over k enforces its share of the caps and
  -- of the rate limit (frozen shards, mid-change, hold -k).
  local k = math.abs(tonumber(meta.shards) or 1)
  local settings = {}
  for _, setting in ipairs(SETTINGS) do
    local value = meta[setting.field]
    if setting.kind == 'flag' then
      value = value == '1'
    else
      value = tonumber(value) or setting.default
      if value and setting.share == 'ceil' then
        value = math.ceil(value / k)
      elseif value and setting.share == 'divide' then
        value = value / k
      end
    end
    settings[setting.field] = value
  end
  return {
    q = q,
    meta = meta,
    dirty = {},
    settings = settings,
    step = tonumber(meta.max_weight) or 1,
    -- Made when first needed: the weights read, and the changes to each
    -- named group's jobs waiting.
    weights = nil,
    waiting_of = nil,
    -- Jobs that ended, and when, for those waiting on them.
    ended = nil,
    ended_at = nil,
  }
end

-- Why the queue may not be written to now: 'UNREGISTERED' until prioq has
-- put it on the list of queues (the sweepers sweep only the queues listed
-- there; prioq does it and calls again), 'DELETING' while it is being
-- deleted; nil when it may.
local function registered(q, c)
  local meta = c and c.meta or {}
  local on, deleting = meta.registered, meta.deleting
  if not c then on, deleting = unpack(redis.call('HMGET', q.meta, 'registered', 'deleting')) end
  if deleting then return 'DELETING' end
  -- A mark other than 1 is a registration under way, or cut short.
  if on ~= '1' then return 'UNREGISTERED' end
  return nil
end

-- Refuses a call routed for a queue split over `expected` shards when the
-- queue's `shards` setting (in this shard's `meta`) says otherwise, or is
-- being changed: the caller reads it again and routes anew. Before any
-- write.
local function check_shards(c, expected)
  if (tonumber(c.meta.shards) or 1) ~= tonumber(expected) then fail('SHARDS_CHANGED') end
end

-- Reads fields of `meta` the call does not know yet, in one HMGET.
local function fetch(c, fields)
  local missing = {}
  for _, field in ipairs(fields) do
    if c.meta[field] == nil then missing[#missing + 1] = field end
  end
  if #missing == 0 then return end
  local values = redis.call('HMGET', c.q.meta, unpack(missing))
  for i, field in ipairs(missing) do
    c.meta[field] = values[i]
  end
end

-- A field of `meta`: its value, or false when absent.
local function get(c, field)
  local value = c.meta[field]
  if value == nil then
    value = redis.call('HGET', c.q.meta, field)
    c.meta[field] = value
  end
  return value
end

-- A numeric field of `meta`, 0 when absent; read as a number once.
local function number(c, field)
  local value = get(c, field)
  if type(value) == 'string' then
    value = tonumber(value)
    c.meta[field] = value
  end
  return value or 0
end

-- Changes a field of `meta` (false deletes it) at `settle`.
local function put(c, field, value)
  c.meta[field] = value
  c.dirty[field] = true
end

local function add(c, field, n)
  local now = number(c, field) + n
  put(c, field, now ~= 0 and now or false)
end

-- Notes that pending is about to grow: the first time in a call, reads
-- whether it is empty, for the wake-up in `settle`.
local function adding_to_pending(c)
  if c.was_empty == nil then c.was_empty = redis.call('ZCARD', c.q.pending) == 0 end
end

local function weight(c, group)
  if group == '' or c.step == 1 then return 1 end
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
  if redis.call('ZCOUNT', c.q.pending, prio, '(' .. (prio + 1)) > 0 then return false end
  local fields = fields_of(prio)
  if number(c, fields.backlog) > 0 then return false end
  put(c, fields.vtime, false)
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
    if tag == nil then tag = math.max(number(c, fields.vtime), number(c, field)) end
    -- In a sharded queue the jobs without a group are tagged no earlier
    -- than their arrival number, taken from one counter in the queue's
    -- home: tags compare across shards, so claims keep arrival order.
    local arrival = arrivals and arrivals[i]
    if group == '' and arrival then tag = math.max(tag, arrival * c.step) end
    local finish = tag + (group == '' and c.step or c.step / weight(c, group))
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

-- Adds to `fields` the fields `take_tags` reads for a job of class `prio`
-- and group `group` ('' for none), unless `seen` has them: to read them
-- all at once.
local function want_tag_fields(fields, seen, prio, group)
  local class = fields_of(prio)
  local tag = class.tag .. group
  if seen[tag] then return end
  seen[tag] = true
  fields[#fields + 1] = tag
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

-- The next job of `group` in class `prio` becomes its head, if the group
-- has one waiting and is below its cap. Answers the new head, {id,
-- score}, or nil.
local function refill_head(c, group, prio)
  local fields = fields_of(prio)
  local head = fields.head .. group
  put(c, head, false)
  if holds(c, group) then return nil end
  local gkey = group_key(c, group)
  local next = redis.call('ZRANGE', gkey, prio, '(' .. (prio + 1), 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  if #next == 0 then return nil end
  redis.call('ZREM', gkey, next[1])
  adding_to_pending(c)
  redis.call('ZADD', c.q.pending, next[2], next[1])
  put(c, head, next[1])
  add(c, fields.backlog, -1)
  return next
end

-- Gives `group` a head in every class it has jobs waiting in and no head:
-- when it drops below its cap. Costs O(classes * log N).
local function restore_heads(c, group)
  if holds(c, group) then return end
  local gkey, from = group_key(c, group), '-inf'
  while true do
    local first = redis.call('ZRANGE', gkey, from, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if #first == 0 then return end
    local prio = class_of(first[2])
    if not get(c, fields_of(prio).head .. group) then refill_head(c, group, prio) end
    from = prio + 1
  end
end

-- The groups held back by their rate limit whose bucket holds a token
-- again at `now` (all of them, when the limit is gone) get their heads
-- back, a hundred a call at most.
local function restore_throttled(c, now)
  if number(c, 'throttled') <= 0 then return end
  local key = group_key(c, '!throttled')
  local upto = c.settings.group_rate_per_second and ms(now) or '+inf'
  local due = redis.call('ZRANGE', key, '-inf', upto, 'BYSCORE', 'LIMIT', 0, 100)
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

-- Jobs `ids` ended at `now` (acked, dead-lettered, deleted): their
-- progress goes, and those waiting on them hear of it at `settle`.
local function ended(c, ids, now)
  if #ids == 0 then return end
  if number(c, 'progress') > 0 then
    add(c, 'progress', -redis.call('HDEL', c.q.progress, unpack(ids)))
  end
  c.ended = c.ended or {}
  for _, id in ipairs(ids) do
    c.ended[#c.ended + 1] = id
  end
  c.ended_at = now
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
-- ones that need a message.
local function settle(c)
  local q = c.q
  local sets, gone = {}, {}
  for field in pairs(c.dirty) do
    local value = c.meta[field]
    if value == false then
      gone[#gone + 1] = field
    else
      sets[#sets + 1] = field
      sets[#sets + 1] = type(value) == 'number' and number_text(value) or value
    end
  end
  if #sets > 0 then redis.call('HSET', q.meta, unpack(sets)) end
  if #gone > 0 then redis.call('HDEL', q.meta, unpack(gone)) end
  for group, n in pairs(c.waiting_of or NONE) do
    local waiting
    if n ~= 0 then
      waiting = tonumber(redis.call('ZINCRBY', q.groups, n, group))
    else
      waiting = tonumber(redis.call('ZSCORE', q.groups, group) or '0')
    end
    if waiting <= 0 and inflight(c, group) <= 0 then
      redis.call('ZREM', q.groups, group)
    elseif n == 0 and waiting == 0 then
      redis.call('ZADD', q.groups, 'NX', 0, group)
    end
  end
  if c.was_empty and redis.call('ZCARD', q.pending) > 0 then
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

-- Moves up to `limit` scheduled jobs whose time has come to pending,
-- earliest first; answers how many.
local function promote_due(c, now, limit)
  restore_throttled(c, now)
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

-- The reply for one job, in any state, as the Rust side parses it: {id,
-- record, state, state time (run_at, lease deadline, dead_at or
-- completed_at), lease entry, progress, result of a completed job ('' for
-- none)}; false for each part the job does not have.
local function job_reply(id, record, state, at, lease, progress, result)
  return {id, record, state, at or false, lease or false, progress or false, result or false}
end

-- The reply for one job (see job_reply), read from wherever it is. Needs
-- q.jobs, q.processing, q.scheduled, q.dead, q.completed, q.leases,
-- q.results and q.progress.
local function view(q, id)
  local record = redis.call('HGET', q.jobs, id)
  if not record then return false end
  local state, at, result = 'pending', false, false
  local member_score = redis.call('ZSCORE', q.processing, id)
  if member_score then
    state, at = 'processing', member_score
  else
    member_score = redis.call('ZSCORE', q.scheduled, id)
    if member_score then
      state, at = 'scheduled', member_score
    else
      member_score = redis.call('ZSCORE', q.dead, id)
      if member_score then
        state, at = 'dead', member_score
      elseif redis.call('ZSCORE', q.completed, id) then
        state = 'completed'
        at, result = string.match(redis.call('HGET', q.results, id) or '', '^(%d+):(.*)$')
      end
    end
  end
  return job_reply(id, record, state, at, redis.call('HGET', q.leases, id), redis.call('HGET', q.progress, id), result)
end

-- The token of a `leases` entry.
local function token_of(lease)
  return string.match(lease, '^([^:/]*)')
end

-- The mark of a `leases` entry: the retention (ms) of a job kept once
-- acked, 'done' for a completed job, nil for neither.
local function mark_of(lease)
  local mark = string.match(lease, '^[^:/]*/([^:]*):')
  return tonumber(mark) or mark
end

-- Checks that `token` is the job's current lease: answers the lease entry,
-- or nil and LEASE_LOST or NOT_FOUND.
local function current_lease(q, id, token)
  local lease = redis.call('HGET', q.leases, id)
  if not lease then
    if redis.call('HEXISTS', q.jobs, id) == 1 then return nil, 'LEASE_LOST' end
    return nil, 'NOT_FOUND'
  end
  if token_of(lease) ~= token or mark_of(lease) == 'done' then return nil, 'LEASE_LOST' end
  return lease
end

-- Wakes the claims waiting for a slot when the queue's jobs in flight
-- just dropped below max_in_flight (`before` of them were in flight).
local function wake_if_slot_freed(c, before)
  if c.settings.max_in_flight and before >= c.settings.max_in_flight and redis.call('ZCARD', c.q.processing) < c.settings.max_in_flight then
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
  local q = c.q
  local ids = {}
  for i = first, last, 3 do
    ids[#ids + 1] = argv[i]
  end
  if #ids == 0 then return {} end
  local leases = redis.call('HMGET', q.leases, unpack(ids))
  -- `acked[id]`: the token of a job completed here, false for one deleted.
  local statuses, acked, ending, gone, kept = {}, {}, {}, {}, {}
  for i, id in ipairs(ids) do
    local lease, token = leases[i], argv[first + 3 * i - 2]
    -- Acked earlier in this call: completed, or gone.
    if acked[id] then lease = acked[id] .. '/done:' end
    if acked[id] == false then
      statuses[i] = 'NOT_FOUND'
    elseif lease and token_of(lease) == token then
      statuses[i] = 'OK'
      local mark = mark_of(lease)
      if mark ~= 'done' then
        ending[#ending + 1] = id
        if mark then
          acked[id] = token
          kept[#kept + 1] = {id, mark, argv[first + 3 * i - 1], lease}
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
    local in_flight = c.settings.max_in_flight and redis.call('ZCARD', q.processing)
    -- Only named groups count their jobs in flight; none in flight, none
    -- to read.
    if number(c, 'i:') > 0 then
      for _, record in ipairs(redis.call('HMGET', q.jobs, unpack(ending))) do
        leave_processing(c, record and group_of(record))
      end
    end
    redis.call('ZREM', q.processing, unpack(ending))
    if #gone > 0 then
      redis.call('HDEL', q.leases, unpack(gone))
      redis.call('HDEL', q.jobs, unpack(gone))
    end
    if #kept > 0 then
      local until_, results, marks = {}, {}, {}
      for _, job in ipairs(kept) do
        local id, retain, result, lease = job[1], job[2], job[3], job[4]
        until_[#until_ + 1] = ms(now + retain)
        until_[#until_ + 1] = id
        results[#results + 1] = id
        results[#results + 1] = ms(now) .. ':' .. result
        marks[#marks + 1] = id
        marks[#marks + 1] = token_of(lease) .. '/done:' .. string.match(lease, '^[^:]*:(.*)$')
      end
      redis.call('ZADD', q.completed, unpack(until_))
      redis.call('HSET', q.results, unpack(results))
      redis.call('HSET', q.leases, unpack(marks))
    end
    ended(c, ending, now)
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
  local in_flight = c.settings.max_in_flight and redis.call('ZCARD', q.processing)
  redis.call('ZREM', q.processing, id)
  redis.call('HDEL', q.leases, id)
  leave_processing(c, job.group)
  if state == 'dead' then
    make_dead(q, id, job, now)
    ended(c, {id}, now)
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

-- The rank, highest score first (ties by member, descending, as Redis
-- orders them), of the first member of sorted set `key` after the member
-- `after_member` of score `after_score`: the member's own rank + 1 while it
-- is there with that score; else found among the members of that score by
-- halving (each step one O(log N) read). So a page costs O(log N) to find,
-- whatever the cursor, a forged one included.
local function rank_after(key, after_score, after_member)
  local rank = redis.call('ZREVRANK', key, after_member)
  if rank and tonumber(redis.call('ZSCORE', key, after_member)) == after_score then return rank + 1 end
  local score = string.format('%.17g', after_score)
  local lo = redis.call('ZCOUNT', key, '(' .. score, '+inf')
  local hi = lo + redis.call('ZCOUNT', key, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_before(redis.call('ZRANGE', key, mid, mid, 'REV')[1], after_member) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

-- One page of sorted set `key`, highest score first (ties by member,
-- descending), after the member `after_member` of score `after_score` (nil
-- for the first page): up to `limit` {member, score} pairs.
local function page_down(key, limit, after_score, after_member)
  local start = after_score and rank_after(key, after_score, after_member) or 0
  local chunk = redis.call('ZRANGE', key, start, start + limit - 1, 'REV', 'WITHSCORES')
  local out = {}
  for i = 1, #chunk, 2 do
    out[#out + 1] = {chunk[i], chunk[i + 1]}
  end
  return out
end

-- The settings in `meta`, as field, value pairs of those set.
local function settings_of(meta)
  local fields = {}
  for i, setting in ipairs(SETTINGS) do
    fields[i] = setting.field
  end
  local out = {}
  for i, value in ipairs(redis.call('HMGET', meta, unpack(fields))) do
    if value then
      out[#out + 1] = fields[i]
      out[#out + 1] = value
    end
  end
  return out
end
