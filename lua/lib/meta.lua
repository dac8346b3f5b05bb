-- A call's context: the fields of `meta` read once by name, the
-- settings a shard enforces, whether the queue may be written, the
-- fields changed and written back.

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

