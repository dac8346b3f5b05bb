-- extend: moves a lease's deadline to now + lease_ms; the token stays. A
-- progress report, when given, replaces the job's last one.
-- KEYS: VIEW, meta
-- ARGV[1] id, ARGV[2] lease token, ARGV[3] lease_ms, ARGV[4] progress
--   (JSON, '' for none)
-- Returns: the job's view.
-- Errors: NOT_FOUND, LEASE_LOST
redis.register_function{
  function_name = 'extend_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('extend', keys, argv)
    local id = argv[1]
    local lease, problem = current_lease(q, id, argv[2])
    if not lease then fail(problem) end
    redis.call('ZADD', q.processing, 'XX', ms(now_ms() + tonumber(argv[3])), id)
    if argv[4] ~= '' and redis.call('HSET', q.progress, id, argv[4]) == 1 then
      redis.call('HINCRBY', q.meta, 'progress', 1)
    end
    return view(q, id)
  end,
}
