-- A job's record: varints, decoding and encoding, its group and
-- retention; the score of a pending job, its class and tag.

-- The record's flags: the header is followed by the last error, the
-- group, the retention and the schedule, each when its bit is set (see
-- src/queue/store/record.rs). A new option of a job is kept out of the
-- record, in a key of its own: an older version of prioq running beside
-- this one would drop a field it does not know from every record it
-- rewrites, and read it as the start of the body.
local HAS_ERROR, HAS_GROUP, HAS_RETAIN, HAS_SCHEDULE = 1, 2, 4, 8

-- A whole number as Redis should store it: Lua would print large ones in
-- exponent form.
local function ms(n)
  return string.format('%d', n)
end

-- The number a decimal argument holds ('' and other non-numbers: nil).
-- Arguments repeat the same few values (counts, priorities, delays,
-- lease lengths), and Lua parses each with strtod: parsed once, up to
-- INTS_KEPT of them are kept for the library's life.
local INTS, INTS_KEPT, ints_kept = {}, 4096, 0

local function int_of(text)
  local n = INTS[text]
  if n == nil then
    n = tonumber(text) or false
    if ints_kept < INTS_KEPT then
      INTS[text] = n
      ints_kept = ints_kept + 1
    end
  end
  return n or nil
end

-- A small whole number as text: Lua turns a number into text with
-- sprintf, and so does Redis with a number given to a command
-- (`redis.call(..., 1)` costs it a `%.17g`, about 2,000 instructions), so
-- the functions give commands text; those from 0 to below DECIMALS_KEPT
-- are made once each.
local DECIMALS, DECIMALS_KEPT = {}, 4096

local function decimal(n)
  local text = DECIMALS[n]
  if not text then
    text = ms(n)
    if n >= 0 and n < DECIMALS_KEPT then DECIMALS[n] = text end
  end
  return text
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

-- The position after the length-prefixed text at `pos`.
local function skip_text(record, pos)
  local length
  length, pos = read_varint(record, pos)
  return pos + length
end

-- The position of the group in a record whose flags are `flags`: after
-- the header's six varints (found by one pattern: a varint is bytes of
-- 128 and more, then one below) and the last error, if any.
local function group_at(record, flags)
  local _, last = string.find(record, '^[\128-\255]*[%z\1-\127][\128-\255]*[%z\1-\127][\128-\255]*[%z\1-\127][\128-\255]*[%z\1-\127][\128-\255]*[%z\1-\127][\128-\255]*[%z\1-\127]')
  if flags % 2 == 1 then return skip_text(record, last + 1) end
  return last + 1
end

-- The group of a record, or nil, from its header: the body is not copied.
local function group_of(record)
  local flags = string.byte(record, 1)
  if math.floor(flags / 2) % 2 == 0 then return nil end
  return (read_text(record, group_at(record, flags)))
end

-- How long a job of a record is kept once acked (ms; 0: not at all),
-- from its header.
local function retain_of(record)
  local flags = string.byte(record, 1)
  if math.floor(flags / 4) % 2 == 0 then return 0 end
  local pos = group_at(record, flags)
  if math.floor(flags / 2) % 2 == 1 then pos = skip_text(record, pos) end
  return (read_varint(record, pos))
end

-- The score of a job of class `prio` with tag `tag`: behind every job of
-- the class with a smaller tag.
local function score(prio, tag)
  return string.format(SCORE_FORMAT, prio * SPAN + math.floor(tag))
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

