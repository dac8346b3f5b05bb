-- history: a job's history, oldest event first (see lib/history.lua).
-- KEYS: jobs
-- ARGV[1] the job's id
-- Returns: its events, "<ms> <event> <detail>" each; {} for a job that
--   exists while none is kept.
-- Errors: NOT_FOUND when no history is kept and no such job exists.
redis.register_function{
  function_name = 'history_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('history', keys, argv)
    local events = redis.call('LRANGE', history_key(q, argv[1]), 0, -1)
    if #events == 0 and redis.call('HEXISTS', q.jobs, argv[1]) == 0 then
      fail('NOT_FOUND')
    end
    return events
  end,
}
