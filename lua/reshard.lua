-- reshard: one step of changing the number of shards a queue is split
-- over, on one shard. prioq first freezes every current shard (its
-- `exchange` calls, and so its enqueues, claims and acks, are refused and
-- wait, see `check_shards`) and counts their jobs; when none holds a job it
-- writes the new number to every shard of the new count, the home last,
-- else it unfreezes them.
-- KEYS: meta, jobs
-- ARGV[1] 'freeze' or 'set', ARGV[2] for 'freeze' the current number of
--   shards k (the shard holds k, or -k from a change cut short); for 'set'
--   the number to write
-- Returns: for 'freeze', the jobs the shard holds in any state; for 'set', 1.
-- Errors: CONFLICT when a 'freeze' finds another number than k (a change
--   raced this one).
redis.register_function('reshard_' .. VERSION, function(keys, argv)
  local q = queue_of('reshard', keys, argv)
  local meta, jobs = q.meta, q.jobs
  if argv[1] == 'freeze' then
    local current, k = math.abs(tonumber(redis.call('HGET', meta, 'shards') or '1')), tonumber(argv[2])
    if current ~= k then fail('CONFLICT') end
    redis.call('HSET', meta, 'shards', -k)
    return redis.call('HLEN', jobs)
  end
  if argv[2] == '1' then
    redis.call('HDEL', meta, 'shards')
  else
    redis.call('HSET', meta, 'shards', argv[2])
  end
  return 1
end)
