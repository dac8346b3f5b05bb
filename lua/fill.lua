-- fill: how full a shard is against its bounds, for an enqueue split over
-- shards, which asks each of them before it writes any: the jobs that
-- wait to be handed out (see `waiting_jobs`) and the shard's share of
-- max_pending, the bytes counted waiting (see `enter_waiting`) and its
-- share of max_pending_bytes, and how many of the jobs ARGV names are new
-- here and their bytes.
-- KEYS: processing, dead, jobs, completed, meta
-- ARGV: pairs of a job's id and its body's size in bytes
-- Returns: {waiting, max_pending ('' for none), new jobs, bytes waiting,
--   max_pending_bytes ('' for none), the new jobs' bytes}
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'fill_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('fill', keys, argv)
    local c = context(q)
    local ids = {}
    for i = 1, #argv, 2 do
      ids[#ids + 1] = argv[i]
    end
    local fresh, fresh_bytes = 0, 0
    if #ids > 0 then
      for i, record in ipairs(redis.call('HMGET', q.jobs, unpack(ids))) do
        if not record then fresh, fresh_bytes = fresh + 1, fresh_bytes + tonumber(argv[2 * i]) end
      end
    end
    return {waiting_jobs(q), c.settings.max_pending or '', fresh, number(c, 'pending_bytes'),
      c.settings.max_pending_bytes or '', fresh_bytes}
  end,
}
