-- job: reads one job in any state.
-- KEYS: VIEW
-- ARGV[1] id
-- Returns: the job's view, or nil when it is unknown.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'job_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('job', keys, argv)
    return view(q, argv[1])
  end,
}
