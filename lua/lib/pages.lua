-- Reads: members in Redis's order, pages from a cursor, the settings'
-- view.

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
