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

-- The fields a call reads, once: the settings, as the loader's SETTINGS
-- (from the table in src/queue/settings/table.rs) lists them, then
-- `state`. (Made at load, where Redis gives a library none of Lua's base
-- functions: no `ipairs`, no `tonumber`.)
local function context_fields(state)
  local fields = {}
  for i = 1, #SETTINGS do
    fields[i] = SETTINGS[i].field
  end
  for i = 1, #state do
    fields[#SETTINGS + i] = state[i]
  end
  return fields
end
local CONTEXT_FIELDS, BASIC_FIELDS = context_fields(STATE), context_fields(BASIC_STATE)

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

-- Parsed settings by their fields' values joined: a queue's settings
-- rarely change, and every call needs them. At most SETTINGS_KEPT sets
-- are kept (then the cache starts over); `SETTINGS_KEY` is the scratch
-- table the key is joined in. The tables are shared: read, never changed.
-- The values and settings of the last call are kept apart: a call with
-- the same values (one queue's calls, one after the other) takes them
-- without joining a key.
local SETTINGS_OF, SETTINGS_KEPT, settings_kept, SETTINGS_KEY = {}, 256, 0, {}
local LAST_VALUES, last_settings = {}, nil

-- The settings of the HMGET `values` (CONTEXT_FIELDS's).
local function settings_of(values)
  local same = last_settings ~= nil
  for i = 1, #SETTINGS do
    if values[i] ~= LAST_VALUES[i] then
      same = false
      break
    end
  end
  if same then return last_settings end
  for i = 1, #SETTINGS do
    SETTINGS_KEY[i] = values[i] or ''
    LAST_VALUES[i] = values[i]
  end
  local key = table.concat(SETTINGS_KEY, ',', 1, #SETTINGS)
  local settings = SETTINGS_OF[key]
  if not settings then
    local by_field = {}
    for i = 1, #SETTINGS do
      by_field[SETTINGS[i].field] = values[i]
    end
    settings = parse_settings(by_field)
    if settings_kept >= SETTINGS_KEPT then SETTINGS_OF, settings_kept = {}, 0 end
    SETTINGS_OF[key], settings_kept = settings, settings_kept + 1
  end
  last_settings = settings
  return settings
end

-- A call's `meta` table from the HMGET `values` (CONTEXT_FIELDS's): the
-- STATE fields and `shards`, in one table constructor (a table grown
-- field by field rehashes at every power of two on the way); the other
-- settings are read through `settings`. Lists STATE in its order, as
-- the check below makes sure at load.
local SHARDS_AT
for i = 1, #SETTINGS do
  if SETTINGS[i].field == 'shards' then SHARDS_AT = i end
end

local function meta_of(values)
  local s = #SETTINGS
  return {
    shards = values[SHARDS_AT], max_weight = values[s + 1], floor = values[s + 2], ['i:'] = values[s + 3],
    progress = values[s + 4], expiring = values[s + 5], keyed = values[s + 6], cancelling = values[s + 7],
    depending = values[s + 8], depended = values[s + 9], w = values[s + 10], throttled = values[s + 11],
    registered = values[s + 12], deleting = values[s + 13], fence = values[s + 14], backing_off = values[s + 15],
  }
end

do
  local sample = {}
  for i = 1, #CONTEXT_FIELDS do
    sample[i] = CONTEXT_FIELDS[i]
  end
  local meta = meta_of(sample)
  for i = 0, #STATE do
    local field = STATE[i] or 'shards'
    if meta[field] ~= field then
      -- A library has no `error` at load: indexing nil stops the load and
      -- names this line.
      local meta_of_misses_a_field = nil
      meta_of_misses_a_field = meta_of_misses_a_field[field]
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
  local meta
  if basic then
    meta = {shards = values[SHARDS_AT]}
    for i = 1, #BASIC_STATE do
      meta[BASIC_STATE[i]] = values[#SETTINGS + i]
    end
  else
    meta = meta_of(values)
  end
  for i = #read + 1, #fields do
    meta[fields[i]] = values[i]
  end
  return {
    q = q,
    meta = meta,
    dirty = {},
    settings = settings_of(values),
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
  if (tonumber(c.meta.shards) or 1) ~= tonumber(expected) then fail('SHARDS_CHANGED') end
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

