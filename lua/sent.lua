-- sent: crosses off dependants of an ended job that were told of its end
-- (see lib/deps.lua); once none is left, the job leaves the outbox.
-- KEYS: outbox, outbox:due, meta, depended
-- ARGV[1] the job's id, then the dependants told ("<queue>/<id>" each)
-- Returns: the dependants left to tell.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'sent_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('sent', keys, argv)
    local id = argv[1]
    local key = dependants_key(q, id)
    if #argv > 1 then redis.call('SREM', key, unpack(argv, 2)) end
    local left = redis.call('SCARD', key)
    if left == 0 then
      redis.call('HDEL', q.outbox, id)
      redis.call('ZREM', q.outbox_due, id)
      if redis.call('SREM', q.depended, id) == 1 and (tonumber(redis.call('HGET', q.meta, 'depended')) or 0) > 0 then
        redis.call('HINCRBY', q.meta, 'depended', -1)
      end
    end
    return left
  end,
}
