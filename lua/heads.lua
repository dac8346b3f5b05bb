-- heads: what one shard of a sharded queue offers a claim: the scores of
-- its first ARGV[1] pending jobs, most urgent first, and whether a
-- scheduled job of it is due (a claim there would promote it). Read
-- before a claim picks its shards.
-- KEYS: pending, scheduled
-- ARGV[1] how many scores
-- Returns: {1 when a scheduled job is due else 0, scores...}
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'heads_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local pending, scheduled = keys[1], keys[2]
    local due = #redis.call('ZRANGE', scheduled, '-inf', ms(now_ms()), 'BYSCORE', 'LIMIT', 0, 1) > 0
    local out = {due and 1 or 0}
    local heads = redis.call('ZRANGE', pending, 0, tonumber(argv[1]) - 1, 'WITHSCORES')
    for i = 2, #heads, 2 do
      out[#out + 1] = heads[i]
    end
    return out
  end,
}
