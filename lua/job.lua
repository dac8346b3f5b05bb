-- job: reads one job in any state.
-- KEYS: scheduled, processing, dead, jobs, leases, completed, results,
--   progress
-- ARGV[1] id
-- Returns: the job's view, or nil when it is unknown.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'job_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = {
      scheduled = keys[1], processing = keys[2], dead = keys[3], jobs = keys[4], leases = keys[5],
      completed = keys[6], results = keys[7], progress = keys[8],
    }
    return view(q, argv[1])
  end,
}
