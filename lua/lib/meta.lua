-- A call's context: the fields of `meta` read once by name, the
-- settings a shard enforces, whether the queue may be written, the
-- fields changed and written back.

-- The fields of `meta` a call reads besides the settings: the largest
-- weight, the bulk floor's count, the named groups' jobs in flight, the
-- entries of `progress`, of `expiry`, of `dedup:of`, of `cancels` and of
-- `after`, the dependants sets, until when a wait may run.
local STATE = {'max_weight', 'floor', 'i:', 'progress', 'expiring', 'keyed', 'cancelling', 'depending', 'depended', 'w',
  'throttled', 'registered', 'deleting', 'fence', 'backing_off'}

-- The fields of STATE a call that only enqueues (or does nothing) reads
-- with the settings: whether the queue may be written, the fair order's
-- stride. A call that acks or claims reads all of STATE; a field a call
-- did not read is read when first asked for (see `get`), so what a call
-- reads up front changes its cost, never what it does. Each field read
-- in the one HMGET costs Redis about 1,500 instructions, against about
-- 5,000 for an HGET of its own.
local BASIC_STATE = {'max_weight', 'registered', 'deleting'}

-- The fields every call reads first: the pack of the settings (see
-- `pack_settings`; named at load), then the settings every call reads in
-- fields of their own, so that a change to them takes effect on the next
-- call whoever wrote it (an older version running beside this one during
-- a rolling upgrade writes every setting in its own field only).
local HEAD = {'packed:', 'paused', 'shards'}

-- The other settings, in the order of the loader's SETTINGS (from the
-- table in src/queue/settings/table.rs), every call reads packed in one
-- field: reading a field costs Redis about 1,500 instructions, and every
-- call reads them all. The field is named by the settings it packs, so
-- that versions which pack other settings keep packs of their own. (Made
-- at load, where Redis gives a library none of Lua's base functions: no
-- `ipairs`, no `tonumber`.)
local PACKED = {}
for i = 1, #SETTINGS do
  local field = SETTINGS[i].field
  if field ~= HEAD[2] and field ~= HEAD[3] then
    HEAD[1] = HEAD[1] .. (#PACKED > 0 and ',' or '') .. field
    PACKED[#PACKED + 1] = field
  end
end

-- The fields a call reads, once: HEAD, then `state`.
local function context_fields(state)
  local fields = {HEAD[1], HEAD[2], HEAD[3]}
  for i = 1, #state do
    fields[#HEAD + i] = state[i]
  end
  return fields
end
local CONTEXT_FIELDS, BASIC_FIELDS = context_fields(STATE), context_fields(BASIC_STATE)

-- The settings of PACKED in `meta`'s fields of their own, as their pack
-- (HEAD[1]) keeps them: their values joined by commas, '' for one not set
-- (a value is a number or a flag's 1, checked by prioq before it is
-- written).
local function pack_settings(meta)
  local values = redis.call('HMGET', meta, unpack(PACKED))
  for i = 1, #PACKED do
    values[i] = values[i] or ''
  end
  return table.concat(values, ',', 1, #PACKED)
end

-- Writes the pack anew from the fields when it differs: by `configure`
-- after a change, at a queue's listing, and by every sweep (a setting an
-- older version wrote takes effect on this version's calls then). True
-- when it wrote.
local function renew_packed(meta)
  local packed = pack_settings(meta)
  if redis.call('HGET', meta, HEAD[1]) == packed then return false end
  redis.call('HSET', meta, HEAD[1], packed)
  return true
end

-- The settings a shard enforces, from the fields' values by field of
-- `meta`. A shard of a queue split over k enforces its share of the caps
-- and of the rate limit (frozen shards, mid-change, hold -k).
local function parse_settings(meta)
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
  return settings
end

-- Parsed settings by the values they were parsed from, joined (`of`): a
-- queue's settings rarely change, and every call needs them. At most
-- `most` sets are kept (then the cache starts over). The tables are
-- shared: read, never changed. The values and settings of the last call
-- are kept apart: a call with the same values (one queue's calls, one
-- after the other) takes them without joining a key.
local parsed = {of = {}, kept = 0, most = 256, last_values = {}, last = nil}

-- The settings of the HMGET `values` (CONTEXT_FIELDS's; the pack made
-- from the fields when absent: a queue listed by an older version, until
-- the sweeper packs it).
local function parsed_settings(q, values)
  if not values[1] then values[1] = pack_settings(q.meta) end
  local last = parsed.last_values
  if parsed.last and values[1] == last[1] and values[2] == last[2] and values[3] == last[3] then
    return parsed.last
  end
  local packed, paused, shards = values[1], values[2] or '', values[3] or ''
  local key = paused .. ',' .. shards .. ',' .. packed
  local settings = parsed.of[key]
  if not settings then
    local by_field, i = {paused = paused, shards = shards}, 0
    for value in string.gmatch(packed .. ',', '([^,]*),') do
      i = i + 1
      -- (A value past the last of PACKED, from a pack written by hand, is
      -- left out.)
      if PACKED[i] then by_field[PACKED[i]] = value end
    end
    settings = parse_settings(by_field)
    if parsed.kept >= parsed.most then parsed.of, parsed.kept = {}, 0 end
    parsed.of[key], parsed.kept = settings, parsed.kept + 1
  end
  last[1], last[2], last[3] = values[1], values[2], values[3]
  parsed.last = settings
  return settings
end

-- A call's `meta` table from the HMGET `values` (CONTEXT_FIELDS's, or
-- when `basic` BASIC_FIELDS's): the STATE (BASIC_STATE) fields and
-- `shards`, in one table constructor (a table grown field by field
-- rehashes at every power of two on the way: about 2,500 instructions a
-- call for the four fields of the basic state); the other settings are
-- read through `settings`. Lists the fields in their order, as the check
-- below makes sure at load. Lua sizes a constructor's table to its
-- fields, rounded up to a power of two: 16 fields (4 basic) would leave
-- no room, and the first field a call reads or writes later (a class's
-- virtual time, a tag) would make it anew; `room`, never set, sizes it
-- for 32 (8).
local function meta_of(values, basic)
  local s = #HEAD
  if basic then
    return {shards = values[3], max_weight = values[s + 1], registered = values[s + 2], deleting = values[s + 3],
      room = nil}
  end
  return {
    shards = values[3], max_weight = values[s + 1], floor = values[s + 2], ['i:'] = values[s + 3],
    progress = values[s + 4], expiring = values[s + 5], keyed = values[s + 6], cancelling = values[s + 7],
    depending = values[s + 8], depended = values[s + 9], w = values[s + 10], throttled = values[s + 11],
    registered = values[s + 12], deleting = values[s + 13], fence = values[s + 14], backing_off = values[s + 15],
    room = nil,
  }
end

-- Both list their fields in the order of the HMGET's.
do
  local checked = {{CONTEXT_FIELDS, STATE, false}, {BASIC_FIELDS, BASIC_STATE, true}}
  for k = 1, #checked do
    local read, state, basic = checked[k][1], checked[k][2], checked[k][3]
    local sample = {}
    for i = 1, #read do
      sample[i] = read[i]
    end
    local meta = meta_of(sample, basic)
    for i = 0, #state do
      local field = state[i] or 'shards'
      if meta[field] ~= field then
        -- A library has no `error` at load: indexing nil stops the load and
        -- names this line.
        local meta_of_misses_a_field = nil
        meta_of_misses_a_field = meta_of_misses_a_field[field]
      end
    end
  end
end

-- What one call knows of the queue's `meta` hash: the fields it read,
-- those it changed (false deletes one), written back once by `settle`;
-- and the queue's settings, by field in `settings`. Reads the settings,
-- all of STATE (or, when `basic`, BASIC_STATE) and the `more` fields in
-- one HMGET.
local function context(q, more, basic)
  local read = basic and BASIC_FIELDS or CONTEXT_FIELDS
  local fields = read
  if more and #more > 0 then
    fields = {unpack(read)}
    local n = #fields
    for i = 1, #more do
      fields[n + i] = more[i]
    end
  end
  local values = redis.call('HMGET', q.meta, unpack(fields))
  local meta = meta_of(values, basic)
  for i = #read + 1, #fields do
    meta[fields[i]] = values[i]
  end
  return {
    q = q,
    meta = meta,
    dirty = {},
    settings = parsed_settings(q, values),
    stride = tonumber(meta.max_weight) or 1,
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
  -- A listing other than 1 is a registration under way, or cut short.
  if on ~= '1' then return 'UNREGISTERED' end
  return nil
end

-- Refuses a call routed for a queue split over `expected` shards when the
-- queue's `shards` setting (in this shard's `meta`) says otherwise, or is
-- being changed: the caller reads it again and routes anew. Before any
-- write.
local function check_shards(c, expected)
  if (c.meta.shards and int_of(c.meta.shards) or 1) ~= int_of(expected) then fail('SHARDS_CHANGED') end
end

-- Reads fields of `meta` the call does not know yet, in one HMGET (a
-- field named twice is read twice).
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

