-- Pages through the DLQ, most recently dead first; ties in dead_at go by
-- id, descending, as Redis orders them.
-- ARGV[2] page size
-- ARGV[3] cursor: dead_at of the last job of the previous page ('' for the first page)
-- ARGV[4] cursor: id of that job
-- Returns: {total, {views...}} with up to page size + 1 views; the extra
--   one only tells that another page exists.
local limit = tonumber(ARGV[2]) + 1
local after_score, after_id = tonumber(ARGV[3]), ARGV[4]

-- Redis orders members bytewise; Lua's < follows the server's locale.
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local out, offset = {}, 0
local top = after_score and ARGV[3] or '+inf'
while #out < limit do
  local chunk = redis.call('ZRANGE', DEAD, top, '-inf', 'BYSCORE', 'REV', 'LIMIT', offset, limit, 'WITHSCORES')
  if #chunk == 0 then break end
  for i = 1, #chunk, 2 do
    local id, score = chunk[i], chunk[i + 1]
    local seen = after_score and tonumber(score) == after_score and not bytes_before(id, after_id)
    if not seen and #out < limit then
      out[#out + 1] = {id, redis.call('HGET', JOBS, id), 'dead', score, false, redis.call('HGET', ERRORS, id)}
    end
  end
  offset = offset + #chunk / 2
end
return {redis.call('ZCARD', DEAD), out}
