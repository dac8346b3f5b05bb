-- delete: deletes a job that nobody is working on, completed ones
-- included. A group's head that is deleted is replaced by the group's next
-- job; a dedup key the job holds is let go at once; the jobs that depend
-- on a job deleted before it ended hear that it was deleted.
-- KEYS: LIFE
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] id, ARGV[4]
--   'dead' to delete only a dead job, 'any' otherwise
-- Returns: 1, or 2 when the job's dependants elsewhere are still to be
--   told (its end is in the outbox, see lib/deps.lua)
-- Errors: NOT_FOUND; CONFLICT when the job is processing (or, for 'dead',
--   not dead)
redis.register_function{
  function_name = 'delete_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('delete', keys, argv)
    local id = argv[3]
    local record = redis.call('HGET', q.jobs, id)
    if not record then fail('NOT_FOUND') end
    if argv[4] == 'dead' then
      if not redis.call('ZSCORE', q.dead, id) then fail('CONFLICT') end
    elseif redis.call('ZSCORE', q.processing, id) then
      fail('CONFLICT')
    end
    local c, live = context(q), false
    if redis.call('ZREM', q.completed, id) == 1 then
      redis.call('HDEL', q.results, id)
      redis.call('HDEL', q.leases, id)
    elseif redis.call('ZREM', q.dead, id) == 0 then
      live = true
      take_out(c, id, record)
    end
    redis.call('HDEL', q.jobs, id)
    forget_cancels(c, {id})
    local now = now_ms()
    note(c, id, now, 'deleted')
    -- A job that had ended told its dependants then.
    ended(c, {id}, now, true, live and 'g' or nil)
    settle(c)
    return c.outboxed and 2 or 1
  end,
}
