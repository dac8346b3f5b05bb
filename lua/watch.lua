-- watch: reads one job for a wait on it, and makes the jobs of the queue
-- that end during the wait (and a second more) be published on its `done`
-- channel: `w` in `meta` moves to the end of the wait when it is later.
-- KEYS: VIEW, meta
-- ARGV[1] id, ARGV[2] how long the wait lasts at most (ms)
-- Returns: the job's view, or nil when it is unknown.
-- Errors: none; every outcome is in the reply.
local WAIT_SLACK_MS = 1000

redis.register_function{
  function_name = 'watch_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('watch', keys, argv)
    local job = view(q, argv[1])
    if job then
      local until_ = now_ms() + tonumber(argv[2]) + WAIT_SLACK_MS
      if until_ > (tonumber(redis.call('HGET', q.meta, 'w')) or 0) then
        redis.call('HSET', q.meta, 'w', ms(until_))
      end
    end
    return job
  end,
}
