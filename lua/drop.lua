-- drop: a step of deleting a queue, in one shard. prioq seals every
-- shard first ('seal': its enqueues and its schedule writes are refused
-- from then on, see `registered`) and counts their jobs; when it may go on
-- (none, or a purge), it takes the queue off the list of queues and drops
-- every shard ('drop': every key of the shard is unlinked: jobs, settings,
-- schedules, push target, group sets, dependants sets); else it takes the seals back
-- ('unseal'). Before a purge drops them, 'dependants' lists the jobs whose
-- dependants in other queues have not heard of their end, for prioq to
-- tell them (the job deleted, or how it ended when its outbox holds it).
-- KEYS: LIFE, CLAIMS, SCHEDULES, push, push:slots
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] 'seal',
--   'unseal', 'dependants' or 'drop'
-- Returns: for 'seal', {the jobs the shard holds in any state, 1 when the
--   shard holds anything at all (else it was not sealed) or 0}; for
--   'dependants', per such job its id, its end as an outbox entry
--   ("<outcome>:<result>", 'g:' for deleted; see lib/deps.lua) and its
--   dependants in other queues ("<queue>/<id>" each); else 1.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'drop_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('drop', keys, argv)
    local mode = argv[3]
    if mode == 'seal' then
      if redis.call('EXISTS', unpack(keys)) == 0 then return {0, 0} end
      redis.call('HSET', q.meta, 'deleting', '1')
      return {redis.call('HLEN', q.jobs), 1}
    end
    if mode == 'dependants' then
      local out, here = {}, queue_name(q) .. '/'
      for _, id in ipairs(redis.call('SMEMBERS', q.depended)) do
        local elsewhere = {}
        for _, member in ipairs(redis.call('SMEMBERS', dependants_key(q, id))) do
          -- '=id' and this queue's own refs (other shards) go with it.
          if string.byte(member, 1) ~= 61 and string.sub(member, 1, #here) ~= here then
            elsewhere[#elsewhere + 1] = member
          end
        end
        if #elsewhere > 0 then
          out[#out + 1] = id
          out[#out + 1] = redis.call('HGET', q.outbox, id) or 'g:'
          out[#out + 1] = elsewhere
        end
      end
      return out
    end
    if mode == 'unseal' then
      redis.call('HDEL', q.meta, 'deleting')
      return 1
    end
    local sets = {q.group_prefix .. '!throttled'}
    for _, group in ipairs(redis.call('ZRANGE', q.groups, 0, -1)) do
      if group ~= MARK then sets[#sets + 1] = q.group_prefix .. group end
    end
    for _, id in ipairs(redis.call('SMEMBERS', q.depended)) do
      sets[#sets + 1] = dependants_key(q, id)
    end
    redis.call('UNLINK', unpack(sets))
    redis.call('UNLINK', unpack(keys))
    -- Waiting claims look again, and find nothing.
    redis.call('PUBLISH', q.wake, '')
    return 1
  end,
}
