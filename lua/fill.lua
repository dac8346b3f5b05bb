-- fill: how full a shard is against its max_pending, for an enqueue split
-- over shards, which asks each of them before it writes any: the jobs
-- that wait to be handed out (see `waiting_jobs`), the shard's share of
-- the bound, and how many of the ids ARGV names are new here.
-- KEYS: processing, dead, jobs, completed, meta
-- Returns: {waiting, max_pending ('' for none), new ids}
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'fill_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('fill', keys, argv)
    local c = context(q)
    local fresh = 0
    if #argv > 0 then
      for _, record in ipairs(redis.call('HMGET', q.jobs, unpack(argv))) do
        if not record then fresh = fresh + 1 end
      end
    end
    return {waiting_jobs(q), c.settings.max_pending or '', fresh}
  end,
}
