-- dead_jobs: pages through the DLQ, most recently dead first; ties in
-- dead_at go by id, descending, as Redis orders them.
-- KEYS: dead, jobs
-- ARGV[1] page size
-- ARGV[2] cursor: dead_at of the last job of the previous page ('' for the first page)
-- ARGV[3] cursor: id of that job
-- Returns: {total, {views...}} with up to page size + 1 views; the extra
--   one only tells that another page exists.
redis.register_function{
  function_name = 'dead_jobs_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local dead, jobs = keys[1], keys[2]
    local limit = tonumber(argv[1]) + 1
    local after_score, after_id = tonumber(argv[2]), argv[3]

    -- Redis orders members bytewise; Lua's < follows the server's locale.
    local function bytes_before(a, b)
      for i = 1, math.min(#a, #b) do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then return x < y end
      end
      return #a < #b
    end

    local out, offset = {}, 0
    local top = after_score and argv[2] or '+inf'
    while #out < limit do
      local chunk = redis.call('ZRANGE', dead, top, '-inf', 'BYSCORE', 'REV', 'LIMIT', offset, limit, 'WITHSCORES')
      if #chunk == 0 then break end
      for i = 1, #chunk, 2 do
        local id, score = chunk[i], chunk[i + 1]
        local seen = after_score and tonumber(score) == after_score and not bytes_before(id, after_id)
        if not seen and #out < limit then
          out[#out + 1] = {id, redis.call('HGET', jobs, id), 'dead', score, false}
        end
      end
      offset = offset + #chunk / 2
    end
    return {redis.call('ZCARD', dead), out}
  end,
}
