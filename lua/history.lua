-- history: a job's history, oldest event first (see lib/history.lua).
-- KEYS: jobs
-- ARGV[1] the job's id
-- Returns: its events, "<ms> <event> <detail>" each; {} when none is kept.
-- Errors: none.
redis.register_function{
  function_name = 'history_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('history', keys, argv)
    return redis.call('LRANGE', history_key(q, argv[1]), 0, -1)
  end,
}
